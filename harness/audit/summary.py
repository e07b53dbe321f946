"""What summary.md still prints without figure records, read line by line: the samples one call
trained and its share of the epoch, each run's harness overhead, the DISPUTED FLOP counts and
the memory fits (their sentences come from harness.analysis, below the report); and, over every
line, a number in exponent notation. Every other figure is checked from its record
(harness.audit.figures), never from the words around it."""

from __future__ import annotations

import re
from collections.abc import Callable

from harness.analysis.memoryfit import BULLET_PREFIX as MEMORY_FIT_PREFIX
from harness.audit import checkcounts
from harness.audit.ledger import SUMMARY_FILE, Ledger
from harness.audit.measured import load_spec
from harness.audit.memoryfit import MEMORY_FIT, check_memory_fit
from harness.audit.pool import Pool
from harness.audit.printed import _number, fixed, printed_fixed
from harness.report.views.warnings import DISPUTED_PREFIX, WARNINGS_HEADING

OVERHEAD = re.compile(r"harness overhead: (?P<over>[\d.]+) s of (?P<wall>[\d.]+) s \("
                      r"(?P<timed>[\d.]+) s inside the timed calls, (?P<workers>\d+) worker")
CALL_SHARE = re.compile(r"([\d,]+)-sample call \(([\d/.]+) epoch\)")
EXPONENT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?e[+-]?\d+\b")
UNIT_AFTER = re.compile(r"\s?(?:ns|us|ms|s|B|KiB|MiB|GiB|TiB|kJ|J|mJ|uJ|W|x|%|GFLOP/s|GB/s)\b")
CODE_SPAN = re.compile(r"`[^`]*`")


class SummaryCheck:
    """summary.md line by line: the figures the lines above carry, recomputed."""

    def __init__(self, ledger: Ledger, pool: Pool, lines: list[str]) -> None:
        self.ledger, self.pool, self.lines = ledger, pool, lines
        self.number = 0
        self.experiment = ""  # the section ('## name') the line is in
        self.run_id = ""  # the run whose bullet in "Drawn from ..." the lines below belong to
        self.warned: list[str] = []  # experiments whose warnings section was read
        self.disputed_named: set[tuple[str, ...]] = set()  # cases a DISPUTED line named

    @property
    def where(self) -> str:
        return f"{SUMMARY_FILE} line {self.number}"

    def run(self) -> None:
        handlers: list[tuple[str, Callable[[str], None]]] = [
            ("## ", self.section), (WARNINGS_HEADING, self.warnings), ("- `", self.run_line),
            (DISPUTED_PREFIX, self.disputed), (MEMORY_FIT_PREFIX, self.memory_fit)]
        for number, line in enumerate(self.lines, start=1):
            self.number = number
            self.exponents(line)
            if "harness overhead:" in line:
                self.parsed(self.overhead, line)
            if "-sample call (" in line:
                self.parsed(self.call_share, line)
            handler = next((handler for prefix, handler in handlers
                            if line.startswith(prefix)), None)
            if handler is not None:
                self.parsed(handler, line)
        checkcounts.check_omissions(self.ledger, self.pool, SUMMARY_FILE, self.disputed_named,
                                    self.warned)

    def parsed(self, handler: Callable[[str], None], line: str) -> None:
        """Run one line's parser; a line in a shape it does not expect is unverifiable (a
        report whose wording changed must say so, not stop the audit or pass silently)."""
        try:
            handler(line)
        except (ValueError, KeyError, IndexError, ZeroDivisionError) as exc:
            self.ledger.cannot("", "line", self.where,
                               f"not in the shape its parser reads ({type(exc).__name__}: "
                               f"{exc})")

    def section(self, line: str) -> None:
        self.experiment = line[3:].strip()

    def warnings(self, line: str) -> None:
        self.warned.append(self.experiment)

    def run_line(self, line: str) -> None:
        self.run_id = line[3:].partition("`")[0]

    def exponents(self, line: str) -> None:
        for text in exponent_figures(line):
            self.ledger.verdict("", "number in exponent notation", self.where, False, text,
                                "a plain number (harness.core.units.three_digits)")

    def disputed(self, line: str) -> None:
        """'- DISPUTED FLOP count: M, fw dev variant at n=8: parts; ...': the stored record's
        disputed parts, each with both figures (harness.audit.checkcounts)."""
        named = checkcounts.check_line(self.ledger, self.pool, self.where, self.experiment,
                                       line)
        if named is not None:
            self.disputed_named.add(named)

    def memory_fit(self, line: str) -> None:
        """A memory fit's bullet: its line refitted with numpy from the run's peaks."""
        match = MEMORY_FIT.match(line)
        if match is None:
            return  # 'no memory fit: why' says no figure
        document = next((d for d in self.pool.documents if d.run_id == match["run"]), None)
        cells = [] if document is None else [
            cell for cell in document.cells if (cell.framework, cell.device) ==
            (match["fw"], match["dev"]) and match["variant"] in (None, cell.variant)]
        subject = f"{match['fw']} {match['dev']} {match['variant'] or ''}".strip()
        if document is None or len(cells) != 1:
            self.ledger.cannot(subject, "memory fit", self.where,
                               f"{len(cells)} cells of run {match['run']} match")
            return
        check_memory_fit(self.ledger, self.where, subject, document, cells[0], match)

    def call_share(self, line: str) -> None:
        """'one 1,000-sample call (1/3 epoch)': what one timed call trained, and its share of
        the planned epoch, from the cases' own parameters and the plan."""
        match = CALL_SHARE.search(line)
        cases = [m for m in self.pool.select(self.experiment) if m.case.measured]
        if match is None or not cases:
            return
        document = cases[0].document
        spec, _ = load_spec(document.workload)
        name = str(document.hints.get("epoch_samples_param")
                   or (spec.report_hints() if spec is not None else {}).get("epoch_samples_param")
                   or "")
        per_call = [float(m.case.case[name]) for m in cases
                    if isinstance(m.case.case.get(name), (int, float))]
        planned = document.params.get(name)
        if not per_call or not isinstance(planned, (int, float)):
            self.ledger.cannot("", "samples per call", self.where,
                               f"no {name or 'epoch samples'} parameter stored")
            return
        samples = max(per_call)
        self.ledger.verdict("", "samples per call", self.where,
                            _number(match[1]) == samples, match[1], f"{samples:,.0f}")
        parts = planned / samples
        share = (f"1/{parts:.0f}" if abs(parts - round(parts)) < 1e-9
                 else f"{samples / planned:.2g}")
        self.ledger.verdict("", "share of the planned epoch", self.where, match[2] == share,
                            match[2], share)

    def overhead(self, line: str) -> None:
        """'harness overhead: A s of B s (C s inside the timed calls, N worker processes)'."""
        match = OVERHEAD.search(line)
        document = next((d for d in self.pool.documents if d.run_id == self.run_id), None)
        if match is None:
            return
        if document is None:
            self.ledger.cannot(self.run_id, "harness overhead", self.where,
                               "the run is not among those checked")
            return
        costs = [cell.cost for cell in document.cells if cell.cost is not None]
        timed = sum(cost.timed_s for cost in costs)
        elapsed = ((document.finished - document.started)
                   if document.finished is not None and document.started is not None else 0.0)
        wall = max(elapsed, sum(cost.wall_s for cost in costs))
        workers = sum(cost.workers for cost in costs)
        one = fixed(1)
        for figure, text, value in (("run wall time", match["wall"], wall),
                                    ("inside the timed calls", match["timed"], timed),
                                    ("", match["over"], wall - timed)):
            self.ledger.printed("", f"harness overhead{': ' if figure else ''}{figure}",
                                self.where, printed_fixed(text, 1), value, one)
        self.ledger.verdict("", "harness overhead: worker processes", self.where,
                            int(match["workers"]) == workers, match["workers"], str(workers))


def exponent_figures(line: str) -> list[str]:
    """Numbers in exponent notation that a reader takes for a figure: followed by a unit, or
    alone in a table cell (code spans, such as a command line, are the user's text; a check's
    '4.2e-07' error bound in prose is a number of another kind)."""
    text = CODE_SPAN.sub("", line)
    found = []
    for match in EXPONENT.finditer(text):
        unit = UNIT_AFTER.match(text, match.end())
        if unit is not None or _alone_in_cell(text, match):
            found.append(match.group(0) + (unit.group(0) if unit is not None else ""))
    return found


def _alone_in_cell(text: str, match: re.Match[str]) -> bool:
    if not text.startswith("|"):
        return False
    before, after = text[:match.start()].rstrip(), text[match.end():].lstrip()
    return before.endswith("|") and after.startswith("|")

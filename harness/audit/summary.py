"""summary.md line by line: the line prefixes and headings that send a line to its family."""

from __future__ import annotations

from collections.abc import Callable

from harness.analysis.memoryfit import BULLET_PREFIX as MEMORY_FIT_PREFIX
from harness.audit import checkcounts
from harness.audit.ledger import (
    SUMMARY_FILE,
)
from harness.audit.lines import Lines
from harness.audit.memoryfit import MEMORY_FIT, check_memory_fit
from harness.audit.summarybase import Place, exponent_figures


class SummaryCheck(Lines):
    """summary.md line by line: every figure it prints that a parser knows, recomputed."""

    def run(self) -> None:
        handlers: list[tuple[str, Callable[[str], None]]] = [
            ("## ", self.section), ("### ", self.subsection),
            ("- `", self.run_line),
            (checkcounts.LINE_PREFIX, self.disputed),
            (MEMORY_FIT_PREFIX, self.memory_fit)]
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

    def disputed(self, line: str) -> None:
        """'- DISPUTED FLOP count: M, fw dev variant at n=8: parts; ...': the stored record's
        disputed parts, each with both figures (harness.audit.checkcounts)."""
        named = checkcounts.check_line(self.ledger, self.pool, self.where,
                                       self.place.experiment, line)
        if named is not None:
            self.disputed_named.add(named)


    def section(self, line: str) -> None:
        heading = line[3:].strip()
        self.place = Place(heading, "")

    def subsection(self, line: str) -> None:
        heading = line[4:].strip()
        experiment = self.place.experiment
        if heading == "Warnings":
            self.warned.append(experiment)
            self.place = Place(experiment, "")
        else:
            self.place = Place(experiment, "")

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

    def run_line(self, line: str) -> None:
        self.run_id = line[3:].partition("`")[0]


    def exponents(self, line: str) -> None:
        for text in exponent_figures(line):
            self.ledger.verdict("", "number in exponent notation", self.where, False, text,
                                "a plain number (harness.core.units.three_digits)")



"""summary.md's bullets: the flat GPU, noise, breakdowns, samples per call and the harness
overhead, each recomputed."""

from __future__ import annotations

import re

from harness.audit.measured import NOISY_FRACTION, Measured, expected_work, load_spec, median
from harness.audit.printed import (
    _number,
    fixed,
    percent,
    printed_fixed,
    printed_general,
)
from harness.audit.summarybase import SummaryBase

SECONDS_TEXT = r"[\d.,]+ (?:ns|us|ms|s)"
RATIO_TEXT = r"[\d.,]+x"

WHY = re.compile(rf"^- Why the GPU loses at small sizes \((?P<fw>\S+), (?P<variant>\S+), "
                 rf"(?P<machine>.+)\): from (?P<sweep>[^=]+)=(?P<low>.+?) to (?P<high>.+?) the "
                 rf"work grows (?P<work>[\d,]+)x but the GPU time per \w+ only "
                 rf"(?P<time>[\d.e+-]+)x, ~flat at (?P<level>{SECONDS_TEXT})")
NOISY = re.compile(r"^- noisy \(IQR/median > 10%\): (?P<rest>.+) at (?P<sweep>[^=]+)="
                   r"(?P<sizes>.+) \(worst (?P<worst>\d+)%\)")
OVERHEAD = re.compile(r"harness overhead: (?P<over>[\d.]+) s of (?P<wall>[\d.]+) s \("
                      r"(?P<timed>[\d.]+) s inside the timed calls, (?P<workers>\d+) worker")

class Lines(SummaryBase):
    """summary.md's bullets, line by line."""

    def why(self, line: str) -> None:
        match = WHY.match(line)
        if match is None:
            return
        gpu = [m for m in self.pool.select(self.place.experiment, match["machine"],
                                           match["variant"], match["fw"], valid=True)
               if m.kind == "gpu" and m.size_number is not None]
        ends = [next((m for m in gpu if m.size_text == match[name]), None)
                for name in ("low", "high")]
        subject = f"{match['fw']} GPU {match['variant']}"
        if ends[0] is None or ends[1] is None:
            self.ledger.cannot(subject, "flat GPU time", self.where, "sizes not in run.json")
            return
        low, high = ends[0].size_number or 0.0, ends[1].size_number or 0.0
        span = sorted((m for m in gpu if low <= (m.size_number or 0.0) <= high),
                      key=lambda m: m.size_number or 0.0)
        medians = [m.median_step for m in span if m.median_step is not None]
        work = [self.work_of(m) for m in (span[0], span[-1])]
        if work[0] and work[1]:
            self.ledger.printed(subject, "work growth", self.where,
                                printed_fixed(match["work"], 0), work[1] / work[0], fixed(0))
        if medians:
            self.ledger.printed(subject, "GPU time growth", self.where,
                                printed_general(match["time"], 2), max(medians) / min(medians),
                                lambda value: f"{value:.2g}")
            self.seconds(subject, "flat level", match["level"], median(medians))

    def work_of(self, measured: Measured) -> float | None:
        spec, _ = load_spec(measured.document.workload)
        work = expected_work(spec, measured.case)
        for amount in (work["flops"], work["bytes"]):
            if amount:
                return amount
        return measured.size_value

    def noisy(self, line: str) -> None:
        match = NOISY.match(line)
        found = None if match is None else self.pool.machine_prefix(match["rest"])
        if match is None or found is None:
            return
        machine, rest = found
        parts = rest.removeprefix(", ").split(" ")
        if len(parts) != 3:
            return
        cases = [m for m in self.pool.select(self.place.experiment, machine, parts[2], parts[0],
                                             parts[1], valid=True)]
        noisy = [m for m in cases if len(m.case.samples) >= 2 and (m.noise or 0) > NOISY_FRACTION]
        subject = " ".join(parts)
        listed = match["sizes"].split(", ")
        expected = [m.size_text for m in noisy if m.size_text] or ["-"]
        self.ledger.verdict(subject, "noisy sizes", self.where,
                            sorted(listed) == sorted(expected), ", ".join(listed),
                            ", ".join(expected) or "none")
        worst = max((m.noise or 0.0 for m in noisy), default=None)
        self.ledger.printed(subject, "worst IQR/median", self.where,
                            printed_fixed(match["worst"] + "%", 0, 0.01), worst, percent)

    def call_share(self, line: str) -> None:
        """'one 1,000-sample call (1/3 epoch)': what one timed call trained, and its share of
        the planned epoch, from the cases' own parameters and the plan."""
        match = re.search(r"([\d,]+)-sample call \(([\d/.]+) epoch\)", line)
        cases = [m for m in self.pool.select(self.place.experiment) if m.case.measured]
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
        walls = sum(cost.wall_s for cost in costs)
        elapsed = ((document.finished - document.started)
                   if document.finished is not None and document.started is not None else 0.0)
        wall = max(elapsed, walls)
        workers = sum(cost.workers for cost in costs)
        one = fixed(1)
        self.ledger.printed("", "harness overhead: run wall time", self.where,
                            printed_fixed(match["wall"], 1), wall, one)
        self.ledger.printed("", "harness overhead: inside the timed calls", self.where,
                            printed_fixed(match["timed"], 1), timed, one)
        self.ledger.printed("", "harness overhead", self.where, printed_fixed(match["over"], 1),
                            wall - timed, one)
        self.ledger.verdict("", "harness overhead: worker processes", self.where,
                            int(match["workers"]) == workers, match["workers"], str(workers))

    # -- e: exponent notation --

"""summary.md's bullets: the flat GPU, noise, breakdowns, samples per call and the harness
overhead, each recomputed."""

from __future__ import annotations

import re

from harness.audit.measured import load_spec
from harness.audit.printed import (
    _number,
    fixed,
    printed_fixed,
)
from harness.audit.summarybase import SummaryBase

SECONDS_TEXT = r"[\d.,]+ (?:ns|us|ms|s)"
RATIO_TEXT = r"[\d.,]+x"

OVERHEAD = re.compile(r"harness overhead: (?P<over>[\d.]+) s of (?P<wall>[\d.]+) s \("
                      r"(?P<timed>[\d.]+) s inside the timed calls, (?P<workers>\d+) worker")

class Lines(SummaryBase):
    """summary.md's bullets, line by line."""

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

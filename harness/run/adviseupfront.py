"""`harness advise` before its first worker: whether the budget holds one as-written measurement.

Issue 64: seed 000's Jacobian as a model file at batch 100 takes ~28 s per step on a busy
2-core CPU. Advise started its as-written worker anyway, the budget stopped it before it
finished a case, and the run printed "measured 0 of 0 candidate fixes" and "keep it as
written" after 292 s of its 180. A user model's preparation runs the step on the CPU at every
batch before any worker (harness.workloads.usermodel.prepare keeps the seconds per call in
REFERENCE_CALLS_FILE as it goes), so the cost of an as-written measurement is known then: a
worker's floor and MEASUREMENT_CALLS calls at each batch. A CPU as-written cell whose
measurement at your batch cannot end within the budget is not started; where none is left,
advise says so in one line with the budgets that would measure it and its first candidate fix,
and measures nothing (the answer then says so, and the exit code is "no answer").

The figures are estimates, rounded up to 10 s (advisebudget.round_up): the reference calls
ran in another process, cold, with their set-up.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.units import format_seconds
from harness.run.advisebudget import COMPILE_ALLOWANCE_S, round_up
from harness.spec import Cell

# The calls one case's measurement takes where a call is slower than the warm-up allows
# (harness.measure.timing.autorange): the cold call, then three samples (MIN_ROUND_SAMPLES),
# the one warm-up call kept as the first of them. A step that is not steady cold takes one more.
MEASUREMENT_CALLS = 4
# A worker's part that does not grow with its step, before any worker measured it: Python's
# start, the framework's imports, the inputs, the check, the exit. torch's worker on the
# 2-core VM took 8-12 s of it idle; kept above that for a busy machine.
WORKER_FLOOR_S = 15.0


@dataclass(frozen=True)
class ReferenceCalls:
    """What the preparation kept of the step's cost (REFERENCE_CALLS_FILE): the framework and
    device it ran on, the seconds per call of each batch it finished, and the batch it was
    calling when last written, since when (time.time())."""

    framework: str
    device: str
    seconds_per_call: dict[int, float]
    calling: int | None = None
    since: float | None = None

    def running_s(self, now: float | None = None) -> float:
        """How long the call under way had run by NOW (0 where none was under way)."""
        if self.since is None:
            return 0.0
        return max(0.0, (time.time() if now is None else now) - self.since)


def read_reference_calls(folder: Path) -> ReferenceCalls | None:
    """The preparation's reference calls in a prepared FOLDER (None where it kept none)."""
    from harness.workloads.usermodel.spec import REFERENCE_CALLS_FILE

    try:
        found: Any = json.loads((folder / REFERENCE_CALLS_FILE).read_text())
        per_call = {int(batch): float(seconds)
                    for batch, seconds in found.get("seconds_per_call", {}).items()}
        calling = found.get("calling") or {}
        return ReferenceCalls(str(found.get("framework", "")), str(found.get("device", "cpu")),
                              per_call, calling.get("batch"), calling.get("since"))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def measurement_s(steps: Sequence[float], allowance_s: float = 0.0) -> float:
    """One worker measuring the batches whose steps take STEPS seconds: its floor, the calls
    of each, and ALLOWANCE_S (a torch.compile fix's compile allowance)."""
    return WORKER_FLOOR_S + allowance_s + MEASUREMENT_CALLS * sum(steps)


@dataclass(frozen=True)
class Unaffordable:
    """An as-written cell the budget cannot measure: why, in words, and the budgets (rounded
    up) that would measure it, and it with its first candidate fix (None: no candidate)."""

    cell: Cell
    why: str
    as_written_s: float
    worker_s: float = 0.0  # one worker measuring every batch: a fix's, before its allowance
    first_fix: str = ""
    first_fix_s: float | None = None
    lower_bound: bool = False  # the step was not timed at the user's batch: figures at least

    def line(self, budget_s: float) -> str:
        """The one line said before any worker starts."""
        least = "at least " if self.lower_bound else ""
        fix = (f", --budget {least}{self.first_fix_s:.0f} it and its first candidate fix "
               f"({self.first_fix})" if self.first_fix and self.first_fix_s else "")
        return (f"advise: the budget of {budget_s:.0f} s cannot hold one as-written step "
                f"measurement of {self.cell.framework} on {self.cell.device}: {self.why}; "
                f"--budget {least}{self.as_written_s:.0f} would measure it{fix}")


def unaffordable(cell: Cell, reference: ReferenceCalls | None, sizes: Sequence[Any],
                 size: Any, spent_s: float, after_run_s: float, budget_s: float,
                 first_fix: str = "", compiles: bool = False) -> Unaffordable | None:
    """Whether the as-written CELL cannot be measured at the user's batch SIZE within BUDGET_S,
    SPENT_S of it spent and AFTER_RUN_S kept for after the last worker, by the preparation's
    REFERENCE calls (the run's SIZES, the user's first); None where it can, or where nothing is
    known of its step (another device or framework than the preparation's)."""
    if reference is None or (cell.framework, cell.device) != (reference.framework,
                                                              reference.device):
        return None
    known = reference.seconds_per_call
    step = known.get(int(size)) if isinstance(size, (int, float)) else None
    timed = step is not None
    if step is None:  # the preparation stopped before it timed the user's batch
        if reference.calling is not None:
            # ...inside a call: that batch's step takes longer than the call had run (a lower
            # bound for a batch at least as large, said as one).
            step = reference.running_s()
            said = (f"the preparation's reference call at batch {reference.calling} had not "
                    f"ended after {format_seconds(step)}")
        elif known:
            largest = max(known, key=lambda batch: known[batch])
            step = known[largest]
            said = (f"one step at batch {largest} took {format_seconds(step)} while preparing "
                    f"(batch {size} was not reached)")
        else:
            return None  # nothing timed: a preparation that failed before its first call
    else:
        said = f"one step at batch {size} took {format_seconds(step)} while preparing"
    needed_here = measurement_s([step])
    if spent_s + needed_here + after_run_s <= budget_s:
        return None
    steps = [known.get(int(other), step) for other in sizes if isinstance(other, (int, float))]
    whole = measurement_s(steps or [step])
    as_written = round_up(spent_s + whole + after_run_s)
    allowance = COMPILE_ALLOWANCE_S["cpu"][0] if compiles else 0.0
    fix_s = round_up(as_written + measurement_s(steps or [step], allowance)) if first_fix \
        else None
    why = (f"{said}, and a measurement takes {MEASUREMENT_CALLS} calls and a worker's start "
           f"(~{needed_here:.0f} s) after the {spent_s:.0f} s spent")
    return Unaffordable(cell, why, as_written, whole, first_fix, fix_s,
                        lower_bound=not timed)

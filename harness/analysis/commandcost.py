"""The whole command's own cost (issue 63): the time a user waited, from the process's start to
the answer's last figure, less the part inside the timed calls, split into parts that add up.

Why one figure for the whole command: the run's overhead line (harness.analysis.stats) covers
the run alone, while a first `compare --model` spent 4-13 s more before and after it (the
model's inspection, the report, the check). Each part is read from its own clock (the run's
start and end in run.json, the report's and the check's timers, the answer's printing), so the
addition is a real test that no time went unsaid; run.json keeps the record (`command_cost`)
and `harness check` (harness.audit.commandcost) adds it up again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.data.results import RunDocument
from harness.data.serial import JsonObject

# The parts, in the order they happen.
BEFORE = "before the run"  # Python's start, imports, planning, a --model's inspection
RUN = "the run"  # run.json's start to its end
CLOSING = "closing the run"  # the warm processes' exit, the run's predictions
REPORT = "the report"
CHECK = "harness check"
ANSWER = "the answer"
AFTER = "after the run"  # where the command kept no clock of its own after the run

# The parts must add up to the whole within this: their clocks leave only the moments
# between one timer's stop and the next one's start unsaid.
ADDS_UP_S = 1.0


@dataclass
class CommandClock:
    """The clocks a command keeps after its run (epoch seconds; None: not kept): when the
    run handed back, how long the report and the check took, when the answer began."""

    process_started: float
    run_returned: float | None = None
    report_s: float | None = None
    check_s: float | None = None
    answer_started: float | None = None


@dataclass(frozen=True)
class CommandCost:
    """The whole command: its start and end (epoch seconds), the seconds inside the timed
    calls, and its parts by name (seconds, in order)."""

    process_started: float
    ended: float
    timed_s: float
    parts: Mapping[str, float] = field(default_factory=dict)

    @property
    def whole_s(self) -> float:
        return self.ended - self.process_started

    @property
    def own_s(self) -> float:
        return self.whole_s - self.timed_s

    def to_json(self) -> JsonObject:
        return {"process_started": self.process_started, "ended": self.ended,
                "whole_s": round(self.whole_s, 3), "timed_s": round(self.timed_s, 3),
                "own_s": round(self.own_s, 3),
                "parts": {name: round(seconds, 3) for name, seconds in self.parts.items()}}


def command_cost(document: RunDocument, clock: CommandClock, now_s: float) -> CommandCost | None:
    """The command's cost at NOW_S from the run's own start and end and CLOCK; None without
    the run's times (a run killed before its end) or a clock that runs backwards."""
    from harness.analysis.stats import harness_cost  # the CLI's start need not import it

    started, finished = document.started, document.finished
    begun = clock.process_started
    if started is None or finished is None or now_s <= begun or finished < started:
        return None
    parts = {BEFORE: max(0.0, started - begun),  # a --resume's run began before this process
             RUN: max(0.0, finished - max(started, begun))}
    kept = (clock.run_returned, clock.check_s, clock.answer_started)
    if all(value is not None for value in kept):
        assert clock.run_returned is not None and clock.answer_started is not None
        parts[CLOSING] = max(0.0, clock.run_returned - finished)
        parts[REPORT] = clock.report_s or 0.0
        parts[CHECK] = clock.check_s or 0.0
        parts[ANSWER] = max(0.0, now_s - clock.answer_started)
    else:
        parts[AFTER] = max(0.0, now_s - finished)
    timed = min(harness_cost(document.cells).timed_s, parts[RUN])
    return CommandCost(begun, now_s, timed, parts)


def own_cost_line(cost: CommandCost) -> str:
    """'own cost of the whole command: 13.8 s of 19.3 s (1.2 s inside the timed calls):
    before the run 1.4 s, the run 15.0 s less its timed calls 13.8 s, after it ...': the
    time the user waited, each part from its own clock."""
    parts = dict(cost.parts)
    run_s = parts.pop(RUN, 0.0)
    before_s = parts.pop(BEFORE, 0.0)
    after = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in parts.items())
    whole = cost.whole_s
    share = f" ({cost.own_s / whole:.0%})" if whole > 0 else ""
    return (f"own cost of the whole command: {cost.own_s:.1f} s of {whole:.1f} s{share}, "
            f"{cost.timed_s:.1f} s inside the timed calls; from its start: {BEFORE} "
            f"{before_s:.1f} s (Python's start, imports, planning; a --model's inspection), "
            f"{RUN} {run_s:.1f} s ({run_s - cost.timed_s:.1f} s outside the timed calls), "
            f"then {after}")

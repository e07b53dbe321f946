"""`harness advise`'s budget: what a worker costs, and which candidate fixes fit the time left.

A cell's worker cost is measured (HarnessCost: its wall, its timed calls, its phases); a fix
that has not run yet is priced from its as-written cell's worker and its catalogue entry's cost
class. `fit_budget` then picks the candidates (in the order the diagnosis ranks them) and the
rounds that the time left holds; the chooser (harness.run.chooser) spends the budget cell by
cell on that plan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.analysis import fixchoice
from harness.core.units import device_kind
from harness.data.results import CellResult
from harness.run.casepasses import DEVICE_PROFILE_PHASE, FLOP_COUNT_PHASE, MEMORY_PASS_PHASE
from harness.run.sensitivity import PHASE as SENSITIVITY_PHASE
from harness.spec import Cell

DeviceKey = tuple[str, str]  # (framework, device)
# Fixes measured per framework x device before fewer rounds are accepted for more fixes:
# a ranking of fewer than four fixes hardly says what to change (issue 41's done-when).
MIN_FIXES = 4
# What a fix of the compile cost classes (harness.core.fixes COST_COMPILE, COST_AUTOTUNE) adds
# to a worker beyond the as-written cell's cost where its framework compiles with torch.compile,
# before it has run once (its own measured worker replaces this): Inductor's first
# compilations per process, both batches, measured on the H100 host (docs/findings.md): CPU
# 30-33 s + 4 s (34 s with a warm cache; 58-77 s fresh without --quick's ISA shortcut, so the
# first round takes more), GPU 6.2-6.9 s + 4.9-6.2 s. (first round, later rounds) per device kind.
COMPILE_ALLOWANCE_S = {"cpu": (70.0, 35.0), "gpu": (13.0, 11.0)}
TORCH_COMPILED = frozenset({"torch", "keras-torch"})  # whose compile fixes are torch.compile
# The phases of a worker that call the step again (harness.run.casepasses): with the timed calls,
# the part of a worker that grows with the step; the rest (start, imports, device open,
# inputs, the check, exit) is its floor, what any fix's worker costs whatever its step.
STEP_PHASES = ("warm-up and calibration", FLOP_COUNT_PHASE, MEMORY_PASS_PHASE,
               DEVICE_PROFILE_PHASE, SENSITIVITY_PHASE)
# The phases only a cell's first round pays: the device profile, and a reduced precision's
# sensitivity runs (later rounds read the record the first kept in the prepared folder).
FIRST_ROUND_PHASES = (DEVICE_PROFILE_PHASE, SENSITIVITY_PHASE)

@dataclass(frozen=True)
class Costs:
    """Estimated seconds of one cell's worker: in its first round (with the device-busy pass)
    and in each later one; and its floor, the part that does not grow with the step (None:
    not measured)."""

    first_s: float
    later_s: float
    floor_s: float | None = None

    def total(self, rounds: int) -> float:
        return self.first_s + max(0, rounds - 1) * self.later_s


@dataclass(frozen=True)
class Candidate:
    """A candidate fix of one framework x device: its cell, how the diagnosis stands to it,
    its place in that device's ranking, and its estimated cost."""

    cell: Cell
    fit: str  # fixchoice.AIMED, UNSAID, ARGUED_AGAINST
    rank: int  # 0 = the first to measure on its device
    costs: Costs
    diagnosis: str

    @property
    def device_key(self) -> DeviceKey:
        return (self.cell.framework, self.cell.device)


@dataclass(frozen=True)
class BudgetPlan:
    """Which candidates run, in how many rounds; the others with the budget that would run
    each of them. Trials: too dear at their estimate, tried in the time the chosen leave (their
    floors fit it), after every chosen one, each with the budget that would run it too."""

    rounds: int
    chosen: list[Candidate]
    left_out: list[tuple[Candidate, float | None]] = field(default_factory=list)
    trials: list[tuple[Candidate, float | None]] = field(default_factory=list)

    @property
    def to_run(self) -> list[Candidate]:
        """The chosen, then the trials: the order their first round runs in."""
        return self.chosen + [item for item, _ in self.trials]

    def meets_target(self, candidates: Sequence[Candidate]) -> bool:
        """Every device has its MIN_FIXES first fixes' worth (all, where it has fewer)."""
        counts: dict[DeviceKey, int] = {}
        for item in candidates:
            counts[item.device_key] = counts.get(item.device_key, 0) + 1
        chosen: dict[DeviceKey, int] = {}
        for item in self.chosen:
            chosen[item.device_key] = chosen.get(item.device_key, 0) + 1
        return all(chosen.get(key, 0) >= min(MIN_FIXES, count) for key, count in counts.items())


def round_up(seconds: float, step: float = 10.0) -> float:
    """A budget figure to offer: up to the next STEP seconds (an estimate is no finer)."""
    return step * math.ceil(seconds / step)


def fit_budget(baselines: Sequence[Costs], candidates: Sequence[Candidate],
               time_left: float | None, rounds: int, budget_s: float | None) -> BudgetPlan:
    """The candidates (given in the order to measure them) that fit TIME_LEFT after the
    as-written cells' first round, and the rounds: the most rounds (at most ROUNDS) at which
    every device gets its MIN_FIXES first fixes, else the rounds that fit the most fixes
    (ties: more rounds). A fix too dear is passed over for cheaper ones after it. The trials
    (those passed over whose floors fit what is left) only add to the chosen: they decide the
    rounds only where no count of rounds holds any fix at its estimate (then: the most trials).
    No TIME_LEFT (no budget): every candidate, every round."""
    if time_left is None:
        return BudgetPlan(rounds, list(candidates))
    best: BudgetPlan | None = None
    for count in range(rounds, 0, -1):
        found = _fill(baselines, candidates, time_left, count, budget_s)
        if found.meets_target(candidates):
            return found
        if best is None or _holds_more(found, best):
            best = found
    assert best is not None
    return best


def _holds_more(found: BudgetPlan, best: BudgetPlan) -> bool:
    """Whether FOUND measures more fixes at their estimate than BEST, or, where neither holds
    any (a step of seconds: seed 000's Jacobian), more trials: the as-written cells' later
    rounds alone would judge no fix."""
    if found.chosen or best.chosen:
        return len(found.chosen) > len(best.chosen)
    return len(found.trials) > len(best.trials)


def _fill(baselines: Sequence[Costs], candidates: Sequence[Candidate], time_left: float,
          rounds: int, budget_s: float | None) -> BudgetPlan:
    """fit_budget at ROUNDS rounds: the as-written cells' later rounds first, then each
    candidate in turn where it still fits; then, of those passed over, the trials: each in
    rank order whose floor fits what is left (less the floors of the trials before it)."""
    spare = time_left - sum(item.later_s for item in baselines) * (rounds - 1)
    chosen, passed = [], []
    for item in candidates:
        cost = item.costs.total(rounds)
        if cost <= spare:
            chosen.append(item)
            spare -= cost
        else:
            passed.append(item)
    trials, left_out = [], []
    room = spare
    for item in passed:
        # What the fix alone would need on top of the budget at its estimate (spare < 0: the
        # as-written cells' rounds overran it already).
        needed = round_up(budget_s + item.costs.total(rounds) - spare) if budget_s else None
        floor = item.costs.floor_s
        if floor is not None and floor <= room:
            trials.append((item, needed))
            room -= floor
        else:
            left_out.append((item, needed))
    return BudgetPlan(rounds, chosen, left_out, trials)


def worker_costs(result: CellResult | None) -> Costs | None:
    """A cell's measured cost per worker over the rounds it ran: a later round's (the mean
    worker without the device-busy pass, which only its first round runs), the first's
    (that plus the pass) and the floor (the mean worker less its timed calls and the phases
    that call the step again, STEP_PHASES). None before it has a worker."""
    cost = result.cost if result is not None else None
    if cost is None or cost.workers < 1:
        return None
    profile = sum(cost.phases.get(name, 0.0) for name in FIRST_ROUND_PHASES)
    later = max(0.0, cost.wall_s - profile) / cost.workers
    repeated = sum(cost.phases.get(name, 0.0) for name in STEP_PHASES)
    floor = max(0.0, cost.wall_s - cost.timed_s - repeated) / cost.workers
    return Costs(later + profile, later, floor)


def candidate_costs(baseline: Costs, framework: str, device: str, variant: str) -> Costs:
    """A fix's estimated worker before it has run: the as-written worker's, plus the compile
    allowance where a part's cost class compiles and the framework compiles with torch.compile
    (the fix's own step time is unknown: as-written's stands in for it, too dear for a fix
    that helps and too cheap for one that hurts). Its floor: the as-written worker's, plus the
    first round's compile allowance (compiling does not grow with the step)."""
    entries = [fixchoice.fix_of(part) for part in fixchoice.fix_parts(variant)]
    if framework not in TORCH_COMPILED or not any(entry is not None and entry.compiles
                                                  for entry in entries):
        return baseline
    first, later = COMPILE_ALLOWANCE_S[device_kind(device)]
    floor = None if baseline.floor_s is None else baseline.floor_s + first
    return Costs(baseline.first_s + first, baseline.later_s + later, floor)

"""`harness advise`: the as-written cells first, then the fixes their diagnosis points at, in a
time budget, then the best combination.

Two phases, one run folder, so every advice cell is a row of the run (tidy data, run.json,
`harness check`) like any compare's:

1. one RunSession, in rounds, driven stage by stage by `Chooser` (a RunSession.pick):
   - round 0 runs the as-written cell of every framework x device first. Their results give
     each one's diagnosis (harness.analysis.advice.diagnosis_of: launch-, transfer-,
     compute-, memory-, device-bound on a GPU, host-bound on a CPU) and what one of its
     workers costs;
   - the candidate fixes (a variant each: harness.workloads.usermodel.spec `fixes_for`, a
     built-in workload's other variants) are ranked by that diagnosis (those it points at,
     then those it does not speak of, then those it argues against: advice.rank_candidates)
     and as many as the time budget holds are planned (`fit_budget`: estimated from the
     as-written worker's measured cost; fewer rounds for a slow step); of the rest, those
     whose floor (the part of a worker that does not grow with the step) fits the time left
     are *trials*, run after the others, round 1 only unless their own measured worker fits
     more (a vectorized fix of a step of seconds costs seconds, not the as-written minute);
     the others are recorded as not tried with why and the budget that would run them;
   - the chosen fixes run their round 0 right after, in rank order, and every later round runs
     the as-written cells and the fixes together in a new seeded random order, so each fix is
     still judged against its baseline round by round (rounds paired by number), as compare's
     verdicts are. Only round 0 is not shuffled across both: the choice needs the baselines'
     results first.
   Before each worker the time left is checked against its estimate (a fix's own measured
   round once it has one; a trial's floor, with what the other cells still need left over):
   a worker that would overrun the budget is not started, and one still running where the
   budget ends (a trial: where its share ends) is stopped, the cases it finished kept.
2. per framework x device, the recommended fixes that run together (harness.analysis.advice
   `best_combination`) measured as one more cell, where the budget left holds it: the planned
   cells of the stored run grow by those cells and the same folder is reopened, as
   `--resume` does, so only they run.

Where the user's batch is one size, a second one is planned too: the best configurations'
sweeps are what the predicted crossover is refitted on. run.json keeps what the advice needs
under `advise` (harness.analysis.advice.RUN_KEY): the user's batch, the candidates, what was
not tried and why, the rounds, the budget and the combinations measured. Its run-level `seed`
is null (the round orders are the Chooser's, not the plain seeded shuffle `harness check`
would hold them to); `advise.order_seed` seeds the Chooser's shuffles. The advice itself is
computed from the stored run (harness.analysis.advice.advise_run), by the CLI and the report.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from harness.analysis import advice as advice_module
from harness.core import registry
from harness.core import settings as run_settings
from harness.core.units import device_kind, format_seconds
from harness.data import store
from harness.data.results import CellResult, RunDocument
from harness.measure import envinfo
from harness.run.casepasses import FLOP_COUNT_PHASE, MEMORY_PASS_PHASE
from harness.run.executors import Executor
from harness.run.plan import RunPlan, plan
from harness.run.planner import declared_refusal
from harness.run.progress import console as progress_console
from harness.run.sensitivity import PHASE as SENSITIVITY_PHASE
from harness.run.session import RunSession
from harness.spec import BadInput, Cell, CellKey, Status, WorkloadSpec

# The second batch planned beside a single one, so the fixed step's costs can be refitted: a
# quarter of it (a step's cost grows with the batch, for some models much faster than
# linearly: seed 000's Jacobian is quadratic), or 4x a batch under 4.
REFIT_FACTOR = 4
# Rounds when --rounds is not given: each cell's worker processes, as make demo runs compare
# (3 rounds gave no contradicted verdict there), to keep an advice run to minutes.
ADVISE_ROUNDS = 3
USER_MODEL_KIND = "usermodel"
# The whole advice run's time budget when --budget is not given (issue 41: an advice in 3
# minutes); 0 or None: no limit, every candidate in every round.
DEFAULT_BUDGET_S = 180.0
# The budget is the whole command's, as the user waits for it: what follows the last worker
# (storing the predictions, the report, `harness check`, the answer) is kept out of what the
# workers may spend. 20-26 s on the H100 host for the small CNN and seed 002's Keras file
# (command wall minus the run's: 192 - 162 s and 159 - 133 s, CLI start and inspection
# included): the reserve of a machine that has not run advise before.
AFTER_RUN_S = 25.0
# It grows with the cells (the report draws each, `harness check` recomputes each): on the
# H100 host 17.5 s after a 16-cell run (the small CNN; its report 14.8 s) and 8.3 s after a
# 6-cell one (seed 000's Jacobian; 5.6 s), 1.1-1.4 s a cell. So each advise remembers its own
# seconds per cell for this machine (AFTER_RUN_FILE in the cache folder, by the fingerprint of
# the CPU, the GPUs and the report's libraries) and the next one keeps back that figure x
# AFTER_RUN_MARGIN for each cell run so far and the next (at least AFTER_RUN_FLOOR_S), so a
# slow step's short run does not lose 15 s of fixes to a reserve sized for a long one.
AFTER_RUN_FILE = "advise-after-run.json"
AFTER_RUN_MARGIN = 1.5
AFTER_RUN_FLOOR_S = 5.0
REPORT_LIBRARIES = ("matplotlib", "pandas", "seaborn")
# The most seconds a FLOP count or memory pass may take in an advice run's workers (compare:
# 10 s): the budget is for the fixes. A small model's passes take milliseconds either way; seed
# 000's Jacobian spent 20 s of its 180 on the CPU's two passes at batch 25 (0.8 s a call).
ADVISE_PASS_LIMIT_S = 2.0
# Fixes measured per framework x device before fewer rounds are accepted for more fixes:
# a ranking of fewer than four fixes hardly says what to change (issue 41's done-when).
MIN_FIXES = 4
# What a torch.compile fix adds to a worker beyond the as-written cell's cost, before it has
# run once (its own measured worker replaces this): Inductor's first compilations per process,
# both batches, measured on the H100 host (docs/findings.md): CPU 30-33 s + 4 s (34 s with a
# warm cache; 58-77 s fresh without --quick's ISA shortcut, so the first round takes more),
# GPU 6.2-6.9 s + 4.9-6.2 s. (first round, later rounds) per device kind.
COMPILE_ALLOWANCE_S = {"cpu": (70.0, 35.0), "gpu": (13.0, 11.0)}
COMPILE_PARTS = frozenset({"compiled", "compile-reduce-overhead", "compile-max-autotune"})
TORCH_COMPILED = frozenset({"torch", "keras-torch"})  # whose compile fixes are torch.compile
DEVICE_PROFILE_PHASE = "device profile"  # HarnessCost.phases: a cell's first round only
# The phases of a worker that call the step again (harness.run.casepasses): with the timed calls,
# the part of a worker that grows with the step; the rest (start, imports, device open,
# inputs, the check, exit) is its floor, what any fix's worker costs whatever its step.
STEP_PHASES = ("warm-up and calibration", FLOP_COUNT_PHASE, MEMORY_PASS_PHASE,
               DEVICE_PROFILE_PHASE, SENSITIVITY_PHASE)
# The phases only a cell's first round pays: the device profile, and a reduced precision's
# sensitivity runs (later rounds read the record the first kept in the prepared folder).
FIRST_ROUND_PHASES = (DEVICE_PROFILE_PHASE, SENSITIVITY_PHASE)

# Fixes compare can run (--variant) that advise does not try on its own: max-autotune's
# autotuning costs a minute or more in every worker process, so in every round (the small
# CNN: 46 s on the H100 host's CPU, 73 s on the H100, against ~3 s for any other fix).
NOT_ADVISED = frozenset({"compile-max-autotune"})

Result = TypeVar("Result")
DeviceKey = tuple[str, str]  # (framework, device)
# The clock the budget is counted on (monotonic: a wall-clock step must not spend it).
clock: Callable[[], float] = time.monotonic


def candidate_variants(spec: WorkloadSpec, framework: str, device: str,
                       baseline: str) -> list[str]:
    """The fixes worth a cell for one framework x device, those the declarations refuse left
    out: a user model's from the catalogue's fixes_for, a built-in workload's other variants."""
    names: list[str]
    fixes_for = getattr(_catalogue(), "fixes_for", None)
    if spec.kind == USER_MODEL_KIND and callable(fixes_for):
        found = fixes_for(framework, device, cpu_cores=envinfo.usable_cores())
        names = [str(getattr(fix, "name", fix)) for fix in found]
    else:
        names = [variant for variant in spec.variants if variant != baseline]
    return [name for name in dict.fromkeys(names) if name != baseline
            and name not in NOT_ADVISED
            and declared_refusal(spec, framework, name, device) is None]


def _catalogue() -> Any | None:
    try:
        return registry.model_plugin("spec")
    except Exception:  # noqa: BLE001 - without it a user model has no fixes to try
        return None


def advice_sizes(sizes: Sequence[int] | None) -> list[int] | None:
    """The sizes to plan: the user's batch first; one batch gets a second, REFIT_FACTOR x."""
    if sizes is None:
        return None
    chosen = [int(size) for size in sizes]
    if len(chosen) == 1:
        first = chosen[0]
        chosen.append(first // REFIT_FACTOR if first >= REFIT_FACTOR else first * REFIT_FACTOR)
    return chosen


def plan_advice(workload: str | None = None, *, model: Path | str | None = None,
                sizes: Sequence[int] | None = None, **options: Any) -> tuple[RunPlan, Any]:
    """Phase 1's plan, the as-written cells only (every input checked before anything runs),
    and the user's batch; the candidates of each are `candidates_of(plan)`.

    `options` are harness.run.plan.plan's (frameworks, devices, rounds, quick, out, ...).
    BadInput for bad arguments, as plan raises it.
    """
    if options.get("variants") is not None:
        raise BadInput("advise chooses the variants itself (the fixes); drop --variant")
    if options.get("rounds") is None and not options.get("quick"):
        options["rounds"] = ADVISE_ROUNDS
    base = plan(workload, model=model, sizes=advice_sizes(sizes), **options)
    base = replace(base, settings=replace(base.settings, energy=False,
                                          pass_limit_s=ADVISE_PASS_LIMIT_S))
    baseline = base.spec.variants_by_default[0]
    swept = base.params.get(base.spec.sweep)
    size = swept[0] if isinstance(swept, list) and swept else swept
    return replace(base, cells=[cell for cell in base.cells if cell.variant == baseline]), size


def candidates_of(run: RunPlan) -> dict[DeviceKey, list[str]]:
    """Per framework x device of the plan, its candidate fixes in the catalogue's order."""
    baseline = run.spec.variants_by_default[0]
    return {(cell.framework, cell.device): candidate_variants(run.spec, cell.framework,
                                                              cell.device, baseline)
            for cell in run.cells}


# --- the budget: what a worker costs, and which candidates fit -------------------------------

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
    fit: str  # advice.AIMED, UNSAID, ARGUED_AGAINST
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
    allowance of a torch.compile fix (the fix's own step time is unknown: as-written's stands
    in for it, too dear for a fix that helps and too cheap for one that hurts). Its floor: the
    as-written worker's, plus the first round's compile allowance (compiling does not grow
    with the step)."""
    parts = set(advice_module.variant_parts(variant))
    if framework not in TORCH_COMPILED or not parts & COMPILE_PARTS:
        return baseline
    first, later = COMPILE_ALLOWANCE_S[device_kind(device)]
    floor = None if baseline.floor_s is None else baseline.floor_s + first
    return Costs(baseline.first_s + first, baseline.later_s + later, floor)


# --- what follows the last worker, remembered per machine ------------------------------------

def after_run_key() -> str:
    """This machine's entry in AFTER_RUN_FILE: a hash of its fingerprint (envinfo's)."""
    return envinfo.fingerprint_key(envinfo.machine_fingerprint(REPORT_LIBRARIES))


def after_run_path() -> Path:
    return run_settings.cache_folder() / AFTER_RUN_FILE


def remembered_per_cell() -> float | None:
    """The seconds per cell the last advise on this machine took after its last worker; None
    where none is remembered (or the file cannot be read)."""
    entry = store.read_json_object(after_run_path()).get(after_run_key())
    value = entry.get("per_cell_s") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def remember_after_run(seconds: float, cells: int) -> None:
    """Keep SECONDS after the last worker of a run of CELLS cells, per cell, for this machine
    (a failure to write is no failure of the run)."""
    if cells < 1 or seconds <= 0:
        return
    path = after_run_path()
    known = store.read_json_object(path)
    known[after_run_key()] = {"per_cell_s": round(seconds / cells, 3), "cells": cells,
                              "seconds": round(seconds, 1),
                              "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        store.write_json_atomic(path, known)
    except OSError:
        return


def after_run_reserve(cells: int, per_cell_s: float | None) -> float:
    """Seconds kept back for what follows the last worker of a run of CELLS cells: the
    remembered seconds per cell x AFTER_RUN_MARGIN (at least AFTER_RUN_FLOOR_S), or AFTER_RUN_S
    where this machine has none remembered."""
    if per_cell_s is None:
        return AFTER_RUN_S
    return max(AFTER_RUN_FLOOR_S, per_cell_s * max(1, cells) * AFTER_RUN_MARGIN)


# --- the chooser: the rounds of phase 1, stage by stage -------------------------------------

@dataclass
class Chooser:
    """The RoundPick of an advice run (harness.run.session.RoundPick).

    Round 0: the as-written cells (ROUND 0 of the baselines), then, once they ran, `decide`
    plans the candidates and they run in rank order, the trials last. Later rounds: the
    as-written cells and the chosen fixes in a new seeded random order, up to the rounds the
    budget holds. Every worker but the first round's baselines passes `fits` first; a trial's
    must leave what the other cells still need (`reserved`). On a local executor one worker
    is a stage (each is checked, a trial stopped where its share ends); elsewhere (SLURM) a
    stage is all that is left of the round.
    """

    session: RunSession
    candidates: dict[DeviceKey, list[str]]
    size: Any
    budget_s: float | None
    started: float  # clock() when the advice run started
    order_seed: int
    rounds: int = 1  # planned; decide may cut them
    one_at_a_time: bool = True
    record: dict[str, Any] = field(default_factory=dict)
    decided: bool = False
    queue: list[Cell] = field(default_factory=list)
    queue_round: int = -1
    planned: dict[CellKey, Candidate] = field(default_factory=dict)  # the chosen fixes
    trials: set[CellKey] = field(default_factory=set)  # those tried in the time left
    dropped: set[CellKey] = field(default_factory=set)  # no more rounds for these
    # Seconds kept back for after the last worker, given the cells run by then
    # (after_run_reserve); None: nothing kept back here (the caller's STARTED counts it).
    after_run: Callable[[int], float] | None = None

    def __call__(self, index: int, offered: list[Cell]) -> list[Cell]:
        if index != self.queue_round:
            self.queue_round = index
            self.queue = self._round_cells(index, offered)
        if index == 0 and not self.queue and not self.decided:
            self.queue = self.decide()
        if index == 0 and not self.decided:
            stage, self.queue = self.queue, []  # the baselines: always, at once
            self._stop_baselines_at_the_budget()
            return stage
        return self._next_stage(index)

    def _round_cells(self, index: int, offered: list[Cell]) -> list[Cell]:
        """Round INDEX's cells before any ran: round 0's as-written cells, a later round's
        cells still in the run, in a new order from the advice's seed."""
        if index >= self.rounds:
            return []
        shuffle = random.Random(self.order_seed * 1000 + index).shuffle
        if index == 0:
            cells = list(offered)
        else:
            # The cells that had a worker: not those the declarations refused without one.
            cells = [cell for cell in self.session.cells if cell.key not in self.dropped
                     and worker_costs(self._result(cell.key)) is not None]
        shuffle(cells)
        if cells and self.session.progress:
            first = "the as-written cells first, " if index == 0 and not self.decided else ""
            count = f"{len(cells)} cell{'s' if len(cells) != 1 else ''}"
            budget = " (each while the budget holds it)" if index and self.budget_s else ""
            say(f"advise: round {index + 1} of {self.rounds}: {first}{count}{budget}")
        return cells

    def _next_stage(self, index: int) -> list[Cell]:
        """The next worker (or, not one at a time, every one left) that fits the budget;
        those that do not are dropped from the run's later rounds too."""
        stage: list[Cell] = []
        while self.queue and (not stage or not self.one_at_a_time):
            cell = self.queue.pop(0)
            if self.fits(cell, index):
                stage.append(cell)
            else:
                self.drop(cell, index)
        if stage:
            self._stop_at_its_share(stage, index)
        return stage

    def _stop_baselines_at_the_budget(self) -> None:
        """The as-written cells run before anything is known of their cost, so their workers
        are stopped where the budget ends (a step of seconds, seed 000's Jacobian: its
        as-written GPU worker alone overran the 180 s); the cases they finished are kept. The
        fixes after them are started only where their estimate fits (fits)."""
        self._stop_in(0.0, f"the advise budget of {self.budget_s or 0:.0f} s ran out")

    def _stop_at_its_share(self, stage: list[Cell], index: int) -> None:
        """A trial's worker (run alone) is stopped where what the other cells still need of
        the budget begins: only its floor was known to fit, and the chosen fixes must not lose
        their later rounds to it. Any other stage: where the budget ends."""
        reserve = self.reserved(index) if self.one_at_a_time and \
            stage[0].key in self.trials else 0.0
        budget = f"the advise budget of {self.budget_s or 0:.0f} s"
        self._stop_in(reserve, f"its share of {budget} ran out (the rest is the other cells' "
                               "later rounds)" if reserve > 0 else f"{budget} ran out")

    def _stop_in(self, reserve: float, reason: str) -> None:
        """Workers started from now on are stopped RESERVE seconds before the budget ends."""
        if not self.budget_s:
            return
        left = self.budget_s - self.elapsed() - reserve
        self.session.options = replace(
            self.session.options, deadline=time.monotonic() + max(1.0, left),
            deadline_reason=reason)

    # --- the budget, cell by cell ---

    def elapsed(self) -> float:
        """Seconds of the budget spent: since the start, and what the end of the run will need
        after the cells run so far and the next one (after_run)."""
        spent = clock() - self.started
        if self.after_run is None or not self.budget_s:
            return spent
        ran = sum(1 for result in self.session.recorder.results)
        return spent + self.after_run(ran + 1)

    def estimate(self, cell: Cell, index: int) -> Costs:
        """A cell's worker cost: its own measured first round once it has one, else the
        plan's estimate (a fix) or its as-written cell's."""
        own = worker_costs(self._result(cell.key))
        if own is not None:
            return own
        planned = self.planned.get(cell.key)
        if planned is None:
            return Costs(0.0, 0.0)
        floor = planned.costs.floor_s
        if cell.key in self.trials and floor is not None:
            return Costs(floor, floor, floor)  # a trial starts where its floor fits
        return planned.costs

    def _result(self, key: CellKey) -> CellResult | None:
        return next((result for result in self.session.recorder.results
                     if result.cell.key == key), None)

    def fits(self, cell: Cell, index: int) -> bool:
        """Whether the cell's worker in round INDEX ends within the budget, by its estimate;
        a trial's, with what the other cells still need left over (reserved)."""
        if not self.budget_s:
            return True
        costs = self.estimate(cell, index)
        needed = costs.first_s if index == 0 else costs.later_s
        if cell.key in self.trials:
            needed += self.reserved(index)
        return self.elapsed() + needed <= self.budget_s

    def reserved(self, index: int) -> float:
        """Seconds the cells that are no trial still need, by their estimates: their workers
        left in round INDEX's queue and in each later round planned."""
        queued = sum(self._worker_s(cell, index) for cell in self.queue
                     if cell.key not in self.trials)
        running = [cell for cell in self.session.cells if cell.key not in self.trials
                   and cell.key not in self.dropped
                   and worker_costs(self._result(cell.key)) is not None]
        later = sum(self.estimate(cell, index).later_s for cell in running)
        return queued + later * max(0, self.rounds - index - 1)

    def _worker_s(self, cell: Cell, index: int) -> float:
        costs = self.estimate(cell, index)
        return costs.first_s if index == 0 else costs.later_s

    def drop(self, cell: Cell, index: int) -> None:
        """No more rounds for CELL; a fix that never ran is recorded as not tried."""
        self.dropped.add(cell.key)
        candidate = self.planned.get(cell.key)
        if index > 0 or candidate is None:
            return
        needed = round_up(self.elapsed() + candidate.costs.total(self.rounds))
        self.record.setdefault("not_tried", []).append(
            not_tried_entry(candidate, self.budget_s, max(needed, (self.budget_s or 0) + 10)))
        say(f"advise: {cell.framework} on {cell.device}: {cell.variant} left out, the budget "
            "is spent")

    # --- the choice, after the baselines' first round ---

    def decide(self) -> list[Cell]:
        """Rank each device's candidates by its as-written cell's diagnosis and plan the ones
        the budget holds; record the rest. The chosen fixes' cells, in the order to run."""
        self.decided = True
        document = self.session.document
        cases = advice_module.measured_cases(document)
        baselines = {(cell.framework, cell.device): cell for cell in self.session.cells}
        ranked: list[Candidate] = []
        baseline_costs: list[Costs] = []
        diagnoses: dict[str, str] = {}
        for key, names in self.candidates.items():
            cell = baselines.get(key)
            result = self._result(cell.key) if cell is not None else None
            costs = worker_costs(result)
            if cell is None or result is None or costs is None or \
                    result.status == Status.UNAVAILABLE:
                continue  # no worker, or it found no such device: nothing to fix there
            baseline_costs.append(costs)
            kind = self._diagnosis(cases, cell)
            diagnoses[f"{cell.framework} on {cell.device}"] = kind
            order = advice_module.rank_candidates(names, cell.device, kind)
            ranked += [Candidate(replace(cell, variant=name),
                                 advice_module.candidate_fit(name, cell.device, kind), rank,
                                 candidate_costs(costs, cell.framework, cell.device, name), kind)
                       for rank, name in enumerate(order)]
        ranked.sort(key=lambda item: item.rank)  # each device's first fix, then the seconds...
        time_left = None if not self.budget_s else self.budget_s - self.elapsed()
        chosen = fit_budget(baseline_costs, ranked, time_left, self.rounds, self.budget_s)
        self._record(chosen, ranked, diagnoses, cases)
        self.planned = {item.cell.key: item for item in chosen.to_run}
        self.trials = {item.cell.key for item, _ in chosen.trials}
        return [item.cell for item in chosen.to_run]

    def _diagnosis(self, cases: list[advice_module.Measured], cell: Cell) -> str:
        baseline = next((case for case in cases if (case.framework, case.device, case.variant)
                         == (cell.framework, cell.device, cell.variant)
                         and case.size == self.size), None)
        if baseline is None or not baseline.valid:
            return advice_module.UNPROFILED
        return advice_module.diagnosis_at(baseline, cases,
                                          self.session.document.ceilings).kind

    def _record(self, chosen: BudgetPlan, ranked: list[Candidate], diagnoses: dict[str, str],
                cases: list[advice_module.Measured]) -> None:
        """What was chosen, in run.json's advise record and on the terminal."""
        planned_rounds = self.rounds
        self.rounds = chosen.rounds
        self.record.update(
            budget_s=self.budget_s, rounds_planned=planned_rounds, rounds_run=chosen.rounds,
            candidate_count=len(ranked), diagnoses=diagnoses,
            chosen=[chosen_entry(item, chosen.rounds) for item in chosen.chosen]
            + [chosen_entry(item, chosen.rounds, trial=True, needed_s=needed)
               for item, needed in chosen.trials],
            not_tried=[not_tried_entry(item, self.budget_s, needed)
                       for item, needed in chosen.left_out])
        if chosen.rounds < planned_rounds:
            self.record["rounds_why"] = slowest_step(cases, self.session.cells, self.size,
                                                     self.budget_s)
        self.session.document.extra_fields[advice_module.RUN_KEY] = self.record
        self.session.recorder.save()
        for where, kind in diagnoses.items():
            names = [item.cell.variant for item in chosen.chosen if _where(item) == where]
            trials = [item.cell.variant for item, _ in chosen.trials if _where(item) == where]
            tried = f"; in the time left: {', '.join(trials)}" if trials else ""
            say(f"advise: {where}: {kind}; measuring {', '.join(names) or 'no fix'}{tried}")
        if chosen.left_out:
            say(f"advise: {len(chosen.left_out)} candidate fixes left out by the budget of "
                f"{self.budget_s:.0f} s; {chosen.rounds} of {planned_rounds} rounds")


def say(line: str) -> None:
    """One progress line on stderr, whole (never wrapped mid-phrase, no markup)."""
    progress_console.print(line, markup=False, highlight=False, soft_wrap=True)


def _where(item: Candidate) -> str:
    return f"{item.cell.framework} on {item.cell.device}"


def chosen_entry(item: Candidate, rounds: int, trial: bool = False,
                 needed_s: float | None = None) -> dict[str, Any]:
    """One chosen candidate as run.json's advise record keeps it; a trial (tried in the time
    left: too dear at its estimate) says so, with its floor and the budget that would run it
    at its estimate."""
    entry: dict[str, Any] = {"framework": item.cell.framework, "device": item.cell.device,
                             "variant": item.cell.variant, "fit": item.fit,
                             "estimate_s": round(item.costs.total(rounds), 1)}
    if trial:
        floor = item.costs.floor_s
        entry.update(trial=True, floor_s=None if floor is None else round(floor, 1),
                     needed_s=needed_s)
    return entry


def not_tried_entry(item: Candidate, budget_s: float | None,
                    needed_s: float | None) -> dict[str, Any]:
    """One not-tried candidate as run.json's advise record keeps it (advice.NotTried)."""
    return {"framework": item.cell.framework, "device": item.cell.device,
            "variant": item.cell.variant, "fit": item.fit, "diagnosis": item.diagnosis,
            "budget_s": budget_s, "needed_s": needed_s}


def slowest_step(cases: list[advice_module.Measured], cells: list[Cell], size: Any,
                 budget_s: float | None) -> str:
    """'the budget of 180 s: the as-written step takes 5.26 s per call on cpu (torch)'."""
    own = {(cell.framework, cell.device, cell.variant) for cell in cells}
    timed = [case for case in cases if (case.framework, case.device, case.variant) in own
             and case.size == size and case.call_median_s is not None]
    limit = f"the budget of {budget_s:.0f} s" if budget_s else "the budget"
    if not timed:
        return limit
    slowest = max(timed, key=lambda case: case.call_median_s or 0.0)
    return (f"{limit}: the as-written step takes {format_seconds(slowest.call_median_s)} per "
            f"call on {slowest.device} ({slowest.framework})")


# --- the whole advice run ---------------------------------------------------------------------

def advise(workload: str | None = None, *,
           finish: Callable[[RunSession], Result], executor: str | Executor | None = None,
           progress: bool = True, command: list[str] | None = None,
           ceilings: bool = True, budget_s: float | None = DEFAULT_BUDGET_S,
           spent_s: float = 0.0, **options: Any) -> Result:
    """Both phases; `finish` runs an opened session to its end (harness.api's, which stores
    the predictions) and its result of the last phase is returned.

    BUDGET_S: seconds for the whole run from now, less SPENT_S already spent by the command
    (0 or None: no limit). Phase 2 runs only
    where phase 1 ended without a stop signal, some framework x device has two or more
    recommended fixes that run together, and the budget left holds them.
    """
    # What follows the last worker is kept back as the cells run (Chooser.after_run); SPENT_S
    # is what the command spent before this call (the CLI's start and imports).
    started = clock() - max(0.0, spent_s)
    per_cell = remembered_per_cell()

    def after_run(cells: int) -> float:
        return after_run_reserve(cells, per_cell)

    if budget_s is not None and budget_s < 0:
        raise BadInput(f"--budget {budget_s:g}: must be >= 0 seconds (0: no limit)")
    budget = float(budget_s) if budget_s else None
    run, size = plan_advice(workload, **options)
    candidates = candidates_of(run)
    session = RunSession.start(run, executor, command=command, progress=progress,
                               ceilings=ceilings)
    document = session.document
    record = {"size": size, "baseline": run.spec.variants_by_default[0],
              "candidates": sorted({name for names in candidates.values() for name in names}),
              "order_seed": run.seed, "budget_s": budget,
              "after_run": {"per_cell_s": per_cell, "margin": AFTER_RUN_MARGIN,
                            "without_memory_s": AFTER_RUN_S}}
    document.extra_fields[advice_module.RUN_KEY] = record
    document.seed = None  # the Chooser's orders, not the seeded shuffle (module docstring)
    session.recorder.save()
    chooser = Chooser(session, candidates, size, budget, started, run.seed, run.rounds,
                      session.executor.runs_cells_here, record, after_run=after_run)
    session.pick = chooser
    result = finish(session)
    # The finished session's document (the result's): what the CLI prints the advice from.
    finish_record(session.run_dir, document)
    if getattr(result, "stopped_by", None) is not None:
        return result
    added = add_combinations(session.run_dir, run.spec, chooser, document)
    if not added:
        return result
    progress_console.print(f"advise: measuring the best combination as one cell: "
                           f"{', '.join(sorted({cell.variant for cell in added}))}")
    reopened = RunSession.reopen(session.run_dir, executor, command=command, progress=progress)
    reopened.pick = Chooser(reopened, {}, size, budget, started, run.seed, chooser.rounds,
                            reopened.executor.runs_cells_here, decided=True,
                            after_run=after_run)
    return finish(reopened)


def finish_record(run_dir: Path, document: RunDocument) -> None:
    """The advise record of phase 1's DOCUMENT as it ran, saved: the candidate fixes that got
    a worker (the advice's 'measured N of M'), the rounds that ran and, where fewer than
    planned (the budget ran out before a round, a stop), why."""
    record = dict(document.extra_fields.get(advice_module.RUN_KEY) or {})
    baseline = record.get("baseline")
    record["tried"] = sum(1 for cell in document.cells if cell.variant != baseline
                          and cell.status != Status.UNAVAILABLE
                          and measured_at(cell, document.sweep, record.get("size")))
    ran = max(1, len(document.round_orders))
    if ran < record.get("rounds_run", ran):  # planned by decide, cut by the budget's check
        budget = record.get("budget_s")
        record["rounds_why"] = (f"the budget of {budget:.0f} s ran out after round {ran}"
                                if budget else f"stopped after round {ran}")
    record["rounds_run"] = ran
    record.setdefault("rounds_planned", document.rounds)
    document.extra_fields[advice_module.RUN_KEY] = record
    store.write_run(run_dir, document)


def measured_at(cell: CellResult, sweep: str, size: Any) -> bool:
    """Whether CELL's worker finished (its cost is known), or, stopped (the budget's deadline
    keeps no cost), it finished the user's batch SIZE."""
    if cell.cost is not None and cell.cost.workers > 0:
        return True
    return any(case.case.get(sweep) == size for case in cell.cases)


def add_combinations(run_dir: Path, spec: WorkloadSpec, chooser: Chooser | None = None,
                     document: RunDocument | None = None) -> list[Cell]:
    """The cells of phase 2, added to the stored run's plan (and named in its `advise` record):
    per framework x device the recommended fixes that run together, where there are two or
    more (one fix alone was measured in phase 1), and where CHOOSER's budget left holds them
    (the others are recorded as left out, with the budget that would run them). DOCUMENT:
    the run's, in memory (default: read from RUN_DIR); saved either way."""
    document = document if document is not None else store.load_run(run_dir)
    record = dict(document.extra_fields.get(advice_module.RUN_KEY) or {})
    found = advice_module.advise_run(document, record.get("size"))
    planned = [Cell(**fields) for fields in document.planned_cells]
    known = {cell.key for cell in planned}
    results = {result.cell.key: result for result in document.cells}
    added: list[Cell] = []
    spent = 0.0
    for device in found.devices:
        name = device.combination_name
        baseline = next((cell for cell in planned if (cell.framework, cell.device, cell.variant)
                         == (device.framework, device.device, device.baseline.variant)), None)
        if len(device.combination) < 2 or baseline is None:
            continue
        cell = replace(baseline, variant=name)
        if cell.key in known or declared_refusal(spec, cell.framework, name, cell.device):
            continue
        cost = combination_cost(results, baseline, device.combination,
                                chooser.rounds if chooser else 1)
        if chooser is not None and chooser.budget_s and \
                chooser.elapsed() + spent + cost > chooser.budget_s:
            record.setdefault("combination_left_out", []).append(
                {"framework": cell.framework, "device": cell.device, "variant": name,
                 "budget_s": chooser.budget_s,
                 "needed_s": round_up(chooser.elapsed() + spent + cost)})
            continue
        spent += cost
        added.append(cell)
        known.add(cell.key)
    if added:
        document.planned_cells += [cell.as_dict() for cell in added]
        record["combined"] = [{"framework": cell.framework, "device": cell.device,
                               "variant": cell.variant} for cell in added]
    document.extra_fields[advice_module.RUN_KEY] = record
    store.write_run(run_dir, document)
    return added


def combination_cost(results: dict[CellKey, CellResult], baseline: Cell, parts: list[str],
                     rounds: int) -> float:
    """A combination's estimated workers over ROUNDS: its dearest part's measured worker
    (each part ran as a cell in phase 1; the as-written worker where one did not)."""
    measured = [worker_costs(results.get(replace(baseline, variant=part).key))
                for part in [baseline.variant, *parts]]
    known = [costs for costs in measured if costs is not None]
    if not known:
        return 0.0
    return max(costs.total(rounds) for costs in known)

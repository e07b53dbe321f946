"""`harness advise`'s chooser: which cell runs next in phase 1, within the time budget.

The RoundPick of an advice run's session (harness.run.session.RoundPick): the as-written cells
first; once they ran, their diagnosis ranks each device's candidate fixes
(harness.analysis.fixchoice) and the budget picks those it holds (harness.run.advisebudget);
what it decided goes into the run's advise record (RunDocument.advise) and on the terminal.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.analysis import fixchoice
from harness.analysis.advicecase import diagnosis_at
from harness.analysis.casetable import CaseRow, run_rows
from harness.core.units import counted, format_seconds
from harness.data.adviserecord import AdvisedCell, AdviseRecord
from harness.data.results import CellResult
from harness.run.advisebudget import (
    BudgetPlan,
    Candidate,
    Costs,
    DeviceKey,
    candidate_costs,
    fit_budget,
    round_up,
    worker_costs,
)
from harness.run.adviseupfront import (
    Unaffordable,
    measurement_s,
    read_reference_calls,
    unaffordable,
)
from harness.run.progress import console as progress_console
from harness.run.session import RunSession
from harness.spec import Cell, CellKey, Status

# How every stop by the budget begins its reason: an as-written cell the budget stopped or did
# not start is no failure of the run (harness.api.RunResult.advise_exit_code) but a run that
# measured too little to answer.
ADVISE_BUDGET = "the advise budget of"

# The clock the budget is counted on (monotonic: a wall-clock step must not spend it).
clock: Callable[[], float] = time.monotonic


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
    record: AdviseRecord = field(default_factory=AdviseRecord)
    decided: bool = False
    queue: list[Cell] = field(default_factory=list)
    queue_round: int = -1
    planned: dict[CellKey, Candidate] = field(default_factory=dict)  # the chosen fixes
    trials: set[CellKey] = field(default_factory=set)  # those tried in the time left
    dropped: set[CellKey] = field(default_factory=set)  # no more rounds for these
    # The as-written cells not started: the budget could not hold one measurement of them.
    unaffordable: dict[CellKey, Unaffordable] = field(default_factory=dict)
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
            stage, self.queue = self.queue, []  # the baselines, at once, where they fit
            stage = self._hold_unaffordable(stage)
            if not stage:  # none to run: the round ends here, so the choice is made now
                self.queue = self.decide()
                return self._next_stage(index)
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
        self._stop_in(0.0, f"{ADVISE_BUDGET} {self.budget_s or 0:.0f} s ran out")

    def _hold_unaffordable(self, stage: list[Cell]) -> list[Cell]:
        """The as-written cells of STAGE whose measurement at the user's batch fits the
        budget, by the preparation's reference calls (harness.run.adviseupfront); each one
        that does not is recorded as not started, with one line saying so and the budgets
        that would measure it and its first candidate fix."""
        if not self.budget_s:
            return stage
        kept = []
        for cell in stage:
            found = self._unaffordable(cell)
            if found is None:
                kept.append(cell)
                continue
            line = found.line(self.budget_s)
            say(line)
            self.record.no_measurement = [*self.record.no_measurement, line[len("advise: "):]]
            self.unaffordable[cell.key] = found
            self.session.recorder.add(CellResult(
                cell, Status.TIMEOUT, f"not started: {ADVISE_BUDGET} {self.budget_s:.0f} s "
                                      f"cannot hold one measurement ({found.why})"))
        return kept

    def _unaffordable(self, cell: Cell) -> Unaffordable | None:
        folder = cell.params.get("prepared")  # a user model's prepared folder, where it has one
        if not isinstance(folder, str) or not self.budget_s:
            return None
        names = self.candidates.get((cell.framework, cell.device), [])
        first = names[0] if names else ""
        sizes = self.session.document.params.get(self.session.document.sweep)
        reserve = self.after_run(1) if self.after_run is not None else 0.0
        compiles = bool(first) and candidate_costs(Costs(0.0, 0.0), cell.framework, cell.device,
                                                   first).first_s > 0
        return unaffordable(cell, read_reference_calls(Path(folder)),
                            sizes if isinstance(sizes, list) else [self.size], self.size,
                            clock() - self.started, reserve, self.budget_s, first, compiles)

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

    def estimate(self, cell: Cell) -> Costs:
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
        needed = self._worker_s(cell, index)
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
        later = sum(self.estimate(cell).later_s for cell in running)
        return queued + later * max(0, self.rounds - index - 1)

    def _worker_s(self, cell: Cell, index: int) -> float:
        costs = self.estimate(cell)
        return costs.first_s if index == 0 else costs.later_s

    def drop(self, cell: Cell, index: int) -> None:
        """No more rounds for CELL; a fix that never ran is recorded as not tried."""
        self.dropped.add(cell.key)
        candidate = self.planned.get(cell.key)
        if index > 0 or candidate is None:
            return
        needed = round_up(self.elapsed() + candidate.costs.total(self.rounds))
        self.record.not_tried.append(
            not_tried_entry(candidate, self.budget_s, max(needed, (self.budget_s or 0) + 10)))
        say(f"advise: {cell.framework} on {cell.device}: {cell.variant} left out, the budget "
            "is spent")

    # --- the choice, after the baselines' first round ---

    def decide(self) -> list[Cell]:
        """Rank each device's candidates by its as-written cell's diagnosis and plan the ones
        the budget holds; record the rest. The chosen fixes' cells, in the order to run."""
        self.decided = True
        document = self.session.document
        cases = run_rows(document)
        baselines = {(cell.framework, cell.device): cell for cell in self.session.cells}
        ranked: list[Candidate] = []
        baseline_costs: list[Costs] = []
        diagnoses: dict[str, str] = {}
        unmeasured: list[AdvisedCell] = []  # the candidates of an as-written not measured
        for key, names in self.candidates.items():
            cell = baselines.get(key)
            result = self._result(cell.key) if cell is not None else None
            costs = worker_costs(result)
            if cell is not None and (result is None or costs is None) and \
                    (cell.key in self.unaffordable or stopped_by_budget(result)):
                unmeasured += self._unmeasured(cell, names, cases)
                continue  # the budget held no measurement of it: each fix's budget said
            if cell is None or result is None or costs is None or \
                    result.status == Status.UNAVAILABLE:
                continue  # no worker, or it found no such device: nothing to fix there
            baseline_costs.append(costs)
            kind = self._diagnosis(cases, cell)
            diagnoses[f"{cell.framework} on {cell.device}"] = kind
            order = fixchoice.rank_candidates(names, cell.device, kind)
            ranked += [Candidate(replace(cell, variant=name),
                                 fixchoice.candidate_fit(name, cell.device, kind), rank,
                                 candidate_costs(costs, cell.framework, cell.device, name), kind)
                       for rank, name in enumerate(order)]
        ranked.sort(key=lambda item: item.rank)  # each device's first fix, then the seconds...
        time_left = None if not self.budget_s else self.budget_s - self.elapsed()
        chosen = fit_budget(baseline_costs, ranked, time_left, self.rounds, self.budget_s)
        self._record(chosen, ranked, diagnoses, cases)
        self.record.not_tried += unmeasured
        self.record.candidate_count += len(unmeasured)
        self.planned = {item.cell.key: item for item in chosen.to_run}
        self.trials = {item.cell.key for item, _ in chosen.trials}
        return [item.cell for item in chosen.to_run]

    def _unmeasured(self, cell: Cell, names: list[str], cases: list[CaseRow]) -> list[AdvisedCell]:
        """The candidates of an as-written CELL the budget did not measure (not started, or
        stopped before its worker ended), each with the budget that would measure it beside
        the as-written cell: from the step at each batch (a case it finished, else the
        preparation's reference call), MEASUREMENT_CALLS calls of each in two workers."""
        held = self.unaffordable.get(cell.key)
        steps = self._steps(cell, cases)
        entries = []
        for name in names:
            allowance = candidate_costs(Costs(0.0, 0.0), cell.framework, cell.device,
                                        name).first_s
            if held is not None:
                needed: float | None = round_up(held.as_written_s + held.worker_s + allowance)
            elif steps:
                needed = round_up(self.elapsed() + measurement_s(steps)
                                  + measurement_s(steps, allowance))
            else:
                needed = None
            entries.append(AdvisedCell(cell.framework, cell.device, name, "",
                                       "as-written not measured", budget_s=self.budget_s,
                                       needed_s=needed))
        return entries

    def _steps(self, cell: Cell, cases: list[CaseRow]) -> list[float]:
        """Seconds per call at each batch of an as-written CELL stopped by the budget: the
        cases it finished, the preparation's reference calls for the others ([] where the
        user's batch is known by neither)."""
        finished = {case.size: case.call_median_s for case in cases
                    if (case.framework, case.device, case.variant)
                    == (cell.framework, cell.device, cell.variant) and case.samples}
        folder = cell.params.get("prepared")
        reference = read_reference_calls(Path(folder)) if isinstance(folder, str) else None
        if reference is not None and (reference.framework, reference.device) == \
                (cell.framework, cell.device):
            finished = {**{size: step for size, step in reference.seconds_per_call.items()},
                        **finished}
        sizes = self.session.document.params.get(self.session.document.sweep)
        planned = sizes if isinstance(sizes, list) else [self.size]
        if finished.get(self.size) is None:
            return []
        return [finished.get(size, finished[self.size]) for size in planned]

    def _diagnosis(self, cases: list[CaseRow], cell: Cell) -> str:
        baseline = next((case for case in cases if (case.framework, case.device, case.variant)
                         == (cell.framework, cell.device, cell.variant)
                         and case.size == self.size), None)
        if baseline is None or not baseline.timed:
            return fixchoice.UNPROFILED
        return diagnosis_at(baseline, cases, self.session.document.ceilings).kind

    def _record(self, chosen: BudgetPlan, ranked: list[Candidate], diagnoses: dict[str, str],
                cases: list[CaseRow]) -> None:
        """What was chosen, in run.json's advise record and on the terminal."""
        planned_rounds = self.rounds
        self.rounds = chosen.rounds
        record = self.record
        record.budget_s, record.rounds_planned = self.budget_s, planned_rounds
        record.rounds_run, record.candidate_count = chosen.rounds, len(ranked)
        record.diagnoses = diagnoses
        record.chosen = [chosen_entry(item, chosen.rounds) for item in chosen.chosen] + [
            chosen_entry(item, chosen.rounds, trial=True, needed_s=needed)
            for item, needed in chosen.trials]
        record.not_tried = [not_tried_entry(item, self.budget_s, needed)
                            for item, needed in chosen.left_out]
        if chosen.rounds < planned_rounds:
            record.rounds_why = slowest_step(cases, self.session.cells, self.size,
                                             self.budget_s)
        self.session.document.advise = record
        self.session.recorder.save()
        for where, kind in diagnoses.items():
            names = [item.cell.variant for item in chosen.chosen if _where(item) == where]
            trials = [item.cell.variant for item, _ in chosen.trials if _where(item) == where]
            tried = f"; in the time left: {', '.join(trials)}" if trials else ""
            say(f"advise: {where}: {kind}; measuring {', '.join(names) or 'no fix'}{tried}")
        if chosen.left_out:
            say(f"advise: {counted(len(chosen.left_out), 'candidate fix', 'candidate fixes')} "
                "left out by the budget of "
                f"{self.budget_s:.0f} s; {chosen.rounds} of {planned_rounds} rounds")


def stopped_by_budget(result: CellResult | None) -> bool:
    """Whether RESULT is a cell the advise budget stopped or did not start (ADVISE_BUDGET)."""
    return result is not None and result.status == Status.TIMEOUT and \
        ADVISE_BUDGET in result.reason


def say(line: str) -> None:
    """One progress line on stderr, whole (never wrapped mid-phrase, no markup)."""
    progress_console.print(line, markup=False, highlight=False, soft_wrap=True)


def _where(item: Candidate) -> str:
    return f"{item.cell.framework} on {item.cell.device}"


def chosen_entry(item: Candidate, rounds: int, trial: bool = False,
                 needed_s: float | None = None) -> AdvisedCell:
    """One chosen candidate as run.json's advise record keeps it; a trial (tried in the time
    left: too dear at its estimate) says so, with its floor and the budget that would run it
    at its estimate."""
    entry = AdvisedCell(item.cell.framework, item.cell.device, item.cell.variant, item.fit,
                        estimate_s=round(item.costs.total(rounds), 1))
    if trial:
        floor = item.costs.floor_s
        entry.trial, entry.needed_s = True, needed_s
        entry.floor_s = None if floor is None else round(floor, 1)
    return entry


def not_tried_entry(item: Candidate, budget_s: float | None,
                    needed_s: float | None) -> AdvisedCell:
    """One not-tried candidate as run.json's advise record keeps it (fixchoice.NotTried)."""
    return AdvisedCell(item.cell.framework, item.cell.device, item.cell.variant, item.fit,
                       item.diagnosis, budget_s=budget_s, needed_s=needed_s)


def slowest_step(cases: list[CaseRow], cells: list[Cell], size: Any,
                 budget_s: float | None) -> str:
    """'the budget of 180 s: the as-written step took 5.26 s in its first round on cpu
    (torch)': per step, as the diagnosis line gives it, and said to be the first round's (the
    figure the budget was planned on; the diagnosis's is every round's)."""
    own = {(cell.framework, cell.device, cell.variant) for cell in cells}
    timed = [case for case in cases if (case.framework, case.device, case.variant) in own
             and case.size == size and case.samples]
    limit = f"the budget of {budget_s:.0f} s" if budget_s else "the budget"
    if not timed:
        return limit
    slowest = max(timed, key=lambda case: case.call_median_s)
    return (f"{limit}: the as-written step took {format_seconds(slowest.median_s)} in its "
            f"first round on {slowest.device} ({slowest.framework})")

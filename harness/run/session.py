"""One run, from its plan (or its stored folder) to its run.json saved as ended.

Why one object: a new run and a resumed one differ only in how they open. `RunSession.start`
makes a new folder and document from a plan (harness.run.plan); `RunSession.reopen` takes a
stored folder back, keeping its finished cells (harness.run.resume). From there `run` is the
same code for both: a new run's ceilings and prepared weights first, then the refusals, the
rounds, a save after every cell (`RunRecorder`), and the end on a stop signal. harness.api's
execute and resume_run, and through them the CLI, open sessions; nothing else runs cells.
"""

from __future__ import annotations

import contextlib
import errno
import shlex
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import IO

from harness.analysis.stats import work_of
from harness.core import interrupt, lifeline, registry
from harness.core.settings import Settings, cache_folder
from harness.core.units import counted
from harness.data import store
from harness.data.results import CellResult, RunDocument, cell_from_dict
from harness.measure import bounds, envinfo
from harness.run import phases, runlock
from harness.run import resume as resume_plan
from harness.run import rounds as rounds_module
from harness.run.context import opened
from harness.run.executors import Executor, executor_from_options, slurm_records
from harness.run.executors.base import OnResult
from harness.run.forkserver import ForkServers
from harness.run.plan import RunPlan
from harness.run.planner import cell_refusal, refuse_declared
from harness.run.progress import cell_estimates, run_with_progress
from harness.run.progress import console as progress_console
from harness.run.runceilings import has_rates, largest_square_matmul, measure_ceilings
from harness.run.runner import RunOptions
from harness.spec import BadInput, Cell, CellKey, Status, WorkloadSpec

# A caller's say over each round (RunSession.pick; harness advise: its candidates chosen from
# the baselines' first round, a time budget): given the round's index and its planned cells not
# run yet in this round (in the round's order), the next cells to run, as planned cells; a cell
# the run has not planned is planned then. [] ends the round.
RoundPick = Callable[[int, list[Cell]], list[Cell]]


class RunRecorder:
    """Keeps run.json and measurements.csv on disk up to date after every cell."""

    def __init__(self, run_dir: Path, spec: WorkloadSpec, document: RunDocument) -> None:
        self.run_dir, self.spec, self.document = run_dir, spec, document
        self.rows: list[store.MeasurementRow] = []

    @property
    def results(self) -> list[CellResult]:
        return self.document.cells

    def add(self, cell: CellResult) -> None:
        """Append one cell's result and its tidy rows, then save both files."""
        self.rows.extend(self._rows(cell))
        self.document.cells.append(cell)
        self.save()

    def _rows(self, cell: CellResult) -> list[store.MeasurementRow]:
        work = {index: work_of(self.spec, case.case, case.extra)
                for index, case in enumerate(cell.cases)}
        # A cell that ran elsewhere (a SLURM node) carries its own host: its rows name it.
        host = cell.host or self.document.host
        return store.measurement_rows(self.document.run_id, str(host.get("machine_label") or ""),
                               self.spec.sweep, cell, work)

    def put(self, result: CellResult) -> None:
        """Record a cell's result, replacing the one recorded for that cell (a later round)."""
        key = result.cell.key
        cells = [cell for cell in self.document.cells if cell.cell.key != key]
        self.document.cells = [*cells, result]
        self.rows = [row for cell in self.document.cells for row in self._rows(cell)]
        self.save()

    def order_as(self, cells: list[Cell]) -> None:
        """Put the recorded cells in the plan's order (rounds record them as they finish)."""
        position = {cell.key: index for index, cell in enumerate(cells)}
        self.document.cells.sort(key=lambda result: position.get(
            result.cell.key, len(position)))
        self.rows = [row for cell in self.document.cells for row in self._rows(cell)]

    def save(self, finished: bool = False, stopped_by: signal.Signals | None = None) -> None:
        """Write both files; `finished` stamps the end time, `stopped_by` the stop signal."""
        if finished:
            self.document.finished = time.time()
        self.document.interrupted = stopped_by is not None
        if stopped_by is not None:
            self.document.interrupted_by = stopped_by.name
        # Together, all or none: a full disk leaves the pair saved before, never a run.json
        # newer than its CSV. The typed Parquet copy once, at the end: rebuilding it after
        # every worker cost 2.6 s of the demo's run on the H100 host.
        try:
            store.write_run_files(self.run_dir, self.document, self.rows, parquet=finished)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise store.WriteFailed(save_failure(self.run_dir, why, exc.errno), why) from None


@dataclass
class RunSession:
    """A run whose folder holds a run.json: the cells it still has to run, where they run, and
    (a new run only) the plan whose ceilings and prepared weights come before them."""

    recorder: RunRecorder
    executor: Executor
    cells: list[Cell]  # still to run; those the declarations refuse are recorded at once
    options: RunOptions
    progress: bool = True
    # A new run's plan; None for a resumed run, whose document keeps its own ceilings and params.
    plan: RunPlan | None = None
    ceilings: bool = True  # measure them (--no-ceilings: the machine's theoretical bound)
    # None: every round runs all its cells in the seeded order. Given: the rounds run stage
    # by stage as it picks (RoundPick), and each round's recorded order is the cells that ran.
    pick: RoundPick | None = None
    # What the run is doing now, for its progress (harness.run.phases).
    board: phases.PhaseBoard = field(default_factory=phases.PhaseBoard)
    # The open file that holds the run folder's lock while this session writes (runlock.py).
    lock: IO[str] | None = field(default=None, repr=False, compare=False)
    # A resumed run's cells that hold some of their rounds (harness.run.resume): the rounds
    # (and of a stopped round, the cases) each still runs, and the rounds it holds so far.
    rounds_left: dict[CellKey, resume_plan.RoundsLeft] = field(default_factory=dict)
    kept_rounds: dict[CellKey, CellResult] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.recorder.run_dir

    @property
    def document(self) -> RunDocument:
        return self.recorder.document

    @property
    def spec(self) -> WorkloadSpec:
        return self.recorder.spec

    @classmethod
    def start(cls, plan: RunPlan, executor: str | Executor | None = None, *,
              command: list[str] | None = None, progress: bool = True,
              ceilings: bool = True, servers: ForkServers | None = None) -> RunSession:
        """A new run folder with a first run.json holding the whole plan; BadInput (nothing
        written) when the executor cannot run the cells. SERVERS: the caller's warm processes,
        shared with what it ran before (the --model inspection); None: the run opens its own."""
        chosen = executor_from_options(executor)
        options = RunOptions(timeout_s=plan.timeout_s, settings=plan.settings, servers=servers)
        preflight(chosen, plan.cells, options)
        lifeline.sweep_scratch()  # what killed runs left in the temp directory
        run_dir = store.new_run_dir(plan.out, plan.spec.name)
        lock = runlock.hold(run_dir)  # a --resume of this folder waits for the run to end
        recorder = RunRecorder(run_dir, plan.spec, new_document(plan, run_dir.name, chosen,
                                                                 list(command or sys.argv)))
        try:
            recorder.save()  # a readable run folder from the start, even if stopped early
        except store.WriteFailed as failed:
            raise store.WriteFailed(unmade(run_dir, lock, failed.why), failed.why) from None
        refused = sum(cell_refusal(plan.spec, cell) is not None for cell in plan.cells)
        for notice in plan.notices:  # one line each, before the run (a misspelled hook)
            progress_console.print(notice, markup=False, highlight=False, soft_wrap=True)
        progress_console.print(f"run folder: {run_dir}  ({counted(len(plan.cells), 'cell')}"
                               + (f"; {refused} unavailable, no worker started)" if refused
                                  else ")"))
        return cls(recorder, chosen, plan.cells, options, progress, plan, ceilings, lock=lock)

    @classmethod
    def reopen(cls, run_dir: Path, executor: str | Executor | None = None, *,
               command: list[str] | None = None, progress: bool = True,
               cancel_running: bool = False, settings: Settings | None = None,
               servers: ForkServers | None = None) -> RunSession:
        """A stored run taken back: its finished results recorded again, the cells without
        one to run. BadInput when the folder is no run or stores no plan, or while its SLURM
        tasks are still queued or running (cancel_running: scancel them). It runs with the
        settings the run recorded, or SETTINGS where given (recorded in their place); SERVERS:
        the caller's warm processes (None: the run opens its own)."""
        try:
            document = store.load_run(run_dir)
        except store.StoreError as exc:
            raise BadInput(f"--resume: {exc}") from None
        resume_plan.check_resumable(run_dir)
        lock = runlock.hold(run_dir)  # one writer: not while the run or another resume goes on
        # The cost of the command that ran before is no figure of this one: the resuming
        # command records its own at its end (a self-check in between would read a stale one).
        document.command_cost = {}
        chosen_settings = (settings or recorded_settings(document)).with_quick(document.quick)
        registry.use_plugins(chosen_settings.plugins)  # a plugin's workload, by the run's own
        spec = registry.load_workload(document.workload)
        # None: where the run ran, with its own settings (partition, time limit, sbatch...); a
        # SLURM run resumed with 'slurm' keeps them too, as the CLI's --resume does.
        chosen = executor_from_options(executor, stored=document.executor)
        slurm_records.check_no_live_tasks(run_dir, cancel_running)
        options = RunOptions(timeout_s=float(document.timeout_s or 900.0),
                             settings=chosen_settings, servers=servers)
        left = resume_plan.remaining(document, run_dir, partial(resume_plan.case_count, spec))
        preflight(chosen, left.cells, options)
        lifeline.sweep_scratch()  # what killed runs left in the temp directory
        described = chosen.describe(chosen_settings)  # how its workers start, by the settings
        resume_plan.reopen(document, left.cells, described, command or sys.argv)
        document.settings = chosen_settings.to_dict()
        recorder = RunRecorder(run_dir, spec, document)
        for result in left.kept:
            recorder.add(result)
        progress_console.print(f"resuming {run_dir}: {resume_plan.resume_line(left)}")
        return cls(recorder, chosen, left.cells, options, progress, lock=lock,
                   rounds_left=left.rounds_left, kept_rounds=left.partial)

    def release(self) -> None:
        """Let the run folder go (its lock): this session writes it no more."""
        if self.lock is not None:
            self.lock.close()
            self.lock = None

    def run(self, finishing: Callable[[], None] | None = None) -> signal.Signals | None:
        """Run the cells and save the run as ended; the stop signal that ended it, if any.

        FINISHING (harness.api's finishing step: the predictions) runs on the document in
        memory after the last cell of a run no signal stopped, before that one save: a
        finished run's run.json is written once at its end, whatever the step adds.

        Stop signals are seen when the caller installed harness.core.interrupt's handlers (the
        CLI does); without them (a notebook) Ctrl-C still stops the running worker (the runner
        kills it) and the run ends interrupted by SIGINT.
        """
        stopped_by = None
        try:
            # One set of warm processes for every child the run starts: the ceilings probe, the
            # prepared weights and the workers (harness.run.forkserver: a framework imported
            # once); the caller's set (the CLI's, opened before the plan) where it gave one.
            with opened(self.options.settings, self.options.servers) as context, \
                    lifeline.scratch_folder("compiled") as compiled, \
                    self._reporting():
                # Each cell's compile cache, new with this session (runner.py
                # compile_cache_environment): later rounds load what round 0 compiled.
                self.options = replace(self.options, servers=context.servers,
                                       compile_cache_root=compiled,
                                       board=self.board if self.progress else None)
                if self._set_up():
                    self._run_cells()
                if context.servers is not None:
                    self.document.warm_processes = context.servers.record()
            stopped_by = interrupt.requested()
        except KeyboardInterrupt:
            stopped_by = signal.SIGINT
        try:
            if stopped_by is None and finishing is not None:
                finishing()
        finally:  # saved as ended even where the step is stopped (Ctrl-C goes on up)
            self.recorder.save(finished=True, stopped_by=stopped_by)
        return stopped_by

    def _reporting(self) -> contextlib.AbstractContextManager[object]:
        """The plain lines naming the run's phase, where stderr is no terminal (a log, CI)."""
        if not self.progress:
            return contextlib.nullcontext()
        return phases.reporting(self.board, progress_console)

    def _set_up(self) -> bool:
        """A new run's ceilings and prepared weights, before its first cell; False when a stop
        signal came meanwhile. A resumed run has both from its first session."""
        if self.plan is None:
            return True
        self._settle_ceilings(self.plan)
        self._prepare(self.plan)
        return interrupt.requested() is None

    def _settle_ceilings(self, plan: RunPlan) -> None:
        """The ceilings every rate is judged against: this machine's remembered probe, else
        measured (--probe-ceilings: always), or with --no-ceilings the machine's theoretical
        peaks (or its remembered probes), so a rate faster than physics is flagged, never
        celebrated. None where the cells run elsewhere (the probe would describe the wrong
        host) or the workload has no rate to judge."""
        if not (self.executor.runs_cells_here and has_rates(self.spec)):
            return
        if self.ceilings:
            # `probe` bound only when asked: callers replace measure_ceilings with their own
            # (devices, largest_n, quick, **options) function; the run's context (its cache
            # folder, its warm processes) is one of the options.
            measure = partial(measure_ceilings, probe=True) if plan.probe_ceilings \
                else partial(measure_ceilings, defer_first=True) \
                if plan.own_model and self.pick is None else measure_ceilings
            with self._showing("the machine's ceilings: remembered or probed (--no-ceilings "
                               "skips this)"):
                settled = measure(plan.devices, largest_square_matmul(self.spec, plan.cells),
                                  plan.settings.quick, context=self.options.context)
        else:
            settled = bounds.unprobed_ceilings(plan.devices,
                                               cache=cache_folder(plan.settings))
        self.document.ceilings = settled
        self.recorder.save()

    def _prepare(self, plan: RunPlan) -> None:
        """The parameters every cell gets from the plan's one-off step (a user model's shared
        weights and CPU references, made in the run folder), stored where --resume finds them."""
        if plan.prepare is None or interrupt.requested() is not None:
            return
        with self._showing("preparing the shared weights and CPU references"):
            added = plan.prepare(self.run_dir, plan.params, self.options.context)
        self.document.params = {**plan.params, **added}
        self.cells = [replace(cell, params={**cell.params, **added}) for cell in self.cells]
        self.document.planned_cells = [cell.as_dict() for cell in self.cells]
        self.recorder.save()

    def _showing(self, text: str) -> contextlib.AbstractContextManager[None]:
        """TEXT as the run's phase meanwhile (a spinner in a terminal, the plain reporter's
        lines elsewhere: harness.run.phases); nothing said where the run shows no progress."""
        if not self.progress:
            return contextlib.nullcontext()
        return phases.showing(self.board, progress_console, text)

    def _run_cells(self) -> bool:
        """The executor's run of the cells the declarations do not refuse; False when a stop
        signal ended it early.

        Rounds > 1: the executor runs the matrix once per round, in each round's order
        (harness.run.rounds), and each cell's rounds are merged into one result as they arrive;
        so does a run with a `pick`, whatever its rounds, stage by stage as it picks.
        """
        to_run = self._record_refusals()
        if self.document.rounds > 1 or self.pick is not None or self.rounds_left:
            return self._run_rounds(to_run)
        return self._execute(to_run, lambda cell, result: self.recorder.add(result))

    def _record_refusals(self) -> list[Cell]:
        """Record every cell the declarations rule out (harness.run.planner.refuse_declared:
        no worker, local or remote, starts for it); the rest."""
        refusal = refuse_declared(self.spec)
        to_run = []
        for cell in self.cells:
            refused = refusal(cell)
            if refused is None:
                to_run.append(cell)
            else:
                self.recorder.add(refused)
        return to_run

    def _execute(self, cells: list[Cell], add: OnResult) -> bool:
        """The executor's run of `cells`, each result handed to `add`; the progress bar, cell
        states and ETA on stderr when asked."""
        if not self.progress:
            return self.executor.run(cells, self.options, self.run_dir, add)
        return run_with_progress(self.executor, cells, self.options, self.run_dir, add,
                                 cell_estimates(self.recorder.results))

    def _run_rounds(self, to_run: list[Cell]) -> bool:
        """Every round: the cells to run (TO_RUN) in that round's order, each result merged at
        once; at the end the recorded cells are put back in the plan's order.

        A cell that timed out is not run again in the later rounds (each would wait the whole
        --timeout again: 5 rounds of 900 s by default); its reason says so."""
        document = self.document
        rounds = document.rounds
        merger = rounds_module.RoundMerger.of(self.spec, to_run, rounds)
        merger.kept = dict(self.kept_rounds)
        orders = rounds_module.round_orders(len(to_run), rounds, document.seed or 0)

        started: set[CellKey] = set()  # this round's cells that got a worker
        timed_out: dict[CellKey, int] = {}  # cells not run again: the round they timed out in

        def merged(cell: Cell, result: CellResult) -> None:
            if result.cost is None or result.cost.workers > 0:
                started.add(cell.key)
            whole = merger.add(cell, result)
            if result.status == Status.TIMEOUT and cell.round < rounds - 1:
                timed_out.setdefault(cell.key, cell.round)
            if cell.key in timed_out:
                whole = replace(whole, reason=f"{whole.reason}; timed out in round "
                                              f"{timed_out[cell.key] + 1}; not retried")
            self.recorder.put(whole)

        finished = True
        for index, order in enumerate(orders):
            if interrupt.requested() is not None:
                finished = False
                break
            # A later round's cells carry the calls per sample their first round found.
            if self.pick is not None:
                if not self._run_picked(index, [to_run[position] for position in order],
                                        to_run, merger, merged, started):
                    finished = False
                    break
                continue
            round_cells = self._round_cells(index, [to_run[position] for position in order
                                                    if to_run[position].key not in timed_out],
                                            merger)
            if round_cells and not self._run_round(index, round_cells, merged, started):
                finished = False
                break
        self.recorder.order_as(self.cells)
        self.recorder.save()
        return finished

    def _run_round(self, index: int, round_cells: list[Cell], merged: OnResult,
                   started: set[CellKey]) -> bool:
        """Round INDEX's cells (ROUND_CELLS, none of them empty: a resume whose cells hold this
        round already runs no round), each result to MERGED; False where a stop came within."""
        document, rounds = self.document, self.document.rounds
        plan_index = plan_positions(document)
        # The order that runs, as plan indices: the cells refused without a worker are in no
        # round, so the order is recorded as executed, not as shuffled over the plan. (A run
        # of one round has none: a resume of one runs the cases a stop cut short.)
        if rounds > 1:
            document.round_orders.append([plan_index.get(cell.key, -1) for cell in round_cells])
        self.recorder.save()
        if self.progress and rounds > 1:
            progress_console.print(f"round {index + 1} of {rounds}: "
                                   f"{counted(len(round_cells), 'cell')}")
        self.board.context = f"round {index + 1} of {rounds}" if rounds > 1 else ""
        started.clear()
        if self._execute(round_cells, merged):
            return True
        # Stopped within the round: its recorded order keeps the cells that ran.
        if rounds > 1:
            document.round_orders[-1] = [plan_index.get(cell.key, -1)
                                         for cell in round_cells if cell.key in started]
        return False

    def _round_cells(self, index: int, cells: list[Cell],
                     merger: rounds_module.RoundMerger) -> list[Cell]:
        """Round INDEX's workers for CELLS (in the round's order): each its share of the work
        and what its first round found; of a resumed cell, only where it lacks this round, and
        then only the cases it lacks (harness.run.resume)."""
        chosen = []
        for cell in cells:
            left = self.rounds_left.get(cell.key)
            if left is not None and index not in left:
                continue
            worker = merger.calibrated(rounds_module.round_cell(self.spec, cell, index,
                                                                self.document.rounds))
            chosen.append(replace(worker, positions=left[index]) if left else worker)
        return chosen

    def _run_picked(self, index: int, offered: list[Cell], to_run: list[Cell],
                    merger: rounds_module.RoundMerger, merged: OnResult,
                    started: set[CellKey]) -> bool:
        """Round INDEX stage by stage, as `pick` chooses (OFFERED: the round's planned cells in
        its order); False when a stop signal ended it. The round's recorded order is the cells
        that got a worker, in the order they ran; a round where none did is not recorded."""
        assert self.pick is not None
        document, rounds = self.document, self.document.rounds
        document.round_orders.append([])
        ran: list[Cell] = []
        left, finished = list(offered), True
        while finished and interrupt.requested() is None and (chosen := self.pick(index, left)):
            self._plan_more(chosen, to_run, merger)
            stage = [merger.calibrated(rounds_module.round_cell(self.spec, cell, index, rounds))
                     for cell in chosen]
            self.board.context = f"round {index + 1} of {rounds}"
            started.clear()
            finished = self._execute(stage, merged)
            ran += [cell for cell in stage if cell.key in started]
            positions = plan_positions(document)
            document.round_orders[-1] = [positions[cell.key] for cell in ran]
            self.recorder.save()
            keys = {cell.key for cell in chosen}
            left = [cell for cell in left if cell.key not in keys]
        if not document.round_orders[-1]:
            document.round_orders.pop()
        return finished and interrupt.requested() is None

    def _plan_more(self, cells: list[Cell], to_run: list[Cell],
                   merger: rounds_module.RoundMerger) -> None:
        """Plan the cells `pick` chose that the run has not planned: appended to run.json's
        planned cells (the indices already recorded stay valid) and to the round merger."""
        known = {cell.key for cell in to_run}
        for cell in cells:
            if cell.key in known:
                continue
            known.add(cell.key)
            to_run.append(cell)
            self.cells.append(cell)
            self.document.planned_cells.append(cell.as_dict())
            merger.planned[cell.key] = replace(cell, rounds=self.document.rounds, round=0)


def save_failure(run_dir: Path, why: str, code: int | None) -> str:
    """The one line a failed save of a run folder gives (harness.data.store.WriteFailed)."""
    fix = "make room" if code in (errno.ENOSPC, errno.EDQUOT) else "make it writable"
    return (f"{run_dir}: cannot save the run ({why}); the run stopped, its folder keeps the "
            f"cells saved before; {fix}, then: harness compare --resume "
            f"{shlex.quote(str(run_dir))}")


def unmade(run_dir: Path, lock: IO[str] | None, why: str) -> str:
    """Remove a new run folder whose first save failed (it holds no run); the line saying so.
    Only what this run put there goes: its lock file, the folder once empty."""
    if lock is not None:
        lock.close()
    with contextlib.suppress(OSError):
        (run_dir / runlock.LOCK_FILE).unlink()
        run_dir.rmdir()
    return (f"{run_dir}: cannot create the run's files ({why}); nothing ran and "
            "the folder was removed")


def new_document(plan: RunPlan, run_id: str, executor: Executor,
                 command: list[str]) -> RunDocument:
    """A new run's first run.json: the plan, its settings, the host and the executor, no cell
    yet."""
    spec = plan.spec
    described = executor.describe(plan.settings)  # how its workers start, by the settings
    return RunDocument(
        run_id=run_id, command=command, started=time.time(),
        workload=spec.name, sweep=spec.sweep, params=plan.params, quick=plan.settings.quick,
        timeout_s=plan.timeout_s, hints=spec.report.as_dict(),
        frameworks=framework_styles(spec, plan.cells), host=envinfo.host_metadata(),
        # What --resume needs: the whole plan, and where it ran.
        planned_cells=[cell.as_dict() for cell in plan.cells], executor=described,
        rounds=plan.rounds, seed=plan.seed if plan.rounds > 1 else None,
        settings=plan.settings.to_dict(),
    )


def recorded_settings(document: RunDocument) -> Settings:
    """The settings a stored run used; for a run from before they were recorded, this
    process's environment's (what such a run was resumed with)."""
    if document.settings:
        return Settings.from_dict(document.settings)
    return Settings.from_environment(quick=document.quick)


def framework_styles(spec: WorkloadSpec, cells: list[Cell]) -> dict[str, dict[str, str]]:
    """Colour and label of each framework in the run, stored so reports need no registry."""
    styles = {}
    for name in dict.fromkeys(cell.framework for cell in cells):
        try:
            styles[name] = registry.load_framework(name).style()
        except BadInput as exc:  # its cells become unavailable rows with this reason
            progress_console.print(f"harness: warning: {exc}", markup=False)
            styles[name] = {"color": "#7F7F7F", "label": name}
    return styles


def preflight(executor: Executor, cells: list[Cell], options: RunOptions) -> None:
    """The executor's own check that it can run these cells (SLURM: a usable node, options
    sbatch accepts), before anything is written; BadInput if not."""
    check: Callable[[list[Cell], RunOptions], None] | None = getattr(executor, "preflight", None)
    if check is not None and cells:
        check(cells, options)


def plan_positions(document: RunDocument) -> dict[CellKey, int]:
    """Each planned cell's index in run.json's planned_cells, by its key."""
    positions: dict[CellKey, int] = {}
    for index, stored in enumerate(document.planned_cells):
        cell, _ = cell_from_dict(stored)
        positions.setdefault(cell.key, index)
    return positions

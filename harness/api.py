"""The library behind `harness compare`: plan a run, execute it, load stored runs.

    import harness
    result = harness.compare("matmul", frameworks=["torch", "numpy"], devices=["cpu"],
                             sizes=[256, 1024], quick=True)
    result.frame            # tidy DataFrame, one row per sample (measurements.csv)
    result.path             # the run folder
    frame = harness.load(["results/RUN_A", "results/RUN_B"])

A facade: `plan` checks every input (harness.run.plan), `execute` and `resume_run` open a
session (harness.run.session: a new plan or a stored folder, then the same run). It imports
nothing from the report: a run stores what it must (its predictions) from itself, and the
report is drawn by the front doors that want it (harness.compare, the CLI, through
harness.reporting). The CLI calls these same functions and only parses and prints.
Progress goes to stderr, never into the returned data. Never imports a framework: every cell
runs in a worker process.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.interrupt import EXIT_SIGNAL_BASE
from harness.data import store
from harness.data.measurements import measurements_of_rows, read_measurements
from harness.data.results import CellResult, RunDocument
from harness.run.executors import Executor
from harness.run.forkserver import ForkServers
from harness.run.plan import RunPlan, plan
from harness.run.progress import console as progress_console
from harness.run.session import RunSession
from harness.spec import Status, worst_status

EXIT_FAILED_CELL = 1
# No answer: nothing was measured (every cell unavailable: --device cuda where no GPU is seen,
# a framework not installed; refused, or without a case that ran), or `harness advise` measured
# no fix (or no as-written cell) at the user's batch and printed what budget would. Not 0: a
# script must not read a run with no figure as a success; not 1 (nothing failed), 2 (bad input)
# or 3 (the report could not be written: harness.reporting). A failed cell's 1 takes precedence.
EXIT_NO_ANSWER = 4
EXIT_NO_MEASUREMENT = EXIT_NO_ANSWER
# A cell in one of these failed (INTERRUPTED without a stop signal here: a cell cancelled
# elsewhere, scancel or preempted).
FAILED_STATUSES = (Status.ERROR, Status.TIMEOUT, Status.INVALID, Status.INTERRUPTED)


@dataclass
class RunResult:
    """What a run produced: its folder, the tidy rows, the typed cells, how it ended."""

    path: Path
    cells: list[CellResult]
    document: RunDocument
    stopped_by: signal.Signals | None = None
    _frame: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def frame(self) -> pd.DataFrame:
        """The run's measurements.csv as a DataFrame (one row per sample)."""
        if self._frame is None:
            self._frame = load(self.path)
        return self._frame

    @property
    def exit_code(self) -> int:
        """0 ok, 1 a cell failed, 4 nothing measured (EXIT_NO_MEASUREMENT), 128 + N stopped by
        signal N (the CLI's exit code)."""
        if self.stopped_by is not None:
            return EXIT_SIGNAL_BASE + self.stopped_by.value
        return self._cells_exit_code(self.cells)

    @staticmethod
    def _cells_exit_code(cells: list[CellResult]) -> int:
        """1 when one of CELLS failed, else 4 when none measured a case, else 0."""
        status = worst_status([cell.status for cell in cells])
        if status in FAILED_STATUSES:
            return EXIT_FAILED_CELL
        return 0 if measured_any(cells) else EXIT_NO_MEASUREMENT

    @property
    def advise_exit_code(self) -> int:
        """`harness advise`'s: 0 once the as-written cells ran, whatever the fixes showed (a
        fix failing parity, not helping, stopped by the budget is a finding the answer
        prints); 1 when an as-written cell failed (not one the budget stopped or did not
        start); 4 when none measured a case (no answer); 128 + N stopped by signal N."""
        if self.stopped_by is not None:
            return self.exit_code
        from harness.analysis.advice import baseline_variant

        record = self.document.advise
        baseline = (record.baseline if record is not None else "") or \
            baseline_variant(self.document)
        from harness.run.chooser import stopped_by_budget

        # One the budget stopped or did not start failed nothing: the advice says it measured
        # too little to answer (EXIT_NO_ANSWER).
        return self._cells_exit_code([cell for cell in self.cells if cell.variant == baseline
                                      and not stopped_by_budget(cell)])


def measured_any(cells: list[CellResult]) -> bool:
    """Whether one of CELLS measured a case (a case whose status is ok)."""
    return any(case.status == Status.OK for cell in cells for case in cell.cases)


def no_measurement_line(result: RunResult, width: int = 100) -> str:
    """Why a run that ended measured nothing, in one line of at most WIDTH characters: how
    many cells ended how, and the first reason given ('' where something was measured or a
    signal stopped the run)."""
    import textwrap
    from collections import Counter

    if result.stopped_by is not None or measured_any(result.cells):
        return ""
    cells = result.cells
    ended = Counter(cell.status.value for cell in cells)
    first = next((cell for cell in cells if cell.reason), None)
    why = f"{first.cell.framework} {first.cell.device}: {first.reason}" if first else ""
    if len(cells) > 1:
        tally = ", ".join(f"{count} {status}" for status, count in ended.items())
        why = f"in {len(cells)} cells ({tally})" + (f"; first: {why}" if why else "")
    line = f"harness: no valid measurement{': ' if len(cells) == 1 else ' '}{why}".rstrip()
    return textwrap.shorten(line, width, placeholder=" ...")


def execute(run: RunPlan, *, ceilings: bool = True, command: list[str] | None = None,
            progress: bool = True, executor: str | Executor | None = None,
            servers: ForkServers | None = None, predict_for: Sequence[str] = ()) -> RunResult:
    """Measure the ceilings, run every cell, save after each; a stop signal ends it early.

    Stop signals are seen when the caller installed harness.core.interrupt's handlers (the CLI
    does); without them Ctrl-C still stops the running worker and the run ends interrupted.
    `executor`: where the cells run ('local', the default, or a harness.run.executors one).
    `servers`: warm processes the caller opened (harness.run.forkserver.warm_processes) to
    share with what it ran before; None: the run opens its own. `predict_for`: device profiles
    (shipped names or files) to predict the GPU step on besides the shipped ones (_finish).
    """
    check_predict_for(predict_for)
    return _finish(RunSession.start(run, executor, command=command, progress=progress,
                                    ceilings=ceilings, servers=servers), predict_for)


def resume_run(run_dir: Path | str, *, executor: str | Executor | None = None,
               progress: bool = True, command: list[str] | None = None,
               cancel_running: bool = False, servers: ForkServers | None = None,
               predict_for: Sequence[str] = ()) -> RunResult:
    """Run the cells of a stored run that have no result yet, into the same folder.

    Kept: every result that is not `interrupted`, and results SLURM tasks wrote after the
    submitting process had gone. BadInput when the folder is no run or stores no plan, or
    while the run's SLURM tasks are still queued or running (cancel_running: scancel them).
    """
    check_predict_for(predict_for)
    return _finish(RunSession.reopen(Path(run_dir), executor, command=command,
                                     progress=progress, cancel_running=cancel_running,
                                     servers=servers), predict_for)


def check_predict_for(asked: Sequence[str]) -> None:
    """BadInput (harness.predict.profile.ProfileError) before anything runs, for a profile
    asked that names no shipped one or is no profile."""
    from harness.predict.answer import check_asked  # no framework: JSON and arithmetic

    check_asked(list(asked))


def _finish(session: RunSession, predict_for: Sequence[str] = ()) -> RunResult:
    """Run an opened session to its end; what it produced, however it ended.

    The finishing step of every run, from the CLI or from Python: a run that ended (not
    stopped by a signal) gets its predicted crossovers and its predicted GPU steps (every CPU
    case with recorded features, on every shipped profile and each of PREDICT_FOR:
    harness.predict.answer) into its document, computed from the run as it is in memory (its
    document and its recorder's rows), not by reading the folder back or building a report;
    then the session saves it, once (RunSession.run): run.json is written once at the end.
    """
    def finishing() -> None:
        add_crossover_predictions(session.document, measurements_of_rows(session.recorder.rows),
                                  session.document.run_id or session.run_dir.name)
        add_gpu_predictions(session.document, predict_for)

    try:
        stopped_by = session.run(finishing)
    finally:
        session.release()  # a later resume in this process may take the folder
    return RunResult(session.run_dir, list(session.recorder.results), session.document,
                     stopped_by)


def add_gpu_predictions(document: RunDocument, predict_for: Sequence[str] = ()) -> int:
    """The GPU step of every CPU case with features, predicted into DOCUMENT
    (harness.predict.answer.add_predictions); returns how many cases. A failure costs the
    prediction, never the run: printed, 0 returned."""
    try:
        from harness.predict.answer import add_predictions, targets  # JSON and arithmetic

        return add_predictions(document, targets(list(predict_for)))
    except Exception as exc:  # noqa: BLE001 - the measurements are safe in memory and on disk
        progress_console.print(f"GPU prediction not made: {type(exc).__name__}: {exc}",
                               markup=False, highlight=False, soft_wrap=True)
        return 0


def add_crossover_predictions(document: RunDocument, measurements: pd.DataFrame,
                              run_id: str) -> list[dict[str, Any]] | None:
    """A run's predicted crossovers (harness.analysis.crossover.run_predictions) into
    DOCUMENT, its rows named RUN_ID; returns them. A failure costs the run nothing: printed,
    None returned and the document's own (a resumed run's) left as they were."""
    try:
        from harness.analysis.crossover import run_predictions  # pandas work: when a run ends

        found = run_predictions(document, measurements, run_id)
        document.predictions = found
        return found
    except Exception as exc:  # noqa: BLE001 - the measurements are safe in memory and on disk
        progress_console.print(f"predictions not saved ({type(exc).__name__}: {exc})",
                               markup=False, highlight=False, soft_wrap=True)
        return None


def compare(workload: str | None = None, *, frameworks: Sequence[str] | str | None = None,
            devices: Sequence[str] | str | None = None,
            variants: Sequence[str] | str | None = None, sizes: Sequence[int] | None = None,
            params: dict[str, Any] | None = None, data: Path | str | None = None,
            quick: bool = False, out: Path | str = "results", timeout_s: float = 900.0,
            ceilings: bool = True, progress: bool = True,
            executor: str | Executor | None = None,
            resume: Path | str | None = None, model: Path | str | None = None,
            rounds: int | None = None, seed: int | None = None,
            predict_for: Sequence[str] = ()) -> RunResult:
    """Run `workload` for every framework x device x variant cell; see the module docstring.
    Its report is drawn by harness.compare (report=True), not here: the run needs none.

    executor: 'local' (default), 'slurm', or an executor such as
    harness.run.executors.slurm.SlurmExecutor(partition_cpu=..., partition_gpu=...).
    resume: a stored run folder; only its cells without a result run (the other arguments
    but executor and progress are then taken from the folder).
    model: a file with your own model instead of a workload (harness.compare(model="m.py")).
    predict_for: device profiles (shipped names or files) to predict the GPU step on besides
    the shipped ones, as `--predict-for` (a CPU run's torch cells: docs/predict.md).
    Raises BadInput for bad arguments before anything runs or is written.
    """
    check_predict_for(predict_for)
    if resume is not None:
        result = resume_run(resume, executor=executor, progress=progress,
                            command=["harness.compare", "--resume", str(resume)],
                            predict_for=predict_for)
    else:
        from harness.run import forkserver

        # The --model inspection shares the run's warm processes.
        with forkserver.warm_processes() as servers:
            run = plan(workload, frameworks=frameworks, devices=devices, variants=variants,
                       sizes=sizes, params=params, data=data, quick=quick, out=out,
                       timeout_s=timeout_s, model=model, rounds=rounds, seed=seed,
                       servers=servers)
            result = execute(run, ceilings=ceilings, progress=progress, executor=executor,
                             command=["harness.compare", str(workload or f"--model={model}")],
                             servers=servers, predict_for=predict_for)
    return result


def advise(workload: str | None = None, *, predict_for: Sequence[str] = (),
           **options: Any) -> RunResult:
    """`harness advise` (harness.run.advise): the as-written cells first, then the candidate
    fixes their diagnosis ranks within `budget_s` seconds (default 180; 0: no limit), then the
    best combination, one run folder; its advice: harness.analysis.advice.advise_run.
    predict_for: as compare's."""
    from harness.run.advise import AdviseRun

    check_predict_for(predict_for)
    flow = AdviseRun.start(workload, **options)
    result = _finish(flow.session, predict_for)
    second = flow.second(stopped=result.stopped_by is not None)
    return _finish(second, predict_for) if second is not None else result


def load(paths: Path | str | Sequence[Path | str]) -> pd.DataFrame:
    """The measurements of one or more stored run folders as one tidy DataFrame.

    Raises harness.data.store.StoreError (a ValueError) for a folder that is not a harness run.
    """
    folders = [paths] if isinstance(paths, (str, Path)) else list(paths)
    frames = []
    for folder in map(Path, folders):
        frames.append(read_measurements(folder, store.load_run(folder)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

"""The library behind `harness compare`: plan a run, execute it, load stored runs.

    import harness
    result = harness.compare("matmul", frameworks=["torch", "numpy"], devices=["cpu"],
                             sizes=[256, 1024], quick=True)
    result.frame            # tidy DataFrame, one row per sample (measurements.csv)
    result.path             # the run folder
    frame = harness.load(["results/RUN_A", "results/RUN_B"])

The CLI only parses text, calls these functions and prints. Progress goes to stderr, never
into the returned data. Never imports a framework: every cell runs in a worker process.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from harness.analysis.stats import work_of
from harness.backend import canonical_device, parse_cuda_index
from harness.core import interrupt, registry
from harness.data import store
from harness.data.results import CellResult, RunDocument, cell_from_dict
from harness.measure import bounds, envinfo
from harness.run import resume as resume_plan
from harness.run import rounds as rounds_module
from harness.run.executors import (
    CellState,
    Executor,
    StateTally,
    executor_from_options,
)
from harness.run.executors import slurm as slurm_executor
from harness.run.planner import cell_refusal, refuse_declared
from harness.run.progress import CellEtaColumn
from harness.run.runner import RunOptions
from harness.spec import BadInput, Cell, Status, WorkloadSpec, expand_matrix, worst_status

EXIT_FAILED_CELL = 1
# The measurements are saved but the report could not be written (disk full, permissions).
EXIT_REPORT_FAILED = 3
EXIT_SIGNAL_BASE = 128  # shells' convention: killed by signal N -> 128 + N
progress_console = Console(stderr=True)


def split_names(values: Sequence[str] | str | None) -> list[str]:
    """`a`, `[a, "b,c"]` -> [a, b, c]."""
    if isinstance(values, str):
        values = [values]
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def given_names(option: str, values: Sequence[str] | str | None) -> list[str] | None:
    """The names an option was given; None when it was not given at all.

    Why refuse an empty value: `--device ""` (an unset shell variable, a stray `=`) would
    otherwise be an empty matrix or, worse, silently the default.
    """
    if values is None:
        return None
    names = split_names(values)
    if not names:
        raise BadInput(f"{option} is empty: give at least one name (see `harness list`)")
    return names


def resolve_devices(values: Sequence[str] | str | None) -> list[str]:
    """Canonical device names; default cpu plus every GPU nvidia-smi lists."""
    names = given_names("--device", values)
    if names is None:
        return ["cpu"] + [f"cuda:{index}" for index in range(len(envinfo.visible_gpus()))]
    devices = []
    for name in names:
        device = canonical_device(name)
        if device != "cpu" and parse_cuda_index(device) is None:
            raise BadInput(f"unknown device {name!r}; valid: cpu, cuda, cuda:N")
        if device not in devices:
            devices.append(device)
    return devices


def resolve_frameworks(spec: WorkloadSpec, values: Sequence[str] | str | None) -> list[str]:
    names = given_names("--framework", values) or list(spec.frameworks)
    for name in names:
        registry.check_framework_name(name)
    return list(dict.fromkeys(names))


def resolve_variants(spec: WorkloadSpec, value: Sequence[str] | str | None) -> list[str]:
    names = given_names("--variant", value)
    if names is None:
        return list(spec.variants_by_default)
    if names == ["all"]:
        return list(spec.variants)
    for name in names:
        if name not in spec.variants:
            raise BadInput(f"unknown variant {name!r} for {spec.name}; valid: "
                           f"{', '.join(spec.variants)}, all")
    return names


def check_writable(out: Path) -> None:
    """Refuse an --out that cannot hold a run folder, before any cell runs.

    Why try rather than ask: os.access says yes to root on a read-only mount and knows nothing
    of pseudo-filesystems such as /proc; creating the folders and a probe file is the honest
    test. Whatever the probe created is removed again when it fails.
    """
    try:
        missing = _missing_folders(out)
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot be checked ({exc.strerror or exc})") from None
    created: list[Path] = []
    try:
        for folder in missing:
            folder.mkdir()
            created.append(folder)
        handle, probe = tempfile.mkstemp(dir=out, prefix=".harness-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        for folder in reversed(created):
            with suppress(OSError):
                folder.rmdir()
        raise BadInput(f"--out {out}: not writable ({exc.strerror or exc})") from None


def _missing_folders(out: Path) -> list[Path]:
    """The folders that must be created for `out` to exist, outermost first."""
    missing = []
    existing = out
    while not existing.exists():
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        raise BadInput(f"--out {out}: {existing} is not a folder")
    return missing[::-1]


@dataclass(frozen=True)
class RunPlan:
    """A validated run: the spec, its cells and where the run folder goes."""

    spec: WorkloadSpec
    cells: list[Cell]
    devices: list[str]
    params: dict[str, Any]
    out: Path
    timeout_s: float
    quick: bool
    # (run folder, params) -> parameters every cell gets, run once the folder exists (a user
    # model's shared weights and CPU references are made there before any cell).
    prepare: Callable[[Path, dict[str, Any]], dict[str, Any]] | None = None
    # Worker processes per cell, the matrix run round by round in a seeded random order.
    rounds: int = 1
    seed: int = 0


def default_rounds(quick: bool = False) -> int:
    """--rounds when not given: HARNESS_ROUNDS if set (CI, the test suite), else the default;
    one under --quick, a smoke test that says its verdicts did not measure run-to-run drift
    (5 worker starts per cell, each a framework import and, for a compiled variant, a compile,
    are what a smoke test exists to skip)."""
    text = os.environ.get("HARNESS_ROUNDS", "")
    if text.strip().isdigit() and int(text) >= 1:
        return int(text)
    return 1 if quick else rounds_module.DEFAULT_ROUNDS


def plan(workload: str | None = None, *, frameworks: Sequence[str] | str | None = None,
         devices: Sequence[str] | str | None = None,
         variants: Sequence[str] | str | None = None, sizes: Sequence[int] | None = None,
         params: dict[str, Any] | None = None, data: Path | str | None = None,
         quick: bool = False, out: Path | str = "results",
         timeout_s: float = 900.0, model: Path | str | None = None,
         rounds: int | None = None, seed: int | None = None) -> RunPlan:
    """Validate every input before anything runs; BadInput (one line) otherwise.

    `model`: a user's model file (workloads/usermodel/) instead of a registered workload.
    `rounds`: worker processes per cell (default: default_rounds(quick)), run round by round with
    the cells in a new random order each round, from `seed` (default: drawn, and recorded).
    """
    chosen_rounds = default_rounds(quick) if rounds is None else int(rounds)
    if chosen_rounds < 1:
        raise BadInput(f"--rounds {rounds}: must be >= 1")
    chosen_seed = random.SystemRandom().randrange(2**31) if seed is None else int(seed)
    prepare = None
    if model is not None:
        if workload is not None:
            raise BadInput("give a workload or a model file (--model), not both")
        usermodel_plan = registry.model_plugin("plan")
        spec, model_info = usermodel_plan.model_spec(model, quick)
    else:
        if workload is not None and not workload.strip():
            raise BadInput("--workload is empty: name one of the workloads `harness list` shows")
        spec = registry.load_workload("matmul" if workload is None else workload)
    chosen_frameworks = resolve_frameworks(spec, frameworks)
    chosen_devices = resolve_devices(devices)
    chosen_variants = resolve_variants(spec, variants)
    if sizes is not None and (not list(sizes) or any(int(size) < 1 for size in sizes)):
        raise BadInput(f"sizes {list(sizes)!r}: sizes must be >= 1 (example: 64,256,1024)")
    overrides = {name: str(value) for name, value in (params or {}).items()}
    values = spec.resolve_params(overrides, None if sizes is None else
                                 [int(size) for size in sizes], quick)
    if data is not None:
        if spec.validate_data is None:
            raise BadInput(f"--data applies to the MNIST workloads, not {spec.name}")
        spec.validate_data(Path(data))
        values["data"] = str(Path(data).resolve())
    if not timeout_s > 0:
        raise BadInput(f"--timeout {timeout_s:g}: must be > 0 seconds")
    if model is not None:
        usermodel_plan.check_frameworks(model_info, chosen_frameworks)
        usermodel_plan.check_what(model_info, values["what"])

        def prepare(run_dir: Path, params: dict[str, Any]) -> dict[str, Any]:
            return usermodel_plan.prepare_run(run_dir, spec, params, timeout_s, quick)
    out = Path(out)
    check_writable(out)
    cells = expand_matrix(spec.name, chosen_variants, chosen_frameworks, chosen_devices, values,
                          quick)
    return RunPlan(spec, cells, chosen_devices, values, out, timeout_s, quick, prepare,
                   chosen_rounds, chosen_seed)


class RunRecorder:
    """Keeps run.json and measurements.csv on disk up to date after every cell."""

    def __init__(self, run_dir: Path, spec: WorkloadSpec, document: RunDocument) -> None:
        self.run_dir, self.spec, self.document = run_dir, spec, document
        self.rows: list[dict[str, Any]] = []

    @property
    def results(self) -> list[CellResult]:
        return self.document.cells

    def add(self, cell: CellResult) -> None:
        """Append one cell's result and its tidy rows, then save both files."""
        self.rows.extend(self._rows(cell))
        self.document.cells.append(cell)
        self.save()

    def _rows(self, cell: CellResult) -> list[dict[str, Any]]:
        work = {index: work_of(self.spec, case.case, case.extra)
                for index, case in enumerate(cell.cases)}
        # A cell that ran elsewhere (a SLURM node) carries its own host: its rows name it.
        host = cell.host or self.document.host
        return store.case_rows(self.document.run_id, str(host.get("machine_label") or ""),
                               self.spec.sweep, cell, work)

    def put(self, result: CellResult) -> None:
        """Record a cell's result, replacing the one recorded for that cell (a later round)."""
        key = rounds_module.cell_key(result.cell)
        cells = [cell for cell in self.document.cells if rounds_module.cell_key(cell.cell) != key]
        self.document.cells = [*cells, result]
        self.rows = [row for cell in self.document.cells for row in self._rows(cell)]
        self.save()

    def order_as(self, cells: list[Cell]) -> None:
        """Put the recorded cells in the plan's order (rounds record them as they finish)."""
        position = {rounds_module.cell_key(cell): index for index, cell in enumerate(cells)}
        self.document.cells.sort(key=lambda result: position.get(
            rounds_module.cell_key(result.cell), len(position)))
        self.rows = [row for cell in self.document.cells for row in self._rows(cell)]

    def save(self, finished: bool = False, stopped_by: signal.Signals | None = None) -> None:
        """Write both files; `finished` stamps the end time, `stopped_by` the stop signal."""
        if finished:
            self.document.finished = time.time()
        self.document.interrupted = stopped_by is not None
        if stopped_by is not None:
            self.document.interrupted_by = stopped_by.name
        store.write_run(self.run_dir, self.document)
        store.write_measurements(self.run_dir, self.rows)


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
        """0 ok, 1 a cell failed, 128 + N stopped by signal N (the CLI's exit code)."""
        if self.stopped_by is not None:
            return EXIT_SIGNAL_BASE + self.stopped_by.value
        status = worst_status([cell.status for cell in self.cells])
        # INTERRUPTED without a stop signal here: a cell cancelled elsewhere (scancel, preempted).
        return EXIT_FAILED_CELL if status in (Status.ERROR, Status.TIMEOUT, Status.INVALID,
                                              Status.INTERRUPTED) else 0


def execute(run: RunPlan, *, ceilings: bool = True, command: list[str] | None = None,
            progress: bool = True, executor: str | Executor | None = None) -> RunResult:
    """Measure the ceilings, run every cell, save after each; a stop signal ends it early.

    Stop signals are seen when the caller installed harness.core.interrupt's handlers (the CLI
    does); without them Ctrl-C still stops the running worker and the run ends interrupted.
    `executor`: where the cells run ('local', the default, or a harness.run.executors one).
    """
    chosen = executor_from_options(executor)
    spec = run.spec
    _preflight(chosen, run.cells, RunOptions(timeout_s=run.timeout_s))
    run_dir = store.new_run_dir(run.out, spec.name)
    document = RunDocument(
        run_id=run_dir.name, command=list(command or sys.argv), started=time.time(),
        workload=spec.name, sweep=spec.sweep, params=run.params, quick=run.quick,
        timeout_s=run.timeout_s, hints=spec.report_hints(),
        frameworks=framework_styles(spec, run.cells), host=envinfo.host_metadata(),
        # What --resume needs: the whole plan, and where it ran.
        planned_cells=[cell.as_dict() for cell in run.cells], executor=chosen.describe(),
        rounds=run.rounds, seed=run.seed if run.rounds > 1 else None,
    )
    recorder = RunRecorder(run_dir, spec, document)
    recorder.save()  # a readable run folder from the start, even if stopped in the ceilings
    refused = sum(cell_refusal(spec, cell) is not None for cell in run.cells)
    progress_console.print(f"run folder: {run_dir}  ({len(run.cells)} cells"
                           + (f"; {refused} unavailable, no worker started)" if refused else ")"))
    stopped_by = None
    try:
        _execute_here(run, chosen, ceilings, document, recorder, progress)
        stopped_by = interrupt.requested()
    except KeyboardInterrupt:  # no handlers installed (a notebook): the runner killed the worker
        stopped_by = signal.SIGINT
    recorder.save(finished=True, stopped_by=stopped_by)
    return RunResult(run_dir, list(recorder.results), document, stopped_by)


def _execute_here(run: RunPlan, chosen: Executor, ceilings: bool, document: RunDocument,
                  recorder: RunRecorder, progress: bool) -> None:
    """The ceilings, the prepared weights and the cells, with one set of warm processes for
    all the children they start (harness.run.forkserver: a framework imported once)."""
    from harness.run import forkserver

    spec = run.spec
    with forkserver.shared():
        # Elsewhere the probe would describe the wrong host; without a rate, nothing to judge.
        if ceilings and chosen.runs_cells_here and has_rates(spec):
            document.ceilings = measure_ceilings(
                run.devices, largest_square_matmul(spec, run.cells), run.quick)
            recorder.save()
        elif chosen.runs_cells_here and has_rates(spec):
            # No probe: this machine's theoretical peaks (or its remembered probes) still
            # bound every rate, so one faster than physics is flagged, never celebrated.
            document.ceilings = bounds.unprobed_ceilings(run.devices)
            recorder.save()
        cells = run.cells
        if run.prepare is not None and interrupt.requested() is None:
            with progress_console.status("preparing the shared weights and CPU references"):
                added = run.prepare(recorder.run_dir, run.params)
            document.params = {**run.params, **added}
            cells = [replace(cell, params={**cell.params, **added}) for cell in cells]
            document.planned_cells = [cell.as_dict() for cell in cells]  # --resume finds them
            recorder.save()
        if interrupt.requested() is None:
            _run_cells(cells, RunOptions(timeout_s=run.timeout_s), recorder, progress,
                       chosen, refuse_declared(spec), run.rounds, run.seed)


def compare(workload: str | None = None, *, frameworks: Sequence[str] | str | None = None,
            devices: Sequence[str] | str | None = None,
            variants: Sequence[str] | str | None = None, sizes: Sequence[int] | None = None,
            params: dict[str, Any] | None = None, data: Path | str | None = None,
            quick: bool = False, out: Path | str = "results", timeout_s: float = 900.0,
            ceilings: bool = True, report: bool = True, progress: bool = True,
            executor: str | Executor | None = None,
            resume: Path | str | None = None, model: Path | str | None = None,
            rounds: int | None = None, seed: int | None = None) -> RunResult:
    """Run `workload` for every framework x device x variant cell; see the module docstring.

    executor: 'local' (default), 'slurm', or an executor such as
    harness.run.executors.slurm.SlurmExecutor(partition_cpu=..., partition_gpu=...).
    resume: a stored run folder; only its cells without a result run (the other arguments
    but executor, progress and report are then taken from the folder).
    model: a file with your own model instead of a workload (harness.compare(model="m.py")).
    Raises BadInput for bad arguments before anything runs or is written.
    """
    if resume is not None:
        result = resume_run(resume, executor=executor, progress=progress,
                            command=["harness.compare", "--resume", str(resume)])
        if report and result.stopped_by is None:
            draw_report(result.path)
        return result
    from harness.run import forkserver

    with forkserver.shared():  # the --model inspection shares the run's warm process
        run = plan(workload, frameworks=frameworks, devices=devices, variants=variants,
                   sizes=sizes, params=params, data=data, quick=quick, out=out,
                   timeout_s=timeout_s, model=model, rounds=rounds, seed=seed)
        result = execute(run, ceilings=ceilings, progress=progress, executor=executor,
                         command=["harness.compare", str(workload or f"--model={model}")])
    if report and result.stopped_by is None:
        draw_report(result.path)
    return result


def resume_run(run_dir: Path | str, *, executor: str | Executor | None = None,
               progress: bool = True, command: list[str] | None = None,
               cancel_running: bool = False) -> RunResult:
    """Run the cells of a stored run that have no result yet, into the same folder.

    Kept: every result that is not `interrupted`, and results SLURM tasks wrote after the
    submitting process had gone. BadInput when the folder is no run or stores no plan, or
    while the run's SLURM tasks are still queued or running (cancel_running: scancel them).
    """
    run_dir = Path(run_dir)
    try:
        document = store.load_run(run_dir)
    except store.StoreError as exc:
        raise BadInput(f"--resume: {exc}") from None
    spec = registry.load_workload(document.workload)
    # None: where the run ran, with its own settings (partition, time limit, sbatch...); a
    # SLURM run resumed with 'slurm' keeps them too, as the CLI's --resume does.
    chosen = executor_from_options(executor, stored=document.executor)
    slurm_executor.check_no_live_tasks(run_dir, cancel_running)
    _preflight(chosen, resume_plan.cells_to_run(resume_plan.planned_cells(document),
                                                resume_plan.kept_results(document, run_dir)),
               RunOptions(timeout_s=float(document.timeout_s or 900.0)))
    kept, cells = resume_plan.reopen(document, run_dir, chosen.describe(), command or sys.argv)
    recorder = RunRecorder(run_dir, spec, document)
    for result in kept:
        recorder.add(result)
    progress_console.print(f"resuming {run_dir}: {len(kept)} cells kept, {len(cells)} to run")
    stopped_by = None
    try:
        _run_cells(cells, RunOptions(timeout_s=float(document.timeout_s or 900.0)),
                   recorder, progress, chosen, refuse_declared(spec), document.rounds,
                   document.seed or 0)
        stopped_by = interrupt.requested()
    except KeyboardInterrupt:
        stopped_by = signal.SIGINT
    recorder.save(finished=True, stopped_by=stopped_by)
    return RunResult(run_dir, list(recorder.results), document, stopped_by)


def load(paths: Path | str | Sequence[Path | str]) -> pd.DataFrame:
    """The measurements of one or more stored run folders as one tidy DataFrame.

    Raises harness.data.store.StoreError (a ValueError) for a folder that is not a harness run.
    """
    from harness.report.load import read_measurements

    folders = [paths] if isinstance(paths, (str, Path)) else list(paths)
    frames = []
    for folder in map(Path, folders):
        store.read_run(folder)
        frames.append(read_measurements(folder))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


@dataclass(frozen=True)
class ReportOutcome:
    """What drawing a run's report gave: its files, or one line saying why there are none."""

    written: list[Path]
    failure: str = ""
    exit_code: int = 0  # EXIT_REPORT_FAILED, or 130 when Ctrl-C stopped the drawing
    # The verdict lines computed with the report (harness.report.summary.terminal_verdicts):
    # the CLI prints them rather than building the report's context a second time.
    verdicts: list[str] = field(default_factory=list)


def draw_report(run_dir: Path) -> ReportOutcome:
    """Draw the run's report into its folder; a failure is printed and returned, not raised.

    A drawing failure (disk full, no permission, a bug) never costs the measurements, which
    are already on disk; the CLI exits with the outcome's code so scripts can tell.
    """
    try:
        from harness.report import draw_report as draw

        drawn = draw([run_dir], run_dir, html=True)
        if drawn.predictions:  # kept with the measurements, not only in the report's text
            document = store.load_run(run_dir)
            document.predictions = drawn.predictions
            store.write_run(run_dir, document)
        progress_console.print(f"report: {len(drawn.written)} files in {run_dir}")
        return ReportOutcome(drawn.written, verdicts=drawn.verdicts)
    except KeyboardInterrupt:  # the results are complete; only the pictures are missing
        outcome = ReportOutcome([], f"report interrupted; results are in {run_dir}",
                                EXIT_SIGNAL_BASE + signal.SIGINT.value)
    except Exception as exc:  # noqa: BLE001 - the results are already safe on disk
        outcome = ReportOutcome([], f"report failed ({type(exc).__name__}: "
                                    f"{' '.join(str(exc).split())}); results are in {run_dir}",
                                EXIT_REPORT_FAILED)
    progress_console.print(outcome.failure, markup=False, highlight=False, soft_wrap=True)
    return outcome


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


def has_rates(spec: WorkloadSpec) -> bool:
    """Whether the workload counts FLOPs or bytes, so the ceilings have a rate to judge: a probe
    costs seconds to a minute, and without a rate nothing is held against it."""
    return spec.flops is not None or spec.bytes_moved is not None or spec.counts_flops


def largest_square_matmul(spec: WorkloadSpec, cells: list[Cell]) -> int | None:
    """The n of a square matmul doing the run's largest call's FLOPs (2n^3), for the probe."""
    if spec.flops is None:
        return None
    counts = [spec.flops(case) for cell in cells
              for case in spec.cases_for(cell.params, cell.variant)]
    largest = max((count for count in counts if count), default=None)
    return round((largest / 2) ** (1 / 3)) if largest else None


# --quick probes two sizes only: the full ladder (up to n=8192) cost 85 s of a 120 s quick
# matmul run on a 2-core VM. The probe is a lower bound either way, and the machine's cached
# best probe (harness.measure.ceilings) still sets the ceilings.
QUICK_PROBE_SIZES = [1024, 2048]


def measure_ceilings(devices: list[str], largest_n: int | None,
                     quick: bool = False) -> dict[str, Any]:
    """Peak FLOP/s and bandwidth per device, measured before the cells while the machine idles.

    --quick takes the machine's remembered best probe where every device has one (it says
    so: `remembered` in each device's figures), and probes otherwise.
    """
    from harness.measure.ceilings import remembered, with_bounds
    from harness.run import ceiling_probe

    if quick:
        known = {device: remembered(device) for device in devices}
        if all(known.values()):
            return {device: with_bounds(figures) for device, figures in known.items()
                    if figures is not None}
    if interrupt.requested() is not None:
        return {}
    with progress_console.status("measuring the machine's ceilings (--no-ceilings skips this)"):
        return ceiling_probe.measure_all(devices, largest_n,
                                         sizes=QUICK_PROBE_SIZES if quick else None, quick=quick)


def _preflight(executor: Executor, cells: list[Cell], options: RunOptions) -> None:
    """The executor's own check that it can run these cells (SLURM: a usable node, options
    sbatch accepts), before anything is written; BadInput if not."""
    check = getattr(executor, "preflight", None)
    if check is not None and cells:
        check(cells, options)


def _run_cells(cells: list[Cell], options: RunOptions, recorder: RunRecorder,
               progress: bool, executor: Executor | None = None,
               planned: Callable[[Cell], CellResult | None] | None = None,
               rounds: int = 1, seed: int = 0) -> bool:
    """The executor's run, with a progress bar, cell states and ETA on stderr when asked.

    `planned` (harness.run.planner.refuse_declared) gives the result of each cell the
    declarations rule out: it is recorded at once and no worker, local or remote, starts.
    `rounds` > 1: the executor runs the matrix once per round, in each round's order
    (harness.run.rounds), and each cell's rounds are merged into one result as they arrive.
    """
    to_run = _record_refusals(cells, recorder, planned)
    if rounds > 1:
        return _run_rounds(cells, to_run, options, recorder, progress, executor, rounds, seed)
    return _execute(to_run, options, recorder.run_dir, lambda cell, result: recorder.add(result),
                    progress, executor)


def _execute(cells: list[Cell], options: RunOptions, run_dir: Path,
             add: Callable[[Cell, Any], None], progress: bool,
             executor: Executor | None = None) -> bool:
    """The executor's run of `cells`; each result handed to `add`; progress when asked."""
    chosen = executor or executor_from_options()
    if not progress:
        return chosen.run(cells, options, run_dir, add)
    tally = StateTally()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total}"), TextColumn("{task.fields[states]}"), TimeElapsedColumn(),
                  CellEtaColumn(), console=progress_console, transient=True) as bar:
        task = bar.add_task("cells", total=len(cells), states="")

        def on_result(cell: Cell, result: CellResult) -> None:
            add(cell, result)
            bar.update(task, advance=1, description=f"{cell.label}: {result.status.value}")

        def on_state(cell: Cell, state: CellState, reason: str = "") -> None:
            tally.update(cell, state, reason)
            bar.update(task, states=tally.text())

        return chosen.run(cells, options, run_dir, on_result, on_state)


def _record_refusals(cells: list[Cell], recorder: RunRecorder,
                     planned: Callable[[Cell], CellResult | None] | None) -> list[Cell]:
    """Record every cell the declarations rule out (no worker starts for it); the rest."""
    to_run = []
    for cell in cells:
        refused = planned(cell) if planned is not None else None
        if refused is None:
            to_run.append(cell)
        else:
            recorder.add(refused)
    return to_run


def _plan_positions(document: RunDocument) -> dict[tuple[str, str, str], int]:
    """Each planned cell's index in run.json's planned_cells, by (variant, framework, device)."""
    positions: dict[tuple[str, str, str], int] = {}
    for index, stored in enumerate(document.planned_cells):
        cell, _ = cell_from_dict(stored)
        positions.setdefault(rounds_module.cell_key(cell), index)
    return positions


def _run_rounds(cells: list[Cell], to_run: list[Cell], options: RunOptions,
                recorder: RunRecorder, progress: bool, executor: Executor | None, rounds: int,
                seed: int) -> bool:
    """Every round: the cells to run (TO_RUN) in that round's order, each result merged at
    once; at the end the recorded cells are put back in the plan's order (CELLS)."""
    spec = recorder.spec
    merger = rounds_module.RoundMerger.of(spec, to_run, rounds)
    orders = rounds_module.round_orders(len(to_run), rounds, seed)

    def merged(cell: Cell, result: CellResult) -> None:
        recorder.put(merger.add(cell, result))

    plan_index = _plan_positions(recorder.document)
    finished = True
    for index, order in enumerate(orders):
        if interrupt.requested() is not None:
            finished = False
            break
        round_cells = [rounds_module.round_cell(spec, to_run[position], index, rounds)
                       for position in order]
        # The order that runs, as plan indices: the cells refused without a worker are in no
        # round, so the order is recorded as executed, not as shuffled over the whole plan.
        recorder.document.round_orders.append(
            [plan_index.get(rounds_module.cell_key(cell), -1) for cell in round_cells])
        recorder.save()
        if progress:
            progress_console.print(f"round {index + 1} of {rounds}: {len(round_cells)} cells")
        if not _execute(round_cells, options, recorder.run_dir, merged, progress, executor):
            finished = False
            break
    recorder.order_as(cells)
    recorder.save()
    return finished

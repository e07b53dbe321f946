"""Run each cell of a planned matrix in its own worker process; every outcome becomes a status.

The matrix is expanded and refused cells are answered before this (harness.spec.expand_matrix,
harness.run.planner); this module starts the workers. Modelled on pyperf's manager/worker split
(`spawn_worker` returns a typed suite read straight from the pipe): the parent never imports a
framework, a worker hands back one JSON file, read here once into a typed CellResult, and a
timeout kills the worker's whole process group and becomes a status on that result. A worker
(and a helper child) of a framework that declares `preload` is forked from the run's warm
process for it (harness.run.forkserver) instead of starting a new interpreter.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

from harness.core import interrupt, lifeline, registry
from harness.core.settings import CHILD_MODULE, Settings, child_arguments, variable_names
from harness.data.results import CellResult
from harness.data.serial import JsonObject, JsonValue
from harness.data.store import read_cell_result
from harness.measure import idlechild
from harness.measure.ceilings import cache_dir
from harness.measure.memory import wait_with_peak_rss, with_peak_host_memory
from harness.run import forkserver, hangs, memoryguard
from harness.run.context import RunContext, opened
from harness.run.failures import looks_like_oom
from harness.run.forkserver import ForkedWorker, ForkServerLost, ForkServers
from harness.spec import BadInput, Cell, Status

if TYPE_CHECKING:
    from harness.run.phases import PhaseBoard

STDERR_TAIL_CHARS = 1500
KILL_WAIT_S = 10.0
PROJECT_ROOT = Path(__file__).resolve().parents[2]  # harness/run/runner.py -> the checkout


# NVLink multicast (NVLS) stays off in NCCL, PyTorch's symmetric memory and NVSHMEM for every
# cell: on shared multi-GPU hosts a program that uses it can take the host's GPUs out of service,
# and the data-parallel cells must not depend on it. Forced, not defaulted, and inherited by
# every process a worker launches (torch's elastic agent copies the environment to its ranks).
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


WORKER_MODULE = "harness.run.worker"


@dataclass
class RunOptions:
    timeout_s: float
    worker_module: str = WORKER_MODULE
    extra_pythonpath: tuple[str, ...] = ()
    # The run's settings, passed to every worker on its argument list (harness.core.settings);
    # by default this process's environment's (a library call, a test).
    settings: Settings = field(default_factory=Settings.from_environment)
    # The run's warm processes, to fork the workers from (harness.run.context); None: the
    # matrix opens its own (where the settings fork workers). Never pickled to a SLURM task.
    servers: ForkServers | None = field(default=None, compare=False, repr=False)
    # The run's folder for compile caches (compile_cache_environment); None: none kept.
    compile_cache_root: Path | None = None
    # A time.monotonic() by which a worker is stopped whatever timeout_s allows (harness
    # advise's budget), and the reason its cell then gives; None: timeout_s alone.
    deadline: float | None = None
    deadline_reason: str = ""
    # What the run is doing now (harness.run.phases), told where each worker keeps its phase;
    # None: nobody shows progress. Never pickled to a SLURM task.
    board: PhaseBoard | None = field(default=None, compare=False, repr=False)

    @property
    def context(self) -> RunContext:
        """The run's settings and warm processes, for the helper children it starts."""
        return RunContext(self.settings, self.servers)

    def worker_timeout(self) -> tuple[float, bool]:
        """(seconds a worker started now may run, whether the deadline is what bounds it)."""
        if self.deadline is None:
            return self.timeout_s, False
        left = max(1.0, self.deadline - time.monotonic())
        return min(self.timeout_s, left), left < self.timeout_s


def framework_environment(framework: str, current: dict[str, str],
                          quick: bool = False) -> dict[str, str]:
    """The variables a framework's FrameworkSpec asks for (defaults only where unset; the
    quick defaults too for a --quick cell)."""
    try:
        spec = registry.load_framework(framework)
    except BadInput:  # unknown or broken: the worker reports it as unavailable
        return {}
    defaults = {**spec.environment_defaults,
                **(spec.quick_environment_defaults if quick else {})}
    wanted = {name: value for name, value in defaults.items() if name not in current}
    return {**wanted, **spec.environment}


def bytecode_environment(framework: str, env: dict[str, str],
                         settings: Settings | None = None) -> dict[str, str]:
    """PYTHONPYCACHEPREFIX (the harness's cache) for a framework whose modules have no cached
    bytecode beside them, so that only the first worker compiles them; {} otherwise.

    Why: where site-packages keeps no .pyc (an image built with PYTHONDONTWRITEBYTECODE, or
    installed without compiling, on a read-only path), every worker compiles the framework's
    Python from source again: on the H100 machine's host, importing torch with Inductor
    compiled 2,312 modules (10 s) in each process. A user's own prefix is left alone; a
    PYTHONDONTWRITEBYTECODE is lifted for the worker, whose bytecode goes to the harness's
    cache, not into the user's tree.
    """
    if env.get("PYTHONPYCACHEPREFIX"):
        return {}
    try:
        spec = importlib.util.find_spec(registry.load_framework(framework).import_name)
    except (BadInput, ImportError, ValueError):
        return {}
    origin = spec.origin if spec is not None else None
    if not origin or not origin.endswith(".py") or \
            os.path.exists(importlib.util.cache_from_source(origin)):
        return {}
    return {"PYTHONPYCACHEPREFIX": str(cache_dir(settings) / "pycache"),
            "PYTHONDONTWRITEBYTECODE": ""}


def compile_cache_environment(cell: Cell, root: Path | None) -> dict[str, str]:
    """The variables that give a cell its own compile cache under ROOT (the run's, new with
    every run; FrameworkSpec.compile_cache_variable), {} where there is none.

    Why per cell and new per run: round 0 must compile cold, as the user's first run does (its
    cold call is the one reported), and only that cell's later rounds may load its programs.
    Why on a GPU too: XLA autotunes a GPU program's kernels when it compiles it, and on the
    H200 that was most of every jax/keras-jax MNIST worker (17 of 21 s, each round alike):
    later rounds now load round 0's programs, autotuned kernels included, so their drift is
    the runtime's and not the autotuner's choice between processes (docs/methodology.md).
    """
    if root is None:
        return {}
    try:
        spec = registry.load_framework(cell.framework)
    except BadInput:
        return {}
    if not spec.compile_cache_variable:
        return {}
    folder = root / "-".join(part.replace("/", "_").replace(":", "_") for part in
                             (cell.workload, cell.variant, cell.framework, cell.device))
    return {**spec.compile_cache_environment, spec.compile_cache_variable: str(folder)}


def per_cell_variables(framework: str) -> tuple[str, ...]:
    """What a warm process must not see (nor be keyed by): the late variables and the
    framework's compile-cache ones, which differ from cell to cell."""
    try:
        spec = registry.load_framework(framework)
    except BadInput:
        return forkserver.LATE_VARIABLES
    cache = (spec.compile_cache_variable, *spec.compile_cache_environment) \
        if spec.compile_cache_variable else ()
    return (*forkserver.LATE_VARIABLES, *cache)


def warm_environment(framework: str, env: dict[str, str]) -> dict[str, str]:
    """A cell's environment as its framework's warm process gets it (and is keyed by): without
    the variables that differ from cell to cell but the late ones (blanked there)."""
    per_cell = per_cell_variables(framework)
    return {name: value for name, value in env.items()
            if name not in per_cell or name in forkserver.LATE_VARIABLES}


def cell_environment(cell: Cell, extra_pythonpath: tuple[str, ...] = (),
                     settings: Settings | None = None,
                     compile_cache_root: Path | None = None) -> dict[str, str]:
    """The environment a worker starts with: the framework's own variables, GPUs hidden from
    cpu cells, NVLink multicast off, and no HARNESS_* setting (a child gets the run's settings
    on its argument list, harness.core.settings, never from an environment it inherited).
    SETTINGS: the run's (--quick: the framework's quick defaults; the bytecode cache's
    folder); None: this process's environment's.

    Why hide GPUs: a cpu cell that can see a GPU may still create a CUDA context; hiding them
    makes cpu mean cpu. Each framework's variables (TF memory growth, KERAS_BACKEND, JAX
    preallocation) come from its FrameworkSpec, not from here.
    """
    settings = Settings.from_environment() if settings is None else settings
    hidden = variable_names()
    env = {name: value for name, value in os.environ.items() if name not in hidden}
    env.update(framework_environment(cell.framework, env, settings.quick))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(bytecode_environment(cell.framework, env, settings))
    if env.get("PYTHONDONTWRITEBYTECODE") == "":
        del env["PYTHONDONTWRITEBYTECODE"]  # lifted (bytecode_environment)
    env.update(MULTICAST_OFF)
    if cell.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(compile_cache_environment(cell, compile_cache_root))
    paths = [str(PROJECT_ROOT), *extra_pythonpath]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def child_environment() -> dict[str, str]:
    """A framework-free helper child's environment: this process's, the checkout importable."""
    paths = [str(PROJECT_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _stderr_tail(path: Path, chars: int | None = STDERR_TAIL_CHARS) -> str:
    """The end of a child's stderr (None: all of it)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return (text if chars is None else text[-chars:]).strip()


def _crash_reason(returncode: int, stderr_tail: str) -> str:
    """Why a worker died without a result: a signal name, 'out of memory', or stderr's end."""
    if looks_like_oom(stderr_tail):
        prefix = "out of memory"
    elif returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        # SIGKILL with no message is what the kernel's OOM killer leaves behind.
        oom_hint = " (possibly out of host memory)" if name == "SIGKILL" else ""
        prefix = f"killed by {name}{oom_hint}"
    else:
        prefix = f"worker exited with code {returncode}"
    last_lines = " | ".join(stderr_tail.splitlines()[-6:])
    return f"{prefix}: {last_lines}" if last_lines else prefix


Worker = subprocess.Popen | ForkedWorker


def _kill_group(process: Worker) -> None:
    """Stop the worker and anything it started (its own process group), then reap it."""
    interrupt.kill_group(process.pid)
    if isinstance(process, ForkedWorker):
        process.reap(KILL_WAIT_S)
        return
    try:
        process.wait(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        # Why: a KeyboardInterrupt inside Popen.wait can leave Popen's private lock held, and
        # a plain wait() then blocks for ever; reap the killed child directly instead.
        with contextlib.suppress(ChildProcessError):
            os.waitpid(process.pid, 0)


def _wait_for_child(process: Worker, timeout_s: float,
                    on_timeout: Callable[[Worker], None] | None = None,
                    limit: int | None = None) -> tuple[int | None, int | None]:
    """(return code, peak RSS): code None when it ran past timeout_s (its group is then killed,
    after ON_TIMEOUT(process) where given). Past LIMIT resident bytes (the memory guard's, set
    when the child started; None: none) its group is killed and memoryguard.OverMemory raised.

    A stop signal kills the group through interrupt's handler, so this wait returns then too.
    Any exception (KeyboardInterrupt where no handler is installed) kills the group first.
    """
    with interrupt.child_group(process.pid):
        try:
            return _guarded_wait(process, timeout_s, limit)
        except subprocess.TimeoutExpired:
            if on_timeout is not None:
                on_timeout(process)
            _kill_group(process)
            return None, None
        except BaseException:  # OverMemory among them: the group is stopped first
            _kill_group(process)
            raise


def _guarded_wait(process: Worker, timeout_s: float,
                  limit: int | None) -> tuple[int, int | None]:
    """Wait for PROCESS up to TIMEOUT_S (subprocess.TimeoutExpired past it), reading its
    processes' memory every memoryguard.POLL_S meanwhile: memoryguard.OverMemory past LIMIT
    (None: no guard)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        wait_s = left if limit is None else max(0.0, min(memoryguard.POLL_S, left))
        try:
            if isinstance(process, ForkedWorker):
                return process.wait_peak(wait_s)
            return wait_with_peak_rss(process, wait_s)
        except subprocess.TimeoutExpired:
            if limit is None or time.monotonic() >= deadline:
                raise
            held = memoryguard.held_bytes(process.pid)
            if held > limit:
                raise memoryguard.OverMemory(held, limit) from None


def interrupted_reason(signum: signal.Signals) -> str:
    return f"interrupted by {interrupt.describe(signum)}; worker stopped"


def _read_result(path: Path) -> JsonValue:
    """The JSON a child wrote to PATH (None: missing or half-written)."""
    try:
        loaded: JsonValue = json.loads(path.read_text())
        return loaded
    except (OSError, json.JSONDecodeError):
        return None


def _start_child(module: str, args: list[str], framework: str, env: dict[str, str],
                 servers: ForkServers | None, stderr_file: IO[bytes]) -> tuple[Worker, float]:
    """`python -m MODULE *ARGS` in ENV: forked from FRAMEWORK's warm process where there is one,
    else a new interpreter; with the seconds spent starting that warm process for this child."""
    if servers is not None:
        warm_env = warm_environment(framework, env)
        server, started_s = servers.get(framework, framework_preload(framework), warm_env,
                                        PROJECT_ROOT)
        if server is not None:
            try:
                return server.fork(module, args, env, PROJECT_ROOT,
                                   Path(stderr_file.name)), started_s
            except ForkServerLost:
                servers.drop(framework, warm_env)  # this child and the rest start anew
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args], stdin=subprocess.DEVNULL, stdout=stderr_file,
        stderr=stderr_file, env={**env, **lifeline.parent_environment()}, cwd=PROJECT_ROOT,
        start_new_session=True,  # its own process group, so a kill reaches its children
    )
    return process, 0.0


def framework_preload(framework: str) -> tuple[str, ...]:
    """What a framework's warm process imports (FrameworkSpec.preload), then the worker module
    its children run (named here, not by each backend, which reaches the engine only through
    the contract); () for none."""
    try:
        preload = tuple(registry.load_framework(framework).preload)
    except BadInput:
        return ()
    return (*preload, WORKER_MODULE) if preload else ()


def run_worker(cell: Cell, options: RunOptions, servers: ForkServers | None = None) -> CellResult:
    """Start one worker process for CELL and wait for it; always returns a result with a status.

    (The worker's own entry point is harness.run.worker.run_cell; this is its parent's side.)
    SERVERS: the matrix's warm processes, to fork the worker from (forkserver.py); None: a new
    interpreter.

    A stop signal (see harness.core.interrupt) kills the worker; the cell then ends `interrupted`,
    keeping the cases it finished.
    """
    result, forked = _run_worker_once(cell, options, servers)
    if forked and result.status == Status.UNAVAILABLE and cell.device != "cpu":
        # A device a forked worker did not find is looked for again in a new interpreter, so
        # that forking never changes an answer: a warm process that had imported a module
        # which caches "no GPU" (Inductor does) made every GPU cell read unavailable.
        return _run_worker_once(cell, options, None)[0]
    return result


def _run_worker_once(cell: Cell, options: RunOptions,
                     servers: ForkServers | None) -> tuple[CellResult, bool]:
    """run_worker's one attempt: (the result, whether its worker was forked)."""
    with lifeline.scratch_folder("cell") as scratch_dir:
        cell_path, result_path = scratch_dir / "cell.json", scratch_dir / "result.json"
        stderr_path, phase_path = scratch_dir / "stderr.txt", scratch_dir / "phase.json"
        cell_path.write_text(json.dumps(cell.as_dict()))
        spawned = time.time()
        timeout_s, by_deadline = options.worker_timeout()
        with open(stderr_path, "wb") as stderr_file:
            try:
                limit = memoryguard.child_limit()  # what the machine has now, less a margin
                process, shared_start_s = _start_child(
                    options.worker_module,
                    [str(cell_path), str(result_path), options.settings.to_json(),
                     str(phase_path)],
                    cell.framework,
                    cell_environment(cell, options.extra_pythonpath, options.settings,
                                     options.compile_cache_root),
                    servers, stderr_file)
                with watched_phase(options.board, phase_path):
                    returncode, peak_rss = _wait_for_child(process, timeout_s, limit=limit)
            except ForkServerLost as lost:
                return _partial(cell, result_path, Status.ERROR, f"{lost}; worker stopped"), True
            except memoryguard.OverMemory as over:
                return over_memory(cell, result_path, over), isinstance(process, ForkedWorker)
        forked = isinstance(process, ForkedWorker)
        result = read_cell_result(result_path)
        complete = returncode == 0 and result is not None and result.finished is not None
        stop = interrupt.requested()
        if stop is not None and not complete:
            return _partial(cell, result_path, Status.INTERRUPTED,
                            interrupted_reason(stop)), forked
        if returncode is None:
            at = hangs.running_case(cell, len(result.cases) if result is not None else 0)
            why = (options.deadline_reason if by_deadline and options.deadline_reason
                   else f"no result within --timeout {options.timeout_s:g} s{at}")
            return _partial(cell, result_path, Status.TIMEOUT, f"{why}; worker killed"), forked
        if not complete or result is None:
            reason = _crash_reason(returncode, _stderr_tail(stderr_path))
            return with_peak_host_memory(_partial(cell, result_path, Status.ERROR, reason),
                                         peak_rss), forked
        return with_peak_host_memory(
            with_worker_wall(result, spawned, time.time(), forked, shared_start_s),
            peak_rss), forked


@contextlib.contextmanager
def watched_phase(board: PhaseBoard | None, phase_path: Path) -> Iterator[None]:
    """BOARD reads the running worker's phase from PHASE_PATH meanwhile (its progress line)."""
    if board is None:
        yield
        return
    board.worker(phase_path)
    try:
        yield
    finally:
        board.worker(None)


def with_worker_wall(result: CellResult, spawned: float, ended: float, forked: bool = False,
                     shared_start_s: float = 0.0) -> CellResult:
    """The cell's cost (harness.data.results.HarnessCost) from the worker's start to its exit:
    the worker measured itself from run_cell on; Python's start and imports (or the fork), and
    its exit, are seen from here. SHARED_START_S: the warm process started for this cell, which
    the cells after it share (its imports counted once, here)."""
    cost, started, finished = result.cost, result.started, result.finished
    if cost is not None and started is not None and finished is not None:
        phases = dict(cost.phases)
        start_s = max(0.0, started - spawned - shared_start_s)
        if shared_start_s > 0:
            phases["warm process start (python, imports; shared)"] = shared_start_s
        phases["worker fork" if forked else "worker start (python, imports)"] = start_s
        phases["worker exit"] = max(0.0, ended - finished)
        worker = replace(cost, wall_s=max(0.0, ended - spawned), phases=phases, per_worker=[])
        result.cost = replace(worker, per_worker=[worker.worker_record(result.cell.round)])
    return result


def over_memory(cell: Cell, result_path: Path, over: memoryguard.OverMemory) -> CellResult:
    """The cell whose worker the memory guard stopped: the cases it finished, and an error
    naming the size it was at."""
    result = read_cell_result(result_path)
    at = hangs.running_case(cell, len(result.cases) if result is not None else 0)
    return with_peak_host_memory(_partial(cell, result_path, Status.ERROR,
                                          f"{over.reason(at)}; worker killed"), over.held)


def _partial(cell: Cell, result_path: Path, status: Status, reason: str) -> CellResult:
    """Keep the cases a dead worker finished, mark the cell with why it stopped."""
    result = read_cell_result(result_path) or CellResult(cell, status, reason)
    result.status, result.reason, result.finished = status, reason, time.time()
    return result


def run_json_child(module: str, args: list[str], cell: Cell, timeout_s: float,
                   context: RunContext, user_file: Path | None = None,
                   ) -> tuple[JsonObject | None, str]:
    """Run `python -m MODULE *ARGS OUT.json` in CELL's environment and read OUT.json.

    CONTEXT: the run's settings, which reach the child on its argument list (through
    harness.core.settings's entry point, which merges their plugins and then runs MODULE),
    and its warm processes, which the child is forked from where they hold one for CELL.

    For the short helper processes (framework probe, ceilings) that, like workers, must keep
    frameworks out of the parent; like workers they get their own process group, so a timeout
    or a stop signal kills all of them. Returns (document, "") or (None, why there is none).
    USER_FILE: a user's file the child runs; a timeout then names its function that hung
    (harness.run.hangs).
    """
    with lifeline.scratch_folder("child") as scratch:
        out_path, stderr_path = scratch / "out.json", scratch / "stderr.txt"
        with open(stderr_path, "wb") as stderr_file:
            try:
                chosen = context.settings
                process, _ = _start_child(
                    CHILD_MODULE, child_arguments(chosen, module, [*args, str(out_path)]),
                    cell.framework, cell_environment(cell, settings=chosen),
                    context.fork_from, stderr_file)
                returncode, _peak_rss = _wait_for_child(
                    process, timeout_s, lambda child: hangs.ask_for_stack(child.pid, stderr_path),
                    limit=memoryguard.child_limit())
            except ForkServerLost as lost:
                return None, str(lost)
            except memoryguard.OverMemory as over:
                return None, f"{over}; stopped"
        stop = interrupt.requested()
        if stop is not None:
            return None, f"interrupted by {interrupt.describe(stop)}"
        if returncode is None:
            where = hangs.hung_in(_stderr_tail(stderr_path, None), user_file) if user_file \
                else ""
            return None, f"timed out after {timeout_s:g} s" + (f" in {where}" if where else "")
        document = _read_result(out_path)
        if not isinstance(document, dict):  # every child writes one JSON object, or nothing
            return None, " | ".join(_stderr_tail(stderr_path).splitlines()[-3:])
        return document, ""


@dataclass(frozen=True)
class ChildRunner:
    """A run's context as a workload plugin's parent side uses it (workloads/usermodel/plan.py
    Children): its settings, and short children run in a cell's environment by run_json_child.
    Handed to the plugin, so the plugin never imports the runner."""

    context: RunContext

    @property
    def settings(self) -> Settings:
        return self.context.settings

    def run_json_child(self, module: str, args: list[str], cell: Cell, timeout_s: float,
                       user_file: Path | None = None) -> tuple[JsonObject | None, str]:
        return run_json_child(module, args, cell, timeout_s, self.context, user_file)

    def share_imports(self, imported: Iterable[str], modules: Sequence[str]) -> None:
        if self.context.fork_from is not None:
            self.context.fork_from.share_imports(imported, modules)


def prestart_phase(board: PhaseBoard | None,
                   cells: list[Cell]) -> contextlib.AbstractContextManager[None]:
    """The warm processes' start as the board's phase (each imports its framework: seconds)."""
    if board is None:
        return contextlib.nullcontext()
    names = ", ".join(dict.fromkeys(cell.framework for cell in cells
                                    if framework_preload(cell.framework)))
    return board.phase(f"starting the warm processes (importing {names or 'nothing'})")


def run_matrix(cells: list[Cell], options: RunOptions,
               on_result: Callable[[Cell, CellResult], None]) -> bool:
    """Run every cell in order, each in a worker; False if a stop signal ended it early.

    Every cell given gets a worker: the cells the declarations refuse were answered before
    this, without one (harness.api records harness.run.planner.refuse_declared's results).
    """
    # Workers forked from the run's warm processes (a set of the matrix's own where the
    # options hold none); none where the settings say fork_workers False
    # (HARNESS_FORK_WORKERS=0).
    with opened(options.settings, options.servers) as context:
        servers = context.fork_from
        if servers is not None:
            # The GPUs sit idle while the warm processes import: their idle power is measured
            # then (idlechild.py), not in the first round of a GPU cell.
            idle = idlechild.start(cells, options.settings, child_environment())
            wanted = [(cell.framework, framework_preload(cell.framework),
                       warm_environment(cell.framework, cell_environment(
                           cell, options.extra_pythonpath, options.settings,
                           options.compile_cache_root)))
                      for cell in cells]
            with prestart_phase(options.board, cells):
                servers.prestart(wanted, PROJECT_ROOT)
            idlechild.finish(idle)
        for cell in cells:
            if interrupt.requested() is not None:  # arrived between two workers
                return False
            result = run_worker(cell, options, servers)
            on_result(cell, result)
            if result.status == Status.INTERRUPTED:
                return False
    return interrupt.requested() is None

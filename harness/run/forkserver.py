"""Workers forked from a warm process: a framework is imported once per run, not once per cell.

Why: importing torch (with torch.optim, which pulls in torch._dynamo) took 3.2-4.6 s of every
worker on the H100 machine's 16-core host, where Python keeps no bytecode for torch: 23 s of a
120 s `--quick` run of six cells. A warm process imports the framework's `preload` modules
(FrameworkSpec.preload) once and forks one child per cell, so every cell still runs in its own
process, with its own environment, and ends with it; only the imports are shared.

What keeps a fork safe, by construction and checked before every fork:
- only frameworks that declare `preload` are forked, and a preload stops before anything that
  opens a device or initialises a backend (JAX's XLA client, TensorFlow's eager context, TF's
  GPU listing in harness.backends.tensorflow.device): those start thread pools;
- the warm process forks only while it is single-threaded: right before each os.fork it reads
  /proc/self/task, and with any thread besides the main one it refuses (the cell then starts
  a new interpreter, and so do the framework's later cells). Two libraries start a thread at
  import, and both are stopped as they would stop it themselves at fork: numpy's (and
  scipy's) OpenBLAS server threads, through OpenBLAS's own fork hook (blas_thread_shutdown_,
  which its pthread_atfork handler calls; the child starts them again at its first BLAS
  call), and pyarrow's jemalloc background thread (Keras imports pandas, pandas imports
  pyarrow), off in the warm process through JE_ARROW_MALLOC_CONF (jemalloc turns background
  threads off in a forked child anyway, and the worker never allocates through Arrow);
- the warm process starts with every GPU hidden (CUDA_VISIBLE_DEVICES=""), so nothing it
  imports can open a device context that a child would inherit; each child then sets the
  cell's own environment before the worker runs;
- the warm process does nothing but import, fork and reap.

The protocol (JSON lines): the warm process says {"ready": true, "import_s": ...} or
{"ready": false, "reason": ...}; then for each request {"argv", "env", "stderr", "cwd"} it
answers {"pid": ..., "threads_at_fork": 1} at the fork (or {"refused": why} when a thread
besides the main one would be forked) and {"pid": ..., "exit": ..., "peak_rss": ...} when it
has reaped the child. It exits when its stdin closes (the harness is done or gone).

The parent's side (ForkServers, ForkedWorker) imports nothing but the standard library: the
parent never imports a framework.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, TypedDict, cast

from harness.core import lifeline

# Read by a framework when it opens a device, not when it is imported, so a forked child may
# set its own; every other variable must match the warm process's for a cell to be forked.
LATE_VARIABLES = ("CUDA_VISIBLE_DEVICES",)
READY_TIMEOUT_S = 300.0
# Set in the warm process only (each child gets the cell's own environment back): pyarrow's
# jemalloc starts no background thread there (Keras imports pandas, which imports pyarrow);
# Keras on torch takes its default device from KERAS_TORCH_DEVICE instead of asking
# torch.cuda.is_available(), whose driver start leaves a thread even with every GPU hidden
# (the worker chooses again: backends/keras_torch/device.py settle_default_device).
WARM_ONLY_VARIABLES = {"JE_ARROW_MALLOC_CONF": "background_thread:false",
                       "KERAS_TORCH_DEVICE": "cpu"}
# OpenBLAS's own fork hook: it stops the server threads; the next BLAS call starts them again.
OPENBLAS_STOP = "blas_thread_shutdown_"
# How long a stopped thread may take to leave /proc/self/task after it was joined.
THREAD_EXIT_WAIT_S = 1.0


class ForkRequest(TypedDict):
    """One line the parent sends: fork a child that runs `python -m MODULE` (argv[0] = MODULE)."""

    module: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    stderr: str  # the path the child's stdout and stderr go to


class ForkReply(TypedDict, total=False):
    """One line the warm process sends (the module docstring's protocol): ready (with import_s
    or the reason not), a fork refused, the forked pid, or the child's exit and peak RSS."""

    ready: bool
    reason: str
    import_s: float
    refused: str
    pid: int
    threads_at_fork: int
    exit: int
    peak_rss: int | None


# --- the warm process ------------------------------------------------------------------------


def _reply(document: ForkReply) -> None:
    os.write(1, (json.dumps(document) + "\n").encode())


def other_threads() -> list[str]:
    """This process's threads besides the main one, by name (/proc/self/task/*/comm)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        if int(task) == os.getpid():
            continue
        with contextlib.suppress(OSError):  # it ended while we looked
            names.append(Path(f"/proc/self/task/{task}/comm").read_text().strip())
    return names


def stop_openblas_threads() -> None:
    """Stop the server threads of every OpenBLAS loaded here (numpy's, scipy's) the way
    OpenBLAS stops them at each fork (its pthread_atfork handler); the next BLAS call, in
    the child or here, starts them again with the same settings."""
    with open("/proc/self/maps") as maps:
        libraries = {line.split()[-1] for line in maps
                     if "openblas" in line.rsplit("/", 1)[-1].lower()}
    for path in sorted(libraries):
        with contextlib.suppress(OSError):
            stop = getattr(ctypes.CDLL(path), OPENBLAS_STOP, None)
            if stop is not None:
                stop()


def threads_at_fork(wait_s: float = THREAD_EXIT_WAIT_S) -> list[str]:
    """The threads besides the main one that a fork now would copy, after the known ones
    were stopped: [] is the only state a child is forked from."""
    stop_openblas_threads()
    deadline = time.monotonic() + wait_s
    while (names := other_threads()) and time.monotonic() < deadline:
        time.sleep(0.01)  # a joined thread leaves /proc a moment after pthread_join returns
    return names


def threads_refusal(names: list[str]) -> str:
    return (f"{len(names)} thread{'s' if len(names) != 1 else ''} besides the main one "
            f"({', '.join(sorted(names))}) in the warm process: a fork would copy them "
            "half-way through their work")


def _child(request: ForkRequest, server_pid: int) -> None:
    """In the forked child: die with the warm process (SERVER_PID), become the cell's own
    process group with the cell's streams, directory and environment, run the worker module as
    __main__, and never return."""
    code = 1
    try:
        lifeline.die_with_parent(server_pid)
        os.setpgid(0, 0)  # the parent's timeout and stop signals kill this group
        stream = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(stream, 1)
        os.dup2(stream, 2)
        os.close(stream)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[lifeline.PARENT_VARIABLE] = str(server_pid)  # the worker asks again
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        # runpy's note that the worker module was preloaded: expected here, and not the cell's.
        warnings.filterwarnings("ignore", category=RuntimeWarning,
                                message=".*found in sys.modules after import of package.*")
        sys.argv = list(request["argv"])
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever it was, the parent reads it from stderr
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _serve(requests: IO[str]) -> None:
    from harness.measure.memory import rusage_peak_bytes

    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        threads = threads_at_fork()  # read right before the fork
        if threads:
            _reply({"refused": threads_refusal(threads)})
            continue
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            _child(request, server_pid)
        with contextlib.suppress(OSError):  # the child may have set it already
            os.setpgid(pid, pid)
        _reply({"pid": pid, "threads_at_fork": 1 + len(threads)})
        _, status, usage = os.wait4(pid, 0)
        _reply({"pid": pid, "exit": os.waitstatus_to_exitcode(status),
                "peak_rss": rusage_peak_bytes(usage.ru_maxrss)})


def main(argv: list[str]) -> int:
    """`python -m harness.run.forkserver MODULE[,MODULE...]`: import them, then serve."""
    lifeline.die_with_parent()  # dies with the harness, however it ends (lifeline.py)
    # Python 3.12 warns about forking a process with threads; numpy's OpenBLAS server thread
    # is one, and OpenBLAS shuts it down and restarts it around a fork.
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness decides when this ends
    began = time.perf_counter()
    names = list(filter(None, argv[0].split(",")))
    try:
        with unimportable(optional_modules(names)):
            for name in names:
                if not name.startswith((OPTIONAL_PREFIX, SHARED_PREFIX)):
                    importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001 - any failure means: spawn workers instead
        _reply({"ready": False, "reason": f"preload failed: {type(exc).__name__}: {exc}"})
        return 1
    import_shared(shared_modules(names))
    threads = threads_at_fork()  # a preload that started a thread is never forked
    if threads:
        _reply({"ready": False, "reason": threads_refusal(threads)
                + (" (after a model file's modules)" if shared_modules(names) else "")})
        return 1
    # Why: the first full collection in a forked child walked every object the preload made
    # (a Keras-on-JAX warm process: 270k) and wrote to each one's page, copying it: 0.2-0.25 s
    # of every such worker on the H100 host (in whichever phase it fell, a timed call's
    # included). Frozen, they are left to the warm process (Python's advice for fork servers).
    gc.freeze()
    _reply({"ready": True, "import_s": time.perf_counter() - began})
    _serve(sys.stdin)
    return 0


# A preload name that starts with it names an optional module kept unimportable while the
# others import (FrameworkSpec.preload).
OPTIONAL_PREFIX = "!"


# A preload name that starts with it names a model file's module (ForkServers.share_imports),
# imported after the framework's; one that fails to import is left to the workers.
SHARED_PREFIX = "+"


def shared_modules(preload: Sequence[str]) -> list[str]:
    """A model file's modules in a preload (its names with the leading "+")."""
    return [name[1:] for name in preload if name.startswith(SHARED_PREFIX)]


def import_shared(names: Sequence[str]) -> None:
    """Import each of a model file's modules that imports (a failure is the worker's to say,
    as it always was: the file imports it again there), noted on the warm process's log."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - the workers import it themselves
            print(f"warm process: {name} not preloaded: {type(exc).__name__}: {exc}",
                  file=sys.stderr)


def optional_modules(preload: Sequence[str]) -> list[str]:
    """The optional modules a preload keeps out (its names with the leading "!")."""
    return [name[1:] for name in preload if name.startswith(OPTIONAL_PREFIX)]


@contextlib.contextmanager
def unimportable(names: list[str]) -> Iterator[None]:
    """While inside, `import NAME` raises ImportError for each of NAMES not imported yet (a
    None entry in sys.modules, as Python's import system defines it); importable again after,
    so a model file that imports one of them still can."""
    blocked = [name for name in names if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


# --- the parent's side ---------------------------------------------------------------------


class ForkServerLost(RuntimeError):
    """The warm process ended while a worker it forked was still owed an answer."""


class _Lines:
    """Lines from a pipe, each awaited with a deadline (select), so a hung peer is a timeout."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        self._buffer = b""

    def read(self, timeout_s: float) -> ForkReply | None:
        """The next line as JSON; None when none came in time; ForkServerLost at EOF."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([self._fd], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(self._fd, 65536)
            if not chunk:
                raise ForkServerLost("the warm process that forks workers has ended")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return cast(ForkReply, dict(json.loads(line)))  # the warm process writes only these


class ForkedWorker:
    """A worker forked by a warm process: what the runner needs of a Popen (pid, waiting with
    the peak RSS, reaping after a kill), answered by the warm process that reaped it."""

    def __init__(self, pid: int, lines: _Lines, threads_at_fork: int = 1) -> None:
        self.pid = pid
        self.threads_at_fork = threads_at_fork  # the warm process's, read right before
        self.returncode: int | None = None
        self._lines = lines

    def wait_peak(self, timeout_s: float) -> tuple[int, int | None]:
        """(exit code, peak RSS in bytes); subprocess.TimeoutExpired if it runs past timeout_s."""
        answer = self._lines.read(timeout_s)
        if answer is None:
            raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout_s)
        self.returncode = int(answer["exit"])
        peak = answer.get("peak_rss")
        return self.returncode, int(peak) if peak else None

    def reap(self, timeout_s: float) -> None:
        """After its group was killed: take the warm process's answer, so the next is ours."""
        with contextlib.suppress(subprocess.TimeoutExpired, ForkServerLost):
            self.wait_peak(timeout_s)


class ForkServer:
    """One warm process for one (framework, environment)."""

    def __init__(self, preload: tuple[str, ...], env: dict[str, str], cwd: Path,
                 log_path: Path, wait: bool = True) -> None:
        """WAIT False: return once the process is started; wait_ready() takes its answer."""
        self.preload = preload
        self.import_s = 0.0
        self.start_s = 0.0
        self.refused = ""
        self._answered = False
        self._began = time.monotonic()
        warm_env = {**env, **{name: "" for name in LATE_VARIABLES},  # no GPU in the warm one
                    **WARM_ONLY_VARIABLES, **lifeline.parent_environment()}
        self._log = open(log_path, "wb")  # noqa: SIM115 - open for the server's life
        self._process = subprocess.Popen(
            [sys.executable, "-m", "harness.run.forkserver", ",".join(preload)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=warm_env,
            cwd=cwd, start_new_session=True)
        assert self._process.stdout is not None
        self._lines = _Lines(self._process.stdout)
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Take the warm process's ready line (once): its import time, or why it refused."""
        if self._answered:
            return
        self._answered = True
        try:
            ready = self._lines.read(READY_TIMEOUT_S)
        except ForkServerLost:
            ready = {"ready": False, "reason": f"it exited: {self._log_tail()}"}
        if ready is None:
            ready = {"ready": False, "reason": f"not ready within {READY_TIMEOUT_S:g} s"}
        self.start_s = time.monotonic() - self._began
        if ready.get("ready"):
            self.import_s = float(ready.get("import_s") or 0.0)
        else:
            self.refused = str(ready.get("reason") or "not ready")
            self.close()

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return " | ".join(Path(self._log.name).read_text(errors="replace")
                              .strip().splitlines()[-3:])
        return ""

    def fork(self, module: str, args: list[str], env: dict[str, str], cwd: Path,
             stderr_path: Path) -> ForkedWorker:
        """Fork a child that runs `python -m MODULE *ARGS` with ENV; ForkServerLost if the
        warm process is gone."""
        request: ForkRequest = {"module": module, "argv": [module, *args], "env": env,
                                "cwd": str(cwd), "stderr": str(stderr_path)}
        stdin = self._process.stdin
        try:
            assert stdin is not None
            stdin.write((json.dumps(request) + "\n").encode())
            stdin.flush()
        except (OSError, ValueError) as exc:
            raise ForkServerLost(f"the warm process is gone ({exc})") from None
        answer = self._lines.read(READY_TIMEOUT_S)
        if answer is not None and answer.get("refused"):
            self.refused = str(answer["refused"])
            self.close()
            raise ForkServerLost(f"the warm process refused to fork: {self.refused}")
        if answer is None or "pid" not in answer:
            raise ForkServerLost("the warm process did not fork")
        return ForkedWorker(int(answer["pid"]), self._lines,
                            int(answer.get("threads_at_fork") or 1))

    def hang_up(self) -> None:
        """Close its request pipe: the warm process serves no more and exits."""
        with contextlib.suppress(OSError, ValueError):
            if self._process.stdin is not None:
                self._process.stdin.close()

    def close(self) -> None:
        self.hang_up()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()


# A warm process's key: its framework and its environment but for the late variables.
ServerKey = tuple[str, tuple[tuple[str, str], ...]]


def server_key(framework: str, env: dict[str, str]) -> ServerKey:
    """Cells share a warm process when their framework and environment (but for the late
    variables) are the same."""
    shared = tuple(sorted((name, value) for name, value in env.items()
                          if name not in LATE_VARIABLES))
    return framework, shared


class ForkServers:
    """The warm processes of one matrix, started at the first cell that needs each, or all at
    once before a round (prestart); a framework without `preload`, or one whose warm process
    failed, gets spawned workers."""

    def __init__(self, scratch: Path) -> None:
        self._scratch = scratch
        self._servers: dict[ServerKey, ForkServer] = {}
        self.prestart_s = 0.0  # waited in prestart(), all rounds together
        # A model file's top-level imports, and its modules the warm processes import too.
        self._shared: tuple[frozenset[str], tuple[str, ...]] = (frozenset(), ())

    def share_imports(self, imported: Iterable[str], modules: Sequence[str]) -> None:
        """MODULES (a model file's libraries) imported once, before the fork, in the warm
        process of each framework whose preload holds a module the file imports (IMPORTED):
        every worker of a GPT-2 file imported transformers again (step setup 24.2 s of 66 s
        on the H100 host). A warm process they leave with a thread starts again without."""
        self._shared = (frozenset(imported), tuple(modules))

    def _with_shared(self, preload: tuple[str, ...]) -> tuple[str, ...]:
        """PRELOAD and the shared modules where the model file imports one of its modules."""
        imported, modules = self._shared
        roots = {name.lstrip(OPTIONAL_PREFIX).split(".")[0] for name in preload}
        if not preload or not modules or not roots & imported:
            return preload
        return (*preload, *(SHARED_PREFIX + name for name in modules if name not in roots))

    def _without_shared(self, key: ServerKey, framework: str, preload: tuple[str, ...],
                        env: dict[str, str], cwd: Path, wait: bool) -> bool:
        """A warm process that refused with a model file's modules started again without
        them (the framework's own preload); whether it was."""
        server = self._servers.get(key)
        if server is None or not server.refused or not shared_modules(server.preload):
            return False
        self._servers[key], _ = self._open(framework, preload, env, cwd, wait=wait)
        return True

    def record(self) -> dict[str, Any]:
        """What starting the warm processes cost (run.json's `warm_processes`): the seconds
        waited for them before the workers, and each framework's start and own import."""
        frameworks: dict[str, dict[str, float]] = {}
        for (framework, _), server in self._servers.items():
            frameworks[framework] = {"start_s": round(server.start_s, 3),
                                     "import_s": round(server.import_s, 3)}
        return {"prestart_s": round(self.prestart_s, 3), "frameworks": frameworks}

    def get(self, framework: str, preload: tuple[str, ...], env: dict[str, str],
            cwd: Path) -> tuple[ForkServer | None, float]:
        """(the warm process for this cell or None, seconds spent starting it just now)."""
        if not preload:
            return None, 0.0
        key = self._key(framework, env)
        started_now = 0.0
        if key not in self._servers:
            self._servers[key], is_new = self._open(framework, self._with_shared(preload), env,
                                                    cwd, wait=True)
            started_now = self._servers[key].start_s if is_new else 0.0
        self._servers[key].wait_ready()  # one prestart() began
        if self._without_shared(key, framework, preload, env, cwd, wait=True):
            started_now += self._servers[key].start_s
        server = self._servers[key]
        return (None if server.refused else server), started_now

    def _key(self, framework: str, env: dict[str, str]) -> ServerKey:
        """Which warm process serves a cell (server_key); a subclass may key more loosely."""
        return server_key(framework, env)

    def _open(self, framework: str, preload: tuple[str, ...], env: dict[str, str], cwd: Path,
              wait: bool) -> tuple[ForkServer, bool]:
        """(a warm process for a key this set holds none for, whether it was started now):
        here always a new one; a subclass may hand on one that is already warm."""
        log = self._scratch / f"forkserver-{framework}-{len(self._servers)}.log"
        return ForkServer(preload, env, cwd, log, wait=wait), True

    def prestart(self, wanted: list[tuple[str, tuple[str, ...], dict[str, str]]],
                 cwd: Path) -> float:
        """Start the warm processes of every (framework, preload, environment) not started yet,
        all at once, and wait until each is ready; the seconds it took.

        Why all at once: started as each framework's first cell came, the imports ran one
        after another (make demo: five warm processes, 9.5 s of a 68 s run on 2 cores); side
        by side they share the cores. Why wait for all: a worker timed while another process
        imports would be timed on a busy machine."""
        began = time.monotonic()
        started = []
        for framework, preload, env in wanted:
            key = self._key(framework, env)
            if preload and key not in self._servers:
                self._servers[key], is_new = self._open(framework, self._with_shared(preload),
                                                        env, cwd, wait=False)
                if is_new:
                    started.append(self._servers[key])
        for server in started:
            server.wait_ready()
        for framework, preload, env in wanted:
            if self._without_shared(self._key(framework, env), framework, preload, env, cwd,
                                    wait=True):
                started.append(self._servers[self._key(framework, env)])
        waited = time.monotonic() - began if started else 0.0
        self.prestart_s += waited
        return waited

    def refusal(self, framework: str, env: dict[str, str]) -> str:
        """Why this framework's warm process forks no worker ('' where it does or none was
        started)."""
        server = self._servers.get(self._key(framework, env))
        return server.refused if server is not None else ""

    def drop(self, framework: str, env: dict[str, str]) -> None:
        """Forget a warm process that is gone; its cells start new interpreters from now on."""
        server = self._servers.get(self._key(framework, env))
        if server is not None and not server.refused:
            server.refused = "it ended during the run"
            server.close()

    def close(self) -> None:
        open_servers = [server for server in self._servers.values() if not server.refused]
        for server in open_servers:  # all told first: they exit side by side
            server.hang_up()
        for server in open_servers:
            server.close()
        self._servers.clear()

    def __enter__(self) -> ForkServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def warm_processes(fork_workers: bool = True) -> Iterator[ForkServers | None]:
    """A new set of warm processes, closed when the block ends; None where FORK_WORKERS is
    False (the run's settings: HARNESS_FORK_WORKERS=0). Each starts when a child first asks.
    The set is handed on by its opener (harness.run.context.RunContext), never looked up."""
    if not fork_workers:
        yield None
        return
    with lifeline.scratch_folder("warm") as scratch, ForkServers(scratch) as servers:
        yield servers


def exit_now(code: int) -> None:
    """End the warm process without the interpreter's teardown: it holds nothing to tidy (its
    forked workers are reaped, its replies flushed), and tearing down a process with a framework
    loaded took ~0.9 s each on the H100 host: 3.6 s at the end of the demo's run."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))

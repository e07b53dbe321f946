"""Workers forked from a warm process (harness.run.forkserver): each cell still gets its own
process, group, streams and environment; only the framework's imports are shared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core import registry
from harness.run import forkserver
from harness.run.forkserver import (
    ForkServer,
    ForkServerLost,
    ForkServers,
    other_threads,
    server_key,
)
from harness.run.runner import (
    PROJECT_ROOT,
    cell_environment,
    compile_cache_environment,
    framework_preload,
    run_matrix,
    run_worker,
)
from harness.spec import Cell, Status
from tests.in_subprocess import installed
from tests.quick_options import quick_options
from tests.warm_pool import PooledRun, WarmProcessPool

PRELOAD = ("tests.fakes.backend.device",)


def describe(server: ForkServer, tmp_path: Path, env: dict[str, str], name: str) -> dict:
    out, stream = tmp_path / f"{name}.json", tmp_path / f"{name}.txt"
    worker = server.fork("tests.fakes.helper_child", ["describe", str(out)], env, tmp_path,
                         stream)
    code, peak_rss = worker.wait_peak(30)
    assert code == 0 and peak_rss is not None and peak_rss > 1e6
    document = json.loads(out.read_text())
    document["stream"] = stream.read_text()
    return document


def test_each_child_has_its_own_process_group_environment_and_streams(tmp_path: Path) -> None:
    env = cell_environment(Cell("fault", "ok", "fake", "cuda:0"))
    env["CUDA_VISIBLE_DEVICES"] = "0"
    server = ForkServer(PRELOAD, env, PROJECT_ROOT, tmp_path / "warm.log")
    try:
        assert not server.refused and server.import_s >= 0
        gpu = describe(server, tmp_path, env, "gpu")
        cpu = describe(server, tmp_path, {**env, "CUDA_VISIBLE_DEVICES": ""}, "cpu")
    finally:
        server.close()
    assert gpu["pid"] != cpu["pid"] and gpu["pid"] != os.getpid()
    assert gpu["pgid"] == gpu["pid"] and cpu["pgid"] == cpu["pid"]  # a kill reaches its group
    assert gpu["preloaded"] and cpu["preloaded"]  # imported once, by the warm process
    # The warm process saw no GPU; each child gets the cell's own value back.
    assert gpu["env"]["CUDA_VISIBLE_DEVICES"] == "0" and cpu["env"]["CUDA_VISIBLE_DEVICES"] == ""
    assert gpu["cwd"] == str(tmp_path)
    assert gpu["argv"][1:] == ["describe", str(tmp_path / "gpu.json")]
    assert gpu["stream"] == "to the cell's stream\n"


def test_a_preloads_optional_module_stays_out_of_it_and_importable_after(tmp_path: Path) -> None:
    env = cell_environment(Cell("fault", "ok", "fake", "cpu"))
    answers = {}
    for preload in (("tests.fakes.optional_import",),
                    ("!colorsys", "tests.fakes.optional_import")):
        server = ForkServer(preload, env, PROJECT_ROOT, tmp_path / "warm.log")
        try:
            out = tmp_path / "optional.json"
            worker = server.fork("tests.fakes.helper_child", ["optional", str(out)], env,
                                 tmp_path, tmp_path / "stream.txt")
            assert worker.wait_peak(30)[0] == 0
            answers[preload[0]] = json.loads(out.read_text())
        finally:
            server.close()
    assert answers["tests.fakes.optional_import"]["found_at_preload"] is True
    kept_out = answers["!colorsys"]
    assert kept_out["found_at_preload"] is False  # its guarded import failed in the preload
    assert kept_out["importable"] is True  # a model file may import it in the worker
    # The preload's objects are frozen before the first fork: a child's full collection
    # leaves them (and their pages) alone.
    assert kept_out["frozen"] > 1000


def test_a_spawned_worker_imports_its_framework_without_the_optional_modules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As its warm process would (a SLURM task, a DDP rank): kept out of the framework's
    import, importable again after it."""
    from harness.core.settings import Settings
    from harness.run import worker

    optional = "tests.fakes.optional_import"
    monkeypatch.delitem(sys.modules, optional, raising=False)
    spec = replace(registry.load_framework("fake"), preload=(f"!{optional}",))
    monkeypatch.setattr(worker, "load_framework", lambda name: spec)
    blocked_at_import = []

    def importing(framework: str, part: str):
        blocked_at_import.append(sys.modules.get(optional, "not imported") is None)
        return registry.backend_module(framework, part)

    monkeypatch.setattr(worker, "backend_module", importing)
    cell = Cell("fault", "ok", "fake", "cpu", {"size": [1], "pid_file": ""})
    worker.run_cell(cell, tmp_path / "result.json", Settings(quick=True, attempts=1))
    assert blocked_at_import == [True]
    assert sys.modules.get(optional, "not imported") is not None  # importable again


def test_a_preload_that_fails_leaves_workers_spawned(tmp_path: Path) -> None:
    env = cell_environment(Cell("fault", "ok", "fake", "cpu"))
    with ForkServers(tmp_path) as servers:
        server, started_s = servers.get("fake", ("harness_no_such_module",), env, PROJECT_ROOT)
        assert server is None and started_s > 0
        assert servers.get("fake", (), env, PROJECT_ROOT) == (None, 0.0)


def test_cells_share_a_warm_process_only_when_their_environments_match() -> None:
    cpu = cell_environment(Cell("fault", "ok", "fake", "cpu"))
    gpu = cell_environment(Cell("fault", "ok", "fake", "cuda:0"))
    assert server_key("fake", cpu) == server_key("fake", gpu)  # only the GPUs differ
    assert server_key("fake", cpu) != server_key("fake", {**cpu, "OMP_NUM_THREADS": "1"})
    assert server_key("fake", cpu) != server_key("other", cpu)


@pytest.mark.fresh_warm_processes
def test_a_matrix_forks_every_cell_from_one_warm_process_and_counts_its_start_once() -> None:
    cells = [Cell("fault", variant, "fake", "cpu", {"size": [1], "pid_file": ""})
             for variant in ("ok", "error", "ok")]
    results = []
    assert run_matrix(cells, quick_options(60), lambda cell, result: results.append(result))
    assert [result.status for result in results] == [Status.OK, Status.OK, Status.OK]
    phases = [result.cost.phases for result in results if result.cost is not None]
    assert len(phases) == 3 and all("worker fork" in cell for cell in phases)
    # started before the first worker (ForkServers.prestart), so no cell carries its imports
    shared = [cell.get("warm process start (python, imports; shared)", 0.0) for cell in phases]
    assert shared == [0.0, 0.0, 0.0]


def test_a_matrix_starts_every_warm_process_before_its_first_worker(tmp_path: Path) -> None:
    """All at once (the imports share the cores), each ready before any worker is timed; one
    already started is not started again."""
    env = cell_environment(Cell("fault", "ok", "fake", "cpu"))
    wanted = [("fake", PRELOAD, env), ("fake", PRELOAD, {**env, "OTHER_SETTING": "1"}),
              ("fake", PRELOAD, env), ("numpy", (), env)]
    with ForkServers(tmp_path) as servers:
        assert servers.prestart(wanted, PROJECT_ROOT) > 0
        assert len(servers._servers) == 2  # two environments; numpy declares no preload
        assert all(server._answered and not server.refused
                   for server in servers._servers.values())
        assert servers.prestart(wanted, PROJECT_ROOT) == 0.0
        server, started_now = servers.get("fake", PRELOAD, env, PROJECT_ROOT)
        assert server is not None and started_now == 0.0


def test_fork_workers_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_FORK_WORKERS", "0")
    cells = [Cell("fault", "ok", "fake", "cpu", {"size": [1], "pid_file": ""})]
    results = []
    run_matrix(cells, quick_options(60), lambda cell, result: results.append(result))
    assert results[0].cost is not None
    assert "worker start (python, imports)" in results[0].cost.phases


# --- every framework whose workers are forked ----------------------------------------------

MNIST = ("mnist-small", "as-written",
         {"batch_size": [32], "epochs": 2, "train_samples": 256, "test_samples": 100})
MATMUL = ("matmul", "fp32", {"n": [64]})
# A small cell of each framework that declares a preload, the workload it is used for.
FORKED = {"torch": MATMUL, "jax": MATMUL, "tensorflow": MATMUL,
          "keras-jax": MNIST, "keras-torch": MNIST, "keras-tensorflow": MNIST}


def test_every_framework_that_is_forked_is_compared_with_a_new_interpreter() -> None:
    assert {name for name in registry.BUILTIN_FRAMEWORKS if framework_preload(name)} == set(FORKED)


def answers(result) -> dict:
    """What a worker answered, without its clock: statuses, checks, versions, devices."""
    return {"status": result.status, "reason": result.reason,
            "cases": [(case.case, case.status, case.reason, case.check) for case in result.cases],
            "version": result.framework_version, "threads": result.threads,
            "device": result.device_name}


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(FORKED))
def test_a_forked_worker_answers_as_a_new_interpreter_does(framework: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            warm_pool: WarmProcessPool,
                                                            ) -> None:
    """Same checks, same statuses, same results (the check's measured error or accuracy,
    exactly); and the warm process had no thread but its main one when it forked.

    The warm process is leased from the session's pool, as every run of the suite's is (one
    that served earlier tests forks as a new one does: tests/warm_pool.py), so the framework
    is imported once more here, by the new interpreter, not twice."""
    monkeypatch.setenv("HARNESS_ATTEMPTS", "1")
    workload, variant, params = FORKED[framework]
    cell = Cell(workload, variant, framework, "cpu", params)
    options = quick_options(300)
    spawned = run_worker(cell, options, None)
    with PooledRun(warm_pool) as servers:
        forked = run_worker(cell, options, servers)
        env = cell_environment(cell)
        assert servers.refusal(framework, env) == ""
        server, _ = servers.get(framework, framework_preload(framework), env, PROJECT_ROOT)
        assert server is not None
        child = server.fork("tests.fakes.helper_child", ["describe", str(tmp_path / "d.json")],
                            env, tmp_path, tmp_path / "d.txt")
        assert child.wait_peak(60)[0] == 0
    assert child.threads_at_fork == 1  # read in the warm process right before os.fork
    # Keras' optional imports stay out wherever Keras is imported, TensorFlow's own import too
    # (tf.keras is Keras 3); the JAX frameworks need JAX.
    modules = set(json.loads((tmp_path / "d.json").read_text())["modules"])
    kept_out = {"sklearn"} if "jax" in framework else {"sklearn", "jax"}
    assert not modules & kept_out, modules
    assert spawned.status == Status.OK, spawned.reason
    assert answers(forked) == answers(spawned)
    assert forked.cost is not None and spawned.cost is not None
    assert "worker fork" in forked.cost.phases
    assert "worker start (python, imports)" in spawned.cost.phases


# --- a cell's own compile cache, new with each run --------------------------------------

def test_each_cell_of_a_caching_framework_gets_its_own_compile_cache(tmp_path: Path) -> None:
    jax_cell = Cell("matmul", "fp32", "jax", "cpu", {"n": [64]})
    folders = {compile_cache_environment(cell, tmp_path)["JAX_COMPILATION_CACHE_DIR"]
               for cell in (jax_cell, replace(jax_cell, variant="bf16"),
                            replace(jax_cell, framework="keras-jax"),
                            replace(jax_cell, round=2))}
    assert len(folders) == 3  # a later round shares its cell's, no other cell does
    assert all(Path(folder).parent == tmp_path for folder in folders)
    assert compile_cache_environment(jax_cell, tmp_path)[
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    # a GPU cell's later rounds load its autotuned programs too (17 of 21 s per H200 worker)
    gpu_cell = replace(jax_cell, device="cuda:0")
    assert compile_cache_environment(gpu_cell, tmp_path)["JAX_COMPILATION_CACHE_DIR"] == \
        compile_cache_environment(replace(gpu_cell, round=1), tmp_path)[
            "JAX_COMPILATION_CACHE_DIR"] not in folders
    # none for torch, or without a run's root
    assert compile_cache_environment(replace(jax_cell, framework="torch"), tmp_path) == {}
    assert compile_cache_environment(jax_cell, None) == {}
    assert "JAX_COMPILATION_CACHE_DIR" not in cell_environment(jax_cell)


@pytest.mark.slow
def test_forked_and_new_jax_workers_fill_their_cells_cache_and_share_one_warm_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forked worker imported jax before its cache variables were set: it must take the
    cache up all the same (backends/jax/device.py use_compile_cache), and cells whose caches
    differ still fork from one warm process."""
    monkeypatch.setenv("HARNESS_ATTEMPTS", "1")
    root = tmp_path / "compiled"
    options = quick_options(300, compile_cache_root=root)
    cells = [Cell("matmul", "fp32", "jax", "cpu", {"n": [n]}) for n in (64, 96)]
    defaults = {name: param.default for name, param in
                registry.load_workload("elementwise").params.items()}
    cells[1] = Cell("elementwise", "compiled", "jax", "cpu",
                    {**defaults, "elements": [1000], "iterations": 10})
    spawned = run_worker(replace(cells[0], round=1), options, None)
    with ForkServers(tmp_path) as servers:
        forked = [run_worker(cell, options, servers) for cell in cells]
        assert len(servers._servers) == 1
    assert [r.status for r in [spawned, *forked]] == [Status.OK] * 3, [r.reason for r in forked]
    assert all(result.cost is not None and "worker fork" in result.cost.phases
               for result in forked)
    for cell in cells:
        folder = Path(compile_cache_environment(cell, root)["JAX_COMPILATION_CACHE_DIR"])
        assert folder.is_dir() and any(folder.iterdir()), folder


# --- a thread in the warm process: never forked --------------------------------------------

def test_other_threads_sees_a_thread_of_this_process() -> None:
    before = len(other_threads())
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        assert len(other_threads()) == before + 1
    finally:
        stop.set()
        thread.join()


def warm_env(tmp_path: Path, module: str, code: str) -> dict[str, str]:
    """A cell environment whose PYTHONPATH holds MODULE (written here) first."""
    (tmp_path / f"{module}.py").write_text(code)
    env = cell_environment(Cell("fault", "ok", "fake", "cpu"))
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    return env


def test_a_preload_that_starts_a_thread_is_never_forked(tmp_path: Path) -> None:
    env = warm_env(tmp_path, "thread_at_import", "import threading, time\n"
                   "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    with ForkServers(tmp_path) as servers:
        server, _ = servers.get("fake", ("thread_at_import",), env, PROJECT_ROOT)
        assert server is None  # its cells start new interpreters
    server = ForkServer(("thread_at_import",), env, PROJECT_ROOT, tmp_path / "warm.log")
    assert "1 thread besides the main one" in server.refused


def test_a_thread_started_after_the_imports_stops_the_next_fork(tmp_path: Path) -> None:
    """The check runs before every fork, not only once the imports are done."""
    started = tmp_path / "thread-started"
    env = warm_env(tmp_path, "thread_later", "import pathlib, signal, threading, time\n"
                   "def start(*_):\n"
                   "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                   f"    pathlib.Path({str(started)!r}).touch()\n"
                   "signal.signal(signal.SIGALRM, start)\n"
                   "signal.setitimer(signal.ITIMER_REAL, 1.0)\n")
    server = ForkServer(("thread_later",), env, PROJECT_ROOT, tmp_path / "warm.log")
    assert not server.refused
    # The alarm starts a thread in the waiting warm process, which says so: waited for, not
    # slept on, since a loaded machine may run the handler late (issue 50).
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "the warm process never ran its alarm"
    with pytest.raises(ForkServerLost, match="refused to fork: 1 thread"):
        server.fork("tests.fakes.helper_child", ["describe", str(tmp_path / "d.json")], env,
                    tmp_path, tmp_path / "d.txt")
    assert "besides the main one" in server.refused


SETTLE_CHECK = """
import os
os.environ["KERAS_TORCH_DEVICE"] = "cpu"  # as the warm process imports Keras
from harness.backends.keras_torch import device
from keras.src.backend.torch import core
import torch
os.environ["KERAS_TORCH_DEVICE"] = "meta"  # a user's own choice, in the worker's environment
device.settle_default_device()
assert core.DEFAULT_DEVICE == "meta", core.DEFAULT_DEVICE
del os.environ["KERAS_TORCH_DEVICE"]  # none: Keras' own choice, from this process's GPUs
device.settle_default_device()
assert core.DEFAULT_DEVICE == ("cuda" if torch.cuda.is_available() else "cpu"), core.DEFAULT_DEVICE
"""


@pytest.mark.slow
def test_a_keras_torch_worker_chooses_its_default_device_from_its_own_environment() -> None:
    """The warm process imports Keras with KERAS_TORCH_DEVICE=cpu (asking torch for CUDA
    there started a driver thread, and no keras-torch worker was forked on the H200 host); the
    forked worker must choose again as Keras would, or a GPU cell's unscoped tensors would
    stay on the CPU."""
    if not (installed("torch") and installed("keras")):
        pytest.skip("torch or keras is not installed")
    assert forkserver.WARM_ONLY_VARIABLES["KERAS_TORCH_DEVICE"] == "cpu"
    env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run([sys.executable, "-c", SETTLE_CHECK], env=env, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_warm_process_ends_without_the_interpreters_teardown(tmp_path: Path) -> None:
    """Closing the set ends every warm process at once and skips its teardown (a framework's
    exit handlers took ~0.9 s a process on the H100 host): an exit handler its preload
    registered never runs, and both processes are gone when close returns."""
    marker = tmp_path / "teardown-ran"
    env = warm_env(tmp_path, "exit_handler", "import atexit, pathlib\n"
                   f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'ran')\n")
    servers = ForkServers(tmp_path)
    first, _ = servers.get("fake", ("exit_handler",), env, PROJECT_ROOT)
    second, _ = servers.get("other", ("exit_handler",), {**env, "OTHER": "1"}, PROJECT_ROOT)
    assert first is not None and second is not None and first is not second
    servers.close()
    assert first._process.returncode == 0 and second._process.returncode == 0
    assert not marker.exists()

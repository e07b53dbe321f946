"""The cold call is the case's true first call: kept across retries, graph capture included.

Why: an audit found a compiled cell timed 3 times (contended) reporting its LAST attempt's
first call as cold (3.1 ms) while its real first call compiled for ~10 s, and cuda-graph cells
whose capture ran in make_task, before the call timed as cold (cold = 1.08x warm).

The worker is driven in-process with stub tasks (no framework); the torch helpers that defer a
CUDA graph's capture run in a child process (tests/in_subprocess.py) with a stand-in capture,
since CI has no GPU: what is proven is where the capture happens and which clock sees it.
"""

from __future__ import annotations

import ast
import time
from types import SimpleNamespace
from typing import Any

import pytest

from harness.core import registry
from harness.core.settings import Settings
from harness.measure import hostload
from harness.measure.timing import TimingPolicy
from harness.run import caserun
from harness.spec import Cell, Status
from tests.in_subprocess import PROJECT_ROOT, installed, run_check

# The one-time work of a first call (a compile, a capture): long against a warm call.
FIRST_CALL_S = 0.6  # a warm sample 200 times a warm call: no stall of a loaded machine reaches it
WARM_CALL_S = 0.001


class ProcessCache:
    """What a framework keeps per process (compiled code, cuBLAS handles): only the first
    call of the process pays for it; a task built again (a retry) finds it warm."""

    def __init__(self) -> None:
        self.warm = False

    def first_call_work(self) -> None:
        if not self.warm:
            time.sleep(FIRST_CALL_S)
            self.warm = True


class CompiledSumTask:
    """A step whose first call in the process compiles; its output passes the fault check."""

    def __init__(self, values: list[int], cache: ProcessCache) -> None:
        self.values, self.cache, self.total = values, cache, None

    def step(self) -> None:
        self.cache.first_call_work()
        time.sleep(WARM_CALL_S)
        self.total = sum(self.values)

    def output(self) -> dict[str, Any]:
        return {"total": self.total}


def compiled_module(cache: ProcessCache) -> Any:
    def make_task(case: dict, variant: str, device: Any, inputs: dict) -> CompiledSumTask:
        return CompiledSumTask(inputs["values"], cache)

    return SimpleNamespace(__name__="tests.test_cold_call.compiled", make_task=make_task)


class CpuDevice:
    is_gpu = False
    description = "stub cpu"

    def synchronize(self) -> None:
        pass

    def peak_memory_bytes(self) -> int | None:
        return None


class ContendedWatch:
    """A CaseWatch stand-in: the first `contended` timings of a case saw a throttled GPU."""

    def __init__(self, contended: int) -> None:
        self.contended, self.timings = contended, 0

    def start_case(self) -> None:
        self.timings += 1

    def attach(self, step: Any, synchronize: Any) -> None:
        pass

    def begin(self) -> None:
        pass

    def end(self, calls: int) -> None:
        pass

    def finish_case(self, *args: Any, **kwargs: Any) -> tuple[dict[str, Any], str]:
        return {}, "GPU throttled (stub)" if self.timings <= self.contended else ""


def run_compiled_case(monkeypatch: pytest.MonkeyPatch, contended: int) -> Any:
    monkeypatch.setenv("HARNESS_ATTEMPTS", "3")  # the default, not the suite's one attempt
    monkeypatch.setattr(caserun, "QUICK_RETRY_PAUSE_S", 0.0)
    # Contention comes from the stub watch alone: the suite's other processes on these cores
    # would make every attempt contended (no host load read: None, as where /proc is absent).
    monkeypatch.setattr(hostload, "other_load", lambda *args: None)
    spec = registry.load_workload("fault")
    cell = Cell("fault", "ok", "fake", "cpu", {"size": [1], "pid_file": ""})
    case = {"size": 1, "pid_file": ""}
    context = caserun.CellContext(spec, compiled_module(ProcessCache()), cell, CpuDevice(),
                                  ContendedWatch(contended), settings=Settings(quick=True))
    return caserun.run_case(context, caserun.CasePlan(case))


def test_a_retried_case_keeps_the_first_attempts_cold_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Attempt 1 compiled and was contended; attempt 2 (kept) found the compile warm."""
    record = run_compiled_case(monkeypatch, contended=1)
    assert record.status == Status.OK, record.reason
    assert [attempt.kept for attempt in record.attempts] == [False, True]
    assert record.cold_seconds is not None and record.cold_seconds >= FIRST_CALL_S
    # The kept attempt's samples are warm calls: the compile is in none of them.
    assert max(record.samples) < FIRST_CALL_S / 3


def test_every_attempt_contended_still_reports_the_first_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    record = run_compiled_case(monkeypatch, contended=3)
    assert len(record.attempts) == 3 and record.attempts[-1].kept
    assert "contended in all 3 attempts" in record.suspect
    assert record.cold_seconds is not None and record.cold_seconds >= FIRST_CALL_S


def test_one_uncontended_attempt_reports_its_own_first_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    record = run_compiled_case(monkeypatch, contended=0)
    assert record.attempts == []  # one attempt: none listed
    assert record.cold_seconds is not None and record.cold_seconds >= FIRST_CALL_S


# --- a CUDA graph's capture is in the cold call (checks run in a child: they import torch) -----

class FakeGraph:
    """Stands in for torch.cuda.CUDAGraph: replaying it runs the warm call."""

    def __init__(self) -> None:
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1
        time.sleep(WARM_CALL_S)


def slow_capture(log: list[str]) -> Any:
    """A stand-in for capture_cuda_graph: its warm-up calls and capture take FIRST_CALL_S."""
    def capture() -> tuple[FakeGraph, str]:
        log.append("captured")
        time.sleep(FIRST_CALL_S)
        return FakeGraph(), "static output"
    return capture


def check_capture_is_in_the_cold_call() -> None:
    """Child process: a task replaying a CapturedOnFirstCall, timed by the worker's own path
    (make_task, then the timing core): building the task captures nothing, the cold call
    holds the capture, no warm sample does."""
    from harness.backends.torch.graphs import CapturedOnFirstCall

    log: list[str] = []

    class GraphTask:
        def __init__(self) -> None:
            self.graph = CapturedOnFirstCall(lambda: None, capture=slow_capture(log),
                                             after_capture=lambda: log.append("restored"))
            self.result: Any = None

        def step(self) -> None:
            self.result = self.graph()

        def output(self) -> dict[str, Any]:
            return {"result": self.result}

    def make_task(case: dict, variant: str, device: Any, inputs: dict) -> GraphTask:
        task = GraphTask()
        assert log == [], "make_task captured the graph: its cost would be in no timed figure"
        return task

    spec = registry.load_workload("matmul")
    module = SimpleNamespace(__name__="graph-stub", make_task=make_task)
    measurement, output, _ = caserun.measure_case(
        spec, module, {"n": 2}, "fp32-graph", CpuDevice(), {}, TimingPolicy.quick())
    assert log == ["captured", "restored"], log  # once, in the first call
    assert output["result"] == "static output"
    assert measurement.cold_seconds >= FIRST_CALL_S, measurement
    assert max(measurement.samples) < FIRST_CALL_S / 3, measurement.samples


def check_user_model_graph_captures_in_its_first_step() -> None:
    """Child process: a user model's cuda-graph task captures in its first step(), and a
    capture torch refuses is still a VariantUnavailable, not the user's error."""
    from harness.backend import VariantUnavailable
    from harness.backends.torch.graphs import CapturedOnFirstCall
    from harness.backends.torch.usermodel import GraphModelTask

    log: list[str] = []
    graph = CapturedOnFirstCall(lambda: None, capture=slow_capture(log))
    task = GraphModelTask(graph, "model.py", 1, lambda value: value, lambda value: value)
    assert log == []
    started = time.perf_counter()
    assert task.step() == "static output"
    assert time.perf_counter() - started >= FIRST_CALL_S and log == ["captured"]
    started = time.perf_counter()
    task.step()
    assert time.perf_counter() - started < FIRST_CALL_S / 3 and log == ["captured"]

    def refused() -> tuple[FakeGraph, Any]:
        raise VariantUnavailable("CUDA graph capture failed here: operation not permitted")

    failing = GraphModelTask(CapturedOnFirstCall(lambda: None, capture=refused), "model.py", 1,
                             lambda value: value, lambda value: value)
    try:
        failing.step()
    except VariantUnavailable:
        pass
    else:
        raise AssertionError("a refused capture must make the variant unavailable")
    assert not failing.graph.captured  # nothing half-kept: a later call tries again


torch_only = pytest.mark.skipif(not installed("torch"), reason="torch not installed")


@torch_only
def test_a_cuda_graphs_capture_is_timed_in_the_cold_call() -> None:
    run_check("tests.test_cold_call", "check_capture_is_in_the_cold_call()", framework="torch")


@torch_only
def test_a_user_models_cuda_graph_is_captured_by_its_first_step() -> None:
    run_check("tests.test_cold_call", "check_user_model_graph_captures_in_its_first_step()",
              framework="torch")


# --- where backends capture: never while the task is built -----------------------------------

# Deferred by construction: the helper captures inside its first call; MNIST's training step
# captures after its eager warm-up batches, inside its first epoch.
DEFERRED_CAPTURES = {("backends/torch/graphs.py", "CapturedOnFirstCall.__init__.<lambda>"),
                     ("backends/torch/mnist.py", "GraphTraining.graph_step")}
# Not a task at all: `harness profile-device` captures a graph of N tiny kernels to time its
# replay per kernel; no cell's time is made there.
DEVICE_PROFILE_CAPTURES = {("backends/torch/gpuprofile.py", "graph_replay")}


def capture_sites() -> set[tuple[str, str]]:
    """(file, enclosing class.function[.<lambda>]) of every capture_cuda_graph call in backends."""
    sites = set()
    for path in sorted((PROJECT_ROOT / "backends").rglob("*.py")):
        relative = path.relative_to(PROJECT_ROOT).as_posix()
        sites |= {(relative, where) for where in _calls_in(ast.parse(path.read_text()))}
    return sites


def _calls_in(node: ast.AST, scope: tuple[str, ...] = ()) -> list[str]:
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            found += _calls_in(child, (*scope, child.name))
        elif isinstance(child, ast.Lambda):
            found += _calls_in(child, (*scope, "<lambda>"))
        else:
            if isinstance(child, ast.Call) and getattr(child.func, "id", "") == \
                    "capture_cuda_graph":
                found.append(".".join(scope))
            found += _calls_in(child, scope)
    return found


def test_no_backend_captures_a_cuda_graph_while_building_its_task() -> None:
    sites = capture_sites()
    assert sites >= DEFERRED_CAPTURES  # the scan sees the deferred ones
    assert sites - DEFERRED_CAPTURES - DEVICE_PROFILE_CAPTURES == set(), \
        "a new capture outside a first call: its cost would be in no timed figure"


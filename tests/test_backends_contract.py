"""The plugin contract: every declared implementation resolves and has what the worker calls,
and every declared capability holds: what the planner lets through, the worker runs; what it
refuses, it refuses with the declared reason and without starting a worker.

Parametrized over every registered workload x framework (built-ins, entry points and the test
plugin alike). Each framework's modules are imported in a child process of their own, as in a
real run: TensorFlow and torch never share an interpreter, and this process imports neither.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from harness.core import registry
from harness.run import planner
from harness.run.runner import cell_environment
from harness.spec import Cell, WorkloadSpec

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PAIRS = [(workload, framework) for workload in registry.WORKLOADS
         for framework in registry.load_workload(workload).frameworks]
FRAMEWORKS = sorted({framework for _, framework in PAIRS} | set(registry.BUILTIN_FRAMEWORKS))

# Runs in the child, one per framework (its import paid once for both halves): first, per
# workload, what its implementation module exposes (written to argv[2] before any cell runs);
# then, where the framework is installed, the worker's own run_cell for each cell of argv[3],
# each result written to argv[4] as it comes. argv[5]: this process's plugin modules (the
# child's environment has no HARNESS_*), so the contract covers the test plugin's pairs too.
CHILD = """
import importlib, json, pathlib, sys, tempfile, time, traceback
from harness.core import registry
framework = sys.argv[1]
report_path, cells_path, out = (pathlib.Path(arg) for arg in sys.argv[2:5])
registry.use_plugins([name for name in sys.argv[5].split(",") if name])
report = {"installed": registry.framework_installed(framework)[0], "modules": {}}
if report["installed"]:
    device = registry.backend_module(framework, "device")
    report["device"] = [name for name in ("version", "threads", "list_devices", "open_device")
                        if callable(getattr(device, name, None))]
    for workload in registry.WORKLOADS:
        spec = registry.load_workload(workload)
        if framework not in spec.frameworks:
            continue
        name = registry.implementation_name(spec, framework)
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            report["modules"][workload] = {"module": name, "error": repr(exc)}
            continue
        entry = "measure" if spec.run.timing == "measure" else "make_task"
        report["modules"][workload] = {"module": name, "entry": entry,
                                       "callable": callable(getattr(module, entry, None))}
report_path.write_text(json.dumps(report))
if not report["installed"]:
    sys.exit(0)
from harness.core.settings import Settings
from harness.run.worker import run_cell
from harness.spec import Cell
cells, results = json.loads(cells_path.read_text()), {}
out.write_text(json.dumps(results))  # a framework without cpu cells has its (empty) answer
with tempfile.TemporaryDirectory() as scratch:
    for index, fields in enumerate(cells):
        cell, path = Cell(**fields), pathlib.Path(scratch) / f"{index}.json"
        key, started = fields["workload"] + "/" + fields["variant"], time.perf_counter()
        try:
            # The child's environment has no HARNESS_*: one attempt, as the suite's own
            # (conftest.py), so the other pytest process's load is not timed three times over.
            run_cell(cell, path, Settings(quick=True, attempts=1))
            document = json.loads(path.read_text())
            results[key] = {"status": document["status"], "reason": document["reason"],
                            "cases": [case["status"] for case in document["cases"]]}
        except Exception as exc:
            traceback.print_exc()
            results[key] = {"status": "error", "reason": repr(exc), "cases": []}
        results[key]["seconds"] = round(time.perf_counter() - started, 1)  # to see what is slow
        out.write_text(json.dumps(results))
"""


@cache
def framework_child(framework: str, scratch: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the framework's modules expose, each runnable cpu cell's worker result), from one
    child process: the framework is imported once for the contract and the cells alike."""
    cells = runnable_on_cpu(framework)
    paths = [scratch / f"{framework}-{name}.json" for name in ("modules", "cells", "results")]
    paths[1].write_text(json.dumps([cell.as_dict() for cell in cells]))
    env = cell_environment(Cell("contract", "-", framework, "cpu"))
    # torch.compile stays in the code path but compiles nothing: the contract asks whether the
    # worker accepts the variant, and Inductor's C++ build takes minutes on a busy CPU.
    env["TORCH_COMPILE_DISABLE"] = "1"
    completed = subprocess.run([sys.executable, "-c", CHILD, framework, *map(str, paths),
                                ",".join(registry.PLUGINS_LOADED)], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=900, env=env)
    assert paths[0].exists(), completed.stderr[-3000:]
    report = json.loads(paths[0].read_text())
    if not report["installed"]:
        return report, {}
    assert paths[2].exists(), completed.stderr[-3000:]
    return report, json.loads(paths[2].read_text())


def child_report(framework: str, scratch: Path) -> dict[str, Any]:
    return framework_child(framework, scratch)[0]


def worker_report(framework: str, scratch: Path) -> dict[str, Any]:
    return framework_child(framework, scratch)[1]


@pytest.fixture(scope="module")
def worker_scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("contract-workers")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_framework_spec_loads_and_its_device_module_has_the_contract(
        framework: str, worker_scratch: Path) -> None:
    spec = registry.load_framework(framework)
    assert spec.name == framework and spec.package and spec.import_name
    report = child_report(framework, worker_scratch)
    if not report["installed"]:
        pytest.skip(f"{framework} is not installed here")
    assert report["device"] == ["version", "threads", "list_devices", "open_device"]


@pytest.mark.parametrize("workload, framework", PAIRS)
def test_every_declared_implementation_resolves(workload: str, framework: str,
                                               worker_scratch: Path) -> None:
    report = child_report(framework, worker_scratch)
    if not report["installed"]:
        pytest.skip(f"{framework} is not installed here")
    found = report["modules"][workload]
    assert "error" not in found, found
    assert found["callable"], f"{found['module']} has no {found['entry']}()"


@pytest.mark.parametrize("workload", list(registry.WORKLOADS))
def test_every_spec_is_complete(workload: str) -> None:
    spec = registry.load_workload(workload)
    assert spec.frameworks and spec.check is not None and spec.sweep in spec.params
    assert set(spec.variants_by_default) <= set(spec.variants)


# --- declared capabilities: what the planner reads is what the workers do ------------------

def declared_pairs() -> list[tuple[str, str]]:
    """Every workload x framework with a declaration (built-ins declare all; a plugin may not)."""
    return [(workload, framework) for workload in registry.WORKLOADS
            for framework in planner.matrix_frameworks(registry.load_workload(workload))
            if framework in registry.load_workload(workload).capabilities]


# The smallest case of each built-in workload (one sweep value, tiny data): the contract test
# asks whether the worker accepts a variant, not how fast it is.
SMALLEST: dict[str, dict[str, Any]] = {
    "matmul": {"n": [16]},
    "mnist-small": {"epochs": 1, "train_samples": 64, "test_samples": 20},
    "mnist-wide": {"epochs": 1, "train_samples": 64, "test_samples": 20},
    "mnist-ddp": {"processes": [1], "epochs": 2, "train_samples": 64, "steps": 2,
                  "test_samples": 20},
    "jacobian": {"batch": [1]},
    "elementwise": {"elements": [10_000], "iterations": 2},
    "transfer": {"bytes": [1024]},
}


def smallest_params(spec: WorkloadSpec) -> dict[str, Any]:
    """--quick defaults, the sweep cut to its first value, then SMALLEST's overrides."""
    params = spec.defaults(quick=True)
    if isinstance(params[spec.sweep], list):
        params[spec.sweep] = params[spec.sweep][:1]
    return {**params, **SMALLEST.get(spec.name, {})}


# Workloads whose every declared cpu cell another test runs through the worker, on a larger
# case and with more asserted of it: the contract would start the same code path again (for
# mnist-ddp, rank processes or a TensorFlow child that import their framework once more: 22 s
# of the two frameworks' children on the 2-core VM). workload -> (framework, variant) pairs
# that test runs, and where.
RUN_ELSEWHERE: dict[str, tuple[set[tuple[str, str]], str]] = {
    "mnist-ddp": ({("torch", "preloaded"), ("tensorflow", "preloaded")},
                  "tests/test_mnist_ddp.py::test_compare_on_cpu_scales_one_and_two_processes"),
}


def declared_cpu_cells(workload: str) -> set[tuple[str, str]]:
    """(framework, variant) of every cpu cell of WORKLOAD its declarations let a worker run."""
    spec = registry.load_workload(workload)
    return {(framework, variant) for framework in spec.capabilities
            for variant in spec.variants
            if planner.declared_refusal(spec, framework, variant, "cpu") is None}


def runnable_on_cpu(framework: str) -> list[Cell]:
    """Every cpu cell of `framework` that the declarations let a worker run, once per code path:
    a workload whose implementation module and declaration equal an earlier one's (mnist-wide
    is mnist-small's code and declaration with wider layers) adds nothing new to the test, nor
    one whose cells another test runs (RUN_ELSEWHERE)."""
    cells, seen = [], set()
    for workload in (workload for workload, declared in declared_pairs()
                     if declared == framework and workload not in RUN_ELSEWHERE):
        spec = registry.load_workload(workload)
        code_path = (registry.implementation_name(spec, framework),
                     repr(spec.capabilities[framework]))
        if code_path in seen:
            continue
        seen.add(code_path)
        cells += [Cell(workload, variant, framework, "cpu", smallest_params(spec))
                  for variant in spec.variants
                  if planner.declared_refusal(spec, framework, variant, "cpu") is None]
    return cells


@pytest.mark.parametrize("workload, framework", declared_pairs())
def test_every_declaration_names_the_workloads_variants(workload: str, framework: str) -> None:
    spec = registry.load_workload(workload)
    capability = spec.capabilities[framework]
    named = [*capability.variants, *capability.refused,
             *(variant for refused in capability.refused_on.values() for variant in refused)]
    assert set(named) <= set(spec.variants), set(named) - set(spec.variants)
    assert set(capability.refused_on) <= set(planner.KIND_DEVICES)
    # Each refusal is a reason a person can read, not an empty string.
    for variant in spec.variants:
        for device in planner.KIND_DEVICES.values():
            reason = spec.refusal(variant, framework, device)
            assert reason is None or len(reason) > 10, (variant, device, reason)


@pytest.mark.parametrize("workload", list(registry.BUILTIN_WORKLOADS))
def test_every_builtin_workload_declares_every_framework(workload: str) -> None:
    spec = registry.load_workload(workload)
    assert set(spec.frameworks) <= set(spec.capabilities), (
        f"{workload}: no declaration for {set(spec.frameworks) - set(spec.capabilities)}")


@pytest.mark.parametrize("workload, framework", declared_pairs())
def test_every_undeclared_variant_is_refused_by_the_planner_without_a_worker(
        workload: str, framework: str) -> None:
    spec = registry.load_workload(workload)
    refused = [Cell(workload, variant, framework, device, smallest_params(spec))
               for variant in spec.variants for device in planner.KIND_DEVICES.values()
               if planner.declared_refusal(spec, framework, variant, device) is not None]
    # A run records the result refuse_declared gives and hands the executor only the cells it
    # answers None for (harness.api): a result here is a cell no worker ever starts for.
    refuse = planner.refuse_declared(spec)
    answers = [refuse(cell) for cell in refused]
    results = [answer.to_dict() for answer in answers if answer is not None]
    assert len(results) == len(refused)
    installed, install_hint = registry.framework_installed(framework)
    for cell, result in zip(refused, results):
        expected = (planner.declared_refusal(spec, framework, cell.variant, cell.device)
                    if installed else install_hint)
        assert (result["status"], result["reason"]) == ("unavailable", expected), cell.label
        assert result["worker_started"] is False and result["cases"] == []


@pytest.mark.parametrize("workload", sorted(RUN_ELSEWHERE))
def test_cells_left_to_another_test_are_every_declared_cpu_cell_of_their_workload(
        workload: str) -> None:
    """A variant or framework declared later is not left out with them: the contract runs it
    unless the other test does too (and this list says so)."""
    assert declared_cpu_cells(workload) == RUN_ELSEWHERE[workload][0]


@pytest.mark.slow
@pytest.mark.parametrize("cell", [cell for framework in FRAMEWORKS
                                  for cell in runnable_on_cpu(framework)],
                         ids=lambda cell: f"{cell.workload}-{cell.framework}-{cell.variant}")
def test_every_declared_variant_is_accepted_by_the_worker(cell: Cell,
                                                          worker_scratch: Path) -> None:
    """The declared cpu cells run through the worker's run_cell on their smallest case."""
    if not registry.framework_installed(cell.framework)[0]:
        pytest.skip(f"{cell.framework} is not installed here")
    result = worker_report(cell.framework, worker_scratch)[f"{cell.workload}/{cell.variant}"]
    assert result["status"] == "ok", result
    assert result["cases"] and set(result["cases"]) == {"ok"}, result

"""JAX and Keras 3 on several backends (issue 18): registration, cell environment, and real
cells through the worker process on CPU, with parity against the float64 references and
between frameworks."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core import registry
from harness.run.forkserver import ForkServers
from harness.run.runner import cell_environment, run_worker
from harness.spec import Cell
from harness.workloads import elementwise, matmul, mnist, transfer
from tests.quick_options import quick_options

WORKER_TIMEOUT_S = 300
KERAS_FRAMEWORKS = ("keras-jax", "keras-torch", "keras-tensorflow")
needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None
                               or importlib.util.find_spec("optax") is None,
                               reason="jax/optax not installed "
                                      "(pip install 'crossframe-harness[jax]')")


def run(workload: str, variant: str, framework: str, params: dict[str, Any],
        servers: ForkServers) -> dict[str, Any]:
    """One cpu cell through a real worker forked from the pytest process's warm processes, as
    `harness compare` runs it (the spawned path has its own tests: test_runner, test_forkserver)."""
    cell = Cell(workload, variant, framework, "cpu", params)
    return run_worker(cell, quick_options(WORKER_TIMEOUT_S), servers).to_dict()


# --- registration and environment: no framework imported ------------------------------------

def test_every_new_framework_is_registered_where_it_applies() -> None:
    for spec in (matmul.SPEC, elementwise.SPEC, transfer.SPEC, registry.load_workload("jacobian"),
                 mnist.SMALL, mnist.WIDE):
        assert "jax" in spec.frameworks, spec.name
    for framework in KERAS_FRAMEWORKS:
        assert framework in mnist.SMALL.frameworks and framework in mnist.WIDE.frameworks
        assert registry.backend_has_module(framework, "device")
        # One Keras module for all three: they differ only in backend and placement.
        expected = "harness.backends.keras.training"
        assert registry.implementation_name(mnist.SMALL, framework) == expected
    assert registry.load_framework("jax").sync == "output"
    assert registry.load_framework("keras-jax").sync == "output"
    # The MNIST cell that was Keras on TensorFlow is listed under its clear name now.
    assert "tensorflow" not in mnist.SMALL.frameworks


def test_missing_package_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "keras" else real_find_spec(name, *a))
    assert registry.framework_installed("jax")[0]
    installed, reason = registry.framework_installed("keras-jax")
    assert not installed and reason == ("keras is not installed "
                                        "(pip install 'crossframe-harness[keras,jax]')")


@pytest.mark.parametrize("framework,backend", [("keras-jax", "jax"), ("keras-torch", "torch"),
                                               ("keras-tensorflow", "tensorflow")])
def test_keras_cells_get_their_backend_whatever_the_shell_says(
        monkeypatch: pytest.MonkeyPatch, framework: str, backend: str) -> None:
    monkeypatch.setenv("KERAS_BACKEND", "numpy")
    env = cell_environment(Cell("mnist-small", "as-written", framework, "cpu"))
    assert env["KERAS_BACKEND"] == backend


def test_jax_cells_do_not_preallocate_gpu_memory() -> None:
    cpu = cell_environment(Cell("matmul", "fp32", "jax", "cpu"))
    gpu = cell_environment(Cell("matmul", "fp32", "keras-jax", "cuda:0"))
    assert cpu["XLA_PYTHON_CLIENT_PREALLOCATE"] == gpu["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert cpu["CUDA_VISIBLE_DEVICES"] == ""  # what tells backends/jax to use the CPU alone
    torch_env = cell_environment(Cell("matmul", "fp32", "torch", "cpu"))
    assert torch_env.get("XLA_PYTHON_CLIENT_PREALLOCATE") == os.environ.get(
        "XLA_PYTHON_CLIENT_PREALLOCATE")


# --- JAX through the worker (matmul: tests/test_cli.py's quick matmul runs it) ---------------

@needs_jax
@pytest.mark.slow
def test_jax_elementwise_eager_and_jit_keep_every_addition(warm_servers: ForkServers) -> None:
    params = {**elementwise.SPEC.defaults(quick=True), "elements": [10**4]}
    for variant in ("as-written", "compiled"):
        result = run("elementwise", variant, "jax", params, warm_servers)
        assert result["status"] == "ok", (variant, result["reason"])
        assert result["cases"][0]["check"]["passed"]
    extra = result["cases"][0]["extra"]  # compiled: what XLA really runs
    assert extra["executed_additions"] >= params["iterations"]
    assert extra["op_count_source"] == "XLA optimized HLO"


@needs_jax
@pytest.mark.slow
def test_compare_cli_runs_jax_transfer_on_cpu(tmp_path: Path) -> None:
    """The issue's CI criterion for transfer: exit 0, the matmuls checked, copies unavailable."""
    result = CliRunner().invoke(app, ["compare", "--workload", "transfer", "--quick",
                                      "--device", "cpu", "--framework", "jax", "--no-ceilings",
                                      "--no-report", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (run_dir,) = tmp_path.iterdir()
    cells = json.loads((run_dir / "run.json").read_text())["cells"]
    statuses = {cell["cell"]["variant"]: cell["status"] for cell in cells}
    assert statuses.pop("matmul-resident") == statuses.pop("matmul-copy") == "ok"
    assert set(statuses.values()) == {"unavailable"}  # overlap and copies need a GPU
    for cell in cells:
        assert all(case["check"]["passed"] for case in cell["cases"] if "check" in case)


# --- MNIST: the hand-jitted step and Keras on jax and torch agree ---------------------------

@pytest.fixture(scope="module")
def mnist_cases(warm_servers: ForkServers) -> dict[str, dict[str, Any]]:
    """mnist-small, quick params, one worker per framework (shared by the tests below)."""
    params = mnist.SMALL.defaults(quick=True)
    frameworks = [name for name in ("jax", "keras-jax", "keras-torch")
                  if registry.framework_installed(name)[0]]
    return {name: run("mnist-small", "as-written", name, params, warm_servers)
            for name in frameworks}


@needs_jax
@pytest.mark.slow
@pytest.mark.parametrize("framework", ["jax", "keras-jax", "keras-torch"])
def test_mnist_cell_trains_the_seed_net(mnist_cases: dict, framework: str) -> None:
    if framework not in mnist_cases:
        pytest.skip(f"{framework} is not installed")
    result = mnist_cases[framework]
    assert result["status"] == "ok", result["reason"]
    (case,) = result["cases"]
    extra = case["extra"]
    assert extra["params"] == 101_770 and extra["steps_per_call"] == 2048 // 32
    assert extra["accuracy"] > mnist.ACCURACY_BOUND and extra["train_loss"] < 2.0
    (record,) = case["rounds"]
    assert len(record["samples"]) == 1 and record["cold_seconds"] > 0  # 2 epochs: cold + warm
    if framework.startswith("keras-"):
        assert extra["keras_backend"] == framework.removeprefix("keras-")


@needs_jax
@pytest.mark.slow
def test_mnist_accuracy_parity_across_jax_and_keras_backends(mnist_cases: dict) -> None:
    accuracies = {name: result["cases"][0]["extra"]["accuracy"]
                  for name, result in mnist_cases.items() if result["status"] == "ok"}
    assert len(accuracies) == len(mnist_cases) >= 2, accuracies
    # Same data, same order, same net and optimizer; different initial weights per backend.
    assert max(accuracies.values()) - min(accuracies.values()) < 0.05, accuracies


# --- the report: every framework ranked, every pair's ratio (synthetic runs, no framework) ---

def synthetic_three_framework_run(tmp_path: Path) -> Path:
    """alpha clearly fastest, beta and gamma within each other's noise, all on the cpu."""
    from tests.synthetic_runs import cell_result, write_run

    def samples(median: float) -> list[float]:
        return [median * factor for factor in (0.98, 0.99, 1.0, 1.01, 1.02)]

    return write_run(tmp_path / "run", [
        cell_result("alpha", {64: samples(1e-4)}),
        cell_result("beta", {64: samples(3e-4)}),
        cell_result("gamma", {64: samples(3.03e-4)}),
    ], params={"n": [64]})


def test_report_ranks_every_framework_and_compares_every_pair(tmp_path: Path) -> None:
    from harness.report import render_report
    from harness.report.load import load_runs
    from tests.report_tables import t

    run_dir = synthetic_three_framework_run(tmp_path)
    run_set = load_runs([run_dir])
    runs = t.assign_experiments(run_set.runs)
    prepared, _ = t.prepare(run_set.measurements, runs)
    stats = t.case_stats(prepared)
    ranking = t.framework_ranking(stats, t.headline_sizes(stats))
    assert list(ranking["framework"]) == ["alpha", "beta", "gamma"]
    assert list(ranking["significant"]) == [False, True, False]  # beta/gamma: IQRs overlap
    assert ranking["times_best"].iloc[1] == pytest.approx(3.0)
    ratios = t.ratio_table(stats)
    pairs = set(ratios.loc[ratios["kind"] == "framework_ratio", "label"])
    assert pairs == {"alpha / beta: cpu fp32", "alpha / gamma: cpu fp32",
                     "beta / gamma: cpu fp32"}
    render_report([run_dir], tmp_path / "report")
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "### Framework verdict: every framework ranked per device" in summary
    assert "1. alpha" in summary and "beyond the noise (one round: run-to-run drift not " \
        "measured) vs #1" in summary
    assert "within the noise (one round: run-to-run drift not measured) vs #2" in summary
    assert (tmp_path / "report" / "matmul-ratios.png").stat().st_size > 0

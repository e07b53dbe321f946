"""Issue 39: every printed figure describes the work that was timed.

A case whose rounds shared the plan's work out is rated with the call's own FLOPs (the demo
printed jax at 301 GFLOP/s on two cores: the planned 60,000-sample epoch over a 20,000-sample
call's time); MNIST's declared count is the arithmetic a training step executes; units never
print in exponent notation; a check that compared nothing does not read as a pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.stats import check_text, work_of
from harness.core import registry
from harness.core.units import format_bytes, format_joules, format_seconds
from harness.data.results import CaseResult, CaseRound, CellResult
from harness.run import rounds
from harness.spec import Cell
from harness.workloads import mnist
from tests.in_subprocess import installed, run_check
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn
from tests.synthetic_runs import cli_rows_of

WIDE = registry.load_workload("mnist-wide")
PLANNED = {"batch_size": 32, "epochs": 1, "train_samples": 60000, "blocks": 16}


def _round_result(cell: Cell, index: int, seconds: float) -> CellResult:
    """What a worker of round INDEX returns: its share of the epoch, timed and counted."""
    share = rounds.round_cell(WIDE, cell, index, 3).params
    case = {**share, "batch_size": 32}
    return CellResult(cell=cell, cases=[CaseResult(
        case, rounds=[CaseRound(index, seconds * 1.3,
                                tuple(seconds * f for f in (0.98, 1.0, 1.02)))],
        extra={"flops_per_call": WIDE.flops(case), "steps_per_call": 625})])


def test_the_demo_rate_is_the_calls_flops_over_the_calls_median() -> None:
    cell = Cell("mnist-wide", "as-written", "jax", "cpu", dict(PLANNED), rounds=3)
    merged = rounds.merge_cells(cell, [(index, _round_result(cell, index, 0.2))
                                       for index in range(3)], WIDE.run.round_split)
    case = merged.cases[0]
    assert case.case["train_samples"] == 20000 and case.planned == {"train_samples": 60000}
    [summary] = cli_rows_of(WIDE, merged)
    per_call = mnist.training_matmul_flops_per_sample(mnist.WIDE_HIDDEN) * 20000
    assert summary.gflops == pytest.approx(per_call / 0.2 / 1e9)  # not 3x that


def test_a_stored_case_with_the_plans_parameters_is_rated_by_its_own_count() -> None:
    # Run folders from before the fix hold the plan in `case`; the call's own count wins.
    stored = CaseResult(dict(PLANNED), rounds=[CaseRound(0, 0.3, (0.2, 0.2, 0.2))],
                        extra={"flops_per_call": 6e9})
    assert work_of(WIDE, stored.case, stored.extra)["flops"] == 6e9
    assert work_of(WIDE, stored.case, {})["flops"] == WIDE.flops(PLANNED)


def test_mnist_counts_the_matmuls_a_training_step_executes() -> None:
    # Forward and weight gradients of every layer, input gradients of all but the first.
    wide = 6 * (784 * 1000 + 1000 * 1000 + 1000 * 10) - 2 * 784 * 1000
    small = 6 * (784 * 128 + 128 * 10) - 2 * 784 * 128
    assert mnist.training_matmul_flops_per_sample(mnist.WIDE_HIDDEN) == wide
    assert mnist.training_matmul_flops_per_sample(mnist.SMALL_HIDDEN) == small
    assert WIDE.flops_covers != "exact" and "not counted" in WIDE.flops_covers
    assert registry.load_workload("matmul").flops_covers == "exact"


@pytest.mark.slow  # imports torch in a child process
def test_mnist_declared_flops_equal_torchs_own_counter() -> None:
    if not installed("torch"):
        pytest.skip("torch is not installed")
    run_check("tests.torch_checks",
              "check_mnist_declared_flops_are_torchs_count_of_a_training_step()",
              framework="torch")


def test_partial_counts_are_lower_bounds_in_the_summary() -> None:
    cell = CellResult(cell=Cell("model-x", "as-written", "torch", "cuda:0", {}), cases=[
        CaseResult({"batch": 8}, rounds=[CaseRound(0, 1.0, (0.01,) * 3)], extra={
            "flops_per_call": 1e6, "flops_coverage": {
                "complete": False, "uncounted_ops": {"aten._cudnn_rnn": 2},
                "uncounted_param_share": 0.97}})])
    spec = registry.load_workload("matmul")
    (row,) = cli_rows_of(spec, cell)
    assert "aten._cudnn_rnn x2 not counted" in row.flops_gaps
    assert "97% of parameters" in row.flops_gaps
    from harness.commands.tables import flop_rate_text
    from harness.data.ceilings import DeviceCeiling, Peaks

    # A measured peak is there, and still no share of it: the count missed ops.
    text = flop_rate_text(row, DeviceCeiling("cuda:0", Peaks({"fp32": 50000.0})), "fp32")
    assert text.startswith(">= ") and "partial" in text and "of peak" not in text


@pytest.mark.parametrize(("text", "value"), [
    ("1 ms", format_seconds(999.7e-6)), ("6.45 s", format_seconds(6.45)),
    ("0.996 GiB", format_bytes(1020 * 2**20)), ("1.5 KiB", format_bytes(1536)),
    ("1230 s", format_seconds(1234.5)), ("1 mJ", format_joules(0.0009997)),
])
def test_units_never_print_exponents(text: str, value: str) -> None:
    assert value == text


def test_a_check_that_compared_nothing_does_not_read_as_a_pass() -> None:
    cell = CellResult(cell=Cell("model-x", "as-written", "torch", "cpu", {}), cases=[
        CaseResult({"n": 8}, rounds=[CaseRound(0, 1.0, (0.01,) * 3)],
                   check={"passed": True, "metric": "not_compared", "value": 0.0,
                          "bound": 0.0, "detail": "not compared: dropout"})])
    (row,) = cli_rows_of(registry.load_workload("matmul"), cell)
    assert check_text(row.check) == "not compared"


@pytest.mark.slow  # one torch worker per round
def test_mnist_per_call_figures_hold_beside_a_cell_that_never_ran(tmp_path: Path) -> None:
    """Issue 48: on the H200 the demo's summary printed "repeated to 60,000 per call" where each
    of 3 rounds trained 20,000, and its own check exited 1: a cell that never ran (TensorFlow
    not installed there) keeps the plan's whole epoch in its row. cuda:0 is that cell here where
    torch sees no GPU; where it sees one, both run and the figures must hold all the same."""
    if not installed("torch"):
        pytest.skip("torch is not installed")
    from typer.testing import CliRunner

    from harness.cli import app

    result = CliRunner().invoke(app, [
        "compare", "--workload", "mnist-small", "--framework", "torch", "--device",
        "cpu,cuda:0", "--param", "epochs=1", "--param", "train_samples=2000", "--param",
        "test_samples=500", "--rounds", "2", "--no-ceilings", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "0 mismatches, 0 unverifiable" in result.output
    (run_dir,) = [path for path in tmp_path.iterdir() if path.is_dir()]
    summary = (run_dir / "summary.md").read_text()
    assert "One timed call is one 1,000-sample call (1/2 epoch)" in summary
    assert "Distinct training samples: 1000." in summary  # 1,000 per call: nothing repeated

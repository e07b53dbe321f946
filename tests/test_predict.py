"""The crossover predictor on synthetic sweeps whose answer the algebra gives."""

from __future__ import annotations

import math

import pytest

from harness.analysis.casetable import CaseRow
from harness.analysis.costmodel import (
    fit_device,
    fit_power_law,
    held_out_error,
    predict_crossover,
)

SIZES = [1, 2, 4, 8, 16]


def point(size: float, seconds: float, flops: float | None = None,
          launches: float | None = None, busy_seconds: float | None = None,
          steps: float | None = None, noisy: bool = False, suspect: bool = False) -> CaseRow:
    """One measured size of a device's curve: the case-table row the predictor reads."""
    return CaseRow.of({"status": "ok", "valid": True, "samples": 1, "size_value": size,
                       "call_median_s": seconds, "flops": flops, "launches_per_call": launches,
                       "device_seconds": busy_seconds, "steps_per_call": steps, "noisy": noisy,
                       "suspect": "contended" if suspect else ""})


def cpu_linear(size: float) -> CaseRow:
    """1 us fixed, 1,000 FLOPs per unit of size at 1 GFLOP/s."""
    return point(size, 1e-6 + size * 1e3 / 1e9, flops=size * 1e3)


def gpu_launch_bound(size: float) -> CaseRow:
    """10 launches of 10 us on the host, the work at 100 GFLOP/s on the device."""
    busy = size * 1e3 / 1e11
    return point(size, 10 * 10e-6 + busy, flops=size * 1e3, launches=10, busy_seconds=busy)


def test_a_linear_cpu_and_a_launch_bound_gpu_cross_where_the_algebra_says() -> None:
    # 1e-6 + s * 1e-6 = 1e-4 + s * 1e-8  ->  s = 99e-6 / 0.99e-6 = 100
    prediction = predict_crossover([cpu_linear(s) for s in SIZES],
                                   [gpu_launch_bound(s) for s in SIZES])
    assert prediction.kind == "crossover"
    assert prediction.size == pytest.approx(100, rel=0.01)
    assert prediction.held_out_error == pytest.approx(0, abs=1e-6)
    assert not prediction.extrapolated  # 100 < 10 x 16
    text = prediction.text("batch")
    assert "predicted: GPU faster above batch ~100 (" in text
    assert "launch-bound: 10 launches per call at 10 us" in text
    assert "from 5 sizes" in text and "error on the held-out largest size 0%" in text
    shorter = predict_crossover([cpu_linear(s) for s in SIZES[:4]],
                      [gpu_launch_bound(s) for s in SIZES[:4]])
    assert shorter.size == pytest.approx(100, rel=0.01)
    assert shorter.extrapolated and "extrapolation" in shorter.text("batch")  # 100 > 10 x 8


def test_the_fitted_constants_are_the_measured_ones() -> None:
    gpu = fit_device("gpu", [gpu_launch_bound(s) for s in SIZES])
    assert gpu is not None and gpu.from_profile
    assert gpu.per_launch_s == pytest.approx(10e-6, rel=1e-6)
    assert 1 / gpu.seconds_per_work == pytest.approx(1e11, rel=1e-6)
    cpu = fit_device("cpu", [cpu_linear(s) for s in SIZES])
    assert cpu is not None and not cpu.from_profile
    assert cpu.fixed_s == pytest.approx(1e-6, rel=1e-6)


def test_parallel_curves_predict_no_crossover_and_say_why() -> None:
    cpu = [point(s, 1e-5 + s * 1e-6, flops=s * 1e3) for s in SIZES]
    gpu = [point(s, 2e-5 + s * 2e-6, flops=s * 1e3) for s in SIZES]
    prediction = predict_crossover(cpu, gpu)
    assert prediction.kind == "cpu-always" and prediction.size is None
    assert "no crossover up to batch 16,000" in prediction.text("batch")
    assert "grow with the batch at the same rate" in prediction.text("batch")


def test_work_that_grows_faster_than_the_launches_crosses_later() -> None:
    """Seed 000's shape: one backward pass per output (launches ~ batch), each over the whole
    batch (work ~ batch^2). CPU: 20 us per pass + 1 GFLOP/s; GPU: 5 launches of 10 us per pass
    + 1 TFLOP/s. Equal where 400b * 20e-6 + 1e3 b^2/1e9 = 400b * 50e-6 + 1e3 b^2/1e12."""
    def cpu(b: float) -> CaseRow:  # its op count is its GPU twin's launch count
        return point(b, 400 * b * 5 * 4e-6 + 1e3 * b * b / 1e9, flops=1e3 * b * b,
                     launches=400 * b * 5)

    def gpu(b: float) -> CaseRow:
        busy = 1e3 * b * b / 1e12
        return point(b, 400 * b * 5 * 10e-6 + busy, flops=1e3 * b * b,
                     launches=400 * b * 5, busy_seconds=busy)

    batches = [10, 20, 50, 100, 200]
    prediction = predict_crossover([cpu(b) for b in batches], [gpu(b) for b in batches])
    expected = 400 * 30e-6 / (1e3 / 1e9 - 1e3 / 1e12)  # ~12,012
    assert prediction.kind == "crossover"
    assert prediction.size == pytest.approx(expected, rel=0.02)
    assert "launch-bound: 2.4e+07 launches per call at 10 us" in prediction.text("batch")
    assert not any("model's form" in note for note in prediction.caveats)
    # Three sizes for the CPU's three terms (fixed, per op, per FLOP): the fit passes through
    # every point, and predicting the largest from two cannot test its form. It says so.
    three = predict_crossover([cpu(b) for b in batches[:3]], [gpu(b) for b in batches[:3]])
    assert three.caveats == ("cpu: 3 cost terms fitted to 3 sizes, so the held-out error "
                             "cannot test the model's form (run more sizes)",)
    assert three.short_text("batch").endswith(", too few sizes to test the model's form")


def test_a_noisy_or_suspect_sweep_is_labelled() -> None:
    cpu = [cpu_linear(s) for s in SIZES]
    cpu[2] = point(4, cpu[2].call_median_s, flops=cpu[2].flops, noisy=True)
    gpu = [gpu_launch_bound(s) for s in SIZES]
    gpu[4] = point(16, gpu[4].call_median_s, flops=16e3, launches=10,
                   busy_seconds=gpu[4].device_seconds, suspect=True)
    text = predict_crossover(cpu, gpu).text("n")
    assert "fitted on noisy cpu points (4)" in text
    assert "fitted on SUSPECT gpu points (16)" in text


def test_the_held_out_error_is_measured_on_the_largest_size() -> None:
    points = [cpu_linear(s) for s in SIZES]
    # The largest point twice as slow as the line through the others: predicted 50% too fast.
    points[-1] = point(16, 2 * points[-1].call_median_s, flops=16e3)
    assert held_out_error("cpu", points) == pytest.approx(-0.5, rel=1e-6)
    assert held_out_error("cpu", points[:2]) is None
    assert "held-out error not measured" in predict_crossover(points[:2], [
        gpu_launch_bound(s) for s in SIZES[:2]]).text("n")


def test_without_flop_counts_the_size_is_the_work_and_it_says_so() -> None:
    cpu = [point(s, 1e-6 + s * 1e-6) for s in SIZES]
    gpu = [point(s, 1e-4 + s * 1e-8) for s in SIZES]
    prediction = predict_crossover(cpu, gpu)
    assert prediction.size == pytest.approx(100, rel=0.01)
    assert "cpu work taken as the size (no FLOP count)" in prediction.text("n")


def test_too_few_sizes_gives_no_prediction() -> None:
    prediction = predict_crossover([cpu_linear(1)], [gpu_launch_bound(1)])
    assert prediction.kind == "too-few-sizes"
    assert "no prediction" in prediction.text("n")


def test_a_power_law_through_the_upper_sizes() -> None:
    law = fit_power_law([1, 2, 4, 8], [3, 2 * 8, 2 * 64, 2 * 512])  # n^3 at the top, not below
    assert law.exponent == pytest.approx(3.0)
    assert law(16) == pytest.approx(2 * 16 ** 3)


def test_the_report_predicts_stores_and_draws_the_crossover(tmp_path) -> None:
    """Through a stored run's saved predictions and its report: torch's synthetic costs (CPU
    2 us + 2n^3 at 100 GFLOP/s, GPU 20 us + 2n^3 at 10 TFLOP/s) cross at n^3 = 9e-6 / 0.99e-11,
    n ~ 96.9; the measured answer (sizes 64, 256, ...) can only say "from 256"."""
    import json

    from harness.reporting import draw_run_report
    from tests.synthetic_runs import (
        GPU_MACHINE,
        gpu_machine_results,
        save_predictions,
        write_fixture_run,
    )

    run_dir = write_fixture_run(tmp_path / "run", GPU_MACHINE, gpu_machine_results())
    saved = save_predictions(run_dir)  # what every run does when it ends
    outcome = draw_run_report(run_dir)
    assert not outcome.failure
    stored = json.loads((run_dir / "run.json").read_text())["predictions"]
    assert stored == saved
    torch = next(record for record in stored if record["framework"] == "torch")
    assert torch["kind"] == "crossover" and torch["measured_size"] == 256
    assert torch["size"] == pytest.approx((9e-6 / 0.99e-11) ** (1 / 3), rel=0.01)
    assert abs(torch["held_out_error"]) < 1e-6 and not torch["extrapolated"]
    summary = (run_dir / "summary.md").read_text()
    assert "GPU faster from n=256 up" in summary
    assert "predicted from torch's costs: GPU faster above n ~97" in summary
    assert (run_dir / "matmul-crossover.png").exists()


def mnist_epoch(batch: float, per_step_s: float, flop_rate: float) -> CaseRow:
    """One epoch of 60,000 samples: 60,000 / batch steps, the same 3.6e10 FLOPs at any batch."""
    steps = 60_000 / batch
    return point(batch, steps * per_step_s + 3.6e10 / flop_rate, flops=3.6e10, steps=steps)


def test_an_epoch_per_call_is_fitted_per_step_and_crosses_where_the_algebra_says() -> None:
    """No profile on either device: the per-step cost is what shrinks an epoch with the batch.
    (60,000 / b) * (400 - 100) us = 0.36 s - 3.6 ms  ->  b = 18 / 0.3564 = 50.5."""
    batches = [8, 16, 32, 64, 128]
    cpu = [mnist_epoch(b, 100e-6, 1e11) for b in batches]
    gpu = [mnist_epoch(b, 400e-6, 1e13) for b in batches]
    prediction = predict_crossover(cpu, gpu)
    assert prediction.kind == "crossover"
    assert prediction.size == pytest.approx(50.5, rel=0.01)
    assert prediction.held_out_error == pytest.approx(0, abs=1e-6)
    assert "GPU step-bound: 1.2e+03 steps per call at 400 us" in prediction.why("batch")
    fitted = fit_device("cpu", cpu)
    assert fitted is not None and fitted.counted == "steps"
    assert fitted.per_launch_s == pytest.approx(100e-6, rel=1e-6)
    # The same steps at every size (a call of one step) are no count: nothing to fit them on.
    single = fit_device("cpu", [point(b, 1e-3 + b * 1e-6, flops=b, steps=1.0)
                                for b in batches])
    assert single is not None and single.launches is None


def test_a_rate_that_falls_with_the_size_is_taken_from_the_last_step() -> None:
    """A CPU whose rate falls 10% per 4x in size (caches outgrown), as the small CNN's did on
    the H100 machine's host (145, 102, 84 GFLOP/s at batch 128, 512, 2048): the cost beyond
    the sweep is the last step's, so the largest size is predicted within 10%, where a rate
    averaged over the upper half misses it by more."""
    sizes = [8, 32, 128, 512, 2048]

    def falling(size: float) -> CaseRow:
        work = size * 1e7
        rate = 150e9 * 0.9 ** math.log(size / 8, 4)
        return point(size, 1e-3 + work / rate, flops=work)

    points = [falling(size) for size in sizes]
    error = held_out_error("cpu", points)
    assert error is not None and abs(error) < 0.10
    model = fit_device("cpu", points[:-1])
    assert model is not None
    # The rate the model carries forward is the one between 128 and 512, not the average.
    assert 1 / model.seconds_per_work == pytest.approx(
        (512e7 - 128e7) / (points[3].call_median_s - points[2].call_median_s), rel=1e-6)

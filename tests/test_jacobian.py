"""The jacobian workload: analytic reference, its check, and both frameworks through the worker."""

from __future__ import annotations

import numpy as np
import pytest

from harness.run.forkserver import ForkServers
from harness.run.runner import run_worker
from harness.spec import Cell
from harness.workloads.jacobian import SPEC, check, make_inputs, per_sample_reference
from tests.quick_options import quick_options

BATCH = 2  # as-written does 400*batch backward passes: keep it tiny
FRAMEWORKS = ("torch", "tensorflow", "jax")


def test_reference_matches_central_differences() -> None:
    """The analytic float64 Jacobian is the net's derivative (checked numerically)."""
    inputs = make_inputs({"batch": 5}, "per-sample")
    weights = {key: value.astype(np.float64) for key, value in inputs.items() if key != "t"}

    def net(t: np.ndarray) -> np.ndarray:
        h1 = np.tanh(t @ weights["w1"] + weights["b1"])
        h2 = np.tanh(h1 @ weights["w2"] + weights["b2"])
        return h2 @ weights["w3"] + weights["b3"]

    t, step = inputs["t"].astype(np.float64), 1e-6
    numeric = (net(t + step) - net(t - step)) / (2 * step)  # (batch, 400)
    analytic = per_sample_reference(inputs)
    assert analytic.shape == (5, 400, 1)
    np.testing.assert_allclose(analytic[:, :, 0], numeric, rtol=1e-6, atol=1e-9)


def test_weights_are_shared_across_cases_and_inputs_are_seeded() -> None:
    small, large = make_inputs({"batch": 2}, "as-written"), make_inputs({"batch": 3}, "per-sample")
    for name in ("w1", "b1", "w2", "b2", "w3", "b3"):
        np.testing.assert_array_equal(small[name], large[name])
    assert small["w3"].shape == (20, 400) and small["t"].shape == (2, 1)
    np.testing.assert_array_equal(make_inputs({"batch": 2}, "x")["t"], small["t"])


def test_check_rejects_a_nonzero_off_diagonal_block_and_a_wrong_jacobian() -> None:
    inputs = make_inputs({"batch": 3}, "as-written")
    exact = per_sample_reference(inputs).astype(np.float32)
    case = {"batch": 3}
    assert check(case, "as-written", inputs, {"per_sample": exact, "off_diagonal_max": 0.0}).passed
    leaked = check(case, "as-written", inputs, {"per_sample": exact, "off_diagonal_max": 0.1})
    assert not leaked.passed and "off-diagonal" in leaked.detail
    assert not check(case, "per-sample", inputs, {"per_sample": exact * 1.001}).passed
    assert not check(case, "per-sample", inputs, {"per_sample": exact[:, :, None]}).passed


# GPU-only variants (CUDA-graph replay) are unavailable on these cpu cells before any work.
CPU_VARIANTS = tuple(v for v in SPEC.variants if v not in SPEC.device_only_variants)


@pytest.fixture(scope="module")
def results(warm_servers: ForkServers) -> dict[tuple[str, str], dict]:
    """One worker per (framework, variant) at batch 2, shared by the tests below; forked from
    one warm process per framework, as a run's are."""
    params = {**SPEC.defaults(quick=True), "batch": [BATCH]}
    return {(framework, variant): run_worker(
                Cell("jacobian", variant, framework, "cpu", params),
                quick_options(300), warm_servers).to_dict()
            for framework in FRAMEWORKS for variant in CPU_VARIANTS}


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("variant", CPU_VARIANTS)
def test_every_cell_passes_the_float64_check(results: dict, framework: str, variant: str) -> None:
    result = results[framework, variant]
    assert result["status"] == "ok", result["reason"]
    (case,) = result["cases"]
    assert case["check"]["passed"] and case["check"]["value"] < 1e-5
    assert case["rounds"][0]["samples"] and case["rounds"][0]["cold_seconds"] > 0
    full = variant == "as-written"
    expected_shape = f"{BATCH}x400x{BATCH}x1" if full else f"{BATCH}x400x1"
    assert case["extra"]["jacobian_shape"] == expected_shape


def extra_of(result: dict) -> dict:
    return result["cases"][0]["extra"]


def assert_same_jacobian(first: dict, second: dict) -> None:
    """Equal fingerprints: sums within 1e-6 of the norm (a sum can be near 0), norms to 1e-6."""
    scale = first["per_sample_norm"]
    assert abs(first["per_sample_sum"] - second["per_sample_sum"]) <= 1e-6 * scale
    assert first["per_sample_norm"] == pytest.approx(second["per_sample_norm"], rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_full_jacobian_diagonal_blocks_equal_the_per_sample_jacobian(results: dict,
                                                                     framework: str) -> None:
    full = extra_of(results[framework, "as-written"])
    for variant in ("per-sample", "per-sample-fwd"):
        assert_same_jacobian(full, extra_of(results[framework, variant]))


@pytest.mark.slow
@pytest.mark.parametrize("other", ["tensorflow", "jax"])
@pytest.mark.parametrize("variant", CPU_VARIANTS)
def test_frameworks_agree_with_torch_on_the_same_weights(results: dict, variant: str,
                                                         other: str) -> None:
    assert_same_jacobian(extra_of(results["torch", variant]), extra_of(results[other, variant]))

"""The transfer workload (seed 4): its cases and checks, and real cells through the worker."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.analysis.stats import work_of
from harness.measure.envinfo import visible_gpus
from harness.run.forkserver import ForkServers
from harness.run.runner import run_worker
from harness.spec import Cell
from harness.workloads.transfer import (
    BANDWIDTH_VARIANTS,
    MATMUL_VARIANTS,
    SPEC,
    check,
    custom_cases,
    make_inputs,
)
from tests.quick_options import quick_options

WORKER_TIMEOUT_S = 180.0
SIZES = [2**10, 2**16, 2**20]


def run_transfer_cell(variant: str, framework: str, device: str = "cpu",
                      servers: ForkServers | None = None) -> dict[str, Any]:
    """One quick cell through a real worker process, as the CLI runs it: forked from SERVERS'
    warm process for its framework, or a new interpreter without them."""
    cell = Cell("transfer", variant, framework, device, SPEC.defaults(quick=True))
    if servers is None:
        return run_worker(cell, quick_options(WORKER_TIMEOUT_S)).to_dict()
    return run_worker(cell, quick_options(WORKER_TIMEOUT_S), servers).to_dict()


# --- the spec alone: no framework -------------------------------------------------------------

@pytest.mark.parametrize("variant", MATMUL_VARIANTS)
def test_matmul_variants_get_one_case_of_size_n(variant: str) -> None:
    cases = custom_cases({"n": 200, "bytes": SIZES}, variant)
    assert len(cases) == 1
    assert cases[0]["n"] == 200
    assert "bytes" not in cases[0]


@pytest.mark.parametrize("variant", BANDWIDTH_VARIANTS)
def test_bandwidth_variants_get_one_case_per_buffer_size(variant: str) -> None:
    assert custom_cases({"n": 200, "bytes": SIZES}, variant) == [{"bytes": s} for s in SIZES]
    assert custom_cases({"n": 200, "bytes": 4096}, variant) == [{"bytes": 4096}]


def test_every_variant_runs_by_default_and_copies_need_a_device() -> None:
    # Derived from the workload's catalogue: the matmul trio, then the four copy directions.
    assert MATMUL_VARIANTS == ("matmul-resident", "matmul-copy", "matmul-overlap")
    assert BANDWIDTH_VARIANTS == ("h2d-pageable", "h2d-pinned", "d2h-pageable", "d2h-pinned")
    assert set(SPEC.variants_by_default) == set(MATMUL_VARIANTS + BANDWIDTH_VARIANTS)
    assert set(SPEC.device_only_variants) == {"matmul-overlap", *BANDWIDTH_VARIANTS}
    assert SPEC.sweep == "bytes"
    assert SPEC.defaults(quick=False)["n"] == 200


def test_work_counts_only_what_applies() -> None:
    """A copy has bytes and no FLOPs; a resident matmul FLOPs and no bytes; copy-matmul both."""
    resident, = custom_cases({"n": 200, "bytes": SIZES}, "matmul-resident")
    copied, = custom_cases({"n": 200, "bytes": SIZES}, "matmul-copy")
    assert work_of(SPEC, {"bytes": 2**20}) == {"bytes": float(2**20)}
    assert work_of(SPEC, resident) == {"flops": 2.0 * 200**3}
    assert work_of(SPEC, copied) == {"flops": 2.0 * 200**3, "bytes": 3.0 * 200 * 200 * 4}


def test_buffers_are_seeded_random_bytes_of_the_asked_size() -> None:
    first = make_inputs({"bytes": 4096}, "h2d-pinned")["buffer"]
    again = make_inputs({"bytes": 4096}, "d2h-pageable")["buffer"]
    assert first.dtype == np.uint8 and first.nbytes == 4096
    assert first.flags.writeable  # torch.from_numpy warns on read-only arrays
    assert np.array_equal(first, again)
    assert len(np.unique(first)) > 200  # random bytes, not a constant a broken copy could match


def test_copy_check_passes_only_on_an_exact_copy() -> None:
    inputs = make_inputs({"bytes": 4096}, "h2d-pageable")
    source = inputs["buffer"]
    exact = check({"bytes": 4096}, "h2d-pageable", inputs, {"copied": source.copy()})
    assert exact.passed and exact.value == 0.0
    flipped = source.copy()
    flipped[123] ^= 0xFF
    one_off = check({"bytes": 4096}, "h2d-pageable", inputs, {"copied": flipped})
    assert not one_off.passed and one_off.value == 1.0
    short = check({"bytes": 4096}, "d2h-pinned", inputs, {"copied": source[:-1].copy()})
    assert not short.passed and short.value == 4096


def test_matmul_check_uses_the_float32_bound() -> None:
    case = {"n": 32}
    inputs = make_inputs(case, "matmul-copy")
    good = inputs["a"] @ inputs["b"]
    assert check(case, "matmul-copy", inputs, {"c": good}).passed
    assert not check(case, "matmul-copy", inputs, {"c": good * (1 + 1e-3)}).passed


# --- real cells through the worker -----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("framework, variant", [
    ("numpy", "matmul-resident"),
    ("torch", "matmul-resident"),
    ("torch", "matmul-copy"),
    ("tensorflow", "matmul-resident"),
    ("tensorflow", "matmul-copy"),
])
def test_matmul_trio_runs_and_checks_on_cpu(framework: str, variant: str,
                                            warm_servers: ForkServers) -> None:
    result = run_transfer_cell(variant, framework, servers=warm_servers)
    assert result["status"] == "ok", result["reason"]
    case, = result["cases"]
    assert case["case"]["n"] == 200
    assert case["check"]["passed"] and case["check"]["value"] < 1e-5
    samples = case["rounds"][0]["samples"]
    assert samples and all(seconds > 0 for seconds in samples)


@pytest.mark.slow
def test_numpy_has_no_copy_variant() -> None:
    result = run_transfer_cell("matmul-copy", "numpy")
    assert result["status"] == "unavailable"
    assert "no device" in result["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", BANDWIDTH_VARIANTS)
def test_bandwidth_on_cpu_is_unavailable_for_want_of_a_gpu(variant: str) -> None:
    # numpy: the worker refuses device-only variants on cpu before any backend code runs,
    # the same for every framework, and numpy's worker starts in a fraction of a second.
    result = run_transfer_cell(variant, "numpy")
    assert result["status"] == "unavailable"
    assert "GPU" in result["reason"]
    assert result["cases"] == []


@pytest.mark.slow
def test_a_cuda_cell_without_a_gpu_is_unavailable_with_the_reason() -> None:
    if visible_gpus():
        pytest.skip("a GPU is visible here")
    result = run_transfer_cell("matmul-resident", "torch", device="cuda:0")
    assert result["status"] == "unavailable"
    assert "CUDA" in result["reason"]


def test_overlapped_copies_are_device_only_with_a_reason(warm_servers: ForkServers) -> None:
    """Streams and pinned buffers need a GPU: on cpu the cell says so instead of timing a no-op."""
    result = run_transfer_cell("matmul-overlap", "torch", servers=warm_servers)
    assert result["status"] == "unavailable"
    assert "needs a GPU" in result["reason"]

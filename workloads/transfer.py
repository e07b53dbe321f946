"""Seed experiment 4: a small matmul resident vs copied each call, plus host<->device bandwidth.

Two questions, one workload. The 200x200 trio (numpy on the CPU, the framework with data
resident on the device, the framework copying inputs in and the result out every call) shows
what the round trips cost; the bandwidth variants measure the pipe those round trips use,
pageable vs pinned host memory, over a sweep of buffer sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.core.fixes import Catalogue, one_each, variant
from harness.spec import (
    CaseParams,
    Check,
    Param,
    ParamValue,
    ReportHints,
    WorkloadSpec,
    int_param,
)
from harness.workloads.common import matmul_check, rng_for

FLOAT32_BYTES = 4
# The variants, declared once (harness.core.fixes): what each implementation runs, for the
# planner (no worker starts for a refused cell). The overlap and bandwidth variants need a GPU
# everywhere (device_only_variants): streams and pinned buffers exist only with a device, and
# on cpu there is nothing to overlap; numpy runs on the cpu (its FrameworkSpec), where its
# matmul-resident is the baseline. jax's pinned memory depends on its version and device, so
# its worker finds that out.
NO_DEVICE = "numpy has no device to copy to: its matmul-resident is the CPU baseline"
NO_PINNED = {"tensorflow": "tensorflow exposes no pinned host buffers", "numpy": NO_DEVICE}
CATALOGUE = Catalogue(
    (variant("matmul-copy", "torch tensorflow jax", refused={"numpy": NO_DEVICE}),
     variant("matmul-overlap", "torch", gpu_only=True, refused={
         "tensorflow": ("tensorflow exposes no user streams or pinned host buffers to overlap "
                        "copies with (tf.data's prefetch_to_device is the closest analogue)"),
         "jax": ("JAX exposes no copy streams or events: XLA schedules transfers itself, so "
                 "the pinned, double-buffered overlap has no JAX form"),
         "numpy": NO_DEVICE}),
     variant("h2d-pageable", "torch tensorflow jax", gpu_only=True, refused={"numpy": NO_DEVICE}),
     variant("h2d-pinned", "torch jax", gpu_only=True, refused=NO_PINNED),
     variant("d2h-pageable", "torch tensorflow jax", gpu_only=True, refused={"numpy": NO_DEVICE}),
     variant("d2h-pinned", "torch jax", gpu_only=True, refused=NO_PINNED)),
    one_each(("torch", "tensorflow", "jax", "numpy")), baseline="matmul-resident")
CAPABILITIES = CATALOGUE.capabilities()
MATMUL_VARIANTS = tuple(name for name in CATALOGUE.variants if name.startswith("matmul-"))
BANDWIDTH_VARIANTS = tuple(name for name in CATALOGUE.variants if name not in MATMUL_VARIANTS)

DEFAULT_BUFFER_BYTES = [2**10, 2**14, 2**18, 2**22, 2**26, 2**28]
QUICK_BUFFER_BYTES = [2**10, 2**16, 2**20]


def is_bandwidth(variant: str) -> bool:
    return variant in BANDWIDTH_VARIANTS


def matmul_copy_bytes(n: int) -> int:
    """Bytes crossing host<->device per matmul-copy call: A and B in, C out."""
    return 3 * n * n * FLOAT32_BYTES


def custom_cases(params: CaseParams, variant: str) -> list[dict[str, ParamValue]]:
    """Matmul variants: one case of size n; bandwidth variants: one case per buffer size.

    Each case holds only what applies to it, so the CSV's param columns do not suggest that a
    matmul depended on the buffer sweep or a copy on n.
    """
    if is_bandwidth(variant):
        sizes = params["bytes"]
        return [{"bytes": size} for size in (sizes if isinstance(sizes, list) else [sizes])]
    case: dict[str, ParamValue] = {"n": params["n"]}
    if variant in ("matmul-copy", "matmul-overlap"):
        case["copy_bytes"] = matmul_copy_bytes(int_param(params, "n"))
    return [case]


def make_inputs(case: Mapping[str, Any], variant: str) -> dict[str, np.ndarray]:
    """Seeded float32 [0, 1) matrices, or a seeded random byte buffer; same for every framework."""
    if is_bandwidth(variant):
        size = case["bytes"]
        # Random bytes, so a copy that drops or reorders any part cannot still compare equal.
        buffer = bytearray(rng_for("transfer-buffer", size).bytes(size))
        return {"buffer": np.frombuffer(buffer, dtype=np.uint8)}
    n = case["n"]
    rng = rng_for("transfer-matmul", n)
    return {"a": rng.random((n, n), dtype=np.float32), "b": rng.random((n, n), dtype=np.float32)}


def check_copy(source: np.ndarray, copied: Any) -> Check:
    """Bytes of the last copy that differ from the source: 0 passes (a wrong shape fails all)."""
    got = np.asarray(copied)
    if got.dtype != source.dtype or got.shape != source.shape:
        mismatched = float(source.size)
        detail = f"copy has {got.dtype}{got.shape}, source {source.dtype}{source.shape}"
    else:
        mismatched = float(np.count_nonzero(got != source))
        detail = f"{int(mismatched)} of {source.size} bytes differ from the source"
    return Check(passed=mismatched == 0, metric="mismatched_bytes", value=mismatched, bound=0.0,
                 detail=detail)


def check(case: Mapping[str, Any], variant: str, inputs: dict[str, np.ndarray],
          output: Mapping[str, np.ndarray]) -> Check:
    """Matmul: float32's error model for k = n (every element, at n = 200); copies: exact.

    A copy does no arithmetic, so anything but bit-for-bit equality is a fault: no tolerance.
    """
    if is_bandwidth(variant):
        return check_copy(inputs["buffer"], output["copied"])
    return matmul_check(inputs["a"], inputs["b"], output["c"], "fp32", f"{variant} C")


def flops(case: Mapping[str, Any]) -> float | None:
    """2n^3 for the matmul cases; None (does not apply) for a bare copy."""
    return 2.0 * case["n"] ** 3 if "n" in case else None


def bytes_moved(case: Mapping[str, Any]) -> float | None:
    """Bytes crossing host<->device per call; None for a resident matmul, which copies nothing."""
    if "bytes" in case:
        return float(case["bytes"])
    return float(case["copy_bytes"]) if "copy_bytes" in case else None


SPEC = WorkloadSpec(
    name="transfer",
    kind="transfer",
    summary=("200x200 matmul resident vs copied each call (seed 4), and host<->device "
             "bandwidth pageable vs pinned; GB/s = bytes/s"),
    sweep="bytes",
    params={
        "n": Param(200, 200, "matrix size of the matmul variants", kind=int),
        "bytes": Param(DEFAULT_BUFFER_BYTES, QUICK_BUFFER_BYTES,
                       "buffer sizes of the bandwidth variants (set with --sizes)", kind=int),
    },
    variants=CATALOGUE.variants,
    implementations={"torch": "harness.backends.torch.transfer",
                     "tensorflow": "harness.backends.tensorflow.transfer",
                     "numpy": "harness.backends.numpy.transfer",
                     "jax": "harness.backends.jax.transfer"},
    flops=flops,
    bytes_moved=bytes_moved,
    device_only_variants=CATALOGUE.device_only,
    capabilities=CAPABILITIES,
    default_variants=CATALOGUE.variants,
    make_inputs=make_inputs,
    check=check,
    custom_cases=custom_cases,
    report=ReportHints(
        overhead_pairs=(("matmul-copy", "matmul-resident", "host<->device copies"),),
        bandwidth_ceiling="h2d_pinned_gbps",
        cpu_baseline_any_variant=("matmul-copy", "matmul-overlap")),
    notes=("numpy matmul-resident on cpu is the baseline; matmul-copy on cpu is the same code "
           "with nowhere to copy to (framework conversion overhead only). TensorFlow exposes no "
           "pinned host buffers, so its *-pinned variants are unavailable. jax: device_put in, "
           "np.asarray out; pinned = memory_kind pinned_host; no matmul-overlap (no streams)."),
)

"""The softmax workload's spec: framework-free, imported by `harness list` and every worker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.spec import Check, Param, WorkloadSpec

ROWS = 256
FLOAT32_BYTES = 4
UNIT_ROUNDOFF_FP32 = 2.0**-24


def make_inputs(case: Mapping[str, Any], variant: str) -> dict[str, np.ndarray]:
    """Seeded normal logits, the same for every framework."""
    rng = np.random.default_rng(case["n"])
    return {"x": rng.standard_normal((ROWS, case["n"]), dtype=np.float32) * 4}


def check(case: Mapping[str, Any], variant: str, inputs: dict[str, np.ndarray],
          output: dict[str, Any]) -> Check:
    """Max error per element against float64, bound (n + 8) u: each output is an exp (a few u)
    divided by a sum of n positive terms (at most n-1 roundings, gamma_n)."""
    x = inputs["x"].astype(np.float64)
    shifted = np.exp(x - x.max(axis=1, keepdims=True))
    reference = shifted / shifted.sum(axis=1, keepdims=True)
    got = np.asarray(output["y"], dtype=np.float64)
    if got.shape != reference.shape or not np.all(np.isfinite(got)):
        return Check(False, "max_rel_error", float("inf"), 0.0, "shape or NaN mismatch")
    error = float(np.max(np.abs(got - reference) / np.maximum(reference, 1e-30)))
    bound = (case["n"] + 8) * UNIT_ROUNDOFF_FP32
    return Check(error <= bound, "max_rel_error", error, bound,
                 f"softmax vs float64: max relative error {error:.2e} (bound (n+8)u = {bound:.1e})")


SPEC = WorkloadSpec(
    name="softmax",
    kind="softmax",
    summary="row-wise softmax of a 256 x n float32 matrix (example plugin); GB/s = 2 x bytes/s",
    sweep="n",
    params={"n": Param([256, 4096, 65536], [64, 1024], "row length (set with --sizes)")},
    variants=("fp32",),
    implementations={"torch": "harness_softmax.torch_impl",
                     "numpy": "harness_softmax.numpy_impl"},
    bytes_moved=lambda case: 2.0 * ROWS * case["n"] * FLOAT32_BYTES,
    make_inputs=make_inputs,
    check=check,
)

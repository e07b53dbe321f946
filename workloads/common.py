"""Shared, framework-free helpers for workload specs: seeded inputs and error figures."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from harness.spec import Check

# Relative-error bounds per precision: float32 lands far under 1e-5 for these sizes; TF32 and
# bfloat16 keep 10 and 7 mantissa bits (measured ~6e-4 and ~5e-3 for uniform inputs).
PRECISION_BOUNDS = {"fp32": 1e-5, "tf32": 5e-3, "bf16": 3e-2, "fp32-graph": 1e-5}


def rng_for(*key: Any) -> np.random.Generator:
    """A generator seeded by the case, so every framework gets the very same inputs."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def relative_error(got: np.ndarray, reference: np.ndarray) -> float:
    """||got - ref|| / ||ref|| in float64; NaN or a shape mismatch is an infinite error."""
    got64 = np.asarray(got, dtype=np.float64)
    ref64 = np.asarray(reference, dtype=np.float64)
    if got64.shape != ref64.shape or not np.all(np.isfinite(got64)):
        return float("inf")
    scale = np.linalg.norm(ref64)
    return float(np.linalg.norm(got64 - ref64) / (scale if scale > 0 else 1.0))


def error_check(got: np.ndarray, reference: np.ndarray, bound: float, what: str) -> Check:
    error = relative_error(got, reference)
    return Check(passed=error <= bound, metric="rel_error", value=error, bound=bound,
                 detail=f"{what}: relative error {error:.2e} (bound {bound:.0e})")

"""Best-case matmul FLOP/s and memory bandwidth of the CPU, with numpy (when torch is absent)."""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.numpy.device import NumpyDevice
from harness.timing import TimingPolicy, autorange

POLICY = TimingPolicy(min_samples=5, min_time_s=0.3, max_time_s=3.0, warmup_s=0.2)


def measure(device: NumpyDevice) -> dict[str, Any]:
    n, nbytes = 2048, 1 << 28
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    matmul_s = min(autorange(lambda: a @ a, device.synchronize, POLICY).samples)
    source = np.ones(nbytes // 4, dtype=np.float32)
    target = np.empty_like(source)
    copy_s = min(autorange(lambda: np.copyto(target, source), device.synchronize, POLICY).samples)
    peak = 2 * n**3 / matmul_s / 1e9
    return {"peak_gflops": peak, "peak_gflops_by_precision": {"fp32": peak},
            "bandwidth_gbps": 2 * nbytes / copy_s / 1e9, "matmul_n": n}

"""Best-case matmul FLOP/s per precision and memory bandwidth of one torch device."""

from __future__ import annotations

from typing import Any

import torch

from backends.torch.device import TorchDevice
from harness.timing import TimingPolicy, autorange

POLICY = TimingPolicy(min_samples=5, min_time_s=0.3, max_time_s=3.0, warmup_s=0.2)


def _seconds(step, device: TorchDevice) -> float:
    """Fastest sample: a ceiling is the best case, and load from elsewhere only slows samples."""
    return min(autorange(step, device.synchronize, POLICY).samples)


def matmul_gflops(device: TorchDevice, n: int, dtype: torch.dtype, tf32: bool) -> float:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.rand(n, n, device=device.handle, dtype=dtype)
    b = torch.rand(n, n, device=device.handle, dtype=dtype)
    seconds = _seconds(lambda: torch.matmul(a, b), device)
    torch.backends.cuda.matmul.allow_tf32 = False
    return 2 * n**3 / seconds / 1e9


def copy_gbps(device: TorchDevice, nbytes: int) -> float:
    """Device-to-device copy, counting bytes read plus bytes written."""
    source = torch.empty(nbytes // 4, device=device.handle, dtype=torch.float32).uniform_()
    target = torch.empty_like(source)
    return 2 * nbytes / _seconds(lambda: target.copy_(source), device) / 1e9


def pinned_h2d_gbps(device: TorchDevice, nbytes: int) -> float:
    host = torch.empty(nbytes // 4, dtype=torch.float32).uniform_().pin_memory()
    target = torch.empty(nbytes // 4, device=device.handle, dtype=torch.float32)
    return nbytes / _seconds(lambda: target.copy_(host, non_blocking=True), device) / 1e9


def measure(device: TorchDevice) -> dict[str, Any]:
    if device.is_gpu:
        n, nbytes = 8192, 1 << 30
        peaks = {"fp32": matmul_gflops(device, n, torch.float32, tf32=False),
                 "tf32": matmul_gflops(device, n, torch.float32, tf32=True),
                 "bf16": matmul_gflops(device, n, torch.bfloat16, tf32=False)}
        figures = {"h2d_pinned_gbps": pinned_h2d_gbps(device, 1 << 28)}
    else:
        n, nbytes = 2048, 1 << 28
        peaks = {"fp32": matmul_gflops(device, n, torch.float32, tf32=False)}
        figures = {}
    return {"peak_gflops": peaks["fp32"], "peak_gflops_by_precision": peaks,
            "bandwidth_gbps": copy_gbps(device, nbytes), "matmul_n": n, **figures}

"""Best-case matmul FLOP/s per precision and memory bandwidth of one torch device.

Why several sizes: a probe at one size under-measures a machine whose best case lies elsewhere
(seen: a 16-core host's CPU probe at n=2048 read 1,540-1,760 GFLOP/s while the run's own n=8192
matmul reached 2,112). The probe climbs sizes while a call stays affordable and keeps the best.
"""

from __future__ import annotations

import torch

from harness.backends.torch.device import TorchDevice
from harness.data.ceilings import HOST_LINK, MEMORY, Peaks
from harness.measure.ceilings import LibraryProbe, best_seconds, climb


def _rate(device: TorchDevice, n: int, dtype: torch.dtype, tf32: bool) -> float:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.rand(n, n, device=device.handle, dtype=dtype)
    b = torch.rand(n, n, device=device.handle, dtype=dtype)
    try:
        return 2 * n**3 / best_seconds(lambda: torch.matmul(a, b), device.synchronize) / 1e9
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def matmul_gflops(device: TorchDevice, sizes: list[int], dtype: torch.dtype,
                  tf32: bool) -> tuple[float, int]:
    """The best rate over the affordable sizes, and the size that reached it."""
    rates = climb(sizes, lambda n: _rate(device, n, dtype, tf32))
    best = max(rates, key=rates.__getitem__)
    return rates[best], best


def copy_gbps(device: TorchDevice, nbytes: int) -> float:
    """Device-to-device copy, counting bytes read plus bytes written."""
    source = torch.empty(nbytes // 4, device=device.handle, dtype=torch.float32).uniform_()
    target = torch.empty_like(source)
    return 2 * nbytes / best_seconds(lambda: target.copy_(source), device.synchronize) / 1e9


def pinned_h2d_gbps(device: TorchDevice, nbytes: int) -> float:
    host = torch.empty(nbytes // 4, dtype=torch.float32).uniform_().pin_memory()
    target = torch.empty(nbytes // 4, device=device.handle, dtype=torch.float32)
    return nbytes / best_seconds(lambda: target.copy_(host, non_blocking=True),
                                 device.synchronize) / 1e9


def measure(device: TorchDevice, sizes: list[int]) -> LibraryProbe:
    precisions = ({"fp32": (torch.float32, False), "tf32": (torch.float32, True),
                   "bf16": (torch.bfloat16, False)} if device.is_gpu
                  else {"fp32": (torch.float32, False)})
    peaks: dict[str, float] = {}
    reached_at: dict[str, int] = {}
    for precision, (dtype, tf32) in precisions.items():
        peaks[precision], reached_at[precision] = matmul_gflops(device, sizes, dtype, tf32)
    if device.is_gpu:
        gbps = {MEMORY: copy_gbps(device, 1 << 30), HOST_LINK: pinned_h2d_gbps(device, 1 << 28)}
    else:
        gbps = {MEMORY: copy_gbps(device, 1 << 28)}
    return LibraryProbe(Peaks(peaks, gbps), reached_at)

"""Best-case matmul FLOP/s and memory bandwidth of the CPU with numpy's BLAS (a second opinion).

The harness keeps, per figure, the best any installed library reached: a ceiling one library
misses is still there.
"""

from __future__ import annotations

import numpy as np

from harness.backends.numpy.device import NumpyDevice
from harness.data.ceilings import MEMORY, Peaks
from harness.measure.ceilings import LibraryProbe, best_seconds, climb


def _rate(device: NumpyDevice, n: int) -> float:
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    return 2 * n**3 / best_seconds(lambda: a @ a, device.synchronize) / 1e9


def measure(device: NumpyDevice, sizes: list[int]) -> LibraryProbe:
    rates = climb(sizes, lambda n: _rate(device, n))
    best = max(rates, key=rates.__getitem__)
    nbytes = 1 << 28
    source = np.ones(nbytes // 4, dtype=np.float32)
    target = np.empty_like(source)
    copy_s = best_seconds(lambda: np.copyto(target, source), device.synchronize)
    return LibraryProbe(Peaks({"fp32": rates[best]}, {MEMORY: 2 * nbytes / copy_s / 1e9}),
                        {"fp32": best})

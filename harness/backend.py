"""The contract between the harness and a framework adapter (backends/<framework>/).

Every backend folder has the same file names: `device.py` (open a device, synchronise it,
describe the framework) and one module per workload kind exposing
`make_task(case, variant, device, inputs) -> Task`. The harness owns the clock; a backend only
says how to run one call and how to wait for the device.
"""

from __future__ import annotations

from typing import Any, Protocol


class DeviceUnavailable(RuntimeError):
    """The framework is installed but the asked-for device is not there (reason in message)."""


class VariantUnavailable(RuntimeError):
    """This variant cannot run here (e.g. XLA missing); the cell is `unavailable`, not an error."""


class ProfileUnavailable(RuntimeError):
    """This device cannot report its busy time (no profiler, no device clock); reason in message."""


class Device(Protocol):
    """An opened device: a canonical name, what it is, and how to wait for it.

    Optional (looked up with getattr): `is_gpu`, `reset_peak_memory()`, `peak_device_memory()`
    and `profile(step, calls) -> harness.measure.devicetime.DeviceProfile`, the device-busy pass the
    worker runs after timing (raises ProfileUnavailable with the reason where it cannot).
    """

    name: str  # canonical: "cpu", "cuda:0"
    description: str  # e.g. "NVIDIA H100 80GB HBM3" or the CPU model

    def synchronize(self) -> None: ...

    def peak_memory_bytes(self) -> int | None: ...


class Task(Protocol):
    """One prepared case: `step()` is the timed call, `output()` what the check reads."""

    def step(self) -> object: ...

    def output(self) -> dict[str, Any]: ...


def canonical_device(name: str) -> str:
    """'cuda' -> 'cuda:0'; 'CPU' -> 'cpu'; 'gpu:1' -> 'cuda:1'; anything else unchanged."""
    lowered = name.strip().lower()
    if lowered in ("cuda", "gpu"):
        return "cuda:0"
    if lowered.startswith("gpu:"):
        return "cuda:" + lowered[4:]
    return lowered


def parse_cuda_index(name: str) -> int | None:
    """The N of 'cuda:N', or None for any other device name."""
    if not name.startswith("cuda:"):
        return None
    index = name[5:]
    return int(index) if index.isdigit() else None

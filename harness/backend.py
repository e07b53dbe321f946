"""The contract between the harness and a framework adapter (backends/<framework>/).

Every backend folder has the same file names: `device.py` (open a device, synchronise it,
describe the framework) and one module per workload kind exposing
`make_task(case, variant, device, inputs) -> Task`. The harness owns the clock; a backend only
says how to run one call and how to wait for the device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

# Optimizer steps of an epoch-sized call (MNIST) an implementation's step_features records
# (harness.run.casepasses features_pass): a few, so its cost is a few steps under the
# recording mode, not an epoch (the prediction is per step).
FEATURES_PART_STEPS = 4


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


class StepMarks:
    """Where a task whose call runs many steps (an epoch) says "step `index` starts now".

    Optional in the Task contract: a task with a `step_marks` attribute (this no-op by default)
    and `steps_per_call` is timed in blocks of steps (harness.measure.blocks), the harness
    putting its clock in place of this object for the timed calls. A task of a framework that
    waits on outputs (JAX) passes `current_output`, a zero-argument function returning the
    state to wait on; it is only called at a block boundary.
    """

    def before_step(self, index: int, current_output: Callable[[], Any] | None = None) -> None:
        """Outside the harness's timed calls nothing is timed, so nothing happens."""


def canonical_device(name: str) -> str:
    """'cuda' -> 'cuda:0'; 'CPU' -> 'cpu'; 'gpu:1' -> 'cuda:1'; anything else unchanged."""
    lowered = name.strip().lower()
    if lowered in ("cuda", "gpu"):
        return "cuda:0"
    if lowered.startswith("gpu:"):
        return "cuda:" + lowered[4:]
    return lowered


def parse_cuda_index(name: str) -> int | None:
    """The N of 'cuda:N' (0 for 'cuda'), or None for any other device name."""
    head, _, index = name.partition(":")
    if head != "cuda":
        return None
    return int(index) if index.isdigit() else 0 if name == "cuda" else None

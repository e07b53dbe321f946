"""A fake GPU: the fake backend's asynchronous device, plus a profiler with known answers.

Its busy pass runs the step for real and reports events whose figures are fixed, so a test
can check every number the worker, the store and the report derive from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.backend import DeviceUnavailable
from harness.measure.devicetime import COPY, KERNEL, DeviceEvent, DeviceProfile, summarize
from tests.fakes.backend.device import FakeDevice, threads, version  # noqa: F401

# Per call: a 200 us host-to-device copy, a 100 us kernel overlapping it on another stream,
# then four 100 us kernels back to back. Busy 600 us, copies 200 us, 5 kernels, 6 launches.
CALL_PERIOD_NS = 1_000_000
BUSY_S, COPY_S, KERNELS, LAUNCHES = 600e-6, 200e-6, 5, 6
SPAN_S = 900e-6
# Peak device memory of every case, as the allocator would report it after a reset; before the
# worker's first reset the device reports none, so a missing reset shows up as no figure.
PEAK_ALLOCATED, PEAK_RESERVED = 96 * 2**20, 128 * 2**20


def events_of_call(index: int) -> list[DeviceEvent]:
    base = index * CALL_PERIOD_NS
    events = [DeviceEvent(COPY, "Memcpy HtoD (Pageable -> Device)", base, 200_000),
              DeviceEvent(KERNEL, "overlapping_kernel", base + 50_000, 100_000)]
    events += [DeviceEvent(KERNEL, f"kernel_{k}", base + 200_000 + k * 100_000, 100_000)
               for k in range(4)]
    return events


def list_devices() -> list[dict]:
    return [{"name": "cpu", "description": "fake cpu"},
            {"name": "cuda:0", "description": "fake gpu"}]


@dataclass
class FakeGpuDevice(FakeDevice):
    profiled_calls: int = 0
    peak_resets: int = 0

    def reset_peak_memory(self) -> None:
        self.peak_resets += 1

    def peak_memory_bytes(self) -> int | None:
        return PEAK_ALLOCATED if self.peak_resets else None

    def peak_device_memory(self) -> dict[str, int | None]:
        if not self.peak_resets:
            return {"allocated": None, "reserved": None}
        return {"allocated": PEAK_ALLOCATED, "reserved": PEAK_RESERVED}

    def profile(self, step: Callable[[], object], calls: int) -> DeviceProfile:
        events = []
        for index in range(calls):
            step()
            events += events_of_call(index)
        self.synchronize()
        self.profiled_calls += calls
        return summarize(events, calls, LAUNCHES * calls, SPAN_S, "fake profiler")


def open_device(name: str) -> FakeDevice:
    if name == "cpu":
        return FakeDevice()
    if name == "cuda:0":
        return FakeGpuDevice(name="cuda:0", description="fake gpu", is_gpu=True)
    raise DeviceUnavailable(f"the fake gpu framework has no {name}")

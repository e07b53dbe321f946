"""The second clock: how long the device is busy per call, and what that says about a cell.

Why a second clock: on a GPU the wall time per call (harness.measure.timing) includes the host's
work of launching kernels. For small calls the device sits idle between kernels, waiting for the
host; wall time alone cannot tell that apart from slow kernels. A profiler reports each kernel's
and copy's start and duration on the device itself; their union per call is the device-busy
time, and wall minus busy is what the host added.

Framework-free: backends turn their profiler's events into `DeviceEvent`s and call
`summarize`; the worker stores the `DeviceProfile`; the report calls `attribute` and
`diagnose`. Nothing here imports a framework.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

from harness.core.diagnosis import DiagnosisKind
from harness.core.units import format_seconds, three_digits

KERNEL, COPY, MEMSET = "kernel", "memcpy", "memset"
# Host<->device copies only; a device-to-device copy is device work like any kernel.
HOST_DEVICE_COPY = re.compile(r"HtoD|DtoH|H2D|D2H|HtoH|Pageable|Pinned", re.IGNORECASE)
# Busy below this share of wall time: the device waits on the host about as long as it works.
# Above a strict half because the profiled busy time is an upper bound (tracing stretches short
# kernels: a dense-128 step profiled at 0.86 ms busy replays in 0.16 ms as a CUDA graph).
LAUNCH_BOUND_SHARE = 0.6
# Copies above this share of busy time: the link, not the arithmetic, sets the pace.
TRANSFER_BOUND_SHARE = 0.5
# A device-side rate at or above this fraction of the measured ceiling is "near" it.
NEAR_CEILING = 0.5


@dataclass(frozen=True)
class DeviceEvent:
    """One piece of device work: a kernel, a copy or a memset, on the device's own clock."""

    kind: str  # KERNEL, COPY or MEMSET
    name: str
    start_ns: int
    duration_ns: int

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns

    @property
    def host_device_copy(self) -> bool:
        return self.kind == COPY and bool(HOST_DEVICE_COPY.search(self.name))


@dataclass(frozen=True)
class DeviceProfile:
    """Per-call device figures of one case, from a profiled pass apart from the timed one."""

    calls: int  # calls profiled; every figure below is per call
    busy_seconds: float  # union of kernel, copy and memset intervals
    copy_seconds: float  # host<->device copies (union of their intervals)
    kernels_per_call: float  # kernels executed on the device
    copies_per_call: float  # host<->device copies
    launches_per_call: float | None  # host API calls that enqueue work (None: not recorded)
    span_seconds: float | None  # device clock from first to last event (CUDA events)
    tool: str  # what measured it, e.g. "torch.profiler (CUPTI) + CUDA events"
    # The share of one call that was profiled (its first steps), every figure above scaled up
    # from it to a whole call; 1.0 where whole calls were profiled.
    profiled_share: float = 1.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def scaled_from(self, share: float) -> DeviceProfile:
        """These figures, measured over SHARE of one call, as figures per whole call."""
        if not 0 < share <= 1:
            raise ValueError(f"a profiled share must be in (0, 1], not {share}")
        per_call = 1 / share
        return replace(
            self, busy_seconds=self.busy_seconds * per_call,
            copy_seconds=self.copy_seconds * per_call,
            kernels_per_call=self.kernels_per_call * per_call,
            copies_per_call=self.copies_per_call * per_call,
            launches_per_call=None if self.launches_per_call is None
            else self.launches_per_call * per_call,
            span_seconds=None if self.span_seconds is None else self.span_seconds * per_call,
            profiled_share=share * self.profiled_share)


def classify(activity: str, name: str) -> str | None:
    """KERNEL / COPY / MEMSET for device work, None for anything else (host calls, markers).

    `activity` is the profiler's category when it has one (kineto: "kernel", "gpu_memcpy",
    "gpu_memset"); without one the name decides (XPlane: "MemcpyH2D", kernel names).
    """
    activity, lowered = activity.lower(), name.lower()
    if activity in ("gpu_memcpy", "memcpy") or (not activity and "memcpy" in lowered):
        return COPY
    if activity in ("gpu_memset", "memset") or (not activity and "memset" in lowered):
        return MEMSET
    if activity in ("kernel", "concurrent_kernel") or not activity:
        return KERNEL
    return None


def union_ns(events: Iterable[DeviceEvent]) -> int:
    """Nanoseconds covered by at least one event: overlapping work on two streams counts once."""
    covered, current_start = 0, 0  # current_start is read only once current_end is set
    current_end: int | None = None
    for event in sorted(events, key=lambda item: item.start_ns):
        if current_end is None or event.start_ns > current_end:
            if current_end is not None:
                covered += current_end - current_start
            current_start, current_end = event.start_ns, event.end_ns
        else:
            current_end = max(current_end, event.end_ns)
    if current_end is not None:
        covered += current_end - current_start
    return covered


def summarize(events: list[DeviceEvent], calls: int, launches: int | None,
              span_seconds: float | None, tool: str) -> DeviceProfile:
    """Per-call busy, copy, kernel and launch figures of `calls` profiled calls."""
    if calls < 1:
        raise ValueError("calls must be >= 1")
    copies = [event for event in events if event.host_device_copy]
    kernels = sum(1 for event in events if event.kind == KERNEL)
    return DeviceProfile(
        calls=calls,
        busy_seconds=union_ns(events) * 1e-9 / calls,
        copy_seconds=union_ns(copies) * 1e-9 / calls,
        kernels_per_call=kernels / calls,
        copies_per_call=len(copies) / calls,
        launches_per_call=None if launches is None else launches / calls,
        span_seconds=span_seconds,
        tool=tool,
    )


# --- attribution and diagnosis (what the report draws and says) -------------------------------

@dataclass(frozen=True)
class Attribution:
    """Where one call's wall time goes, each part marked measured or derived."""

    wall_s: float  # measured: median wall time per call (the harness's clock)
    busy_s: float  # measured: device busy per call (profiler)
    copies_s: float  # measured: host<->device copies on the device (profiler)
    compute_s: float  # derived: busy minus copies
    host_s: float  # derived: wall minus busy (launch, dispatch, Python, input pipeline)
    cold_extra_s: float | None  # measured: first call minus a warm one

    @property
    def busy_share(self) -> float:
        return self.busy_s / self.wall_s if self.wall_s > 0 else float("nan")

    def parts(self) -> dict[str, float]:
        """The three parts that add up to wall time (copies + compute + host)."""
        return {"copies": self.copies_s, "compute": self.compute_s, "host": self.host_s}


def attribute(wall_s: float, busy_s: float, copies_s: float,
              cold_s: float | None = None) -> Attribution:
    """Split a warm call into copies, device compute and host overhead.

    Busy above wall (profiled and timed passes differ a little) leaves no host part rather
    than a negative one; copies above busy cannot happen for a union, but are capped anyway.
    """
    busy = min(busy_s, wall_s) if wall_s > 0 else busy_s
    copies = min(copies_s, busy)
    cold_extra = None if cold_s is None else max(cold_s - wall_s, 0.0)
    return Attribution(wall_s=wall_s, busy_s=busy, copies_s=copies, compute_s=busy - copies,
                       host_s=max(wall_s - busy, 0.0), cold_extra_s=cold_extra)


@dataclass(frozen=True)
class Diagnosis:
    """What bounds a GPU cell, and the figures that decide it."""

    kind: DiagnosisKind  # LAUNCH, TRANSFER, COMPUTE, MEMORY or DEVICE; HOST on a CPU
    text: str


def _said(kind: DiagnosisKind, rest: str) -> Diagnosis:
    """KIND, with its line: the kind's word, then REST (the figures that decided it)."""
    return Diagnosis(kind, f"{kind}{rest}")


def diagnose(attribution: Attribution, kernels_per_call: float | None = None,
             flops: float | None = None, nbytes: float | None = None,
             peak_gflops: float | None = None, bandwidth_gbps: float | None = None) -> Diagnosis:
    """Launch-bound, transfer-bound, near the FLOP ceiling, near bandwidth, or none of these.

    Rates are taken over device-busy time, not wall time: the question is how well the device
    uses the time it works, once the host's share has been named.
    """
    share = attribution.busy_share
    busy = attribution.busy_s
    # Plain digits (three_digits): 80,700 kernels printed as 8.07e+04 failed harness check.
    kernels = f", {three_digits(kernels_per_call)} kernels per call" if kernels_per_call else ""
    figures = f"busy {_ms(busy)} of {_ms(attribution.wall_s)} wall ({100 * share:.0f}%){kernels}"
    if share < LAUNCH_BOUND_SHARE:
        return _said(DiagnosisKind.LAUNCH, f": {figures}; the host's launch, dispatch "
                    f"and Python take {_ms(attribution.host_s)} per call")
    if busy > 0 and attribution.copies_s / busy >= TRANSFER_BOUND_SHARE:
        return _said(DiagnosisKind.TRANSFER, f": copies {_ms(attribution.copies_s)} "
                    f"of {_ms(busy)} busy ({100 * attribution.copies_s / busy:.0f}%); "
                    f"{figures}")
    flop_fraction = _fraction(flops, busy, peak_gflops)
    byte_fraction = _fraction(nbytes, busy, bandwidth_gbps)
    if flops and peak_gflops and flop_fraction is not None and flop_fraction >= NEAR_CEILING:
        return _said(DiagnosisKind.COMPUTE, f" near the ceiling: "
                    f"{_rate(flops / busy / 1e9)} GFLOP/s while busy = "
                    f"{100 * flop_fraction:.0f}% "
                    f"of the measured {_rate(peak_gflops)}; {figures}")
    if nbytes and bandwidth_gbps and byte_fraction is not None and byte_fraction >= NEAR_CEILING:
        return _said(DiagnosisKind.MEMORY, f" near bandwidth: "
                    f"{_rate(nbytes / busy / 1e9)} GB/s while busy = "
                    f"{100 * byte_fraction:.0f}% "
                    f"of the measured {_rate(bandwidth_gbps)}; {figures}")
    rates = [f"{100 * fraction:.0f}% of peak {what}" for fraction, what in
             ((flop_fraction, "FLOP/s"), (byte_fraction, "bandwidth")) if fraction is not None]
    below = f" ({', '.join(rates)})" if rates else " (no ceiling to compare with)"
    return _said(DiagnosisKind.DEVICE, f" below its ceilings{below}: {figures}")


def _fraction(work: float | None, busy_s: float, ceiling_per_s_in_g: float | None) -> float | None:
    if not work or not ceiling_per_s_in_g or busy_s <= 0:
        return None
    return work / busy_s / 1e9 / ceiling_per_s_in_g


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _ms(seconds: float) -> str:
    return format_seconds(seconds)

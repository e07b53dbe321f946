"""Energy per call and per step, from the hardware's own energy counters; never a guess.

GPU: NVML's total-energy counter (millijoules since the driver loaded, Volta and newer), read
around the timed samples. It advances in steps (every 20-100 ms), so a window shorter than
MIN_WINDOW_S is not reported from the samples: an energy pass of more calls after the check
extends it to EXTEND_TO_S, or the record says `not measured` and why. The counter holds the
whole board's energy, idle included (~80 W on an H200 at rest), so the idle power measured
before the cell is stored beside it, and both figures are kept: the total (what the board
drew per call: the one reported) and the share above idle (what the work added).

CPU: RAPL through the kernel's powercap files (intel-rapl:N/energy_uj, package domains only,
wrapping at max_energy_range_uj), where the kernel exposes them and they are readable (root
only since Linux 5.10); else `unavailable` with the reason. Never an estimate from a TDP.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from harness.core import settings
from harness.data.records import EnergyRecord

POWERCAP_ENV = "HARNESS_POWERCAP_ROOT"  # read by harness.core.settings, never here
POWERCAP_ROOT = Path("/sys/class/powercap")
# A window must be this long for a counter that advances every 20-100 ms to be within ~10%.
MIN_WINDOW_S = 1.0
# An energy pass runs calls for about this long (two 100 ms steps are then 10% at worst).
EXTEND_TO_S = 2.0
# Idle power: the counter over this long with nothing launched, before the cell's first case.
IDLE_WINDOW_S = 1.0
# Idle windows are repeated (at most IDLE_MAX_WINDOWS) until two in a row agree this closely.
IDLE_MAX_WINDOWS, IDLE_SETTLED = 5, 0.03
REPORTED = "total (idle included)"


class EnergyCounter(Protocol):
    """A monotonic energy reading in joules (None when the hardware gives none)."""

    name: str

    def read_joules(self) -> float | None: ...


@dataclass
class NvmlEnergy:
    """The NVML total-energy counter of one GPU (harness.measure.gpustate.NvmlGpu)."""

    gpu: Any
    name: str = "NVML total energy counter"

    def read_joules(self) -> float | None:
        return self.gpu.energy_joules()


@dataclass
class RaplDomain:
    name: str
    energy_path: Path
    max_range_uj: int
    last_uj: int = 0
    total_uj: int = 0  # accumulated across wraparounds since the counter was opened


@dataclass
class RaplEnergy:
    """The sum of RAPL package domains, unwrapped: each read adds the step since the last."""

    domains: list[RaplDomain] = field(default_factory=list)
    name: str = "RAPL"

    def read_joules(self) -> float | None:
        for domain in self.domains:
            try:
                now = int(domain.energy_path.read_text())
            except (OSError, ValueError):
                return None
            step = now - domain.last_uj
            if step < 0:  # wrapped at max_energy_range_uj
                step += domain.max_range_uj
            domain.total_uj += step
            domain.last_uj = now
        return sum(domain.total_uj for domain in self.domains) / 1e6


def open_rapl(root: Path | None = None) -> RaplEnergy | str:
    """The package domains under the powercap folder, or why there are none."""
    root = Path(root or settings.active().powercap_root or POWERCAP_ROOT)
    if not root.is_dir():
        return f"no {root} (the kernel exposes no powercap/RAPL here)"
    zones = sorted(path for path in root.glob("intel-rapl:*") if path.name.count(":") == 1)
    domains = []
    for zone in zones:
        try:
            name = (zone / "name").read_text().strip()
        except OSError:
            continue
        if not name.startswith("package"):
            continue  # psys would count the packages twice; dram/core are inside subzones
        try:
            first = int((zone / "energy_uj").read_text())
            max_range = int((zone / "max_energy_range_uj").read_text())
        except PermissionError:
            return (f"{zone / 'energy_uj'} is not readable by this user (root only since "
                    "Linux 5.10)")
        except (OSError, ValueError) as exc:
            return f"{zone / 'energy_uj'} unreadable: {type(exc).__name__}: {exc}"
        domains.append(RaplDomain(name, zone / "energy_uj", max_range, last_uj=first))
    if not domains:
        return f"no RAPL package domain under {root}"
    return RaplEnergy(domains, name="RAPL " + " + ".join(d.name for d in domains))


@dataclass
class EnergyWindow:
    """A TimedWindow reading one counter at begin() and end(calls)."""

    counter: EnergyCounter
    clock: Callable[[], float] = time.perf_counter
    start_j: float | None = None
    end_j: float | None = None
    start_s: float = 0.0
    end_s: float = 0.0
    calls: int = 0

    def begin(self) -> None:
        self.start_s, self.start_j = self.clock(), self.counter.read_joules()

    def end(self, calls: int) -> None:
        self.end_s, self.end_j, self.calls = self.clock(), self.counter.read_joules(), calls

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def joules(self) -> float | None:
        if self.start_j is None or self.end_j is None:
            return None
        return self.end_j - self.start_j


def measure_idle(counters: dict[str, EnergyCounter], seconds: float = IDLE_WINDOW_S,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.perf_counter,
                 max_windows: int = IDLE_MAX_WINDOWS) -> dict[str, IdlePower]:
    """Each counter's power with nothing launched (watts None where it gave no reading).

    Quiet windows one after another until two in a row agree within IDLE_SETTLED (every
    counter), at most max_windows: a GPU that has just been busy, or whose context was just
    created, draws more for a few seconds (131 W read against 122 W settled on an H200, which
    made the share above idle negative). The last window is the figure; 'settled' says
    whether it agreed with the one before.
    """
    found: dict[str, IdlePower] = {}
    previous: dict[str, float] = {}
    for count in range(1, max_windows + 1):
        windows = {name: EnergyWindow(counter, clock) for name, counter in counters.items()}
        for window in windows.values():
            window.begin()
        sleep(seconds)
        for window in windows.values():
            window.end(0)
        found = {name: idle_record(window) for name, window in windows.items()}
        watts = {name: record.watts for name, record in found.items()
                 if record.watts is not None}
        settled = bool(watts) and all(
            name in previous and abs(value - previous[name]) <= IDLE_SETTLED * previous[name]
            for name, value in watts.items())
        found = {name: replace(record, settled=settled, windows=count)
                 for name, record in found.items()}
        if settled or not watts:
            break
        previous = watts
    return found


@dataclass(frozen=True)
class IdlePower:
    """A counter's power over one quiet window before the cell (None: it gave no reading),
    and whether it agreed with the window before it (`settled`, after `windows` windows)."""

    counter: str
    watts: float | None
    window_s: float = 0.0
    settled: bool = False
    windows: int = 1


def idle_record(window: EnergyWindow) -> IdlePower:
    joules = window.joules
    if joules is None or window.seconds <= 0:
        return IdlePower(window.counter.name, None)
    return IdlePower(window.counter.name, joules / window.seconds, window.seconds)


def energy_pass(counters: dict[str, EnergyCounter], step: Callable[[], object],
                synchronize: Callable[[], None], seconds_per_call: float,
                target_s: float = EXTEND_TO_S,
                clock: Callable[[], float] = time.perf_counter,
                max_chunks: int = 8) -> dict[str, EnergyWindow]:
    """Back-to-back calls between reads of every counter until the window lasts target_s.

    The calls go in chunks sized from seconds_per_call, with a sync and a clock read after
    each: the timed median is only an estimate (a loaded host inflates it, a warm cache
    shrinks it), and a chunk count fixed from it once left windows of 0.38 s where 2 s were
    meant. Each further chunk is sized from the rate seen so far; max_chunks bounds the pass
    when a clock that does not advance (or calls that take no time) would never reach it.
    """
    windows = {name: EnergyWindow(counter, clock) for name, counter in counters.items()}
    synchronize()
    for window in windows.values():
        window.begin()
    started, calls = clock(), 0
    chunk = max(1, math.ceil(target_s / max(seconds_per_call, 1e-9)))
    for _ in range(max_chunks):
        for _ in range(chunk):
            step()
        synchronize()
        calls += chunk
        elapsed = clock() - started
        if elapsed >= target_s:
            break
        per_call = elapsed / calls if elapsed > 0 else seconds_per_call
        chunk = max(1, math.ceil((target_s - elapsed) / max(per_call, 1e-9) * 1.1))
    for window in windows.values():
        window.end(calls)
    return windows


def window_record(window: EnergyWindow, steps_per_call: float | None,
                  idle: IdlePower | None, source: str) -> EnergyRecord:
    """Energy per call and per step from one window, total and above idle."""
    joules, calls = window.joules, window.calls
    if joules is None:
        return EnergyRecord.not_measured(f"{window.counter.name} gave no reading")
    if calls < 1:
        return EnergyRecord.not_measured("no warm calls in the window")
    if window.seconds < MIN_WINDOW_S:
        return EnergyRecord.not_measured(
            f"window too short: {window.seconds:.2g} s < {MIN_WINDOW_S} s for a counter that "
            "advances every 20-100 ms")
    steps = steps_per_call or 1
    idle_watts = idle.watts if idle else None
    above = None if idle_watts is None else joules - idle_watts * window.seconds
    return EnergyRecord(
        status="ok", counter=window.counter.name, source=source, reported=REPORTED,
        window_s=window.seconds, calls=calls, joules_total=joules,
        watts_mean=joules / window.seconds, joules_per_call=joules / calls,
        joules_per_step=joules / calls / steps, steps_per_call=steps,
        idle_watts=idle_watts,
        idle_window_s=None if idle is None or above is None else idle.window_s,
        idle_settled=None if idle is None or above is None else idle.settled,
        joules_per_call_above_idle=None if above is None else above / calls,
        joules_per_step_above_idle=None if above is None else above / calls / steps)

"""The hardware's own energy counters, and a window read around timed calls; never a guess.

GPU: NVML's total-energy counter (millijoules since the driver loaded, Volta and newer). CPU:
RAPL through the kernel's powercap files (intel-rapl:N/energy_uj, package domains only,
wrapping at max_energy_range_uj), where the kernel exposes them and they are readable (root
only since Linux 5.10); else `unavailable` with the reason. Never an estimate from a TDP.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

POWERCAP_ENV = "HARNESS_POWERCAP_ROOT"  # read by harness.core.settings, never here
POWERCAP_ROOT = Path("/sys/class/powercap")


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
    """The package domains under the powercap folder ROOT (the run's settings' powercap_root;
    None: the kernel's), or why there are none."""
    root = Path(root or POWERCAP_ROOT)
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
    calls: float = 0  # whole calls; a pass over part of each counts the fraction

    def begin(self) -> None:
        self.start_s, self.start_j = self.clock(), self.counter.read_joules()

    def end(self, calls: float) -> None:
        self.end_s, self.end_j, self.calls = self.clock(), self.counter.read_joules(), calls

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def joules(self) -> float | None:
        if self.start_j is None or self.end_j is None:
            return None
        return self.end_j - self.start_j

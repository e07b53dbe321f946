"""Host metadata collectors: small functions, none of which imports a framework."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.data.ceilings import Fingerprint


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo, or platform.processor() elsewhere."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def process_age_s() -> float:
    """Seconds since this process started (0.0 where it cannot be told).

    On Linux from the kernel's own clock: /proc/self/stat's start in ticks since boot against
    CLOCK_BOOTTIME. psutil's create_time adds the boot time, which /proc/stat keeps in whole
    seconds: on the 2-core VM it read 0.7 s too old for a process 0.04 s old."""
    try:
        with open("/proc/self/stat") as stat:
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME)
                   - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux
        pass
    try:
        import psutil

        return max(0.0, time.time() - psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - unknown: the caller counts from its own clock
        return 0.0


def usable_cores() -> int:
    """Cores this process may run on (affinity), which can be fewer than the host has."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def nvidia_query(field: str) -> list[str]:
    """One `nvidia-smi --query-gpu` column, a line per GPU; [] without a driver."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listing = subprocess.run(
            ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listing.splitlines() if line.strip()]


def nvidia_gpus() -> list[str]:
    """GPU names from nvidia-smi, honouring nothing but the driver; [] without one."""
    return nvidia_query("name")


def visible_gpus() -> list[str]:
    """GPUs a worker would see: nvidia-smi's list filtered by CUDA_VISIBLE_DEVICES."""
    return only_visible(nvidia_gpus())


def only_visible(per_gpu: list[str]) -> list[str]:
    """The entries of a per-GPU nvidia-smi column that CUDA_VISIBLE_DEVICES lets a worker see."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return per_gpu
    indices = [int(i) for i in visible.split(",") if i.strip().isdigit()]
    return [per_gpu[i] for i in indices if i < len(per_gpu)]


def visible_gpu_memory_bytes() -> list[int]:
    """Each visible GPU's total memory (nvidia-smi's memory.total, MiB), for the memory fit's
    capacity (harness.analysis.memoryfit); [] without a driver or when unreadable."""
    totals = []
    for text in only_visible(nvidia_query("memory.total")):
        number = text.split()[0] if text.split() else ""  # "143771 MiB"
        if not number.isdigit():
            return []
        totals.append(int(number) * 2**20)
    return totals


def machine_label() -> str:
    """A short name for series labels: hostname plus the accelerator if any."""
    gpus = visible_gpus()
    return f"{platform.node()} ({gpus[0]})" if gpus else f"{platform.node()} (cpu only)"


def machine_fingerprint(libraries: Sequence[str]) -> Fingerprint:
    """What a probe's figures depend on: CPU model, usable cores, the visible GPUs and their
    driver, and the versions of LIBRARIES (distribution names; None when not installed).

    Why without a framework import: the parent reads it before every run to decide whether the
    remembered ceilings still describe this machine (harness.measure.ceilings), and importing
    torch to ask would cost what remembering saves. GPUs and driver come from nvidia-smi.
    """
    versions: dict[str, str | None] = {}
    for name in sorted(libraries):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    gpus = visible_gpus()
    return Fingerprint(cpu_model=cpu_model(), cores=usable_cores(), gpus=gpus,
                       gpu_driver=_nvidia_driver() if gpus else None, libraries=versions)


def fingerprint_key(fingerprint: Mapping[str, object]) -> str:
    """A short stable key of a fingerprint, for the per-machine caches (ceilings, idle power,
    advise's end): a home folder shared by several machines (NFS on a cluster) keeps each
    machine's own entry."""
    text = json.dumps(fingerprint, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _nvidia_driver() -> str | None:
    """The driver version nvidia-smi reports (one per host), or None."""
    return next(iter(nvidia_query("driver_version")), None)


def load_average() -> list[float] | None:
    """1/5/15-minute load: a busy machine explains noisy or slow cells (2 cores, load 4...)."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def host_metadata() -> dict[str, Any]:
    return {
        "load_average": load_average(),
        "hostname": platform.node(),
        "machine_label": machine_label(),
        "cpu_model": cpu_model(),
        "cores": usable_cores(),
        "memory_bytes": memory_bytes(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "gpus": visible_gpus(),
        "gpu_memory_bytes": visible_gpu_memory_bytes(),
    }


# fp32 FLOPs one core can retire per cycle: SIMD lanes x 2 (fused multiply-add) x 2 FMA units.
# Two units is the most any x86 core has, so this errs high, as a bound must.
SIMD_FP32_FLOPS_PER_CYCLE = (("avx512f", 64), ("avx2", 32), ("avx", 16), ("sse2", 8))
# All-core clocks above this are not sold; VMs often report only the base clock, so the
# reported figure alone would put the bound under what turbo reaches.
ASSUMED_MAX_GHZ = 4.0


@dataclass(frozen=True)
class TheoreticalPeak:
    """A CPU's fp32 FLOP/s bound and the arithmetic that set it."""

    gflops: float
    how: str  # "4 cores x 32 fp32 FLOP/cycle (avx2) x 4 GHz (...)"


def cpu_theoretical_gflops(cpuinfo: Path = Path("/proc/cpuinfo")) -> TheoreticalPeak | None:
    """An upper bound on fp32 FLOP/s from cores x SIMD width x clock, with how it was derived.

    Not a target: a physical limit that no honest CPU result can pass (Linux only; `cpuinfo`
    is another file in that format, for tests).
    """
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    flags = set(next((line.split(":", 1)[1].split() for line in text.splitlines()
                      if line.startswith("flags")), []))
    isa, per_cycle = next(((name, flops) for name, flops in SIMD_FP32_FLOPS_PER_CYCLE
                           if name in flags), ("scalar", 2))
    reported = [float(line.split(":", 1)[1]) / 1000 for line in text.splitlines()
                if line.startswith("cpu MHz")]
    ghz = max([ASSUMED_MAX_GHZ, *reported])
    cores = usable_cores()
    return TheoreticalPeak(
        cores * per_cycle * ghz,
        f"{cores} cores x {per_cycle} fp32 FLOP/cycle ({isa}) x {ghz:.2g} GHz "
        f"(the larger of the reported clock and {ASSUMED_MAX_GHZ:g} GHz)")

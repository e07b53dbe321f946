"""A fake `pynvml` with known answers, for harness.measure.gpustate and energy on a CPU box.

Selected with HARNESS_NVML_MODULE=tests.fakes.nvml (in workers too: the run's settings carry
it to them, harness.core.settings). What it reports is set by environment variables, which
the runner passes on, so a test can set them before the worker starts:
  FAKE_NVML_WATTS      the board's constant power (default 250): the energy counter grows at
                       exactly this rate, so every energy figure has a known answer
  FAKE_NVML_THROTTLE   an nvmlClocksEventReason bit mask (default 0)
  FAKE_NVML_PIDS       comma-separated compute pids on the device besides the caller's own
  FAKE_NVML_FAIL       any value: nvmlInit raises, as on a machine without a driver
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
SM_MHZ, MEM_MHZ, MAX_SM_MHZ, TEMPERATURE_C, POWER_LIMIT_W = 1980, 3201, 1980, 41, 700
_EPOCH = time.monotonic()


class NVMLError(Exception):
    pass


@dataclass
class ProcessInfo:
    pid: int
    usedGpuMemory: int = 1 << 30  # noqa: N815 - pynvml's field name


def watts() -> float:
    return float(os.environ.get("FAKE_NVML_WATTS", "250"))


def nvmlInit() -> None:  # noqa: N802 - pynvml's names
    if os.environ.get("FAKE_NVML_FAIL"):
        raise NVMLError("Driver Not Loaded")


def nvmlDeviceGetHandleByIndex(index: int) -> str:  # noqa: N802
    if index != 0:
        raise NVMLError("Invalid Argument")
    return "gpu0"


def nvmlDeviceGetHandleByUUID(uuid: str) -> str:  # noqa: N802
    if uuid != "GPU-fake-0":
        raise NVMLError("Not Found")
    return "gpu0"


def nvmlDeviceGetName(handle: str) -> str:  # noqa: N802
    return "Fake H200"


def nvmlDeviceGetUUID(handle: str) -> str:  # noqa: N802
    return "GPU-fake-0"


def nvmlDeviceGetClockInfo(handle: str, kind: int) -> int:  # noqa: N802
    return SM_MHZ if kind == NVML_CLOCK_SM else MEM_MHZ


def nvmlDeviceGetMaxClockInfo(handle: str, kind: int) -> int:  # noqa: N802
    return MAX_SM_MHZ if kind == NVML_CLOCK_SM else MEM_MHZ


def nvmlDeviceGetTemperature(handle: str, sensor: int) -> int:  # noqa: N802
    return TEMPERATURE_C


def nvmlDeviceGetPowerUsage(handle: str) -> int:  # noqa: N802
    return int(watts() * 1000)


def nvmlDeviceGetEnforcedPowerLimit(handle: str) -> int:  # noqa: N802
    return POWER_LIMIT_W * 1000


def nvmlDeviceGetCurrentClocksEventReasons(handle: str) -> int:  # noqa: N802
    return int(os.environ.get("FAKE_NVML_THROTTLE", "0"), 0)


def nvmlDeviceGetComputeRunningProcesses(handle: str) -> list[ProcessInfo]:  # noqa: N802
    others = [int(pid) for pid in os.environ.get("FAKE_NVML_PIDS", "").split(",") if pid]
    return [ProcessInfo(os.getpid()), *(ProcessInfo(pid) for pid in others)]


def nvmlDeviceGetTotalEnergyConsumption(handle: str) -> int:  # noqa: N802
    """Millijoules: the constant power times the time since this module was loaded."""
    return int((time.monotonic() - _EPOCH) * watts() * 1000)

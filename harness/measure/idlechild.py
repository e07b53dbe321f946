"""`python -m harness.measure.idlechild SETTINGS DEVICE...`: each GPU's idle power, measured
while the run's warm processes import, and remembered for the workers (idlepower's cache).

Why: a GPU cell's first round measured its idle power itself, 2-3 s on a machine's first run
(the H100's demo: 2.3 s of its 37.5 s own cost), while the seconds before the first worker,
spent waiting on the warm processes' imports, left the GPU idle. This child measures it then.

Why it is the figure the worker would measure: a context is open on each GPU (its primary
context through the driver API, the one a framework's first use opens), nothing is launched,
and the windows repeat until two agree (idlepower.measure_idle). The imports load the host's
cores, not the GPU. The host's counter is another matter: under the imports the host's idle
would read high, so where RAPL is readable this child measures nothing and the worker measures
both counters as before. The child never loads a framework (the parent never does either: it
is started by the parent) and every failure leaves the measurement to the worker.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.backend import parse_cuda_index
from harness.core import lifeline
from harness.core.settings import Settings, cache_folder
from harness.measure import gpustate, idlepower
from harness.measure.casewatch import idle_fingerprint
from harness.measure.energycounters import EnergyCounter, NvmlEnergy, open_rapl
from harness.spec import Cell

# The child's whole life at most (windows of idlepower.IDLE_WINDOW_S, at most
# IDLE_MAX_WINDOWS of them, and a context per GPU): past it, the workers measure.
CHILD_TIMEOUT_S = 20.0
NAME_LENGTH = 256


def load_driver() -> Any | None:
    """The CUDA driver library, initialised; None without one (no GPU, no driver)."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    return driver if driver.cuInit(0) == 0 else None


def device_handle(driver: Any, index: int) -> tuple[ctypes.c_int, str] | None:
    """The driver's device INDEX and its name as the driver gives it (what torch and JAX
    describe it by); None where there is no such device."""
    device = ctypes.c_int()
    name = ctypes.create_string_buffer(NAME_LENGTH)
    if driver.cuDeviceGet(ctypes.byref(device), index) != 0 or \
            driver.cuDeviceGetName(name, NAME_LENGTH, device) != 0:
        return None
    return device, name.value.decode(errors="replace")


def not_remembered(devices: list[str], settings: Settings,
                   driver: Any) -> dict[str, tuple[EnergyCounter, Any, ctypes.c_int]]:
    """Each device whose idle power the cache does not hold: its NVML counter, fingerprint
    and driver handle."""
    cache = cache_folder(settings)
    wanted: dict[str, tuple[EnergyCounter, Any, ctypes.c_int]] = {}
    for name in devices:
        index = parse_cuda_index(name)
        found = device_handle(driver, index) if index is not None else None
        gpu = gpustate.open_gpu(name, settings.nvml_module) if found is not None else ""
        if found is None or isinstance(gpu, str):
            continue
        counter = NvmlEnergy(gpu)
        fingerprint = idle_fingerprint(name, found[1])
        if idlepower.recall_idle(fingerprint, [counter.name], cache) is None:
            wanted[name] = (counter, fingerprint, found[0])
    return wanted


def measure_devices(devices: list[str], settings: Settings) -> list[str]:
    """Measure and remember the idle power of every device in DEVICES the cache lacks; the
    devices measured."""
    if not isinstance(open_rapl(Path(settings.powercap_root)), str):
        return []  # a readable host counter: the worker measures both, on a quiet host
    driver = load_driver()
    if driver is None:
        return []
    wanted = not_remembered(devices, settings, driver)
    retained: list[str] = []
    try:
        for name, (_, _, device) in wanted.items():
            # The primary context, the one a framework's first use opens: a GPU without one
            # idles in a lower power state than the worker's would.
            if driver.cuDevicePrimaryCtxRetain(ctypes.byref(ctypes.c_void_p()), device) == 0:
                retained.append(name)
        if not retained:
            return []
        found = idlepower.measure_idle({name: wanted[name][0] for name in retained})
        for name in retained:
            counter, fingerprint, _ = wanted[name]
            idlepower.remember_idle(fingerprint, {counter.name: found[name]},
                                    cache_folder(settings))
        return retained
    finally:
        for name in retained:
            driver.cuDevicePrimaryCtxRelease(wanted[name][2])


def idle_devices(cells: list[Cell], settings: Settings) -> list[str]:
    """The GPU devices whose first round a worker would measure idle power for: none for
    --quick or without energy figures (the worker measures none either)."""
    if settings.quick or not settings.energy:
        return []
    return sorted({cell.device for cell in cells
                   if cell.round == 0 and parse_cuda_index(cell.device) is not None})


def start(cells: list[Cell], settings: Settings, env: dict[str, str]) -> subprocess.Popen | None:
    """The child for CELLS' GPUs, started (None where there is nothing to measure)."""
    devices = idle_devices(cells, settings)
    if not devices:
        return None
    return subprocess.Popen([sys.executable, "-m", __name__, settings.to_json(), *devices],
                            env={**env, **lifeline.parent_environment()},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def finish(child: subprocess.Popen | None, timeout_s: float = CHILD_TIMEOUT_S) -> None:
    """Wait for CHILD (its figures are in the cache or the workers measure); killed past
    TIMEOUT_S."""
    if child is None:
        return
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


if __name__ == "__main__":
    lifeline.die_with_parent()  # no idle reading outlives the run
    measure_devices(sys.argv[2:], Settings.from_json(sys.argv[1]))

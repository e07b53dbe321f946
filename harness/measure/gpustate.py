"""The GPU's state around each case, from NVML: clocks, temperature, power, throttling, sharing.

Why: a GPU time is only as good as the device's state while it was taken. A card at its power
cap or thermal limit runs slower clocks; another process's kernels share its SMs; neither
shows in the wall clock. optimum-benchmark refuses a GPU another process uses and nvbench warns
when clocks are not locked; the harness records the state per case (before and after, and the
throttle reasons and compute processes polled while the case was timed) and flags a case timed
while throttled (power, thermal, hardware slowdown; never idle) or shared as SUSPECT.

NVML comes from nvidia-ml-py (`import pynvml`). Where it is missing or fails, the record says
`unavailable` with the reason and the case is timed as before. The settings' nvml_module
(HARNESS_NVML_MODULE, handed to the worker by the run: harness.core.settings) names another
module with pynvml's API (the tests' fake).
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.settings import DEFAULT_NVML_MODULE
from harness.data.records import OK, GpuProcesses, GpuReadings, GpuState, WhileTimed

NVML_MODULE_ENV = "HARNESS_NVML_MODULE"  # read by harness.core.settings, never here
# How often the watcher reads throttle reasons and processes while a case is timed: fine
# enough to see a throttle that lasts a fraction of a second, and ~100 us of NVML calls in a
# thread that releases the GIL is far below the noise of any GPU case.
POLL_INTERVAL_S = 0.1
# nvmlClocksEventReason* bits (NVML's nvml.h), by the name the record uses.
THROTTLE_BITS = {
    0x001: "gpu_idle", 0x002: "applications_clocks_setting", 0x004: "sw_power_cap",
    0x008: "hw_slowdown", 0x010: "sync_boost", 0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown", 0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# The reasons that slow a busy GPU below the clocks it would otherwise run: power and thermal
# limits and hardware slowdown. Idle, application clocks and sync boost describe a setting or
# an idle device, not a throttled case.
SLOWING_THROTTLES = {"sw_power_cap": "power cap", "hw_slowdown": "hardware slowdown",
                     "sw_thermal_slowdown": "thermal (software)",
                     "hw_thermal_slowdown": "thermal (hardware)",
                     "hw_power_brake_slowdown": "power brake"}


def throttle_names(mask: int) -> list[str]:
    """The named reasons set in an nvmlClocksEventReason bit mask."""
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def load_nvml(module_name: str | None = None) -> tuple[Any | None, str]:
    """(initialised NVML module, '') or (None, why not). MODULE_NAME: the run's settings'
    nvml_module (the test suite's fake); None: pynvml."""
    module_name = module_name or DEFAULT_NVML_MODULE
    try:
        nvml = importlib.import_module(module_name)
    except ImportError:
        return None, f"{module_name} is not installed (pip install nvidia-ml-py)"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError or a missing driver library
        return None, f"NVML failed to start: {type(exc).__name__}: {exc}"
    return nvml, ""


def nvml_target(cuda_index: int, visible: str | None) -> tuple[str, Any]:
    """How to find the framework's cuda:N in NVML: ('index', K) or ('uuid', 'GPU-...').

    NVML numbers every GPU of the machine; CUDA numbers the visible ones. With
    CUDA_VISIBLE_DEVICES set, cuda:N is its N-th entry (an index or a UUID). Without it the
    two agree where CUDA_DEVICE_ORDER=PCI_BUS_ID or the GPUs are all of one model (the lent
    machines); the record keeps the NVML name and UUID so a reader can check.
    """
    if not visible:
        return "index", cuda_index
    entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
    if cuda_index >= len(entries):
        raise ValueError(f"cuda:{cuda_index} is not among CUDA_VISIBLE_DEVICES={visible}")
    entry = entries[cuda_index]
    if entry.isdigit():
        return "index", int(entry)
    if entry.startswith("GPU-"):
        return "uuid", entry
    raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r} (MIG or partial UUID) is not "
                     "mapped to an NVML device here")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlGpu:
    """One GPU through NVML; every reading returns None where the device does not support it."""

    def __init__(self, nvml: Any, handle: Any, cuda_name: str) -> None:
        self.nvml, self.handle, self.cuda_name = nvml, handle, cuda_name
        self.name = self._try(lambda: _text(nvml.nvmlDeviceGetName(handle)))
        self.uuid = self._try(lambda: _text(nvml.nvmlDeviceGetUUID(handle)))

    def _try(self, read: Any) -> Any:
        try:
            return read()
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported and kin: unknown, not fatal
            return None

    def readings(self) -> GpuReadings:
        """Clocks (MHz), temperature (C) and power (W) now."""
        nvml, handle = self.nvml, self.handle
        power_mw = self._try(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        limit_mw = self._try(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
        return GpuReadings(
            sm_clock_mhz=self._try(lambda: nvml.nvmlDeviceGetClockInfo(handle, 1)),
            memory_clock_mhz=self._try(lambda: nvml.nvmlDeviceGetClockInfo(handle, 2)),
            temperature_c=self._try(lambda: nvml.nvmlDeviceGetTemperature(handle, 0)),
            power_w=None if power_mw is None else power_mw / 1000,
            power_limit_w=None if limit_mw is None else limit_mw / 1000)

    def max_sm_clock_mhz(self) -> int | None:
        return self._try(lambda: self.nvml.nvmlDeviceGetMaxClockInfo(self.handle, 1))

    def throttle_mask(self) -> int | None:
        """nvmlDeviceGetCurrentClocksEventReasons (older drivers: ...ThrottleReasons)."""
        for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                     "nvmlDeviceGetCurrentClocksThrottleReasons"):
            read = getattr(self.nvml, name, None)
            if read is not None:
                mask = self._try(lambda read=read: read(self.handle))
                if mask is not None:
                    return int(mask)
        return None

    def compute_pids(self) -> list[int] | None:
        processes = self._try(lambda: self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle))
        return None if processes is None else [int(process.pid) for process in processes]

    def energy_joules(self) -> float | None:
        """The device's energy counter since the driver loaded (Volta and newer)."""
        millijoules = self._try(lambda: self.nvml.nvmlDeviceGetTotalEnergyConsumption(
            self.handle))
        return None if millijoules is None else millijoules / 1000


def open_gpu(device_name: str, module_name: str | None = None,
             visible: str | None = None) -> NvmlGpu | str:
    """The NVML view of the framework's 'cuda:N' ('cuda' is cuda:0), or why there is none."""
    device_name = "cuda:0" if device_name == "cuda" else device_name
    if not device_name.startswith("cuda:"):
        return f"{device_name} is not a CUDA device"
    nvml, reason = load_nvml(module_name)
    if nvml is None:
        return reason
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    try:
        how, key = nvml_target(int(device_name.split(":", 1)[1]), visible)
        handle = (nvml.nvmlDeviceGetHandleByIndex(key) if how == "index"
                  else nvml.nvmlDeviceGetHandleByUUID(key))
    except Exception as exc:  # noqa: BLE001 - a bad index or an NVML error is the reason
        return f"NVML has no handle for {device_name}: {type(exc).__name__}: {exc}"
    return NvmlGpu(nvml, handle, device_name)


# --- which compute processes are ours ----------------------------------------------------------

def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def is_ours(pid: int, group: int, root_pid: int, proc: Path = Path("/proc")) -> bool | None:
    """True for a process of the worker's group or tree, False for another, None if unseen.

    None: no such pid here, as when NVML reports pids of another pid namespace (a container).
    """
    fields = _stat_fields(pid, proc)
    if fields is None:
        return None
    if int(fields[2]) == group:
        return True
    seen = set()
    while pid > 1 and pid not in seen:  # walk up the parents: a descendant in its own session
        if pid == root_pid:
            return True
        seen.add(pid)
        fields = _stat_fields(pid, proc)
        if fields is None:
            return False
        pid = int(fields[1])
    return False


def group_size(group: int, proc: Path = Path("/proc")) -> int:
    count = 0
    for entry in proc.iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name), proc)
            count += bool(fields and int(fields[2]) == group)
    return count


# --- the watcher of one case -------------------------------------------------------------------

@dataclass
class PollLog:
    """What the polls during one timed window saw."""

    polls: int = 0
    reason_polls: dict[str, int] = field(default_factory=dict)
    sm_clocks: list[int] = field(default_factory=list)
    powers: list[float] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)
    processes_readable: bool = True


class GpuStateWatch:
    """Reads a GPU's state before and after a case and polls it while the case is timed.

    Used as the timing core's TimedWindow: begin() starts a polling thread, end() stops it.
    """

    def __init__(self, gpu: NvmlGpu, poll_s: float = POLL_INTERVAL_S,
                 proc: Path = Path("/proc")) -> None:
        self.gpu, self.poll_s, self.proc = gpu, poll_s, proc
        self.group, self.root_pid = os.getpgrp(), os.getpid()
        self.before: GpuReadings | None = None
        self.after: GpuReadings | None = None
        self.log = PollLog()
        self.timed_s: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def before_case(self) -> None:
        self.stop()  # a case that failed while timed never reached end()
        self.before, self.after, self.log, self.timed_s = self.gpu.readings(), None, PollLog(), None

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def poll(self) -> None:
        """One look: throttle reasons, SM clock, power, compute processes."""
        log = self.log
        log.polls += 1
        mask = self.gpu.throttle_mask()
        for name in throttle_names(mask or 0):
            log.reason_polls[name] = log.reason_polls.get(name, 0) + 1
        readings = self.gpu.readings()
        if readings.sm_clock_mhz is not None:
            log.sm_clocks.append(readings.sm_clock_mhz)
        if readings.power_w is not None:
            log.powers.append(readings.power_w)
        pids = self.gpu.compute_pids()
        if pids is None:
            log.processes_readable = False
        else:
            log.pids.update(pids)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.poll()

    def begin(self) -> None:
        self.poll()
        self._stop.clear()
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="gpu-state-poll", daemon=True)
        self._thread.start()

    def end(self, calls: float) -> None:  # noqa: ARG002 - the TimedWindow signature
        self.timed_s = time.perf_counter() - self._started
        self.stop()
        self.poll()

    def after_case(self) -> GpuState:
        """The case's record (extra['gpu_state']), its 'suspect' text included."""
        self.after = self.gpu.readings()
        while_timed = self._while_timed() if self.log.polls else None
        processes = self._processes()
        return GpuState(OK, cuda_device=self.gpu.cuda_name, nvml_name=self.gpu.name,
                        nvml_uuid=self.gpu.uuid, before=self.before, after=self.after,
                        max_sm_clock_mhz=self.gpu.max_sm_clock_mhz(), while_timed=while_timed,
                        processes=processes, suspect=suspect_text(while_timed, processes))

    def _while_timed(self) -> WhileTimed:
        log = self.log
        return WhileTimed(polls=log.polls, seconds=self.timed_s,
                          throttle_reasons=dict(sorted(log.reason_polls.items())),
                          sm_clock_mhz_min=min(log.sm_clocks, default=None),
                          sm_clock_mhz_max=max(log.sm_clocks, default=None),
                          power_w_mean=sum(log.powers) / len(log.powers) if log.powers
                          else None)

    def _processes(self) -> GpuProcesses:
        """Compute processes seen while timed: ours, others, and pids this /proc cannot see."""
        if not self.log.processes_readable and not self.log.pids:
            return GpuProcesses(readable=False)
        if not self.log.pids:
            return GpuProcesses(
                readable=True, ours=[], others=[], unseen=[],
                note="NVML listed no compute process while timed, not even this worker's "
                     "(hidden, as in some containers): sharing cannot be seen")
        ours: list[int] = []
        others: list[int] = []
        unseen: list[int] = []
        for pid in sorted(self.log.pids):
            verdict = is_ours(pid, self.group, self.root_pid, self.proc)
            (ours if verdict else unseen if verdict is None else others).append(pid)
        return GpuProcesses(readable=True, ours=ours, others=others, unseen=unseen,
                            our_group_size=group_size(self.group, self.proc) if unseen
                            else None)


def suspect_text(while_timed: WhileTimed | None, processes: GpuProcesses | None) -> str:
    """Why this case's GPU time may not be the device's own ('' when nothing is wrong)."""
    reasons = []
    timed = while_timed or WhileTimed()
    for name, count in timed.throttle_reasons.items():
        if name in SLOWING_THROTTLES:
            reasons.append(f"GPU throttled ({SLOWING_THROTTLES[name]}, {name}) in {count} of "
                           f"{timed.polls} polls while timed")
    seen = processes or GpuProcesses()
    if seen.others:
        pids = ", ".join(str(pid) for pid in seen.others[:5])
        reasons.append(f"GPU shared: other compute processes on the device while timed "
                       f"(pid {pids})")
    unseen = seen.unseen or []
    # NVML's pids come from another pid namespace: ours cannot be told from others by pid,
    # only more processes than our whole group holds are certainly not all ours.
    if unseen and not seen.ours and len(unseen) > (seen.our_group_size or 1):
        reasons.append(f"GPU shared: {len(unseen)} compute processes on the device while "
                       f"timed, more than this worker's {seen.our_group_size} "
                       "(their pids are from another pid namespace)")
    return "; ".join(reasons)

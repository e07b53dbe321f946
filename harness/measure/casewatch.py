"""What the worker reads around each case besides the clock: the GPU's state and energy.

One CaseWatch per cell: it opens NVML (GPU cells) and RAPL (where readable), measures idle
power before the first case (or reads the figure this machine remembered within the hour),
and per case hands the timing core a window (begin/end around the timed samples) and then
writes extra['gpu_state'] and extra['energy'] (from an edge-aligned energy pass where the
timed samples were too short for the counter) plus the GPU-state
part of the case's SUSPECT text. Every failure becomes a status and a reason in the record.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.settings import Settings, cache_folder
from harness.core.units import digits
from harness.data.records import CaseEnergy, EnergyRecord, GpuState
from harness.data.serial import JsonObject
from harness.measure import edgepass, energy, envinfo, gpustate, idlepower
from harness.measure.counteredges import EdgeSpan
from harness.measure.energycounters import EnergyCounter, EnergyWindow, NvmlEnergy, open_rapl

# A cell's later rounds skip what its first round measured once for all of them (the energy
# here, the device profile in harness.run.casepasses).
LATER_ROUND_REASON = "measured in the cell's first round only"
# Why no energy pass (seconds each) runs for a case whose timed samples were too short.
QUICK_REASON = "--quick: no energy pass (the timed samples were too short for the counter)"
RETRIED_REASON = "contended: this timing was repeated, and no energy pass spent on it"
MEASURE_STYLE_REASON = ("timed inside the backend's own processes (e.g. data-parallel ranks): "
                        "no window around the warm calls")


def idle_fingerprint(device_name: str, description: str) -> JsonObject:
    """What a remembered idle power is matched on: the host, its CPU and usable cores, and
    the device (its name in the run and as its framework describes it). Read without
    nvidia-smi (a worker's start must not pay a subprocess for what it saves)."""
    return {"host": platform.node(), "cpu_model": envinfo.cpu_model(),
            "cores": envinfo.usable_cores(), "device": device_name,
            "description": description}


class CaseWatch:
    """The cell's counters and GPU watcher; a TimedWindow for the case being timed."""

    def __init__(self, gpu: gpustate.NvmlGpu | None, gpu_reason: str,
                 host: EnergyCounter | None, host_reason: str, is_gpu: bool,
                 cache: Path | None = None) -> None:
        self.gpu, self.gpu_reason = gpu, gpu_reason
        # The run's cache folder, where idle power is remembered (None: measured each time).
        self.cache = cache
        self.host, self.host_reason = host, host_reason
        self.is_gpu = is_gpu
        self.state = gpustate.GpuStateWatch(gpu) if gpu is not None else None
        self.device_counter = NvmlEnergy(gpu) if gpu is not None else None
        self.idle: dict[str, idlepower.IdlePower] = {}
        self.windows: dict[str, EnergyWindow] = {}
        self.pair: tuple[Callable[[], object], Callable[[], None]] | None = None

    @classmethod
    def open(cls, device: Any, settings: Settings) -> CaseWatch:
        """NVML for a GPU cell (by its 'cuda:N' name), RAPL for the host, each or a reason, by
        the run's SETTINGS (the NVML module, the powercap folder, the idle power's cache).

        Never raises: a watcher that cannot start costs its records, not the cell.
        """
        is_gpu = bool(getattr(device, "is_gpu", False))
        gpu: gpustate.NvmlGpu | None = None
        gpu_reason = "cpu cell: no GPU to watch"
        try:
            if is_gpu:
                opened = gpustate.open_gpu(str(getattr(device, "name", "")),
                                           settings.nvml_module)
                gpu, gpu_reason = (opened, "") if not isinstance(opened, str) else (None, opened)
            rapl = open_rapl(Path(settings.powercap_root))
            host, host_reason = (rapl, "") if not isinstance(rapl, str) else (None, rapl)
        except Exception as exc:  # noqa: BLE001 - the timing must go on without the records
            gpu, host = None, None
            gpu_reason = host_reason = f"watcher failed to start: {type(exc).__name__}: {exc}"
        return cls(gpu, gpu_reason, host, host_reason, is_gpu, cache_folder(settings))

    def counters(self) -> dict[str, EnergyCounter]:
        """'device' (NVML, GPU cells) and 'host' (RAPL) where each exists."""
        found: dict[str, EnergyCounter] = {}
        if self.device_counter is not None:
            found["device"] = self.device_counter
        if self.host is not None:
            found["host"] = self.host
        return found

    def measure_idle(self, fingerprint: JsonObject | None = None) -> None:
        """Idle power before the cell's first case, on every counter at once; with a
        FINGERPRINT (idle_fingerprint) and a cache folder, the figure this machine remembered
        for it within idlepower.IDLE_REMEMBER_S instead, and a new settled measurement is
        remembered."""
        counters = self.counters()
        if not counters:
            return
        if fingerprint is not None and self.cache is not None:
            names = [counter.name for counter in counters.values()]
            recalled = idlepower.recall_idle(fingerprint, names, self.cache)
            if recalled is not None:
                self.idle = {name: recalled[counter.name]
                             for name, counter in counters.items()}
                return
        self.idle = idlepower.measure_idle(counters)
        if fingerprint is not None and self.cache is not None:
            idlepower.remember_idle(fingerprint, {self.idle[name].counter: self.idle[name]
                                                  for name in self.idle}, self.cache)

    # --- per case ------------------------------------------------------------------------------

    def start_case(self) -> None:
        self.windows, self.pair = {}, None
        if self.state is not None:
            self.state.before_case()

    def attach(self, step: Callable[[], object], synchronize: Callable[[], None]) -> None:
        """The case's timed step and its sync: an energy pass may need more of its calls."""
        self.pair = (step, synchronize)

    def begin(self) -> None:
        if self.state is not None:
            self.state.begin()
        self.windows = {name: EnergyWindow(counter)
                        for name, counter in self.counters().items()}
        for window in self.windows.values():
            window.begin()

    def end(self, calls: float) -> None:
        for window in self.windows.values():
            window.end(calls)
        if self.state is not None:
            self.state.end(calls)

    def finish_case(self, seconds_per_call: float | None,
                    steps_per_call: float | None,
                    retried_if_contended: bool = False,
                    cores_contended: bool = False,
                    no_energy_pass: str = "") -> tuple[dict[str, Any], str]:
        """(extras to merge into the case's extra, GPU-state suspect text).

        `retried_if_contended`: a contended timing (busy cores, or a GPU state that makes the
        case suspect) will be timed again, so no energy pass is spent on it. `no_energy_pass`
        (why not: a later round of the cell, --quick): the counters are read over the timed
        samples where those are long enough, and no extra pass runs.
        A failure here costs these records only, never the case's time.
        """
        try:
            extras: dict[str, Any] = {}
            suspect = ""
            if self.state is not None:
                state = self.state.after_case()
                extras["gpu_state"], suspect = state.to_dict(), state.suspect
            elif self.is_gpu:
                extras["gpu_state"] = GpuState.unavailable(self.gpu_reason).to_dict()
            if retried_if_contended and (cores_contended or suspect):
                skipped = EnergyRecord.not_measured(RETRIED_REASON)
                extras["energy"] = CaseEnergy(device=skipped if self.is_gpu else None,
                                              host=skipped).to_dict()
            else:
                extras["energy"] = self._energy(seconds_per_call, steps_per_call,
                                                no_energy_pass).to_dict()
            return extras, suspect
        except Exception as exc:  # noqa: BLE001 - the wall-clock result is already safe
            failed = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"}
            return {"energy": failed, "gpu_state": failed}, ""

    def _energy(self, seconds_per_call: float | None, steps_per_call: float | None,
                no_energy_pass: str = "") -> CaseEnergy:
        """Per counter: from the timed samples, from an energy pass, or why not."""
        records = {"host": EnergyRecord.unavailable(self.host_reason)}
        if self.is_gpu:
            records["device"] = EnergyRecord.unavailable(self.gpu_reason)
        windows, source = self.windows, "the timed samples"
        short = any(w.calls <= 0 or w.seconds < energy.MIN_WINDOW_S for w in windows.values())
        if windows and short and no_energy_pass:
            skipped = EnergyRecord.not_measured(no_energy_pass)
            return CaseEnergy(device=skipped if self.is_gpu else None,
                              host=records["host"] if "host" not in windows else skipped)
        if windows and short and self.pair is not None and seconds_per_call:
            timed_s = next(iter(windows.values())).seconds
            return self._energy_pass(seconds_per_call, steps_per_call, timed_s, records)
        for name in self.counters():
            window = windows.get(name)
            records[name] = (EnergyRecord.not_measured(MEASURE_STYLE_REASON) if window is None
                             else energy.window_record(window, steps_per_call,
                                                       self.idle.get(name), source))
        return CaseEnergy(device=records.get("device"), host=records["host"])

    def _energy_pass(self, seconds_per_call: float, steps_per_call: float | None,
                     timed_s: float, records: dict[str, EnergyRecord]) -> CaseEnergy:
        """More of the case's calls, every counter at once, each read between two of its own
        updates (edgepass.edge_energy_pass), or over the whole pass where it showed none."""
        assert self.pair is not None
        step, synchronize = self.pair
        counters = self.counters()
        pass_step, share = part_of_call(step, seconds_per_call)
        found = edgepass.edge_energy_pass(
            counters, pass_step, synchronize, seconds_per_call * share,
            steps_per_call=None if steps_per_call is None else steps_per_call * share)
        found = found.in_whole_calls(share) if share < 1 else found
        for name, counter in counters.items():
            records[name] = energy.edge_record(counter, found, name, steps_per_call,
                                               self.idle.get(name),
                                               pass_source(found.spans.get(name), timed_s,
                                                           share))
        return CaseEnergy(device=records.get("device"), host=records["host"])


def part_of_call(step: Callable[[], object],
                 seconds_per_call: float) -> tuple[Callable[[], object], float]:
    """(what the energy pass runs, the share of a call it is): the first steps of a long call
    where the step can stop after them (blocks.CallStep: ~PART_TARGET_S of it), else the call.

    Why: a keras-torch MNIST call on an H200 is 5 s, and a pass of one whole call was most of
    the cell's own cost; the power of an epoch's first steps is the epoch's (its phases repeat
    per step), and the record counts the pass's calls as the share of a call they were."""
    part_steps = getattr(step, "part_steps", None)
    whole = int(getattr(step, "steps_per_call", 0) or 0)
    if not callable(part_steps) or whole < 1:
        return step, 1.0
    steps = int(part_steps(seconds_per_call))
    if steps >= whole:
        return step, 1.0
    return step.part(steps), steps / whole  # type: ignore[attr-defined]


def pass_source(span: EdgeSpan | None, timed_s: float, share: float = 1.0) -> str:
    """The record's `source` for a figure from an energy pass (the report's energy line
    quotes what is in the parentheses, so they hold the whole reason, and none nested)."""
    why = f"the timed samples lasted {digits(timed_s, 2)} s, too short for the counter"
    if share < 1:
        why += f"; each pass call the first {share:.0%} of a call's steps, counted as that share"
    if span is None:
        return f"an energy pass after the check ({why}; no two counter updates seen in it)"
    return (f"an energy pass after the check (between two counter updates "
            f"{digits(span.seconds, 2)} s apart, each within "
            f"{span.resolution_s * 1e3:.2g} ms; {why})")

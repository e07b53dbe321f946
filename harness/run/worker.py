"""`python -m harness.run.worker CELL.json RESULT.json SETTINGS`: run ONE cell, write ONE JSON
document.

The only process that imports a framework. The result goes to a file, never stdout, so
framework logging cannot corrupt it; it is rewritten (atomically) after every case, so a
timeout or crash at the largest size keeps the smaller sizes already measured. SETTINGS is
the run's harness.core.settings.Settings as JSON (the runner passes them; the worker never
reads a HARNESS_* variable): handed to everything below as arguments (the cell's
CellContext, its CaseWatch), and their plugins merged into the registry before anything else.

Here: the process and its cell (the framework import, the device, the watcher, the result
document); each case is timed, checked and recorded by harness.run.caserun.
"""

from __future__ import annotations

import json
import platform
import sys
import time
import traceback
from pathlib import Path

from harness.backend import DeviceUnavailable
from harness.core import lifeline
from harness.core.registry import (
    backend_module,
    framework_installed,
    implementation_module,
    load_framework,
    load_workload,
    use_plugins,
)
from harness.core.settings import Settings
from harness.data.results import CaseResult, CellResult, HarnessCost
from harness.data.serial import JsonObject
from harness.data.store import write_json_atomic
from harness.measure.casewatch import CaseWatch, idle_fingerprint
from harness.run import memoryguard
from harness.run.caserun import CasePlan, CellContext, run_case
from harness.run.failures import failure_reason
from harness.run.forkserver import exit_now, optional_modules, unimportable
from harness.run.phaseclock import PhaseClock, phase_file_writer
from harness.spec import Cell, Status, WorkloadSpec, worst_status


def peak_host_memory_bytes() -> int | None:
    """Peak resident set size of this worker (Linux reports kilobytes)."""
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak) * (1 if sys.platform == "darwin" else 1024)
    except (ImportError, OSError):
        return None



class CellRun:
    """Accumulates the result document of one cell and saves it after every change."""

    def __init__(self, cell: Cell, result_path: Path, phase_path: Path | None = None) -> None:
        self.result_path = result_path
        self.result = CellResult(cell=cell, started=time.time())
        # The phase file, where the parent reads what this worker does now (its progress line).
        self.clock = PhaseClock(None if phase_path is None else phase_file_writer(phase_path))
        self.clock.busy = bool(cell.busy)  # an earlier round found the load lasting

    def finish(self, status: Status | None = None, reason: str = "") -> None:
        if status is None:  # the worst of the cases' statuses, and the first reason given
            cases = self.result.cases
            status = worst_status([case.status for case in cases])
            reason = next((case.reason for case in cases if case.reason), "")
        self.result.status, self.result.reason = status, reason
        self.result.finished = time.time()
        self.result.peak_host_memory_bytes = peak_host_memory_bytes()
        started = self.result.started or self.result.finished
        self.result.cost = HarnessCost(self.result.finished - started, self.clock.timed_s, 1,
                                       dict(self.clock.phases))
        self.save()

    def save(self) -> None:
        write_json_atomic(self.result_path, self.result.to_dict())



def reused_calibration(spec: WorkloadSpec, cell: Cell, position: int) -> int | None:
    """The calls per sample the cell's first round found for its case at POSITION, if this
    worker is a later round given one; None where the case is timed call by call (an epoch
    has nothing to calibrate)."""
    if spec.run.timing == "per_call" or position >= len(cell.calibration):
        return None
    return cell.calibration[position]


def reused_level(cell: Cell, position: int) -> float | None:
    """The seconds per call the cell's first round settled at for its case at POSITION, if
    this worker is a later round given one (harness.run.rounds first_round_levels)."""
    return cell.levels[position] if position < len(cell.levels) else None


def counted_flops(cell: Cell, position: int) -> JsonObject | None:
    """The FLOP record the cell's first round made for its case at POSITION, if this worker
    is a later round given one; None: count (harness.run.rounds first_round_flops)."""
    if position >= len(cell.flops) or cell.flops[position] is None:
        return None
    return dict(cell.flops[position] or {})


def run_cell(cell: Cell, result_path: Path, settings: Settings,
             phase_path: Path | None = None) -> None:
    """Run CELL's cases under SETTINGS (the run's), saving after each; the phase it is in now
    kept in PHASE_PATH where given (harness.run.phaseclock)."""
    run = CellRun(cell, result_path, phase_path)
    run.save()
    clock = run.clock
    spec = load_workload(cell.workload)
    installed, reason = framework_installed(cell.framework)
    if not installed:
        return run.finish(Status.UNAVAILABLE, reason)
    # A worker that was not forked imports its framework here: without the optional modules
    # its warm process would have kept out (FrameworkSpec.preload; a SLURM task, a DDP rank).
    with clock.timing("framework import"), \
            unimportable(optional_modules(load_framework(cell.framework).preload)):
        device_module = backend_module(cell.framework, "device")
        run.result.framework_version = device_module.version()
        run.result.threads = device_module.threads()
    try:
        with clock.timing("device open"):
            device = device_module.open_device(cell.device)
    except DeviceUnavailable as exc:
        return run.finish(Status.UNAVAILABLE, str(exc))
    run.result.device_name = device.description
    # Context creation happens when the device opens, before any case's cold call.
    run.result.device_init_seconds = getattr(device, "init_seconds", None)
    if cell.device == "cpu" and cell.variant in spec.device_only_variants:
        return run.finish(Status.UNAVAILABLE, f"variant {cell.variant} needs a GPU device")
    module = implementation_module(spec, cell.framework)
    with clock.timing("idle power"):
        # NVML and RAPL, each or the reason it is unavailable (by the settings' module and root)
        watch = CaseWatch.open(device, settings)
        # Idle power settles for seconds: measured once per cell (its first round), or read
        # back where this machine measured it within the hour (idlepower.IDLE_REMEMBER_S); not
        # for --quick, whose energy figures then have no share above idle.
        if not settings.quick and cell.round == 0 and settings.energy:
            watch.measure_idle(idle_fingerprint(cell.device, str(device.description)))
    context = CellContext(spec, module, cell, device, watch, clock, settings)
    cases = list(spec.cases_for(cell.params, cell.variant))
    for position, case in enumerate(cases):
        if cell.positions and position not in cell.positions:  # a resumed round kept it
            continue
        too_large = memoryguard.case_refusal(spec.host_bytes, case, cell.variant,
                                             memoryguard.available_bytes())
        if too_large:  # before its inputs are made: the cell's other sizes still run
            run.result.cases.append(CaseResult(case, Status.ERROR, too_large))
            run.save()
            continue
        clock.case = f"{spec.sweep}={case.get(spec.sweep, '?')} ({position + 1} of {len(cases)})"
        plan = CasePlan(case, reused_calibration(spec, cell, position),
                        counted_flops(cell, position), reused_level(cell, position))
        run.result.cases.append(run_case(context, plan))
        run.save()
    clock.case = ""
    clock.now("saving its result")
    run.finish()


def main(argv: list[str]) -> int:
    """CELL.json RESULT.json [SETTINGS [PHASE.json]]: without SETTINGS (JSON), the defaults,
    not the environment's HARNESS_* variables; PHASE.json: where to keep the phase it is in."""
    cell_path, result_path = Path(argv[0]), Path(argv[1])
    settings = Settings.from_json(argv[2]) if len(argv) > 2 else Settings()
    phase_path = Path(argv[3]) if len(argv) > 3 else None
    # First: the cell may name a plugin's workload or framework.
    use_plugins(settings.plugins)
    cell = Cell.from_dict(json.loads(cell_path.read_text()))
    print(f"worker {cell.label} on {platform.node()}", file=sys.stderr)
    try:
        run_cell(cell, result_path, settings, phase_path)
    except Exception as exc:  # anything outside a case (a broken import, say) is the cell's error
        traceback.print_exc()
        partial = CellRun(cell, result_path)
        if result_path.exists():
            partial.result = CellResult.from_dict(json.loads(result_path.read_text()))
        partial.finish(Status.ERROR, failure_reason(exc))
    return 0


if __name__ == "__main__":
    lifeline.die_with_parent()  # dies with the process that started it (lifeline.py)
    # Why no interpreter teardown: the result file is written (atomically), and a framework's
    # teardown (TensorFlow's: ~1.4 s on 2 cores) is wall time of every worker of every round.
    exit_now(main(sys.argv[1:]))

"""What one SLURM array task runs on its node: the cell's worker, as a local run starts it
(harness.run.runner.run_worker), its result written as a file in the run folder.

Kept light on purpose: a task imports this module and what the worker's parent needs, not the
data store (which loads pandas: 0.3-1.5 s per task, for one JSON file).
"""

from __future__ import annotations

import json
import os
import platform
import signal
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.backend import parse_cuda_index
from harness.core import interrupt, registry
from harness.core.filemode import give_created_mode
from harness.core.units import device_kind
from harness.data.serial import JsonObject
from harness.measure import envinfo
from harness.run.runner import RunOptions, run_worker
from harness.spec import Cell


def task_identity() -> JsonObject:
    """The SLURM job id ('123_4' for an array task) and node this task runs as and on."""
    array_id, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    job_id = f"{array_id}_{index}" if array_id and index else os.environ.get("SLURM_JOB_ID")
    if job_id is None:  # submitit's local executor: no SLURM, its own job ids
        try:
            import submitit

            job_id = submitit.JobEnvironment().job_id
        except (ImportError, RuntimeError):
            job_id = None
    return {"job_id": job_id, "node": os.environ.get("SLURMD_NODENAME") or platform.node(),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}


def pin_gpu(cell: Cell, environ: dict[str, str]) -> tuple[Cell, dict[str, str]]:
    """(the cell as the worker runs it, variables to set) for the task's one GPU.

    Under SLURM the task's GPU is the one gres gave it, which SLURM exposes through
    CUDA_VISIBLE_DEVICES: it is cuda:0 inside the task whatever the cell's index. submitit's
    local executor gives every task the same CUDA_VISIBLE_DEVICES, so there the cell's own
    index picks its GPU (out of those visible) and becomes the only one the worker sees.
    """
    index = parse_cuda_index(cell.device)
    if device_kind(cell.device) != "gpu" or index is None:
        return cell, {}
    if environ.get("SLURM_JOB_ID") and ("SLURM_JOB_GPUS" in environ or
                                        "SLURM_STEP_GPUS" in environ):
        return replace(cell, device="cuda:0"), {}
    visible = [part for part in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part]
    physical = visible[index] if index < len(visible) else str(index)
    return replace(cell, device="cuda:0"), {"CUDA_VISIBLE_DEVICES": physical}


def run_task(cell_fields: dict[str, Any], result_path: str, options: RunOptions,
             restore: dict[str, str | None] | None = None) -> str:
    """One array task: run the cell's worker here and write its result where the run lives.

    restore: variables to set (None: unset) first; for submitit's local executor, which
    overwrites CUDA_VISIBLE_DEVICES, the submitting process's own value.
    """
    for name, value in (restore or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    cell = Cell.from_dict(cell_fields)
    host = envinfo.host_metadata()  # before pinning: the node as a whole, as a local run sees it
    worker_cell, pinned = pin_gpu(cell, dict(os.environ))
    os.environ.update(pinned)  # this task's own process: the worker inherits it
    # SLURM ends a task with SIGTERM (scancel, preemption, the time limit): stop the worker as
    # a local Ctrl-C does, keeping its finished cases, and still write the result. submitit's
    # handlers would ignore SIGTERM and, on USR2 (its warning before the time limit), requeue
    # or raise mid-cell; a cell has no checkpoint to resume from, so the warning is ignored.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    # The run's settings, as the submitting process read them (they travel on OPTIONS): the
    # registry's plugins here follow them, not the node's environment.
    registry.use_plugins(options.settings.plugins)
    with interrupt.stop_on_signals():
        _first_sigterm_only()
        result = run_worker(worker_cell, options)
    result.cell, result.host, result.slurm = cell, host, task_identity()
    _write_atomically(Path(result_path), result.to_dict())
    return result_path


def _first_sigterm_only() -> None:
    """Let only the first SIGTERM through to the stop handler.

    Why: at the time limit SLURM signals the task twice (srun forwards its SIGTERM, and the
    step's own arrives too); the handler's 'second signal: exit now' is meant for a user who
    insists, and here it would cost the result file. SLURM's SIGKILL after KillWait remains
    the backstop.
    """
    stop_handler = signal.getsignal(signal.SIGTERM)

    def first_only(signum: int, frame: Any) -> None:
        if interrupt.requested() is None and callable(stop_handler):
            stop_handler(signum, frame)

    signal.signal(signal.SIGTERM, first_only)


def _write_atomically(path: Path, document: JsonObject) -> None:
    """Temporary file, then rename: the submitting process never reads half a result."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    give_created_mode(handle)  # the run folder's files are readable as the umask allows
    with os.fdopen(handle, "w") as stream:
        json.dump(document, stream, default=str)
    os.replace(temporary, path)

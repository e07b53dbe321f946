"""Expand the matrix, run each cell in its own worker process, turn every outcome into a status.

Modelled on pyperf's manager/worker split: the parent never imports a framework, a worker
hands back one JSON file, a timeout kills the worker's whole process group and becomes a row.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.memory import wait_with_peak_rss, with_peak_host_memory
from harness.spec import Cell, Status
from harness.worker import looks_like_oom

STDERR_TAIL_CHARS = 1500
PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class RunOptions:
    timeout_s: float
    worker_module: str = "harness.worker"
    extra_pythonpath: tuple[str, ...] = ()


# --- issue 18: per-framework environment (JAX, Keras 3 on several backends) --------------
# Keras picks its backend once, at import, from KERAS_BACKEND: a keras-* cell must get its own
# whatever the caller's shell says. JAX would otherwise reserve 75% of GPU memory at start, and
# on a cpu cell it must not look for a GPU plugin at all.
KERAS_BACKENDS = {"keras-jax": "jax", "keras-torch": "torch", "keras-tensorflow": "tensorflow"}
JAX_FRAMEWORKS = ("jax", "keras-jax")


def framework_environment(cell: Cell) -> dict[str, str]:
    """Environment variables one framework's cell must run with (empty for most)."""
    env: dict[str, str] = {}
    if cell.framework in KERAS_BACKENDS:
        env["KERAS_BACKEND"] = KERAS_BACKENDS[cell.framework]
    if cell.framework in JAX_FRAMEWORKS:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        if cell.device == "cpu":
            env["JAX_PLATFORMS"] = "cpu"
    return env
# --- end issue 18 -------------------------------------------------------------------------


def cell_environment(cell: Cell, extra_pythonpath: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment a worker starts with: GPUs hidden from cpu cells, TF kept quiet and lean.

    Why: TF grabs nearly all GPU memory at start unless memory growth is on, and a cpu cell
    that can see a GPU may still create a CUDA context; hiding the GPUs makes cpu mean cpu.
    """
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
    env.setdefault("KERAS_BACKEND", "tensorflow" if cell.framework == "tensorflow" else "torch")
    env.update(framework_environment(cell))
    env["PYTHONUNBUFFERED"] = "1"
    if cell.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    paths = [str(PROJECT_ROOT), *extra_pythonpath]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _stderr_tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-STDERR_TAIL_CHARS:].strip()


def _crash_reason(returncode: int, stderr_tail: str) -> str:
    """Why a worker died without a result: a signal name, 'out of memory', or stderr's end."""
    if looks_like_oom(stderr_tail):
        prefix = "out of memory"
    elif returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        # SIGKILL with no message is what the kernel's OOM killer leaves behind.
        oom_hint = " (possibly out of host memory)" if name == "SIGKILL" else ""
        prefix = f"killed by {name}{oom_hint}"
    else:
        prefix = f"worker exited with code {returncode}"
    last_lines = " | ".join(stderr_tail.splitlines()[-6:])
    return f"{prefix}: {last_lines}" if last_lines else prefix


def _kill_group(process: subprocess.Popen) -> None:
    """Stop the worker and anything it started (its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def empty_result(cell: Cell, status: Status, reason: str) -> dict[str, Any]:
    return {"cell": cell.as_dict(), "status": status.value, "reason": reason, "cases": [],
            "framework_version": None, "device_name": None}


def run_cell(cell: Cell, options: RunOptions) -> dict[str, Any]:
    """Run one worker; always returns a result document with a status.

    KeyboardInterrupt is re-raised after the worker is stopped, carrying the partial result.
    """
    with tempfile.TemporaryDirectory(prefix="harness-cell-") as scratch:
        scratch_dir = Path(scratch)
        cell_path, result_path = scratch_dir / "cell.json", scratch_dir / "result.json"
        stderr_path = scratch_dir / "stderr.txt"
        cell_path.write_text(json.dumps(cell.as_dict()))
        command = [sys.executable, "-m", options.worker_module, str(cell_path), str(result_path)]
        with open(stderr_path, "wb") as stderr_file:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=stderr_file, stderr=stderr_file,
                env=cell_environment(cell, options.extra_pythonpath), cwd=PROJECT_ROOT,
                start_new_session=True,  # its own process group, so a kill reaches its children
            )
            try:
                returncode, peak_rss = wait_with_peak_rss(process, options.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                return _partial(cell, result_path, Status.TIMEOUT,
                                f"no result within --timeout {options.timeout_s:g} s; "
                                "worker killed")
            except KeyboardInterrupt:
                _kill_group(process)
                raise CellInterrupted(_partial(cell, result_path, Status.INTERRUPTED,
                                               "interrupted by Ctrl-C; worker stopped")) from None
        result = _read_result(result_path)
        if returncode != 0 or result is None or result.get("finished") is None:
            reason = _crash_reason(returncode, _stderr_tail(stderr_path))
            return with_peak_host_memory(_partial(cell, result_path, Status.ERROR, reason),
                                         peak_rss)
        return with_peak_host_memory(result, peak_rss)


class CellInterrupted(Exception):
    """Ctrl-C arrived while a worker ran; holds that cell's partial result."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__("interrupted")
        self.result = result


def _partial(cell: Cell, result_path: Path, status: Status, reason: str) -> dict[str, Any]:
    """Keep the cases a dead worker finished, mark the cell with why it stopped."""
    result = _read_result(result_path) or empty_result(cell, status, reason)
    result.update(status=status.value, reason=reason, finished=time.time())
    return result


def run_json_child(module: str, args: list[str], cell: Cell,
                   timeout_s: float) -> tuple[dict[str, Any] | None, str]:
    """Run `python -m MODULE *ARGS OUT.json` in CELL's environment and read OUT.json.

    For the short helper processes (framework probe, ceilings) that, like workers, must keep
    frameworks out of the parent. Returns (document, "") or (None, why there is none).
    """
    with tempfile.TemporaryDirectory(prefix="harness-child-") as scratch:
        out_path = Path(scratch) / "out.json"
        try:
            completed = subprocess.run(
                [sys.executable, "-m", module, *args, str(out_path)], cwd=PROJECT_ROOT,
                env=cell_environment(cell), capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout_s:g} s"
        if not out_path.exists():
            return None, " | ".join(completed.stderr.strip().splitlines()[-3:])
        return json.loads(out_path.read_text()), ""


def run_matrix(
    cells: list[Cell],
    options: RunOptions,
    on_result: Callable[[Cell, dict[str, Any]], None],
) -> bool:
    """Run every cell in order; returns False if Ctrl-C stopped the matrix early."""
    for cell in cells:
        try:
            result = run_cell(cell, options)
        except CellInterrupted as interrupted:
            on_result(cell, interrupted.result)
            return False
        on_result(cell, result)
    return True

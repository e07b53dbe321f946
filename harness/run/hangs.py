"""Where a helper child hung: its Python stack, asked for before it is killed.

Why: a model file's `inputs()` that loops forever used to end as "timed out after 300 s", with
nothing to say which of the file's functions never returned. A helper child registers
faulthandler on harness.core.child.STACK_SIGNAL; the runner sends that signal to a child that
ran past its time, waits a moment for the stack on its stderr, then kills it, and the reason
names the file's function that was running (`hung_in`).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

from harness.core import registry
from harness.core.child import STACK_SIGNAL
from harness.spec import Cell

STACK_WAIT_S = 2.0
FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>\S+)')
STACK_HEADER = "(most recent call first):"


def ask_for_stack(pid: int, stderr_path: Path, wait_s: float = STACK_WAIT_S) -> None:
    """Signal PID to write its stack to STDERR_PATH, and wait (at most WAIT_S) until it did."""
    try:
        before = stderr_path.stat().st_size
        os.kill(pid, STACK_SIGNAL)
    except OSError:
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if STACK_HEADER in stderr_path.read_text(errors="replace")[before:]:
                time.sleep(0.1)  # the rest of the frames, written right after the header
                return
        time.sleep(0.05)


def main_thread_frames(stderr_text: str) -> list[tuple[str, int, str]]:
    """(file, line, function) of the last stack dump's current thread, innermost first."""
    blocks = stderr_text.split("Current thread ")
    if len(blocks) < 2:
        return []
    frames = []
    for line in blocks[-1].splitlines()[1:]:
        matched = FRAME.match(line)
        if matched is None:
            break
        frames.append((matched["file"], int(matched["line"]), matched["function"]))
    return frames


def hung_in(stderr_text: str, user_file: Path) -> str:
    """'inputs() (model.py:7)': the function of USER_FILE the harness called and that had not
    returned (the outermost of its frames), at the innermost line of the file that ran; ''
    when the stack shows none of the file's frames."""
    target = str(user_file.resolve())
    mine = [(line, function) for file, line, function in main_thread_frames(stderr_text)
            if file == target or os.path.abspath(file) == target]
    if not mine:
        return ""
    innermost_line, outermost = mine[0][0], mine[-1][1]
    if outermost == "<module>":
        return f"importing {user_file.name} (line {innermost_line})"
    return f"{outermost}() ({user_file.name}:{innermost_line})"


def running_case(cell: Cell, cases_done: int) -> str:
    """' at size 1024': the sweep value of the case a killed worker was at, after the
    CASES_DONE it recorded ('' where the workload or its cases cannot be told here)."""
    try:
        spec = registry.load_workload(cell.workload)
        cases = spec.cases_for(dict(cell.params), cell.variant)
    except Exception:  # noqa: BLE001 - a plugin's cases may fail here too: say nothing
        return ""
    # A resumed round's worker runs only its cell's positions, in order.
    running = list(cell.positions or range(len(cases)))
    if cases_done >= len(running) or running[cases_done] >= len(cases) \
            or spec.sweep not in cases[running[cases_done]]:
        return ""
    return f" at {spec.sweep} {cases[running[cases_done]][spec.sweep]}"

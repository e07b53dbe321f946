"""What to run next for the GPU answer, where a run measured no GPU cell.

Why: every CPU-only run ended "no GPU cell measured" and stopped there, while the question the
harness answers is GPU against CPU. Until a prediction can answer it from the CPU run alone,
the next step is a run on a GPU machine, merged with this one by `harness report A B`.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from harness.core.units import device_kind
from harness.data.results import RunDocument
from harness.spec import Status

# Options whose value the GPU machine's run must not copy: its devices are its own.
MACHINE_OPTIONS = ("--device",)


def same_command(command: list[str]) -> str:
    """The run's command as a user types it (`harness compare ...`), without --device."""
    args, skip = [], False
    for arg in command[1:]:
        if skip:
            skip = False
            continue
        if arg in MACHINE_OPTIONS:
            skip = True
            continue
        if arg.startswith(tuple(f"{option}=" for option in MACHINE_OPTIONS)):
            continue
        args.append(shlex.quote(arg))
    return " ".join(["harness", *args])


def next_step_lines(document: RunDocument, run_path: Path | str) -> list[str]:
    """Two lines naming the command for the GPU answer, or none: a GPU cell ran, or one was
    planned and failed (the warnings say why), or the run was not a CLI compare."""
    devices = [cell.cell.device for cell in document.cells]
    if any(device_kind(device) == "gpu" for device in devices):
        return []
    gpus = [str(gpu) for gpu in document.host.get("gpus") or []]
    if gpus:
        return [f"next, for the GPU answer: this machine has {gpus[0]}"
                + (f" and {len(gpus) - 1} more" if len(gpus) > 1 else "")
                + "; run again with --device cpu,cuda"]
    if len(document.command) < 2 or document.command[1] != "compare" or not any(
            cell.status == Status.OK for cell in document.cells):
        return []
    return [f"next, for the GPU answer: run `{same_command(document.command)}` on a machine "
            "with an NVIDIA GPU,",
            f"  then, its run folder copied here, `harness report {shlex.quote(str(run_path))} "
            "GPU_RUN --out merged --html` draws both runs in one report"]

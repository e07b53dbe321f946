"""Where cells run: `local` (default: one worker process after another on this machine) or
`slurm` (tasks of SLURM job arrays through submitit). See base.py for the seam.

`executor_from_options` makes one from a name and the CLI's options (or passes through one
already made); `check_partitions` asks SLURM for the partitions before any run folder exists.
"""

from __future__ import annotations

from typing import Any

from harness.run.executors.base import CellState, Executor, StateTally
from harness.run.executors.local import LocalExecutor
from harness.spec import BadInput

EXECUTORS = ("local", "slurm")

__all__ = ["EXECUTORS", "CellState", "Executor", "LocalExecutor", "StateTally",
           "executor_from_options"]


def executor_from_options(name: str | Executor | None = "local", *,
                          partition_cpu: str | None = None, partition_gpu: str | None = None,
                          time_limit_min: int | None = None, sbatch: list[str] | None = None,
                          pending_limit_s: float | None = None,
                          stored: dict[str, Any] | None = None) -> Executor:
    """The executor the CLI's --executor and its options (or a Python caller's `executor=`)
    describe; BadInput (one line) when they do not fit together or SLURM cannot be reached
    from here. The one factory: the CLI and harness.api both come here, so a name means the
    same executor, checked the same way, from either.

    name: 'local', 'slurm', or an executor already made (harness.api's callers may pass one,
    e.g. SlurmExecutor(cluster="local")): returned as given, its settings its own.
    stored: the executor a run was made with (run.json's "executor", for --resume): name None
    means that one, and each SLURM setting not given again is the run's own.
    """
    import shutil

    if name is not None and not isinstance(name, str):
        return name
    stored = stored or {}
    if name is None:
        name = str(stored.get("name") or "local")
    if name == "slurm" and stored.get("name") == "slurm":
        partition_cpu = partition_cpu or stored.get("partition_cpu")
        partition_gpu = partition_gpu or stored.get("partition_gpu")
        time_limit_min = time_limit_min or stored.get("time_limit_min")
        if pending_limit_s is None:
            pending_limit_s = stored.get("pending_limit_s")
        if sbatch is None:
            sbatch = [key if value is True else f"{key}={value}"
                      for key, value in (stored.get("sbatch") or {}).items()]
    slurm_options = {"--partition-cpu": partition_cpu, "--partition-gpu": partition_gpu,
                     "--time-limit": time_limit_min, "--sbatch": sbatch,
                     "--pending-limit": pending_limit_s}
    if name == "local":
        given = [option for option, value in slurm_options.items() if value]
        if given:
            raise BadInput(f"{', '.join(given)}: only with --executor slurm")
        return LocalExecutor()
    if name != "slurm":
        raise BadInput(f"--executor {name!r}: valid: {', '.join(EXECUTORS)}")
    from harness.run.executors.slurm import SlurmExecutor, parse_sbatch_settings

    try:
        import submitit  # noqa: F401 - only asked whether it is there
    except ImportError:
        raise BadInput("--executor slurm needs submitit: pip install 'harness[slurm]'") from None
    if shutil.which("sbatch") is None:
        raise BadInput("--executor slurm: no sbatch on PATH; run on a SLURM login node")
    if time_limit_min is not None and time_limit_min < 1:
        raise BadInput(f"--time-limit {time_limit_min}: minutes, >= 1")
    if pending_limit_s is not None and pending_limit_s <= 0:
        raise BadInput(f"--pending-limit {pending_limit_s:g}: seconds, > 0")
    check_partitions({"--partition-cpu": partition_cpu, "--partition-gpu": partition_gpu})
    return SlurmExecutor(partition_cpu=partition_cpu, partition_gpu=partition_gpu,
                         time_limit_min=time_limit_min, sbatch=parse_sbatch_settings(sbatch),
                         pending_limit_s=pending_limit_s)


def check_partitions(wanted: dict[str, str | None]) -> None:
    """BadInput unless SLURM answers here and has the partitions asked for, before any run
    folder exists (a typo would otherwise end as one refused-submission row per cell)."""
    import subprocess

    try:
        listing = subprocess.run(["sinfo", "-h", "-o", "%R"], check=False, capture_output=True,
                                 text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BadInput(f"--executor slurm: sinfo did not run ({exc})") from None
    if listing.returncode != 0:
        said = (listing.stderr.strip().splitlines() or ["no message"])[-1]
        raise BadInput(f"--executor slurm: SLURM does not answer here (sinfo: {said})")
    partitions = set(listing.stdout.split())
    for option, name in wanted.items():
        if name and name not in partitions:
            raise BadInput(f"{option} {name!r}: no such partition; this cluster has "
                           f"{', '.join(sorted(partitions)) or 'none'}")

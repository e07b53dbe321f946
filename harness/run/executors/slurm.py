"""Cells as tasks of SLURM job arrays, submitted through submitit; results in the one run folder.

One task per (workload, variant, framework, device) cell, as AlgoPerf submits its cells with
`sbatch --array` and benchopt runs its configurations as submitit arrays. CPU cells ask for a
whole node (`--exclusive`) on the CPU partition, so nothing else shares its cores while it is
timed; GPU cells ask for one GPU (`--gres=gpu:1`) on the GPU partition. Each task runs what a
local cell runs: `harness.run.runner.run_worker`, i.e. the worker in its own process, on its node.

The task writes its result document to RUN_DIR/cells/ (a shared file system, as on every
cluster) with the node's host metadata and its SLURM job id; this process watches SLURM and
hands each result on as its task ends (slurm_watch.py; the row a task that did not complete
gets: slurm_rows.py). Each array's id is recorded in RUN_DIR/slurm/arrays.json, so a
`--resume` can tell whether the run's tasks are still queued (slurm_records.py).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.core.settings import Settings
from harness.core.units import device_kind
from harness.data.results import CellResult
from harness.run.executors import slurm_state
from harness.run.executors.base import CellState, OnResult, OnState, ignore_state
from harness.run.executors.slurm_records import SUBMITIT_FOLDER, log_line, record_array
from harness.run.executors.slurm_rows import with_slurm
from harness.run.executors.slurm_watch import Task, Watch
from harness.run.executors.task import run_task
from harness.run.resume import TASK_RESULTS_FOLDER as RESULTS_FOLDER  # RUN_DIR/cells/<id>.json
from harness.run.runner import RunOptions
from harness.spec import BadInput, Cell, Status

PREFLIGHT_SETTLE_S = 5.0     # how long the pre-check waits for an unusable node to come back
TIME_LIMIT_MARGIN_MIN = 5     # start-up and import time on top of the cell's --timeout
KINDS = ("cpu", "gpu")        # one array per device kind: partition and resources differ


def cell_id(cell: Cell) -> str:
    """'fp32-torch-cuda0' ('fp32-torch-cuda0-round2' for a round of a run of several): the
    cell's file name in RUN_DIR/cells, unique within a run, so no round overwrites another."""
    return cell.key.slug + (f"-round{cell.round}" if cell.rounds > 1 else "")


def cells_by_kind(cells: list[Cell]) -> dict[str, list[Cell]]:
    """'cpu' / 'gpu' -> the cells of that device kind, kinds without cells left out."""
    grouped = {kind: [cell for cell in cells if device_kind(cell.device) == kind]
               for kind in KINDS}
    return {kind: group for kind, group in grouped.items() if group}


def default_time_limit_min(timeout_s: float) -> int:
    """Minutes SLURM allows a task: the cell's own timeout plus a start-up margin."""
    return math.ceil(timeout_s / 60) + TIME_LIMIT_MARGIN_MIN


# `--sbatch` settings: KEY=VALUE as its text, a bare KEY (a flag such as requeue) as True.
SbatchSettings = dict[str, str | bool]
# What SlurmExecutor.describe stores in run.json's "executor" (a --resume reads it back).
ExecutorDescription = dict[str, str | int | float | bool | SbatchSettings | None]


def parse_sbatch_settings(values: list[str] | None) -> SbatchSettings:
    """`--sbatch account=lab --sbatch requeue` -> {'account': 'lab', 'requeue': True}."""
    settings: SbatchSettings = {}
    for value in values or []:
        name, has_value, text = value.partition("=")
        name = name.strip().lstrip("-")
        if not name:
            raise BadInput(f"--sbatch {value!r}: expected KEY=VALUE or KEY (example: "
                           "account=mylab, constraint=a100, requeue)")
        settings[name] = text.strip() if has_value else True
    return settings


@dataclass(frozen=True)
class JobParameters:
    """What the tasks of one array ask SLURM for: as submitit's parameters, and as the sbatch
    options submitit writes for them (for `sbatch --test-only`)."""

    timeout_min: int
    name: str = "harness"
    partition: str | None = None
    gres: str | None = None  # 'gpu:1' for GPU cells
    exclusive: bool = False  # a whole node, for CPU cells
    additional: Mapping[str, str | bool] = field(default_factory=dict)

    def _resources(self) -> list[tuple[str, str | bool]]:
        """(sbatch option, value) of the partition, gres and exclusive asked for."""
        asked = [("partition", self.partition), ("gres", self.gres),
                 ("exclusive", self.exclusive)]
        return [(name, value) for name, value in asked if value]

    def submitit_parameters(self) -> dict[str, int | str | bool | SbatchSettings]:
        """The keyword arguments of submitit's `update_parameters`."""
        return {"timeout_min": self.timeout_min, "name": self.name,
                "slurm_additional_parameters": dict(self.additional),
                **{f"slurm_{name}": value for name, value in self._resources()}}

    def sbatch_flags(self) -> list[str]:
        """The sbatch options submitit writes for these parameters."""
        flags = [f"--time={self.timeout_min}", f"--job-name={self.name}"]
        for name, value in [*self._resources(), *self.additional.items()]:
            option = name.replace("_", "-")
            flags.append(f"--{option}" if value is True else f"--{option}={value}")
        return flags


@dataclass
class SlurmExecutor:
    """Submits cells as submitit job arrays; see the module docstring.

    partition_cpu / partition_gpu: where CPU and GPU cells go (None: the cluster's default).
    time_limit_min: SLURM's limit per task (None: the cell timeout plus a margin).
    sbatch: more sbatch settings for every task ({'account': 'lab', 'constraint': 'a100'}).
    cluster: 'slurm', or 'local' for submitit's local executor (no SLURM: tests, one box).
    pending_limit_s: how long a task may sit unable to start (drained or down node, hold...)
    before it is cancelled and `interrupted` (None: its time limit; see pending_limit).
    Ordinary waits (Priority, Resources) have no bound: a busy cluster may queue for hours, and
    the progress line names the reason.
    poll_s: how often SLURM is asked; missing_grace_s: how long a result file may lag behind
    its task's end (shared file systems cache); cancel_grace_s: after a stop, how long tasks
    already finishing get to hand in their results.
    """

    partition_cpu: str | None = None
    partition_gpu: str | None = None
    time_limit_min: int | None = None
    sbatch: SbatchSettings = field(default_factory=dict)
    pending_limit_s: float | None = None
    exclusive_cpu: bool = True
    gpus_per_cell: int = 1
    cluster: str = "slurm"
    poll_s: float = 1.0
    missing_grace_s: float = 30.0
    cancel_grace_s: float = 15.0
    name = "slurm"
    runs_cells_here = False

    def describe(self, settings: Settings | None = None) -> ExecutorDescription:
        """Its settings, stored in run.json (the run's SETTINGS change none of them)."""
        return {"name": self.name, "cluster": self.cluster, "partition_cpu": self.partition_cpu,
                "partition_gpu": self.partition_gpu, "time_limit_min": self.time_limit_min,
                "sbatch": self.sbatch, "pending_limit_s": self.pending_limit_s,
                "exclusive_cpu": self.exclusive_cpu,
                "gpus_per_cell": self.gpus_per_cell}

    def partition(self, kind: str) -> str | None:
        """Where cells of a device kind go (None: the cluster's default partition)."""
        return self.partition_gpu if kind == "gpu" else self.partition_cpu

    def parameters(self, kind: str, options: RunOptions) -> JobParameters:
        """What the array of one device kind ('cpu' or 'gpu') asks SLURM for."""
        gpu = kind == "gpu"
        return JobParameters(
            timeout_min=self.time_limit(options), partition=self.partition(kind) or None,
            gres=f"gpu:{self.gpus_per_cell}" if gpu else None,
            exclusive=not gpu and self.exclusive_cpu, additional=dict(self.sbatch))

    def time_limit(self, options: RunOptions) -> int:
        return self.time_limit_min or default_time_limit_min(options.timeout_s)

    def pending_limit(self, options: RunOptions) -> float:
        """How long a task may sit unable to start (drained/down node, hold): by default its
        time limit. Why the time limit: it is the wait the user already accepted for one cell,
        it grows with the cells' size, and a node down for that long (minutes to hours on a
        cluster) is not a reboot that will end within the run."""
        if self.pending_limit_s is not None:
            return self.pending_limit_s
        return self.time_limit(options) * 60.0

    def preflight(self, cells: list[Cell], options: RunOptions) -> None:
        """BadInput (one line) before any run folder is written when SLURM would never run
        these cells: no node of a partition can take a task (drained, down, not responding,
        partition down), or sbatch refuses the options (`sbatch --test-only`)."""
        if self.cluster != "slurm":
            return
        for kind in cells_by_kind(cells):
            partition = self.partition(kind)
            option = f"--partition-{kind} {partition!r}" if partition else \
                f"the default partition (for {kind} cells)"
            try:
                listed = slurm_state.settled_nodes(partition or "", PREFLIGHT_SETTLE_S)
            except slurm_state.SlurmUnreachable as exc:
                raise BadInput(f"--executor slurm: SLURM does not answer here ({exc})") from None
            seen = slurm_state.none_usable(listed)
            if seen:
                raise BadInput(f"{option}: no node can take a task now ({seen}); SLURM would "
                               "queue the cells without end")
            flags = self.parameters(kind, options).sbatch_flags()
            code, _, said = slurm_state.run_command(
                ["sbatch", "--test-only", *flags, "--wrap", "true"])
            if code != 0:
                last = (said.strip().splitlines() or [f"exit code {code}"])[0]
                raise BadInput(f"sbatch refuses the {kind} cells' options "
                               f"({' '.join(flags)}): {last}")

    def submit(self, cells: list[Cell], options: RunOptions,
               run_dir: Path) -> tuple[list[Task], list[CellResult]]:
        """One array per device kind: a Task per cell, and an error result per cell of an array
        that sbatch refused (no such partition, no GPUs there, an account it does not know...)."""
        (run_dir / RESULTS_FOLDER).mkdir(parents=True, exist_ok=True)
        tasks: list[Task] = []
        refused: list[CellResult] = []
        for kind, group in cells_by_kind(cells).items():
            executor = self._array_executor(kind, options, run_dir)
            paths = [run_dir / RESULTS_FOLDER / f"{cell_id(cell)}.json" for cell in group]
            for path in paths:  # a --resume: the cut-short run's file must not pass for news
                path.unlink(missing_ok=True)
            try:
                jobs = executor.map_array(run_task, [cell.as_dict() for cell in group],
                                          [str(path) for path in paths],
                                          # no warm process (nor progress) to a node
                                          [replace(options, servers=None, board=None)]
                                          * len(group),
                                          [self.restored_environment()] * len(group))
            except Exception as exc:  # noqa: BLE001 - a refused submission is a status row
                said = " | ".join(str(exc).strip().splitlines()[-3:])
                # Never submitted: --resume counts the cell as not run.
                refused.extend(with_slurm(CellResult(
                    cell, Status.ERROR, f"sbatch refused the {kind} cells: {said}"),
                    job_id=None, refused=True) for cell in group)
                log_line(run_dir, f"sbatch refused the {len(group)} {kind} cells: {said}")
                continue
            submitted = [Task(cell, job, path) for cell, job, path in zip(group, jobs, paths)]
            if self.cluster == "slurm":  # submitit's local jobs are no SLURM array to ask after
                record_array(run_dir, kind, {task.job_id: cell_id(task.cell)
                                             for task in submitted})
            log_line(run_dir, f"submitted {len(group)} {kind} cells as array "
                              f"{slurm_state.array_of(submitted[0].job_id)}")
            tasks.extend(submitted)
        return tasks, refused

    def _array_executor(self, kind: str, options: RunOptions, run_dir: Path) -> Any:
        """A submitit executor for the array of one device kind. A fresh one per kind: submitit
        keeps parameters across updates, and a GPU cell must not inherit the CPU cells'
        --exclusive."""
        import submitit

        executor = submitit.AutoExecutor(folder=run_dir / SUBMITIT_FOLDER / "%j",
                                         cluster=self.cluster)
        executor.update_parameters(**self.parameters(kind, options).submitit_parameters())
        return executor

    def restored_environment(self) -> dict[str, str | None]:
        """What a task must set back first: submitit's local executor gives every task the
        same CUDA_VISIBLE_DEVICES; the tasks pin their GPUs out of what this process sees."""
        if self.cluster != "local":
            return {}
        return {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def run(self, cells: list[Cell], options: RunOptions, run_dir: Path, on_result: OnResult,
            on_state: OnState | None = None) -> bool:
        """Submit every cell, hand on each result as its task ends; False if stopped early."""
        if not cells:
            return True
        watch = Watch(self, run_dir, self.pending_limit(options), on_result,
                      on_state or ignore_state)
        tasks, refused = self.submit(cells, options, run_dir)
        for result in refused:
            watch.hand_on(result.cell, result)
        for task in tasks:
            watch.report_state(task.cell, CellState.QUEUED)
        return watch.follow(tasks)

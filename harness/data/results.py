"""Typed results: one CaseResult per case, one CellResult per cell, statistics in one place.

The worker writes a cell's result as JSON (the only thing that crosses the process boundary);
its parent reads that file once into a CellResult (harness.run.runner.run_worker; the SLURM
executor types its tasks' files as it hands them on), and that one object goes on to the
executor's callback, the recorder, the store's tidy rows, run.json, the CLI table and the
report. So a median, a quartile, an IQR or a noise flag is computed by one function:
`sample_stats`. Unknown keys in the JSON are kept in `extra_fields` so a newer worker's fields
survive a round trip through an older reader. RunDocument is run.json itself: harness.data.store
reads and writes it, harness.data.upgrade brings older layouts up to SCHEMA_VERSION.
"""

from __future__ import annotations

import statistics
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from harness.data.records import CaseEnergy, GpuState
from harness.spec import Cell, Status, worst_status

NOISY_IQR_FRACTION = 0.10


@dataclass(frozen=True)
class SampleStats:
    """Median, quartiles, IQR, min and the noise flag of one list of samples."""

    count: int
    median: float | None
    q1: float | None
    q3: float | None
    minimum: float | None

    @property
    def iqr(self) -> float | None:
        return None if self.q1 is None or self.q3 is None else self.q3 - self.q1

    @property
    def noise(self) -> float | None:
        """IQR / median: the spread as a fraction of the value."""
        if self.iqr is None or not self.median:
            return None
        return self.iqr / self.median

    @property
    def noisy(self) -> bool:
        """IQR/median above 10%, the threshold torch.utils.benchmark warns at."""
        return self.count >= 2 and (self.noise or 0.0) > NOISY_IQR_FRACTION


def sample_stats(samples: list[float]) -> SampleStats:
    """The one place statistics of samples are computed (quartiles: linear interpolation,
    the 'inclusive' method, so 2-3 samples still give a number; pandas' default matches)."""
    values = [float(value) for value in samples if value == value]  # NaN is no sample
    if not values:
        return SampleStats(0, None, None, None, None)
    if len(values) == 1:
        return SampleStats(1, values[0], values[0], values[0], values[0])
    quartiles = statistics.quantiles(values, n=4, method="inclusive")
    return SampleStats(len(values), statistics.median(values), quartiles[0], quartiles[2],
                       min(values))


# --- the run document: run.json and the worker's result file, typed ---------------------------
#
# Layout version of run.json. 2: typed documents (every cell and case key named here; no
# `peak_device_memory_bytes`, hints and framework styles always present). Older layouts are
# brought up to this one by harness.data.upgrade when read; nothing else knows old key names.
# 3: rounds (run-level `rounds` and `seed`; per case the round of every sample, the round
# medians and the timing attempts; per cell the harness's own cost).
SCHEMA_VERSION = 3


def _defaults(cls: type) -> dict[str, Any]:
    """Each dataclass field's default value (fields without one are left out)."""
    found = {}
    for item in fields(cls):
        if item.default is not MISSING:
            found[item.name] = item.default
        elif item.default_factory is not MISSING:
            found[item.name] = item.default_factory()
    return found


def _split(document: dict[str, Any], names: tuple[str, ...]) -> tuple[dict[str, Any],
                                                                        dict[str, Any]]:
    """(the keys this class knows, every other key) of one JSON object."""
    known = {name: document[name] for name in names if name in document}
    rest = {key: value for key, value in document.items() if key not in names}
    return known, rest


# Keys of a case that only a timed case carries; a failed case holds case, status and reason
# (and any of these that are set), so a reader can tell "not measured" from "measured as 0".
_MEASURED_KEYS = ("cold_seconds", "samples", "calls_per_sample", "timer_overhead_s", "check",
                  "suspect", "predicted_call_s", "other_load", "extra",
                  "peak_device_allocated_bytes", "peak_device_reserved_bytes", "device_profile")
# Keys only a case timed in blocks of steps carries (harness.measure.blocks): written where
# set, so a case timed call by call keeps its layout.
_BLOCK_KEYS = ("call_seconds", "sample_steps")
# Keys of a case measured over rounds, or timed again after contention: written where set.
_ROUND_KEYS = ("sample_rounds", "round_medians", "call_rounds")
# The plan's values of parameters the rounds shared out (harness.run.rounds), where they differ
# from what one worker's call did: written where set.
_PLANNED_KEYS = ("planned",)
# The calls per sample a later round started its calibration from (the cell's first round's):
# written where set, so a reader can tell a reused calibration from one found anew.
_REUSE_KEYS = ("calls_per_sample_reused",)
_CASE_KEYS = ("case", "status", "reason", *_MEASURED_KEYS, *_BLOCK_KEYS, *_ROUND_KEYS,
              *_PLANNED_KEYS, "attempts", *_REUSE_KEYS)


@dataclass
class Attempt:
    """One timing of a case: a contended one is timed again (harness.run.worker)."""

    number: int  # 1 = the first timing
    median_s: float | None
    samples: int
    other_cores: float | None  # other processes' cores (+ stolen) while its samples ran
    contended: str = ""  # why it was timed again ('' = not contended)
    kept: bool = False  # its samples are the case's samples
    round: int = 0  # the round (worker process) it ran in

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Attempt:
        known = {name: document[name] for name in _ATTEMPT_KEYS if name in document}
        return cls(**known)


_ATTEMPT_KEYS = ("number", "median_s", "samples", "other_cores", "contended", "kept", "round")


@dataclass
class CaseResult:
    """One case of a cell: its parameters, status, raw samples (seconds per call) and check.

    Every key the worker writes has a field here; keys a newer worker adds land in
    `extra_fields` and are written back unchanged. Workload-specific values (accuracy, steps
    per call, ...) live in `extra` and are read through harness.data.fields.
    """

    case: dict[str, Any]
    status: Status = Status.OK
    reason: str = ""
    cold_seconds: float | None = None
    samples: list[float] = field(default_factory=list)
    calls_per_sample: int = 1
    timer_overhead_s: float | None = None
    check: dict[str, Any] | None = None
    suspect: str = ""
    predicted_call_s: float | None = None
    # Load of other processes while the samples ran: other_cores, steal_cores, seconds.
    other_load: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    peak_device_allocated_bytes: int | None = None
    peak_device_reserved_bytes: int | None = None
    # The device-busy pass: figures per call, or {"reason": why there are none}.
    device_profile: dict[str, Any] | None = None
    # Timed in blocks of steps within each call: every whole call's seconds (the cold one
    # first), and the steps of the block behind each warm sample (samples[i] ran
    # sample_steps[i] steps, scaled to a whole call). Empty for a case timed call by call.
    call_seconds: list[float] = field(default_factory=list)
    sample_steps: list[int] = field(default_factory=list)
    # Measured over rounds (harness.run.rounds): the round of each sample (parallel to
    # samples; empty = all round 0) and the median of each round's samples, round 0 first.
    sample_rounds: list[int] = field(default_factory=list)
    round_medians: list[float] = field(default_factory=list)
    # The round of each whole call in call_seconds (parallel to it; empty = all round 0):
    # each round is a new worker, whose first call is cold again.
    call_rounds: list[int] = field(default_factory=list)
    # Every timing of the case when one was contended and timed again (empty: timed once).
    attempts: list[Attempt] = field(default_factory=list)
    # Measured over rounds that shared out the plan's work: the planned values of the shared
    # parameters (MNIST: {"epochs": 1, "train_samples": 60000}) where `case` (what one
    # worker's calls did) differs from them. Empty: the case is as planned.
    planned: dict[str, Any] = field(default_factory=dict)
    # The calls per sample this case's calibration started from, found by the cell's first
    # round (None: calibrated from 1 call). A merged case: what its later rounds were given.
    # `calls_per_sample` stays the count actually used.
    calls_per_sample_reused: int | None = None
    extra_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def stats(self) -> SampleStats:
        return sample_stats(self.samples)

    @property
    def rounds(self) -> int:
        """How many rounds (worker processes) measured this case."""
        return max(1, len(self.round_medians))

    @property
    def round_spread(self) -> float | None:
        """The spread of the round medians, (max - min) / their median: the run-to-run drift
        (None with fewer than 2 rounds)."""
        if len(self.round_medians) < 2:
            return None
        middle = statistics.median(self.round_medians)
        return (max(self.round_medians) - min(self.round_medians)) / middle if middle else None

    def round_of(self, sample: int) -> int:
        """The round of warm sample `sample` (1-based); 0 for a case measured in one round."""
        return self.sample_rounds[sample - 1] if 0 < sample <= len(self.sample_rounds) else 0

    @property
    def measured(self) -> bool:
        return self.cold_seconds is not None

    @property
    def energy(self) -> CaseEnergy | None:
        """extra['energy'] typed (harness.data.records); None where the case has none."""
        return CaseEnergy.read(self.extra.get("energy"))

    @property
    def gpu_state(self) -> GpuState | None:
        """extra['gpu_state'] typed; None where the case has none (cpu cells, older runs)."""
        return GpuState.read(self.extra.get("gpu_state"))

    @property
    def peak_device_bytes(self) -> int | None:
        """The device memory the case held: reserved where known, else allocated."""
        return self.peak_device_reserved_bytes or self.peak_device_allocated_bytes

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> CaseResult:
        known, rest = _split(document, _CASE_KEYS)
        known["case"] = dict(known.get("case") or {})
        known["status"] = Status(known.get("status", Status.OK.value))
        known["reason"] = known.get("reason") or ""
        known["suspect"] = known.get("suspect") or ""
        known["extra"] = dict(known.get("extra") or {})
        known["samples"] = list(known.get("samples") or [])
        for name in (*_BLOCK_KEYS, *_ROUND_KEYS):
            known[name] = list(known.get(name) or [])
        known["attempts"] = [Attempt.from_dict(item) for item in known.get("attempts") or []]
        known["planned"] = dict(known.get("planned") or {})
        if known.get("calls_per_sample") is None:
            known.pop("calls_per_sample", None)
        return cls(**known, extra_fields=rest)

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {"case": self.case, "status": self.status.value,
                                    "reason": self.reason}
        defaults = _defaults(CaseResult)
        for name in _MEASURED_KEYS:
            value = getattr(self, name)
            if self.measured or value != defaults[name]:
                document[name] = value
        document.update({name: getattr(self, name) for name in (*_BLOCK_KEYS, *_ROUND_KEYS)
                         if getattr(self, name)})
        if self.attempts:
            document["attempts"] = [asdict(attempt) for attempt in self.attempts]
        if self.planned:
            document["planned"] = self.planned
        if self.calls_per_sample_reused is not None:
            document["calls_per_sample_reused"] = self.calls_per_sample_reused
        return {**document, **self.extra_fields}

    def block_steps(self, sample: int) -> int | None:
        """The steps of the block behind warm sample `sample` (1-based); None: a whole call."""
        return self.sample_steps[sample - 1] if 0 < sample <= len(self.sample_steps) else None


_CELL_KEYS = ("cell", "status", "reason", "framework_version", "device_name", "threads",
              "started", "finished", "cases", "peak_host_memory_bytes", "device_init_seconds",
              "peak_host_memory_source", "peak_host_memory_bytes_worker", "host", "slurm",
              "cost")


@dataclass
class HarnessCost:
    """The harness's own cost of a cell: wall time in and around its worker(s) beside the
    timed calls. `phases` names where the rest went (seconds, summed over rounds)."""

    wall_s: float = 0.0  # worker start to result, every round and attempt together
    timed_s: float = 0.0  # inside the timed calls: cold calls and warm samples
    workers: int = 0  # worker processes started
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.wall_s - self.timed_s)

    def add(self, other: HarnessCost) -> HarnessCost:
        phases = dict(self.phases)
        for name, seconds in other.phases.items():
            phases[name] = phases.get(name, 0.0) + seconds
        return HarnessCost(self.wall_s + other.wall_s, self.timed_s + other.timed_s,
                           self.workers + other.workers, phases)

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> HarnessCost:
        return cls(float(document.get("wall_s") or 0.0), float(document.get("timed_s") or 0.0),
                   int(document.get("workers") or 0),
                   {str(k): float(v) for k, v in (document.get("phases") or {}).items()})


def cell_from_dict(document: dict[str, Any]) -> tuple[Cell, dict[str, Any]]:
    """The Cell of a stored `cell` object, and its keys that Cell does not know."""
    known, rest = _split(document, ("workload", "variant", "framework", "device", "params",
                                    "quick", "rounds", "round"))
    cell = Cell(workload=str(known.get("workload", "")), variant=str(known.get("variant", "")),
                framework=str(known.get("framework", "")), device=str(known.get("device", "")),
                params=dict(known.get("params") or {}), quick=bool(known.get("quick", False)),
                rounds=int(known.get("rounds") or 1), round=int(known.get("round") or 0))
    return cell, rest


@dataclass
class CellResult:
    """One (workload, variant, framework, device) cell: status, reason, environment, cases."""

    cell: Cell
    status: Status = Status.OK
    reason: str = ""
    framework_version: str | None = None
    device_name: str | None = None
    threads: dict[str, Any] | None = None
    started: float | None = None
    finished: float | None = None
    cases: list[CaseResult] = field(default_factory=list)
    # Peak RSS of the worker (whole cell): who measured it, and the worker's own figure.
    peak_host_memory_bytes: int | None = None
    peak_host_memory_source: str | None = None
    peak_host_memory_bytes_worker: int | None = None
    device_init_seconds: float | None = None
    # Where the cell ran when not on the run's own host (a SLURM node): its host metadata, and
    # the scheduler's job id, node and state; None for cells run by the local executor.
    host: dict[str, Any] | None = None
    slurm: dict[str, Any] | None = None
    cost: HarnessCost | None = None  # the harness's own time around the timed calls
    cell_extra: dict[str, Any] = field(default_factory=dict)  # unknown keys of `cell`
    extra_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def workload(self) -> str:
        return self.cell.workload

    @property
    def variant(self) -> str:
        return self.cell.variant

    @property
    def framework(self) -> str:
        return self.cell.framework

    @property
    def device(self) -> str:
        return self.cell.device

    @property
    def stopped_short(self) -> bool:
        """The cell's status says more than its cases do (it timed out, crashed, stopped)."""
        return self.status not in {case.status for case in self.cases}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> CellResult:
        known, rest = _split(document, _CELL_KEYS)
        cell, cell_extra = cell_from_dict(known.pop("cell", None) or {})
        known["status"] = Status(known.get("status", Status.OK.value))
        known["reason"] = known.get("reason") or ""
        known["cases"] = [CaseResult.from_dict(case) for case in known.get("cases") or []]
        if isinstance(known.get("cost"), dict):
            known["cost"] = HarnessCost.from_dict(known["cost"])
        return cls(cell=cell, **known, cell_extra=cell_extra, extra_fields=rest)

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {"cell": {**self.cell.as_dict(), **self.cell_extra}}
        for name in _CELL_KEYS[1:]:
            value = getattr(self, name)
            if name == "cases":
                value = [case.to_dict() for case in self.cases]
            elif name == "status":
                value = self.status.value
            elif name in OPTIONAL_CELL_KEYS and value is None:
                continue
            elif name == "cost":
                value = asdict(value)
            document[name] = value
        return {**document, **self.extra_fields}

    def finished_status(self) -> Status:
        """The worst status among the cases (ok when there are none)."""
        return worst_status([case.status for case in self.cases])

    def first_case_reason(self) -> str:
        """The first reason a case gave (why the cell is not ok), or ''."""
        return next((case.reason for case in self.cases if case.reason), "")


_RUN_KEYS = ("run_id", "command", "started", "finished", "workload", "sweep", "params",
             "quick", "timeout_s", "hints", "frameworks", "host", "ceilings", "interrupted",
             "interrupted_by", "cells", "planned_cells", "executor", "resumed", "rounds",
             "seed", "round_orders", "predictions")
# Keys that only some runs have (resumable plans, SLURM runs, a CPU-and-GPU sweep's predicted
# crossovers): absent rather than empty.
OPTIONAL_RUN_KEYS = ("planned_cells", "executor", "resumed", "predictions")
OPTIONAL_CELL_KEYS = ("host", "slurm", "cost")
UNKNOWN_MACHINE = "unknown machine"


@dataclass
class RunDocument:
    """run.json: what ran (command, workload, parameters), where (host, ceilings), how it
    ended (finished, interrupted) and every cell's result. The only reader and writer of it."""

    run_id: str = ""
    command: list[str] = field(default_factory=list)
    started: float | None = None
    finished: float | None = None  # None: the run was killed, or is still running
    workload: str = ""
    sweep: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    quick: bool = False
    timeout_s: float | None = None
    hints: dict[str, Any] = field(default_factory=dict)  # the spec's report hints
    frameworks: dict[str, dict[str, str]] = field(default_factory=dict)  # colour and label
    host: dict[str, Any] = field(default_factory=dict)  # harness.measure.envinfo.host_metadata
    ceilings: dict[str, Any] = field(default_factory=dict)  # per device: peak FLOP/s, GB/s
    interrupted: bool = False
    interrupted_by: str = ""  # the signal's name
    cells: list[CellResult] = field(default_factory=list)
    # What --resume needs: every planned cell (Cell.as_dict), the executor that ran them, and
    # one entry per resumption.
    planned_cells: list[dict[str, Any]] = field(default_factory=list)
    executor: dict[str, Any] = field(default_factory=dict)
    resumed: list[dict[str, Any]] = field(default_factory=list)
    # Rounds (harness.run.rounds): worker processes per cell, and the seed of the cell orders
    # (None: one round, cells in plan order). 1 round: run-to-run drift was not measured.
    rounds: int = 1
    seed: int | None = None
    # The cell orders that ran, as indices into planned_cells, one list per round started
    # (cells refused without a worker are in none; a resumed run appends its rounds).
    round_orders: list[list[int]] = field(default_factory=list)
    # The predicted GPU-vs-CPU crossovers, stored by every run that ends (harness.api
    # save_predictions, from harness.analysis.crossover; never by drawing a report):
    # per framework and variant, the size, its held-out error and the text printed.
    predictions: list[dict[str, Any]] = field(default_factory=list)
    extra_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def machine(self) -> str:
        """How reports name the machine: its label, else its hostname."""
        return str(self.host.get("machine_label") or self.host.get("hostname")
                   or UNKNOWN_MACHINE)

    @property
    def machine_label(self) -> str:
        """The label as recorded ('' when the host did not give one)."""
        return str(self.host.get("machine_label") or "")

    def host_fact(self, name: str) -> Any:
        """One recorded fact of the host (cpu_model, cores, gpus, ...), None when absent."""
        return self.host.get(name)

    def framework_color(self, name: str) -> str:
        """The colour the run stored for a framework ('' when it stored none)."""
        return str((self.frameworks.get(name) or {}).get("color", ""))

    def cell_frameworks(self) -> list[str]:
        """The frameworks of the cells, in order, each once."""
        return list(dict.fromkeys(cell.framework for cell in self.cells if cell.framework))

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> RunDocument:
        """A document in the current layout (see harness.data.upgrade for older ones)."""
        known, rest = _split(document, _RUN_KEYS)
        rest.pop("schema_version", None)  # always written as SCHEMA_VERSION
        for name in ("params", "hints", "frameworks", "host", "ceilings"):
            known[name] = dict(known.get(name) or {})
        known["run_id"] = str(known.get("run_id") or "")
        known["command"] = [str(part) for part in known.get("command") or []]
        known["workload"] = str(known.get("workload") or "")
        known["sweep"] = str(known.get("sweep") or "")
        known["quick"] = bool(known.get("quick"))
        known["interrupted"] = bool(known.get("interrupted"))
        known["interrupted_by"] = str(known.get("interrupted_by") or "")
        for name in ("planned_cells", "resumed", "predictions"):
            known[name] = list(known.get(name) or [])
        known["executor"] = dict(known.get("executor") or {})
        known["rounds"] = int(known.get("rounds") or 1)
        known["round_orders"] = [list(order) for order in known.get("round_orders") or []]
        known["cells"] = [result if isinstance(result, CellResult)
                          else CellResult.from_dict(result) for result in known.get("cells") or []]
        return cls(**known, extra_fields=rest)

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for name in _RUN_KEYS:
            document[name] = getattr(self, name)
        document["cells"] = [cell.to_dict() for cell in self.cells]
        if not self.round_orders:
            del document["round_orders"]
        for name in ("interrupted_by", *OPTIONAL_RUN_KEYS):
            if not document[name]:  # written only where there is something to say
                del document[name]
        return {**document, **self.extra_fields}


"""Typed results: one CaseResult per case, one CellResult per cell, statistics in one place.

The worker writes a cell's result as JSON (the only thing that crosses the process boundary);
its parent reads that file once into a CellResult (harness.run.runner.run_worker; the SLURM
executor types its tasks' files as it hands them on), and that one object goes on to the
executor's callback, the recorder, the store's tidy rows, run.json, the CLI table and the
report. So a median, a quartile, an IQR or a noise flag is computed by one function:
`sample_stats`. Every record here serializes through harness.data.serial: its dataclass
fields are its JSON keys (a new key is one field), and unknown keys in the JSON are kept in
`extra_fields` so a newer worker's fields survive a round trip through an older reader.
RunDocument is run.json itself: harness.data.store reads and writes it, harness.data.upgrade
brings older layouts up to SCHEMA_VERSION.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, ClassVar

from harness.core.settings import SettingValue
from harness.data.adviserecord import AdviseRecord
from harness.data.ceilings import Ceilings
from harness.data.gpustep import CasePredictions
from harness.data.records import CaseEnergy, GpuState
from harness.data.serial import (
    ALWAYS,
    IF_SET,
    SKIP,
    JsonObject,
    JsonRecord,
    JsonValue,
    read_field,
    type_hints,
)
from harness.spec import Cell, ParamValue, Status

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
# medians and the timing attempts; per cell the harness's own cost). 4: a case's rounds as a
# list of per-process records (CaseRound) in place of parallel arrays. 5: a case's predicted
# GPU steps a typed key of its own (`gpu_predictions`), no longer an entry of its `extra`.
SCHEMA_VERSION = 5


# Metadata of a case's keys that only a timed case carries: written for every timed case, and
# for a failed one only where set (a failed case holds case, status and reason), so a reader
# can tell "not measured" from "measured as 0".
TIMED: Mapping[str, Any] = {**IF_SET, "timed": True}


@dataclass(frozen=True)
class Attempt(JsonRecord):
    """One timing of a case: a contended one is timed again (harness.run.caserun)."""

    number: int  # 1 = the first timing
    median_s: float | None
    samples: int
    other_cores: float | None  # other processes' cores (+ stolen) while its samples ran
    contended: str = ""  # why it was timed again ('' = not contended)
    kept: bool = False  # its samples are the round's samples


@dataclass(frozen=True)
class CaseRound(JsonRecord):
    """What one worker process measured of a case: one round (harness.run.rounds).

    Why one record per process: each round is its own worker, with its own cold call,
    calibration, load and retries (pyperf keeps one immutable Run per worker the same way). A
    case holds a list of them; every figure over the rounds (the pooled samples, each round's
    median, their spread) is computed from these records and stored nowhere else.
    """

    round: int = 0  # 0 = the first round
    cold_seconds: float | None = None  # this worker's first call (None: not kept, layout 3)
    samples: tuple[float, ...] = ()  # warm seconds per call
    calls_per_sample: int = 1
    # Load of other processes while the samples ran: other_cores, steal_cores, seconds.
    other_load: dict[str, float] | None = None
    # Timed in blocks of steps within each call: every whole call's seconds (the cold one
    # first), and the steps of the block behind each warm sample (samples[i] ran
    # sample_steps[i] steps, scaled to a whole call). Empty for a case timed call by call.
    call_seconds: tuple[float, ...] = field(default=(), metadata=IF_SET)
    sample_steps: tuple[int, ...] = field(default=(), metadata=IF_SET)
    # Every timing of the case in this worker when one was contended (empty: timed once).
    attempts: tuple[Attempt, ...] = field(default=(), metadata=IF_SET)
    extra_fields: JsonObject = field(default_factory=dict)

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    def block_steps(self, index: int) -> int | None:
        """The steps of the block behind warm sample INDEX (0-based); None: a whole call."""
        return self.sample_steps[index] if index < len(self.sample_steps) else None


@dataclass
class CaseResult(JsonRecord):
    """One case of a cell: its parameters, status, raw samples (seconds per call) and check.

    Every key the worker writes has a field here; keys a newer worker adds land in
    `extra_fields` and are written back unchanged. Workload-specific values (accuracy, steps
    per call, ...) live in `extra` and are read through harness.data.fields. A key is written
    where set (so a case timed call by call, in one round, keeps its layout), a TIMED one for
    every timed case, and case, status and reason always.
    """

    WRITE_UNMARKED: ClassVar[str] = IF_SET["json"]
    case: dict[str, Any] = field(metadata=ALWAYS)
    status: Status = field(default=Status.OK, metadata=ALWAYS)
    reason: str = field(default="", metadata=ALWAYS)
    # One record per worker process that measured the case, in round order (empty: the case
    # was not measured); the figures below over all rounds are computed from them.
    rounds: list[CaseRound] = field(default_factory=list, metadata=TIMED)
    timer_overhead_s: float | None = field(default=None, metadata=TIMED)
    check: JsonObject | None = field(default=None, metadata=TIMED)
    suspect: str = field(default="", metadata=TIMED)
    predicted_call_s: float | None = field(default=None, metadata=TIMED)
    extra: dict[str, Any] = field(default_factory=dict, metadata=TIMED)
    peak_device_allocated_bytes: int | None = field(default=None, metadata=TIMED)
    peak_device_reserved_bytes: int | None = field(default=None, metadata=TIMED)
    # The device-busy pass: figures per call, or {"reason": why there are none}.
    device_profile: JsonObject | None = field(default=None, metadata=TIMED)
    # Measured over rounds that shared out the plan's work: the planned values of the shared
    # parameters (MNIST: {"epochs": 1, "train_samples": 60000}) where `case` (what one
    # worker's calls did) differs from them. Empty: the case is as planned.
    planned: dict[str, ParamValue] = field(default_factory=dict)
    # The calls per sample this case's calibration started from, found by the cell's first
    # round (None: calibrated from 1 call). A merged case: what its later rounds were given.
    calls_per_sample_reused: int | None = None
    # The GPU step predicted from this CPU case's features when its run ended (harness.api
    # _finish, harness.predict.answer): per profile and host. Empty: none was predicted.
    gpu_predictions: CasePredictions = field(default_factory=dict)
    extra_fields: JsonObject = field(default_factory=dict)

    @property
    def stats(self) -> SampleStats:
        return sample_stats(self.samples)

    @property
    def samples(self) -> list[float]:
        """Every warm sample, the rounds' pooled in round order."""
        return [seconds for record in self.rounds for seconds in record.samples]

    @property
    def cold_seconds(self) -> float | None:
        """The first round's cold call (a later round's worker is cold again: its own)."""
        return self.rounds[0].cold_seconds if self.rounds else None

    @property
    def calls_per_sample(self) -> int:
        """The first round's calls per sample (each round's own is on its record)."""
        return self.rounds[0].calls_per_sample if self.rounds else 1

    @property
    def whole_calls(self) -> list[tuple[int, float]]:
        """(round, seconds) of every whole call of a case timed in blocks, in round order."""
        return [(record.round, seconds) for record in self.rounds
                for seconds in record.call_seconds]

    @property
    def other_load(self) -> dict[str, float] | None:
        """The load of the most loaded round (None: no round measured one)."""
        return max((record.other_load for record in self.rounds if record.other_load),
                   key=lambda load: load.get("other_cores", 0.0), default=None)

    @property
    def attempts(self) -> list[Attempt]:
        """Every round's timings, where one was contended and timed again."""
        return [attempt for record in self.rounds for attempt in record.attempts]

    def samples_by_round(self) -> dict[int, list[float]]:
        """Round number -> that round's warm samples (rounds without samples left out)."""
        return {record.round: list(record.samples) for record in self.rounds if record.samples}

    @property
    def round_spread(self) -> float | None:
        """The spread of the round medians, (max - min) / their median: the run-to-run drift
        (None with fewer than 2 rounds)."""
        medians = [statistics.median(part) for part in self.samples_by_round().values()]
        if len(medians) < 2:
            return None
        middle = statistics.median(medians)
        return (max(medians) - min(medians)) / middle if middle else None

    def warm_samples(self) -> list[tuple[CaseRound, int]]:
        """Each pooled warm sample (in `samples`' order) as its round's record and its index
        in that record's samples."""
        return [(record, index) for record in self.rounds for index in range(len(record.samples))]

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

    def _written(self, item: Field[Any], value: Any) -> bool:
        return bool(item.metadata.get("timed") and self.measured) or super()._written(item,
                                                                                    value)



@dataclass
class HarnessCost(JsonRecord):
    """The harness's own cost of a cell: wall time in and around its worker(s) beside the
    timed calls. `phases` names where the rest went (seconds, summed over rounds)."""

    wall_s: float = 0.0  # worker start to result, every round and attempt together
    timed_s: float = 0.0  # inside the timed calls: cold calls and warm samples
    workers: int = 0  # worker processes started
    phases: dict[str, float] = field(default_factory=dict)
    # Each worker's own figures (round, wall_s, timed_s, phases), in the order they ran: the
    # sums above hide which round paid (a GPU cell's round 0 compiles, its later rounds load),
    # and a cost is only explained where each process's share can be read.
    per_worker: list[dict[str, JsonValue]] = field(default_factory=list, metadata=IF_SET)

    def add(self, other: HarnessCost) -> HarnessCost:
        phases = dict(self.phases)
        for name, seconds in other.phases.items():
            phases[name] = phases.get(name, 0.0) + seconds
        return HarnessCost(self.wall_s + other.wall_s, self.timed_s + other.timed_s,
                           self.workers + other.workers, phases,
                           [*self.per_worker, *other.per_worker])

    def worker_record(self, round_index: int) -> dict[str, JsonValue]:
        """This one worker's figures as per_worker keeps them (milliseconds kept)."""
        return {"round": round_index, "wall_s": round(self.wall_s, 3),
                "timed_s": round(self.timed_s, 3),
                "phases": {name: round(seconds, 3) for name, seconds in self.phases.items()
                           if seconds >= 0.0005}}


def cell_from_dict(document: Mapping[str, Any]) -> tuple[Cell, JsonObject]:
    """The Cell of a stored `cell` object (Cell.as_dict's keys, read by Cell's own fields), and
    its keys that Cell does not know (an old run's `quick`, harness.spec.LEGACY_CELL_FIELDS,
    among them: kept, so that the stored cell is written back as it was)."""
    hints = type_hints(Cell)
    known = {item.name: read_field(item, hints[item.name], document) for item in fields(Cell)}
    identity = {name: "" for name, value in known.items() if value is MISSING}  # unnamed: ''
    cell = Cell(**{**known, **identity})
    return cell, {key: value for key, value in document.items() if key not in known}


@dataclass
class CellResult(JsonRecord):
    """One (workload, variant, framework, device) cell: status, reason, environment, cases.

    Its keys are written always, but for where it ran and its cost, written where set; `cell`
    is Cell.as_dict with the unknown keys it was read with.
    """

    cell: Cell = field(metadata=SKIP)
    status: Status = Status.OK
    reason: str = ""
    framework_version: str | None = None
    device_name: str | None = None
    threads: dict[str, JsonValue] | None = None  # the framework's thread settings
    started: float | None = None
    finished: float | None = None
    cases: list[CaseResult] = field(default_factory=list)
    # Peak RSS of the worker (whole cell): who measured it, and the worker's own figure.
    peak_host_memory_bytes: int | None = None
    device_init_seconds: float | None = None
    peak_host_memory_source: str | None = None
    peak_host_memory_bytes_worker: int | None = None
    # Where the cell ran when not on the run's own host (a SLURM node): its host metadata, and
    # the scheduler's job id, node and state; None for cells run by the local executor.
    host: dict[str, Any] | None = field(default=None, metadata=IF_SET)
    slurm: dict[str, JsonValue] | None = field(default=None, metadata=IF_SET)
    # The harness's own time around the timed calls.
    cost: HarnessCost | None = field(default=None, metadata=IF_SET)
    worker_started: bool | None = field(default=None, metadata=IF_SET)  # False: refused at once
    # A cell run in rounds: the rounds whose worker ended, not stopped by a signal
    # (harness.run.rounds merge_cells); --resume runs the others (harness.run.resume).
    rounds_ended: list[int] = field(default_factory=list, metadata=IF_SET)
    cell_extra: JsonObject = field(default_factory=dict, metadata=SKIP)  # unknown keys
    extra_fields: JsonObject = field(default_factory=dict)

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
    def from_dict(cls, document: Mapping[str, Any], **given: Any) -> CellResult:
        cell, cell_extra = cell_from_dict(document.get("cell") or {})
        return super().from_dict({key: value for key, value in document.items()
                                  if key != "cell"}, cell=cell, cell_extra=cell_extra, **given)

    def to_dict(self) -> JsonObject:
        return {"cell": {**self.cell.as_dict(), **self.cell_extra}, **super().to_dict()}


UNKNOWN_MACHINE = "unknown machine"


@dataclass
class RunDocument(JsonRecord):
    """run.json: what ran (command, workload, parameters), where (host, ceilings), how it
    ended (finished, interrupted) and every cell's result. The only reader and writer of it.

    Its keys are written always, but for those only some runs have (the signal that stopped
    it, resumable plans, SLURM runs, rounds, a CPU-and-GPU sweep's predicted crossovers):
    written where set, absent rather than empty.
    """

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
    ceilings: Ceilings = field(default_factory=Ceilings)  # per device: peak FLOP/s, GB/s
    interrupted: bool = False
    interrupted_by: str = field(default="", metadata=IF_SET)  # the signal's name
    cells: list[CellResult] = field(default_factory=list)
    # What --resume needs: every planned cell (Cell.as_dict), the executor that ran them, and
    # one entry per resumption.
    planned_cells: list[dict[str, Any]] = field(default_factory=list, metadata=IF_SET)
    executor: JsonObject = field(default_factory=dict, metadata=IF_SET)
    resumed: list[dict[str, Any]] = field(default_factory=list, metadata=IF_SET)
    # Rounds (harness.run.rounds): worker processes per cell, and the seed of the cell orders
    # (None: one round, cells in plan order). 1 round: run-to-run drift was not measured.
    rounds: int = 1
    seed: int | None = None
    # The cell orders that ran, as indices into planned_cells, one list per round started
    # (cells refused without a worker are in none; a resumed run appends its rounds).
    round_orders: list[list[int]] = field(default_factory=list, metadata=IF_SET)
    # The predicted GPU-vs-CPU crossovers, stored by every run that ends (harness.api
    # _finish, from harness.analysis.crossover; never by drawing a report):
    # per framework and variant, the size, its held-out error and the text printed.
    predictions: list[JsonObject] = field(default_factory=list, metadata=IF_SET)
    # The settings the run used (harness.core.settings.Settings.to_dict: --quick and the
    # HARNESS_* variables); --resume runs with them unless given others.
    settings: dict[str, SettingValue] = field(default_factory=dict, metadata=IF_SET)
    # What `harness advise` decided (harness.data.adviserecord); None for any other run.
    advise: AdviseRecord | None = field(default=None, metadata=IF_SET)
    # What the run waited for its warm processes before the workers (their framework imports,
    # side by side), and each one's start and import (harness.run.forkserver ForkServers.record):
    # the largest part of "outside the workers" on a GPU host.
    warm_processes: JsonObject = field(default_factory=dict, metadata=IF_SET)
    # The whole command's own cost (harness.analysis.commandcost CommandCost.to_json): its
    # start and end, the seconds inside the timed calls, its parts; written by the CLI after
    # the answer, checked by `harness check` (harness.audit.commandcost).
    command_cost: JsonObject = field(default_factory=dict, metadata=IF_SET)
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
    def from_dict(cls, document: Mapping[str, Any], **given: Any) -> RunDocument:
        """A document in the current layout (see harness.data.upgrade for older ones)."""
        return super().from_dict({key: value for key, value in document.items()
                                  if key != "schema_version"}, **given)  # written as current

    def to_dict(self) -> JsonObject:
        return {"schema_version": SCHEMA_VERSION, **super().to_dict()}


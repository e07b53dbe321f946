"""The records the worker's case watchers store in a case's `extra`: energy and GPU state, typed.

harness.measure.energy and harness.measure.gpustate build these; run.json keeps them as the
nested JSON objects `extra["energy"]` ({"device": ..., "host": ...}) and `extra["gpu_state"]`;
everything that reads them back (the declared CSV columns in harness.data.fields, the report's
energy and GPU-state views) goes through these classes instead of chains of `.get()`. Every
record says whether it holds figures (`status` "ok") or why not ("unavailable", "not
measured", "error", with a `reason`). They serialize through harness.data.serial like every
record of run.json: keys are written where set (the layout the worker wrote before these types
existed), keys a newer worker adds are kept in `extra_fields` and written back, and missing
keys read as their defaults, so older run folders load unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from harness.data.serial import ALWAYS, IF_SET, JsonObject, JsonRecord

OK = "ok"
UNAVAILABLE = "unavailable"
NOT_MEASURED = "not measured"
NOT_RECORDED = "not recorded"  # no record at all: an older run, or a case that was never timed
StatusRecordT = TypeVar("StatusRecordT", bound="_StatusRecord")



class _JsonRecord(JsonRecord):
    """A record of a case's `extra`: its keys are written where set, `status` always."""

    WRITE_UNMARKED: ClassVar[str] = IF_SET["json"]


@dataclass(frozen=True)
class _StatusRecord(_JsonRecord):
    """A record that holds figures (`status` "ok") or says why not (its first two keys)."""

    status: str = field(default=NOT_RECORDED, metadata=ALWAYS)
    reason: str = ""

    @classmethod
    def unavailable(cls: type[StatusRecordT], reason: str) -> StatusRecordT:
        return cls(UNAVAILABLE, reason)

    @property
    def ok(self) -> bool:
        return self.status == OK

    def why_not(self) -> str:
        """'' when it holds figures, else 'unavailable: <reason>' (the CSV's *_reason column)."""
        return "" if self.ok else f"{self.status}: {self.reason}".rstrip(": ")


@dataclass(frozen=True)
class EnergyRecord(_StatusRecord):
    """One counter's energy over a case's calls (NVML's board counter or RAPL's packages).

    The total is what the counter saw, idle included; the `_above_idle` figures subtract the
    idle power measured before the cell over the same window.
    """

    counter: str | None = None
    source: str | None = None  # the timed samples, or an energy pass after the check
    reported: str | None = None
    window_s: float | None = None
    calls: float | None = None  # a pass over part of a call counts a fraction of one
    joules_total: float | None = None
    watts_mean: float | None = None
    joules_per_call: float | None = None
    joules_per_step: float | None = None
    steps_per_call: float | None = None
    idle_watts: float | None = None
    idle_window_s: float | None = None
    idle_settled: bool | None = None
    joules_per_call_above_idle: float | None = None
    joules_per_step_above_idle: float | None = None
    # The edge-aligned pass (measure.edgepass): the span between the counter's two updates
    # its power was read over; window_s and calls stay the pass's own.
    edge_span_s: float | None = None
    edge_joules: float | None = None
    edge_updates: int | None = None
    edge_resolution_s: float | None = None
    edge_error_bound: float | None = None
    counter_period_s: float | None = None
    poll_s: float | None = None
    # Where the idle power was read back from the machine's cache ('HH:MM' and the full
    # time; measure.idlepower.idle_origin); empty where it was measured before this cell.
    idle_remembered_from: str = ""
    idle_measured_at: str = ""
    extra_fields: JsonObject = field(default_factory=dict)

    @classmethod
    def not_measured(cls, reason: str) -> EnergyRecord:
        return cls(NOT_MEASURED, reason)


@dataclass(frozen=True)
class CaseEnergy(_JsonRecord):
    """extra['energy']: the device's counter (GPU cells) and the host's (RAPL), each or why not."""

    device: EnergyRecord | None = None
    host: EnergyRecord | None = None
    extra_fields: JsonObject = field(default_factory=dict)

    @classmethod
    def read(cls, document: Any) -> CaseEnergy | None:
        """The stored object; a watcher that failed as a whole wrote one record for both."""
        if not isinstance(document, dict) or not document:
            return None
        if "status" in document:  # {"status": "error", "reason": ...}
            failed = EnergyRecord.from_dict(document)
            return cls(device=failed, host=failed)
        return cls.from_dict(document)

    def primary(self, kind: str) -> EnergyRecord:
        """What the cell's own device drew: the GPU board on 'gpu', the CPU packages on 'cpu'."""
        record = self.device if kind == "gpu" else self.host
        return record if record is not None else EnergyRecord()


@dataclass(frozen=True)
class GpuReadings(_JsonRecord):
    """The GPU at one moment: clocks (MHz), temperature (C), power and its limit (W)."""

    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    extra_fields: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class WhileTimed(_JsonRecord):
    """What the polls saw while the case was timed: throttle reasons (name -> polls), clocks."""

    polls: int = field(default=0, metadata=ALWAYS)
    seconds: float | None = None
    throttle_reasons: dict[str, int] = field(default_factory=dict, metadata=ALWAYS)
    sm_clock_mhz_min: int | None = None
    sm_clock_mhz_max: int | None = None
    power_w_mean: float | None = None
    extra_fields: JsonObject = field(default_factory=dict)

    def throttles_text(self) -> str:
        """'sw_power_cap 3/10, gpu_idle 10/10', or 'none'."""
        return ", ".join(f"{name} {count}/{self.polls}"
                         for name, count in self.throttle_reasons.items()) or "none"


@dataclass(frozen=True)
class GpuProcesses(_JsonRecord):
    """Compute processes seen on the device while timed: ours, others, pids /proc cannot see."""

    readable: bool = field(default=True, metadata=ALWAYS)
    ours: list[int] | None = None
    others: list[int] | None = None
    unseen: list[int] | None = None
    our_group_size: int | None = None
    note: str = ""
    extra_fields: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class GpuState(_StatusRecord):
    """extra['gpu_state']: the GPU before, while and after a case was timed, or why not."""

    cuda_device: str | None = None
    nvml_name: str | None = None
    nvml_uuid: str | None = None
    before: GpuReadings | None = None
    after: GpuReadings | None = None
    max_sm_clock_mhz: int | None = None
    while_timed: WhileTimed | None = None
    processes: GpuProcesses | None = None
    suspect: str = ""
    extra_fields: JsonObject = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        """As the worker wrote it: an ok record always says its suspicion ('' for none)."""
        document = super().to_dict()
        return {**document, "suspect": self.suspect} if self.ok else document

    @classmethod
    def read(cls, document: Any) -> GpuState | None:
        return cls.from_dict(document) if isinstance(document, dict) and document else None

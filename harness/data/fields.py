"""Per-case values beyond the timings, each declared once: name, type, unit, where it is stored,
how a person reads it, and which tables show it.

The declaration drives measurements.csv and its Parquet copy (harness.data.columns: the column
and its type), the CLI's results table (a column when any row has a value) and the report's
per-case extras table. A new value that a workload or backend stores under the case's `extra`
dict (energy, GPU clocks, ...) is one line in FIELDS, for example:

    CaseField("energy_joules", float, extra_value("energy_joules"), unit="J", cli="energy"),
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from harness.core.units import device_kind, format_bytes, format_joules, format_seconds
from harness.data.records import NOT_RECORDED, EnergyRecord, WhileTimed
from harness.data.results import CaseResult, CellResult
from harness.data.secondopinion import disputed_text
from harness.data.serial import JsonObject

# Where a value lives: read from the cell and the case (None for a cell-level value).
Reader = Callable[[CellResult, "CaseResult | None"], Any]


def extra_value(key: str) -> Reader:
    """A value the workload's output stored in the case's `extra` dict."""
    return lambda cell, case: None if case is None else case.extra.get(key)


def case_value(name: str) -> Reader:
    """A field of CaseResult."""
    return lambda cell, case: None if case is None else getattr(case, name)


def cell_value(name: str) -> Reader:
    """A field of CellResult (one value for every case of the cell)."""
    return lambda cell, case: getattr(cell, name)


def profile_value(key: str) -> Reader:
    """A figure of the case's device-busy pass (harness.measure.devicetime)."""
    return lambda cell, case: None if case is None else (case.device_profile or {}).get(key)


def profile_reason(cell: CellResult, case: CaseResult | None) -> str | None:
    """Why the case has no device-busy figures ('' when it has them; None: not a timed case)."""
    if case is None or not case.device_profile:
        return None
    return str(case.device_profile.get("reason") or "")


def _energy(cell: CellResult, case: CaseResult | None) -> EnergyRecord | None:
    """The energy record of the cell's own device (GPU board, or CPU packages) of a timed case;
    an empty 'not recorded' one where the case stored none (older runs)."""
    if case is None or not case.measured:
        return None
    energy = case.energy
    return EnergyRecord() if energy is None else energy.primary(device_kind(cell.device))


def energy_value(name: str) -> Reader:
    """A figure of the cell's own energy record, where it holds figures (None elsewhere)."""
    def read(cell: CellResult, case: CaseResult | None) -> Any:
        record = _energy(cell, case)
        return getattr(record, name) if record is not None and record.ok else None
    return read


def energy_reason(cell: CellResult, case: CaseResult | None) -> str | None:
    """Why the energy columns of a timed case are empty ('' when they are filled)."""
    record = _energy(cell, case)
    if record is None:
        return None
    return record.why_not() or ("" if record.ok else NOT_RECORDED)


def flops_gaps(extra: Mapping[str, object]) -> str:
    """What a FLOP count missed, from the counter's coverage record (extra['flops_coverage']):
    '' for a complete count or one without a record (a workload's declared count), else e.g.
    'aten._cudnn_rnn x3 not counted; 97% of parameters reach only uncounted ops'."""
    coverage = extra.get("flops_coverage")
    if not isinstance(coverage, dict) or coverage.get("complete", True):
        return ""
    ops = coverage.get("uncounted_ops") or {}
    parts = []
    if ops:
        parts.append(", ".join(f"{name} x{count}" for name, count in sorted(ops.items()))
                     + " not counted")
    share = coverage.get("uncounted_param_share")
    if isinstance(share, (int, float)) and share > 0:
        parts.append(f"{share:.0%} of parameters reach only uncounted ops")
    return "; ".join(parts) or "the counter reported gaps"


def timed_extra_text(text: Callable[[Mapping[str, object]], str]) -> Reader:
    """A text made from a timed case's `extra` (None for a case that was not timed)."""
    return lambda cell, case: None if case is None or not case.measured else text(case.extra)


def _while_timed(case: CaseResult | None) -> WhileTimed | None:
    state = None if case is None else case.gpu_state
    return state.while_timed if state is not None and state.ok else None


def timed_gpu_value(name: str) -> Reader:
    """A figure the GPU-state polls saw while the case was timed (GPU cells with NVML)."""
    return lambda cell, case: getattr(_while_timed(case), name, None)


def throttle_reasons(cell: CellResult, case: CaseResult | None) -> str | None:
    """'sw_power_cap 3/10, gpu_idle 10/10' ('none' where the polls saw none)."""
    timed = _while_timed(case)
    return None if timed is None else timed.throttles_text()


def gpu_state_reason(cell: CellResult, case: CaseResult | None) -> str | None:
    """Why the SM clock and throttle columns of a timed case are empty ('' when filled)."""
    if case is None or not case.measured:
        return None
    state = case.gpu_state
    if state is None:
        return ("cpu cell: no GPU to watch" if device_kind(cell.device) == "cpu"
                else NOT_RECORDED)
    return state.why_not()


def _plain(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _percent(value: Any) -> str:
    return f"{100 * float(value):.0f}%"


def _fraction(value: Any) -> str:
    return f"{float(value):.3f}"


# A cell of measurements.csv as csv_value gives it: text ('' for none, "64x64" for a shape),
# a number or a flag.
CsvValue: TypeAlias = str | int | float | bool


@dataclass(frozen=True)
class CaseField:
    """One declared per-case value."""

    name: str  # column in measurements.csv / Parquet / the report's extras table
    kind: type  # float, int, str or bool: the column's type
    read: Reader
    unit: str = ""  # "s", "bytes", "" (a count or a fraction)
    format: Callable[[Any], str] = _plain
    csv: bool = True  # a column of measurements.csv (and Parquet)
    report: bool = False  # a column of the report's extras table (RunSet.extras)
    cli: str = ""  # the CLI results table's header; "" keeps it out of that table
    per_cell: bool = False  # one value per cell (it is also on the cell's status row)
    help: str = ""

    def value(self, cell: CellResult, case: CaseResult | None) -> Any:
        """The stored value, None when there is none."""
        value = self.read(cell, case)
        return None if value is None or value == "" else value

    def text(self, value: Any) -> str:
        """How a person reads it: '-' for no value."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return self.format(value)

    def csv_value(self, value: Any) -> CsvValue:
        """The CSV cell: '' for none, shapes as 64x64, numbers and text as they are."""
        if value is None:
            return ""
        if isinstance(value, (list, tuple)):
            return "x".join(str(part) for part in value)
        return value

    def table_value(self, value: Any) -> float | str:
        """The report table's cell: a float (NaN for none) for numbers, text ('' for none)."""
        if self.kind in (int, float):
            try:
                return float(value)
            except (TypeError, ValueError):
                return math.nan
        return "" if value is None else str(value)


FIELDS: tuple[CaseField, ...] = (
    CaseField("steps_per_call", int, extra_value("steps_per_call"), cli="steps/call",
              help="training steps in one timed call (an epoch, or a fit() block): the "
                   "per-step time is the call's / this"),
    CaseField("suspect", str, case_value("suspect"), help="why the timing guard doubts it"),
    # Rounds (harness.run.rounds) and retries of contended timings (harness.run.caserun).
    CaseField("round_spread", float, case_value("round_spread"), format=_percent, report=True,
              cli="round drift", help="spread of the round medians / their median"),
    CaseField("attempts", int, lambda cell, case: None if case is None or not case.attempts
              else len(case.attempts), report=True,
              help="timings of a case timed again after contention"),
    CaseField("peak_host_memory_bytes", int, cell_value("peak_host_memory_bytes"), unit="bytes",
              format=format_bytes, per_cell=True, help="peak RSS of the worker (whole cell)"),
    CaseField("peak_device_allocated_bytes", int, case_value("peak_device_allocated_bytes"),
              unit="bytes", format=format_bytes, help="peak device memory held by tensors"),
    CaseField("peak_device_reserved_bytes", int, case_value("peak_device_reserved_bytes"),
              unit="bytes", format=format_bytes,
              help="peak device memory held by the framework's allocator"),
    # The second clock, per call, from a profiled pass apart from the timed samples (GPU cells;
    # empty elsewhere, with device_reason saying why): device busy, host<->device copies on
    # the device, kernels executed, host API calls that enqueued work, CUDA-event span.
    CaseField("device_seconds", float, profile_value("busy_seconds"), unit="s",
              format=format_seconds),
    CaseField("device_copy_seconds", float, profile_value("copy_seconds"), unit="s",
              format=format_seconds),
    CaseField("kernels_per_call", float, profile_value("kernels_per_call")),
    CaseField("launches_per_call", float, profile_value("launches_per_call")),
    CaseField("device_span_seconds", float, profile_value("span_seconds"), unit="s",
              format=format_seconds),
    # Below 1 where a long call's first steps were profiled, the figures above scaled to the
    # whole call (harness.measure.blocks.CallStep).
    CaseField("device_profiled_share", float, profile_value("profiled_share")),
    CaseField("device_reason", str, profile_reason),
    # Energy per call from the hardware's counters (harness.measure.energy): the cell's own
    # device, NVML's board counter on GPU cells, RAPL's packages on CPU cells; the total (idle
    # included) and the share above the idle power measured before the cell. Empty where there
    # is no figure, with energy_reason saying why ('unavailable: <reason>').
    CaseField("energy_j_per_call", float, energy_value("joules_per_call"), unit="J",
              format=format_joules, help="energy per call, idle included"),
    CaseField("energy_j_per_call_above_idle", float,
              energy_value("joules_per_call_above_idle"), unit="J", format=format_joules,
              help="energy per call above the idle power"),
    CaseField("power_w_mean", float, energy_value("watts_mean"), unit="W",
              help="mean power over the energy window"),
    CaseField("idle_power_w", float, energy_value("idle_watts"), unit="W",
              help="power with nothing launched, before the cell"),
    CaseField("energy_reason", str, energy_reason,
              help="why the energy columns are empty ('' when measured)"),
    # The GPU's state while timed (harness.measure.gpustate, NVML); gpu_state_reason says why
    # these are empty (a cpu cell, no NVML).
    CaseField("sm_clock_mhz_min", int, timed_gpu_value("sm_clock_mhz_min"), unit="MHz"),
    CaseField("sm_clock_mhz_max", int, timed_gpu_value("sm_clock_mhz_max"), unit="MHz"),
    CaseField("throttle_reasons", str, throttle_reasons,
              help="clock-event reasons seen while timed, in how many polls"),
    CaseField("gpu_state_reason", str, gpu_state_reason,
              help="why the GPU-state columns are empty ('' when recorded)"),
    # Training workloads (MNIST): what the trained model scored and which data it saw.
    CaseField("accuracy", float, extra_value("accuracy"), format=_fraction, report=True,
              cli="accuracy", help="test accuracy after the timed epochs"),
    CaseField("data_source", str, extra_value("data_source"), report=True),
    CaseField("samples_distinct", int, extra_value("samples_distinct"), report=True),
    # The report's extras table keeps its first names for these two.
    CaseField("peak_device_memory_bytes", int, case_value("peak_device_allocated_bytes"),
              unit="bytes", format=format_bytes, csv=False, report=True),
    CaseField("threads", str, cell_value("threads"), csv=False, report=True, per_cell=True),
    # FLOPs of one call (the CSV's `flops` column holds the count, achieved FLOP/s = flops /
    # seconds; the report's ceilings view puts it against the measured peak): who counted it.
    CaseField("flops_per_call", float, extra_value("flops_per_call"), csv=False,
              format=lambda value: f"{float(value):.3g}", cli="FLOPs/call"),
    CaseField("flops_counted_by", str, extra_value("flops_counted_by"), report=True,
              help="the framework's counter, the workload's exact count, or why none"),
    CaseField("flops_gaps", str, timed_extra_text(flops_gaps), report=True,
              help="ops the FLOP counter had no formula for ('' = none): the `flops` column "
                   "is then a lower bound, and so is flops / seconds"),
    CaseField("flops_disputed", str, timed_extra_text(disputed_text), report=True,
              help="parts of the call where an independent count (layer shapes, the jaxpr's) "
                   "disagrees with the `flops` column beyond its margin, both figures ('' = "
                   "none): flops / seconds is then no share of a peak"),
    CaseField("trained_with", str, extra_value("trained_with"), report=True,
              help="a user model's loss and optimizer, and where they came from"),
)


def csv_fields() -> list[CaseField]:
    return [item for item in FIELDS if item.csv]


def report_fields() -> list[CaseField]:
    return [item for item in FIELDS if item.report]


def cli_fields() -> list[CaseField]:
    return [item for item in FIELDS if item.cli]


def columns_of_kind(kind: type) -> tuple[str, ...]:
    """The CSV columns declared with this type."""
    return tuple(item.name for item in csv_fields() if item.kind is kind)


def csv_values(cell: CellResult, case: CaseResult | None) -> dict[str, CsvValue]:
    """The declared CSV columns of one case (of the cell alone when CASE is None)."""
    return {item.name: item.csv_value(item.value(cell, case)) for item in csv_fields()
            if case is not None or item.per_cell}


def report_values(cell: CellResult, case: CaseResult) -> JsonObject:
    """The declared report columns of one case."""
    return {item.name: item.table_value(item.value(cell, case)) for item in report_fields()}


def cli_values(cell: CellResult, case: CaseResult | None) -> JsonObject:
    """The declared CLI columns of one case, raw (CaseField.text formats them)."""
    return {item.name: item.value(cell, case) for item in cli_fields()}

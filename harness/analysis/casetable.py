"""The case table: one row per case of one or more runs, keyed by the case's identity.

Crossover, predict, advice, the audit and the report's views all read this table, so it lives
here, below them all: runs grouped into experiments, samples prepared (time per step, the
latest run per case), one row per case (status, median and quartiles of the warm samples, the
cold call, the work, each round's median) and one per cell. Its key columns are
harness.data.casekey's CASE_COLUMNS; case_rows gives its rows typed (CaseRow), keyed by their
CaseKey. run_rows makes a run in memory into its table's rows with what only its document
holds (check, device profile): the rows advise, the run's chooser and the CLI's table read.
Pure pandas: nothing drawn, nothing written; unit-tested on synthetic measurements whose
answer is known.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import pandas as pd

from harness.analysis.noise import CaseNoise
from harness.core.units import device_kind
from harness.data import fields
from harness.data.casekey import CASE_COLUMNS, CELL_COLUMNS, CaseKey
from harness.data.measurements import with_run
from harness.data.records import CaseEnergy
from harness.data.results import (
    NOISY_IQR_FRACTION,
    CaseResult,
    CellResult,
    RunDocument,
    sample_stats,
)
from harness.data.serial import JsonObject, JsonValue
from harness.spec import Status, worst_status_name


def first_text(values: pd.Series) -> str:
    """The first non-empty text of a column (a group's reason, suspicion, version)."""
    return next((value for value in values if isinstance(value, str) and value), "")


# --- preparing the raw rows -------------------------------------------------------------------

def _comparable(value: Any) -> Any:
    """A parameter value as compared between runs: a file path by its file name only.

    Why: the same data file lives at different absolute paths on a laptop and a GPU server.
    """
    if isinstance(value, str) and "/" in value:
        return PurePath(value).name
    return value


def param_signature(params: Mapping[str, JsonValue], sweep: str) -> str:
    """The workload parameters that define the experiment: all but the swept one."""
    kept = {name: _comparable(value) for name, value in params.items() if name != sweep}
    return json.dumps(kept, sort_keys=True, default=str)


def assign_experiments(runs: pd.DataFrame) -> pd.DataFrame:
    """runs plus `experiment` (display name), `stem` (file-name stem) and `differs` (text).

    Runs of one workload whose non-swept parameters differ are different experiments: they get
    their own figures instead of being drawn as one (pyperf refuses to merge such runs too).
    """
    runs = runs.copy()
    runs["signature"] = [param_signature(p, s) for p, s in zip(runs["params"], runs["sweep"])]
    runs["experiment"], runs["stem"], runs["differs"] = "", "", ""
    for workload, group in runs.groupby("workload", sort=False):
        signatures = list(dict.fromkeys(group["signature"]))
        if len(signatures) == 1:
            runs.loc[group.index, ["experiment", "stem"]] = [workload, workload]
            continue
        differing = _differing_params([json.loads(s) for s in signatures])
        for number, signature in enumerate(signatures, start=1):
            params = json.loads(signature)
            text = ", ".join(f"{name}={_short(params.get(name))}" for name in differing)
            index = group.index[group["signature"] == signature]
            runs.loc[index, "experiment"] = f"{workload} ({text})"
            runs.loc[index, "stem"] = f"{workload}-set{number}"
            runs.loc[index, "differs"] = text
    return runs


def _differing_params(signatures: list[JsonObject]) -> list[str]:
    names = sorted({name for params in signatures for name in params})
    return [name for name in names
            if len({json.dumps(params.get(name), default=str) for params in signatures}) > 1]


def _short(value: Any) -> str:
    text = "x".join(map(str, value)) if isinstance(value, list) else str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def prepare(measurements: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Rows tagged with experiment and device kind, time per step, one run per case.

    When several runs measured the same case on the same machine, the latest run's rows are
    kept (pooling samples across runs would mix calibrations); the notes say where.
    """
    recency = runs.assign(started=pd.to_numeric(runs["started"], errors="coerce").fillna(0.0))
    recency = recency.sort_values(["started", "order"])
    rank = {run_id: position for position, run_id in enumerate(recency["run_id"])}
    frame = measurements.merge(runs[["run_id", "experiment", "stem"]], on="run_id", how="left")
    frame["experiment"] = frame["experiment"].fillna(frame["workload"])
    frame["stem"] = frame["stem"].fillna(frame["workload"])
    frame["device_kind"] = frame["device"].map(device_kind)
    frame["run_rank"] = frame["run_id"].map(rank).fillna(-1)
    steps = frame["steps_per_call"].where(frame["steps_per_call"] > 0)
    frame["time_s"] = frame["seconds"] / steps.fillna(1.0)
    frame["cell_level"] = (frame["phase"] == "none") & (frame["size_label"] == "")
    return _latest_run_only(frame)


def _latest_run_only(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    notes: list[str] = []
    case_rows = frame[~frame["cell_level"]]
    latest_case = case_rows.groupby(list(CASE_COLUMNS))["run_rank"].transform("max")
    keep_case = case_rows["run_rank"] == latest_case
    cell_latest = frame.groupby(list(CELL_COLUMNS))["run_rank"].transform("max")
    keep_cell = frame["cell_level"] & (frame["run_rank"] == cell_latest)
    dropped = case_rows[~keep_case]
    if not dropped.empty:
        repeated = dropped.drop_duplicates(list(CASE_COLUMNS))
        notes.append(f"{len(repeated)} case(s) were measured in several runs on the same machine; "
                     "the latest run's samples are shown.")
    kept = pd.concat([case_rows[keep_case], frame[keep_cell]]).sort_index()
    return kept, notes


# --- one row per case and per cell ------------------------------------------------------------

def case_stats(prepared: pd.DataFrame) -> pd.DataFrame:
    """One row per case: status, median / quartiles of warm samples (per step), cold call, work.

    Quartiles use linear interpolation, the same 'inclusive' method as
    harness.data.results.sample_stats.
    """
    cases = prepared[~prepared["cell_level"]]
    if "suspect" not in cases:  # frames from before the timing guard existed
        cases = cases.assign(suspect="")
    cases = cases.assign(suspect=cases["suspect"].fillna("").astype(str))
    keys = [*CASE_COLUMNS, "workload", "device_kind", "stem"]
    info = cases.groupby(keys, sort=False).agg(
        status=("status", worst_status_name), reason=("reason", first_text),
        framework_version=("framework_version", first_text),
        device_name=("device_name", first_text), sweep=("sweep", first_text),
        size=("size", "first"), flops=("flops", "max"), bytes=("bytes", "max"),
        steps_per_call=("steps_per_call", "max"), check_passed=("check_passed", "first"),
        check_metric=("check_metric", first_text), check_value=("check_value", "max"),
        run_id=("run_id", "first"), suspect=("suspect", first_text),
    )
    # What a FLOP counter missed: the rate made from its count is then a lower bound; where
    # its second opinion disagrees: the rate is disputed. Neither is a share of a peak.
    for column in ("flops_gaps", "flops_disputed"):
        info[column] = (cases[column].fillna("").astype(str).groupby(
            [cases[key] for key in keys], sort=False).agg(first_text)
            if column in cases else "")
    # The device profile's per-call figures, where the run has them (the crossover predictor
    # fits the host's time per launch and the device's rate from these).
    for column in PROFILE_COLUMNS:
        if column in cases:
            info[column] = pd.to_numeric(cases[column], errors="coerce").groupby(
                [cases[key] for key in keys], sort=False).max()
    warm = cases[cases["phase"] == "warm"].groupby(keys, sort=False)
    timing = warm.apply(_warm_stats, include_groups=False)
    if timing.empty:  # no warm samples anywhere (only failed or unavailable cells)
        timing = pd.DataFrame(columns=WARM_COLUMNS, dtype=float,
                              index=pd.MultiIndex.from_tuples([], names=keys))
    if not timing.empty:
        timing["medians_by_round"] = warm.apply(_medians_by_round, include_groups=False)
    else:
        timing["medians_by_round"] = pd.Series(dtype=object)
    cold = cases[cases["phase"] == "cold"].groupby(keys, sort=False)
    timing["cold_s"] = cold["time_s"].first()
    timing["cold_call_s"] = cold["seconds"].first()
    stats = info.join(timing, how="left").reset_index()
    stats["samples"] = stats["samples"].fillna(0).astype(int)
    stats["medians_by_round"] = [value if isinstance(value, dict) else {}
                                 for value in stats["medians_by_round"]]
    stats["rounds"] = [max(1, len(value)) for value in stats["medians_by_round"]]
    stats["iqr_s"] = stats["q3_s"] - stats["q1_s"]
    stats["noise"] = stats["iqr_s"] / stats["median_s"]
    stats["noisy"] = (stats["samples"] >= 2) & (stats["noise"] > NOISY_IQR_FRACTION)
    stats["valid"] = (stats["status"] == Status.OK.value) & stats["median_s"].notna()
    stats["size_value"] = pd.to_numeric(stats["size_label"], errors="coerce")
    stats["gflops"] = stats["flops"] / stats["call_median_s"] / 1e9
    stats["gbps"] = stats["bytes"] / stats["call_median_s"] / 1e9
    return stats


PROFILE_COLUMNS = ("device_seconds", "launches_per_call")
WARM_COLUMNS = ["median_s", "q1_s", "q3_s", "min_s", "samples", "call_median_s", "call_q1_s",
                "call_q3_s"]


def _warm_stats(rows: pd.DataFrame) -> pd.Series:
    """Per-step and per-call statistics of one case, from harness.data.results.sample_stats, the
    one place statistics are computed (the CLI table and this report agree by construction)."""
    per_step, per_call = sample_stats(list(rows["time_s"])), sample_stats(list(rows["seconds"]))
    return pd.Series({"median_s": per_step.median, "q1_s": per_step.q1, "q3_s": per_step.q3,
                      "min_s": per_step.minimum, "samples": per_step.count,
                      "call_median_s": per_call.median, "call_q1_s": per_call.q1,
                      "call_q3_s": per_call.q3}, dtype=float)


def _medians_by_round(rows: pd.DataFrame) -> dict[int, float]:
    """Round number -> median time per step of that round's warm samples (one round: {0: m})."""
    rounds = rows["round"].fillna(0) if "round" in rows else pd.Series(0, index=rows.index)
    return {int(number): float(part.median())
            for number, part in rows["time_s"].groupby(rounds.astype(int))}


def cell_status(prepared: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: its worst status and the reason that goes with it."""
    rows = []
    for key, group in prepared.groupby(list(CELL_COLUMNS), sort=False):
        status = worst_status_name(group["status"])
        reason = first_text(group.loc[group["status"] == status, "reason"])
        rows.append({**dict(zip(CELL_COLUMNS, key)), "status": status, "reason": reason,
                     "workload": group["workload"].iloc[0], "stem": group["stem"].iloc[0],
                     "device_kind": group["device_kind"].iloc[0],
                     "framework_version": first_text(group["framework_version"]),
                     "device_name": first_text(group["device_name"])})
    return pd.DataFrame(rows, columns=[*CELL_COLUMNS, "status", "reason", "workload", "stem",
                                       "device_kind", "framework_version", "device_name"])


def time_unit(stats: pd.DataFrame) -> str:
    """'step' when the workload's calls are epochs of several steps, else 'call'."""
    return "step" if (stats["steps_per_call"] > 1).any() else "call"


# --- one case's row, typed ---------------------------------------------------------------------

@dataclass(frozen=True)
class CaseRow:
    """One row of case_stats, typed: the case's key and the figures its readers judge.

    A missing time is NaN (as in the table: the noise rule compares numbers); a count that was
    not made (FLOPs, bytes, launches, device time, steps: absent or 0) is None.
    """

    key: CaseKey
    status: str
    reason: str
    valid: bool
    samples: int
    median_s: float  # per step
    q1_s: float
    q3_s: float
    call_median_s: float  # per call
    medians_by_round: dict[int, float]  # round number -> that round's median per step
    size_value: float | None  # the size as a number; None outside the sweep or not numeric
    flops: float | None
    nbytes: float | None
    launches_per_call: float | None
    device_seconds: float | None
    steps_per_call: float | None
    noisy: bool
    suspect: str
    cold_call_s: float | None = None  # the first round's cold call
    call_iqr_s: float = math.nan  # per call
    # What the FLOP count missed ('' = nothing known missing): gflops is then a lower bound;
    # where a second count of the same call disagrees ('' = nowhere): gflops is disputed.
    flops_gaps: str = ""
    flops_disputed: str = ""
    run_id: str = ""  # the run whose samples the row holds (the latest one that measured it)
    # What the table's CSV columns cannot carry, from the run's document (run_rows): the swept
    # value as run.json holds it, the check, the device-busy pass per call (or {"reason":
    # ...}), the cell's status (a worker stopped from outside, by the budget's deadline,
    # --timeout or a signal, leaves a timeout or interrupted cell whose finished cases read
    # ok), peak host RSS of the cell's worker and device memory of this case, the declared
    # per-case values the CLI shows (harness.data.fields), by field name, the energy records
    # and what the GPU's state made suspect (harness.data.records).
    size: JsonValue = None
    check: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    cell_status: str = ""
    peak_host_bytes: int | None = None
    peak_device_bytes: int | None = None
    extras: JsonObject = field(default_factory=dict)
    energy: CaseEnergy | None = None
    gpu_suspect: str = ""
    # Other processes' cores (and stolen ones) in the case's most loaded round, and the cores
    # the run's host had: what SUSPECT contention can explain (harness.analysis.confidence).
    other_cores: float | None = None
    cores: int | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> CaseRow:
        """A row of case_stats (a dict of its record, or a pandas row)."""
        rounds = row.get("medians_by_round")
        size = pd.to_numeric(row.get("size_value"), errors="coerce")
        return cls(
            key=CaseKey.from_row(row), status=_text(row.get("status")),
            reason=_text(row.get("reason")), valid=bool(row.get("valid")),
            samples=int(row.get("samples") or 0), median_s=_seconds(row.get("median_s")),
            q1_s=_seconds(row.get("q1_s")), q3_s=_seconds(row.get("q3_s")),
            call_median_s=_seconds(row.get("call_median_s")),
            medians_by_round=dict(rounds) if isinstance(rounds, dict) else {},
            size_value=float(size) if pd.notna(size) else None,
            flops=_count(row.get("flops")), nbytes=_count(row.get("bytes")),
            launches_per_call=_count(row.get("launches_per_call")),
            device_seconds=_count(row.get("device_seconds")),
            steps_per_call=_count(row.get("steps_per_call")), noisy=bool(row.get("noisy")),
            suspect=_text(row.get("suspect")), cold_call_s=_count(row.get("cold_call_s")),
            call_iqr_s=_seconds(row.get("call_q3_s")) - _seconds(row.get("call_q1_s")),
            flops_gaps=_text(row.get("flops_gaps")),
            flops_disputed=_text(row.get("flops_disputed")), run_id=_text(row.get("run_id")))

    @property
    def gflops(self) -> float | None:
        """The achieved FLOP rate per call, where the FLOPs were counted and the call timed."""
        return _rate(self.flops, self) if self.flops is not None else None

    @property
    def gbps(self) -> float | None:
        """The achieved bandwidth per call, where the bytes were counted and the call timed."""
        return _rate(self.nbytes, self) if self.nbytes is not None else None

    @property
    def variant(self) -> str:
        return self.key.variant

    @property
    def framework(self) -> str:
        return self.key.framework

    @property
    def device(self) -> str:
        return self.key.device

    @property
    def timed(self) -> bool:
        """Warm samples and a status of ok or invalid: a case advise judges (a fix that fails
        its check was timed all the same, and ranks as failing parity)."""
        return self.samples > 0 and self.status in (Status.OK.value, Status.INVALID.value)

    @property
    def noise(self) -> CaseNoise:
        """The case as the one noise rule reads it (harness.analysis.noise)."""
        return CaseNoise(self.median_s, self.q1_s, self.q3_s, self.samples, self.medians_by_round)


def case_rows(stats: pd.DataFrame) -> dict[CaseKey, CaseRow]:
    """Every row of a case_stats table, typed and keyed by its case (in the table's order)."""
    rows = (CaseRow.of(record) for record in stats.to_dict("records"))
    return {row.key: row for row in rows}


def run_table(document: RunDocument, measurements: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """case_stats of one run, from its document and its measurements (read from its folder, or
    made from the rows it holds in memory: harness.data.measurements)."""
    runs = assign_experiments(pd.DataFrame([{
        "run_id": run_id, "workload": document.workload, "sweep": document.sweep,
        "params": document.params, "started": document.started, "order": 0}]))
    prepared, _ = prepare(with_run(measurements, document, run_id, 0), runs)
    return case_stats(prepared)


# A case's work per call: FLOPs and bytes by name (harness.analysis.stats.work_of).
WorkOf = Callable[[CaseResult], dict[str, float]]


def run_rows(document: RunDocument, work: WorkOf | None = None,
             stopped_rows: bool = False) -> list[CaseRow]:
    """Every case of a run in memory, a row of its case table each, in the run's order, built
    once from its typed cells: the figures case_stats gives from the run's measurements, and
    what the table's columns cannot carry (CaseRow's last fields) from the document.
    A cell that stopped before its first case is one row without a size or samples; with
    STOPPED_ROWS (the CLI's table) so is every cell whose status says more than its cases do,
    after them. WORK counts each case's work (default: the FLOPs its worker counted)."""
    work_of = work or _counted_flops
    found = []
    for cell in document.cells:
        found += [_case_row(document, cell, case, work_of(case)) for case in cell.cases]
        if not cell.cases or (stopped_rows and cell.stopped_short):
            found.append(_blank_row(CaseKey.of_cell(cell, document.machine), cell.status.value,
                                    cell.reason, cell_status=cell.status.value))
    return found


def _case_row(document: RunDocument, cell: CellResult, case: CaseResult,
              work: dict[str, float]) -> CaseRow:
    """One case's row, its figures those case_stats makes of the case's measurement rows
    (store.measurement_rows: each value as the CSV's text holds it, read back as a number)."""
    key = CaseKey.in_run(document, cell, case)
    state = case.gpu_state
    documented: dict[str, Any] = dict(
        reason=case.reason or cell.reason, run_id=document.run_id,
        size=case.case.get(document.sweep), check=case.check, profile=case.device_profile,
        cell_status=cell.status.value, peak_host_bytes=cell.peak_host_memory_bytes,
        peak_device_bytes=case.peak_device_bytes, extras=fields.cli_values(cell, case),
        energy=case.energy, gpu_suspect=state.suspect if state is not None else "",
        other_cores=_other_cores(case), cores=_host_cores(document))
    if not case.measured and not key.size_label:
        # An unmeasured case outside the sweep reads as its cell's status row in the table
        # (harness.analysis.casetable.prepare), so it has no counts of its own.
        return _blank_row(key, case.status.value, **documented)
    csv = fields.csv_values(cell, case)
    steps = _count(_csv_text(csv.get("steps_per_call")))
    warm = [(int(record.round or 0), _seconds(record.samples[index]))
            for record, index in case.warm_samples()]
    per_step = [(number, seconds / (steps or 1.0)) for number, seconds in warm]
    step_stats = sample_stats([seconds for _, seconds in per_step])
    call_stats = sample_stats([seconds for _, seconds in warm])
    median, q1, q3 = (_seconds(step_stats.median), _seconds(step_stats.q1),
                      _seconds(step_stats.q3))
    return CaseRow(
        key=key, status=case.status.value,
        valid=case.status is Status.OK and not math.isnan(median), samples=step_stats.count,
        median_s=median, q1_s=q1, q3_s=q3, call_median_s=_seconds(call_stats.median),
        medians_by_round=_round_medians(per_step),
        size_value=_size_value(key.size_label), flops=_count(_csv_text(work.get("flops"))),
        nbytes=_count(_csv_text(work.get("bytes"))),
        launches_per_call=_count(_csv_text(csv.get("launches_per_call"))),
        device_seconds=_count(_csv_text(csv.get("device_seconds"))), steps_per_call=steps,
        noisy=step_stats.count >= 2 and _noise(median, q3 - q1) > NOISY_IQR_FRACTION,
        suspect=_csv_text(csv.get("suspect")), cold_call_s=_count(case.cold_seconds),
        call_iqr_s=_seconds(call_stats.q3) - _seconds(call_stats.q1),
        flops_gaps=_csv_text(csv.get("flops_gaps")),
        flops_disputed=_csv_text(csv.get("flops_disputed")), **documented)


def _blank_row(key: CaseKey, status: str, reason: str, **documented: Any) -> CaseRow:
    """A row with nothing timed or counted: a cell's status row, or a case without one."""
    return CaseRow(key=key, status=status, reason=reason, valid=False, samples=0,
                   median_s=math.nan, q1_s=math.nan, q3_s=math.nan, call_median_s=math.nan,
                   medians_by_round={}, size_value=None, flops=None, nbytes=None,
                   launches_per_call=None, device_seconds=None, steps_per_call=None,
                   noisy=False, suspect="", **documented)


def _round_medians(per_step: list[tuple[int, float]]) -> dict[int, float]:
    """Round number -> median time per step of that round's warm samples (as
    _medians_by_round: pandas' median, NaN samples skipped, rounds in order)."""
    rounds: dict[int, list[float]] = {}
    for number, seconds in sorted(per_step, key=lambda item: item[0]):
        rounds.setdefault(number, []).append(seconds)
    return {number: _seconds(sample_stats(values).median) for number, values in rounds.items()}


def _noise(median: float, iqr: float) -> float:
    """The spread over the median as numpy divides (x/0 is inf, 0/0 NaN)."""
    if median == 0:
        return math.nan if iqr == 0 or math.isnan(iqr) else math.copysign(math.inf, iqr)
    return iqr / median


def _size_value(label: str) -> float | None:
    size = pd.to_numeric(label, errors="coerce")
    return float(size) if pd.notna(size) else None


def _csv_text(value: Any) -> str:
    """A value as measurements.csv holds it ('' for none), stripped as its reader strips text."""
    return "" if value is None else str(value).strip()


def _other_cores(case: CaseResult) -> float | None:
    """Other processes' and the hypervisor's cores in the case's most loaded round."""
    load = case.other_load
    if not load:
        return None
    return float(load.get("other_cores", 0.0)) + float(load.get("steal_cores", 0.0))


def _host_cores(document: RunDocument) -> int | None:
    cores = document.host_fact("cores")
    return cores if isinstance(cores, int) and cores > 0 else None


def _counted_flops(case: CaseResult) -> dict[str, float]:
    """The FLOPs per call the case's worker counted (advise reads no workload's formulas:
    harness.analysis.stats.work_of's fallback)."""
    flops = case.extra.get("flops_per_call")
    return {"flops": float(flops)} if isinstance(flops, (int, float, str)) and flops else {}


def _rate(count: float, row: CaseRow) -> float | None:
    """COUNT per call over the row's median call, in units of 1e9 per second."""
    return count / row.call_median_s / 1e9 if row.samples and row.call_median_s else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _seconds(value: Any) -> float:
    number = pd.to_numeric(value, errors="coerce")
    return float(number) if pd.notna(number) else math.nan


def _count(value: Any) -> float | None:
    number = pd.to_numeric(value, errors="coerce")
    return float(number) if pd.notna(number) and number > 0 else None

"""The prediction's validation (issue 51, part 5): the rows file and its summary, framework-free.

benchmarks/predict_validation.py measures, on one GPU machine, each (model, batch) of a zoo:
the CPU step with its features, the GPU step predicted from them and a device profile, and
the GPU step measured; one row per cell in a rows file (`write_rows`, rewritten after every
row). This module reads that file and says how good the prediction is (`summary_lines`),
beside named baselines, so `--from FILE` needs no GPU and no framework.

What the summary counts, said once:
- **error** of a predictor on a cell: (predicted - measured) / measured, of the GPU step;
  median and p90 of |error| (linear interpolation between order statistics, numpy's
  default) and the share of cells within 25%.
- **verdict**: whether the GPU beats the CPU at that batch. Measured: the measured GPU step
  against the measured CPU step; predicted: the predicted GPU step against the same measured
  CPU step (the user has their CPU run). A **tie** is a cell whose measured gap is within the
  noise, |cpu - gpu| / min(cpu, gpu) <= max(NOISE_FLOOR, noise(cpu) + noise(gpu)) with
  noise = IQR / median of that step's samples: neither answer is wrong there, so ties are
  left out of the verdict's accuracy.
- **crossover** of a model's sweep: measured, the batch after the CPU's last win beyond the
  noise, where a GPU win beyond the noise follows (a sweep the GPU wins throughout, or
  never wins beyond the noise after the CPU's last win, measured no crossover); predicted,
  the smallest batch from which the predicted GPU step stays under the measured CPU step.
  The distance is in sweep steps and in doublings (|log2(predicted / measured batch)|); a
  predicted "the CPU wins throughout" is put one step past the sweep's end (a lower bound,
  marked).
- **regime**: busy share (device busy time per call over the measured step) under or over
  50% where the run measured it, else the model's own regime, said so.
- **baselines**: "datasheet-style" (FLOPs over the profile's peak float32 matmul rate) and
  "device alone" (the model's device queue without the host); one GPU run against another
  (GPU to GPU, and the noise floor between two lendings) is benchmarks/predictlab/gpu2gpu.py's.
- **left out**: the model with its one fitted constant fitted without that model's cells
  (benchmarks/predictlab/fitting.py), beside the model as shipped.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import statistics
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data.store import write_json_atomic
from harness.measure.devicetime import DeviceEvent
from harness.predict.features import StepFeatures
from harness.predict.model import predict
from harness.predict.profile import Profile, ProfileError, load_profile, shipped_names
from harness.predict.rates import HostSpeed
from harness.predict.versus import NOISE_FLOOR

from . import fitting

ROWS_KIND = "harness-predict-validation"
ROWS_VERSION = 1
WITHIN = 0.25
BUSY_SPLIT = 0.5
MEASURED_KEYS = {"synced": "median_s", "pipelined": "pipelined_s"}
SAMPLES_KEYS = {"synced": "samples_s", "pipelined": "pipelined_samples_s"}
MODEL = "model"
DATASHEET = "datasheet-style (FLOPs / peak fp32 matmul)"
DEVICE_ALONE = "device alone (no host)"
LEFT_OUT = "model, its constant fitted leaving it out"

Row = dict[str, Any]


class RowsError(ValueError):
    """A file that is not a validation rows file this harness reads: one line."""


def rows_document(meta: Mapping[str, Any], rows: Sequence[Row]) -> dict[str, Any]:
    return {"kind": ROWS_KIND, "version": ROWS_VERSION, "meta": dict(meta), "rows": list(rows)}


def write_rows(path: Path, meta: Mapping[str, Any], rows: Sequence[Row]) -> None:
    """The whole rows file, atomically: a run stopped between two rows keeps every row."""
    write_json_atomic(path, rows_document(meta, rows))


def read_document(path: Path, kind: str, version: int, what: str,
                  error: type[Exception]) -> dict[str, Any]:
    """The JSON document of PATH (gzipped or not) of KIND at VERSION or older; ERROR, one
    line naming WHAT the file should be, for anything else."""
    try:
        raw = Path(path).read_bytes()
        # A rows file kept in the repository is gzipped (benchmarks/data/): read either.
        document = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError, EOFError) as why:
        raise error(f"{path}: not a readable JSON file ({why})") from None
    if not isinstance(document, dict) or document.get("kind") != kind:
        raise error(f"{path}: not a {what} file (kind {kind!r})")
    if int(document.get("version", 0)) > version:
        raise error(f"{path}: version {document.get('version')} is newer than this "
                    f"harness reads ({version})")
    return document


def read_rows(path: Path) -> tuple[dict[str, Any], list[Row]]:
    """(meta, rows) of a rows file; RowsError, one line, for anything else."""
    document = read_document(path, ROWS_KIND, ROWS_VERSION, "validation rows", RowsError)
    return dict(document.get("meta") or {}), list(document.get("rows") or [])


# --- features and predictions stored in a row ------------------------------------------------

# The totals a row keeps in the clear (the whole record is packed beside them).
FEATURE_TOTALS = ("op_count", "kernel_ops", "flops", "bytes", "chain", "host_s_ops", "step_s",
                  "sync_count", "user_sync_count", "h2d_bytes", "unknown_ops")


def packed(record: Mapping[str, Any]) -> str:
    """A features record compressed into one string: a transformer's step has a thousand
    ops, and every row keeps its record so a later model can be validated again offline."""
    return base64.b64encode(zlib.compress(json.dumps(record).encode(), 6)).decode()


def unpacked_json(text: str) -> Any:
    return json.loads(zlib.decompress(base64.b64decode(text)))


def unpacked(text: str) -> StepFeatures:
    return StepFeatures.from_dict(unpacked_json(text))


def kernel_table(events: Sequence[DeviceEvent], calls: int) -> list[list[Any]]:
    """[name (first 80 characters), kind, count per call, device seconds per call] of a
    profiled pass's events, the longest first: which kernels the GPU ran, the evidence for
    each of the model's device terms (a row keeps it packed)."""
    table: dict[tuple[str, str], list[float]] = {}
    for event in events:
        found = table.setdefault((event.name[:80], event.kind), [0.0, 0.0])
        found[0] += 1
        found[1] += event.duration_ns * 1e-9
    return sorted(([name, kind, count / calls, seconds / calls]
                   for (name, kind), (count, seconds) in table.items()),
                  key=lambda item: -item[3])


def peak_matmul_fp32(profile: Profile) -> float | None:
    """The profile's fastest float32 matmul row, FLOP/s: the datasheet-style baseline's peak."""
    entry = profile.entries.get("matmul.fp32")
    rates = [row.rate() or 0.0 for row in (entry.rows if entry else [])]
    return max(rates) if rates and max(rates) > 0 else None


def profiles_named(primary: str) -> dict[str, Profile]:
    """PRIMARY (a shipped name or a file; ProfileError where it is neither) first, then
    every shipped profile that loads: each row holds the predictions for every profiled
    GPU, so one run also serves GPU to GPU."""
    found = {primary: load_profile(primary)}
    for name in shipped_names():
        if name not in found:
            try:
                found[name] = load_profile(name)
            except ProfileError:  # another shipped profile unreadable: that GPU goes unpredicted
                continue
    return found


def predictions_for(features: StepFeatures, profiles: Mapping[str, Profile],
                    this_host: HostSpeed | None) -> dict[str, dict[str, Any]]:
    """{profile name: {'profiled': Prediction record, 'this': Prediction record}}: the GPU
    step on each profiled GPU as a cloud machine runs it, and driven by this machine's CPU."""
    found: dict[str, dict[str, Any]] = {}
    for name, profile in profiles.items():
        found[name] = {}
        for host in ("profiled", "this"):
            made = predict(features, profile, host=host, this_host=this_host, profile_name=name)
            found[name][host] = made.to_dict()
    return found


def predicted_row(row: Row, profiles: Mapping[str, Profile],
                  this_host: HostSpeed | None) -> Row:
    """ROW with its predictions and peaks computed again from its stored features (the
    model as it is now): validating a changed model needs no GPU."""
    if not row.get("features_packed"):
        return row
    features = unpacked(row["features_packed"])
    return {**row, "predictions": predictions_for(features, profiles, this_host),
            "peak_fp32_matmul": {name: peak_matmul_fp32(profile)
                                 for name, profile in profiles.items()}}


def repredicted(meta: Mapping[str, Any], rows: Sequence[Row], profile: str = "") -> list[Row]:
    """ROWS predicted again from their stored features by the model as it is now, with the
    host speed and CPU model the run recorded (a changed model validated without a GPU)."""
    profiles, record = profiles_named(profile or meta.get("profile") or "h200"), \
        meta.get("this_host")
    speed = HostSpeed.from_record({"cpu_model": str(meta.get("host_cpu") or ""), **record}
                                  ) if record else None
    return [predicted_row(row, profiles, speed) for row in rows]


# --- statistics ------------------------------------------------------------------------------

def relative_error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def percentile(values: Sequence[float], share: float) -> float:
    """The SHARE quantile, linear between order statistics (numpy's default method)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = (len(ordered) - 1) * share
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


def noise(samples: Sequence[float]) -> float:
    """IQR / median of a step's samples (0 for fewer than two)."""
    if len(samples) < 2:
        return 0.0
    quartiles = statistics.quantiles(samples, n=4, method="inclusive")
    middle = statistics.median(samples)
    return (quartiles[2] - quartiles[0]) / middle if middle > 0 else 0.0


@dataclass(frozen=True)
class ErrorStats:
    """|error| of one predictor over some cells."""

    cells: int
    median: float
    p90: float
    within: float  # share of cells with |error| <= WITHIN

    @classmethod
    def of(cls, errors: Sequence[float]) -> ErrorStats | None:
        if not errors:
            return None
        absolute = [abs(error) for error in errors]
        return cls(cells=len(absolute), median=percentile(absolute, 0.5),
                   p90=percentile(absolute, 0.9),
                   within=sum(error <= WITHIN for error in absolute) / len(absolute))


@dataclass(frozen=True)
class Cell:
    """One measured (model, batch) with what the summary compares: seconds per step."""

    model: str
    batch: int
    cpu_s: float
    cpu_noise: float
    gpu_s: float
    gpu_noise: float
    busy_share: float | None
    model_regime: str
    predicted: dict[str, float]  # predictor name -> predicted GPU seconds

    @property
    def tie(self) -> bool:
        gap = abs(self.cpu_s - self.gpu_s) / min(self.cpu_s, self.gpu_s)
        return gap <= max(NOISE_FLOOR, self.cpu_noise + self.gpu_noise)

    @property
    def gpu_wins(self) -> bool:
        return self.gpu_s < self.cpu_s

    def regime(self) -> str:
        if self.busy_share is not None:
            return (f"busy < {BUSY_SPLIT:.0%}" if self.busy_share < BUSY_SPLIT
                    else f"busy >= {BUSY_SPLIT:.0%}")
        return f"{self.model_regime or '?'} (the model's; no busy share)"


# --- rows -> cells ---------------------------------------------------------------------------

def prediction_of(row: Row, profile: str, host: str) -> Mapping[str, Any] | None:
    """The row's stored prediction for PROFILE and HOST ('profiled' or 'this'), if predicted."""
    found = row_prediction(row, profile, host)
    predicted = found and found.get("status") == "predicted" and found.get("seconds")
    return found if predicted else None


def row_prediction(row: Row, profile: str, host: str) -> Mapping[str, Any] | None:
    """The row's stored prediction record for PROFILE and HOST, whatever its status."""
    found = ((row.get("predictions") or {}).get(profile) or {}).get(host)
    return found if isinstance(found, dict) else None


def primary_profile(meta: Mapping[str, Any], rows: Sequence[Row]) -> str:
    """The profile the run was asked to predict (meta), else the first one any row holds."""
    if meta.get("profile"):
        return str(meta["profile"])
    for row in rows:
        for name in row.get("predictions") or {}:
            return str(name)
    return ""


def shipped_name(profile: str, rows: Sequence[Row]) -> str:
    """PROFILE where it is a shipped name; for a profile FILE the run predicted with, the
    shipped profile of the identity its predictions recorded (a profile made again,
    validated from its file before it shipped, now ships under that name); else PROFILE.
    Only for rows predicted again: their stored predictions under that name are another
    profile's."""
    names = shipped_names()
    if profile in names:
        return profile
    identity = next((record.get("profile", {}).get("identity") for row in rows
                     for record in [row_prediction(row, profile, "profiled")] if record), None)
    for name in names:
        try:
            if identity and load_profile(name).identity() == identity:
                return name
        except ProfileError:  # an unreadable shipped profile is no match
            continue
    return profile


def datasheet_seconds(row: Row, profile: str) -> float | None:
    flops = (row.get("features") or {}).get("flops")
    peak = (row.get("peak_fp32_matmul") or {}).get(profile)
    return flops / peak if flops and peak else None


def cell_of(row: Row, profile: str, host: str, measured: str = "synced",
            left_out: Mapping[str, float] | None = None) -> Cell | None:
    """ROW as a Cell (None where the row lacks a measured CPU or GPU step or a prediction);
    LEFT_OUT, where given, {model: the fitted constant without that model} adds the model's
    step with that constant (benchmarks/predictlab/fitting.py)."""
    cpu, gpu = row.get("cpu") or {}, row.get("gpu") or {}
    gpu_s = gpu.get(MEASURED_KEYS[measured])
    prediction = prediction_of(row, profile, host)
    if row.get("status") != "ok" or not cpu.get("median_s") or not gpu_s or not prediction:
        return None
    predicted = {MODEL: float(prediction["seconds"]),
                 DEVICE_ALONE: float(prediction.get("device_s") or 0.0)}
    datasheet = datasheet_seconds(row, profile)
    if datasheet:
        predicted[DATASHEET] = datasheet
    if left_out and str(row["model"]) in left_out:
        again = fitting.fit_cell(str(row["model"]), float(gpu_s), prediction)
        predicted[LEFT_OUT] = again.seconds(left_out[str(row["model"])])
    return Cell(model=str(row["model"]), batch=int(row["batch"]), cpu_s=float(cpu["median_s"]),
                cpu_noise=noise(cpu.get("samples_s") or []), gpu_s=float(gpu_s),
                gpu_noise=noise(gpu.get(SAMPLES_KEYS[measured]) or []),
                busy_share=gpu.get("busy_share"),
                model_regime=str(prediction.get("regime") or ""), predicted=predicted)


def cells_of(rows: Iterable[Row], profile: str, host: str = "profiled",
             measured: str = "synced", left_out: Mapping[str, float] | None = None
             ) -> list[Cell]:
    return [cell for cell in (cell_of(row, profile, host, measured, left_out)
                              for row in rows) if cell is not None]



# --- what the summary computes ---------------------------------------------------------------

def errors_of(cells: Iterable[Cell], predictor: str) -> list[float]:
    return [relative_error(cell.predicted[predictor], cell.gpu_s) for cell in cells
            if cell.predicted.get(predictor)]


@dataclass(frozen=True)
class VerdictStats:
    right: int
    cells: int  # non-tie cells the predictor predicted
    ties: int

    @property
    def share(self) -> float | None:
        return self.right / self.cells if self.cells else None


def verdict_stats(cells: Sequence[Cell], predictor: str) -> VerdictStats:
    """How often PREDICTOR's GPU step, set against the measured CPU step, picks the device
    the measurement picked; ties (module docstring) left out and counted apart."""
    judged = [cell for cell in cells if not cell.tie and cell.predicted.get(predictor)]
    right = sum((cell.predicted[predictor] < cell.cpu_s) == cell.gpu_wins for cell in judged)
    return VerdictStats(right=right, cells=len(judged), ties=sum(cell.tie for cell in cells))


def crossover_index(gpu_faster: Sequence[bool]) -> int | None:
    """The first index from which the GPU stays faster to the end; len() where it never is
    at the end (the CPU wins the largest batch); None where it wins from the first."""
    index = len(gpu_faster)
    while index > 0 and gpu_faster[index - 1]:
        index -= 1
    return None if index == 0 else index


@dataclass(frozen=True)
class Crossover:
    """One model's measured and predicted crossover on its sweep."""

    model: str
    batches: list[int]
    measured: int | None  # batch, None: no crossover measured
    predicted: int | None  # batch; None: the GPU predicted faster from the first batch
    steps: int | None  # sweep steps apart (None: no crossover measured)
    doublings: float | None
    beyond: bool  # the CPU predicted to win the whole sweep: steps is a lower bound


def measured_crossover_index(ordered: Sequence[Cell]) -> int | None:
    """The cell after the CPU's last win beyond the noise, where a GPU win beyond the noise
    follows it; None where there is none (ties count for neither device)."""
    cpu_wins = [index for index, cell in enumerate(ordered) if not cell.tie and not cell.gpu_wins]
    if not cpu_wins:
        return None
    after = cpu_wins[-1] + 1
    return after if any(not cell.tie for cell in ordered[after:]) else None


def crossover_of(model: str, cells: Sequence[Cell], predictor: str = MODEL) -> Crossover:
    ordered = sorted(cells, key=lambda cell: cell.batch)
    batches = [cell.batch for cell in ordered]
    measured = measured_crossover_index(ordered)
    predicted = crossover_index([cell.predicted[predictor] < cell.cpu_s for cell in ordered])
    if measured is None:  # the GPU won throughout, or never beyond the noise
        return Crossover(model, batches, None, _batch_at(batches, predicted), None, None,
                         predicted == len(ordered))
    predicted_index = 0 if predicted is None else predicted
    predicted_batch = _batch_at(batches, predicted)
    ratio = (predicted_batch or batches[0]) / batches[measured]
    return Crossover(model, batches, batches[measured], predicted_batch,
                     abs(predicted_index - measured), abs(math.log2(ratio)),
                     predicted == len(ordered))


def _batch_at(batches: list[int], index: int | None) -> int | None:
    """The batch at INDEX; one sweep step past the end for len(); None for None."""
    if index is None:
        return None
    if index < len(batches):
        return batches[index]
    step = batches[-1] / batches[-2] if len(batches) > 1 else 2.0
    return int(batches[-1] * step)


def crossovers(cells: Sequence[Cell], predictor: str = MODEL) -> list[Crossover]:
    by_model: dict[str, list[Cell]] = {}
    for cell in cells:
        if cell.predicted.get(predictor):
            by_model.setdefault(cell.model, []).append(cell)
    return [crossover_of(model, found, predictor) for model, found in by_model.items()
            if len(found) >= 2]


def by_regime(cells: Sequence[Cell]) -> dict[str, list[Cell]]:
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(cell.regime(), []).append(cell)
    return dict(sorted(groups.items()))


# --- lines -----------------------------------------------------------------------------------

def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def stats_columns(stats: ErrorStats | None) -> str:
    if stats is None:
        return f"{0:>5}  {'-':>8}  {'-':>8}  {'-':>9}"
    return (f"{stats.cells:>5}  {_pct(stats.median):>8}  {_pct(stats.p90):>8}  "
            f"{_pct(stats.within):>9}")


def verdict_column(stats: VerdictStats) -> str:
    if not stats.cells:
        return "-"
    return f"{stats.right}/{stats.cells} ({_pct(stats.share)}), {stats.ties} ties"


HEADER = (f"{'predictor':<44}  {'regime':<44}  cells  median|e|  p90|e|    within25  "
          "verdict right (non-tie)")


def table_lines(cells: Sequence[Cell], predictors: Sequence[str]) -> list[str]:
    """One line per (predictor, regime), all cells first."""
    lines = [HEADER]
    groups = {"all": list(cells), **by_regime(cells)}
    for predictor in predictors:
        for regime, found in groups.items():
            stats = ErrorStats.of(errors_of(found, predictor))
            lines.append(f"{predictor:<44}  {regime:<44}  {stats_columns(stats)}  "
                         f"{verdict_column(verdict_stats(found, predictor))}")
    return lines


def crossover_lines(cells: Sequence[Cell]) -> list[str]:
    found = crossovers(cells)
    measured = [item for item in found if item.measured is not None]
    lines = [f"crossover: measured in {len(measured)} of {len(found)} models' sweeps"]
    if measured:
        one_step = sum(item.steps is not None and item.steps <= 1 for item in measured)
        one_doubling = sum(item.doublings is not None and item.doublings <= 1.0
                           for item in measured)
        lines.append(f"  predicted within one sweep step: {one_step}/{len(measured)} "
                     f"({_pct(one_step / len(measured))}); within one doubling: "
                     f"{one_doubling}/{len(measured)} ({_pct(one_doubling / len(measured))})")
    for item in found:
        lines.append("  " + crossover_text(item))
    return lines


def crossover_text(item: Crossover) -> str:
    sweep = f"batches {item.batches[0]}..{item.batches[-1]} ({len(item.batches)})"
    predicted = ("GPU faster from the first batch" if item.predicted is None else
                 f"from batch {item.predicted}" + (" (CPU wins the whole sweep)"
                                                   if item.beyond else ""))
    if item.measured is None:
        return f"{item.model}: {sweep}; no crossover measured; predicted {predicted}"
    bound = ">=" if item.beyond else ""
    return (f"{item.model}: {sweep}; measured from batch {item.measured}, predicted "
            f"{predicted}: {bound}{item.steps} steps, {bound}{item.doublings:.1f} doublings")


def summary_lines(meta: Mapping[str, Any], rows: Sequence[Row], *, profile: str = "",
                  host: str = "profiled", measured: str = "synced",
                  left_out: Mapping[str, float] | None = None) -> list[str]:
    """The summary of a rows file (module docstring) for PROFILE's predictions; LEFT_OUT
    ({model: constant fitted without it}) adds the model's left-out line."""
    profile = profile or primary_profile(meta, rows)
    cells = cells_of(rows, profile, host, measured, left_out)
    unknown = [row for row in rows if row.get("status") == "ok"
               and prediction_of(row, profile, host) is None]
    failed = [row for row in rows if row.get("status") != "ok"]
    lines = [f"validation of the GPU step predicted from CPU features: {len(cells)} cells "
             f"of {len({cell.model for cell in cells})} models; measured on "
             f"{meta.get('device_description') or meta.get('device') or '?'} "
             f"({measured} step), predicted with profile {profile or '?'} (host {host})"]
    if unknown:
        names = sorted({f"{row['model']}" for row in unknown})
        reason = str((row_prediction(unknown[0], profile, host) or {}).get("reason") or "")
        lines.append(f"  predicted 'unknown' in {len(unknown)} cells ({', '.join(names)}): "
                     f"left out below{'; ' + reason if reason else ''}")
    if failed:
        lines.append(f"  not measured: {len(failed)} rows ("
                     + "; ".join(f"{row.get('model')} b{row.get('batch')}: "
                                 f"{row.get('reason', '?')[:60]}" for row in failed[:4]) + ")")
    if not cells:
        return lines + ["  no cell with a measured CPU step, GPU step and prediction"]
    predictors = [MODEL] + ([LEFT_OUT] if any(LEFT_OUT in cell.predicted for cell in cells)
                            else []) + [DEVICE_ALONE] + ([DATASHEET] if any(
                                DATASHEET in cell.predicted for cell in cells) else [])
    return lines + table_lines(cells, predictors) + crossover_lines(cells)

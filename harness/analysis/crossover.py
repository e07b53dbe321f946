"""GPU vs CPU over a sweep: the measured crossover, the predicted one, and why the GPU loses.

Every number the report's crossover view shows and run.json stores is computed here, from the
per-case statistics table (harness.analysis.casetable.case_stats: one row per
case with experiment, machine, variant, framework, device, device_kind, size_label, size_value,
valid, status, reason, median_s, q1_s, q3_s, call_median_s, samples, medians_by_round, flops,
bytes, noisy, suspect, ...). Why here and not in the view: the predictions are stored with
every run when it ends, drawn or not (harness.api), and a stored number must not depend on
which command drew a picture. The view (harness.report.views.crossover) only lays them out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypedDict

import pandas as pd

from harness.analysis import casetable
from harness.analysis.casetable import CaseRow, first_text
from harness.analysis.costmodel import CrossoverPrediction, predict_crossover
from harness.analysis.noise import ONE_ROUND, CaseNoise, GapVerdict, judge_gap
from harness.core.units import format_size
from harness.data.results import RunDocument
from harness.data.serial import JsonValue
from harness.data.upgrade import DEFAULT_HINTS

# "Flat" per-call time: the work grows by at least this factor while time less than doubles.
FLAT_WORK_GROWTH = 8.0
FLAT_TIME_GROWTH = 2.0


# --- the measured crossover --------------------------------------------------------------------

@dataclass(frozen=True)
class Crossover:
    """Where GPU time drops below CPU time over a sweep.

    kind: 'crossover' (GPU faster from `size` up), 'gpu-always', 'cpu-always', 'mixed' (no
    size from which the GPU stays ahead though it leads somewhere), or 'no-overlap'.
    """

    kind: str
    size: float | None = None
    sizes_compared: int = 0

    def text(self, sweep: str) -> str:
        """The verdict in words, as the report and the terminal print it."""
        if self.sizes_compared == 1 and self.kind in ("gpu-always", "cpu-always"):
            faster = "GPU" if self.kind == "gpu-always" else "CPU"
            return f"{faster} faster at the one size measured"
        if self.kind == "crossover":
            return f"GPU faster from {sweep}={format_size(self.size, sweep)} up"
        if self.kind == "gpu-always":
            return f"GPU faster at every {sweep} measured"
        if self.kind == "cpu-always":
            return f"no crossover in range: CPU faster at every {sweep} measured"
        if self.kind == "mixed":
            return "no crossover in range: GPU leads only at some sizes, not the largest"
        return "no sizes measured on both CPU and GPU"


def find_crossover(curves: pd.DataFrame) -> Crossover:
    """Crossover from a table with columns size, cpu_s, gpu_s (one row per size).

    The crossover is the smallest size from which the GPU is faster at every larger size
    measured on both; a lead that is lost again at larger sizes is not a crossover.
    """
    both = curves.dropna(subset=["size", "cpu_s", "gpu_s"]).sort_values("size")
    if both.empty:
        return Crossover("no-overlap")
    gpu_faster = list(both["gpu_s"] < both["cpu_s"])
    sizes = list(both["size"])
    if all(gpu_faster):
        return Crossover("gpu-always", sizes[0], len(sizes))
    if not any(gpu_faster):
        return Crossover("cpu-always", None, len(sizes))
    if not gpu_faster[-1]:
        return Crossover("mixed", None, len(sizes))
    last_slower = max(index for index, faster in enumerate(gpu_faster) if not faster)
    return Crossover("crossover", sizes[last_slower + 1], len(sizes))


def _keyed_by_size(stats: pd.DataFrame) -> pd.DataFrame:
    """Valid cases with a `_size` column.

    A case outside the sweep (size_label "", e.g. a variant that runs one fixed case beside
    a sweep) counts as one point at size 0, so CPU and GPU still compare there.
    """
    valid = stats[stats["valid"]]
    fixed = valid["size_label"] == ""
    valid = valid[valid["size_value"].notna() | fixed]
    return valid.assign(_size=valid["size_value"].where(~fixed, 0.0))


def _curve(stats: pd.DataFrame) -> pd.Series:
    """size -> median for valid cases, the fastest row per size."""
    keyed = _keyed_by_size(stats)
    return keyed.groupby("_size")["median_s"].min().rename_axis("size_value")


def crossovers(stats: pd.DataFrame,
               hints: Mapping[str, JsonValue] | None = None) -> pd.DataFrame:
    """GPU vs CPU verdicts per experiment, machine and variant.

    Pairs: the best GPU cell vs the best CPU cell at each size ('best'), and each framework's
    GPU cell vs its own CPU cell. A device-only variant (a GPU precision mode, pinned copies)
    has no CPU cell of its own, and a variant the workload names in `cpu_baseline_any_variant`
    asks "GPU this way vs the best CPU way" (seed 4: copies on the GPU vs a plain CPU library):
    both are compared with the CPU cells of every variant on that machine. Sizes where a cell
    failed are not compared; the pair lists them in `excluded` so the summary can say why there
    is no verdict there.
    """
    any_variant = _names((hints or {}).get("cpu_baseline_any_variant"))
    rows: list[dict[str, object]] = []  # one per pair: the table's mixed columns
    for (experiment, machine, variant), group in stats.groupby(
            ["experiment", "machine", "variant"], sort=False):
        machine_rows = stats[(stats["experiment"] == experiment) & (stats["machine"] == machine)]
        own_cpu = (group["device_kind"] == "cpu").any() and variant not in any_variant
        cpu_pool = group if own_cpu else machine_rows
        gpu = group[group["device_kind"] == "gpu"]
        cpu = cpu_pool[cpu_pool["device_kind"] == "cpu"]
        base = {"experiment": experiment, "machine": machine, "variant": variant,
                "sweep": first_text(group["sweep"]),
                "cpu_is_other_variant": cpu_pool is machine_rows}
        best = {**base, "framework": "best", **_pair(_curve(cpu), _curve(gpu), cpu, gpu)}
        rows.append(best)
        for framework, gpu_fw in gpu.groupby("framework", sort=False):
            cpu_fw = cpu[cpu["framework"] == framework]
            rows.append({**base, "framework": framework,
                         **_pair(_curve(cpu_fw), _curve(gpu_fw), cpu_fw, gpu_fw),
                         "prediction": predicted(cpu_fw, gpu_fw)})
        best["prediction"], best["predicted_from"] = _best_prediction(rows, gpu)
    return pd.DataFrame(rows)


def _names(listed: JsonValue) -> set[str]:
    """A hint that lists names (variants), as a set; empty where the hint is absent."""
    return {str(name) for name in listed} if isinstance(listed, list) else set()


class PairVerdict(TypedDict):
    """The columns _pair adds to a crossovers row."""

    excluded: list[str]
    kind: str
    size: float | None
    sizes_compared: int
    verdict: Crossover
    noise: str
    has_cpu: bool
    has_gpu: bool
    largest_size: float | None
    speedup_at_largest: float | None


def _pair(cpu: pd.Series, gpu: pd.Series, cpu_rows: pd.DataFrame,
          gpu_rows: pd.DataFrame) -> PairVerdict:
    """One pair's verdict, noise phrase, excluded cases and speedup at the largest size."""
    curves = pd.DataFrame({"cpu_s": cpu, "gpu_s": gpu}).rename_axis("size").reset_index()
    verdict = find_crossover(curves)
    noise = noise_phrase(size_verdicts(cpu_rows, gpu_rows)) if (
        not cpu_rows.empty and not gpu_rows.empty) else ""
    both = curves.dropna()
    largest = both.iloc[-1] if not both.empty else None
    return {"excluded": excluded_cases(pd.concat([cpu_rows, gpu_rows])), "kind": verdict.kind,
            "size": verdict.size, "sizes_compared": verdict.sizes_compared,
            "verdict": verdict, "noise": noise, "has_cpu": cpu_rows["valid"].any(),
            "has_gpu": gpu_rows["valid"].any(),
            "largest_size": None if largest is None else largest["size"],
            "speedup_at_largest": None if largest is None else largest["cpu_s"] / largest["gpu_s"]}


def excluded_cases(rows: pd.DataFrame) -> list[str]:
    """'<framework> <device> <status> at <size>: <reason>' for every case not compared (a
    case_stats frame's invalid rows); the report's warnings use the same words."""
    failed = rows[~rows["valid"]]
    return [f"{row['framework']} {row['device']} {row['status']}"
            + (f" at {row['size_label']}" if row["size_label"] else "")
            + (f": {' '.join(str(row['reason']).split())[:160]}" if row["reason"] else "")
            for _, row in failed.iterrows()]


# --- the per-size noise verdicts ---------------------------------------------------------------

def size_verdicts(cpu_rows: pd.DataFrame, gpu_rows: pd.DataFrame) -> list[GapVerdict]:
    """At each size both devices measured: the GPU-vs-CPU gap between the fastest cell of
    each, judged by the one noise rule (harness.analysis.noise: IQRs and round medians)."""
    cpu_best, gpu_best = (_keyed_by_size(rows).sort_values("median_s")
                          .drop_duplicates("_size").set_index("_size")
                          for rows in (cpu_rows, gpu_rows))
    return [judge_gap(row_noise(cpu_best.loc[size]), row_noise(gpu_best.loc[size]))
            for size in sorted(set(cpu_best.index) & set(gpu_best.index))]


def row_noise(row: pd.Series) -> CaseNoise:
    """One case_stats row as the noise rule reads it (casetable.CaseRow.noise)."""
    return CaseRow.of(row).noise


def noise_phrase(verdicts: list[GapVerdict]) -> str:
    """' (the faster device beyond the noise at 4 of 5 sizes; held in every round at 4)'."""
    if not verdicts:
        return ""
    beyond = sum(verdict.significant for verdict in verdicts)
    text = f"the faster device beyond the noise at {beyond} of {len(verdicts)} sizes"
    rounds = max(verdict.rounds for verdict in verdicts)
    if rounds < 2:
        return f" ({text}; {ONE_ROUND})"
    every = sum(verdict.held == verdict.rounds for verdict in verdicts)
    return f" ({text}; held in all {rounds} rounds at {every} of {len(verdicts)})"


# --- the predicted crossover (harness.analysis.costmodel) ------------------------------------

def sweep_points(cases: pd.DataFrame) -> list[CaseRow]:
    """One device's measured curve as the predictor reads it: its valid sizes' rows, by size."""
    valid = cases[cases["valid"] & cases["size_value"].notna()].sort_values("size_value")
    return [CaseRow.of(record) for record in valid.to_dict("records")]


def predicted(cpu_rows: pd.DataFrame, gpu_rows: pd.DataFrame) -> CrossoverPrediction | None:
    """The framework's predicted crossover, or None where a device has under two sizes."""
    cpu_points, gpu_points = sweep_points(cpu_rows), sweep_points(gpu_rows)
    if len(cpu_points) < 2 or len(gpu_points) < 2:
        return None
    return predict_curves(cpu_points, gpu_points)


def predict_curves(cpu_points: list[CaseRow], gpu_points: list[CaseRow]) -> CrossoverPrediction:
    """harness.analysis.costmodel.predict_crossover, the CPU's points given the GPU's launch
    counts."""
    return predict_crossover(with_gpu_launches(cpu_points, gpu_points), gpu_points)


def with_gpu_launches(cpu_points: list[CaseRow], gpu_points: list[CaseRow]) -> list[CaseRow]:
    """The CPU's points, each with the GPU's launch count at its size where every size has one.

    The same program dispatches the same ops on either device: the GPU profile's launch count
    is the CPU cell's op count too (eager frameworks pay a dispatch per op there).
    """
    launches = {point.size_value: point.launches_per_call for point in gpu_points
                if point.launches_per_call}
    if all(point.size_value in launches for point in cpu_points):
        return [replace(point, launches_per_call=launches[point.size_value])
                for point in cpu_points]
    return cpu_points


def _best_prediction(rows: list[dict[str, object]],
                     gpu: pd.DataFrame) -> tuple[CrossoverPrediction | None, str]:
    """For the best-vs-best line: the prediction of the framework fastest on the GPU at the
    largest size, since the best curves mix frameworks whose costs a model cannot mix."""
    valid = gpu[gpu["valid"] & gpu["size_value"].notna()]
    if valid.empty:
        return None, ""
    largest = valid[valid["size_value"] == valid["size_value"].max()]
    fastest = str(largest.sort_values("call_median_s")["framework"].iloc[0])
    for row in rows:
        prediction = row.get("prediction")
        if row.get("framework") == fastest and isinstance(prediction, CrossoverPrediction):
            return prediction, fastest
    return None, ""


class PredictionRecord(TypedDict):
    """One predicted crossover of a framework and variant, as run.json stores it (plain JSON)."""

    machine: str
    variant: str
    framework: str
    sweep: str
    kind: str
    size: float | None
    extrapolated: bool
    held_out_error: float | None
    sizes_used: int
    caveats: list[str]
    measured: str  # the measured verdict's kind
    measured_size: float | None
    text: str


def prediction_records(table: pd.DataFrame, sweep: str) -> list[PredictionRecord]:
    """The predictions of one experiment's `crossovers` table as run.json stores them.

    Plain JSON values only (NaN as None, no numpy scalars), so a stored list read back
    compares equal to a recomputed one and an unchanged run.json is not written again.
    """
    records: list[PredictionRecord] = []
    for _, row in table.iterrows():
        prediction = row.get("prediction")
        if row["framework"] == "best" or not isinstance(prediction, CrossoverPrediction) \
                or pd.isna(row["variant"]):
            continue
        records.append({
            "machine": str(row["machine"]), "variant": str(row["variant"]),
            "framework": str(row["framework"]), "sweep": sweep, "kind": prediction.kind,
            "size": _plain(prediction.size), "extrapolated": bool(prediction.extrapolated),
            "held_out_error": _plain(prediction.held_out_error),
            "sizes_used": int(prediction.sizes_used), "caveats": list(prediction.caveats),
            "measured": str(row["kind"]), "measured_size": _plain(row["size"]),
            "text": prediction.text(sweep)})
    return records


def experiment_predictions(experiment: str, table: pd.DataFrame) -> list[dict[str, Any]]:
    """prediction_records of one experiment's table, each named by its experiment: one entry
    of RunDocument.predictions."""
    if table.empty:
        return []
    sweep = str(table["sweep"].iloc[0])
    return [{"experiment": experiment, **record} for record in prediction_records(table, sweep)]


def run_predictions(document: RunDocument, measurements: pd.DataFrame,
                    run_id: str) -> list[dict[str, Any]]:
    """The predicted crossovers of one run as run.json stores them, from the run itself: its
    document and its measurements (harness.data.measurements: read from its folder, or made
    from the rows a run holds in memory as it ends). The same case table and the same
    analysis as the report's crossover view, so a stored prediction is what any report of the
    run says; the report's optional-view hints are the only hints not read, and the crossover
    reads none of them."""
    stats = casetable.run_table(document, measurements, run_id)
    hints = {**DEFAULT_HINTS, **document.hints}
    return [record for name in dict.fromkeys(stats["experiment"])
            for record in experiment_predictions(name, crossovers(
                stats[stats["experiment"] == name].reset_index(drop=True), hints))]


def _plain(value: Any) -> float | None:
    """A float JSON keeps as written: None for a missing or not-finite number."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


# --- why the GPU loses at small sizes -------------------------------------------------------

def flat_time_below_crossover(stats: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """GPU lines whose time stays ~flat while the work grows, where the CPU is faster.

    A GPU call that takes about the same time for 8x the work is paying a fixed per-call cost
    (kernel launch, synchronisation, framework dispatch), not compute.
    """
    rows = []
    for _, verdict in verdicts[verdicts["framework"] != "best"].iterrows():
        if verdict["kind"] not in ("crossover", "cpu-always", "mixed"):
            continue
        flat = _flat_run(_gpu_below(stats, verdict))
        if flat is not None:
            rows.append({"experiment": verdict["experiment"], "machine": verdict["machine"],
                         "variant": verdict["variant"], "framework": verdict["framework"],
                         "sweep": verdict["sweep"], **flat})
    return pd.DataFrame(rows)


def _gpu_below(stats: pd.DataFrame, verdict: pd.Series) -> pd.DataFrame:
    """The verdict's framework's valid swept GPU cases, below its crossover where it has one."""
    gpu = stats[(stats["experiment"] == verdict["experiment"])
                & (stats["machine"] == verdict["machine"])
                & (stats["variant"] == verdict["variant"])
                & (stats["framework"] == verdict["framework"])
                & (stats["device_kind"] == "gpu") & stats["valid"]
                & stats["size_value"].notna()].sort_values("size_value")
    if verdict["kind"] == "crossover":
        gpu = gpu[gpu["size_value"] < verdict["size"]]
    return gpu


class FlatRun(TypedDict):
    """A GPU line's flat stretch: sizes it spans, its time level and how work and time grew."""

    from_size: float
    to_size: float
    level_s: float
    work_growth: float
    time_growth: float


def _flat_run(gpu: pd.DataFrame) -> FlatRun | None:
    """From, to, level and growths where the work grows FLAT_WORK_GROWTH-fold or more while
    the time grows under FLAT_TIME_GROWTH; None otherwise."""
    if len(gpu) < 2:
        return None
    work = gpu["flops"].where(gpu["flops"] > 0, gpu["bytes"])
    work = work.where(work > 0, gpu["size_value"])
    work_growth = work.iloc[-1] / work.iloc[0]
    time_growth = gpu["median_s"].max() / gpu["median_s"].min()
    if not (work_growth >= FLAT_WORK_GROWTH and time_growth < FLAT_TIME_GROWTH):
        return None
    return {"from_size": gpu["size_value"].iloc[0], "to_size": gpu["size_value"].iloc[-1],
            "level_s": float(gpu["median_s"].median()), "work_growth": float(work_growth),
            "time_growth": float(time_growth)}

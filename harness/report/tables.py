"""Tidy tables and verdicts computed from measurements: pure pandas, no drawing, no files.

Every figure and every sentence of summary.md is drawn from a table made here, so the verdicts
(where the GPU overtakes the CPU, which cell is fastest, whether a gap is beyond the noise) can be
unit-tested on synthetic measurements whose answer is known.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import numpy as np
import pandas as pd

from harness.core.units import (
    device_kind,
    format_size,
)
from harness.analysis.plausibility import (
    bandwidth_limits,
    device_entry,
    flop_limits,
    judge_case,
    precision_of,
)
from harness.spec import Status, worst_status_name
from harness.data.results import NOISY_IQR_FRACTION, sample_stats

CELL_KEYS = ["experiment", "machine", "variant", "framework", "device"]
CASE_KEYS = [*CELL_KEYS, "size_label"]
# "Flat" per-call time: the work grows by at least this factor while time less than doubles.
FLAT_WORK_GROWTH = 8.0
FLAT_TIME_GROWTH = 2.0


# --- preparing the raw rows -------------------------------------------------------------------

def _comparable(name: str, value: Any) -> Any:
    """A parameter value as compared between runs: data paths by file name only.

    Why: the same MNIST file lives at different absolute paths on a laptop and a GPU server.
    """
    if name == "data" and isinstance(value, str) and value:
        return PurePath(value).name
    return value


def param_signature(params: dict[str, Any], sweep: str) -> str:
    """The workload parameters that define the experiment: all but the swept one."""
    kept = {name: _comparable(name, value) for name, value in params.items() if name != sweep}
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


def _differing_params(signatures: list[dict[str, Any]]) -> list[str]:
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
    latest_case = case_rows.groupby(CASE_KEYS)["run_rank"].transform("max")
    keep_case = case_rows["run_rank"] == latest_case
    cell_latest = frame.groupby(CELL_KEYS)["run_rank"].transform("max")
    keep_cell = frame["cell_level"] & (frame["run_rank"] == cell_latest)
    dropped = case_rows[~keep_case]
    if not dropped.empty:
        repeated = dropped.drop_duplicates(CASE_KEYS)
        notes.append(f"{len(repeated)} case(s) were measured in several runs on the same machine; "
                     "the latest run's samples are shown.")
    kept = pd.concat([case_rows[keep_case], frame[keep_cell]]).sort_index()
    return kept, notes


# --- one row per case and per cell ------------------------------------------------------------

def worst(statuses: pd.Series) -> str:
    """The most severe status among the rows (unknown names rank as errors)."""
    return worst_status_name(statuses)


def _first_text(values: pd.Series) -> str:
    return next((value for value in values if isinstance(value, str) and value), "")


def case_stats(prepared: pd.DataFrame) -> pd.DataFrame:
    """One row per case: status, median / quartiles of warm samples (per step), cold call, work.

    Quartiles use linear interpolation, the same 'inclusive' method as harness.measure.timing.iqr.
    """
    cases = prepared[~prepared["cell_level"]]
    if "suspect" not in cases:  # frames from before the timing guard existed
        cases = cases.assign(suspect="")
    cases = cases.assign(suspect=cases["suspect"].fillna("").astype(str))
    keys = [*CASE_KEYS, "workload", "device_kind", "stem"]
    info = cases.groupby(keys, sort=False).agg(
        status=("status", worst), reason=("reason", _first_text),
        framework_version=("framework_version", _first_text),
        device_name=("device_name", _first_text), sweep=("sweep", _first_text),
        size=("size", "first"), flops=("flops", "max"), bytes=("bytes", "max"),
        steps_per_call=("steps_per_call", "max"), check_passed=("check_passed", "first"),
        check_metric=("check_metric", _first_text), check_value=("check_value", "max"),
        run_id=("run_id", "first"), suspect=("suspect", _first_text),
    )
    warm = cases[cases["phase"] == "warm"].groupby(keys, sort=False)
    timing = warm.apply(_warm_stats, include_groups=False)
    if timing.empty:  # no warm samples anywhere (only failed or unavailable cells)
        timing = pd.DataFrame(columns=WARM_COLUMNS, dtype=float,
                              index=pd.MultiIndex.from_tuples([], names=keys))
    cold = cases[cases["phase"] == "cold"].groupby(keys, sort=False)
    timing["cold_s"] = cold["time_s"].first()
    timing["cold_call_s"] = cold["seconds"].first()
    stats = info.join(timing, how="left").reset_index()
    stats["samples"] = stats["samples"].fillna(0).astype(int)
    stats["iqr_s"] = stats["q3_s"] - stats["q1_s"]
    stats["noise"] = stats["iqr_s"] / stats["median_s"]
    stats["noisy"] = (stats["samples"] >= 2) & (stats["noise"] > NOISY_IQR_FRACTION)
    stats["valid"] = (stats["status"] == Status.OK.value) & stats["median_s"].notna()
    stats["size_value"] = pd.to_numeric(stats["size_label"], errors="coerce")
    stats["gflops"] = stats["flops"] / stats["call_median_s"] / 1e9
    stats["gbps"] = stats["bytes"] / stats["call_median_s"] / 1e9
    return stats


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


def cell_status(prepared: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: its worst status and the reason that goes with it."""
    rows = []
    for key, group in prepared.groupby(CELL_KEYS, sort=False):
        status = worst(group["status"])
        reason = _first_text(group.loc[group["status"] == status, "reason"])
        rows.append({**dict(zip(CELL_KEYS, key)), "status": status, "reason": reason,
                     "workload": group["workload"].iloc[0], "stem": group["stem"].iloc[0],
                     "device_kind": group["device_kind"].iloc[0],
                     "framework_version": _first_text(group["framework_version"]),
                     "device_name": _first_text(group["device_name"])})
    return pd.DataFrame(rows, columns=[*CELL_KEYS, "status", "reason", "workload", "stem",
                                       "device_kind", "framework_version", "device_name"])


def time_unit(stats: pd.DataFrame) -> str:
    """'step' when the workload's calls are epochs of several steps, else 'call'."""
    return "step" if (stats["steps_per_call"] > 1).any() else "call"


def sort_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """Frameworks in the order the runs list them, cpu before gpu."""
    order = {name: index for index, name in enumerate(dict.fromkeys(frame["framework"]))}
    machines = {name: index for index, name in enumerate(dict.fromkeys(frame["machine"]))} \
        if "machine" in frame else {}
    return frame.assign(
        _machine=frame["machine"].map(machines) if machines else 0,
        _fw=frame["framework"].map(lambda name: order.get(name, len(order))),
        _dev=frame["device"].map(lambda name: (device_kind(name) == "gpu", name)),
    ).sort_values(["_machine", "_fw", "framework", "_dev"], kind="stable").drop(
        columns=["_machine", "_fw", "_dev"])


# --- verdicts ---------------------------------------------------------------------------------

def iqrs_overlap(q1_a: float, q3_a: float, q1_b: float, q3_b: float) -> bool:
    """Whether two [q1, q3] ranges overlap; a gap counts as real only when they do not."""
    return not (q3_a < q1_b or q3_b < q1_a)


MIN_SAMPLES_TO_JUDGE = 3


def gap_significance(best: pd.Series, second: pd.Series) -> dict[str, bool]:
    """Whether a gap between two cases is beyond their noise: the IQRs do not overlap.

    With fewer than 3 samples on either side an IQR says nothing (one sample has IQR 0), so
    the gap is not judged at all rather than called significant.
    """
    judged = min(best["samples"], second["samples"]) >= MIN_SAMPLES_TO_JUDGE
    apart = not iqrs_overlap(best["q1_s"], best["q3_s"], second["q1_s"], second["q3_s"])
    return {"judged": bool(judged), "significant": bool(judged and apart)}


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


def _curve(stats: pd.DataFrame) -> pd.Series:
    """size -> median for valid cases, the fastest row per size.

    A case outside the sweep (size_label "", e.g. the transfer workload's fixed 200x200
    matmul) counts as one point at size 0, so CPU and GPU still compare there.
    """
    valid = stats[stats["valid"]]
    fixed = valid["size_label"] == ""
    valid = valid[valid["size_value"].notna() | fixed]
    return valid.groupby(valid["size_value"].where(~fixed, 0.0))["median_s"].min()


def crossovers(stats: pd.DataFrame, hints: dict[str, Any] | None = None) -> pd.DataFrame:
    """GPU vs CPU verdicts per experiment, machine and variant.

    Pairs: the best GPU cell vs the best CPU cell at each size ('best'), and each framework's
    GPU cell vs its own CPU cell. A device-only variant (tf32, pinned copies) has no CPU cell of
    its own, and a variant the workload names in `cpu_baseline_any_variant` asks "GPU this way
    vs the best CPU way" (seed 4: copies on the GPU vs numpy): both are compared with the CPU
    cells of every variant on that machine. Sizes where a cell failed are not compared; the
    pair lists them in `excluded` so the summary can say why there is no verdict there.
    """
    any_variant = set((hints or {}).get("cpu_baseline_any_variant") or [])
    rows = []
    for (experiment, machine, variant), group in stats.groupby(
            ["experiment", "machine", "variant"], sort=False):
        machine_rows = stats[(stats["experiment"] == experiment) & (stats["machine"] == machine)]
        own_cpu = (group["device_kind"] == "cpu").any() and variant not in any_variant
        cpu_pool = group if own_cpu else machine_rows
        gpu = group[group["device_kind"] == "gpu"]
        cpu = cpu_pool[cpu_pool["device_kind"] == "cpu"]
        sweep = _first_text(group["sweep"])
        base = {"experiment": experiment, "machine": machine, "variant": variant, "sweep": sweep,
                "cpu_is_other_variant": cpu_pool is machine_rows}
        rows.append({**base, "framework": "best", **_pair(_curve(cpu), _curve(gpu), cpu, gpu)})
        for framework, gpu_fw in gpu.groupby("framework", sort=False):
            cpu_fw = cpu[cpu["framework"] == framework]
            rows.append({**base, "framework": framework,
                         **_pair(_curve(cpu_fw), _curve(gpu_fw), cpu_fw, gpu_fw)})
    return pd.DataFrame(rows)


def _pair(cpu: pd.Series, gpu: pd.Series, cpu_rows: pd.DataFrame,
          gpu_rows: pd.DataFrame) -> dict[str, Any]:
    curves = pd.DataFrame({"cpu_s": cpu, "gpu_s": gpu}).rename_axis("size").reset_index()
    verdict = find_crossover(curves)
    both = curves.dropna()
    largest = both.iloc[-1] if not both.empty else None
    return {"excluded": excluded_cases(pd.concat([cpu_rows, gpu_rows])), "kind": verdict.kind,
            "size": verdict.size, "sizes_compared": verdict.sizes_compared,
            "verdict": verdict, "has_cpu": cpu_rows["valid"].any(),
            "has_gpu": gpu_rows["valid"].any(),
            "largest_size": None if largest is None else largest["size"],
            "speedup_at_largest": None if largest is None else largest["cpu_s"] / largest["gpu_s"]}


def excluded_cases(rows: pd.DataFrame) -> list[str]:
    """'torch cuda:0 invalid at 8192: reason' for every case that could not be compared."""
    failed = rows[~rows["valid"]]
    return [f"{row['framework']} {row['device']} {row['status']}"
            + (f" at {row['size_label']}" if row["size_label"] else "")
            + (f": {' '.join(str(row['reason']).split())[:160]}" if row["reason"] else "")
            for _, row in failed.iterrows()]


def headline_sizes(stats: pd.DataFrame) -> pd.DataFrame:
    """Per experiment, machine and variant: the size at which its cells are compared.

    Preference order: the experiment-wide size that the most cells (any machine, any variant)
    measured validly, ties to the largest, so merged machines and variants compare at one
    size; else the machine's such size; else the variant's own (e.g. the transfer workload's
    buffer sweep vs its fixed-size matmul). Why not simply the largest: comparing cells at a
    size only some of them reached would compare different work.
    """
    rows = []
    for experiment, in_experiment in stats.groupby("experiment", sort=False):
        common = _most_measured_size(in_experiment)
        for machine, on_machine in in_experiment.groupby("machine", sort=False):
            machine_size = _most_measured_size(on_machine)
            for variant, own in on_machine.groupby("variant", sort=False):
                measured = set(own.loc[own["valid"], "size_label"])
                size = next((candidate for candidate in (common, machine_size)
                             if candidate in measured), None)
                rows.append({"experiment": experiment, "machine": machine, "variant": variant,
                             "size_label": size if size is not None
                             else _most_measured_size(own)})
    return pd.DataFrame(rows, columns=["experiment", "machine", "variant", "size_label"])


def _most_measured_size(group: pd.DataFrame) -> str:
    valid = group[group["valid"]]
    pool = valid if not valid.empty else group
    counts = pool.drop_duplicates(["size_label", "variant", "framework", "device"]).groupby(
        "size_label").size().rename("cells").reset_index()
    counts["order"] = pd.to_numeric(counts["size_label"], errors="coerce").fillna(-math.inf)
    return str(counts.sort_values(["cells", "order"]).iloc[-1]["size_label"])


def overview_table(stats: pd.DataFrame, cells: pd.DataFrame,
                   headline: pd.DataFrame) -> pd.DataFrame:
    """One row per cell at its variant's headline size: the time, or why there is none.

    Cells that never ran on a machine where the same framework and device ran elsewhere appear
    as 'not run', so an interrupted run shows its holes.
    """
    rows = []
    for (experiment, machine, variant), group in cells.groupby(
            ["experiment", "machine", "variant"], sort=False):
        size = _headline(headline, experiment, machine, variant)
        machine_cells = cells[(cells["experiment"] == experiment) & (cells["machine"] == machine)]
        grid = machine_cells[["framework", "device"]].drop_duplicates()
        for framework, device in grid.itertuples(index=False):
            rows.append(_overview_row(stats, group, experiment, machine, variant, framework,
                                      device, size))
    frame = pd.DataFrame(rows)
    return sort_cells(frame) if not frame.empty else frame


def _headline(headline: pd.DataFrame, experiment: str, machine: str, variant: str) -> str:
    match = headline[(headline["experiment"] == experiment) & (headline["machine"] == machine)
                     & (headline["variant"] == variant)]
    return match["size_label"].iloc[0] if not match.empty else ""


def _overview_row(stats: pd.DataFrame, cells: pd.DataFrame, experiment: str, machine: str,
                  variant: str, framework: str, device: str, size: str) -> dict[str, Any]:
    base = {"experiment": experiment, "machine": machine, "variant": variant,
            "framework": framework, "device": device, "device_kind": device_kind(device),
            "size_label": size}
    case = stats[(stats["experiment"] == experiment) & (stats["machine"] == machine)
                 & (stats["variant"] == variant) & (stats["framework"] == framework)
                 & (stats["device"] == device) & (stats["size_label"] == size)]
    if not case.empty:
        row = case.iloc[0]
        shown = bool(row["valid"])
        return {**base, "status": row["status"], "reason": row["reason"], "shown": shown,
                "median_s": row["median_s"] if shown else math.nan,
                "q1_s": row["q1_s"] if shown else math.nan,
                "q3_s": row["q3_s"] if shown else math.nan, "noisy": bool(row["noisy"])}
    cell = cells[(cells["framework"] == framework) & (cells["device"] == device)]
    if cell.empty:
        status, reason = "not run", "no result for this cell in the run folder(s)"
    else:
        status, reason = cell["status"].iloc[0], cell["reason"].iloc[0]
        if status == Status.OK.value:
            status, reason = "not run", f"not measured at this size ({size})"
    return {**base, "status": status, "reason": reason, "shown": False, "median_s": math.nan,
            "q1_s": math.nan, "q3_s": math.nan, "noisy": False}


def fastest_by_size(stats: pd.DataFrame) -> pd.DataFrame:
    """Per experiment, machine, variant and size: the fastest valid cell, the runner-up, the gap.

    Cells compete within one variant (same code, same precision), so the answer is a choice of
    framework and device; variants are compared separately (variant_table). Groups with a
    single valid cell have nothing to compare and are left out. `significant` says whether
    the two IQRs are apart.
    """
    rows = []
    for (experiment, machine, variant, size), everyone in stats.groupby(
            ["experiment", "machine", "variant", "size_label"], sort=False):
        group = everyone[everyone["valid"]]
        excluded = excluded_cases(everyone)
        if group.empty or (len(group) < 2 and not excluded):
            continue
        ranked = group.sort_values("median_s")
        best = ranked.iloc[0]
        second = ranked.iloc[1] if len(ranked) > 1 else None
        failed_kinds = set(everyone.loc[~everyone["valid"], "device_kind"])
        rows.append({"experiment": experiment, "machine": machine, "variant": variant,
                     "size_label": size, "size_value": best["size_value"],
                     "best": _cell_name(best), "best_median_s": best["median_s"],
                     "best_iqr_s": best["iqr_s"], "cells": len(ranked),
                     "runner_up": _cell_name(second) if second is not None else "",
                     "runner_up_median_s": second["median_s"] if second is not None else math.nan,
                     "ratio": second["median_s"] / best["median_s"] if second is not None
                     else math.nan,
                     **(gap_significance(best, second) if second is not None
                        else {"judged": False, "significant": False}),
                     "excluded": excluded,
                     # A device whose every cell failed here cannot lose a race it did not run.
                     "device_verdict": not (failed_kinds - set(group["device_kind"])),
                     "suspect": [_cell_name(row) + f": {row['suspect']}"
                                 for _, row in group.iterrows() if row["suspect"]]})
    frame = pd.DataFrame(rows, columns=[
        "experiment", "machine", "variant", "size_label", "size_value", "best", "best_median_s",
        "best_iqr_s", "cells", "runner_up", "runner_up_median_s", "ratio", "judged",
        "significant", "excluded", "device_verdict", "suspect"])
    return frame.sort_values(["experiment", "machine", "variant", "size_value", "size_label"],
                             key=lambda column: column.map(_variant_rank(stats))
                             if column.name == "variant" else column)


def _variant_rank(stats: pd.DataFrame) -> dict[str, int]:
    """Variants in the order they first appear (the as-written one first)."""
    return {name: index for index, name in enumerate(dict.fromkeys(stats["variant"]))}


def _cell_name(row: pd.Series) -> str:
    return f"{row['framework']} {row['device']}"


def variant_table(stats: pd.DataFrame, headline: pd.DataFrame) -> pd.DataFrame:
    """Per framework x device at the headline size: time of each variant and the best one.

    Lets the as-written variant be compared with the best variant of the same cell.
    """
    rows = []
    for (experiment, machine, framework, device), group in stats[stats["valid"]].groupby(
            ["experiment", "machine", "framework", "device"], sort=False):
        at_size = group.merge(headline, on=["experiment", "machine", "variant", "size_label"])
        if at_size["variant"].nunique() < 2 or at_size["size_label"].nunique() > 1:
            continue
        best = at_size.sort_values("median_s").iloc[0]
        for _, row in at_size.iterrows():
            rows.append({"experiment": experiment, "machine": machine, "framework": framework,
                         "device": device, "variant": row["variant"],
                         "size_label": row["size_label"], "median_s": row["median_s"],
                         "vs_best": row["median_s"] / best["median_s"],
                         "best_variant": best["variant"]})
    return pd.DataFrame(rows)


# --- where the time goes ----------------------------------------------------------------------

def breakdown(stats: pd.DataFrame, headline: pd.DataFrame,
              overhead_pairs: list[Any] | None = None) -> pd.DataFrame:
    """Per valid cell at the headline size: compute, identified overhead, cold-call extra.

    The overhead of a paired variant (the workload's `overhead_pairs` hint: with the cost,
    without it, its name) is the difference of their medians on the same machine, framework
    and device; the cold
    extra is the first call minus a warm one (context creation, tracing, allocation).
    """
    at_headline = stats.merge(headline, on=["experiment", "machine", "variant", "size_label"])
    valid = at_headline[at_headline["valid"]].copy()
    valid["overhead_s"], valid["overhead_name"] = 0.0, ""
    for with_cost, without, name in overhead_pairs or []:
        reference = stats[stats["valid"] & (stats["variant"] == without)]
        for index, row in valid[valid["variant"] == with_cost].iterrows():
            match = reference[(reference["experiment"] == row["experiment"])
                              & (reference["machine"] == row["machine"])
                              & (reference["framework"] == row["framework"])
                              & (reference["device"] == row["device"])
                              & (reference["size_label"] == row["size_label"])]
            if match.empty:
                continue
            overhead = max(row["median_s"] - match["median_s"].iloc[0], 0.0)
            valid.loc[index, ["overhead_s", "overhead_name"]] = [overhead, name]
    valid["compute_s"] = valid["median_s"] - valid["overhead_s"]
    valid["cold_extra_s"] = (valid["cold_s"] - valid["median_s"]).clip(lower=0.0)
    valid["overhead_share"] = valid["overhead_s"] / valid["median_s"]
    valid["cold_in_warm_calls"] = valid["cold_s"] / valid["median_s"]
    columns = [*CASE_KEYS, "device_kind", "sweep", "median_s", "compute_s", "overhead_s",
               "overhead_name", "overhead_share", "cold_s", "cold_extra_s", "cold_in_warm_calls",
               "cold_call_s", "call_median_s"]
    return sort_cells(valid[columns])


# --- ratios -----------------------------------------------------------------------------------

def ratio_table(stats: pd.DataFrame) -> pd.DataFrame:
    """GPU speedup (CPU time / GPU time, same framework) and every framework pair's time ratio.

    One row per (kind, row label, size). A GPU-only variant is compared with the same
    framework's CPU cell of another variant, and the row label says which.
    """
    rows: list[dict[str, Any]] = []
    valid = stats[stats["valid"]]
    for (experiment, machine), group in valid.groupby(["experiment", "machine"], sort=False):
        rows.extend(_gpu_speedups(experiment, machine, group))
        rows.extend(_framework_ratios(experiment, machine, group))
    return pd.DataFrame(rows, columns=["experiment", "machine", "kind", "label", "size_label",
                                       "size_value", "ratio"])


def _gpu_speedups(experiment: str, machine: str, group: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    for (framework, variant, device), gpu in group[group["device_kind"] == "gpu"].groupby(
            ["framework", "variant", "device"], sort=False):
        cpu_fw = group[(group["device_kind"] == "cpu") & (group["framework"] == framework)]
        cpu = cpu_fw[cpu_fw["variant"] == variant]
        label = f"{framework} {variant}"
        if cpu.empty and not cpu_fw.empty:
            cpu_variant = cpu_fw["variant"].iloc[0]
            cpu = cpu_fw[cpu_fw["variant"] == cpu_variant]
            label += f" (vs cpu {cpu_variant})"
        if device != "cuda:0":
            label += f" {device}"
        merged = gpu.merge(cpu, on="size_label", suffixes=("_gpu", "_cpu"))
        for _, row in merged.iterrows():
            rows.append({"experiment": experiment, "machine": machine, "kind": "gpu_speedup",
                         "label": label, "size_label": row["size_label"],
                         "size_value": row["size_value_gpu"],
                         "ratio": row["median_s_cpu"] / row["median_s_gpu"]})
    return rows


def _framework_ratios(experiment: str, machine: str,
                      group: pd.DataFrame) -> list[dict[str, Any]]:
    """Time of framework A / time of framework B for every pair, same device, variant, size."""
    names = list(dict.fromkeys(group["framework"]))
    rows = []
    for position, first in enumerate(names):
        for second in names[position + 1:]:
            merged = group[group["framework"] == first].merge(
                group[group["framework"] == second], on=["variant", "device", "size_label"],
                suffixes=("_a", "_b"))
            rows += [{"experiment": experiment, "machine": machine, "kind": "framework_ratio",
                      "label": f"{first} / {second}: {row['device']} {row['variant']}",
                      "size_label": row["size_label"], "size_value": row["size_value_a"],
                      "ratio": row["median_s_a"] / row["median_s_b"]}
                     for _, row in merged.iterrows()]
    return rows


# --- every framework ranked per device --------------------------------------------------------

RANKING_COLUMNS = ["experiment", "machine", "variant", "device", "size_label", "rank",
                   "framework", "median_s", "times_best", "judged", "significant"]


def framework_ranking(stats: pd.DataFrame, headline: pd.DataFrame) -> pd.DataFrame:
    """Per experiment, machine, variant and device, at the headline size: every framework with a
    valid time, fastest first, with its time over the fastest and whether its gap to the one
    ranked just above it is beyond the noise (IQRs apart, judged from 3 samples each).
    """
    keys = ["experiment", "machine", "variant", "size_label"]
    at_headline = stats[stats["valid"]].merge(headline, on=keys)
    rows = []
    for (experiment, machine, variant, device), group in at_headline.groupby(
            ["experiment", "machine", "variant", "device"], sort=False):
        ranked = group.sort_values("median_s")
        fastest = ranked["median_s"].iloc[0]
        above = None
        for rank, (_, row) in enumerate(ranked.iterrows(), start=1):
            gap = gap_significance(above, row) if above is not None else {
                "judged": False, "significant": False}
            rows.append({"experiment": experiment, "machine": machine, "variant": variant,
                         "device": device, "size_label": row["size_label"], "rank": rank,
                         "framework": row["framework"], "median_s": row["median_s"],
                         "times_best": row["median_s"] / fastest, **gap})
            above = row
    return pd.DataFrame(rows, columns=RANKING_COLUMNS)


# --- warnings ---------------------------------------------------------------------------------

def noisy_cells(stats: pd.DataFrame) -> pd.DataFrame:
    """Noisy valid cases grouped per cell: which sizes and the worst IQR/median."""
    noisy = stats[stats["noisy"] & stats["valid"]]
    rows = []
    for key, group in noisy.groupby(CELL_KEYS, sort=False):
        ordered = group.sort_values(["size_value", "size_label"])
        rows.append({**dict(zip(CELL_KEYS, key)), "sizes": list(ordered["size_label"]),
                     "worst_noise": float(group["noise"].max()), "sweep": group["sweep"].iloc[0]})
    return pd.DataFrame(rows, columns=[*CELL_KEYS, "sizes", "worst_noise", "sweep"])


def failures(stats: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Every case or cell that is not ok, with its status and reason (invalid included)."""
    failed_cases = stats[stats["status"] != Status.OK.value][
        [*CASE_KEYS, "status", "reason"]].copy()
    covered = set(map(tuple, failed_cases[CELL_KEYS].itertuples(index=False)))
    failed_cells = cells[(cells["status"] != Status.OK.value)
                         & ~cells[CELL_KEYS].apply(tuple, axis=1).isin(covered)].copy()
    failed_cells["size_label"] = ""
    frame = pd.concat([failed_cases, failed_cells[[*CASE_KEYS, "status", "reason"]]],
                      ignore_index=True)
    return sort_cells(frame) if not frame.empty else frame


def ceiling_for(ceilings: dict[str, Any], device: str, key: str) -> float | None:
    """A device's measured byte-rate probe (bandwidth_gbps or h2d_pinned_gbps), or None."""
    return bandwidth_limits(device_entry(ceilings, device), key)[0]


def flop_ceiling(ceilings: dict[str, Any], device: str, variant: str) -> float | None:
    """The measured FLOP/s probe for a variant's precision (a bf16 matmul is never held to the
    float32 peak), or None."""
    return flop_limits(device_entry(ceilings, device), precision_of(variant))[0]


PEAK_COLUMNS = [*CASE_KEYS, "sweep", "metric", "rate", "probe", "bound", "kind", "peak",
                "fraction"]


def peak_fractions(stats: pd.DataFrame, ceilings_by_machine: dict[str, dict[str, Any]],
                   bandwidth_key: str = "bandwidth_gbps",
                   precisions: dict[str, str] | None = None) -> pd.DataFrame:
    """Each valid case's rate, judged (harness.analysis.plausibility) and as a share of the ceiling.

    The ceiling is the probe, or the best plausible rate the run itself reached when that beat
    the probe (the probe was low, and the summary says so); `kind` is ok / probe-low /
    implausible, decided against the physical bound.
    """
    rows = []
    for _, row in stats[stats["valid"]].iterrows():
        ceilings = ceilings_by_machine.get(row["machine"]) or {}
        gflops = row["gflops"] if pd.notna(row["gflops"]) else None
        gbps = row["gbps"] if pd.notna(row["gbps"]) else None
        for verdict in judge_case(gflops, gbps, row["variant"], row["device"], ceilings,
                                  bandwidth_key, precisions):
            if verdict.kind != "unknown":
                rows.append({**{k: row[k] for k in CASE_KEYS}, "sweep": row["sweep"],
                             "metric": verdict.metric, "rate": verdict.rate,
                             "probe": verdict.probe, "bound": verdict.bound,
                             "kind": verdict.kind,
                             "precision": precision_of(row["variant"], precisions)})
    frame = pd.DataFrame(rows, columns=[*PEAK_COLUMNS[:-2], "precision"])
    if frame.empty:
        return frame.reindex(columns=PEAK_COLUMNS)
    plausible = frame["rate"].where(frame["kind"] != "implausible")
    best_plausible = plausible.groupby([frame["machine"], frame["device"], frame["metric"],
                                        frame["precision"]]).transform("max")
    frame["peak"] = np.fmax(frame["probe"].astype(float), best_plausible.astype(float))
    frame["fraction"] = frame["rate"] / frame["peak"]
    return frame.drop(columns=["precision"])


# --- explanations -----------------------------------------------------------------------------

def flat_time_below_crossover(stats: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """GPU lines whose time stays ~flat while the work grows, where the CPU is faster.

    A GPU call that takes about the same time for 8x the work is paying a fixed per-call cost
    (kernel launch, synchronisation, framework dispatch), not compute.
    """
    rows = []
    for _, verdict in verdicts[verdicts["framework"] != "best"].iterrows():
        if verdict["kind"] not in ("crossover", "cpu-always", "mixed"):
            continue
        gpu = stats[(stats["experiment"] == verdict["experiment"])
                    & (stats["machine"] == verdict["machine"])
                    & (stats["variant"] == verdict["variant"])
                    & (stats["framework"] == verdict["framework"])
                    & (stats["device_kind"] == "gpu") & stats["valid"]
                    & stats["size_value"].notna()].sort_values("size_value")
        if verdict["kind"] == "crossover":
            gpu = gpu[gpu["size_value"] < verdict["size"]]
        flat = _flat_run(gpu)
        if flat is not None:
            rows.append({"experiment": verdict["experiment"], "machine": verdict["machine"],
                         "variant": verdict["variant"], "framework": verdict["framework"],
                         "sweep": verdict["sweep"], **flat})
    return pd.DataFrame(rows)


def _flat_run(gpu: pd.DataFrame) -> dict[str, Any] | None:
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


# --- epochs ------------------------------------------------------------------------------------

def epoch_times(prepared: pd.DataFrame, headline: pd.DataFrame) -> pd.DataFrame:
    """Seconds per epoch by epoch number at the headline batch size (epoch 1 = the cold call).

    Only for per-epoch workloads (steps_per_call > 1) and cases whose time can be trusted.
    """
    rows = prepared[~prepared["cell_level"] & prepared["phase"].isin(["cold", "warm", "epoch"])
                    & (prepared["steps_per_call"] > 1) & (prepared["status"] == "ok")]
    rows = rows.merge(headline, on=["experiment", "machine", "variant", "size_label"])
    # A case timed in blocks of steps keeps its whole epochs as "epoch" rows (sample = epoch
    # number); its warm rows are blocks, not epochs.
    blocked = rows.groupby(CASE_KEYS)["phase"].transform(lambda phase: (phase == "epoch").any())
    rows = rows[(rows["phase"] == "epoch") == blocked]
    frame = rows[[*CASE_KEYS, "device_kind", "phase", "sample", "seconds"]].copy()
    # per_call timing: the cold call is epoch 1 and warm sample k is epoch k + 1.
    frame["epoch"] = np.where(frame["phase"] == "cold", 1, frame["sample"].fillna(0) + 1)
    frame["epoch"] = frame["epoch"].where(frame["phase"] != "epoch", frame["sample"])
    return frame.sort_values([*CASE_KEYS, "epoch"])


def accuracy_table(stats: pd.DataFrame, extras: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per case: run.json's extra.accuracy, else the accuracy check's value."""
    keyed = extras.drop_duplicates(["run_id", "variant", "framework", "device", "size_label"])
    merged = stats.merge(keyed[["run_id", "variant", "framework", "device", "size_label",
                                "accuracy", "data_source", "samples_distinct"]],
                         on=["run_id", "variant", "framework", "device", "size_label"],
                         how="left")
    from_check = merged["check_value"].where(
        merged["check_metric"].str.contains("accuracy", na=False))
    merged["accuracy"] = merged["accuracy"].fillna(from_check)
    has = merged["accuracy"].notna()
    columns = [*CASE_KEYS, "device_kind", "status", "accuracy", "data_source", "samples_distinct",
               "check_passed"]
    return sort_cells(merged.loc[has, columns])


# --- formatting shared by figures and summary --------------------------------------------------


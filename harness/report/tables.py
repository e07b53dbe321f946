"""The report's shared tables beyond the case table: pure pandas, no drawing, no files.

The case table itself (experiments, prepared samples, one row per case and per cell) is
harness.analysis.casetable, below the report, since crossover, predict, advice and the audit
read it too. Here: the order cells are shown in, the noise rule between two cases as the views
phrase it, the headline size of each comparison, and each case's rate against the machine's
ceilings. What one view alone shows is computed in that view's module (harness/report/views/).
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from harness.analysis.crossover import row_noise
from harness.analysis.noise import MIN_SAMPLES as NOISE_MIN_SAMPLES
from harness.analysis.noise import GapVerdict, judge_gap
from harness.analysis.plausibility import (
    bandwidth_limits,
    device_entry,
    flop_limits,
    judge_case,
    precision_of,
)
from harness.core.units import device_kind
from harness.data.casekey import CASE_COLUMNS
from harness.data.ceilings import MEMORY, Ceilings


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


# --- comparing two cases ----------------------------------------------------------------------

MIN_SAMPLES_TO_JUDGE = NOISE_MIN_SAMPLES


def gap_verdict(best: pd.Series, second: pd.Series) -> GapVerdict:
    """harness.analysis.noise.judge_gap of two case_stats rows."""
    return judge_gap(row_noise(best), row_noise(second))


class GapSignificance(TypedDict):
    """gap_significance's columns, spread into a view's table row."""

    judged: bool
    significant: bool
    held: int
    rounds: int
    noise: str
    noise_short: str


def gap_significance(best: pd.Series, second: pd.Series) -> GapSignificance:
    """Whether a gap between two cases is beyond their noise (harness.analysis.noise: the IQRs
    and the round medians both apart), and the phrase that says so.

    With fewer than 3 samples on either side an IQR says nothing (one sample has IQR 0), so
    the gap is not judged at all rather than called significant.
    """
    verdict = gap_verdict(best, second)
    return {"judged": verdict.judged, "significant": verdict.significant,
            "held": verdict.held, "rounds": verdict.rounds, "noise": verdict.phrase(),
            "noise_short": verdict.short()}


# What a headline size is chosen per (headline_sizes) and a table is joined to it on.
HEADLINE_KEYS = ["experiment", "machine", "variant", "size_label"]


def at_headline(table: pd.DataFrame, headline: pd.DataFrame) -> pd.DataFrame:
    """TABLE's rows at their (experiment, machine, variant)'s headline size."""
    if table.empty:
        return table
    return table.merge(headline, on=HEADLINE_KEYS)


def headline_sizes(stats: pd.DataFrame) -> pd.DataFrame:
    """Per experiment, machine and variant: the size at which its cells are compared.

    Preference order: the experiment-wide size that the most cells (any machine, any variant)
    measured validly, ties to the largest, so merged machines and variants compare at one
    size; else the machine's such size; else the variant's own (e.g. a variant that sweeps
    buffer sizes beside one that runs a single fixed case). Why not simply the largest:
    comparing cells at a size only some of them reached would compare different work.
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
    return pd.DataFrame(rows, columns=HEADLINE_KEYS)


def _most_measured_size(group: pd.DataFrame) -> str:
    valid = group[group["valid"]]
    pool = valid if not valid.empty else group
    counts = pool.drop_duplicates(["size_label", "variant", "framework", "device"]).groupby(
        "size_label").size().rename("cells").reset_index()
    counts["order"] = pd.to_numeric(counts["size_label"], errors="coerce").fillna(-math.inf)
    return str(counts.sort_values(["cells", "order"]).iloc[-1]["size_label"])


# --- per-epoch workloads ---------------------------------------------------------------------

# --- rates against the machine's ceilings -----------------------------------------------------

def ceiling_for(ceilings: Ceilings | None, device: str, key: str) -> float | None:
    """A device's measured byte-rate probe (bandwidth_gbps or h2d_pinned_gbps), or None."""
    return bandwidth_limits(device_entry(ceilings, device), key)[0]


def flop_ceiling(ceilings: Ceilings | None, device: str, variant: str) -> float | None:
    """The measured FLOP/s probe for a variant's precision (bfloat16 work is never held to the
    float32 peak), or None."""
    return flop_limits(device_entry(ceilings, device), precision_of(variant))[0]


PEAK_COLUMNS = [*CASE_COLUMNS, "sweep", "metric", "rate", "probe", "bound", "kind", "peak",
                "fraction"]


def peak_fractions(stats: pd.DataFrame, ceilings_by_machine: dict[str, Ceilings],
                   bandwidth_key: str = MEMORY,
                   precisions: dict[str, str] | None = None) -> pd.DataFrame:
    """Each valid case's rate, judged (harness.analysis.plausibility) and as a share of the ceiling.

    The ceiling is the probe, or the best plausible rate the run itself reached when that beat
    the probe (the probe was low, and the summary says so); `kind` is ok / probe-low /
    implausible, decided against the physical bound.
    """
    rows = []
    for _, row in stats[stats["valid"]].iterrows():
        ceilings = ceilings_by_machine.get(row["machine"])
        gflops = row["gflops"] if pd.notna(row["gflops"]) else None
        gbps = row["gbps"] if pd.notna(row["gbps"]) else None
        partial = bool(row.get("flops_gaps")) if "flops_gaps" in row else False
        disputed = isinstance(row.get("flops_disputed"), str) and bool(row["flops_disputed"])
        for verdict in judge_case(gflops, gbps, row["variant"], row["device"], ceilings,
                                  bandwidth_key, precisions):
            # A lower bound above physics is still implausible; below it, it is no share of
            # the peak (the count missed ops): such rows are left out of the shares. A count
            # its second opinion disputes makes no share at all, nor a verdict on physics (the
            # warnings say it is disputed, and by whom).
            flop_rate = verdict.metric == "GFLOP/s"
            if verdict.kind != "unknown" and not (flop_rate and (disputed or (
                    partial and verdict.kind != "implausible"))):
                rows.append({**{k: row[k] for k in CASE_COLUMNS}, "sweep": row["sweep"],
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


def experiment_peaks(context: Any) -> pd.DataFrame:
    """peak_fractions of one experiment (an ExperimentContext), with its workload's hints."""
    return peak_fractions(context.stats, context.ceilings, context.hints["bandwidth_ceiling"],
                          context.hints.get("variant_precision"))

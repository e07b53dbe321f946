"""Framework verdict: every framework ranked per device at the headline size.

Table: per experiment, machine, variant and device, every framework with a valid time, fastest
first, with its time over the fastest and whether its gap to the one ranked above is beyond
the noise. Lines: one ranked list per (machine, variant, device), where two or more frameworks
ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.units import format_ratio, format_seconds
from harness.report.summary import size_phrase
from harness.report.tables import (
    MIN_SAMPLES_TO_JUDGE,
    GapSignificance,
    gap_significance,
)
from harness.report.views import View


class RankingView(View):
    """Every framework ranked on each device, with the noise judged between neighbours."""

    name = "framework-ranking"
    order = 40

    def compute(self, context: Any) -> pd.DataFrame:
        ranking = framework_ranking(context.stats, context.headline)
        # One framework is no ranking.
        return ranking if ranking["framework"].nunique() >= 2 else ranking.iloc[0:0]

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        return framework_verdict_section(context, table)


RANKING_COLUMNS = ["experiment", "machine", "variant", "device", "size_label", "rank",
                   "framework", "median_s", "times_best", "judged", "significant", "held",
                   "rounds", "noise"]


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
            gap: GapSignificance = gap_significance(above, row) if above is not None else {
                "judged": False, "significant": False, "held": 0, "rounds": 1, "noise": ""}
            gap.pop("noise_short", None)
            rows.append({"experiment": experiment, "machine": machine, "variant": variant,
                         "device": device, "size_label": row["size_label"], "rank": rank,
                         "framework": row["framework"], "median_s": row["median_s"],
                         "times_best": row["median_s"] / fastest, **gap})
            above = row
    return pd.DataFrame(rows, columns=RANKING_COLUMNS)


# --- summary.md -------------------------------------------------------------------------------

def framework_verdict_section(context: Any, ranking: pd.DataFrame) -> list[str]:
    """Every framework ranked on each device, one line per (machine, variant, device)."""
    if ranking.empty or ranking["framework"].nunique() < 2:
        return []
    several_machines = ranking["machine"].nunique() > 1
    lines = ["### Framework verdict: every framework ranked per device", "",
             ("Fastest first, at the headline size, same variant and device; each gap is "
              "judged against the framework ranked just above: beyond the noise when the IQRs "
              f"(from {MIN_SAMPLES_TO_JUDGE} samples each) and the ranges of the round medians "
              "are both apart."), ""]
    for (machine, variant, device), group in ranking.groupby(
            ["machine", "variant", "device"], sort=False):
        where = f"{machine}, " if several_machines else ""
        size = size_phrase(context, group["size_label"].iloc[0])
        entries = [_ranked_entry(row, context.unit) for _, row in group.iterrows()]
        lines.append(f"- **{device}**, {where}variant {variant}{size}: " + "; ".join(entries))
    return lines + [""]


def _ranked_entry(row: pd.Series, unit: str) -> str:
    text = f"{row['rank']}. {row['framework']} {format_seconds(row['median_s'])}/{unit}"
    if row["rank"] == 1:
        return text
    gap = row["noise"] or f"not judged, < {MIN_SAMPLES_TO_JUDGE} samples"
    return f"{text} ({format_ratio(row['times_best'])} the fastest; {gap} vs #{row['rank'] - 1})"

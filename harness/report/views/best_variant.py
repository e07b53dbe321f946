"""Best variant: each framework x device's variants side by side at the headline size.

Table: per framework x device with two or more variants measured at one headline size, the
time of each variant and the best one. Lines: as written vs the best variant of the same cell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.report.figure import MEDIAN, Figure, case_subject, ratio_figure, seconds_figure, versus
from harness.report.summary import markdown_table, size_cell
from harness.report.tables import at_headline
from harness.report.views import View

# The view's words; the audit reads the figure records, never these (harness.audit.medians).
VARIANTS_HEADING = "### Variants compared (as written vs the best variant of the same cell)"
VS_BEST = "{ratio} slower than {best}"


class BestVariantView(View):
    """How much faster the best variant of a cell is than the one as written."""

    name = "best-variant"
    order = 50

    def compute(self, context: Any) -> pd.DataFrame:
        return variant_table(context.stats, context.headline)

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        if table.empty:
            return []
        lines = [VARIANTS_HEADING, ""]
        rows, records = [], []
        for _, row in table.iterrows():
            found = _variant_figures(context.name, row)
            rows.append([row["machine"], f"{row['framework']} {row['device']}", row["variant"],
                         size_cell(row["size_label"], context.sweep),
                         found[0].text, "best" if len(found) == 1 else
                         VS_BEST.format(ratio=found[1].text, best=row["best_variant"])])
            records.append(found)
        return lines + markdown_table(["machine", "cell", "variant", context.sweep or "size",
                                       "median", "vs best"], rows, records)


def variant_table(stats: pd.DataFrame, headline: pd.DataFrame) -> pd.DataFrame:
    """Per framework x device at the headline size: time of each variant and the best one.

    Lets the variant as written (the workload's first) be compared with the best variant of
    the same cell.
    """
    rows = []
    for (experiment, machine, framework, device), group in stats[stats["valid"]].groupby(
            ["experiment", "machine", "framework", "device"], sort=False):
        at_size = at_headline(group, headline)
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


def _variant_figures(experiment: str, row: pd.Series) -> list[Figure]:
    """A variant's median, and (but for the best) its time over the best variant's."""
    subject = case_subject(experiment, row)
    median = seconds_figure(MEDIAN, "variant median per step", row["median_s"], subject)
    if row["variant"] == row["best_variant"]:
        return [median]
    return [median, ratio_figure(f"slower than {row['best_variant']}", row["vs_best"],
                                 {**subject, **versus(variant=row["best_variant"])})]

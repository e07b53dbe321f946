"""Ceilings: each cell's best throughput as a share of its machine's measured ceiling.

Table: each valid case's rate judged against the machine's probe and physical bound
(tables.peak_fractions). Lines: the best case per cell and metric, as a share of the ceiling.
The warnings view says where a rate is implausible or the probe was low.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.units import format_size
from harness.data.casekey import CELL_COLUMNS
from harness.report.summary import markdown_table
from harness.report.tables import experiment_peaks, sort_cells
from harness.report.views import View


class CeilingsView(View):
    """Throughput vs the machine's measured ceilings."""

    name = "ceilings"
    order = 80

    def compute(self, context: Any) -> pd.DataFrame:
        return experiment_peaks(context)

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        return ceiling_section(context, table)


def ceiling_section(context: Any, peaks: pd.DataFrame) -> list[str]:
    """Each cell's best throughput as a share of its machine's measured ceiling."""
    if peaks.empty:
        return []
    # A share of a measured ceiling only: rows judged against a bound alone (no probe ran)
    # say IMPLAUSIBLE in the warnings, never a "% of peak".
    peaks = peaks[peaks["probe"].notna()]
    if peaks.empty:
        return []
    best = peaks.sort_values("fraction").groupby([*CELL_COLUMNS, "metric"], sort=False).tail(1)
    rows = [[row["machine"], f"{row['framework']} {row['device']} {row['variant']}",
             format_size(row["size_label"], row["sweep"]) if row["size_label"] else "-",
             f"{row['rate']:,.1f} {row['metric']}", f"{row['peak']:,.1f}"
             + (" (probe low: the run's best)" if row["peak"] > row["probe"] else ""),
             f"{row['fraction']:.0%}" + (" IMPLAUSIBLE" if row["kind"] == "implausible" else "")]
            for _, row in sort_cells(best).iterrows()]
    return ["### Throughput vs the machine's measured ceilings", ""] + markdown_table(
        ["machine", "cell", context.sweep or "size", "best rate", "ceiling", "% of ceiling"],
        rows)

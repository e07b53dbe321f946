"""Ceilings: each cell's best throughput as a share of its machine's measured ceiling.

Table: each valid case's rate judged against the machine's probe and physical bound
(tables.peak_fractions). Lines: the best case per cell and metric, as a share of the ceiling.
The warnings view says where a rate is implausible or the probe was low.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.data.casekey import CELL_COLUMNS
from harness.report.figure import Figure, case_subject
from harness.report.summary import markdown_table, size_cell
from harness.report.tables import experiment_peaks, sort_cells
from harness.report.views import View

# The rates' figures (family RATE_FAMILY, harness.audit.rates), by name: a case's rate (the
# metric in its subject), the ceiling it was judged against (probe or the run's best, CEILING_OF
# in its subject), its share of that ceiling (the ceiling's value in its subject) and the probe
# a low-probe warning names.
RATE_FAMILY = "rate"
RATE, CEILING, SHARE, PROBE = "rate", "ceiling", "% of ceiling", "probe"
CEILING_OF, PROBE_CEILING, BEST_CEILING = "ceiling of", "probe", "the run's best"
CEILINGS_HEADING = "### Throughput vs the machine's measured ceilings"
PROBE_LOW_NOTE = " (probe low: the run's best)"


def rate_figure(context: Any, row: pd.Series, name: str, value: float, decimals: int,
                **more: str) -> Figure:
    """A rate-family record of a peak_fractions row, printed with DECIMALS decimals."""
    text = f"{value:.0%}" if name == SHARE else f"{value:,.{decimals}f}"
    subject = case_subject(context.name, row, metric=str(row["metric"]), **more)
    return Figure(RATE_FAMILY, name, float(value), "" if name == SHARE else row["metric"], text,
                  subject)


class CeilingsView(View):
    """Throughput vs the machine's measured ceilings."""

    name = "ceilings"
    order = 80

    def compute(self, context: Any) -> pd.DataFrame:
        return experiment_peaks(context)

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        """Each cell's best throughput as a share of its machine's measured ceiling."""
        if table.empty:
            return []
        # A share of a measured ceiling only: rows judged against a bound alone (no probe ran)
        # say IMPLAUSIBLE in the warnings, never a "% of peak".
        table = table[table["probe"].notna()]
        if table.empty:
            return []
        best = table.sort_values("fraction").groupby([*CELL_COLUMNS, "metric"], sort=False).tail(1)
        rows, records = [], []
        for _, row in sort_cells(best).iterrows():
            low = row["peak"] > row["probe"]
            found = [rate_figure(context, row, RATE, row["rate"], 1),
                       rate_figure(context, row, CEILING, row["peak"], 1,
                                   **{CEILING_OF: BEST_CEILING if low else PROBE_CEILING}),
                       rate_figure(context, row, SHARE, row["fraction"], 0,
                                   **{CEILING: repr(float(row["peak"]))})]
            rows.append([row["machine"], f"{row['framework']} {row['device']} {row['variant']}",
                         size_cell(row["size_label"], row["sweep"]),
                         f"{found[0].text} {row['metric']}",
                         found[1].text + (PROBE_LOW_NOTE if low else ""),
                         found[2].text + (" IMPLAUSIBLE" if row["kind"] == "implausible" else "")])
            records.append(found)
        return [CEILINGS_HEADING, ""] + markdown_table(
            ["machine", "cell", context.sweep or "size", "best rate", "ceiling", "% of ceiling"],
            rows, records)



"""Peak memory per cell: a table and a bar chart, appended to summary.md as its own section, with
the largest batch predicted to fit for each batch sweep (harness.analysis.memoryfit).

Host memory is the worker's peak RSS (one figure per cell: the process ran every size), device
memory the framework allocator's peak per case; a cell shows its largest case. Why report it
beside the times: "GPU slower" often comes with "and it needed 3 GiB more", and a cell that
died of out-of-memory is easier to explain next to its neighbours' peaks.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.costmodel import two_digits
from harness.analysis.memoryfit import MemoryFit, batch_text, memory_fits, shown
from harness.core.units import format_bytes
from harness.data.casekey import CELL_COLUMNS
from harness.report.figure import Figure, Line
from harness.report.summary import markdown_table
from harness.report.tables import sort_cells
from harness.report.views import REPORT, View, figure_links

# Each cell's peaks (family MEMORY_FAMILY, harness.audit.memory), named as its table's columns.
MEMORY_FAMILY = "peak memory"
MEMORY_COLUMNS = {"peak_host_memory_bytes": "host peak RSS",
                  "peak_device_allocated_bytes": "device peak allocated",
                  "peak_device_reserved_bytes": "device peak reserved"}
FIGURE_FILE = "memory.png"
BAR_COLORS = {"peak_host_memory_bytes": "#4D4D4D", "peak_device_allocated_bytes": "#0173B2",
              "peak_device_reserved_bytes": "#56B4E9"}


class MemoryView(View):
    """Peak host and device memory per cell, for the whole report."""

    name = "memory"
    order = 300
    scope = REPORT
    heading = "Peak memory"

    def compute(self, context: Any) -> pd.DataFrame:
        return memory_table(context.prepared)

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        """Grouped horizontal bars: host RSS and device memory per cell, in MiB."""
        if table.empty:
            return []
        import matplotlib.pyplot as plt
        import numpy as np

        from harness.report.figures import save

        labels = [_cell_label(row) for _, row in table.iterrows()]
        shown = [c for c in MEMORY_COLUMNS if table[c].notna().any()]
        height = 0.8 / len(shown)
        figure, axis = plt.subplots(figsize=(8.0, 1.2 + 0.45 * len(labels) * len(shown)))
        positions = np.arange(len(labels))
        for index, column in enumerate(shown):
            values = table[column].to_numpy(dtype=float) / 2**20
            axis.barh(positions + index * height, np.nan_to_num(values), height,
                      color=BAR_COLORS[column], label=MEMORY_COLUMNS[column])
            for position, value in zip(positions + index * height, table[column]):
                if pd.notna(value):
                    axis.text(value / 2**20, position, f" {format_bytes(value)}", va="center",
                              fontsize="small")
        axis.set_yticks(positions + height * (len(shown) - 1) / 2, labels)
        axis.invert_yaxis()
        axis.set_xlabel("peak memory (MiB)")
        axis.set_title("Peak memory per cell (host: worker RSS; device: framework allocator)")
        axis.margins(x=0.15)  # room for the value labels
        axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.5 / len(labels) - 0.12),
                    ncol=len(shown), fontsize="small", frameon=False)
        axis.grid(axis="x", alpha=0.3)
        return [save(figure, out_dir / FIGURE_FILE)]

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        lines = memory_lines(table, figures, out_dir)
        # Will a bigger batch fit: peak memory fitted over each batch sweep.
        bullets = fit_bullets(context.documents)
        return lines + ["", *bullets] if bullets else lines


# Will a bigger batch fit (family FIT_FAMILY, harness.audit.memory): each cell's line fitted
# over its batch sweep, the capacity, the largest batch predicted to fit and the predicted
# crossover's side of it; the subject names the run and the cell.
FIT_FAMILY = "memory fit"
FIT_BULLET = "- Memory fit (run `{run}`): {line}"
SIZES, LARGEST_SIZE, FIXED, PER_SAMPLE, RESIDUAL = (
    f"{FIT_FAMILY}: {name}" for name in ("sizes", "largest size", "fixed", "per sample",
                                         "largest residual"))
CAPACITY, LARGEST_BATCH, CROSSOVER, SIDE = (
    f"{FIT_FAMILY}: {name}" for name in ("capacity", "largest batch", "predicted crossover",
                                         "crossover side"))


def fit_bullets(documents: list[Any]) -> list[str]:
    """One bullet per cell's memory fit (or why none), each naming its run, with its figures."""
    return [Line(FIT_BULLET.format(run=document.run_id, line=fit.line()), fit_figures(fit))
            for document in documents for fit in memory_fits(document) if shown(fit)]


def fit_figures(fit: MemoryFit) -> list[Figure]:
    """The figures a fit's line prints: none where it says why there is no fit."""
    line = fit.fit
    if line is None or not line.predicts:
        return []
    subject = {"run": fit.run_id, "framework": fit.framework, "device": fit.device,
               "variant": fit.variant}
    found = [(SIZES, line.sizes, "sizes", str(line.sizes)),
             (LARGEST_SIZE, line.largest_size, "samples", f"{int(line.largest_size):,}"),
             (FIXED, line.fixed_bytes, "bytes", format_bytes(line.fixed_bytes)),
             (PER_SAMPLE, line.per_sample_bytes, "bytes", format_bytes(line.per_sample_bytes))]
    if line.max_residual_bytes is not None:
        residual = abs(line.max_residual_bytes)
        found.append((RESIDUAL, residual, "bytes", format_bytes(residual)))
    if fit.largest_batch is not None and fit.capacity_bytes is not None:
        found.append((CAPACITY, fit.capacity_bytes, "bytes", format_bytes(fit.capacity_bytes)))
        if fit.largest_batch > 0:
            found.append((LARGEST_BATCH, fit.largest_batch, "samples",
                          batch_text(fit.largest_batch)))
        place, below = fit.crossover, fit.crossover_below
        if fit.memory == "device" and place is not None and place.kind == "crossover":
            found += [(CROSSOVER, place.batch or 0.0, "samples", two_digits(place.batch)),
                      (SIDE, float(bool(below)), "", "below" if below else "above")]
    return [Figure(FIT_FAMILY, name, float(value), unit, text, subject)
            for name, value, unit, text in found]


def memory_table(prepared: pd.DataFrame) -> pd.DataFrame:
    """One row per cell with the largest figure of each memory column (NaN where unknown)."""
    present = [column for column in MEMORY_COLUMNS if column in prepared.columns]
    if prepared.empty or not present:
        return pd.DataFrame(columns=[*CELL_COLUMNS, *MEMORY_COLUMNS])
    numbers = prepared[list(CELL_COLUMNS)].copy()
    for column in MEMORY_COLUMNS:
        values = prepared[column] if column in prepared.columns else pd.Series(dtype=float)
        numbers[column] = pd.to_numeric(values, errors="coerce")
    table = numbers.groupby(list(CELL_COLUMNS), sort=False).max().reset_index()
    return sort_cells(table.dropna(how="all", subset=list(MEMORY_COLUMNS)))


def _cell_label(row: pd.Series) -> str:
    return f"{row['experiment']}: {row['framework']} {row['device']} {row['variant']}"


def memory_lines(table: pd.DataFrame, pngs: list[Path], out_dir: Path) -> list[str]:
    """Lines for summary.md: the figure and one table row per cell (none when nothing known)."""
    if table.empty:
        return []
    explanation = ("Host: the worker process's peak resident set size (whole cell, all sizes), "
                   "read by the runner from the kernel when the worker exits. Device: the "
                   "framework allocator's peak per case (reserved where the framework reports "
                   "it, else allocated), largest case shown; '-' on CPU cells.")
    lines = [explanation, "", *figure_links("peak memory per cell", pngs, out_dir)]
    rows, records = [], []
    for _, row in table.iterrows():
        subject = {name: str(row[name]) for name in CELL_COLUMNS}
        # '-' is a figure too: the audit holds it to a cell with no such peak.
        figures = [Figure(MEMORY_FAMILY, name, math.nan if value is None else value, "B",
                          format_bytes(value), subject)
                   for column, name in MEMORY_COLUMNS.items()
                   for value in [_number(row[column])]]
        rows.append([row["experiment"], row["machine"],
                     f"{row['framework']} {row['device']} {row['variant']}",
                     *(figure.text for figure in figures)])
        records.append(figures)
    return lines + markdown_table(["experiment", "machine", "cell", *MEMORY_COLUMNS.values()],
                                  rows, records)[:-1]


def _number(value: Any) -> float | None:  # a table cell: a number, NaN or None
    return None if pd.isna(value) else float(value)

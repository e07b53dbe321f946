"""Overview: every cell at its variant's headline size, the time or why there is none.

Table: one row per cell (framework x device) per machine and variant, at the headline size;
cells without a trusted time keep their row with their status and reason, and cells that never
ran where the same framework and device ran elsewhere show as 'not run'. Figure: one bar panel
per machine and variant. No lines of its own: the figure opens the experiment's section.

A CPU-only run's predicted GPU steps (harness/predict/answer.py, issue 61 part 3) get a row
each right under the CPU cell they were predicted from (device "<GPU> predicted", kind
PREDICTED), drawn as a dotted, dashed outline (in the legend) with the printed interval as
its whiskers, so the framework a GPU would favour can be seen beside the one this CPU
favours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

from harness.core.units import device_kind, format_seconds, format_size
from harness.report import style
from harness.report.load import PREDICTED_COLUMN
from harness.report.tables import sort_cells
from harness.report.views import View
from harness.spec import Status

if TYPE_CHECKING:
    from matplotlib.axes import Axes


class OverviewView(View):
    """Time per cell at the headline size, failed cells included."""

    name = "overview"
    order = 10
    caption = "time per cell at the headline size"

    def compute(self, context: Any) -> pd.DataFrame:
        return with_predicted_rows(overview_table(context.stats, context.cells,
                                                  context.headline), context.extras)

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        """Median time per call (or per step) of every cell at the headline size, IQR as error bar.

        Cells without a trusted time (unavailable, error, invalid, not run) keep their row: an
        empty hatched bar with the status and reason written on it.
        """
        if table.empty:
            return []
        import matplotlib.pyplot as plt

        from harness.report.figures import PANEL_WIDTH, save

        panels = list(table.groupby(["machine", "variant"], sort=False))
        variants_per_machine = table.groupby("machine", sort=False)["variant"].nunique()
        columns = min(int(variants_per_machine.max()), 3)
        # Each machine starts a new row, so a variant sits in the same column for every machine.
        places, row = [], 0
        for _machine, count in variants_per_machine.items():
            places += [(row + index // columns, index % columns) for index in range(count)]
            row += math.ceil(count / columns)
        rows = row
        cells_per_panel = max(len(group) for _, group in panels)
        figure, grid = plt.subplots(rows, columns, figsize=(PANEL_WIDTH * columns,
                                                            (0.55 * cells_per_panel + 1.3) * rows),
                                    squeeze=False, sharex=True, layout="constrained")
        axes = grid
        limits = _time_limits(table)
        several_machines = table["machine"].nunique() > 1
        used = set()
        for (row_index, column_index), ((machine, variant), group) in zip(places, panels):
            axis = axes[row_index, column_index]
            used.add((row_index, column_index))
            _overview_panel(axis, group, limits, context.framework_colors)
            size = group["size_label"].iloc[0]
            where = f" at {context.sweep}={format_size(size, context.sweep)}" if size else ""
            axis.set_title((f"{machine}\n" if several_machines else "")
                           + f"variant {variant}{where}", fontsize=10)
        for row_index in range(rows):
            for column_index in range(columns):
                if (row_index, column_index) not in used:
                    axes[row_index, column_index].set_visible(False)
        for column in range(columns):
            lowest = [axis for axis in axes[:, column] if axis.get_visible()][-1]
            lowest.tick_params(labelbottom=True)
            lowest.set_xlabel(f"median time per {context.unit} (log scale)")
        machines = "" if several_machines else f" on {table['machine'].iloc[0]}"
        figure.suptitle(f"{context.name}: time per {context.unit}{machines}\nbars: median; "
                        "whiskers: IQR (25th-75th percentile of the samples); "
                        f"{device_key(table)}", fontsize=11)
        if handles := key_handles(table):
            figure.legend(handles=handles, loc="outside lower center", ncols=len(handles),
                          fontsize=8.5, frameon=False)
        return [save(figure, out_dir / f"{context.stem}-overview.png")]


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


class CellAtSize(TypedDict):
    """Which cell, at which size: the key columns of an overview row."""

    experiment: str
    machine: str
    variant: str
    framework: str
    device: str
    device_kind: str
    size_label: str


class OverviewRow(CellAtSize):
    """One cell at its headline size: its status and, where shown, its median and IQR."""

    status: str
    reason: str
    shown: bool
    median_s: float
    q1_s: float
    q3_s: float
    noisy: bool
    suspect: str  # why its timing is in doubt ('' when it is not): its bar is hatched


def _overview_row(stats: pd.DataFrame, cells: pd.DataFrame, experiment: str, machine: str,
                  variant: str, framework: str, device: str, size: str) -> OverviewRow:
    base: CellAtSize = {"experiment": experiment, "machine": machine, "variant": variant,
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
                "q3_s": row["q3_s"] if shown else math.nan, "noisy": bool(row["noisy"]),
                "suspect": str(row.get("suspect") or "") if shown else ""}
    cell = cells[(cells["framework"] == framework) & (cells["device"] == device)]
    if cell.empty:
        status, reason = "not run", "no result for this cell in the run folder(s)"
    else:
        status, reason = cell["status"].iloc[0], cell["reason"].iloc[0]
        if status == Status.OK.value:
            status, reason = "not run", f"not measured at this size ({size})"
    return {**base, "status": status, "reason": reason, "shown": False, "median_s": math.nan,
            "q1_s": math.nan, "q3_s": math.nan, "noisy": False, "suspect": ""}


# --- the GPU steps predicted from a CPU-only run --------------------------------------------------

PREDICTED = "predicted"  # the device kind of a predicted row
PREDICTED_KEY = "GPU step predicted from the CPU bar above (whiskers: its interval)"
PREDICTED_HATCH = ".."  # dotted outline: not a failed cell's '///', nor SUSPECT's 'xx'



def with_predicted_rows(table: pd.DataFrame, extras: pd.DataFrame) -> pd.DataFrame:
    """TABLE with a row per GPU step predicted from each shown CPU row, right under it
    (extras' PREDICTED_COLUMN: harness.predict.answer.chart_points)."""
    if table.empty or extras.empty or PREDICTED_COLUMN not in extras:
        return table
    rows: list[dict[str, Any]] = []
    added = 0
    for _, row in table.iterrows():
        rows.append(row.to_dict())
        found = predicted_rows(row, extras) if row["shown"] and row["device_kind"] == "cpu" \
            else []
        rows += found
        added += len(found)
    return pd.DataFrame(rows, columns=table.columns) if added else table


def predicted_rows(row: pd.Series, extras: pd.DataFrame) -> list[dict[str, Any]]:
    """The predicted rows of one CPU row: its case's points in the latest run holding them."""
    match = extras[(extras["machine"] == row["machine"]) & (extras["variant"] == row["variant"])
                   & (extras["framework"] == row["framework"])
                   & (extras["device"] == row["device"])
                   & (extras["size_label"] == row["size_label"])]
    points = [found for found in match[PREDICTED_COLUMN] if isinstance(found, list) and found]
    return [{**row.to_dict(), "device": f"{point['device']} predicted",
             "device_kind": PREDICTED, "status": "predicted", "reason": "", "shown": True,
             "median_s": point["step_s"], "q1_s": point["low_s"], "q3_s": point["high_s"],
             "noisy": False, "suspect": ""}
            for point in (points[-1] if points else [])]


# --- the figure --------------------------------------------------------------------------------

def device_key(table: pd.DataFrame) -> str:
    """What the bars' fill says: lighter bars are CPU cells only where GPU cells are drawn
    beside them; otherwise every cell is on one kind of device, and the colours are the
    frameworks' own (some lighter than others)."""
    kinds = set(table["device_kind"]) - {PREDICTED}  # said apart (PREDICTED_KEY)
    if kinds == {"cpu"}:
        return "every cell on the CPU"
    if kinds == {"gpu"}:
        return "every cell on a GPU"
    return "lighter bars: CPU, solid: GPU"


# A SUSPECT cell's bar: hatched (and outlined black), its label says so, the legend explains.
SUSPECT_HATCH = "xx"
SUSPECT_KEY = "SUSPECT timing (hatched): see the warnings"
FAILED_KEY = "no valid time (status and reason on the bar)"


def key_handles(table: pd.DataFrame) -> list[Any]:
    """The legend of what the bars' marks say, for the marks drawn: a SUSPECT cell's hatch, a
    failed cell's empty bar (the frameworks' colours are their tick labels' colours)."""
    from matplotlib.patches import Patch

    handles = []
    if table["suspect"].astype(bool).any():
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=SUSPECT_HATCH,
                             label=SUSPECT_KEY))
    if (~table["shown"].astype(bool)).any():
        handles.append(Patch(fill=False, edgecolor=style.FAILED_COLOR, hatch="///",
                             label=FAILED_KEY))
    if (table["device_kind"] == PREDICTED).any():
        handles.append(Patch(fill=False, edgecolor="black", hatch=PREDICTED_HATCH,
                             linestyle="--", label=PREDICTED_KEY))
    return handles


def _time_limits(table: pd.DataFrame) -> tuple[float, float]:
    shown = table[table["shown"]]
    if shown.empty:
        return 1e-6, 1.0
    low = float(shown["q1_s"].fillna(shown["median_s"]).min())
    high = float(shown["q3_s"].fillna(shown["median_s"]).max())
    # Room on the right for the value labels, below for the bars to start visibly.
    return 10 ** math.floor(math.log10(low) - 0.3), 10 ** (math.log10(high) + 1.2)


def _overview_panel(axis: Axes, group: pd.DataFrame, limits: tuple[float, float],
                    colors: Mapping[str, str]) -> None:
    from harness.report.figures import seconds_axis, short

    axis.set_xscale("log")
    axis.set_xlim(*limits)
    seconds_axis(axis.xaxis)
    positions = np.arange(len(group))
    for position, (_, row) in zip(positions, group.iterrows()):
        color = style.framework_color(row["framework"], colors)
        if row["device_kind"] == PREDICTED:
            _predicted_bar(axis, float(position), row, limits, color)
        elif row["shown"]:
            error = [[row["median_s"] - row["q1_s"]], [row["q3_s"] - row["median_s"]]]
            suspect = bool(row.get("suspect"))
            axis.barh(position, row["median_s"] - limits[0], left=limits[0], color=color,
                      alpha=style.DEVICE_BAR_ALPHA[row["device_kind"]], height=0.7,
                      edgecolor="black" if suspect else color,
                      hatch=SUSPECT_HATCH if suspect else None)
            axis.errorbar(row["median_s"], position, xerr=error, fmt="none", ecolor="black",
                          capsize=3, linewidth=1)
            label = format_seconds(row["median_s"]) + "".join(
                f"  ({flag})" for flag, on in (("noisy", row["noisy"]), ("SUSPECT", suspect))
                if on)
            axis.text(max(row["q3_s"], row["median_s"]) * 1.25, float(position), label, va="center",
                      fontsize=8.5)
        else:
            axis.barh(position, limits[1] - limits[0], left=limits[0], height=0.7, fill=False,
                      hatch="///", edgecolor=style.FAILED_COLOR, linewidth=0.6)
            axis.text(limits[0] * 1.3, float(position), short(f"{row['status']}: {row['reason']}"),
                      va="center", fontsize=8, style="italic",
                      bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
    axis.set_yticks(positions, [f"{framework} · {device}" for framework, device in
                                zip(group["framework"], group["device"])])
    for tick, framework in zip(axis.get_yticklabels(), group["framework"]):
        tick.set_color(style.framework_color(framework, colors))
    axis.invert_yaxis()
    axis.grid(axis="x", which="major", alpha=0.3)


def _predicted_bar(axis: Axes, position: float, row: pd.Series, limits: tuple[float, float],
                   color: str) -> None:
    """A predicted GPU step: a dotted, dashed outline, never a measured bar's fill; its interval as
    whiskers where it was printed (a range too wide to help is left out, as on the line)."""
    axis.barh(position, row["median_s"] - limits[0], left=limits[0], height=0.7, fill=False,
              hatch=PREDICTED_HATCH, edgecolor=color, linewidth=1.0, linestyle="--")
    if not (math.isnan(row["q1_s"]) or math.isnan(row["q3_s"])):
        error = [[row["median_s"] - row["q1_s"]], [row["q3_s"] - row["median_s"]]]
        axis.errorbar(row["median_s"], position, xerr=error, fmt="none", ecolor="black",
                      capsize=3, linewidth=1, linestyle="--")
    high = row["median_s"] if math.isnan(row["q3_s"]) else max(row["q3_s"], row["median_s"])
    axis.text(high * 1.25, position, f"~{format_seconds(row['median_s'])} predicted",
              va="center", fontsize=8.5, style="italic")

"""Drawing only: one function per figure, each taking tables from tables.py and a file path.

Nothing here decides anything (crossovers, fastest cells, breakdowns come computed); these
functions place marks, labels and notes so that a figure reads on its own.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from harness.core.units import device_kind, format_bytes, format_ratio, format_seconds, format_size
from harness.report import style
from harness.report.tables import ceiling_for, flop_ceiling

STATUS_TEXT_CHARS = 66
PANEL_WIDTH = 6.0


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=style.DPI, bbox_inches="tight", facecolor="white")
    plt.close(figure)
    return path


def _log_labels(axis: Any, label: Any) -> None:
    """Decade ticks labelled by `label`; 2x and 5x ticks too when the axis spans < 2 decades.

    Why: matplotlib's default labels a short log axis '3x10^1', which nobody reads at a glance.
    """
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda value, _: label(value)))
    axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))

    def minor(value: float, _: Any) -> str:
        low, high = sorted(axis.get_view_interval())
        return label(value) if low > 0 and high / low < 100 else ""
    axis.set_minor_formatter(FuncFormatter(minor))


def _format_rate(value: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def _seconds_axis(axis: Any) -> None:
    """Log axis whose ticks read 10 us, 1 ms, 1 s rather than 1e-05."""
    _log_labels(axis, format_seconds)


def _size_axis(axis: Any, sweep: str, sizes: list[float]) -> None:
    """Ticks at the measured sizes (few enough to label), else at powers of ten."""
    label = (lambda value: format_bytes(value)) if sweep == "bytes" else _format_count
    axis.set_minor_locator(NullLocator())
    if len(sizes) <= 12:
        axis.set_major_locator(FixedLocator(sizes))
    else:
        axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda value, _: label(value)))


def _format_count(value: float) -> str:
    """16, 4096, 100k, 1M: exact below 10^4 (matrix sizes read better whole), short above."""
    if value < 1e4:
        return f"{value:g}"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def _cell_label(framework: str, device: str) -> str:
    return f"{framework} · {device}"


def _short(text: str, limit: int = STATUS_TEXT_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _legend_handles(cells: pd.DataFrame) -> list[Line2D]:
    """One entry per framework x device kind drawn: colour says framework, line says device."""
    handles = []
    pairs = cells[["framework", "device_kind"]].drop_duplicates().itertuples(index=False)
    pairs = list(pairs)
    order = {name: index for index, name in enumerate(dict.fromkeys(p[0] for p in pairs))}
    for framework, kind in sorted(pairs, key=lambda pair: (order[pair[0]], pair[1])):
        handles.append(Line2D([], [], color=style.framework_color(framework),
                              linestyle=style.DEVICE_LINESTYLES[kind],
                              marker=style.DEVICE_MARKERS[kind],
                              label=f"{framework} {style.DEVICE_NAMES[kind]}"))
    return handles


# --- 1. overview ------------------------------------------------------------------------------

def overview(table: pd.DataFrame, title: str, sweep: str, unit: str, path: Path) -> Path | None:
    """Median time per call (or per step) of every cell at the headline size, IQR as error bar.

    Cells without a trusted time (unavailable, error, invalid, not run) keep their row: an
    empty hatched bar with the status and reason written on it.
    """
    if table.empty:
        return None
    panels = list(table.groupby(["machine", "variant"], sort=False))
    variants_per_machine = table.groupby("machine", sort=False)["variant"].nunique()
    columns = min(int(variants_per_machine.max()), 3)
    # Each machine starts a new row, so a variant sits in the same column for every machine.
    places, row = [], 0
    for machine, count in variants_per_machine.items():
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
        _overview_panel(axis, group, limits)
        size = group["size_label"].iloc[0]
        where = f" at {sweep}={format_size(size, sweep)}" if size else ""
        axis.set_title((f"{machine}\n" if several_machines else "") + f"variant {variant}{where}",
                       fontsize=10)
    for row_index in range(rows):
        for column_index in range(columns):
            if (row_index, column_index) not in used:
                axes[row_index, column_index].set_visible(False)
    for column in range(columns):
        lowest = [axis for axis in axes[:, column] if axis.get_visible()][-1]
        lowest.tick_params(labelbottom=True)
        lowest.set_xlabel(f"median time per {unit} (log scale)")
    machines = "" if several_machines else f" on {table['machine'].iloc[0]}"
    figure.suptitle(f"{title}: time per {unit}{machines}\nbars: median; whiskers: IQR "
                    "(25th-75th percentile of the samples); lighter bars: CPU", fontsize=11)
    return _save(figure, path)


def _time_limits(table: pd.DataFrame) -> tuple[float, float]:
    shown = table[table["shown"]]
    if shown.empty:
        return 1e-6, 1.0
    low = float(shown["q1_s"].fillna(shown["median_s"]).min())
    high = float(shown["q3_s"].fillna(shown["median_s"]).max())
    # Room on the right for the value labels, below for the bars to start visibly.
    return 10 ** math.floor(math.log10(low) - 0.3), 10 ** (math.log10(high) + 1.2)


def _overview_panel(axis: Axes, group: pd.DataFrame, limits: tuple[float, float]) -> None:
    axis.set_xscale("log")
    axis.set_xlim(*limits)
    _seconds_axis(axis.xaxis)
    positions = np.arange(len(group))
    for position, (_, row) in zip(positions, group.iterrows()):
        color = style.framework_color(row["framework"])
        if row["shown"]:
            error = [[row["median_s"] - row["q1_s"]], [row["q3_s"] - row["median_s"]]]
            axis.barh(position, row["median_s"] - limits[0], left=limits[0], color=color,
                      alpha=style.DEVICE_BAR_ALPHA[row["device_kind"]], height=0.7,
                      edgecolor=color)
            axis.errorbar(row["median_s"], position, xerr=error, fmt="none", ecolor="black",
                          capsize=3, linewidth=1)
            label = format_seconds(row["median_s"]) + ("  (noisy)" if row["noisy"] else "")
            axis.text(max(row["q3_s"], row["median_s"]) * 1.25, position, label, va="center",
                      fontsize=8.5)
        else:
            axis.barh(position, limits[1] - limits[0], left=limits[0], height=0.7, fill=False,
                      hatch="///", edgecolor=style.FAILED_COLOR, linewidth=0.6)
            axis.text(limits[0] * 1.3, position, _short(f"{row['status']}: {row['reason']}"),
                      va="center", fontsize=8, style="italic",
                      bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
    axis.set_yticks(positions, [_cell_label(f, d) for f, d in zip(group["framework"],
                                                                   group["device"])])
    for tick, framework in zip(axis.get_yticklabels(), group["framework"]):
        tick.set_color(style.framework_color(framework))
    axis.invert_yaxis()
    axis.grid(axis="x", which="major", alpha=0.3)


# --- 2. crossover -----------------------------------------------------------------------------

def crossover(stats: pd.DataFrame, verdicts: pd.DataFrame, title: str, sweep: str, unit: str,
              ceilings: dict[str, dict[str, Any]], path: Path,
              bandwidth_key: str = "bandwidth_gbps") -> Path | None:
    """Time (and throughput) vs size, log-log, median line with IQR band, crossover marked."""
    swept = stats[stats["valid"] & stats["size_value"].notna()]
    panels = [(key, group) for key, group in swept.groupby(["machine", "variant"], sort=False)
              if group["size_value"].nunique() >= 2]
    if not panels:
        return None
    # Every rate the work counts allow: GFLOP/s for compute, GB/s for memory or copies.
    rates = [rate for rate in ("gflops", "gbps") if swept[rate].notna().any()]
    columns = 1 + len(rates)
    sizes = sorted(swept["size_value"].unique())
    figure, axes = plt.subplots(len(panels), columns, figsize=(max(PANEL_WIDTH * columns, 8.0),
                                                               3.9 * len(panels)),
                                squeeze=False, sharex=True, layout="constrained")
    drawn = []
    for row_axes, ((machine, variant), group) in zip(axes, panels):
        reference = _cpu_reference(swept, group, machine)
        drawn.append(_lines(row_axes[0], pd.concat([group, reference]), "median_s", "q1_s",
                            "q3_s"))
        _mark_failed(row_axes[0], stats[(stats["machine"] == machine)
                                         & (stats["variant"] == variant) & ~stats["valid"]
                                         & stats["size_value"].notna()])
        verdict = _verdict(verdicts, machine, variant)
        faded = sorted(set(reference["variant"]))
        _mark_crossover(row_axes[0], verdict)
        row_axes[0].set_ylabel(f"median time per {unit}")
        _seconds_axis(row_axes[0].yaxis)
        notes = [_crossover_text(verdict, sweep)]
        if faded:
            notes.append(f"faded: CPU cells of variant {', '.join(faded)}")
        row_axes[0].set_title(f"{machine} · variant {variant}: time\n"
                              + "\n".join(note for note in notes if note), fontsize=9.5)
        for axis, rate in zip(row_axes[1:], rates):
            _rate_panel(axis, pd.concat([group, reference]), rate, ceilings.get(machine) or {},
                        bandwidth_key)
            axis.set_title(f"{machine} · variant {variant}: "
                           f"{'compute' if rate == 'gflops' else 'bytes'} throughput", fontsize=10)
        for axis in row_axes:
            axis.set_xscale("log")
            _size_axis(axis.xaxis, sweep, sizes)
    for axis in axes[-1]:
        axis.set_xlabel(f"{sweep} (log scale)")
    legend_cells = pd.concat(drawn).drop_duplicates()
    figure.legend(handles=_legend_handles(legend_cells), loc="outside lower center",
                  ncol=min(len(legend_cells), 6), frameon=False)
    figure.suptitle(f"{title}: when does the GPU win? lines: median, bands: IQR, "
                    "dotted: crossover", fontsize=11)
    return _save(figure, path)


def _mark_failed(axis: Axes, failed: pd.DataFrame) -> None:
    """Failed cases stay visible: a cross at their (untrusted) time, or at the axis floor.

    Why: a point that silently vanishes reads as "not measured" and moves the crossover.
    """
    for _, row in failed.iterrows():
        color = style.framework_color(row["framework"])
        if pd.notna(row["median_s"]):
            axis.plot(row["size_value"], row["median_s"], marker="x", color=color,
                      markersize=9, markeredgewidth=2, linestyle="none")
            axis.annotate(f"{row['status']}", (row["size_value"], row["median_s"]),
                          xytext=(4, 4), textcoords="offset points", fontsize=7, color=color)
        else:
            axis.annotate(f"{row['device']} {row['status']}", (row["size_value"], 0.02),
                          xycoords=("data", "axes fraction"), fontsize=7, color=color,
                          rotation=90, ha="center")


def _cpu_reference(swept: pd.DataFrame, group: pd.DataFrame, machine: str) -> pd.DataFrame:
    """For a GPU-only variant: the machine's CPU cells of other variants, drawn faded."""
    if (group["device_kind"] == "cpu").any():
        return group.iloc[0:0]
    others = swept[(swept["machine"] == machine) & (swept["device_kind"] == "cpu")
                   & (swept["experiment"] == group["experiment"].iloc[0])]
    return others.assign(faded=True)


def _verdict(verdicts: pd.DataFrame, machine: str, variant: str) -> pd.Series | None:
    match = verdicts[(verdicts["machine"] == machine) & (verdicts["variant"] == variant)
                     & (verdicts["framework"] == "best")]
    return match.iloc[0] if not match.empty else None


def _with_faded(rows: pd.DataFrame) -> pd.DataFrame:
    """rows with a boolean `faded` column (reference CPU rows of another variant are True)."""
    faded = rows["faded"] if "faded" in rows else pd.Series(False, index=rows.index)
    return rows.assign(faded=faded.astype("boolean").fillna(False).astype(bool))


def _lines(axis: Axes, rows: pd.DataFrame, center: str, low: str, high: str) -> pd.DataFrame:
    """One median line with an IQR band per framework x device (x variant when faded)."""
    rows = _with_faded(rows)
    keys = ["framework", "device", "variant", "faded"]
    for (framework, device, variant, faded), line in rows.groupby(keys, sort=False):
        line = line.sort_values("size_value")
        kind = device_kind(device)
        color = style.framework_color(framework)
        alpha = 0.4 if faded else 1.0
        axis.plot(line["size_value"], line[center], color=color, alpha=alpha,
                  linestyle=style.DEVICE_LINESTYLES[kind], marker=style.DEVICE_MARKERS[kind],
                  markersize=4)
        axis.fill_between(line["size_value"], line[low], line[high], color=color,
                          alpha=0.18 * alpha, linewidth=0)
    axis.set_yscale("log")
    axis.grid(which="major", alpha=0.3)
    return rows[["framework", "device_kind"]]


def _crossover_text(verdict: pd.Series | None, sweep: str) -> str:
    if verdict is None:
        return ""
    if not verdict["has_gpu"]:
        return "no GPU cell measured on this machine"
    if not verdict["has_cpu"]:
        return "no CPU cell measured on this machine"
    if verdict["kind"] == "no-overlap":
        return "no CPU cell at these sizes: nothing to compare"
    return "best GPU vs best CPU: " + verdict["verdict"].text(sweep)


def _mark_crossover(axis: Axes, verdict: pd.Series | None) -> None:
    """A dotted vertical line where the GPU overtakes; the words go in the panel title."""
    if verdict is not None and verdict["kind"] == "crossover":
        axis.axvline(verdict["size"], color="black", linestyle=":", linewidth=1.2)


def _rate_panel(axis: Axes, rows: pd.DataFrame, rate: str, ceilings: dict[str, Any],
                bandwidth_key: str) -> None:
    work = "flops" if rate == "gflops" else "bytes"
    scale = 1e9
    rows = _with_faded(rows).assign(
        rate=rows[work] / rows["call_median_s"] / scale,
        rate_low=rows[work] / rows["call_q3_s"] / scale,
        rate_high=rows[work] / rows["call_q1_s"] / scale,
    ).dropna(subset=["rate"])
    if rows.empty:
        axis.text(0.5, 0.5, "no throughput for these cells", transform=axis.transAxes,
                  ha="center")
        return
    _lines(axis, rows, "rate", "rate_low", "rate_high")
    axis.set_ylabel("GFLOP/s" if rate == "gflops" else "GB/s")
    _log_labels(axis.yaxis, _format_rate)
    variant = str(rows.loc[~rows["faded"], "variant"].iloc[0]) if (~rows["faded"]).any() \
        else str(rows["variant"].iloc[0])
    for device in rows["device"].unique():
        peak = (flop_ceiling(ceilings, device, variant) if rate == "gflops" else ceiling_for(
            ceilings, device, bandwidth_key))
        if peak:
            axis.axhline(peak, color="#555555", linestyle=style.DEVICE_LINESTYLES[
                device_kind(device)], linewidth=0.8)
            axis.annotate(f"{device} measured peak", (0.02, peak), xycoords=("axes fraction",
                          "data"), xytext=(0, 2), textcoords="offset points", fontsize=7.5)


# --- 3. where the time goes -------------------------------------------------------------------

def breakdown(table: pd.DataFrame, title: str, sweep: str, unit: str, call: str,
              path: Path) -> Path | None:
    """Per cell: share of a steady-state call that is compute vs an identified overhead, and
    share of the first call that is cold-start extra; absolute times written beside each bar.

    Shares, not absolute stacked times: a 80 ms cold start next to a 15 us call would leave
    the call invisible on a linear axis, and stacked bars on a log axis misstate the parts.
    """
    if table.empty:
        return None
    has_overhead = (table["overhead_s"] > 0).any()
    several_machines = table["machine"].nunique() > 1
    labels = [_breakdown_label(row, sweep, several_machines) for _, row in table.iterrows()]
    columns = 2 if has_overhead else 1
    figure, axes = plt.subplots(1, columns, figsize=(7.0 * columns, 0.5 * len(table) + 2.0),
                                squeeze=False, sharey=True, layout="constrained")
    positions = np.arange(len(table))
    panel = 0
    if has_overhead:
        overhead_name = next(name for name in table["overhead_name"] if name)
        _share_bars(axes[0, 0], positions, table["compute_s"] / table["median_s"],
                    table["overhead_s"] / table["median_s"], "compute",
                    overhead_name, "overhead",
                    [f"{format_seconds(m)} per {unit}"
                     + (f", {o:.0%} {overhead_name}" if o > 0 else "")
                     for m, o in zip(table["median_s"], table["overhead_share"])])
        axes[0, 0].set_title(f"steady state: one warm {unit}", fontsize=10)
        panel = 1
    cold_total = table["median_s"] + table["cold_extra_s"]
    _share_bars(axes[0, panel], positions, table["median_s"] / cold_total,
                table["cold_extra_s"] / cold_total, f"a warm {call}",
                f"extra on the first {call} (cold start)", "cold",
                [f"first {format_seconds(c)} = {n:,.1f}x warm" for c, n in
                 zip(table["cold_call_s"], table["cold_in_warm_calls"])])
    axes[0, panel].set_title(f"first {call} at this size: warm cost + cold-start extra",
                             fontsize=10)
    axes[0, 0].set_yticks(positions, labels)
    for tick, framework in zip(axes[0, 0].get_yticklabels(), table["framework"]):
        tick.set_color(style.framework_color(framework))
    axes[0, 0].invert_yaxis()
    machines = "" if several_machines else f" on {table['machine'].iloc[0]}"
    figure.suptitle(f"{title}: where the time goes (cross-check: variant differences)"
                    f"{machines}", fontsize=11)
    return _save(figure, path)


def _breakdown_label(row: pd.Series, sweep: str, several_machines: bool) -> str:
    size = f", {sweep}={format_size(row['size_label'], sweep)}" if row["size_label"] else ""
    machine = f"{row['machine']}\n" if several_machines else ""
    return f"{machine}{row['framework']} · {row['device']} · {row['variant']}{size}"


def _share_bars(axis: Axes, positions: np.ndarray, first: pd.Series, second: pd.Series,
                first_name: str, second_name: str, second_part: str, notes: list[str]) -> None:
    first_color = style.PART_COLORS["compute"]
    second_color = style.PART_COLORS[second_part]
    axis.barh(positions, first, color=first_color, height=0.65)
    axis.barh(positions, second, left=first, color=second_color, height=0.65)
    for position, note in zip(positions, notes):
        axis.text(1.02, position, note, va="center", fontsize=8.5)
    axis.set_xlim(0, 1.0)
    axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.0%}"))
    axis.set_xlabel("share of the time")
    axis.legend(handles=[Patch(color=first_color, label=first_name),
                         Patch(color=second_color, label=second_name)],
                loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / max(len(positions), 1)),
                ncol=2, frameon=False, fontsize=8.5)


# --- 4. ratios --------------------------------------------------------------------------------

RATIO_TITLES = {
    "gpu_speedup": "GPU speedup = CPU time / GPU time, same framework (>1: GPU faster)",
    "framework_ratio": "time of A / time of B, same device and variant (>1: B faster)",
}


def ratios(table: pd.DataFrame, title: str, sweep: str, path: Path) -> Path | None:
    """Heatmaps of GPU speedup and framework-pair time ratios per size, values written in."""
    kinds = [kind for kind in RATIO_TITLES if (table["kind"] == kind).any()]
    if not kinds:
        return None
    several_machines = table["machine"].nunique() > 1
    grids = {kind: _ratio_grid(table[table["kind"] == kind], sweep, several_machines)
             for kind in kinds}
    widths = max(grid.shape[1] for grid in grids.values())
    heights = [grid.shape[0] for grid in grids.values()]
    figure, axes = plt.subplots(len(kinds), 1, figsize=(max(7.0, 0.95 * widths + 4.0),
                                                       sum(0.5 * h + 1.6 for h in heights)),
                                squeeze=False, layout="constrained",
                                gridspec_kw={"height_ratios": [h + 2 for h in heights]})
    for axis, kind in zip(axes[:, 0], kinds):
        _ratio_heatmap(axis, grids[kind])
        axis.set_title(RATIO_TITLES[kind], fontsize=10)
        axis.set_xlabel(sweep)
        axis.set_ylabel("")
    figure.suptitle(f"{title}: ratios of median times", fontsize=11)
    return _save(figure, path)


def _ratio_grid(rows: pd.DataFrame, sweep: str, several_machines: bool) -> pd.DataFrame:
    rows = rows.assign(row=(rows["machine"] + " · " if several_machines else "") + rows["label"],
                       column=[format_size(s, sweep) if s else "-" for s in rows["size_label"]],
                       order=rows["size_value"].fillna(-1))
    columns = list(dict.fromkeys(rows.sort_values("order")["column"]))
    return rows.pivot_table(index="row", columns="column", values="ratio",
                            aggfunc="first", sort=False)[columns]


def _power_of_two_ticks(limit: float) -> list[float]:
    step = max(1, math.ceil(limit / 4))
    whole = math.floor(limit)
    return [float(power) for power in range(-whole, whole + 1) if power % step == 0]


def _ratio_tick(log2_value: float) -> str:
    """Colour-bar ticks as ratios: 8x above one, 1/8x below."""
    ratio = 2.0 ** log2_value
    return f"{ratio:.3g}x" if ratio >= 1 else f"1/{1 / ratio:.3g}x"


def _ratio_heatmap(axis: Axes, grid: pd.DataFrame) -> None:
    logs = np.log2(grid.astype(float))
    limit = max(1.0, min(10.0, float(np.nanmax(np.abs(logs.to_numpy())))))
    annotations = grid.map(lambda value: format_ratio(value) if pd.notna(value) else "")
    sns.heatmap(logs, ax=axis, cmap="RdBu", center=0.0, vmin=-limit, vmax=limit,
                annot=annotations.to_numpy(), fmt="", annot_kws={"fontsize": 8.5},
                linewidths=0.5, linecolor="white",
                cbar_kws={"label": "ratio (log scale)", "ticks": _power_of_two_ticks(limit),
                          "format": FuncFormatter(lambda value, _: _ratio_tick(value))})
    axis.tick_params(axis="y", rotation=0)
    axis.tick_params(axis="x", rotation=0)


# --- 5. epochs ---------------------------------------------------------------------------------

def epochs(times: pd.DataFrame, accuracy: pd.DataFrame, title: str,
           path: Path) -> Path | None:
    """Seconds per epoch with epoch 1 (the cold one) marked, and test accuracy per cell."""
    if times.empty and accuracy.empty:
        return None
    panels = list(times.groupby(["machine", "variant"], sort=False)) if not times.empty else []
    rows = max(len(panels), 1)
    figure = plt.figure(figsize=(13.0, max(3.4 * rows, 0.3 * len(accuracy) + 2.5)),
                        layout="constrained")
    grid = figure.add_gridspec(rows, 2, width_ratios=[1.25, 1.0])
    several_machines = times["machine"].nunique() > 1 if not times.empty else False
    for index, ((machine, variant), group) in enumerate(panels):
        axis = figure.add_subplot(grid[index, 0])
        _epoch_panel(axis, group)
        size = group["size_label"].iloc[0]
        axis.set_title((f"{machine} · " if several_machines else "")
                       + f"variant {variant}, batch size {size}: seconds per epoch", fontsize=10)
    if not panels:
        axis = figure.add_subplot(grid[0, 0])
        axis.text(0.5, 0.5, "no trusted epoch times", ha="center", transform=axis.transAxes)
        axis.set_axis_off()
    _accuracy_panel(figure.add_subplot(grid[:, 1]), accuracy)
    machines = "" if several_machines or times.empty else f" on {times['machine'].iloc[0]}"
    figure.suptitle(f"{title}: training epochs{machines}", fontsize=11)
    legend_cells = pd.concat([times[["framework", "device_kind"]],
                              accuracy[["framework", "device_kind"]]]).drop_duplicates()
    figure.legend(handles=_legend_handles(legend_cells), loc="outside lower center",
                  ncol=min(len(legend_cells), 6), frameon=False)
    return _save(figure, path)


def _epoch_panel(axis: Axes, group: pd.DataFrame) -> None:
    for (framework, device), line in group.groupby(["framework", "device"], sort=False):
        kind = device_kind(device)
        color = style.framework_color(framework)
        axis.plot(line["epoch"], line["seconds"], color=color,
                  linestyle=style.DEVICE_LINESTYLES[kind], marker=style.DEVICE_MARKERS[kind],
                  markersize=4)
        first = line[line["epoch"] == 1]
        axis.scatter(first["epoch"], first["seconds"], marker="*", s=140, color=color,
                     edgecolor="black", linewidth=0.6, zorder=3)
    axis.axvspan(0.5, 1.5, color="#eeeeee", zorder=0)
    spread = group["seconds"].max() / max(group["seconds"].min(), 1e-12)
    if spread > 20:
        axis.set_yscale("log")
        _seconds_axis(axis.yaxis)
    else:  # linear: keep matplotlib's ticks, only say them in seconds
        axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: format_seconds(value)))
    axis.set_xlabel("epoch (1, starred = cold call: tracing, allocation)")
    axis.set_ylabel("seconds per epoch")
    epochs_run = sorted(int(epoch) for epoch in group["epoch"].unique())
    axis.set_xticks(epochs_run, ["1\ncold" if epoch == 1 else str(epoch) for epoch in epochs_run])
    axis.grid(alpha=0.3)


def _accuracy_panel(axis: Axes, accuracy: pd.DataFrame) -> None:
    if accuracy.empty:
        axis.text(0.5, 0.5, "no accuracy recorded", ha="center", transform=axis.transAxes)
        axis.set_axis_off()
        return
    several_machines = accuracy["machine"].nunique() > 1
    labels = [(f"{m}\n" if several_machines else "") + f"{v} · {f} · {d}" for m, v, f, d in zip(
        accuracy["machine"], accuracy["variant"], accuracy["framework"], accuracy["device"])]
    positions = np.arange(len(accuracy))
    for position, (_, row) in zip(positions, accuracy.iterrows()):
        ok = row["status"] == "ok"
        color = style.framework_color(row["framework"])
        axis.barh(position, row["accuracy"], color=color if ok else "none",
                  alpha=style.DEVICE_BAR_ALPHA[row["device_kind"]], height=0.7,
                  hatch=None if ok else "///", edgecolor=color)
        note = f"{row['accuracy']:.3f}" + ("" if ok else f" ({row['status']})")
        axis.text(min(row["accuracy"], 1.0) + 0.01, position, note, va="center", fontsize=8)
    axis.axvline(0.1, color="#777777", linestyle=":", linewidth=1)
    axis.text(0.1, 0.005, " chance", transform=axis.get_xaxis_transform(), fontsize=7.5,
              va="bottom", color="#555555")
    axis.set_xlim(0, 1.15)
    axis.set_yticks(positions, labels, fontsize=8.5)
    axis.invert_yaxis()
    axis.set_xlabel("test accuracy")
    sizes = sorted(set(accuracy["size_label"]) - {""})
    at = f" (batch size {', '.join(sizes)})" if sizes else ""
    axis.set_title(f"test accuracy after the last epoch{at}", fontsize=10)

"""Ratios: GPU speedup per framework and every framework pair's time ratio, per size.

Table: one row per (kind, row label, size). Figure: a heatmap per kind with the values written
in. No lines of its own: the numbers are in the figure, the verdicts in the other views.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

from harness.core.units import format_ratio, format_size
from harness.report.views import View

if TYPE_CHECKING:
    from matplotlib.axes import Axes


class RatiosView(View):
    """Speedups and framework-pair ratios of median times, as heatmaps."""

    name = "ratios"
    order = 70
    caption = "speedup ratios"

    def compute(self, context: Any) -> pd.DataFrame:
        return ratio_table(context.stats)

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        """Heatmaps of GPU speedup and framework-pair time ratios per size, values written in."""
        kinds = [kind for kind in RATIO_TITLES if (table["kind"] == kind).any()]
        if not kinds:
            return []
        import matplotlib.pyplot as plt

        from harness.report.figures import save

        several_machines = table["machine"].nunique() > 1
        grids = {kind: _ratio_grid(table[table["kind"] == kind], context.sweep, several_machines)
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
            axis.set_xlabel(context.sweep)
            axis.set_ylabel("")
        figure.suptitle(f"{context.name}: ratios of median times", fontsize=11)
        return [save(figure, out_dir / f"{context.stem}-ratios.png")]


def ratio_table(stats: pd.DataFrame) -> pd.DataFrame:
    """GPU speedup (CPU time / GPU time, same framework) and every framework pair's time ratio.

    One row per (kind, row label, size). A GPU-only variant is compared with the same
    framework's CPU cell of another variant, and the row label says which.
    """
    rows: list[RatioRow] = []
    valid = stats[stats["valid"]]
    for (experiment, machine), group in valid.groupby(["experiment", "machine"], sort=False):
        rows.extend(_gpu_speedups(experiment, machine, group))
        rows.extend(_framework_ratios(experiment, machine, group))
    return pd.DataFrame(rows, columns=["experiment", "machine", "kind", "label", "size_label",
                                       "size_value", "ratio"])


class RatioRow(TypedDict):
    """One ratio of median times: a GPU speedup or a framework pair's ratio, at one size."""

    experiment: str
    machine: str
    kind: str  # "gpu_speedup" or "framework_ratio"
    label: str
    size_label: str
    size_value: float
    ratio: float


def _gpu_speedups(experiment: str, machine: str, group: pd.DataFrame) -> list[RatioRow]:
    rows: list[RatioRow] = []
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
                      group: pd.DataFrame) -> list[RatioRow]:
    """Time of framework A / time of framework B for every pair, same device, variant, size."""
    names = list(dict.fromkeys(group["framework"]))
    rows: list[RatioRow] = []
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


# --- the figure --------------------------------------------------------------------------------

RATIO_TITLES = {
    "gpu_speedup": "GPU speedup = CPU time / GPU time, same framework (>1: GPU faster)",
    "framework_ratio": "time of A / time of B, same device and variant (>1: B faster)",
}


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
    import seaborn as sns
    from matplotlib.ticker import FuncFormatter

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

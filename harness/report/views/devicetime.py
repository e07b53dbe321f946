"""Where the time goes, measured: the two clocks per case, their attribution, the diagnosis.

Reads only columns (device_seconds, device_copy_seconds, kernels_per_call, ..., written by the
worker's device-busy pass) and run.json's ceilings; names no workload, framework or variant.
Per GPU case: copies and busy are measured on the device, compute (busy - copies) and host
overhead (wall - busy) are derived, and harness.measure.devicetime.diagnose names what bounds
the cell. CPU cases have one part, "compute (host)": nothing measures a split there. Also: a
figure per experiment, a sweep figure of wall and busy time per step for GPU cells, and the best
variant per device with the GPU-vs-CPU verdict between the best of each. Shown only for experiments
with at least one GPU case whose device-busy time was measured: a CPU-only report stays as it
was.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.casetable import PROFILE_COLUMNS
from harness.analysis.plausibility import bandwidth_limits, device_entry, flop_limits, precision_of
from harness.core.units import format_seconds, three_digits
from harness.data.casekey import CASE_COLUMNS
from harness.data.ceilings import MEMORY, Ceilings
from harness.data.serial import JsonValue
from harness.measure.devicetime import attribute, diagnose
from harness.report import style
from harness.report.figure import MEDIAN, Figure, case_subject, seconds_figure
from harness.report.summary import markdown_table
from harness.report.tables import at_headline, sort_cells
from harness.report.views import View, drawn, figure_link
from harness.report.views.crossover import COLD_FAMILY, COLD_IN_WARM

DEVICE_NUMBERS = ("device_seconds", "device_copy_seconds", "kernels_per_call",
                  "launches_per_call", "device_span_seconds")
PART_LABELS = {"copies_s": "host<->device copies (measured)",
               "compute_s": "device compute (busy - copies, derived)",
               "host_s": "host launch/dispatch/Python (wall - busy, derived)",
               "host_compute_s": "compute (host), not split"}
PART_COLORS = {"copies_s": "#0173B2", "compute_s": "#4D4D4D", "host_s": "#D55E00",
               "host_compute_s": "#949494"}
SWEEP_MIN_SIZES = 2
# Figure file suffix -> what it shows (its alt text in summary.md).
FIGURES = {"device-time": "where the time goes, measured", "busy-sweep": "wall vs device busy"}


class MeasuredTimeView(View):
    """Where the time goes, measured: the two clocks per case and what bounds each GPU cell."""

    name = "measured-time"
    order = 200
    heading = "Where the time goes, measured (two clocks)"

    def compute(self, context: Any) -> pd.DataFrame:
        table = attribution_table(context.stats, context.rows, context.machine_ceilings,
                                  context.hints)
        if table.empty or "busy_step_s" not in table or table["busy_step_s"].isna().all():
            return pd.DataFrame()
        return table

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        return drawn(attribution_figure(at_headline(table, context.headline), context.name,
                                        context.unit, out_dir / f"{context.stem}-device-time.png"),
                     busy_sweep_figure(table, context.name, context.sweep, context.unit,
                                       out_dir / f"{context.stem}-busy-sweep.png",
                                       context.framework_colors))

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        """The attribution table at the headline sizes, its figures, the best variants."""
        table, name, unit = at_headline(table, context.headline), context.name, context.unit
        if table.empty:
            return []
        lines = [DEVICETIME_HEADING.format(name=name), "", EXPLANATION, ""]
        lines += [f"![{kind}]({figure_link(path, out_dir)})" for suffix, kind in FIGURES.items()
                  for path in figures if path.name == f"{context.stem}-{suffix}.png"]
        records = []
        for _, row in table.iterrows():
            records.append([seconds_figure(MEDIAN, "wall per step", row["wall_step_s"],
                                           case_subject(name, row))])
            if pd.notna(row["cold_in_warm_calls"]):
                records[-1].append(Figure(COLD_FAMILY, COLD_IN_WARM, row["cold_in_warm_calls"],
                                          "x", _ratio(row["cold_in_warm_calls"]),
                                          case_subject(name, row)))
        lines += [""] + markdown_table(
            ["cell", "size", f"wall / {unit}", f"busy / {unit}", "busy share", "copies",
             "device compute", "host overhead", f"kernels / {unit}", "cold / warm",
             "diagnosis"], [_row_cells(row) for _, row in table.iterrows()], records)
        return lines + _best_lines(name, best_variants(context.stats)) + [""]


def device_numbers(prepared: pd.DataFrame) -> pd.DataFrame:
    """One row per case: its device figures (the same on every row of a case) and reason."""
    present = [column for column in DEVICE_NUMBERS if column in prepared.columns]
    frame = prepared[~prepared["cell_level"]][list(CASE_COLUMNS)].copy()
    for column in DEVICE_NUMBERS:
        source = prepared[column] if column in present else pd.Series(dtype=float)
        frame[column] = pd.to_numeric(source, errors="coerce")
    reasons = prepared["device_reason"] if "device_reason" in prepared.columns else ""
    frame["device_reason"] = pd.Series(reasons, index=frame.index).fillna("").astype(str)
    return frame.groupby(list(CASE_COLUMNS), sort=False).agg(
        {**{column: "first" for column in DEVICE_NUMBERS}, "device_reason": "first"}
    ).reset_index()


def attribution_table(stats: pd.DataFrame, prepared: pd.DataFrame,
                      ceilings_by_machine: dict[str, Ceilings],
                      hints: Mapping[str, JsonValue] | None = None) -> pd.DataFrame:
    """Per valid case: wall and busy per step, the parts, the cold extra and the diagnosis.

    `hints` are the workload's run.json hints: which ceiling bounds its byte rate, and each
    variant's precision (whose FLOP ceiling applies).
    """
    hints = hints or {}
    bandwidth = hints.get("bandwidth_ceiling")
    bandwidth_key = bandwidth if isinstance(bandwidth, str) and bandwidth else MEMORY
    stored = hints.get("variant_precision")
    precisions = ({str(variant): str(precision) for variant, precision in stored.items()}
                  if isinstance(stored, dict) else {})
    own = stats[stats["valid"]].drop(columns=[c for c in PROFILE_COLUMNS if c in stats])
    cases = own.merge(device_numbers(prepared), on=list(CASE_COLUMNS), how="left")
    rows = [_attributed(row, ceilings_by_machine.get(row["machine"]), bandwidth_key,
                        precisions) for _, row in cases.iterrows()]
    return sort_cells(pd.DataFrame(rows)) if rows else pd.DataFrame()


def _attributed(row: pd.Series, ceilings: Ceilings | None, bandwidth_key: str,
                precisions: dict[str, str]) -> dict[str, object]:
    steps = row["steps_per_call"] if row["steps_per_call"] > 0 else 1.0
    wall = row["call_median_s"]
    found = {key: row[key] for key in (*CASE_COLUMNS, "device_kind", "sweep", "size_value")}
    found.update(steps=steps, wall_step_s=wall / steps, reason=row.get("device_reason") or "",
                 cold_in_warm_calls=row["cold_call_s"] / wall if wall else float("nan"),
                 kernels_per_step=row["kernels_per_call"] / steps,
                 launches_per_step=row["launches_per_call"] / steps)
    busy = row["device_seconds"]
    if row["device_kind"] != "gpu" or pd.isna(busy):
        found.update(host_compute_s=(wall / steps) if row["device_kind"] != "gpu" else None,
                     diagnosis="", kind="")
        return found
    parts = attribute(wall, busy, _zero_if_nan(row["device_copy_seconds"]),
                      row["cold_call_s"])
    entry = device_entry(ceilings, row["device"])
    peak, _ = flop_limits(entry, precision_of(row["variant"], precisions))
    bandwidth, _ = bandwidth_limits(entry, bandwidth_key)
    verdict = diagnose(parts, row["kernels_per_call"], _positive(row["flops"]),
                       _positive(row["bytes"]), peak, bandwidth)
    found.update(busy_step_s=parts.busy_s / steps, busy_share=parts.busy_share,
                 copies_s=parts.copies_s / steps, compute_s=parts.compute_s / steps,
                 host_s=parts.host_s / steps, cold_extra_s=parts.cold_extra_s,
                 diagnosis=verdict.text, kind=verdict.kind)
    return found


def _zero_if_nan(value: Any) -> float:
    return 0.0 if pd.isna(value) else float(value)


def _positive(value: Any) -> float | None:
    return float(value) if pd.notna(value) and value > 0 else None


# --- best variant per device ------------------------------------------------------------------

def best_variants(stats: pd.DataFrame) -> pd.DataFrame:
    """Per machine, framework and size: the first variant (as written) and the fastest, per
    device kind, and the best GPU time against the best CPU time."""
    rows = []
    valid = stats[stats["valid"]]
    first_variant = dict.fromkeys(stats["variant"])
    for key, group in valid.groupby(["experiment", "machine", "framework", "size_label"],
                                    sort=False):
        kinds = {kind: own.sort_values("median_s") for kind, own in
                 group.groupby("device_kind", sort=False)}
        row = dict(zip(["experiment", "machine", "framework", "size_label"], key))
        for kind, own in kinds.items():
            written = own[own["variant"] == next(iter(first_variant))]
            row[f"{kind}_written_s"] = written["median_s"].min() if not written.empty else None
            row[f"{kind}_best_s"] = own["median_s"].iloc[0]
            row[f"{kind}_best_variant"] = own["variant"].iloc[0]
        if "gpu" in kinds and "cpu" in kinds:
            row["gpu_speedup"] = row["cpu_best_s"] / row["gpu_best_s"]
        rows.append(row)
    return pd.DataFrame(rows)


# --- figures ----------------------------------------------------------------------------------

def attribution_figure(table: pd.DataFrame, title: str, unit: str, path: Path) -> Path | None:
    """Stacked shares of a warm call per case: measured copies, derived compute and host."""
    if table.empty:
        return None
    import matplotlib.pyplot as plt
    import numpy as np

    from harness.report.figures import save

    parts = [part for part in PART_LABELS if part in table and table[part].notna().any()]
    labels = [f"{row['framework']} {row['device']} {row['variant']} @ {row['size_label']}"
              for _, row in table.iterrows()]
    figure, axis = plt.subplots(figsize=(9.0, 1.4 + 0.42 * len(labels)))
    positions, left = np.arange(len(labels)), np.zeros(len(labels))
    for part in parts:
        share = (table[part] / table["wall_step_s"]).fillna(0.0).to_numpy(dtype=float)
        axis.barh(positions, 100 * share, left=100 * left, color=PART_COLORS[part],
                  label=PART_LABELS[part])
        left += share
    for position, (_, row) in zip(positions, table.iterrows()):
        cold = row["cold_in_warm_calls"]
        note = f" {format_seconds(row['wall_step_s'])}/{unit}" + (
            f", cold = {cold:.3g} warm calls" if pd.notna(cold) else "")
        axis.text(100 * max(left[position], 0.01), float(position), note, va="center",
                  fontsize="small")
    axis.set_yticks(positions, labels)
    axis.invert_yaxis()
    axis.set_xlim(0, 160)
    axis.set_xticks([0, 25, 50, 75, 100])
    axis.set_xlabel(f"share of the warm wall time per {unit} (%)")
    axis.set_title(f"{title}: where the time goes, measured (device profiler + wall clock)",
                   fontsize=10)
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.6 / len(labels) - 0.15),
                ncol=2, fontsize="small", frameon=False)
    return save(figure, path)


def busy_sweep_figure(table: pd.DataFrame, title: str, sweep: str, unit: str,
                      path: Path, colors: Mapping[str, str]) -> Path | None:
    """Wall and device-busy time per step against the sweep size, per GPU cell."""
    gpu = table[table.get("busy_step_s", pd.Series(dtype=float)).notna()] if not table.empty \
        else table
    if gpu.empty:
        return None
    series = [(key, group.sort_values("size_value")) for key, group in
              gpu.groupby(["machine", "framework", "variant", "device"], sort=False)
              if group["size_value"].nunique() >= SWEEP_MIN_SIZES]
    if not series:
        return None
    import matplotlib.pyplot as plt

    from harness.report.figures import save

    figure, axis = plt.subplots(figsize=(8.0, 5.0))
    several_machines = gpu["machine"].nunique() > 1
    for index, ((machine, framework, variant, device), group) in enumerate(series):
        color = style.OTHER_COLORS[index % len(style.OTHER_COLORS)] if index else \
            style.framework_color(framework, colors)
        name = f"{framework} {device} {variant}" + (f" ({machine})" if several_machines else "")
        axis.plot(group["size_value"], group["wall_step_s"], "-o", color=color,
                  label=f"{name}: wall")
        axis.plot(group["size_value"], group["busy_step_s"], "--s", color=color,
                  label=f"{name}: device busy")
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel(sweep)
    axis.set_ylabel(f"seconds per {unit}")
    axis.set_title(f"{title}: wall vs device-busy time per {unit} (GPU cells)", fontsize=10)
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize="x-small")
    return save(figure, path)


# --- summary.md -------------------------------------------------------------------------------

EXPLANATION = (
    "Two clocks per case. Measured: the wall time per call (the harness's clock, warm median), "
    "the device-busy time and the host<->device copies on the device (a separate profiled pass "
    "after the timed samples: kernels', copies' and memsets' own durations, overlaps counted "
    "once; a long call's first steps, scaled to the whole call by the share profiled), the "
    "kernels executed, and the cold first call. Derived: device compute = busy - "
    "copies; host launch/dispatch/Python = wall - busy. CPU cells are 'compute (host)', not "
    "split. The variant-difference breakdown elsewhere in this report is a cross-check.")


# The section's words; the audit reads the records (harness.audit.medians), never these.
DEVICETIME_HEADING = "### {name}: where the time goes, measured"
BEST_INTRO = "Best variant per device, and GPU vs CPU between the best of each:"
# The best-per-device table's figures (family BEST_FAMILY): per kind the as-written and the
# best variant's fastest median, and the speedup of the best GPU over the best CPU.
BEST_FAMILY = "best per device"
WRITTEN, BEST, FASTER = "as written", "best", "faster by"


def _row_cells(row: pd.Series) -> list[str]:
    cell = f"{row['framework']} {row['device']} {row['variant']}"
    if pd.isna(row.get("busy_step_s")):
        what = "compute (host)" if row["device_kind"] != "gpu" else "not measured"
        return [cell, str(row["size_label"]), format_seconds(row["wall_step_s"]), "-", "-",
                "-", what, "-", "-", _ratio(row["cold_in_warm_calls"]),
                (row["reason"] or "").replace("|", "/")]
    return [cell, str(row["size_label"]), format_seconds(row["wall_step_s"]),
            format_seconds(row["busy_step_s"]), f"{100 * row['busy_share']:.0f}%",
            format_seconds(row["copies_s"]), format_seconds(row["compute_s"]),
            format_seconds(row["host_s"]), three_digits(row["kernels_per_step"]),
            _ratio(row["cold_in_warm_calls"]), row["diagnosis"].replace("|", "/")]


def _ratio(value: Any) -> str:
    return "-" if pd.isna(value) else f"{three_digits(value)}x"  # never 1.2e+03x


def _best_lines(experiment: str, best: pd.DataFrame) -> list[str]:
    if best.empty or "gpu_speedup" not in best:
        return []
    rows, records = [], []
    for _, row in best[best["gpu_speedup"].notna()].iterrows():
        figures = _best_figures(experiment, row)
        rows.append([row["framework"], str(row["size_label"]),
                     figures["cpu", WRITTEN].text if ("cpu", WRITTEN) in figures else "-",
                     f"{figures['cpu', BEST].text} ({row['cpu_best_variant']})",
                     figures["gpu", WRITTEN].text if ("gpu", WRITTEN) in figures else "-",
                     f"{figures['gpu', BEST].text} ({row['gpu_best_variant']})",
                     f"{'GPU' if row['gpu_speedup'] >= 1 else 'CPU'} {figures[FASTER].text}x "
                     "faster"])
        records.append(list(figures.values()))
    return [BEST_INTRO, ""] + markdown_table(
        ["framework", "size", "CPU as written", "CPU best", "GPU as written", "GPU best",
         "verdict"], rows, records)[:-1]


def _best_figures(experiment: str, row: pd.Series) -> dict[Any, Figure]:
    """The records of one best-per-device row: per kind, as written and best; the speedup."""
    where = {"experiment": experiment, "machine": str(row["machine"]),
             "framework": str(row["framework"]), "size": str(row["size_label"])}
    found: dict[Any, Figure] = {}
    for kind in ("cpu", "gpu"):
        written = row.get(f"{kind}_written_s")
        if written is not None and pd.notna(written):
            found[kind, WRITTEN] = seconds_figure(BEST_FAMILY, f"{kind} {WRITTEN}", written,
                                                  {**where, "kind": kind})
        found[kind, BEST] = seconds_figure(BEST_FAMILY, f"{kind} {BEST}", row[f"{kind}_best_s"],
                                           {**where, "kind": kind,
                                            "variant": str(row[f"{kind}_best_variant"])})
    speedup = row["gpu_speedup"]
    shown = speedup if speedup >= 1 else 1 / speedup
    found[FASTER] = Figure(BEST_FAMILY, FASTER, shown, "x", f"{shown:.3g}",
                           {**where, "kind": "gpu" if speedup >= 1 else "cpu"})
    return found

"""GPU vs CPU: where the GPU overtakes the CPU over the sweep, and why it loses below that.

Table: one verdict per (experiment, machine, variant) and pair compared (best GPU cell vs best
CPU cell, and each framework's GPU cell vs its own CPU cell). Figure: time and throughput vs
size with the crossover marked. Lines: the verdict table, why the GPU loses at small sizes (a
flat per-call cost) and the cold-start cost; the at-a-glance sentence per machine.

Every number here (verdicts, noise, predictions, flat GPU time) comes from
harness.analysis.crossover, which run.json's stored predictions come from too; this module
only phrases and draws them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.analysis.crossover import crossovers, flat_time_below_crossover
from harness.analysis.verdictline import Topic, VerdictLine
from harness.core.units import device_kind, format_ratio, format_seconds, format_size
from harness.data.casekey import CELL_COLUMNS
from harness.data.ceilings import MEMORY, Ceilings
from harness.report import style
from harness.report.figure import Figure, Line, carried, figures_in
from harness.report.summary import markdown_table
from harness.report.tables import ceiling_for, flop_ceiling
from harness.report.views import View, drawn

if TYPE_CHECKING:
    from matplotlib.axes import Axes

class CrossoverView(View):
    """When does the GPU win: the crossover verdicts, drawn and explained."""

    name = "crossover"
    order = 20
    caption = "time and throughput vs size"

    def compute(self, context: Any) -> pd.DataFrame:
        return crossovers(context.stats, context.hints)

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        return drawn(crossover_figure(
            context.stats, table, context.name, context.sweep, context.unit, context.ceilings,
            out_dir / f"{context.stem}-crossover.png", context.framework_colors,
            context.hints.get("bandwidth_ceiling", MEMORY)))

    def when_empty(self, context: Any) -> list[str]:
        return gpu_section(context, pd.DataFrame(), pd.DataFrame())

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        flat = flat_time_below_crossover(context.stats, table) if not table.empty \
            else pd.DataFrame()
        return gpu_section(context, table, flat)

    def glance(self, table: pd.DataFrame, context: Any) -> list[str]:
        best = table[table["framework"] == "best"] if not table.empty else table
        machines = best.groupby("machine", sort=False) if not best.empty else []
        return [carried(f"on {machine}: {sentence}", sentence) for machine, group in machines
                for sentence in [machine_gpu_sentence(context, group)]]

    def verdict(self, table: pd.DataFrame, context: Any) -> list[str]:
        return [line.text for line in self.verdict_lines(table, context)]

    def verdict_lines(self, table: pd.DataFrame, context: Any) -> list[VerdictLine]:
        """Per machine, its GPU-vs-CPU lines: Topic.NO_GPU where no GPU cell measured there
        (the CLI puts the predicted GPU step under it), else Topic.GPU_VS_CPU."""
        best = table[table["framework"] == "best"] if not table.empty else table
        machines = best.groupby("machine", sort=False) if not best.empty else []
        return [VerdictLine(f"GPU vs CPU on {machine}: {line}",
                            Topic.GPU_VS_CPU if group["has_gpu"].any() else Topic.NO_GPU)
                for machine, group in machines for line in machine_gpu_lines(context, group)]


# --- summary.md -------------------------------------------------------------------------------

def machine_gpu_sentence(context: Any, group: pd.DataFrame) -> str:
    """The GPU-vs-CPU verdict of one machine in one sentence, per variant."""
    if not group["has_gpu"].any():
        return "no GPU cell measured (CPU only)"
    if not group["has_cpu"].any():
        return "no CPU cell measured"
    verdicts = _variant_verdicts(context, group)
    parts = [label + measured + (f"; {prediction}" if prediction else "") + excluded
             for label, measured, prediction, excluded in verdicts]
    return carried("; ".join(parts) or "no size measured on both CPU and GPU",
                   *(measured for _label, measured, _prediction, _excluded in verdicts))


def machine_gpu_lines(context: Any, group: pd.DataFrame) -> list[str]:
    """The same verdict for the terminal: one line per variant measured, the prediction on a
    line of its own ('predicted from torch's costs: ...'), so that each fits two lines."""
    if not (group["has_gpu"].any() and group["has_cpu"].any()):
        return [machine_gpu_sentence(context, group)]
    lines = []
    for label, measured, prediction, excluded in _variant_verdicts(context, group):
        lines.append(label + measured + excluded)
        if prediction:
            lines.append(f"{label}{prediction}")
    return lines or [machine_gpu_sentence(context, group)]


def _variant_verdicts(context: Any, group: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    """(variant label, the measured verdict, the prediction, the cells left out) per variant
    measured on both devices; the measured verdict a Line with its figure records."""
    verdicts: list[tuple[str, str, str, str]] = []
    comparable = group[group["kind"] != "no-overlap"]
    for _, row in comparable.iterrows():
        figures = gpu_figures(context, row)
        text = figures[GPU_VERDICT].text
        if GPU_SPEEDUP in figures:
            where = (f" at {context.sweep}={figures[LARGEST_SIZE].text}"
                     if LARGEST_SIZE in figures else "")
            text += SPEEDUP_PHRASE.format(ratio=figures[GPU_SPEEDUP].text, where=where)
        label = f"variant {row['variant']}: " if group["variant"].nunique() > 1 else ""
        if row["cpu_is_other_variant"]:
            text += " vs the best CPU cell of any variant"
        text = Line(text + str(row.get("noise") or ""), figures.values())
        prediction = row.get("prediction")
        predicted = ""
        if prediction is not None and not (isinstance(prediction, float) and pd.isna(prediction)):
            predicted = prediction.short_text(context.sweep, str(row.get("predicted_from")))
        verdicts.append((label, text, predicted, _excluded_phrase(row)))
    return verdicts


def _excluded_phrase(row: pd.Series) -> str:
    excluded = list(row.get("excluded") or [])
    if not excluded:
        return ""
    return f" (no verdict where a cell failed: {'; '.join(excluded)})"


def gpu_section(context: Any, verdicts: pd.DataFrame, flat: pd.DataFrame) -> list[str]:
    """The GPU vs CPU table of one experiment, then why the GPU loses and the cold start."""
    if verdicts.empty or not verdicts["has_gpu"].any():
        return [GPU_HEADING, "", ("No GPU cell has a valid time in these runs, so there "
                                       "is no GPU/CPU comparison."), ""]
    sweep = context.sweep
    rows, records = [], []
    for (machine, variant), group in verdicts.groupby(["machine", "variant"], sort=False):
        best_text = None
        for _, row in group.iterrows():
            if not (row["has_gpu"] and row["has_cpu"]) or row["kind"] == "no-overlap":
                continue
            figures = gpu_figures(context, row)
            text = figures[GPU_VERDICT].text
            if row["framework"] == "best":
                best_text = text
            elif text == best_text:
                continue  # the same answer as the best-vs-best line: no need to repeat it
            who = ("best GPU cell vs best CPU cell" if row["framework"] == "best" else
                   f"{row['framework']} GPU vs {row['framework']} CPU")
            if row["cpu_is_other_variant"]:
                who += " (CPU of the other variants)"
            speedup = figures[GPU_SPEEDUP].text if GPU_SPEEDUP in figures else "-"
            if LARGEST_SIZE in figures:
                speedup += f" at {figures[LARGEST_SIZE].text}"
            rows.append([machine, variant, who, text + _excluded_phrase(row), speedup,
                         _prediction_text(row, sweep)])
            records.append(list(figures.values()))
    lines = [GPU_HEADING, ""]
    if rows:
        lines += markdown_table(["machine", "variant", "compared", "verdict",
                                 f"GPU speedup at the largest {sweep}",
                                 "predicted from the measured costs"], rows, records)
    lines += _why_lines(context, flat)
    return lines + [""]


# A GPU-vs-CPU pair's figures (family GPU_FAMILY, harness.audit.gpucpu), by name: the verdict
# (its kind in the subject, its value the sizes compared on both devices), the crossover size,
# the speedup at the largest size compared on both, and that size.
GPU_FAMILY = "gpu vs cpu"
GPU_HEADING = "### GPU vs CPU"
SPEEDUP_PHRASE = " (GPU/CPU speedup {ratio}{where})"
GPU_VERDICT, CROSSOVER_SIZE = "GPU vs CPU verdict", "crossover size"
GPU_SPEEDUP, LARGEST_SIZE = "GPU/CPU speedup at the largest size", "largest size compared"
EVERY_VARIANT = "every variant"  # the subject's "cpu" where the CPU side is any variant's


def gpu_figures(context: Any, row: pd.Series) -> dict[str, Figure]:
    """The records of one pair's verdict row (crossovers), by name."""
    sweep = context.sweep
    subject = {"experiment": context.name, "machine": row["machine"], "variant": row["variant"],
               "framework": "" if row["framework"] == "best" else row["framework"],
               "cpu": EVERY_VARIANT if row["cpu_is_other_variant"] else "own variant",
               "verdict": row["kind"]}
    found = {GPU_VERDICT: Figure(GPU_FAMILY, GPU_VERDICT, float(row["sizes_compared"]), "sizes",
                                 row["verdict"].text(sweep), subject)}
    if row["kind"] == "crossover":
        found[CROSSOVER_SIZE] = Figure(GPU_FAMILY, CROSSOVER_SIZE, float(row["size"]), sweep,
                                       format_size(row["size"], sweep), subject)
    if pd.notna(row["speedup_at_largest"]):
        found[GPU_SPEEDUP] = Figure(GPU_FAMILY, GPU_SPEEDUP, float(row["speedup_at_largest"]),
                                    "x", format_ratio(row["speedup_at_largest"]), subject)
        if row["largest_size"]:
            found[LARGEST_SIZE] = Figure(GPU_FAMILY, LARGEST_SIZE, float(row["largest_size"]),
                                         sweep, format_size(row["largest_size"], sweep), subject)
    return found


def _prediction_text(row: pd.Series, sweep: str) -> str:
    prediction = row.get("prediction")
    if prediction is None or (isinstance(prediction, float) and pd.isna(prediction)):
        return "-"
    source = row.get("predicted_from")
    return (f"{source}'s costs: " if isinstance(source, str) and source else "") \
        + prediction.text(sweep)


def _why_lines(context: Any, flat: pd.DataFrame) -> list[str]:
    lines: list[str] = []
    sweep = context.sweep
    for _, row in flat.iterrows():
        subject = {"experiment": context.name, "machine": row["machine"],
                   "variant": row["variant"], "framework": row["framework"],
                   "from": format_size(row["from_size"], sweep),
                   "to": format_size(row["to_size"], sweep)}
        work, time, level = (Figure(FLAT_FAMILY, name, value, unit, text, subject) for
                             name, value, unit, text in (
            (WORK_GROWTH, row["work_growth"], "x", f"{row['work_growth']:,.0f}"),
            (TIME_GROWTH, row["time_growth"], "x", f"{row['time_growth']:.2g}"),
            (FLAT_LEVEL, row["level_s"], "s", format_seconds(row["level_s"]))))
        lines.append(Line(WHY_LINE.format(
            framework=row["framework"], variant=row["variant"], machine=row["machine"],
            sweep=sweep, low=subject["from"], high=subject["to"], work=work.text,
            time=time.text, level=level.text, unit=context.unit), (work, time, level)))
    lines += _cold_lines(context)
    return lines


# Why the GPU loses at small sizes (family FLAT_FAMILY, harness.audit.medians): how much the work
# and the GPU time grew over the flat span of sizes its subject names, and the level it stayed at.
FLAT_FAMILY = "flat gpu time"
WORK_GROWTH, TIME_GROWTH, FLAT_LEVEL = "work growth", "GPU time growth", "flat level"
WHY_LINE = ("- Why the GPU loses at small sizes ({framework}, {variant}, {machine}): from "
            "{sweep}={low} to {high} the work grows {work}x but the GPU time per {unit} only "
            "{time}x, ~flat at {level}: a fixed per-call cost (kernel launch, synchronisation, "
            "framework dispatch), not compute.")


# A cell's first call against a warm one, per machine and device kind; the audit reads the
# records (family COLD_FAMILY), not these words.
COLD_FAMILY = "cold start"
COLD_IN_WARM = "cold / warm"  # a case's first call in warm calls (the device-time table)
COLD_LINE = ("- Cold start on {machine} ({kind}): the first {call} of a cell took up to {cold} "
             "({cell}) vs {warm} for a warm {call}: one-time setup (context creation, kernel "
             "selection, tracing, compilation), excluded from the medians.")


def _cold_lines(context: Any) -> list[str]:
    """First-call cost per device kind, from each cell's first (smallest) case."""
    valid = context.stats[context.stats["valid"] & context.stats["cold_call_s"].notna()]
    if valid.empty:
        return []
    first = valid.sort_values(["size_value", "size_label"]).groupby(list(CELL_COLUMNS),
                                                                    sort=False).head(1)
    lines: list[str] = []
    for (machine, kind), group in first.groupby(["machine", "device_kind"], sort=False):
        worst = group.sort_values("cold_call_s").iloc[-1]
        subject = {"experiment": context.name, "machine": machine, "kind": kind,
                   "framework": worst["framework"], "device": worst["device"],
                   "variant": worst["variant"]}
        cold, warm = (Figure(COLD_FAMILY, name, float(worst[column]), "s",
                             format_seconds(worst[column]), subject)
                      for name, column in (("cold call", "cold_call_s"),
                                           ("warm call median", "call_median_s")))
        lines.append(Line(COLD_LINE.format(
            machine=machine, kind=kind.upper(), call=context.call_name, cold=cold.text,
            cell=f"{worst['framework']} {worst['device']} {worst['variant']}",
            warm=warm.text), (cold, warm, *figures_in(context.call_name))))
    return lines


# --- the figure --------------------------------------------------------------------------------

def crossover_figure(stats: pd.DataFrame, verdicts: pd.DataFrame, title: str, sweep: str,
                     unit: str, ceilings: dict[str, Ceilings], path: Path,
                     colors: Mapping[str, str], bandwidth_key: str = MEMORY) -> Path | None:
    """Time (and throughput) vs size, log-log, median line with IQR band, crossover marked;
    each framework in its colour in COLORS (the report's)."""
    import matplotlib.pyplot as plt

    from harness.report.figures import PANEL_WIDTH, legend_handles, save, seconds_axis, size_axis

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
                            "q3_s", colors))
        _mark_failed(row_axes[0], stats[(stats["machine"] == machine)
                                         & (stats["variant"] == variant) & ~stats["valid"]
                                         & stats["size_value"].notna()], colors)
        verdict = _verdict(verdicts, machine, variant)
        faded = sorted(set(reference["variant"]))
        _mark_crossover(row_axes[0], verdict)
        _draw_predictions(row_axes[0], verdicts, machine, variant, group["size_value"].min(),
                          colors)
        row_axes[0].set_ylabel(f"median time per {unit}")
        seconds_axis(row_axes[0].yaxis)
        notes = [_crossover_text(verdict, sweep)]
        if faded:
            notes.append(f"faded: CPU cells of variant {', '.join(faded)}")
        row_axes[0].set_title(f"{machine} · variant {variant}: time\n"
                              + "\n".join(note for note in notes if note), fontsize=9.5)
        for axis, rate in zip(row_axes[1:], rates):
            _rate_panel(axis, pd.concat([group, reference]), rate, ceilings.get(machine),
                        bandwidth_key, colors)
            axis.set_title(f"{machine} · variant {variant}: "
                           f"{'compute' if rate == 'gflops' else 'bytes'} throughput", fontsize=10)
        for axis in row_axes:
            axis.set_xscale("log")
            size_axis(axis.xaxis, sweep, sizes)
    for axis in axes[-1]:
        axis.set_xlabel(f"{sweep} (log scale)")
    legend_cells = pd.concat(drawn).drop_duplicates()
    figure.legend(handles=legend_handles(legend_cells, colors), loc="outside lower center",
                  ncol=min(len(legend_cells), 6), frameon=False)
    figure.suptitle(f"{title}: when does the GPU win? lines: median, bands: IQR, "
                    "dotted: crossover; thin dashes: fitted costs, dash-dot: predicted "
                    "crossover", fontsize=11)
    return save(figure, path)


def _draw_predictions(axis: Axes, verdicts: pd.DataFrame, machine: str, variant: str,
                      smallest: float, colors: Mapping[str, str]) -> None:
    """Each framework's fitted cost curves, thin and dashed, carried past the sizes measured
    to its predicted crossover, which gets a dash-dot line apart from the measured one."""
    import numpy as np

    rows = verdicts[(verdicts["machine"] == machine) & (verdicts["variant"] == variant)
                    & (verdicts["framework"] != "best")]
    for _, row in rows.iterrows():
        prediction = row.get("prediction")
        if prediction is None or prediction.cpu is None or prediction.gpu is None:
            continue
        largest = prediction.largest_measured
        end = largest * 4
        if prediction.size is not None:
            end = max(end, min(prediction.size * 2, largest * 1000))
        sizes = np.geomspace(smallest, end, 200)
        color = style.framework_color(row["framework"], colors)
        for model in (prediction.cpu, prediction.gpu):
            axis.plot(sizes, [model.seconds(size) for size in sizes], color=color,
                      linestyle=(0, (3, 2)), linewidth=0.8, alpha=0.6)
        if prediction.kind == "crossover" and prediction.size is not None:
            axis.axvline(prediction.size, color=color, linestyle="-.", linewidth=1.0,
                         alpha=0.8)
            axis.annotate(f"predicted ({row['framework']})", (prediction.size, 0.97),
                          xycoords=axis.get_xaxis_transform(), rotation=90, fontsize=7,
                          color=color, ha="right", va="top")


def _mark_failed(axis: Axes, failed: pd.DataFrame, colors: Mapping[str, str]) -> None:
    """Failed cases stay visible: a cross at their (untrusted) time, or at the axis floor.

    Why: a point that silently vanishes reads as "not measured" and moves the crossover.
    """
    for _, row in failed.iterrows():
        color = style.framework_color(row["framework"], colors)
        if pd.notna(row["median_s"]):
            axis.plot(row["size_value"], row["median_s"], marker="x", color=color,
                      markersize=9, markeredgewidth=2, linestyle="none")
            axis.annotate(f"{row['status']}", (row["size_value"], row["median_s"]),
                          xytext=(4, 4), textcoords="offset points", fontsize=7, color=color)
        else:
            # x at the case's size, y near the bottom of the axes
            axis.annotate(f"{row['device']} {row['status']}", (row["size_value"], 0.02),
                          xycoords=axis.get_xaxis_transform(), fontsize=7, color=color,
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


def _lines(axis: Axes, rows: pd.DataFrame, center: str, low: str, high: str,
           colors: Mapping[str, str]) -> pd.DataFrame:
    """One median line with an IQR band per framework x device (x variant when faded)."""
    rows = _with_faded(rows)
    keys = ["framework", "device", "variant", "faded"]
    for (framework, device, _variant, faded), line in rows.groupby(keys, sort=False):
        line = line.sort_values("size_value")
        kind = device_kind(device)
        color = style.framework_color(framework, colors)
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


def _rate_panel(axis: Axes, rows: pd.DataFrame, rate: str, ceilings: Ceilings | None,
                bandwidth_key: str, colors: Mapping[str, str]) -> None:
    from harness.report.figures import format_rate, log_labels

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
    _lines(axis, rows, "rate", "rate_low", "rate_high", colors)
    axis.set_ylabel("GFLOP/s" if rate == "gflops" else "GB/s")
    log_labels(axis.yaxis, format_rate)
    variant = str(rows.loc[~rows["faded"], "variant"].iloc[0]) if (~rows["faded"]).any() \
        else str(rows["variant"].iloc[0])
    for device in rows["device"].unique():
        peak = (flop_ceiling(ceilings, device, variant) if rate == "gflops" else ceiling_for(
            ceilings, device, bandwidth_key))
        if peak:
            axis.axhline(peak, color="#555555", linestyle=style.DEVICE_LINESTYLES[
                device_kind(device)], linewidth=0.8)
            # x near the left of the axes, y at the peak
            axis.annotate(f"{device} measured peak", (0.02, peak),
                          xycoords=axis.get_yaxis_transform(), xytext=(0, 2),
                          textcoords="offset points", fontsize=7.5)

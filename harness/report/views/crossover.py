"""GPU vs CPU: where the GPU overtakes the CPU over the sweep, and why it loses below that.

Table: one verdict per (experiment, machine, variant) and pair compared (best GPU cell vs best
CPU cell, and each framework's GPU cell vs its own CPU cell). Figure: time and throughput vs
size with the crossover marked. Lines: the verdict table, why the GPU loses at small sizes (a
flat per-call cost) and the cold-start cost; the at-a-glance sentence per machine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.analysis.noise import GapVerdict
from harness.analysis.predict import SweepPoint, predict
from harness.core.units import device_kind, format_ratio, format_seconds, format_size
from harness.report import style
from harness.report.summary import markdown_table
from harness.report.tables import (
    CELL_KEYS,
    ceiling_for,
    excluded_cases,
    first_text,
    flop_ceiling,
    gap_verdict,
)
from harness.report.views import View

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# "Flat" per-call time: the work grows by at least this factor while time less than doubles.
FLAT_WORK_GROWTH = 8.0
FLAT_TIME_GROWTH = 2.0


class CrossoverView(View):
    """When does the GPU win: the crossover verdicts, drawn and explained."""

    name = "crossover"
    order = 20
    caption = "time and throughput vs size"

    def compute(self, context: Any) -> pd.DataFrame:
        return crossovers(context.stats, context.hints)

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        path = crossover_figure(
            context.stats, table, context.name, context.sweep, context.unit, context.ceilings,
            out_dir / f"{context.stem}-crossover.png",
            context.hints.get("bandwidth_ceiling", "bandwidth_gbps"))
        return [path] if path is not None else []

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
        return [f"on {machine}: " + machine_gpu_sentence(context, group)
                for machine, group in machines]


# --- the verdicts ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Crossover:
    """Where GPU time drops below CPU time over a sweep.

    kind: 'crossover' (GPU faster from `size` up), 'gpu-always', 'cpu-always', 'mixed' (no
    size from which the GPU stays ahead though it leads somewhere), or 'no-overlap'.
    """

    kind: str
    size: float | None = None
    sizes_compared: int = 0

    def text(self, sweep: str) -> str:
        if self.sizes_compared == 1 and self.kind in ("gpu-always", "cpu-always"):
            faster = "GPU" if self.kind == "gpu-always" else "CPU"
            return f"{faster} faster at the one size measured"
        if self.kind == "crossover":
            return f"GPU faster from {sweep}={format_size(self.size, sweep)} up"
        if self.kind == "gpu-always":
            return f"GPU faster at every {sweep} measured"
        if self.kind == "cpu-always":
            return f"no crossover in range: CPU faster at every {sweep} measured"
        if self.kind == "mixed":
            return "no crossover in range: GPU leads only at some sizes, not the largest"
        return "no sizes measured on both CPU and GPU"


def find_crossover(curves: pd.DataFrame) -> Crossover:
    """Crossover from a table with columns size, cpu_s, gpu_s (one row per size).

    The crossover is the smallest size from which the GPU is faster at every larger size
    measured on both; a lead that is lost again at larger sizes is not a crossover.
    """
    both = curves.dropna(subset=["size", "cpu_s", "gpu_s"]).sort_values("size")
    if both.empty:
        return Crossover("no-overlap")
    gpu_faster = list(both["gpu_s"] < both["cpu_s"])
    sizes = list(both["size"])
    if all(gpu_faster):
        return Crossover("gpu-always", sizes[0], len(sizes))
    if not any(gpu_faster):
        return Crossover("cpu-always", None, len(sizes))
    if not gpu_faster[-1]:
        return Crossover("mixed", None, len(sizes))
    last_slower = max(index for index, faster in enumerate(gpu_faster) if not faster)
    return Crossover("crossover", sizes[last_slower + 1], len(sizes))


def _curve(stats: pd.DataFrame) -> pd.Series:
    """size -> median for valid cases, the fastest row per size.

    A case outside the sweep (size_label "", e.g. a variant that runs one fixed case beside
    a sweep) counts as one point at size 0, so CPU and GPU still compare there.
    """
    valid = stats[stats["valid"]]
    fixed = valid["size_label"] == ""
    valid = valid[valid["size_value"].notna() | fixed]
    return valid.groupby(valid["size_value"].where(~fixed, 0.0))["median_s"].min()


def crossovers(stats: pd.DataFrame, hints: dict[str, Any] | None = None) -> pd.DataFrame:
    """GPU vs CPU verdicts per experiment, machine and variant.

    Pairs: the best GPU cell vs the best CPU cell at each size ('best'), and each framework's
    GPU cell vs its own CPU cell. A device-only variant (a GPU precision mode, pinned copies)
    has no CPU cell of its own, and a variant the workload names in `cpu_baseline_any_variant`
    asks "GPU this way vs the best CPU way" (seed 4: copies on the GPU vs a plain CPU library):
    both are compared with the CPU cells of every variant on that machine. Sizes where a cell
    failed are not compared; the pair lists them in `excluded` so the summary can say why there
    is no verdict there.
    """
    any_variant = set((hints or {}).get("cpu_baseline_any_variant") or [])
    rows = []
    for (experiment, machine, variant), group in stats.groupby(
            ["experiment", "machine", "variant"], sort=False):
        machine_rows = stats[(stats["experiment"] == experiment) & (stats["machine"] == machine)]
        own_cpu = (group["device_kind"] == "cpu").any() and variant not in any_variant
        cpu_pool = group if own_cpu else machine_rows
        gpu = group[group["device_kind"] == "gpu"]
        cpu = cpu_pool[cpu_pool["device_kind"] == "cpu"]
        sweep = first_text(group["sweep"])
        base = {"experiment": experiment, "machine": machine, "variant": variant, "sweep": sweep,
                "cpu_is_other_variant": cpu_pool is machine_rows}
        best = {**base, "framework": "best", **_pair(_curve(cpu), _curve(gpu), cpu, gpu)}
        rows.append(best)
        for framework, gpu_fw in gpu.groupby("framework", sort=False):
            cpu_fw = cpu[cpu["framework"] == framework]
            rows.append({**base, "framework": framework,
                         **_pair(_curve(cpu_fw), _curve(gpu_fw), cpu_fw, gpu_fw),
                         "prediction": predicted(cpu_fw, gpu_fw)})
        best["prediction"], best["predicted_from"] = _best_prediction(rows, gpu)
    return pd.DataFrame(rows)


# --- the predicted crossover (harness.analysis.predict) -----------------------------------------

def sweep_points(cases: pd.DataFrame) -> list[SweepPoint]:
    """One device's measured curve as the predictor reads it: per call, valid sizes only.

    Per call, not per step: FLOPs, launches and device-busy time are counted per call.
    """
    valid = cases[cases["valid"] & cases["size_value"].notna()].sort_values("size_value")
    return [SweepPoint(size=float(row["size_value"]), seconds=float(row["call_median_s"]),
                       flops=_number(row.get("flops")), nbytes=_number(row.get("bytes")),
                       launches=_number(row.get("launches_per_call")),
                       busy_seconds=_number(row.get("device_seconds")),
                       steps=_number(row.get("steps_per_call")),
                       noisy=bool(row["noisy"]), suspect=bool(row.get("suspect")))
            for _, row in valid.iterrows()]


def _number(value: Any) -> float | None:
    number = pd.to_numeric(value, errors="coerce")
    return float(number) if pd.notna(number) and number > 0 else None


def predicted(cpu_rows: pd.DataFrame, gpu_rows: pd.DataFrame) -> Any:
    """The framework's predicted crossover, or None where a device has under two sizes."""
    cpu_points, gpu_points = sweep_points(cpu_rows), sweep_points(gpu_rows)
    if len(cpu_points) < 2 or len(gpu_points) < 2:
        return None
    return predict_curves(cpu_points, gpu_points)


def predict_curves(cpu_points: list[SweepPoint], gpu_points: list[SweepPoint]) -> Any:
    """harness.analysis.predict.predict, the CPU's points given the GPU's launch counts."""
    return predict(with_gpu_launches(cpu_points, gpu_points), gpu_points)


def with_gpu_launches(cpu_points: list[SweepPoint],
                      gpu_points: list[SweepPoint]) -> list[SweepPoint]:
    """The CPU's points, each with the GPU's launch count at its size where every size has one.

    The same program dispatches the same ops on either device: the GPU profile's launch count
    is the CPU cell's op count too (eager frameworks pay a dispatch per op there).
    """
    launches = {point.size: point.launches for point in gpu_points if point.launches}
    if all(point.size in launches for point in cpu_points):
        return [replace(point, launches=launches[point.size]) for point in cpu_points]
    return cpu_points


def _best_prediction(rows: list[dict[str, Any]], gpu: pd.DataFrame) -> tuple[Any, str]:
    """For the best-vs-best line: the prediction of the framework fastest on the GPU at the
    largest size, since the best curves mix frameworks whose costs a model cannot mix."""
    valid = gpu[gpu["valid"] & gpu["size_value"].notna()]
    if valid.empty:
        return None, ""
    largest = valid[valid["size_value"] == valid["size_value"].max()]
    fastest = str(largest.sort_values("call_median_s")["framework"].iloc[0])
    for row in rows:
        if row.get("framework") == fastest and row.get("prediction") is not None:
            return row["prediction"], fastest
    return None, ""


def prediction_records(table: pd.DataFrame, sweep: str) -> list[dict[str, Any]]:
    """The predictions of one experiment's table as run.json stores them."""
    records = []
    for _, row in table.iterrows():
        prediction = row.get("prediction")
        if row["framework"] == "best" or prediction is None or pd.isna(row["variant"]):
            continue
        records.append({
            "machine": row["machine"], "variant": row["variant"],
            "framework": row["framework"], "sweep": sweep, "kind": prediction.kind,
            "size": prediction.size, "extrapolated": prediction.extrapolated,
            "held_out_error": prediction.held_out_error,
            "sizes_used": prediction.sizes_used, "caveats": list(prediction.caveats),
            "measured": row["kind"], "measured_size": row["size"],
            "text": prediction.text(sweep)})
    return records


def size_verdicts(cpu_rows: pd.DataFrame, gpu_rows: pd.DataFrame) -> list[GapVerdict]:
    """At each size both devices measured: the GPU-vs-CPU gap between the fastest cell of
    each, judged by the one noise rule (harness.analysis.noise: IQRs and round medians)."""
    found = []
    for rows in (cpu_rows, gpu_rows):
        valid = rows[rows["valid"]]
        fixed = valid["size_label"] == ""
        valid = valid[valid["size_value"].notna() | fixed]
        keyed = valid.assign(_size=valid["size_value"].where(~fixed, 0.0))
        found.append(keyed.sort_values("median_s").drop_duplicates("_size").set_index("_size"))
    cpu_best, gpu_best = found
    return [gap_verdict(cpu_best.loc[size], gpu_best.loc[size])
            for size in sorted(set(cpu_best.index) & set(gpu_best.index))]


def noise_phrase(verdicts: list[GapVerdict]) -> str:
    """' (the faster device beyond the noise at 4 of 5 sizes; held in every round at 4)'."""
    if not verdicts:
        return ""
    beyond = sum(verdict.significant for verdict in verdicts)
    text = f"the faster device beyond the noise at {beyond} of {len(verdicts)} sizes"
    rounds = max(verdict.rounds for verdict in verdicts)
    if rounds < 2:
        return f" ({text}; one round: run-to-run drift not measured)"
    every = sum(verdict.held == verdict.rounds for verdict in verdicts)
    return f" ({text}; held in all {rounds} rounds at {every} of {len(verdicts)})"


def _pair(cpu: pd.Series, gpu: pd.Series, cpu_rows: pd.DataFrame,
          gpu_rows: pd.DataFrame) -> dict[str, Any]:
    curves = pd.DataFrame({"cpu_s": cpu, "gpu_s": gpu}).rename_axis("size").reset_index()
    verdict = find_crossover(curves)
    noise = noise_phrase(size_verdicts(cpu_rows, gpu_rows)) if (
        not cpu_rows.empty and not gpu_rows.empty) else ""
    both = curves.dropna()
    largest = both.iloc[-1] if not both.empty else None
    return {"excluded": excluded_cases(pd.concat([cpu_rows, gpu_rows])), "kind": verdict.kind,
            "size": verdict.size, "sizes_compared": verdict.sizes_compared,
            "verdict": verdict, "noise": noise, "has_cpu": cpu_rows["valid"].any(),
            "has_gpu": gpu_rows["valid"].any(),
            "largest_size": None if largest is None else largest["size"],
            "speedup_at_largest": None if largest is None else largest["cpu_s"] / largest["gpu_s"]}


# --- why the GPU loses at small sizes -------------------------------------------------------

def flat_time_below_crossover(stats: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """GPU lines whose time stays ~flat while the work grows, where the CPU is faster.

    A GPU call that takes about the same time for 8x the work is paying a fixed per-call cost
    (kernel launch, synchronisation, framework dispatch), not compute.
    """
    rows = []
    for _, verdict in verdicts[verdicts["framework"] != "best"].iterrows():
        if verdict["kind"] not in ("crossover", "cpu-always", "mixed"):
            continue
        gpu = stats[(stats["experiment"] == verdict["experiment"])
                    & (stats["machine"] == verdict["machine"])
                    & (stats["variant"] == verdict["variant"])
                    & (stats["framework"] == verdict["framework"])
                    & (stats["device_kind"] == "gpu") & stats["valid"]
                    & stats["size_value"].notna()].sort_values("size_value")
        if verdict["kind"] == "crossover":
            gpu = gpu[gpu["size_value"] < verdict["size"]]
        flat = _flat_run(gpu)
        if flat is not None:
            rows.append({"experiment": verdict["experiment"], "machine": verdict["machine"],
                         "variant": verdict["variant"], "framework": verdict["framework"],
                         "sweep": verdict["sweep"], **flat})
    return pd.DataFrame(rows)


def _flat_run(gpu: pd.DataFrame) -> dict[str, Any] | None:
    if len(gpu) < 2:
        return None
    work = gpu["flops"].where(gpu["flops"] > 0, gpu["bytes"])
    work = work.where(work > 0, gpu["size_value"])
    work_growth = work.iloc[-1] / work.iloc[0]
    time_growth = gpu["median_s"].max() / gpu["median_s"].min()
    if not (work_growth >= FLAT_WORK_GROWTH and time_growth < FLAT_TIME_GROWTH):
        return None
    return {"from_size": gpu["size_value"].iloc[0], "to_size": gpu["size_value"].iloc[-1],
            "level_s": float(gpu["median_s"].median()), "work_growth": float(work_growth),
            "time_growth": float(time_growth)}


# --- summary.md -------------------------------------------------------------------------------

def machine_gpu_sentence(context: Any, group: pd.DataFrame) -> str:
    """The GPU-vs-CPU verdict of one machine in one sentence, per variant."""
    if not group["has_gpu"].any():
        return "no GPU cell measured (CPU only)"
    if not group["has_cpu"].any():
        return "no CPU cell measured"
    parts = []
    comparable = group[group["kind"] != "no-overlap"]
    for _, row in comparable.iterrows():
        text = row["verdict"].text(context.sweep)
        if pd.notna(row["speedup_at_largest"]):
            where = (f" at {context.sweep}="
                     f"{format_size(row['largest_size'], context.sweep)}"
                     if row["largest_size"] else "")
            text += f" (GPU/CPU speedup {format_ratio(row['speedup_at_largest'])}{where})"
        label = f"variant {row['variant']}: " if group["variant"].nunique() > 1 else ""
        if row["cpu_is_other_variant"]:
            text += " vs the best CPU cell of any variant"
        text += str(row.get("noise") or "")
        prediction = row.get("prediction")
        if prediction is not None and not (isinstance(prediction, float) and pd.isna(prediction)):
            text += f"; {prediction.short_text(context.sweep, str(row.get('predicted_from')))}"
        parts.append(label + text + _excluded_phrase(row))
    return "; ".join(parts) or "no size measured on both CPU and GPU"


def _excluded_phrase(row: pd.Series) -> str:
    excluded = list(row.get("excluded") or [])
    if not excluded:
        return ""
    return f" (no verdict where a cell failed: {'; '.join(excluded)})"


def gpu_section(context: Any, verdicts: pd.DataFrame, flat: pd.DataFrame) -> list[str]:
    """The GPU vs CPU table of one experiment, then why the GPU loses and the cold start."""
    if verdicts.empty or not verdicts["has_gpu"].any():
        return ["### GPU vs CPU", "", ("No GPU cell has a valid time in these runs, so there "
                                       "is no GPU/CPU comparison."), ""]
    sweep = context.sweep
    rows = []
    for (machine, variant), group in verdicts.groupby(["machine", "variant"], sort=False):
        best_text = None
        for _, row in group.iterrows():
            if not (row["has_gpu"] and row["has_cpu"]) or row["kind"] == "no-overlap":
                continue
            text = row["verdict"].text(sweep)
            if row["framework"] == "best":
                best_text = text
            elif text == best_text:
                continue  # the same answer as the best-vs-best line: no need to repeat it
            who = ("best GPU cell vs best CPU cell" if row["framework"] == "best" else
                   f"{row['framework']} GPU vs {row['framework']} CPU")
            if row["cpu_is_other_variant"]:
                who += " (CPU of the other variants)"
            speedup = format_ratio(row["speedup_at_largest"]) if pd.notna(
                row["speedup_at_largest"]) else "-"
            if speedup != "-" and row["largest_size"]:
                speedup += f" at {format_size(row['largest_size'], sweep)}"
            rows.append([machine, variant, who, text + _excluded_phrase(row), speedup,
                         _prediction_text(row, sweep)])
    lines = ["### GPU vs CPU", ""]
    if rows:
        lines += markdown_table(["machine", "variant", "compared", "verdict",
                                 f"GPU speedup at the largest {sweep}",
                                 "predicted from the measured costs"], rows)
    lines += _why_lines(context, flat)
    return lines + [""]


def _prediction_text(row: pd.Series, sweep: str) -> str:
    prediction = row.get("prediction")
    if prediction is None or (isinstance(prediction, float) and pd.isna(prediction)):
        return "-"
    source = row.get("predicted_from")
    return (f"{source}'s costs: " if isinstance(source, str) and source else "") \
        + prediction.text(sweep)


def _why_lines(context: Any, flat: pd.DataFrame) -> list[str]:
    lines = []
    sweep = context.sweep
    for _, row in flat.iterrows():
        lines.append(
            f"- Why the GPU loses at small sizes ({row['framework']}, {row['variant']}, "
            f"{row['machine']}): from {sweep}={format_size(row['from_size'], sweep)} to "
            f"{format_size(row['to_size'], sweep)} the work grows {row['work_growth']:,.0f}x "
            f"but the GPU time per {context.unit} only {row['time_growth']:.2g}x, ~flat at "
            f"{format_seconds(row['level_s'])}: a fixed per-call cost (kernel launch, "
            "synchronisation, framework dispatch), not compute.")
    lines += _cold_lines(context)
    return lines


def _cold_lines(context: Any) -> list[str]:
    """First-call cost per device kind, from each cell's first (smallest) case."""
    valid = context.stats[context.stats["valid"] & context.stats["cold_call_s"].notna()]
    if valid.empty:
        return []
    first = valid.sort_values(["size_value", "size_label"]).groupby(CELL_KEYS,
                                                                    sort=False).head(1)
    call = context.call_name
    lines = []
    for (machine, kind), group in first.groupby(["machine", "device_kind"], sort=False):
        worst = group.sort_values("cold_call_s").iloc[-1]
        lines.append(
            f"- Cold start on {machine} ({kind.upper()}): the first {call} of a cell took up to "
            f"{format_seconds(worst['cold_call_s'])} ({worst['framework']} {worst['device']} "
            f"{worst['variant']}) vs {format_seconds(worst['call_median_s'])} for a warm {call}: "
            "one-time setup (context creation, kernel selection, tracing, compilation), "
            "excluded from the medians.")
    return lines


# --- the figure --------------------------------------------------------------------------------

def crossover_figure(stats: pd.DataFrame, verdicts: pd.DataFrame, title: str, sweep: str,
                     unit: str, ceilings: dict[str, dict[str, Any]], path: Path,
                     bandwidth_key: str = "bandwidth_gbps") -> Path | None:
    """Time (and throughput) vs size, log-log, median line with IQR band, crossover marked."""
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
                            "q3_s"))
        _mark_failed(row_axes[0], stats[(stats["machine"] == machine)
                                         & (stats["variant"] == variant) & ~stats["valid"]
                                         & stats["size_value"].notna()])
        verdict = _verdict(verdicts, machine, variant)
        faded = sorted(set(reference["variant"]))
        _mark_crossover(row_axes[0], verdict)
        _draw_predictions(row_axes[0], verdicts, machine, variant, group["size_value"].min())
        row_axes[0].set_ylabel(f"median time per {unit}")
        seconds_axis(row_axes[0].yaxis)
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
            size_axis(axis.xaxis, sweep, sizes)
    for axis in axes[-1]:
        axis.set_xlabel(f"{sweep} (log scale)")
    legend_cells = pd.concat(drawn).drop_duplicates()
    figure.legend(handles=legend_handles(legend_cells), loc="outside lower center",
                  ncol=min(len(legend_cells), 6), frameon=False)
    figure.suptitle(f"{title}: when does the GPU win? lines: median, bands: IQR, "
                    "dotted: crossover; thin dashes: fitted costs, dash-dot: predicted "
                    "crossover", fontsize=11)
    return save(figure, path)


def _draw_predictions(axis: Axes, verdicts: pd.DataFrame, machine: str, variant: str,
                      smallest: float) -> None:
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
        color = style.framework_color(row["framework"])
        for model in (prediction.cpu, prediction.gpu):
            axis.plot(sizes, [model.seconds(size) for size in sizes], color=color,
                      linestyle=(0, (3, 2)), linewidth=0.8, alpha=0.6)
        if prediction.kind == "crossover" and prediction.size is not None:
            axis.axvline(prediction.size, color=color, linestyle="-.", linewidth=1.0,
                         alpha=0.8)
            axis.annotate(f"predicted ({row['framework']})", (prediction.size, 0.97),
                          xycoords=axis.get_xaxis_transform(), rotation=90, fontsize=7,
                          color=color, ha="right", va="top")


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


def _lines(axis: Axes, rows: pd.DataFrame, center: str, low: str, high: str) -> pd.DataFrame:
    """One median line with an IQR band per framework x device (x variant when faded)."""
    rows = _with_faded(rows)
    keys = ["framework", "device", "variant", "faded"]
    for (framework, device, _variant, faded), line in rows.groupby(keys, sort=False):
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
    _lines(axis, rows, "rate", "rate_low", "rate_high")
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

"""Data-parallel scaling: samples/s and efficiency vs processes, all-reduce share, accuracy parity.

An optional view: a data-parallel workload asks for it by name ("scaling" in
WorkloadSpec.report.views) and gives its labels in WorkloadSpec.report.view_labels["scaling"]:
`share_explanation` (how its all-reduce share is measured) and `series_params` (the parameters
that name a series when the runs do not differ; default: all of them).
Driven by stored data only: of the runs whose workload declares this view (their run.json
hints' `views`), those whose hints carry `scaling` (the spec's report hints, stored in run.json
when the run starts) give rows; the hint names the case parameter that
counts processes and the case extras that hold the job's samples per call and the all-reduce
share. Efficiency at N processes = (samples/s at N) / (N x samples/s at 1 process) of the same
(machine, framework, device, variant, parameters), so 100% means N processes do N times the
work per second; below it, the per-step cost grew (communication, contention).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from harness.core.units import device_kind, format_seconds
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.data.serial import JsonObject, JsonValue
from harness.report import style
from harness.report.context import labels_of
from harness.report.views import REPORT, View, figure_links
from harness.spec import Status

HINT = "scaling"
FIGURE_SUFFIX = "scaling"
COLUMNS = ["run_id", "machine", "workload", "framework", "device", "variant", "setting",
           "processes", "status", "reason", "samples_per_s", "step_s", "allreduce_share",
           "accuracy", "communication", "efficiency", "accuracy_vs_one", "parity_points",
           "device_busy_share"]
EXPLANATION = ("Efficiency = samples/s at N / (N x samples/s at 1 process), same total data "
               "per epoch")
GROUP = ["machine", "workload", "framework", "device", "variant", "setting"]
# Above this efficiency N processes did more than N times one process's work per second,
# which the devices cannot do; below FAR_BELOW more than half of each added device is lost.
ABOVE_IDEAL, FAR_BELOW = 1.02, 0.5
# A one-process step that keeps the device busy less than this share of its time is host-bound.
HOST_BOUND_BUSY = 0.5


class ScalingView(View):
    """Throughput and efficiency against the number of processes, for data-parallel runs."""

    name = "scaling"
    order = 400
    scope = REPORT
    optional = True
    heading = "Data-parallel scaling"

    def compute(self, context: Any) -> pd.DataFrame:
        return scaling_table(context.documents_declaring(self.name),
                             _series_params(context.labels(self.name)))

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        """One PNG per workload: samples/s and efficiency vs processes, with the ideal lines."""
        import matplotlib.pyplot as plt

        from harness.report.figures import save

        written = []
        for workload, rows in table.groupby("workload", sort=False):
            measured = rows[rows["samples_per_s"].notna()]
            if measured.empty:
                continue
            figure, (rate_axis, efficiency_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
            for key, group in measured.groupby(GROUP, sort=False):
                names = dict(zip(GROUP, key))
                _draw_series(rate_axis, efficiency_axis, names, group,
                             style.framework_color(names["framework"],
                                                   context.framework_colors))
            _finish_axes(rate_axis, efficiency_axis, measured)
            figure.suptitle(f"{workload}: data-parallel scaling (same total data per epoch)")
            written.append(save(figure, out_dir / f"{workload}-{FIGURE_SUFFIX}.png"))
        return written

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        return scaling_section(table, figures, out_dir, context.labels(self.name))


class ScalingRow(TypedDict):
    """One case of a scaling run, before efficiency and parity are added (scaling_table)."""

    run_id: str
    machine: str
    workload: str
    framework: str
    device: str
    variant: str
    setting: str
    processes: int
    status: str
    reason: str
    samples_per_s: float | None
    step_s: float | None
    allreduce_share: float | None
    accuracy: float | None
    communication: str
    parity_points: JsonValue
    device_busy_share: float | None


def scaling_rows(document: RunDocument, machine: str) -> list[ScalingRow]:
    """One row per case of a run with a scaling hint; [] for any other run."""
    hint = document.hints.get(HINT)
    if not hint or not isinstance(hint, dict):
        return []
    return [_case_row(document, machine, hint, result, case)
            for result in document.cells for case in result.cases]


def _hint_name(hint: JsonObject, key: str) -> str:
    """The name the scaling hint gives `key` (a case parameter or extra), else `key` itself."""
    name = hint.get(key, key)
    return name if isinstance(name, str) else key


def _case_row(document: RunDocument, machine: str, hint: JsonObject,
              result: CellResult, case: CaseResult) -> ScalingRow:
    params = case.case
    extra = case.extra
    ok = case.status == Status.OK and bool(case.samples)
    epoch_s = case.stats.median if ok else None
    per_call = extra.get(_hint_name(hint, "samples_per_call"))
    steps = extra.get("steps_per_call") or 1
    share = extra.get(_hint_name(hint, "allreduce_share"))
    processes_key = _hint_name(hint, "processes")
    processes = params.get(processes_key, 0)
    setting = ", ".join(f"{name}={value}" for name, value in sorted(params.items())
                        if name not in (processes_key, "data"))
    return {
        "run_id": document.run_id, "machine": machine,
        "workload": result.workload, "framework": result.framework,
        "device": result.device, "variant": result.variant,
        "setting": setting,
        "processes": int(processes) if isinstance(processes, (int, float, str)) else 0,
        "status": case.status.value, "reason": case.reason,
        "samples_per_s": per_call / epoch_s if epoch_s and per_call else None,
        "step_s": epoch_s / steps if epoch_s is not None else None,
        "allreduce_share": share if ok else None,
        "accuracy": extra.get("accuracy") if ok else None,
        "communication": str(extra.get("communication") or ""),
        "parity_points": hint.get("parity_points"),
        "device_busy_share": extra.get("device_busy_share") if ok else None,
    }


def scaling_table(documents: Sequence[RunDocument],
                  series_params: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """Every scaling row of these runs, with efficiency and accuracy vs the 1-process case."""
    rows = []
    for document in documents:
        rows += scaling_rows(document, document.machine)
    table = pd.DataFrame(rows, columns=COLUMNS)
    if table.empty:
        return table
    # The latest run wins where several measured the same case (as in the other tables).
    table = table.drop_duplicates([*GROUP, "processes"], keep="last")
    groups = [_versus_one(group) for _, group in table.groupby(GROUP, sort=False)]
    return _short_settings(pd.concat(groups, ignore_index=True), series_params)


def _short_settings(table: pd.DataFrame,
                    series_params: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """Name each series by the parameters that tell the runs apart; where none do, by the
    workload's `series_params` label (all of them when it gives none)."""
    parsed = [dict(part.split("=", 1) for part in setting.split(", ") if "=" in part)
              for setting in table["setting"]]
    names = sorted({name for params in parsed for name in params})
    differing = [name for name in names if len({params.get(name) for params in parsed}) > 1]
    kept = differing or [name for name in series_params if name in names] or names
    table["label"] = [", ".join(f"{name}={params.get(name)}" for name in kept)
                      for params in parsed]
    return table


def _versus_one(group: pd.DataFrame) -> pd.DataFrame:
    group = group.sort_values("processes").copy()
    base = group[(group["processes"] == 1) & group["samples_per_s"].notna()]
    if base.empty:
        group["efficiency"], group["accuracy_vs_one"] = None, None
        group["one_busy_share"] = None
        return group
    one = base.iloc[0]
    group["one_busy_share"] = one["device_busy_share"]
    group["efficiency"] = group["samples_per_s"] / (group["processes"] * one["samples_per_s"])
    group["accuracy_vs_one"] = group["accuracy"] - one["accuracy"] \
        if one["accuracy"] is not None else None
    return group


def _percent(value: Any) -> str:
    return "-" if pd.isna(value) else f"{value:.0%}"


def scaling_lines(table: pd.DataFrame) -> list[str]:
    """One sentence per case: 'torch cpu, 2 processes: 9,000 samples/s, efficiency 80%, ...'."""
    lines = []
    for _, row in table.iterrows():
        where = (f"{row['framework']} {row['device']} ({row['label']}), "
                 f"{row['processes']} process{'es' if row['processes'] != 1 else ''}")
        if pd.isna(row["samples_per_s"]):
            lines.append(f"{where}: {row['status']}: {row['reason'] or 'no time'}")
            continue
        share = _percent(row["allreduce_share"])
        share = f"all-reduce {share} of the step" if share != "-" else "all-reduce not measured"
        text = (f"{where}: {row['samples_per_s']:,.0f} samples/s, "
                f"{format_seconds(row['step_s'])} per step, "
                f"scaling efficiency {_percent(row['efficiency'])}{efficiency_note(row)}, "
                f"{share}")
        lines.append(text + _parity_text(row))
    return lines


def efficiency_note(row: pd.Series) -> str:
    """Why an efficiency above 100% (or far below) is not a GPU scaling figure, or a flag."""
    efficiency = row.get("efficiency")
    if row["processes"] == 1 or pd.isna(efficiency):
        return ""
    if FAR_BELOW <= efficiency <= ABOVE_IDEAL:
        return ""
    how = "above 100%" if efficiency > ABOVE_IDEAL else "this far below 100%"
    busy = row.get("one_busy_share")
    if device_kind(str(row["device"])) == "cpu":
        return (f" (a host effect: CPU ranks share one machine's cores and memory bandwidth, "
                f"so {how} compares thread layouts, not devices)")
    if pd.notna(busy) and busy < HOST_BOUND_BUSY:
        return (f" (a host effect: the 1-process step kept its GPU busy {busy:.0%} of the "
                "time, host-bound, so the step time is the host's launch path (CPU clocks, "
                f"caches, threads per rank) and {how} says nothing about GPU scaling)")
    if pd.notna(busy):
        return (f" (FLAGGED: {how} with a device-bound 1-process step (GPU busy {busy:.0%}): "
                "check the runs)")
    return f" (FLAGGED: {how}; the 1-process step's device-busy share was not measured)"


def _parity_text(row: pd.Series) -> str:
    if pd.isna(row["accuracy"]):
        return ""
    text = f", test accuracy {row['accuracy']:.3f}"
    delta, bound = row["accuracy_vs_one"], row["parity_points"]
    if row["processes"] != 1 and pd.notna(delta):
        verdict = "parity" if bound is None or abs(delta) <= bound else "NO PARITY"
        text += f" ({delta:+.3f} vs 1 process: {verdict})"
    return text


def scaling_section(table: pd.DataFrame, figures: list[Path], out_dir: Path,
                    labels: JsonObject | None = None) -> list[str]:
    """The lines of the data-parallel scaling section (none when no run has the hint)."""
    if table.empty:
        return []
    share = (labels or {}).get("share_explanation")
    lines = [EXPLANATION + (f"; {share}" if share else "") + ".", ""]
    lines += figure_links("data-parallel scaling", figures, out_dir)
    return lines + [f"- {line}" for line in scaling_lines(table)]


def _draw_series(rate_axis: Any, efficiency_axis: Any, key: dict[str, str],
                 group: pd.DataFrame, color: str) -> None:
    kind = device_kind(key["device"])
    label = f"{key['framework']} {key['device']} ({group['label'].iloc[0]}), {key['machine']}"
    marker, line = style.DEVICE_MARKERS[kind], style.DEVICE_LINESTYLES[kind]
    rate_axis.plot(group["processes"], group["samples_per_s"], marker=marker, linestyle=line,
                   color=color, label=label)
    one = group[group["processes"] == 1]
    if not one.empty:
        ideal = one["samples_per_s"].iloc[0] * group["processes"]
        rate_axis.plot(group["processes"], ideal, linestyle=":", color=color, alpha=0.6)
        efficiency_axis.plot(group["processes"], group["efficiency"] * 100, marker=marker,
                             linestyle=line, color=color, label=label)


def _finish_axes(rate_axis: Any, efficiency_axis: Any, measured: pd.DataFrame) -> None:
    ticks = sorted(measured["processes"].unique())
    rate_axis.set(xlabel="processes", ylabel="samples/s of the whole job (log)", yscale="log",
                  title="throughput (dotted: ideal, N x 1 process)", xticks=ticks)
    efficiency_axis.axhline(100, linestyle=":", color="#4D4D4D", label="ideal (100%)")
    # Above 100% happens on a contended CPU, where 1 process with all threads is the slow one.
    top = max(120.0, float(measured["efficiency"].max(skipna=True) or 0) * 110)
    efficiency_axis.set(xlabel="processes", ylabel="scaling efficiency (%)", xticks=ticks,
                        title="efficiency vs 1 process", ylim=(0, top))
    efficiency_axis.legend(fontsize=7, loc="lower left")


def _series_params(labels: JsonObject) -> list[str]:
    """The `series_params` label: the parameters that name a series ([] = all of them)."""
    names = labels.get("series_params") or ()
    return [str(name) for name in names] if isinstance(names, list) else []


def console_lines(document: RunDocument) -> list[str]:
    """The scaling sentences of one run document, for the CLI after its table."""
    table = scaling_table([document], _series_params(labels_of(document.hints, ScalingView.name)))
    return scaling_lines(table) if not table.empty else []

"""Epochs and accuracy: seconds per epoch by epoch number, and the accuracy each cell reached.

An optional view: a training workload asks for it by name ("epochs-accuracy" in
WorkloadSpec.report.views) and gives its labels (EpochsLabels) in WorkloadSpec.report.view_labels.

Table: epoch rows (part "epoch": per-epoch seconds at the headline size, epoch 1 = the cold
call) and accuracy rows (part "accuracy": one per case with an accuracy). Figure: both panels.
Lines: the accuracy table, the data source and the distinct samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

from harness.core.units import device_kind, format_seconds
from harness.data.casekey import CASE_COLUMNS
from harness.report import style
from harness.report.context import measured_values
from harness.report.figure import Figure, Line, carried, case_subject
from harness.report.summary import markdown_table, size_cell
from harness.report.tables import HEADLINE_KEYS, at_headline, sort_cells
from harness.report.views import View

if TYPE_CHECKING:
    from matplotlib.axes import Axes

EPOCH_COLUMNS = [*CASE_COLUMNS, "device_kind", "phase", "sample", "seconds", "epoch", "round"]
ACCURACY_COLUMNS = [*CASE_COLUMNS, "device_kind", "status", "accuracy", "data_source",
                    "samples_distinct", "check_passed"]


class EpochsLabels(TypedDict, total=False):
    """This view's labels (WorkloadSpec.report.view_labels["epochs-accuracy"], as run.json stores
    them), over DEFAULT_LABELS; `size` and `call` are filled in by the view."""

    metric: str  # what the accuracy is called: 'test accuracy'
    chance: float | None  # the accuracy of guessing, drawn as a dotted line
    accuracy_field: str  # the case extra that holds the accuracy
    data_source_field: str  # ... where the data came from
    distinct_samples_field: str  # ... how many distinct samples it had
    accuracy_check: str  # else the check whose metric names this holds it
    size: str  # how the sweep reads in titles: 'batch size' (default: its name)
    call: str  # what one timed call is (ExperimentContext.call_name)


DEFAULT_LABELS: EpochsLabels = {
    "metric": "accuracy", "chance": None, "accuracy_field": "accuracy",
    "data_source_field": "data_source", "distinct_samples_field": "samples_distinct",
    "accuracy_check": "accuracy"}


class EpochsAccuracyView(View):
    """Per-epoch times (the cold first epoch marked) and the accuracy each cell reached."""

    name = "epochs-accuracy"
    order = 90
    optional = True
    caption = "epoch times and accuracy"

    def compute(self, context: Any) -> pd.DataFrame:
        labels = view_labels(context)
        times = epoch_times(context.rows, context.headline)
        accuracy = accuracy_table(context.stats, context.extras, labels)
        if times.empty and accuracy.empty:
            return pd.DataFrame(columns=["part"])
        return pd.concat([times.assign(part="epoch"), accuracy.assign(part="accuracy")],
                         ignore_index=True)

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        """Seconds per epoch with epoch 1 (the cold one) marked, and the accuracy per cell."""
        times, accuracy = split(table)
        accuracy, colors = at_headline(accuracy, context.headline), context.framework_colors
        labels: EpochsLabels = {**view_labels(context), "call": context.call_name}
        if times.empty and accuracy.empty:
            return []
        import matplotlib.pyplot as plt

        from harness.report.figures import legend_handles, save

        panels = list(times.groupby(["machine", "variant"], sort=False)) if not times.empty else []
        rows = max(len(panels), 1)
        figure = plt.figure(figsize=(13.0, max(3.4 * rows, 0.3 * len(accuracy) + 2.5)),
                            layout="constrained")
        grid = figure.add_gridspec(rows, 2, width_ratios=[1.25, 1.0])
        several_machines = times["machine"].nunique() > 1 if not times.empty else False
        call = labels.get("call", "epoch")
        for index, ((machine, variant), group) in enumerate(panels):
            axis = figure.add_subplot(grid[index, 0])
            _epoch_panel(axis, group, colors, call)
            size = group["size_label"].iloc[0]
            axis.set_title((f"{machine} · " if several_machines else "")
                           + f"variant {variant}, {labels['size']} {size}: seconds per {call}",
                           fontsize=10)
        if not panels:
            axis = figure.add_subplot(grid[0, 0])
            axis.text(0.5, 0.5, "no trusted epoch times", ha="center", transform=axis.transAxes)
            axis.set_axis_off()
        _accuracy_panel(figure.add_subplot(grid[:, 1]), accuracy, labels, colors)
        machines = "" if several_machines or times.empty else f" on {times['machine'].iloc[0]}"
        what = "training epochs" if call == "epoch" else f"timed training calls (each a {call})"
        figure.suptitle(f"{context.name}: {what}{machines}", fontsize=11)
        legend_cells = pd.concat([times[["framework", "device_kind"]],
                                  accuracy[["framework", "device_kind"]]]).drop_duplicates()
        figure.legend(handles=legend_handles(legend_cells, colors), loc="outside lower center",
                      ncol=min(len(legend_cells), 6), frameon=False)
        return [save(figure, out_dir / f"{context.stem}-epochs.png")]

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        return accuracy_section(context, split(table)[1], view_labels(context))


def view_labels(context: Any) -> EpochsLabels:
    """The workload's labels for this view over the defaults; the sweep names the size."""
    return {**DEFAULT_LABELS, "size": context.sweep or "size",
            **context.labels(EpochsAccuracyView.name)}


def split(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The view's table back as (epoch times, accuracy), each with its own columns."""
    times = table[table["part"] == "epoch"].reindex(columns=EPOCH_COLUMNS)
    accuracy = table[table["part"] == "accuracy"].reindex(columns=ACCURACY_COLUMNS)
    return times.astype({"epoch": int}) if not times.empty else times, accuracy


# --- the tables --------------------------------------------------------------------------------

def epoch_times(prepared: pd.DataFrame, headline: pd.DataFrame) -> pd.DataFrame:
    """Seconds per epoch by epoch number at the headline size (epoch 1 = the cold call).

    Only for per-epoch workloads (steps_per_call > 1) and cases whose time can be trusted.
    """
    rows = prepared[~prepared["cell_level"] & prepared["phase"].isin(["cold", "warm", "epoch"])
                    & (prepared["steps_per_call"] > 1) & (prepared["status"] == "ok")]
    rows = rows.merge(headline, on=HEADLINE_KEYS)
    # A case timed in blocks of steps (harness.measure.blocks) keeps its whole epochs as
    # "epoch" rows (sample = epoch number); its warm rows are blocks, not epochs.
    blocked = rows.groupby(list(CASE_COLUMNS))["phase"].transform(
        lambda phase: (phase == "epoch").any())
    rows = rows[(rows["phase"] == "epoch") == blocked]
    frame = rows[[*CASE_COLUMNS, "device_kind", "phase", "sample", "seconds"]].copy()
    # Each round is its own worker: its first call is cold again, so calls are numbered
    # within their round and drawn one line per round, never joined across workers.
    frame["round"] = rows["round"].fillna(0).astype(int) if "round" in rows else 0
    # per_call timing: the cold call is epoch 1 and warm sample k is epoch k + 1.
    frame["epoch"] = np.where(frame["phase"] == "cold", 1, frame["sample"].fillna(0) + 1)
    # Whole calls over rounds: numbered within their round (each round's first is cold).
    within_round = frame.groupby([*CASE_COLUMNS, "round"]).cumcount() + 1
    frame["epoch"] = frame["epoch"].where(frame["phase"] != "epoch", within_round)
    return frame.sort_values([*CASE_COLUMNS, "epoch"])


def accuracy_table(stats: pd.DataFrame, extras: pd.DataFrame,
                   labels: EpochsLabels | None = None) -> pd.DataFrame:
    """Accuracy per case: run.json's extra (the `accuracy_field` label), else the value of a
    check whose metric names the `accuracy_check` label."""
    labels = {**DEFAULT_LABELS, **(labels or {})}
    keys = ["run_id", "variant", "framework", "device", "size_label"]
    fields = {"accuracy": labels["accuracy_field"], "data_source": labels["data_source_field"],
              "samples_distinct": labels["distinct_samples_field"]}
    keyed = extras.drop_duplicates(keys)
    picked = keyed[keys].assign(**{column: keyed.get(field, np.nan)
                                   for column, field in fields.items()})
    merged = stats.merge(picked, on=keys, how="left")
    from_check = merged["check_value"].where(
        merged["check_metric"].str.contains(labels["accuracy_check"], na=False, regex=False))
    merged["accuracy"] = merged["accuracy"].fillna(from_check)
    has = merged["accuracy"].notna()
    return sort_cells(merged.loc[has, ACCURACY_COLUMNS])


# --- summary.md -------------------------------------------------------------------------------

# The accuracy table's and data lines' figures (family ACCURACY_FAMILY, harness.audit.accuracy):
# each case's stored accuracy, the distinct training samples stored (the list, as its text) and
# what one timed call trained.
ACCURACY_FAMILY = "accuracy"
ACCURACY, DISTINCT, TRAINED = "accuracy", "distinct training samples", "samples per call"
ACCURACY_HEADING = "### Accuracy and data"
DISTINCT_LINE = "- Distinct training samples: {distinct}{repeated}."
REPEATED_PHRASE = " (repeated to {train} per call: times are real, accuracy is on a small set)"


def accuracy_section(context: Any, table: pd.DataFrame, labels: EpochsLabels) -> list[str]:
    """The accuracy per case, where the data came from and how many distinct samples it had."""
    if table.empty:
        return []
    lines = [ACCURACY_HEADING, ""]
    records = [[Figure(ACCURACY_FAMILY, ACCURACY, row["accuracy"], "", f"{row['accuracy']:.4f}",
                       case_subject(context.name, row))] for _, row in table.iterrows()]
    rows = [[row["machine"], row["variant"], row["framework"], row["device"],
             size_cell(row["size_label"], context.sweep),
             figures[0].text, row["status"]]
            for (_, row), figures in zip(table.iterrows(), records)]
    lines += markdown_table(["machine", "variant", "framework", "device",
                             context.sweep or "size", labels["metric"], "status"], rows, records)
    sources = sorted({s for s in table["data_source"].dropna() if s})
    distinct = sorted({int(v) for v in table["samples_distinct"].dropna()})
    train = trained_per_call(context)
    lines.append(f"- Data source: {', '.join(sources) or 'not recorded'}.")
    if context.call_name not in ("epoch", "call"):
        lines.append(carried(f"- Each worker trained one {context.call_name}; the accuracy is "
                             "round 1's model, after its share of the epoch, not a whole "
                             "epoch's.", context.call_name))
    if distinct:
        subject = {"experiment": context.name}
        shown = [Figure(ACCURACY_FAMILY, DISTINCT, max(distinct), "samples",
                        ", ".join(map(str, distinct)), subject)]
        if isinstance(train, int) and max(distinct) < train:
            shown.append(Figure(ACCURACY_FAMILY, TRAINED, train, "samples", f"{train:,}",
                                subject))
        lines.append(Line(DISTINCT_LINE.format(
            distinct=shown[0].text, repeated=REPEATED_PHRASE.format(train=shown[1].text)
            if len(shown) > 1 else ""), shown))
    return lines + [""]


def trained_per_call(context: Any) -> Any:
    """The training samples one timed call went through: the cases' own parameter (a round's
    share where rounds shared an epoch out), else the run's planned value."""
    name = context.hints.get("epoch_samples_param") or ""
    values = measured_values(context.rows, name)
    if values is not None and not values.empty:
        return int(values.max())
    return context.params.get(name)


# --- the figure --------------------------------------------------------------------------------

def _epoch_panel(axis: Axes, group: pd.DataFrame, colors: Mapping[str, str],
                 call: str = "epoch") -> None:
    from matplotlib.ticker import FuncFormatter

    from harness.report.figures import seconds_axis

    if "round" not in group:
        group = group.assign(round=0)
    rounds = group["round"].nunique()
    for (framework, device, _), line in group.groupby(["framework", "device", "round"],
                                                      sort=False):
        kind = device_kind(device)
        color = style.framework_color(framework, colors)
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
        seconds_axis(axis.yaxis)
    else:  # linear: keep matplotlib's ticks, only say them in seconds
        axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: format_seconds(value)))
    if call == "epoch" and rounds <= 1:
        axis.set_xlabel("epoch (1, starred = cold call: tracing, allocation)")
    else:  # every round is a new worker, whose first call is cold again
        axis.set_xlabel(f"{call} number within its worker ({rounds} round"
                        f"{'s' if rounds != 1 else ''}, one line each; 1, starred = the "
                        "worker's cold first call)")
    axis.set_ylabel(f"seconds per {call}")
    epochs_run = sorted(int(epoch) for epoch in group["epoch"].unique())
    axis.set_xticks(epochs_run, ["1\ncold" if epoch == 1 else str(epoch) for epoch in epochs_run])
    axis.grid(alpha=0.3)


def _accuracy_panel(axis: Axes, accuracy: pd.DataFrame, labels: EpochsLabels,
                    colors: Mapping[str, str]) -> None:
    if accuracy.empty:
        axis.text(0.5, 0.5, "no accuracy recorded", ha="center", transform=axis.transAxes)
        axis.set_axis_off()
        return
    several_machines = accuracy["machine"].nunique() > 1
    tick_labels = [(f"{m}\n" if several_machines else "") + f"{v} · {f} · {d}"
                   for m, v, f, d in zip(accuracy["machine"], accuracy["variant"],
                                         accuracy["framework"], accuracy["device"])]
    positions = np.arange(len(accuracy))
    for position, (_, row) in zip(positions, accuracy.iterrows()):
        ok = row["status"] == "ok"
        color = style.framework_color(row["framework"], colors)
        axis.barh(position, row["accuracy"], color=color if ok else "none",
                  alpha=style.DEVICE_BAR_ALPHA[row["device_kind"]], height=0.7,
                  hatch=None if ok else "///", edgecolor=color)
        note = f"{row['accuracy']:.3f}" + ("" if ok else f" ({row['status']})")
        axis.text(min(row["accuracy"], 1.0) + 0.01, float(position), note, va="center", fontsize=8)
    if labels["chance"] is not None:  # the accuracy of guessing, for scale
        axis.axvline(labels["chance"], color="#777777", linestyle=":", linewidth=1)
        axis.text(labels["chance"], 0.005, " chance", transform=axis.get_xaxis_transform(),
                  fontsize=7.5, va="bottom", color="#555555")
    axis.set_xlim(0, 1.15)
    axis.set_yticks(positions, tick_labels, fontsize=8.5)
    axis.invert_yaxis()
    axis.set_xlabel(labels["metric"])
    sizes = sorted(set(accuracy["size_label"]) - {""})
    at = f" ({labels['size']} {', '.join(sizes)})" if sizes else ""
    after = ("after the last epoch" if labels.get("call", "epoch") == "epoch"
             else f"of round 1's model, after its {labels['call']}")
    axis.set_title(f"{labels['metric']} {after}{at}", fontsize=10)

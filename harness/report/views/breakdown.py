"""Where the time goes, cross-check: costs estimated from the differences between variants.

Table: per valid cell at the headline size, its warm time split into compute and the overhead
a variant pair identifies (the workload's `overhead_pairs` hint: with the cost, without it, its
name), and the cold first call's extra. Figure: the shares as bars (titled as the first call
against a warm one where no variant pair identified an overhead), and why, where a first call
was faster than the warm median. Lines: one per cell with an identified overhead. The
device-busy pass measures the split directly (the devicetime view).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.core.units import format_seconds, format_size
from harness.data.casekey import CASE_COLUMNS
from harness.report import style
from harness.report.figure import (
    DIFFERENCE,
    MEDIAN,
    Figure,
    Line,
    case_subject,
    seconds_figure,
    versus,
)
from harness.report.tables import at_headline, sort_cells
from harness.report.views import View

if TYPE_CHECKING:
    from matplotlib.axes import Axes


class BreakdownView(View):
    """Compute vs an identified overhead per cell, and the cold start, from variant differences."""

    name = "variant-breakdown"
    order = 60
    caption = "where the time goes (cross-check: variant differences)"
    # No variant pair identified an overhead (one variant): the figure is the cold start alone.
    cold_caption = "the first call against a warm one"

    def compute(self, context: Any) -> pd.DataFrame:
        return breakdown(context.stats, context.headline, context.hints.get("overhead_pairs"))

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        """Per cell: share of a steady-state call that is compute vs an identified overhead, and
        share of the first call that is cold-start extra; absolute times written beside each bar.

        Shares, not absolute stacked times: a 80 ms cold start next to a 15 us call would leave
        the call invisible on a linear axis, and stacked bars on a log axis misstate the parts.
        """
        sweep, unit, call = context.sweep, context.unit, context.call_name
        colors = context.framework_colors
        if table.empty:
            return []
        import matplotlib.pyplot as plt

        from harness.report.figures import save

        overhead = has_overhead(table)
        several_machines = table["machine"].nunique() > 1
        labels = [_breakdown_label(row, sweep, several_machines) for _, row in table.iterrows()]
        columns = 2 if overhead else 1
        figure, axes = plt.subplots(1, columns, figsize=(7.0 * columns, 0.5 * len(table) + 2.0),
                                    squeeze=False, sharey=True, layout="constrained")
        positions = np.arange(len(table))
        panel = 0
        if overhead:
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
        faster = [index for index, ratio in enumerate(table["cold_in_warm_calls"]) if ratio < 1]
        marks = {index: f" [{chr(ord('a') + number)}]" for number, index in enumerate(faster)}
        _share_bars(axes[0, panel], positions, table["median_s"] / cold_total,
                    table["cold_extra_s"] / cold_total, f"a warm {call}",
                    f"extra on the first {call} (cold start)", "cold",
                    [f"first {format_seconds(c)} = {n:,.1f}x warm{marks.get(index, '')}"
                     for index, (c, n) in enumerate(zip(table["cold_call_s"],
                                                        table["cold_in_warm_calls"]))])
        axes[0, panel].set_title(f"first {call} at this size: warm cost + cold-start extra",
                                 fontsize=10)
        axes[0, 0].set_yticks(positions, labels)
        for tick, framework in zip(axes[0, 0].get_yticklabels(), table["framework"]):
            tick.set_color(style.framework_color(framework, colors))
        axes[0, 0].invert_yaxis()
        machines = "" if several_machines else f" on {table['machine'].iloc[0]}"
        what = "where the time goes (cross-check: variant differences)" if overhead else \
            f"the first {call} against a warm one"
        figure.suptitle(f"{context.name}: {what}{machines}", fontsize=11)
        if faster:  # a first call faster than a warm one is explained where it is drawn
            notes = [f"[{chr(ord('a') + number)}] first {call} faster than the warm median: "
                     + cold_faster_reason(table.iloc[index], unit, call)
                     for number, index in enumerate(faster)]
            figure.supxlabel("\n".join(textwrap.fill(note, 120, subsequent_indent="    ")
                                        for note in notes), fontsize=8, ha="left", x=0.01)
        return [save(figure, out_dir / f"{context.stem}-breakdown.png")]

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        with_overhead = table[table["overhead_s"] > 0] if not table.empty else table
        if with_overhead.empty:
            return []
        # Differences between variants estimate one cost each; the device-busy pass measures the
        # split directly (section "Where the time goes, measured"), so this is the cross-check.
        lines = [BREAKDOWN_HEADING, ""]
        for _, row in with_overhead.iterrows():
            subject = case_subject(context.name, row)
            pair = {**subject, **versus(variant=row["overhead_without"])}
            share, overhead, median = (
                Figure(DIFFERENCE, f"share of {row['overhead_name']}", row["overhead_share"], "%",
                       f"{row['overhead_share']:.0%}", pair),
                seconds_figure(DIFFERENCE, str(row["overhead_name"]), row["overhead_s"], pair),
                seconds_figure(MEDIAN, "median per step", row["median_s"], subject))
            lines.append(Line(BREAKDOWN_LINE.format(
                machine=row["machine"], cell=f"{row['framework']} {row['device']} {row['variant']}",
                share=share.text, unit=context.unit, name=row["overhead_name"],
                overhead=overhead.text, median=median.text), [share, overhead, median]))
        return lines + [""]

    def caption_of(self, table: pd.DataFrame) -> str:
        return self.caption if has_overhead(table) else self.cold_caption


def breakdown(stats: pd.DataFrame, headline: pd.DataFrame,
              overhead_pairs: list[Any] | None = None) -> pd.DataFrame:
    """Per valid cell at the headline size: compute, identified overhead, cold-call extra.

    The overhead of a paired variant (the workload's `overhead_pairs` hint: with the cost,
    without it, its name) is the difference of their medians on the same machine, framework
    and device; the cold
    extra is the first call minus a warm one (context creation, tracing, allocation).
    """
    valid = at_headline(stats[stats["valid"]], headline).copy()
    valid["overhead_s"], valid["overhead_name"], valid["overhead_without"] = 0.0, "", ""
    for with_cost, without, name in overhead_pairs or []:
        reference = stats[stats["valid"] & (stats["variant"] == without)]
        for index, row in valid[valid["variant"] == with_cost].iterrows():
            match = reference[(reference["experiment"] == row["experiment"])
                              & (reference["machine"] == row["machine"])
                              & (reference["framework"] == row["framework"])
                              & (reference["device"] == row["device"])
                              & (reference["size_label"] == row["size_label"])]
            if match.empty:
                continue
            overhead = max(row["median_s"] - match["median_s"].iloc[0], 0.0)
            valid.loc[index, ["overhead_s", "overhead_name", "overhead_without"]] = [
                overhead, name, without]
    valid["compute_s"] = valid["median_s"] - valid["overhead_s"]
    valid["cold_extra_s"] = (valid["cold_s"] - valid["median_s"]).clip(lower=0.0)
    valid["overhead_share"] = valid["overhead_s"] / valid["median_s"]
    valid["cold_in_warm_calls"] = valid["cold_s"] / valid["median_s"]
    columns = [*CASE_COLUMNS, "device_kind", "sweep", "median_s", "compute_s", "overhead_s",
               "overhead_name", "overhead_without", "overhead_share", "cold_s", "cold_extra_s",
               "cold_in_warm_calls", "cold_call_s", "call_median_s", "medians_by_round", "suspect",
               "steps_per_call"]
    return sort_cells(valid.reindex(columns=columns))


def has_overhead(table: pd.DataFrame) -> bool:
    """Whether a variant pair identified an overhead in any cell (else: the cold start only)."""
    return not table.empty and bool((table["overhead_s"] > 0).any())


def cold_faster_reason(row: pd.Series, unit: str, call: str) -> str:
    """Why this cell's first call took less per {unit} than the warm median, from what the run
    recorded: the first call is one whole call (its time / its steps: a mean, fast stretches
    included), a warm sample is one block of steps (or one loop of calls); the median pools
    every round's samples."""
    rounds = row.get("medians_by_round")
    rounds = rounds if isinstance(rounds, dict) else {}
    first = rounds.get(0)
    if len(rounds) > 1 and first is not None and first < row["median_s"]:
        later = ", ".join(format_seconds(value) for key, value in sorted(rounds.items()) if key)
        return (f"it ran in round 1, whose warm median was {format_seconds(first)} per {unit}; "
                f"the warm median pools {len(rounds)} rounds and the later ones ran slower "
                f"({later}): the cores were busier then")
    steps = row.get("steps_per_call")
    whole = (f"it is one whole {call} (its time / its {int(steps):,} steps: a mean, its fast "
             "stretches included), while a warm sample is one block of steps, and the median "
             "block sits above that mean when most blocks ran slower than a few fast ones"
             if isinstance(steps, (int, float)) and steps > 1 else
             f"it is one {call} timed alone, while a warm sample is a loop of calls, and the "
             "loops' median sits above it when most of them ran slower")
    contended = ("; other processes used the cores while the warm samples were timed "
                 "(SUSPECT)" if str(row.get("suspect") or "") else "")
    return whole + contended


# The section's words; the audit reads the records (harness.audit.medians), never these.
BREAKDOWN_HEADING = "### Where the time goes (cross-check: differences between variants)"
BREAKDOWN_LINE = ("- {machine}, {cell}: {share} of each {unit} goes to {name} ({overhead} of "
                  "{median}; measured as the difference to the variant without them).")


# --- the figure --------------------------------------------------------------------------------

def _breakdown_label(row: pd.Series, sweep: str, several_machines: bool) -> str:
    size = f", {sweep}={format_size(row['size_label'], sweep)}" if row["size_label"] else ""
    machine = f"{row['machine']}\n" if several_machines else ""
    return f"{machine}{row['framework']} · {row['device']} · {row['variant']}{size}"


def _share_bars(axis: Axes, positions: np.ndarray, first: pd.Series, second: pd.Series,
                first_name: str, second_name: str, second_part: str, notes: list[str]) -> None:
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

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

"""What to change: each fix's measured speedup over the as-written cell, and the answer.

Report scope: per stored run with a variant beside its as-written cell (`harness advise`, or
`compare --variant all`), the advice harness.analysis.advice computes from the run document
(the same lines the terminal prints): the answer first, then one table row per fix with its
speedup, noise verdict, parity and standing. The figure draws the speedup per fix (the
as-written cell at 1x) per framework x device, and on a GPU panel the CPU's time as a line:
the speedup the GPU would need to match the CPU's best configuration. Computed first, drawn
second; the view draws nothing a run of one variant cannot say.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.advice import RunAdvice, advise_run, no_answer
from harness.analysis.confidence import UNCONFIRMED
from harness.core.units import device_kind, format_ratio, format_seconds
from harness.report.summary import markdown_table
from harness.report.views import REPORT, View, figure_links

FIGURE = "what-to-change.png"
# A fix faster but not confirmed (SUSPECT timings, a gap within their spread) is drawn apart
# from the recommended ones: the figure must not show it as advice the terminal refused.
STANDING_COLORS = {"recommended": "#029E73", UNCONFIRMED: "#ECE133", "did not help": "#949494",
                   "fails parity": "#D55E00", "failed": "#CC78BC", "not measured": "#CC78BC"}


class AdviceView(View):
    """What to change, measured: the fixes ranked per device and the GPU-vs-CPU answer."""

    name = "what-to-change"
    order = 205
    scope = REPORT
    heading = "What to change"

    def compute(self, context: Any) -> pd.DataFrame:
        return advice_table([advise_run(document) for document in context.documents
                             if len({cell.variant for cell in document.cells}) > 1],
                            [document.run_id for document in context.documents
                             if len({cell.variant for cell in document.cells}) > 1])

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        """Speedup per fix per framework x device (as-written at 1x); the CPU's time as a line."""
        measured = table[table["speedup"].notna()]
        if measured.empty:
            return []
        import matplotlib.pyplot as plt

        groups = list(measured.groupby(["run_id", "framework", "device"], sort=False))
        figure, axes = plt.subplots(len(groups), 1, squeeze=False,
                                    figsize=(10.0, 1.2 + sum(0.35 * len(rows) + 0.6
                                                            for _, rows in groups)))
        for axis, ((_, framework, device), rows) in zip(axes[:, 0], groups):
            _panel(axis, rows, f"{framework} on {device}")
        axes[-1, 0].set_xlabel("speedup over the baseline step (x, log scale)")
        figure.tight_layout()
        figure.savefig(out_dir / FIGURE, dpi=120)
        plt.close(figure)
        return [out_dir / FIGURE]

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        """The answer per run, the figure, then the fixes ranked per framework x device."""
        lines: list[str] = []
        for run_id, rows in table.groupby("run_id", sort=False):
            first = rows.iloc[0]
            lines += [f"Run `{run_id}`, at {first['sweep']} {first['size']}:", ""]
            lines += [f"- {text}" for text in first["answers"]] or [
                f"- {no_answer(list(rows['device']))}"]
            lines.append("")
        lines += figure_links("what to change: speedup per fix", figures, out_dir)
        shown = [[row["framework"], row["device"], row["variant"],
                  f"{row['standing']}: {row['doubt']}" if row["doubt"] else row["standing"],
                  format_ratio(row["speedup"]), format_seconds(row["median_s"]),
                  format_seconds(row["baseline_s"]), row["noise"], row["parity"], row["why"]]
                 for _, row in table.iterrows()]
        return lines + markdown_table(["framework", "device", "fix", "standing",
                                       "speedup vs baseline", "median per step",
                                       "baseline", "noise", "parity", "why"], shown)


def advice_table(advices: list[RunAdvice], run_ids: list[str]) -> pd.DataFrame:
    """One row per fix of every framework x device, with the run's answer lines attached."""
    rows = []
    for run_id, advice in zip(run_ids, advices):
        answers = [item.text for item in advice.answers]
        cpu_best = {item.framework: item.best_median_s for item in advice.devices
                    if device_kind(item.device) == "cpu"}
        for device in advice.devices:
            fixes = list(device.fixes) + ([device.combined] if device.combined else [])
            for fix in fixes:
                rows.append({
                    "run_id": run_id, "framework": device.framework, "device": device.device,
                    "size": advice.size, "sweep": advice.sweep, "diagnosis": device.diagnosis.kind,
                    "variant": fix.variant, "standing": fix.standing, "speedup": fix.speedup,
                    "noise": fix.verdict.phrase() if fix.verdict is not None else "not judged",
                    "parity": fix.parity, "why": fix.why, "median_s": fix.median_s,
                    "doubt": fix.reason if fix.standing == UNCONFIRMED else "",
                    "baseline_s": device.baseline.median_s,
                    "cpu_best_s": cpu_best.get(device.framework),
                    "answers": answers})
    return pd.DataFrame(rows)


def _panel(axis: Any, rows: pd.DataFrame, title: str) -> None:
    """One framework x device: a bar per fix, its speedup written at its end (a SUSPECT one
    hatched), 1x marked, the CPU's best time as a line, and a legend of every colour and mark
    drawn."""
    positions = list(range(len(rows)))
    suspect = [is_suspect(doubt) for doubt in rows["doubt"]]
    bars = axis.barh(positions, rows["speedup"],
                     color=[STANDING_COLORS.get(standing, OTHER_COLOR)
                            for standing in rows["standing"]],
                     edgecolor=["black" if flag else "none" for flag in suspect],
                     hatch=[SUSPECT_HATCH if flag else "" for flag in suspect])
    axis.bar_label(bars, labels=[format_ratio(value) + (" SUSPECT" if flag else "")
                                 for value, flag in zip(rows["speedup"], suspect)],
                   padding=3, fontsize="x-small")
    axis.set_yticks(positions, [f"{variant} ({standing})" for variant, standing
                                in zip(rows["variant"], rows["standing"])], fontsize="small")
    axis.invert_yaxis()
    axis.set_xscale("log")
    low, high = min(rows["speedup"].min(), 1.0), max(rows["speedup"].max(), 1.0)
    axis.set_xlim(low / 1.5, high * 3.0)  # room on the right for the labels
    axis.axvline(1.0, color="black", linewidth=1, label="baseline (1x)")
    first = rows.iloc[0]
    cpu, baseline = first["cpu_best_s"], first["baseline_s"]
    if device_kind(first["device"]) == "gpu" and pd.notna(cpu) and pd.notna(baseline) and cpu:
        axis.axvline(baseline / cpu, color="#0173B2", linestyle="--",
                     label=f"the CPU's time ({format_seconds(cpu)}/step)")
    axis.set_title(title, fontsize=9)
    lines, _labels = axis.get_legend_handles_labels()
    # Beside the panel, not on it: inside, it hid the labels of the longest bars.
    axis.legend(handles=[*standing_handles(rows["standing"], any(suspect)), *lines],
                fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))


OTHER_COLOR = "#949494"
SUSPECT_HATCH = "xx"
SUSPECT_KEY = "SUSPECT timing (hatched)"


def is_suspect(doubt: Any) -> bool:
    """Whether a fix was not confirmed for a SUSPECT timing (its own or its baseline's)."""
    return isinstance(doubt, str) and "SUSPECT" in doubt


def standing_handles(standings: pd.Series, suspect: bool) -> list[Any]:
    """One legend entry per standing colour drawn (its name: 'not confirmed' is the yellow),
    and the SUSPECT hatch where a bar has it."""
    from matplotlib.patches import Patch

    handles = [Patch(color=STANDING_COLORS.get(standing, OTHER_COLOR), label=standing)
               for standing in dict.fromkeys(standings)]
    if suspect:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=SUSPECT_HATCH,
                             label=SUSPECT_KEY))
    return handles

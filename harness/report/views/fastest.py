"""The fastest framework x device at each size, its runner-up and whether the gap is real.

Table: per experiment, machine, variant and size, the fastest valid cell, the runner-up and the
ratio, judged against the noise (IQRs apart). Lines: one table per variant, and at a glance the
fastest cell at the headline size.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.crossover import excluded_cases
from harness.report.figure import (
    CLAIM,
    FASTEST,
    MEDIAN,
    SPREAD,
    Figure,
    Line,
    case_subject,
    ratio_figure,
    seconds_figure,
    versus,
)
from harness.report.summary import markdown_table, size_cell, size_phrase
from harness.report.tables import MIN_SAMPLES_TO_JUDGE, at_headline, gap_significance
from harness.report.views import View

# The view's words; the audit reads the figure records, never these (harness.audit.medians).
FASTEST_HEADING = "### Fastest framework x device, variant {variant}{machine}"
FASTEST_SENTENCE = "fastest on {machine}{size}{variant}: {best} ({median} per {unit}){gap}"
FASTEST_GAP = ", {ratio} ahead of {runner_up} ({noise})"
NO_VERDICT_SENTENCE = ("no verdict on {machine}{size}{variant}: {excluded}; fastest of the cells "
                       "that passed: {best} ({median} per {unit}), which says nothing about the "
                       "device whose cells failed")


class FastestView(View):
    """Which framework x device is fastest at each size, and by how much."""

    name = "fastest"
    order = 30

    def compute(self, context: Any) -> pd.DataFrame:
        return fastest_by_size(context.stats)

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        if table.empty:
            return []
        several_machines = table["machine"].nunique() > 1
        sweep = context.sweep or "size"
        headers = (["machine"] if several_machines else []) + [
            sweep, "fastest", f"median per {context.unit} (IQR)", "runner-up",
            "runner-up median", "faster by", "beyond noise (IQRs and rounds apart)?"]
        machine = "" if several_machines else f" on {table['machine'].iloc[0]}"
        lines = []
        for variant, group in table.groupby("variant", sort=False):
            rows, records = [], []
            for _, row in group.iterrows():
                found = fastest_figures(context, row)
                runner, ratio = found.get("runner_up"), found.get("ratio")
                cells = [size_cell(row["size_label"], sweep),
                         row["best"], f"{found['median'].text} ({found['iqr'].text})",
                         row["runner_up"] or "-", runner.text if runner else "-",
                         ratio.text if ratio else "-",
                         _noise_verdict(row) if row["runner_up"] else "-"]
                if row.get("excluded"):
                    cells[1] += " (not compared: " + "; ".join(row["excluded"]) + ")"
                rows.append(([row["machine"]] if several_machines else []) + cells)
                records.append(list(found.values()))
            lines += [FASTEST_HEADING.format(variant=variant, machine=machine), ""]
            lines += markdown_table(headers, rows, records)
        return lines

    def glance(self, table: pd.DataFrame, context: Any) -> list[str]:
        """One sentence per variant at its headline size, a SUSPECT timing by its cell's name
        only: its reason (often a few hundred characters of contention per cell, ~20 lines of
        the demo's "At a glance") is in the experiment's warnings, said in full once. The
        terminal's verdict is the same sentence."""
        return [fastest_sentence(context, row, reasons=False)
                for _, row in at_headline(table, context.headline).iterrows()]


def fastest_by_size(stats: pd.DataFrame) -> pd.DataFrame:
    """Per experiment, machine, variant and size: the fastest valid cell, the runner-up, the gap.

    Cells compete within one variant (same code, same precision), so the answer is a choice of
    framework and device; variants are compared separately (variant_table). Groups with a
    single valid cell have nothing to compare and are left out. `significant` says whether
    the two IQRs are apart.
    """
    rows = []
    for (experiment, machine, variant, size), everyone in stats.groupby(
            ["experiment", "machine", "variant", "size_label"], sort=False):
        group = everyone[everyone["valid"]]
        excluded = excluded_cases(everyone)
        if group.empty or (len(group) < 2 and not excluded):
            continue
        ranked = group.sort_values("median_s")
        best = ranked.iloc[0]
        second = ranked.iloc[1] if len(ranked) > 1 else None
        failed_kinds = set(everyone.loc[~everyone["valid"], "device_kind"])
        rows.append({"experiment": experiment, "machine": machine, "variant": variant,
                     "size_label": size, "size_value": best["size_value"],
                     "best": _cell_name(best), "best_median_s": best["median_s"],
                     "framework": best["framework"], "device": best["device"],
                     "runner_up_framework": second["framework"] if second is not None else "",
                     "runner_up_device": second["device"] if second is not None else "",
                     "best_iqr_s": best["iqr_s"], "cells": len(ranked),
                     "runner_up": _cell_name(second) if second is not None else "",
                     "runner_up_median_s": second["median_s"] if second is not None else math.nan,
                     "ratio": second["median_s"] / best["median_s"] if second is not None
                     else math.nan,
                     **(gap_significance(best, second) if second is not None
                        else {"judged": False, "significant": False, "held": 0, "rounds": 1,
                              "noise": "", "noise_short": ""}),
                     "excluded": excluded,
                     # A device whose every cell failed here cannot lose a race it did not run.
                     "device_verdict": not (failed_kinds - set(group["device_kind"])),
                     "suspect": [_cell_name(row) + f": {row['suspect']}"
                                 for _, row in group.iterrows() if row["suspect"]]})
    frame = pd.DataFrame(rows, columns=[
        "experiment", "machine", "variant", "size_label", "size_value", "best", "best_median_s",
        "framework", "device", "runner_up_framework", "runner_up_device", "best_iqr_s", "cells",
        "runner_up", "runner_up_median_s", "ratio", "judged",
        "significant", "held", "rounds", "noise", "noise_short", "excluded", "device_verdict",
        "suspect"])
    return frame.sort_values(["experiment", "machine", "variant", "size_value", "size_label"],
                             key=lambda column: column.map(_variant_rank(stats))
                             if column.name == "variant" else column)


def _variant_rank(stats: pd.DataFrame) -> dict[str, int]:
    """Variants in the order they first appear (the one as written first)."""
    return {name: index for index, name in enumerate(dict.fromkeys(stats["variant"]))}


def _cell_name(row: pd.Series) -> str:
    return f"{row['framework']} {row['device']}"


# --- summary.md -------------------------------------------------------------------------------

def fastest_figures(context: Any, row: pd.Series) -> dict[str, Figure]:
    """The records of one size's fastest cell: its median and IQR, the runner-up's median and
    how many times slower it is (the records the audit recomputes, harness.audit.medians)."""
    best = case_subject(context.name, row)
    found = {"median": seconds_figure(MEDIAN, "median per step", row["best_median_s"],
                                      {**best, CLAIM: FASTEST}),
             "iqr": seconds_figure(SPREAD, "IQR per step", row["best_iqr_s"], best)}
    if row["runner_up"]:
        runner = {**best, "framework": row["runner_up_framework"],
                  "device": row["runner_up_device"],
                  **versus(framework=row["framework"], device=row["device"])}
        found["runner_up"] = seconds_figure(MEDIAN, "runner-up median per step",
                                            row["runner_up_median_s"], runner)
        found["ratio"] = ratio_figure(f"slower than {row['best']}", row["ratio"], runner)
    return found


def fastest_sentence(context: Any, row: pd.Series, reasons: bool = True) -> str:
    """The fastest cell at a size, never by the absence of a cell that failed there; without
    REASONS, a SUSPECT timing names its cells and leaves why to the warnings."""
    size = size_phrase(context, row["size_label"])
    noise = ("too few samples to judge the noise" if not row["judged"] else row["noise"])
    figures = fastest_figures(context, row)
    shown = [figures["median"]] + ([figures["ratio"]] if row["runner_up"] else [])
    gap = (FASTEST_GAP.format(ratio=figures["ratio"].text, runner_up=row["runner_up"],
                              noise=noise) if row["runner_up"] else "")
    variant = (f", variant {row['variant']}" if context.stats["variant"].nunique() > 1
               else "")
    excluded = list(row.get("excluded") or [])
    if excluded and not row.get("device_verdict", True):
        sentence = NO_VERDICT_SENTENCE.format(
            machine=row["machine"], size=size, variant=variant, excluded="; ".join(excluded),
            best=row["best"], median=figures["median"].text, unit=context.unit)
    else:
        sentence = FASTEST_SENTENCE.format(
            machine=row["machine"], size=size, variant=variant, best=row["best"],
            median=figures["median"].text, unit=context.unit, gap=gap)
        if excluded:
            sentence += f" (not compared: {'; '.join(excluded)})"
    suspect = list(row.get("suspect") or [])
    if suspect and not reasons:
        names = ", ".join(dict.fromkeys(item.split(": ", 1)[0] for item in suspect))
        sentence += f"; SUSPECT timing: {names} (see the warnings)"
    elif suspect:
        sentence += f"; SUSPECT timing: {'; '.join(suspect)}"
    return Line(sentence, shown)


def _noise_verdict(row: pd.Series) -> str:
    if not row["judged"]:
        return f"not judged (< {MIN_SAMPLES_TO_JUDGE} samples)"
    return str(row["noise_short"])

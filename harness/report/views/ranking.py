"""Framework verdict: every framework ranked per device at the headline size.

Table: per experiment, machine, variant and device, every framework with a valid time, fastest
first, with its time over the fastest and whether its gap to the one ranked above is beyond
the noise. Lines: one ranked list per (machine, variant, device), where two or more frameworks
ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from harness.report.figure import (
    MEDIAN,
    Figure,
    Line,
    case_subject,
    ratio_figure,
    seconds_figure,
    versus,
)
from harness.report.summary import size_phrase
from harness.report.tables import (
    MIN_SAMPLES_TO_JUDGE,
    GapSignificance,
    at_headline,
    gap_significance,
)
from harness.report.views import View

# The view's words; the audit reads the figure records, never these (harness.audit.medians).
RANKING_HEADING = "### Framework verdict: every framework ranked per device"
RANKED_LINE = "- **{device}**, {where}variant {variant}{size}: {entries}"
RANKED_ENTRY = "{rank}. {framework} {median}/{unit}"
RANKED_GAP = " ({ratio} the fastest; {gap} vs #{above})"
# The terminal's line (compare's verdict), fastest first, each framework set apart from the
# one before by its gap's sign: summary.md's line says the same in words with the rounds held,
# which made a ranking of four frameworks four terminal lines at 100 columns. '<' reads as
# "faster, beyond the noise" unexplained; the other signs are named after the list.
TERMINAL_RANKED = "ranking on {device}{where}{variant}{size}: {entries}{legend}"
TERMINAL_ENTRY = " {sign} {framework} {median} ({ratio})"
GAP_SIGNS = {"beyond": "<", "within": "~", "not judged": "?"}
SIGN_MEANINGS = {"~": "~ within the noise", "?": f"? not judged (< {MIN_SAMPLES_TO_JUDGE} samples)"}


class RankingView(View):
    """Every framework ranked on each device, with the noise judged between neighbours."""

    name = "framework-ranking"
    order = 40

    def compute(self, context: Any) -> pd.DataFrame:
        ranking = framework_ranking(context.stats, context.headline)
        # One framework is no ranking.
        return ranking if ranking["framework"].nunique() >= 2 else ranking.iloc[0:0]

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        """Every framework ranked on each device, one line per (machine, variant, device)."""
        if table.empty or table["framework"].nunique() < 2:
            return []
        several_machines = table["machine"].nunique() > 1
        lines = [RANKING_HEADING, "",
                 ("Fastest first, at the headline size, same variant and device; each gap is "
                  "judged against the framework ranked just above: beyond the noise when the "
                  f"IQRs (from at least {MIN_SAMPLES_TO_JUDGE} samples each) and the ranges of "
                  "the round medians are both apart."), ""]
        for (machine, variant, device), size, ranked in ranked_groups(table, context):
            entries = [_ranked_entry(row, context.unit, shown) for row, shown in ranked]
            lines.append(Line(RANKED_LINE.format(
                device=device, where=f"{machine}, " if several_machines else "",
                variant=variant, size=size, entries="; ".join(entries)),
                [figure for _, shown in ranked for figure in shown]))
        return lines + [""]

    def verdict(self, table: pd.DataFrame, context: Any) -> list[str]:
        """One line per (machine, variant, device): the frameworks fastest first, each gap as
        a sign (TERMINAL_RANKED), the figures those of summary.md's line."""
        if table.empty or table["framework"].nunique() < 2:
            return []
        several_machines = table["machine"].nunique() > 1
        one_variant = table["variant"].nunique() == 1
        lines = []
        for (machine, variant, device), size, ranked in ranked_groups(table, context):
            if len(ranked) < 2:  # one framework on this device: no ranking to print
                continue
            (first, first_shown), rest = ranked[0], ranked[1:]
            signs = [gap_sign(row) for row, _ in rest]
            entries = f"{first['framework']} {first_shown[0].text}/{context.unit}" + "".join(
                TERMINAL_ENTRY.format(sign=sign, framework=row["framework"],
                                      median=shown[0].text, ratio=shown[1].text)
                for sign, (row, shown) in zip(signs, rest, strict=True))
            lines.append(TERMINAL_RANKED.format(
                device=device, where=f", {machine}" if several_machines else "",
                variant="" if one_variant else f", variant {variant}", size=size,
                entries=entries, legend=legend(signs)))
        return lines


# A ranked framework's row with the figures printed for it.
Ranked = tuple[pd.Series, list[Figure]]


def ranked_groups(table: pd.DataFrame, context: Any
                  ) -> Iterator[tuple[tuple[str, str, str], str, list[Ranked]]]:
    """Per (machine, variant, device) of the ranking: its size phrase and each framework's row,
    fastest first, with the figures summary.md's line and the terminal's print for it."""
    for key, group in table.groupby(["machine", "variant", "device"], sort=False):
        rows = [row for _, row in group.iterrows()]
        yield key, size_phrase(context, group["size_label"].iloc[0]), [
            (row, _ranked_figures(context.name, row, rows[index - 1] if index else None, rows[0]))
            for index, row in enumerate(rows)]


def legend(signs: list[str]) -> str:
    """'; ~ within the noise' where a sign other than '<' was used, else ''."""
    meanings = [meaning for sign, meaning in SIGN_MEANINGS.items() if sign in signs]
    return "; " + ", ".join(meanings) if meanings else ""


def gap_sign(row: pd.Series) -> str:
    """'<' for a gap beyond the noise, '~' within it, '?' where too few samples judge it."""
    if not row["judged"]:
        return GAP_SIGNS["not judged"]
    return GAP_SIGNS["beyond" if row["significant"] else "within"]


RANKING_COLUMNS = ["experiment", "machine", "variant", "device", "size_label", "rank",
                   "framework", "median_s", "times_best", "judged", "significant", "held",
                   "rounds", "noise"]


def framework_ranking(stats: pd.DataFrame, headline: pd.DataFrame) -> pd.DataFrame:
    """Per experiment, machine, variant and device, at the headline size: every framework with a
    valid time, fastest first, with its time over the fastest and whether its gap to the one
    ranked just above it is beyond the noise (IQRs apart, each judged from at least 3 samples).
    """
    rows = []
    for (experiment, machine, variant, device), group in at_headline(
            stats[stats["valid"]], headline).groupby(
            ["experiment", "machine", "variant", "device"], sort=False):
        ranked = group.sort_values("median_s")
        fastest = ranked["median_s"].iloc[0]
        above = None
        for rank, (_, row) in enumerate(ranked.iterrows(), start=1):
            gap: GapSignificance = gap_significance(above, row) if above is not None else {
                "judged": False, "significant": False, "held": 0, "rounds": 1, "noise": "",
                "noise_short": ""}  # left out of the table by RANKING_COLUMNS
            rows.append({"experiment": experiment, "machine": machine, "variant": variant,
                         "device": device, "size_label": row["size_label"], "rank": rank,
                         "framework": row["framework"], "median_s": row["median_s"],
                         "times_best": row["median_s"] / fastest, **gap})
            above = row
    return pd.DataFrame(rows, columns=RANKING_COLUMNS)


# --- summary.md -------------------------------------------------------------------------------

def _ranked_figures(experiment: str, row: pd.Series, above: pd.Series | None,
                    fastest: pd.Series) -> list[Figure]:
    """A ranked framework's median (not faster than the one ranked ABOVE it) and its time
    over the FASTEST's."""
    subject = case_subject(experiment, row)
    if above is None:
        return [seconds_figure(MEDIAN, "ranked median per step", row["median_s"], subject)]
    return [seconds_figure(MEDIAN, f"rank {row['rank']} median per step", row["median_s"],
                           {**subject, **versus(framework=above["framework"])}),
            ratio_figure("times the fastest", row["times_best"],
                         {**subject, **versus(framework=fastest["framework"])})]


def _ranked_entry(row: pd.Series, unit: str, figures: list[Figure]) -> str:
    text = RANKED_ENTRY.format(rank=row["rank"], framework=row["framework"],
                               median=figures[0].text, unit=unit)
    if row["rank"] == 1:
        return text
    gap = row["noise"] or f"not judged, < {MIN_SAMPLES_TO_JUDGE} samples"
    return text + RANKED_GAP.format(ratio=figures[1].text, gap=gap, above=row["rank"] - 1)

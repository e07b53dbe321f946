"""Warnings: what a reader must know before trusting the numbers of an experiment.

Table: one row per warning, in the order they are read: runs that stopped early, cells or
cases that failed (invalid, error, timeout, unavailable), suspect or noisy timings, FLOP
counts an independent count disputes, rates that are implausible or beat a low ceiling probe.
Lines: one per row; "None" when the table is empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.units import format_ratio, format_size
from harness.data.casekey import CASE_COLUMNS, CELL_COLUMNS
from harness.data.secondopinion import NAMED_PARTS, RECORD_KEY, Part, disputed_parts
from harness.report.figure import Figure, Line, case_subject
from harness.report.summary import run_state
from harness.report.tables import experiment_peaks, sort_cells
from harness.report.views import View
from harness.report.views.peak_share import PROBE, RATE, rate_figure
from harness.spec import Status


class WarningsView(View):
    """Stopped runs, failed cells, suspect or noisy timings, implausible rates."""

    name = "warnings"
    order = 100

    def compute(self, context: Any) -> pd.DataFrame:
        lines = (_incomplete_lines(context) + _failure_lines(context, failures(
            context.stats, context.cells)) + _noisy_lines(context, noisy_cells(context.stats))
            + _not_compared_lines(context) + _disputed_lines(context)
            + _peak_lines(context, experiment_peaks(context)))
        # object: a Line keeps its figure records (pandas would make it a plain string)
        return pd.DataFrame({"warning": pd.Series(lines, dtype=object)}, columns=["warning"])

    def when_empty(self, context: Any) -> list[str]:
        return [WARNINGS_HEADING, "", "None: every cell ran, passed its check and is steady.", ""]

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        return [WARNINGS_HEADING, ""] + list(table["warning"]) + [""]


WARNINGS_HEADING = "### Warnings"


# --- the cells and cases to warn about ---------------------------------------------------------

def noisy_cells(stats: pd.DataFrame) -> pd.DataFrame:
    """Noisy valid cases grouped per cell: which sizes and the worst IQR/median."""
    noisy = stats[stats["noisy"] & stats["valid"]]
    rows = []
    for key, group in noisy.groupby(list(CELL_COLUMNS), sort=False):
        ordered = group.sort_values(["size_value", "size_label"])
        rows.append({**dict(zip(CELL_COLUMNS, key)), "sizes": list(ordered["size_label"]),
                     "worst_noise": float(group["noise"].max()), "sweep": group["sweep"].iloc[0]})
    return pd.DataFrame(rows, columns=[*CELL_COLUMNS, "sizes", "worst_noise", "sweep"])


def failures(stats: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Every case or cell that is not ok, with its status and reason (invalid included)."""
    failed_cases = stats[stats["status"] != Status.OK.value][
        [*CASE_COLUMNS, "status", "reason"]].copy()
    covered = set(map(tuple, failed_cases[list(CELL_COLUMNS)].itertuples(index=False)))
    failed_cells = cells[(cells["status"] != Status.OK.value)
                         & ~cells[list(CELL_COLUMNS)].apply(tuple, axis=1).isin(covered)].copy()
    failed_cells["size_label"] = ""
    frame = pd.concat([failed_cases, failed_cells[[*CASE_COLUMNS, "status", "reason"]]],
                      ignore_index=True)
    return sort_cells(frame) if not frame.empty else frame


# --- one line per warning ----------------------------------------------------------------------

def _incomplete_lines(context: Any) -> list[str]:
    """One line per run of this experiment that stopped early, naming the cells it saved."""
    lines = []
    for _, run in context.runs.iterrows():
        state = run_state(run)
        if not state:
            continue
        saved = ", ".join(run["cells_saved"]) or "none"
        status = "interrupted" if run["interrupted"] else "incomplete"
        lines.append(f"- {status} on {run['machine']}: {state}; cells saved: {saved}")
    return lines


def _failure_lines(context: Any, failed: pd.DataFrame) -> list[str]:
    """One line per (machine, status, reason), naming every cell it applies to."""
    lines = []
    sweep = context.sweep
    failures = failed.assign(
        reason_text=failed["reason"].map(lambda r: " ".join(str(r).split())
                                                       or "no reason recorded"))
    for (machine, status, reason), group in failures.groupby(
            ["machine", "status", "reason_text"], sort=False):
        where = ", ".join(
            f"{row['framework']} {row['device']} {row['variant']}"
            + (f" at {sweep}={format_size(row['size_label'], sweep)}" if row["size_label"] else "")
            for _, row in group.iterrows())
        if status == "invalid":
            lines.append(f"- INVALID, failed its correctness check (its time is not shown as a "
                         f"result) on {machine}: {where}: {reason}")
        else:
            lines.append(f"- {status} on {machine}: {where}: {reason}")
    return lines


def _not_compared_lines(context: Any) -> list[str]:
    """Timed cases whose result could not be checked (random numbers in a model's forward)."""
    stats = context.stats
    if "check_metric" not in stats:
        return []
    lines = []
    for _, row in stats[stats["check_metric"] == "not_compared"].iterrows():
        lines.append(f"- NOT COMPARED (timed, result not checked): {row['machine']}, "
                     f"{row['framework']} {row['device']} {row['variant']}{_size_at(row)}: "
                     f"{' '.join(str(row['reason']).split())}")
    return lines


def _disputed_lines(context: Any) -> list[str]:
    """Timed cases whose FLOP count an independent count of the same call disputes: the parts
    and both figures; their rates are no share of a peak (tables.peak_fractions)."""
    stats = context.stats
    if "flops_disputed" not in stats:
        return []
    disputed = stats[stats["valid"] & (stats["flops_disputed"].fillna("").astype(str) != "")]
    keys = ["run_id", "variant", "framework", "device", "size_label"]
    records = {tuple(row[key] for key in keys): row[RECORD_KEY]
               for _, row in context.extras.iterrows() if isinstance(row[RECORD_KEY], dict)}
    lines: list[str] = []
    for _, row in disputed.iterrows():
        parts = disputed_parts({RECORD_KEY: records.get(tuple(row[key] for key in keys))})
        lines.append(Line(DISPUTED_LINE.format(
            machine=row["machine"], cell=f"{row['framework']} {row['device']} {row['variant']}",
            size=_size_at(row), parts=row["flops_disputed"]),
            disputed_figures(case_subject(context.name, row), parts)))
    return lines


def disputed_figures(subject: dict[str, str], parts: list[Part]) -> list[Figure]:
    """The named parts' figures (each part's subject names it) and how many more there are."""
    figures = []
    for part in parts[:NAMED_PARTS]:
        named = {**subject, PART: part.name}
        found = [(COUNTED, part.counted, f"{part.counted:,}"),
                 (SECOND_LOW, part.low, f"{part.low:,}")]
        if part.high != part.low:
            found.append((SECOND_HIGH, part.high, f"{part.high:,}"))
        figures += [Figure(DISPUTED_FAMILY, name, value, "FLOPs", text, named)
                    for name, value, text in found]
        if (ratio := part.ratio()) is not None:
            figures.append(Figure(DISPUTED_FAMILY, COUNT_RATIO, ratio, "x", format_ratio(ratio),
                                  named))
    if len(parts) > NAMED_PARTS:
        more = len(parts) - NAMED_PARTS
        figures.append(Figure(DISPUTED_FAMILY, MORE_PARTS, more, "parts", f"{more} more part",
                              subject))
    return figures


# A disputed FLOP count (family DISPUTED_FAMILY, harness.audit.checkcounts): each named part's
# figure counted by op, the second count's range and their ratio; the parts left unnamed.
DISPUTED_FAMILY = "disputed FLOP count"
PART = "part"  # the subject key that names a part
COUNTED, SECOND_LOW, SECOND_HIGH, COUNT_RATIO, MORE_PARTS = (
    "disputed part: FLOPs by op", "disputed part: second count", "disputed part: second count "
    "up to", "disputed part: ratio", "disputed parts not named")
DISPUTED_LINE = ("- DISPUTED FLOP count: {machine}, {cell}{size}: {parts}; its FLOP rate is "
                 "printed as disputed and is no share of a peak.")


def _noisy_lines(context: Any, noisy: pd.DataFrame) -> list[str]:
    lines = []
    stats = context.stats
    for _, row in stats[stats["valid"] & (stats["suspect"] != "")].iterrows():
        lines.append(f"- SUSPECT timing: {row['machine']}, {row['framework']} {row['device']} "
                     f"{row['variant']}{_size_at(row)}: {row['suspect']}; its time may not be "
                     "what a loop of this call costs on an idle machine.")
    for _, row in noisy.iterrows():
        subject = {"experiment": context.name,
                   **{name: str(row[name]) for name in ("machine", "variant", "framework",
                                                        "device")}}
        sizes = ", ".join(format_size(s, row["sweep"]) for s in row["sizes"] if s) or "-"
        listed, worst = (Figure(NOISE_FAMILY, NOISY_SIZES, len(row["sizes"]), "sizes", sizes,
                                subject),
                         Figure(NOISE_FAMILY, WORST_NOISE, row["worst_noise"], "%",
                                f"{row['worst_noise']:.0%}", subject))
        lines.append(Line(NOISY_LINE.format(
            machine=row["machine"], cell=f"{row['framework']} {row['device']} {row['variant']}",
            sweep=row["sweep"] or "size", sizes=listed.text, worst=worst.text),
            (listed, worst)))
    return lines


# A noisy cell (family NOISE_FAMILY, harness.audit.medians): its noisy sizes (the list, as its
# text) and the worst IQR/median among them.
NOISE_FAMILY = "noise"
NOISY_SIZES, WORST_NOISE = "noisy sizes", "worst IQR/median"
NOISY_LINE = ("- noisy (IQR/median > 10%): {machine}, {cell} at {sweep}={sizes} (worst {worst}); "
              "gaps smaller than the spread there are not meaningful.")


def _probe_text(row: pd.Series) -> str:
    """'measured probe 1,234', or that no probe ran (the bound is the theoretical peak)."""
    probe = row.get("probe")
    if probe is None or pd.isna(probe):
        return "no probe ran: the bound is the theoretical peak"
    return f"measured probe {probe:,.0f}"


IMPLAUSIBLE_LINE = ("- IMPLAUSIBLE: {machine}, {cell}{size} reaches {rate} {metric}, above the "
                    "machine's physical bound ({bound}; {probe}): {why}.")
PROBE_LOW_LINE = ("- The ceiling probe was low on {machine} {device}: it measured {probe} "
                  "{metric}, but {framework} {variant}{size} reached {rate} (below the physical "
                  "bound {bound}), so that result is used as the ceiling.")


def _peak_lines(context: Any, peaks: pd.DataFrame) -> list[str]:
    """IMPLAUSIBLE above the physical bound; a note where the run beat the probe (probe low)."""
    if peaks.empty:
        return []
    lines: list[str] = []
    for _, row in peaks[peaks["kind"] == "implausible"].iterrows():
        why = ("the data stayed in cache (small sizes), a compiler fused or folded the loop so "
               "the counted bytes never moved, or the timing is wrong; not a memory speed"
               if row["metric"] == "GB/s" else "the timing or the FLOP count is wrong")
        rate = rate_figure(context, row, RATE, row["rate"], 0)
        lines.append(Line(IMPLAUSIBLE_LINE.format(
            machine=row["machine"], cell=f"{row['framework']} {row['device']} {row['variant']}",
            size=_size_at(row), rate=rate.text, metric=row["metric"],
            bound=f"{row['bound']:,.0f}", probe=_probe_text(row), why=why), [rate]))
    low = peaks[peaks["kind"] == "probe-low"]
    for (machine, device, metric), group in low.groupby(["machine", "device", "metric"],
                                                         sort=False):
        top = group.sort_values("rate").iloc[-1]
        probe, rate = (rate_figure(context, top, PROBE, top["probe"], 0),
                       rate_figure(context, top, RATE, top["rate"], 0))
        lines.append(Line(PROBE_LOW_LINE.format(
            machine=machine, device=device, probe=probe.text, metric=metric,
            framework=top["framework"], variant=top["variant"], size=_size_at(top),
            rate=rate.text, bound=f"{top['bound']:,.0f}"), [probe, rate]))
    return lines


def _size_at(row: pd.Series) -> str:
    return (f" at {row['sweep']}={format_size(row['size_label'], row['sweep'])}"
            if row["size_label"] else "")

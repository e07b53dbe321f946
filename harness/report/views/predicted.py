"""The GPU step predicted vs measured, where a run has both (issue 51, part 4).

Report scope: per stored run whose torch CPU cell was predicted on a profile of the GPU its
torch GPU cell ran on (harness/predict/versus.py computes the pairs from run.json), a
sentence per profile (within the interval in N of M cases, the median predicted / measured,
the GPU-vs-CPU verdict right in K of L), a table (case, predicted, interval, measured, ratio,
inside, verdict right?) and a log-log figure: predicted against measured, the y = x line, the
validated band and each case's printed interval. Every figure printed is a record of family
versus.FAMILY, recomputed by harness/audit/predictedgpu.py. Nothing where no run has a pair.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.core.units import format_size
from harness.predict.answer import ms, short_device
from harness.predict.versus import FAMILY, RIGHT, Pair, Tally, ratio_text, tallies
from harness.report.figure import Figure, Line
from harness.report.summary import markdown_table
from harness.report.views import REPORT, View, figure_links

if TYPE_CHECKING:
    from matplotlib.axes import Axes

FIGURE = "predicted-vs-measured.png"
HEADING = "GPU step: predicted vs measured"
# Templates, so a test can reword them: the audit reads the records, never these words.
SENTENCE = ("Run `{run}`, {framework}, profile `{profile}` ({device} as `{gpu}`, this CPU "
            "driving it): "
            "{within}, median predicted / measured {ratio}; the predicted GPU-vs-CPU verdict "
            "is right in {verdicts} cases{ties}.")
WITHIN_CLAUSE = "the measured GPU step lies within the printed interval in {count} cases"
NO_INTERVAL_CLAUSE = "no interval printed ({why})"
UNKNOWN_SENTENCE = ("Run `{run}`, {framework}, profile `{profile}` ({device} as `{gpu}`): no "
                    "step predicted "
                    "to set against the measured one ({why}).")
UNKNOWN_LINE = "- not predicted at {sweep} {sizes}: {why}"
HEADERS = ["variant", "{sweep}", "predicted", "interval", "measured", "predicted / measured",
           "inside?", "verdict right?"]
INSIDE, OUTSIDE = "inside", "outside"
# Figure names (the audit's dispatch).
PREDICTED, INTERVAL, MEASURED, RATIO, IN_INTERVAL, VERDICT = (
    "predicted step", "interval", "measured step", "predicted / measured", "in interval",
    "verdict right")
WITHIN, MEDIAN_RATIO, VERDICTS = "within interval", "median ratio", "verdicts right"
GPU_LABEL, VERDICT_LABEL = "GPU (profile)", "GPU-vs-CPU verdict"  # the figure's legend


class PredictedView(View):
    """The GPU run's own check of the prediction made from its CPU cell."""

    name = "predicted-vs-measured"
    order = 200
    scope = REPORT
    heading = HEADING

    def compute(self, context: Any) -> pd.DataFrame:
        return pair_table([tally for document in context.documents
                           for tally in tallies(document)],
                          {document.run_id: document.sweep for document in context.documents})

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        """Predicted against measured, log-log: y = x, each profile's validated band (shaded:
        predicted / measured between its 10th and 90th percentile) and each case's printed
        interval (a horizontal bar: where the measured step was expected)."""
        drawn = table.dropna(subset=["predicted_s"])
        if drawn.empty:
            return []
        import matplotlib.pyplot as plt
        import seaborn as sns

        from harness.report.figures import save, seconds_axis

        drawn = drawn.assign(**{GPU_LABEL: [f"{short_device(str(device))} ({profile})" for device,
                                            profile in zip(drawn["device_name"], drawn["profile"])],
                                VERDICT_LABEL: drawn["verdict"]})
        figure, axis = plt.subplots(figsize=(6.4, 5.2), layout="constrained")
        low = float(min(drawn["measured_s"].min(), drawn["predicted_s"].min(),
                        drawn["low_s"].min(skipna=True) if drawn["low_s"].notna().any()
                        else drawn["measured_s"].min())) / 1.5
        high = float(max(drawn["measured_s"].max(), drawn["predicted_s"].max(),
                         drawn["high_s"].max(skipna=True) if drawn["high_s"].notna().any()
                         else drawn["measured_s"].max())) * 1.5
        _bands_and_line(axis, drawn, low, high)
        sns.scatterplot(data=drawn, x="measured_s", y="predicted_s", hue=GPU_LABEL,
                        style=VERDICT_LABEL, ax=axis, s=60, zorder=3)
        _interval_bars(axis, drawn)
        axis.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high),
                 xlabel="GPU step measured (per step)", ylabel="GPU step predicted (this CPU)")
        seconds_axis(axis.xaxis)
        seconds_axis(axis.yaxis)
        axis.legend(fontsize=8)
        axis.set_title("GPU step: predicted from the CPU run vs measured", fontsize=10)
        return [save(figure, out_dir / FIGURE)]

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        """Per run and profile: the sentence, then the table; the figure once, first."""
        lines = figure_links("GPU step predicted vs measured", figures, out_dir)
        for _key, group in table.groupby(["run_id", "profile", "framework"], sort=False):
            first = group.iloc[0]
            lines += [_sentence(group), ""]
            cells, records = zip(*[row_figures(row) for _, row in group.iterrows()])
            headers = [header.format(sweep=first["sweep"] or "size") for header in HEADERS]
            lines += markdown_table(headers, list(cells), list(records))
            lines += unknown_lines(group)
        return lines


def pair_row(tally: Tally, pair: Pair, sweep: str) -> dict[str, Any]:
    """One table row: the pair's figures and its tally's, as printed."""
    interval = pair.interval
    predicted = pair.predicted_s
    return {"run_id": tally.run_id, "profile": tally.profile, "device_name": tally.device_name,
            "framework": pair.framework, "gpu_device": pair.gpu_device,
            "cpu_device": pair.cpu_device,
            "variant": pair.variant, "sweep": sweep, "size": str(pair.size),
            "size_text": format_size(pair.size, sweep),
            "predicted_s": predicted, "measured_s": pair.measured_s, "ratio": pair.ratio,
            "low_s": interval.low_s if interval else None,
            "high_s": interval.high_s if interval else None,
            "band_low": interval.band.ratio_low if interval else None,
            "band_high": interval.band.ratio_high if interval else None,
            "inside": pair.inside, "verdict": pair.verdict,
            "reason": pair.prediction.reason if predicted is None else pair.no_interval,
            "within_text": tally.within_text(), "with_interval": len(tally.with_interval),
            "median_ratio": tally.median_ratio, "verdict_text": tally.verdict_text(),
            "ties": tally.ties()}


def pair_table(found: list[Tally], sweeps: dict[str, str]) -> pd.DataFrame:
    """One row per pair of every tally; empty where no run has a pair."""
    return pd.DataFrame([pair_row(tally, pair, sweeps.get(tally.run_id, ""))
                         for tally in found for pair in tally.pairs])


# --- summary.md --------------------------------------------------------------------------------

def subject_of(row: Any, size: bool = True) -> dict[str, str]:
    """What a record is of: the run, profile, GPU cell (and the size, for a row's figures)."""
    subject = {"run": str(row["run_id"]), "profile": str(row["profile"]),
               "framework": str(row["framework"]), "device": str(row["gpu_device"]),
               "cpu_device": str(row["cpu_device"]), "variant": str(row["variant"])}
    if size:
        subject["size"] = str(row["size"])
    return subject


def row_figures(row: Any) -> tuple[list[str], list[Figure]]:
    """A table row's cells and the records of the figures it prints."""
    subject = subject_of(row)
    measured = Figure(FAMILY, MEASURED, row["measured_s"] * 1e3, "ms",
                      f"{ms(row['measured_s'])} ms", subject)
    if pd.isna(row["predicted_s"]):  # why: said once under the table (unknown_lines)
        return ([row["variant"], row["size_text"], "unknown", "-", measured.text, "-", "-",
                 "-"], [measured])
    figures = [Figure(FAMILY, PREDICTED, row["predicted_s"] * 1e3, "ms",
                      f"{ms(row['predicted_s'])} ms", subject), measured,
               Figure(FAMILY, RATIO, row["ratio"], "x", ratio_text(row["ratio"]), subject),
               Figure(FAMILY, VERDICT, float(row["verdict"] == RIGHT), "",
                      str(row["verdict"]), subject)]
    interval, inside = "-", "-"  # why: said once in the sentence (NO_INTERVAL_CLAUSE)
    if not pd.isna(row["low_s"]):
        interval = f"{ms(row['low_s'])}-{ms(row['high_s'])} ms"
        inside = INSIDE if row["inside"] else OUTSIDE
        figures += [Figure(FAMILY, INTERVAL, row["low_s"] * 1e3, "ms", interval, subject),
                    Figure(FAMILY, IN_INTERVAL, float(bool(row["inside"])), "", inside,
                           subject)]
    return ([row["variant"], row["size_text"], figures[0].text, interval, measured.text,
             figures[2].text, inside, row["verdict"]], figures)


def _sentence(group: pd.DataFrame) -> str:
    """A profile's sentence in one run, with its records (the tally's figures)."""
    first = group.iloc[0]
    subject = subject_of(first, size=False)
    names = {"run": first["run_id"], "framework": first["framework"],
             "profile": first["profile"], "gpu": first["gpu_device"],
             "device": short_device(str(first["device_name"]))}
    if group["predicted_s"].isna().all():
        return UNKNOWN_SENTENCE.format(**names, why=first["reason"])
    ratio = Figure(FAMILY, MEDIAN_RATIO, float(first["median_ratio"]), "x",
                   ratio_text(float(first["median_ratio"])), subject)
    verdicts = Figure(FAMILY, VERDICTS, float((group["verdict"] == RIGHT).sum()), "",
                      str(first["verdict_text"]), subject)
    figures = [ratio, verdicts]
    if first["with_interval"]:
        inside = sum(bool(value) for value in group["inside"] if not pd.isna(value))
        within = Figure(FAMILY, WITHIN, float(inside), "", str(first["within_text"]), subject)
        figures.append(within)
        clause = WITHIN_CLAUSE.format(count=within.text)
    else:
        why = next((text for text in group["reason"] if isinstance(text, str) and text), "")
        clause = NO_INTERVAL_CLAUSE.format(why=why)
    ties = f" ({first['ties']} measured within the noise: ties)" if first["ties"] else ""
    return Line(SENTENCE.format(**names, within=clause, ratio=ratio.text,
                                verdicts=verdicts.text, ties=ties), figures)


def unknown_lines(group: pd.DataFrame) -> list[str]:
    """Why some sizes were not predicted, once per reason (none where none or all were: the
    sentence says it then)."""
    unknown = group[group["predicted_s"].isna()]
    if unknown.empty or len(unknown) == len(group):
        return []
    lines = [UNKNOWN_LINE.format(sweep=first["sweep"], sizes=", ".join(same["size_text"]),
                                 why=reason)
             for reason, same in unknown.groupby("reason", sort=False)
             for first in [same.iloc[0]]]
    return [*lines, ""]


# --- the figure ----------------------------------------------------------------------------------

def _bands_and_line(axis: Axes, drawn: pd.DataFrame, low: float, high: float) -> None:
    import numpy as np

    span = np.geomspace(low, high, 50)
    axis.plot(span, span, color="#555555", linestyle="--", linewidth=1, label="y = x")
    bands = drawn.dropna(subset=["band_low"]).drop_duplicates(["profile"])
    for _, band in bands.iterrows():
        axis.fill_between(span, span * band["band_low"], span * band["band_high"],
                          color="#56B4E9", alpha=0.15, linewidth=0,
                          label=f"validated band ({band['profile']})")


def _interval_bars(axis: Axes, drawn: pd.DataFrame) -> None:
    with_interval = drawn.dropna(subset=["low_s"])
    if with_interval.empty:
        return
    axis.hlines(with_interval["predicted_s"], with_interval["low_s"], with_interval["high_s"],
                color="#333333", linewidth=1, alpha=0.6, zorder=2, label="printed interval")

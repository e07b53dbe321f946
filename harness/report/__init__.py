"""Reports: compute tables from stored measurements, then draw them with seaborn.

render_report reads run folders (CSV and JSON only, through harness.data.store), computes every
verdict in tables.py, draws one PNG per figure kind and experiment in figures.py, and writes
summary.md beside them (summary.py). Several runs merge into one report, each series labelled
with its machine; runs of one workload whose parameters differ are kept apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.report import scaling
from harness.report import style
from harness.report import tables as t
from harness.report.devicetime import add_device_section
from harness.report.html import write_html_report
from harness.report.load import DEFAULT_HINTS, RunSet, load_runs
from harness.report.memory import add_memory_section
from harness.report.summary import Experiment, render_summary
from harness.report.tensorboard import export_scalars, scalar_series
from harness.data.store import StoreError

SUMMARY_FILE = "summary.md"


def render_report(run_dirs: list[Path], out_dir: Path,
                  tensorboard_dir: Path | None = None, html: bool = False) -> list[Path]:
    """Write <experiment>-<figure>.png files and summary.md into out_dir; return their paths.

    Raises harness.data.store.StoreError when a folder is not a readable harness run.
    """
    if not run_dirs:
        raise StoreError("no run folders given")
    run_set = load_runs([Path(run_dir) for run_dir in run_dirs])
    style.set_framework_colors(framework_colors(run_set.documents))
    runs = t.assign_experiments(run_set.runs)
    prepared, notes = t.prepare(run_set.measurements, runs)
    notes = _mismatch_notes(runs) + notes
    experiments = [_compute(run_set, runs, prepared, name) for name in
                   dict.fromkeys(runs["experiment"])]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = _draw(experiments, runs, out_dir)
    if tensorboard_dir is not None:
        notes.append(_tensorboard(experiments, Path(tensorboard_dir)))
    # Data-parallel runs (a `scaling` hint in run.json) get their own figure and section.
    scaling_figures, scaling_text = scaling.render(run_set.documents, out_dir)
    summary_path = out_dir / SUMMARY_FILE
    summary, device_files = _with_device_section(
        render_summary(experiments, runs, notes, out_dir), experiments, prepared, runs, out_dir)
    summary, memory_files = add_memory_section(summary, prepared, out_dir)
    summary_path.write_text(summary + (f"\n{scaling_text}" if scaling_text else ""))
    html_files = [write_html_report(summary_path)] if html else []
    return [*written, *device_files, *memory_files, *scaling_figures, summary_path, *html_files]


def _with_device_section(summary: str, experiments: list[Experiment], prepared: pd.DataFrame,
                         runs: pd.DataFrame, out_dir: Path) -> tuple[str, list[Path]]:
    """The measured attribution (two clocks) appended after the figures are configured."""
    from harness.report.style import use_private_matplotlib_config

    use_private_matplotlib_config()
    return add_device_section(summary, experiments, prepared, runs, out_dir)


def framework_colors(documents: list[dict[str, Any]]) -> dict[str, str]:
    """Each framework's colour as its run stored it (older runs: the installed FrameworkSpec)."""
    colors: dict[str, str] = {}
    for document in documents:
        for name, stored in (document.get("frameworks") or {}).items():
            colors.setdefault(name, (stored or {}).get("color", ""))
        for result in document.get("cells") or []:
            name = str((result.get("cell") or {}).get("framework", ""))
            if name and name not in colors:
                colors[name] = _installed_color(name)
    return colors


def _installed_color(name: str) -> str:
    from harness.core import registry

    try:
        return registry.load_framework(name).color
    except Exception:  # noqa: BLE001 - an unknown framework gets a palette colour
        return ""


def _mismatch_notes(runs: pd.DataFrame) -> list[str]:
    notes = []
    for workload, group in runs.groupby("workload", sort=False):
        if group["experiment"].nunique() < 2:
            continue
        parts = [f"{name} from {', '.join(f'`{r}`' for r in rows['run_id'])}"
                 for name, rows in group.groupby("experiment", sort=False)]
        notes.append(f"Runs of {workload} used different parameters, so they are not drawn as "
                     f"one experiment: {'; '.join(parts)}. Each has its own section and "
                     "figures.")
    return notes


def _compute(run_set: RunSet, runs: pd.DataFrame, prepared: pd.DataFrame,
             name: str) -> Experiment:
    """Every table of one experiment, computed before anything is drawn."""
    rows = prepared[prepared["experiment"] == name]
    own_runs = runs[runs["experiment"] == name]
    stats = t.case_stats(rows)
    cells = t.cell_status(rows)
    headline = t.headline_sizes(stats)
    hints = {**DEFAULT_HINTS, **own_runs["hints"].iloc[0]}
    verdicts = t.crossovers(stats, hints)
    ceilings = _ceilings_by_machine(own_runs)
    unit = t.time_unit(stats) if not stats.empty else "call"
    return Experiment(
        name=name, stem=own_runs["stem"].iloc[0], workload=own_runs["workload"].iloc[0],
        sweep=own_runs["sweep"].iloc[0], unit=unit, call_name="epoch" if unit == "step" else "call",
        params=_merged_params(own_runs), stats=stats, cells=cells, headline=headline,
        verdicts=verdicts, fastest=t.fastest_by_size(stats),
        variants=t.variant_table(stats, headline),
        breakdown=t.breakdown(stats, headline, hints.get("overhead_pairs")),
        noisy=t.noisy_cells(stats), failures=t.failures(stats, cells),
        peaks=t.peak_fractions(stats, ceilings, hints["bandwidth_ceiling"],
                               hints.get("variant_precision")),
        flat=t.flat_time_below_crossover(stats, verdicts) if not verdicts.empty
        else pd.DataFrame(),
        accuracy=t.accuracy_table(stats, run_set.extras),
        epochs=t.epoch_times(rows, headline), hints=hints,
        ranking=t.framework_ranking(stats, headline),
    )


def _merged_params(runs: pd.DataFrame) -> dict[str, Any]:
    """The experiment's parameters; the swept one as the union of every run's values."""
    params = dict(runs["params"].iloc[0])
    sweep = runs["sweep"].iloc[0]
    values: list[Any] = []
    for run_params in runs["params"]:
        value = run_params.get(sweep)
        values += value if isinstance(value, list) else ([] if value is None else [value])
    if values:
        try:
            params[sweep] = sorted(set(values))
        except TypeError:  # unorderable (e.g. shapes as lists): keep first-seen order
            params[sweep] = list(dict.fromkeys(map(str, values)))
    return params


def _ceilings_by_machine(runs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """The latest run's measured ceilings per machine (absent in older runs: then none)."""
    found: dict[str, dict[str, Any]] = {}
    for machine, ceilings in zip(runs["machine"], runs["ceilings"]):
        if isinstance(ceilings, dict) and ceilings:
            found[machine] = ceilings
    return found


def _draw(experiments: list[Experiment], runs: pd.DataFrame, out_dir: Path) -> list[Path]:
    from harness.report.style import use_private_matplotlib_config

    use_private_matplotlib_config()
    from harness.report import figures  # after the backend and config dir are chosen

    written = []
    for experiment in experiments:
        ceilings = _ceilings_by_machine(runs[runs["experiment"] == experiment.name])
        drawn = {
            "overview": figures.overview(
                t.overview_table(experiment.stats, experiment.cells, experiment.headline),
                experiment.name, experiment.sweep, experiment.unit,
                out_dir / f"{experiment.stem}-overview.png"),
            "crossover": figures.crossover(
                experiment.stats, experiment.verdicts, experiment.name, experiment.sweep,
                experiment.unit, ceilings, out_dir / f"{experiment.stem}-crossover.png",
                experiment.hints.get("bandwidth_ceiling", "bandwidth_gbps")),
            "breakdown": figures.breakdown(
                experiment.breakdown, experiment.name, experiment.sweep, experiment.unit,
                experiment.call_name, out_dir / f"{experiment.stem}-breakdown.png"),
            "ratios": figures.ratios(
                t.ratio_table(experiment.stats), experiment.name, experiment.sweep,
                out_dir / f"{experiment.stem}-ratios.png"),
        }
        if not experiment.epochs.empty or not experiment.accuracy.empty:
            at_headline = experiment.accuracy.merge(
                experiment.headline, on=["experiment", "machine", "variant", "size_label"])
            drawn["epochs"] = figures.epochs(
                experiment.epochs, at_headline, experiment.name,
                out_dir / f"{experiment.stem}-epochs.png")
        experiment.figures = {kind: path for kind, path in drawn.items() if path is not None}
        written.extend(experiment.figures.values())
    return written


def _tensorboard(experiments: list[Experiment], log_dir: Path) -> str:
    series = [item for experiment in experiments
              for item in scalar_series(experiment.stats, experiment.epochs)]
    return export_scalars(series, log_dir)


def verdict_lines(run_dirs: list[Path]) -> list[str]:
    """The verdicts of summary.md as plain terminal lines (summary.verdict_lines), from stored
    runs alone: the same tables the report draws from, phrased by the same functions."""
    from harness.report.summary import verdict_lines as phrase_verdicts

    run_set = load_runs([Path(run_dir) for run_dir in run_dirs])
    runs = t.assign_experiments(run_set.runs)
    prepared, _ = t.prepare(run_set.measurements, runs)
    experiments = [_compute(run_set, runs, prepared, name)
                   for name in dict.fromkeys(runs["experiment"])]
    return phrase_verdicts(experiments, runs)

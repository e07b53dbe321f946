"""The report context: everything the views compute from, built once per report.

render_report reads the runs (harness.report.load), then build_context prepares them once: the
runs grouped into experiments, the prepared samples (latest run per case), and per experiment
its case stats, cell statuses, headline sizes, hints and ceilings. Views read this and never
change it; nothing here draws or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from harness.analysis import casetable
from harness.data.ceilings import Ceilings, as_ceilings
from harness.data.results import RunDocument
from harness.data.serial import JsonObject, JsonValue
from harness.data.upgrade import DEFAULT_HINTS
from harness.report import tables as t
from harness.report.figure import Figure, Line
from harness.report.load import RunSet, hints_for_old_run


@dataclass(frozen=True)
class ExperimentContext:
    """One experiment (a workload with one set of parameters): what its views compute from."""

    name: str
    stem: str  # file-name stem of its figures: <stem>-<figure>.png
    workload: str
    sweep: str
    unit: str  # "step" for workloads whose calls are epochs of several steps, else "call"
    call_name: str
    params: dict[str, JsonValue]  # as run.json stored them; the swept one merged
    runs: pd.DataFrame  # this experiment's runs
    rows: pd.DataFrame  # its prepared samples
    stats: pd.DataFrame  # one row per case (harness.analysis.casetable.case_stats)
    cells: pd.DataFrame  # one row per cell (casetable.cell_status)
    headline: pd.DataFrame  # the size each (machine, variant) is compared at
    hints: JsonObject  # the workload's report hints, as stored in run.json
    ceilings: dict[str, Ceilings]  # machine -> measured ceilings, from this experiment's runs
    # machine -> measured ceilings from any run of the report (a run may skip the probe).
    machine_ceilings: dict[str, Ceilings]
    extras: pd.DataFrame  # per-case extras of run.json (harness.report.load.extra_rows)
    # Each framework's colour as the report's runs stored it (ReportContext's): what its
    # figures draw with (harness.report.style.framework_color).
    framework_colors: dict[str, str] = field(default_factory=dict)

    @property
    def views(self) -> frozenset[str]:
        """The optional views this experiment's workload asks for."""
        return views_of(self.hints)

    def labels(self, view: str) -> JsonObject:
        """The labels the workload gives one view ({} when it gives none)."""
        return labels_of(self.hints, view)


def views_of(hints: Mapping[str, JsonValue]) -> frozenset[str]:
    """The optional views stored hints ask for (their `views` list)."""
    names = hints.get("views") or ()
    return frozenset(str(name) for name in names) if isinstance(names, list) else frozenset()


def labels_of(hints: Mapping[str, JsonValue], view: str) -> JsonObject:
    """The labels stored hints give one view ({} when they give none)."""
    by_view = hints.get("view_labels") or {}
    labels = by_view.get(view) if isinstance(by_view, dict) else None
    return dict(labels) if isinstance(labels, dict) else {}


@dataclass(frozen=True)
class ReportContext:
    """Every run of one report, prepared once, and its experiments."""

    runs: pd.DataFrame  # one row per run, with `experiment` and `stem` assigned
    prepared: pd.DataFrame  # one row per sample of every run (latest run per case)
    extras: pd.DataFrame
    documents: list[RunDocument]  # run.json of each run, typed, in the order given
    notes: list[str]  # notes on the data: runs not merged, cases measured twice
    framework_colors: dict[str, str]
    ceilings: dict[str, Ceilings]  # machine -> latest measured ceilings (any run)
    experiments: list[ExperimentContext]

    @property
    def views(self) -> frozenset[str]:
        """The optional views any run of the report asks for."""
        return frozenset(name for run_hints in self.runs["hints"]
                         for name in views_of(run_hints))

    def labels(self, view: str) -> JsonObject:
        """The labels of the first run that asks for this view."""
        for run_hints in self.runs["hints"]:
            if view in views_of(run_hints):
                return labels_of(run_hints, view)
        return {}

    def documents_declaring(self, view: str) -> list[RunDocument]:
        """run.json of every run whose workload asks for this view."""
        return [document for document, run_hints in zip(self.documents, self.runs["hints"])
                if view in views_of(run_hints)]


def build_context(run_set: RunSet, framework_colors: dict[str, str]) -> ReportContext:
    """Prepare the runs once: experiments, latest samples per case, and each experiment's stats."""
    runs = casetable.assign_experiments(run_set.runs)
    runs["hints"] = [hints_for_old_run(workload, hints)
                     for hints, workload in zip(runs["hints"], runs["workload"])]
    prepared, notes = casetable.prepare(run_set.measurements, runs)
    ceilings = ceilings_by_machine(runs)
    experiments = [experiment_context(runs, prepared, run_set.extras, ceilings, name,
                                      framework_colors)
                   for name in dict.fromkeys(runs["experiment"])]
    return ReportContext(
        runs=runs, prepared=prepared, extras=run_set.extras, documents=run_set.documents,
        notes=mismatch_notes(runs) + notes, framework_colors=framework_colors,
        ceilings=ceilings, experiments=experiments)


def experiment_context(runs: pd.DataFrame, prepared: pd.DataFrame, extras: pd.DataFrame,
                       machine_ceilings: dict[str, Ceilings], name: str,
                       framework_colors: dict[str, str] | None = None) -> ExperimentContext:
    """Every shared table of one experiment, computed before any view runs."""
    rows = prepared[prepared["experiment"] == name]
    own_runs = runs[runs["experiment"] == name]
    stats = casetable.case_stats(rows)
    unit = casetable.time_unit(stats) if not stats.empty else "call"
    params = merged_params(own_runs)
    hints = {**DEFAULT_HINTS, **own_runs["hints"].iloc[0]}
    return ExperimentContext(
        name=name, stem=own_runs["stem"].iloc[0], workload=own_runs["workload"].iloc[0],
        sweep=own_runs["sweep"].iloc[0], unit=unit,
        call_name=call_name(unit, params, rows, hints.get("epoch_samples_param") or "", name),
        params=params, runs=own_runs, rows=rows, stats=stats,
        cells=casetable.cell_status(rows), headline=t.headline_sizes(stats),
        hints=hints,
        ceilings=ceilings_by_machine(own_runs), machine_ceilings=machine_ceilings,
        extras=extras, framework_colors=dict(framework_colors or {}))


def call_name(unit: str, params: Mapping[str, JsonValue], rows: pd.DataFrame,
              epoch_param: str, experiment: str = "") -> str:
    """What one timed call is, as the report names it: 'call'; 'epoch' where a call trains
    the planned epoch; '20,000-sample call (1/3 epoch)' where rounds shared one epoch out
    (each worker's call trained its share), so no figure calls a third of an epoch an epoch.
    That phrase is a Line carrying its figures (CALL_FAMILY): a line that prints it keeps them
    (harness.report.figure.carried)."""
    if unit != "step" or not epoch_param:
        return "call"
    planned = params.get(epoch_param)
    per_call = measured_values(rows, epoch_param)
    if not isinstance(planned, (int, float)) or per_call is None or per_call.empty \
            or per_call.max() >= planned:
        return "epoch"
    samples = int(per_call.max())
    parts = planned / samples
    share = f"1/{parts:.0f}" if abs(parts - round(parts)) < 1e-9 else f"{samples / planned:.2g}"
    subject = {"experiment": experiment}
    trained = Figure(CALL_FAMILY, SAMPLES_PER_CALL, samples, "samples", f"{samples:,}", subject)
    shared = Figure(CALL_FAMILY, EPOCH_SHARE, samples / planned, "share", share, subject)
    return Line(CALL_PHRASE.format(samples=trained.text, share=shared.text), (trained, shared))


# What one timed call trained where the rounds shared the epoch out (family CALL_FAMILY,
# harness.audit.accuracy): its samples and its share of the planned epoch.
CALL_FAMILY = "timed call"
SAMPLES_PER_CALL, EPOCH_SHARE = "samples per call", "share of the planned epoch"
CALL_PHRASE = "{samples}-sample call ({share} epoch)"


def measured_values(rows: pd.DataFrame, param: str) -> pd.Series | None:
    """The parameter PARAM of the cases that were timed (None where the rows have no such
    column). Why only those: a cell that never ran (unavailable, failed before its first
    call) keeps the plan's value, e.g. the whole epoch where the rounds shared it out."""
    column = f"param_{param}"
    if not param or column not in rows:
        return None
    timed = rows[rows["seconds"].notna()] if "seconds" in rows else rows
    return pd.to_numeric(timed[column], errors="coerce").dropna()


def merged_params(runs: pd.DataFrame) -> dict[str, JsonValue]:
    """The experiment's parameters; the swept one as the union of every run's values."""
    params: dict[str, JsonValue] = dict(runs["params"].iloc[0])
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


def ceilings_by_machine(runs: pd.DataFrame) -> dict[str, Ceilings]:
    """The latest run's measured ceilings per machine (absent in older runs: then none)."""
    found: dict[str, Ceilings] = {}
    for machine, stored in zip(runs["machine"], runs["ceilings"]):
        ceilings = as_ceilings(stored)
        if ceilings:
            # A run's measured probe wins over a later run's theoretical bound alone.
            if ceilings.theoretical_only and machine in found \
                    and not found[machine].theoretical_only:
                continue
            found[machine] = ceilings
    return found


def mismatch_notes(runs: pd.DataFrame) -> list[str]:
    """One note per workload whose runs used different parameters (drawn apart, not merged)."""
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

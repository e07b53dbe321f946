"""Read stored run folders into DataFrames: CSV and JSON only, through harness.data.store.

Nothing here interprets the numbers; the case table (harness.analysis.casetable) does that.
Reading is strict about what a report cannot work without (run.json, typed and upgraded by
store.load_run; the CSV's base columns, harness.data.measurements) and lenient about the
rest (extra param_ columns, cells that never ran), because merged runs come from different
harness versions and machines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import pandas as pd

from harness.analysis.stats import quick_line, rounds_line
from harness.core.units import size_label
from harness.data import fields, store
from harness.data.ceilings import Ceilings
from harness.data.measurements import read_measurements, with_run
from harness.data.results import CellResult, RunDocument
from harness.data.secondopinion import RECORD_KEY
from harness.data.serial import JsonObject
from harness.data.upgrade import hints_for_workload
from harness.predict.answer import chart_points
from harness.spec import ParamValue


@dataclass
class RunSet:
    """Everything the report reads: one row per sample, one row per run, one per case extra."""

    measurements: pd.DataFrame
    runs: pd.DataFrame
    extras: pd.DataFrame
    documents: list[RunDocument] = field(default_factory=list)  # run.json of each run, typed


class RunRow(TypedDict):
    """One row of RunSet.runs: a run as the report's tables see it."""

    run_id: str
    run_dir: str
    order: int
    workload: str
    sweep: str
    params: dict[str, ParamValue]
    quick: bool
    started: float | None
    machine: str
    host: JsonObject
    ceilings: Ceilings
    hints: JsonObject
    interrupted: bool
    interrupted_by: str
    finished: float | None
    cells_saved: list[str]
    command: str
    rounds_line: str
    quick_line: str


def run_row(run_dir: Path, document: RunDocument, order: int) -> RunRow:
    """One line describing a run: who, where, when, with which parameters."""
    return {
        "run_id": document.run_id or run_dir.name,
        "run_dir": str(run_dir),
        "order": order,
        "workload": document.workload,
        "sweep": document.sweep,
        "params": document.params,
        "quick": document.quick,
        "started": document.started,
        "machine": document.machine,
        "host": document.host,
        "ceilings": document.ceilings,
        "hints": document.hints,
        "interrupted": document.interrupted,
        "interrupted_by": document.interrupted_by,
        # None when the harness never wrote its end time: killed, or still running.
        "finished": document.finished,
        "cells_saved": [_cell_label(result) for result in document.cells],
        "command": " ".join(document.command),
        "rounds_line": rounds_line(document),
        "quick_line": quick_line(document),
    }


# Hints that name the report's optional views a workload asks for, and their labels.
VIEW_HINTS = ("views", "view_labels")


def hints_for_old_run(workload: str, stored: JsonObject) -> JsonObject:
    """Stored hints; where they were written before they named the report's optional views,
    with the views and view labels the installed spec declares added. Nothing else is filled
    in, so an older run keeps the hints it was measured with."""
    if all(key in stored for key in VIEW_HINTS):
        return stored
    installed = hints_for_workload(workload)
    return {**{key: installed[key] for key in VIEW_HINTS if key in installed}, **stored}


def _cell_label(result: CellResult) -> str:
    """'torch cpu fp32': how summaries name a cell of run.json."""
    return " ".join(part or "?" for part in (result.framework, result.device, result.variant))


EXTRA_KEYS = ["run_id", "machine", "workload", "variant", "framework", "device", "size_label"]
# The second opinion's stored record rides along whole: the warnings view names each disputed
# part's figures from it (harness.data.secondopinion).
PREDICTED_COLUMN = "gpu_predicted"
EXTRA_COLUMNS = [*EXTRA_KEYS, *(item.name for item in fields.report_fields()), RECORD_KEY,
                 PREDICTED_COLUMN]


def extra_rows(document: RunDocument, machine: str) -> list[JsonObject]:
    """Per-case values of run.json declared for the report (harness.data.fields: accuracy,
    data source, memory, ...), keyed like the CSV rows."""
    rows = []
    for result in document.cells:
        for case in result.cases:
            rows.append({
                "run_id": document.run_id, "machine": machine, "workload": result.workload,
                "variant": result.variant, "framework": result.framework,
                "device": result.device,
                "size_label": size_label(case.case.get(document.sweep)),
                **fields.report_values(result, case),
                RECORD_KEY: case.extra.get(RECORD_KEY),
                # The GPU steps predicted from a CPU-only run's case: the overview draws them.
                PREDICTED_COLUMN: chart_points(document, result, case),
            })
    return rows


def load_runs(run_dirs: list[Path]) -> RunSet:
    """Read every run folder; StoreError for the first one that is not a readable harness run."""
    frames, run_rows, extras, documents = [], [], [], []
    for order, run_dir in enumerate(run_dirs):
        run_dir = Path(run_dir)
        document = store.load_run(run_dir)
        frame = read_measurements(run_dir, document)
        row = run_row(run_dir, document, order)
        frames.append(with_run(frame, document, row["run_id"], order))
        run_rows.append(row)
        extras.extend(extra_rows(document, row["machine"]))
        documents.append(document)
    measurements = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=[*store.BASE_COLUMNS, "size_label", "run_order"])
    return RunSet(measurements=measurements, runs=pd.DataFrame(run_rows),
                  extras=pd.DataFrame(extras, columns=EXTRA_COLUMNS),
                  documents=documents)

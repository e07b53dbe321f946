"""measurements.csv as a typed DataFrame: read from a run folder, or from a run's rows in memory.

One typing for both, so a table made from the rows a run holds in memory (its recorder's, at the
end of a run) is the table read back from the CSV those rows were written to: the same text,
typed by the same code (harness.data.columns's registry of column types). Readers above this
(the case table, the report, harness.load) never interpret the CSV's text themselves.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from shlex import quote

import pandas as pd

from harness.core.units import size_label
from harness.data import csvmatch, store
from harness.data.columns import (
    BASE_COLUMNS,
    BOOL_COLUMNS,
    FALSE_TEXT,
    FLOAT_COLUMNS,
    INTEGER_COLUMNS,
    TEXT_COLUMNS,
    TRUE_TEXT,
    csv_columns,
)
from harness.data.results import RunDocument
from harness.data.serial import JsonValue

# Columns no reader can do without; the rest of BASE_COLUMNS may be empty.
REQUIRED_COLUMNS = ("machine", "workload", "variant", "framework", "device", "status", "phase",
                    "seconds", "size")
NUMBER_COLUMNS = (*FLOAT_COLUMNS, *INTEGER_COLUMNS)


def read_measurements(run_dir: Path, document: RunDocument | None = None) -> pd.DataFrame:
    """measurements.csv as a DataFrame with typed columns, or StoreError saying what is wrong
    (checked against DOCUMENT, the folder's run.json, where given: measurements_text)."""
    frame = measurements_text(run_dir, document)
    missing = [column for column in REQUIRED_COLUMNS if column not in frame.columns]
    if missing:
        raise store.StoreError(f"{run_dir / store.MEASUREMENTS_FILE}: missing columns "
                               f"{', '.join(missing)}; not a harness measurements file")
    return typed_measurements(frame)


def measurements_text(run_dir: Path, document: RunDocument | None = None) -> pd.DataFrame:
    """measurements.csv as its text ('' for an empty value), or StoreError when unreadable or,
    where DOCUMENT (the folder's run.json) is given, when its rows are not the ones run.json's
    samples make (a garbage line, a file cut short): never partial data read silently."""
    path = run_dir / store.MEASUREMENTS_FILE
    try:
        if document is not None:
            wrong = csvmatch.mismatch(path, document)
            if wrong is not None:
                raise store.StoreError(f"{path}: damaged, does not match {store.RUN_FILE} "
                                       f"({wrong}); see harness check {quote(str(run_dir))}")
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError, csv.Error, pd.errors.ParserError,
            pd.errors.EmptyDataError) as exc:
        raise store.StoreError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None


def measurements_of_rows(rows: Iterable[store.MeasurementRow]) -> pd.DataFrame:
    """The rows a run holds in memory as read_measurements reads them once written: each value
    as csv writes it (str(), '' for None), then typed as the CSV's text is."""
    rows = list(rows)
    columns = csv_columns(key for row in rows for key in row)
    text = [{column: _csv_text(row.get(column)) for column in columns} for row in rows]
    return typed_measurements(pd.DataFrame(text, columns=columns, dtype=str))


def _csv_text(value: JsonValue) -> str:
    return "" if value is None else str(value)


def typed_measurements(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame of the CSV's text, every known column typed, and `size_label` added."""
    for column in BASE_COLUMNS:
        if column not in frame.columns:
            frame[column] = ""
    for column in TEXT_COLUMNS:
        frame[column] = frame[column].astype(str).str.strip()
    for column in NUMBER_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    truth = {**dict.fromkeys(TRUE_TEXT, True), **dict.fromkeys(FALSE_TEXT, False)}
    for column in BOOL_COLUMNS:
        frame[column] = frame[column].map(truth)
    frame["size_label"] = frame["size"].map(size_label)
    return frame


def with_run(frame: pd.DataFrame, document: RunDocument, run_id: str,
             order: int) -> pd.DataFrame:
    """A run's measurements named by their run: run_id and order on every row, and the run's
    machine where a row names none (run.json decides: a hand-copied folder's CSV may not)."""
    frame["run_id"] = run_id
    frame["machine"] = frame["machine"].where(frame["machine"] != "", document.machine)
    frame["run_order"] = order
    return frame

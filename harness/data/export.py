"""Measurements as one typed table: merged exports of runs (the types: harness.data.columns)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from harness.data import store
from harness.data.columns import csv_columns, frame_to_parquet_bytes, typed_frame
from harness.data.measurements import measurements_text

FORMATS = ("parquet", "csv", "json")


class ExportError(ValueError):
    """Bad export input: unknown format, unreadable run, missing output file for Parquet."""


def read_run_table(run_dir: Path) -> pd.DataFrame:
    """One run's measurements.csv, typed, with run_id and machine taken from run.json."""
    document = store.load_run(run_dir)
    text = measurements_text(run_dir, document)
    rows = text.to_dict("records")
    machine = document.machine_label
    for row in rows:
        row["run_id"] = document.run_id or run_dir.name
        row["machine"] = row.get("machine") or machine
    return typed_frame(rows, csv_columns(text.columns))


def merged_table(run_dirs: list[Path]) -> pd.DataFrame:
    """Every run's rows in one table; columns are the union, typed as one."""
    rows: list[dict[str, Any]] = []
    names: list[str] = []
    for run_dir in run_dirs:
        frame = read_run_table(Path(run_dir)).astype(object)
        names += list(frame.columns)
        rows += frame.where(frame.notna(), None).to_dict("records")
    return typed_frame(rows, csv_columns(names))


def check_export_request(fmt: str, out: Path | None) -> None:
    """Refuse what cannot be written, before anything is read or written."""
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt == "parquet" and out is None:
        raise ExportError("--format parquet needs --out FILE (Parquet is binary, not for a "
                          "terminal)")
    if out is not None and out.is_dir():
        raise ExportError(f"--out {out}: is a folder; give a file name")
    if out is not None and not out.parent.is_dir():
        raise ExportError(f"--out {out}: folder {out.parent} does not exist")


def table_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """The table in FORMAT: Parquet (typed), CSV (pandas-readable) or JSON (list of records)."""
    if fmt == "parquet":
        return frame_to_parquet_bytes(frame)
    if fmt == "csv":
        return frame.to_csv(index=False).encode()
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return (json.dumps(records, indent=1, default=str) + "\n").encode()


def export_runs(run_dirs: list[Path], fmt: str, out: Path | None) -> tuple[bytes | None, int]:
    """Write the merged table to OUT (atomically) or return its bytes for stdout; and row count.

    Raises ExportError or harness.data.store.StoreError for bad input.
    """
    check_export_request(fmt, out)
    frame = merged_table(run_dirs)
    data = table_bytes(frame, fmt)
    if out is None:
        return data, len(frame)
    store.write_bytes_atomic(out, data)
    return None, len(frame)

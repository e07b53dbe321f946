"""Measurements as one typed table: Parquet beside each run's CSV, and merged exports of runs.

The CSV is text; readers (pandas, polars, DuckDB, Spark) want types. Known columns get a fixed
type, so tables of different runs concatenate cleanly even when one run has no value in a
column (a CPU-only run has no device memory); other columns (size, param_*) are inferred.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from harness import store

FORMATS = ("parquet", "csv", "json")
FLOAT_COLUMNS = ("seconds", "check_value", "flops", "bytes", *store.DEVICE_COLUMNS.values())
INTEGER_COLUMNS = ("sample", "calls_per_sample", "steps_per_call", "peak_host_memory_bytes",
                   "peak_device_allocated_bytes", "peak_device_reserved_bytes")
BOOL_COLUMNS = ("check_passed",)
TEXT_COLUMNS = ("run_id", "machine", "workload", "variant", "framework", "framework_version",
                "device", "device_name", "status", "reason", "sweep", "phase", "check_metric",
                "device_reason")
TRUE_TEXT, FALSE_TEXT = ("true", "True"), ("false", "False")


class ExportError(ValueError):
    """Bad export input: unknown format, unreadable run, missing output file for Parquet."""


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if value in TRUE_TEXT:
        return True
    if value in FALSE_TEXT:
        return False
    return None


def _as_number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return None  # True is an int in Python, but not a number in a table
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    return None


def _column(name: str, values: list[Any]) -> pd.Series:
    """One column with a stable type: fixed for known names, inferred for the rest."""
    present = [value for value in values if not _missing(value)]
    if name in TEXT_COLUMNS:
        return pd.Series(["" if _missing(v) else str(v) for v in values], dtype=object)
    if name in BOOL_COLUMNS or (present and all(_as_bool(v) is not None for v in present)):
        return pd.Series([None if _missing(v) else _as_bool(v) for v in values], dtype="boolean")
    numbers = [None if _missing(v) else _as_number(v) for v in values]
    numeric = all(number is not None for number, v in zip(numbers, values) if not _missing(v))
    if name in FLOAT_COLUMNS or name in INTEGER_COLUMNS or (present and numeric):
        if not numeric:  # a known numeric column holding text: keep the text, lose no data
            return pd.Series(["" if _missing(v) else str(v) for v in values], dtype=object)
        whole = all(isinstance(n, int) or float(n).is_integer() for n in numbers if n is not None)
        if whole and name not in FLOAT_COLUMNS:
            return pd.Series([None if n is None else int(n) for n in numbers], dtype="Int64")
        return pd.Series([math.nan if n is None else float(n) for n in numbers], dtype="float64")
    return pd.Series(["" if _missing(v) else str(v) for v in values], dtype=object)


def typed_frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    """Rows (as written to measurements.csv, or read back as text) as a typed DataFrame."""
    return pd.DataFrame({name: _column(name, [row.get(name) for row in rows])
                         for name in columns}, columns=columns)


def frame_to_parquet_bytes(frame: pd.DataFrame) -> bytes:
    """Parquet bytes of the frame (ImportError without pyarrow)."""
    import pyarrow  # noqa: F401 - fail here, clearly, rather than inside pandas

    buffer = io.BytesIO()
    frame.to_parquet(buffer, engine="pyarrow", index=False)
    return buffer.getvalue()


def read_run_table(run_dir: Path) -> pd.DataFrame:
    """One run's measurements.csv, typed, with run_id and machine taken from run.json."""
    document = store.read_run(run_dir)
    path = run_dir / store.MEASUREMENTS_FILE
    try:
        text = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise store.StoreError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    rows = text.to_dict("records")
    machine = (document.get("host") or {}).get("machine_label") or ""
    for row in rows:
        row["run_id"] = str(document.get("run_id") or run_dir.name)
        row["machine"] = row.get("machine") or machine
    return typed_frame(rows, _ordered_columns(list(text.columns)))


def _ordered_columns(names: list[str]) -> list[str]:
    extra = sorted(set(names) - set(store.BASE_COLUMNS))
    return store.BASE_COLUMNS + extra


def merged_table(run_dirs: list[Path]) -> pd.DataFrame:
    """Every run's rows in one table; columns are the union, typed as one."""
    rows: list[dict[str, Any]] = []
    names: list[str] = []
    for run_dir in run_dirs:
        frame = read_run_table(Path(run_dir)).astype(object)
        names += list(frame.columns)
        rows += frame.where(frame.notna(), None).to_dict("records")
    return typed_frame(rows, _ordered_columns(names))


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

    Raises ExportError or harness.store.StoreError for bad input.
    """
    check_export_request(fmt, out)
    frame = merged_table(run_dirs)
    data = table_bytes(frame, fmt)
    if out is None:
        return data, len(frame)
    store.write_bytes_atomic(out, data)
    return None, len(frame)

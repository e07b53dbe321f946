"""The columns of measurements.csv and their types: one registry for the CSV, Parquet, exports
and the report's loader.

The CSV is text; readers (pandas, polars, DuckDB, Spark) want types. Known columns get a fixed
type, so tables of different runs concatenate cleanly even when one run has no value in a
column (a CPU-only run has no device memory); other columns (size, param_*) are inferred.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from harness.data import fields

if TYPE_CHECKING:  # pandas is imported where a table is made: workers write CSV without it
    import pandas as pd

# The columns every row has: who, what, which sample, how long, the check, the work done.
CORE_COLUMNS = [
    "run_id", "machine", "workload", "variant", "framework", "framework_version", "device",
    "device_name", "status", "reason", "sweep", "size", "phase", "sample", "round", "seconds",
    "calls_per_sample", "check_passed", "check_metric", "check_value", "flops", "bytes",
]
# ... then one column per declared per-case value (harness.data.fields), in declaration order.
BASE_COLUMNS = [*CORE_COLUMNS, *(item.name for item in fields.csv_fields())]


def csv_columns(names: Iterable[str]) -> list[str]:
    """The columns of a table holding NAMES: BASE_COLUMNS, then the others (param_*) sorted."""
    return [*BASE_COLUMNS, *sorted(set(names) - set(BASE_COLUMNS))]


FLOAT_COLUMNS = ("seconds", "check_value", "flops", "bytes", *fields.columns_of_kind(float))
# round: the worker process (round of a --rounds run, 0-based) that timed the sample.
INTEGER_COLUMNS = ("sample", "round", "calls_per_sample", *fields.columns_of_kind(int))
BOOL_COLUMNS = ("check_passed", *fields.columns_of_kind(bool))
TEXT_COLUMNS = ("run_id", "machine", "workload", "variant", "framework", "framework_version",
                "device", "device_name", "status", "reason", "sweep", "phase", "check_metric",
                *fields.columns_of_kind(str))
TRUE_TEXT, FALSE_TEXT = ("true", "True"), ("false", "False")



def _missing(value: Any) -> bool:
    import pandas as pd

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
    import pandas as pd

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
    import pandas as pd

    return pd.DataFrame({name: _column(name, [row.get(name) for row in rows])
                         for name in columns}, columns=columns)


def frame_to_parquet_bytes(frame: pd.DataFrame) -> bytes:
    """Parquet bytes of the frame (ImportError without pyarrow)."""
    import pyarrow  # noqa: F401 - fail here, clearly, rather than inside pandas

    buffer = io.BytesIO()
    frame.to_parquet(buffer, engine="pyarrow", index=False)
    return buffer.getvalue()

"""Run folders: run.json (metadata, per-cell outcome) and measurements.csv (one row per sample).

Append-only and versioned (benchopt's results/, pyperf's metadata): every run gets a new folder
whose name sorts by time and is created with mkdir, so two runs never share one; every file is
written to a temporary name and renamed, so a crash never leaves half a file behind.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import secrets
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeAlias

from harness.core.filemode import give_created_mode
from harness.data import fields
from harness.data.columns import BASE_COLUMNS
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.data.serial import JsonObject, JsonValue
from harness.data.upgrade import UpgradeError, upgrade

RUN_FILE = "run.json"
MEASUREMENTS_FILE = "measurements.csv"
PARQUET_FILE = "measurements.parquet"

class StoreError(ValueError):
    """A run folder that cannot be read as a harness run (corrupt, foreign or too new)."""


class WriteFailed(OSError):
    """A run folder's files could not be saved (a full disk, a read-only mount): what the
    folder held before is left as it was. The CLI prints it in one line, exit 3. `why`: the
    system's words for it ("No space left on device")."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder, then rename over the target; the file
    gets the mode a plain open() gives under the umask (mkstemp's own is 0600)."""
    write_together([(path, data)])


def _temporary_copy(path: Path, data: bytes) -> Path:
    """DATA in a new temporary file beside PATH, on disk (fsync); removed again if that fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        give_created_mode(handle)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return Path(temporary)


def write_together(files: list[tuple[Path, bytes]]) -> None:
    """Each (path, bytes) written atomically, all or none: every file is first written in full
    beside its target, and only then renamed over it. Why: a full disk between run.json and
    measurements.csv left run.json newer than the CSV (3 check mismatches); now a write that
    fails leaves every target as it was (a rename needs no free space)."""
    written: list[tuple[Path, Path]] = []
    try:
        for path, data in files:
            written.append((_temporary_copy(path, data), path))
        for temporary, path in written:
            os.replace(temporary, path)
    except BaseException:
        for temporary, _ in written:
            temporary.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, document: Any) -> None:
    write_bytes_atomic(path, json.dumps(document, indent=2, default=str).encode())


def read_cell_result(path: Path) -> CellResult | None:
    """A worker's or a SLURM task's result file, typed; None while it is missing, half-written
    (a task killed mid-write) or not a cell result's document."""
    try:
        return CellResult.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def read_json_object(path: Path) -> dict[str, Any]:
    """A per-machine cache file's JSON object; {} where it is missing, unreadable or not an
    object (a cache that cannot be read costs the reuse only)."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def new_run_dir(out: Path, workload: str) -> Path:
    """A fresh folder `<UTC time>-<workload>-<random>`; mkdir fails rather than reuse one.
    The workload's part keeps letters, digits, '.', '_' and '-' only (a model file named
    'my model (v2).py' gives 'model-my_model_v2_'): a folder name a shell takes unquoted."""
    out.mkdir(parents=True, exist_ok=True)
    workload = SAFE_NAME.sub("_", workload)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    for _ in range(100):
        run_dir = out / f"{stamp}-{workload}-{secrets.token_hex(3)}"
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a unique run folder under {out}")


def _format(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return "x".join(str(v) for v in value)
    if value is None:
        return ""
    return value


# One row of measurements.csv (and the Parquet copy): column name -> a scalar (str, number,
# bool or None; a shape parameter is written as "AxB" text by _format).
MeasurementRow: TypeAlias = dict[str, JsonValue]


def measurement_rows(run_id: str, machine: str, spec_sweep: str, cell: CellResult,
              work: dict[int, dict[str, float]]) -> list[MeasurementRow]:
    """Tidy rows for one cell's worker result: one per sample, or one status row.

    WORK holds each case's FLOPs and bytes by case index (harness.analysis.stats.work_of).
    """
    base = {
        "run_id": run_id, "machine": machine, "workload": cell.workload,
        "variant": cell.variant, "framework": cell.framework,
        "framework_version": cell.framework_version or "",
        "device": cell.device, "device_name": cell.device_name or "",
        "sweep": spec_sweep, **fields.csv_values(cell, None),
    }
    if not cell.cases:
        return [{**base, "status": cell.status.value, "reason": cell.reason, "phase": "none",
                 **{f"param_{k}": _format(v) for k, v in cell.cell.params.items()}}]
    rows: list[MeasurementRow] = []
    for index, case in enumerate(cell.cases):
        check = case.check or {}
        case_base = {
            **base,
            "status": case.status.value,
            "reason": case.reason,
            "size": _format(case.case.get(spec_sweep)),
            **{f"param_{k}": _format(v) for k, v in case.case.items()},
            **work.get(index, {}),
            "check_passed": check.get("passed", ""), "check_metric": check.get("metric", ""),
            "check_value": check.get("value", ""),
            **fields.csv_values(cell, case),
        }
        if not case.measured:
            rows.append({**case_base, "phase": "none"})
            continue
        rows.append({**case_base, "phase": "cold", "sample": 0, "round": 0,
                     "seconds": case.cold_seconds, "calls_per_sample": 1})
        for sample, (record, index) in enumerate(case.warm_samples(), start=1):
            block_steps = record.block_steps(index)
            rows.append({**case_base, "phase": "warm", "sample": sample, "round": record.round,
                         "seconds": record.samples[index],
                         "calls_per_sample": record.calls_per_sample,
                         **({"block_steps": block_steps} if block_steps is not None else {})})
        rows += epoch_rows(case_base, case)
    if cell.stopped_short:
        # The cell stopped after these cases (timeout, crash, Ctrl-C): say so in its own row.
        rows.append({**base, "status": cell.status.value, "reason": cell.reason,
                     "phase": "none"})
    return rows


def epoch_rows(case_base: MeasurementRow, case: CaseResult) -> list[MeasurementRow]:
    """The whole calls (epochs) of a case timed in blocks of steps (harness.measure.blocks).

    Its warm rows are blocks scaled to seconds per call, each with `block_steps`, the steps
    its block ran; every whole call is kept as a row of phase "epoch" (sample = the call's
    number over the case's rounds, 1 the cold one; round = the worker that ran it), which the
    epoch figure draws, numbering the calls within each round.
    """
    return [{**case_base, "phase": "epoch", "sample": number, "round": round_number,
             "seconds": seconds, "calls_per_sample": 1}
            for number, (round_number, seconds) in enumerate(case.whole_calls, start=1)]


def write_measurements(run_dir: Path, rows: Iterable[MeasurementRow],
                       parquet: bool = True) -> None:
    """measurements.csv, and its typed Parquet copy unless PARQUET is False."""
    write_together(measurement_files(run_dir, list(rows), parquet))


def measurement_files(run_dir: Path, rows: list[MeasurementRow],
                      parquet: bool) -> list[tuple[Path, bytes]]:
    """measurements.csv's bytes, and its Parquet copy's where PARQUET (and pyarrow is here)."""
    extra = sorted({key for row in rows for key in row} - set(BASE_COLUMNS))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=BASE_COLUMNS + extra, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    files = [(run_dir / MEASUREMENTS_FILE, buffer.getvalue().encode())]
    typed = parquet_bytes(rows, BASE_COLUMNS + extra) if parquet else None
    return files + ([(run_dir / PARQUET_FILE, typed)] if typed is not None else [])


def parquet_bytes(rows: list[MeasurementRow], columns: list[str]) -> bytes | None:
    """The CSV's rows and columns as typed Parquet (None without pyarrow).

    The CSV stays the file every reader relies on; without pyarrow the Parquet copy is skipped
    rather than costing the measurements.
    """
    from harness.data.columns import frame_to_parquet_bytes, typed_frame

    try:
        return frame_to_parquet_bytes(typed_frame(rows, columns))
    except ImportError:
        return None


def write_run(run_dir: Path, document: RunDocument) -> None:
    """run.json in the current layout (RunDocument.to_dict)."""
    write_json_atomic(run_dir / RUN_FILE, document.to_dict())


def write_run_files(run_dir: Path, document: RunDocument, rows: list[MeasurementRow],
                    parquet: bool = False) -> None:
    """run.json, measurements.csv (and its Parquet copy where PARQUET) together, all or none
    (write_together): the CSV is never older or newer than the run.json it comes from."""
    run_json = json.dumps(document.to_dict(), indent=2, default=str).encode()
    write_together([*measurement_files(run_dir, rows, parquet), (run_dir / RUN_FILE, run_json)])


def read_run(run_dir: Path) -> JsonObject:
    """run.json of a harness run folder in the current layout, or StoreError saying why not.

    Older layouts are upgraded (harness.data.upgrade); load_run gives the typed document.
    """
    run_file = run_dir / RUN_FILE
    if not run_dir.is_dir():
        raise StoreError(f"{run_dir}: not a folder")
    if not run_file.is_file():
        raise StoreError(f"{run_dir}: no {RUN_FILE}; not a harness run folder")
    try:
        document = json.loads(run_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise StoreError(f"{run_file}: corrupt JSON ({exc})") from None
    if not isinstance(document, dict) or "schema_version" not in document:
        raise StoreError(f"{run_file}: no schema_version; not written by harness")
    try:
        upgraded = upgrade(document)
    except UpgradeError as exc:
        raise StoreError(f"{run_file}: {exc}") from None
    if not (run_dir / MEASUREMENTS_FILE).is_file():
        raise StoreError(f"{run_dir}: no {MEASUREMENTS_FILE}")
    return upgraded


def load_run(run_dir: Path) -> RunDocument:
    """The typed run document of a run folder (StoreError when it is not one)."""
    document = read_run(Path(run_dir))
    try:
        return RunDocument.from_dict(document)
    except (TypeError, ValueError, AttributeError) as exc:
        raise StoreError(f"{run_dir / RUN_FILE}: not a harness run document ({exc})") from None

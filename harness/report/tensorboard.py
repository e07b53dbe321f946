"""Optional TensorBoard export of the medians, as seed experiment 5 logged its sweep.

Uses the `tensorboard` package's own event writer (the one the frameworks' TensorBoard
loggers wrap), so no framework is imported into the CLI process. Without the package this is
a clean no-op with a note, never an error: the PNGs and summary.md are the report;
TensorBoard is a convenience.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import types
from pathlib import Path

import pandas as pd

INSTALL_HINT = "pip install tensorboard (or pip install 'harness[tensorboard]')"


def tensorboard_available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def _use_tensorboards_own_stub() -> None:
    """Keep TensorFlow out of the report's process: tensorboard's writer imports it when it is
    installed (~10-20 s, and log noise) unless a module named tensorboard.compat.notf exists,
    tensorboard's own switch (its no_tensorflow target) to the built-in stub, enough to write."""
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))


def scalar_series(stats: pd.DataFrame, epochs: pd.DataFrame) -> list[tuple[str, int, float]]:
    """(tag, step, value) triples: median seconds per size for every valid swept cell, and
    seconds per epoch by epoch number for training workloads."""
    series = []
    swept = stats[stats["valid"] & stats["size_value"].notna()]
    for _, row in swept.iterrows():
        tag = (f"{row['experiment']}/{row['variant']}/median_seconds/"
               f"{row['framework']} {row['device']} | {row['machine']}")
        series.append((tag, int(row["size_value"]), float(row["median_s"])))
    for _, row in epochs.iterrows():
        tag = (f"{row['experiment']}/{row['variant']}/epoch_seconds/"
               f"{row['framework']} {row['device']} | {row['machine']}")
        series.append((tag, int(row["epoch"]), float(row["seconds"])))
    return series


def export_scalars(series: list[tuple[str, int, float]], log_dir: Path) -> str:
    """Write the scalars as one TensorBoard event file; returns a one-line note either way."""
    if not tensorboard_available():
        return ("TensorBoard export skipped: the tensorboard package is not installed "
                f"({INSTALL_HINT}).")
    _use_tensorboards_own_stub()
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    log_dir.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(log_dir), filename_suffix=".harness")
    try:
        now = time.time()
        for tag, step, value in series:
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(Event(wall_time=now, step=step, summary=summary))
    finally:
        writer.close()
    return (f"TensorBoard: {len(series)} scalars written to {log_dir} "
            f"(tensorboard --logdir {log_dir}).")

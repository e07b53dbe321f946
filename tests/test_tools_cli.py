"""--version, the progress ETA, and a real torch + TensorFlow quick run: memory, Parquet, HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.run.progress import eta_seconds, format_eta


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_version_prints_the_package_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output.strip().startswith("harness 0.")


def test_eta_comes_from_the_cells_already_done() -> None:
    assert eta_seconds(None, 0, 4) is None and eta_seconds(30.0, 0, 4) is None
    assert eta_seconds(30.0, 1, 4) == pytest.approx(90.0)
    assert eta_seconds(30.0, 4, 4) == 0.0
    assert format_eta(None) == "ETA -:--"
    assert format_eta(90.4) == "ETA 1:30" and format_eta(3725) == "ETA 1:02:05"


@pytest.mark.slow
def test_real_torch_and_tensorflow_cells_record_memory_parquet_and_html(out_dir: Path) -> None:
    result = invoke("compare", "--workload", "matmul", "--quick", "--device", "cpu", "--sizes",
                    "64", "--framework", "torch,tensorflow", "--no-ceilings", "--details",
                    "--out", str(out_dir))
    assert result.exit_code == 0, result.output
    # Peak memory is in the full table (--details), not the compact one.
    assert "peak mem" in result.output and "MiB" in result.output
    run_dir = next(p for p in out_dir.iterdir() if p.is_dir())
    frame = pd.read_csv(run_dir / "measurements.csv")
    assert frame.columns.tolist() == pd.read_parquet(run_dir / "measurements.parquet")\
        .columns.tolist()
    by_framework = frame.groupby("framework")["peak_host_memory_bytes"].agg(["min", "max"])
    assert set(by_framework.index) == {"torch", "tensorflow"}
    # A framework import alone needs well over 50 MiB; every row of a cell holds its figure.
    assert (by_framework["min"] > 50 * 2**20).all()
    assert (by_framework["min"] == by_framework["max"]).all()
    assert frame["peak_device_allocated_bytes"].isna().all()  # CPU cells have no device peak
    document = json.loads((run_dir / "run.json").read_text())
    assert {cell["peak_host_memory_source"] for cell in document["cells"]} == {
        "wait4 (measured by the runner)"}
    assert all(cell["peak_host_memory_bytes_worker"] > 0 for cell in document["cells"])
    summary = (run_dir / "summary.md").read_text()
    assert "## Peak memory" in summary and "tensorflow cpu fp32" in summary
    page = (run_dir / "report.html").read_text()
    assert "<h2>Peak memory</h2>" in page and 'src="data:image/png;base64,' in page

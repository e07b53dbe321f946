"""FLOPs per call: the worker records a workload's exact count (matmul: 2n^3) with who counted
it, and the CSV's flops column and the CLI's rate carry it. (A user model's count by the
framework's own counter is checked in tests/test_usermodel.py, against one made by hand.)"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.cli_in_process import run_cli_in_process
from tests.in_subprocess import installed


@pytest.mark.slow  # a real (numpy) worker
def test_a_matmul_cell_counts_exactly_2n_cubed(tmp_path: Path) -> None:
    if not installed("numpy"):
        pytest.skip("numpy is not installed")
    # In this process: its worker forks from the session's warm numpy process.
    ran = run_cli_in_process("compare", "--workload", "matmul", "--framework", "numpy",
                             "--device", "cpu", "--sizes", "8,33", "--quick", "--no-ceilings",
                             "--no-report", "--out", str(tmp_path), env={"OMP_NUM_THREADS": "1"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_dir = next(tmp_path.iterdir())
    document = json.loads((run_dir / "run.json").read_text())
    counted = {case["case"]["n"]: case["extra"] for cell in document["cells"]
               for case in cell["cases"]}
    assert {n: extra["flops_per_call"] for n, extra in counted.items()} == \
        {8: 2 * 8**3, 33: 2 * 33**3}
    assert all(extra["flops_counted_by"] == "declared by the workload (exact)"
               for extra in counted.values())
    with (run_dir / "measurements.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {float(row["flops"]) for row in rows if row["size"] == "33"} == {2.0 * 33**3}
    assert "GFLOP/s" in ran.stdout

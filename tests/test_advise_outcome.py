"""`harness advise`'s outcome (issue 49): its exit code says whether the as-written cells ran,
not what the fixes showed.

The exit code is decided by RunResult.advise_exit_code, unit-tested on a synthetic advice run;
two CLI runs of the fault workload's advise variants (tests.fakes.adviseplugin, fake workers:
seconds) show it end to end: a fix failing parity is exit 0, an as-written cell failing exit 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.api import RunResult
from tests.test_advise import launch_bound_gpu_run

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The suite's fake plugin and the two small advise workloads beside it.
ADVISE_PLUGINS = "tests.fakes.plugin,tests.fakes.adviseplugin"


def advise_fault(tmp_path: Path, workload: str) -> subprocess.CompletedProcess:
    """`harness advise` of a fault workload on the fake CPU backend: the as-written variant and
    one fix, at size 2 (where the faults strike) and the 8 advise adds."""
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HARNESS_PLUGINS=ADVISE_PLUGINS)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "advise", "--workload", workload, "--framework",
         "fake", "--device", "cpu", "--sizes", "2", "--quick", "--no-ceilings", "--no-report",
         "--out", str(tmp_path / "out")],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)


# --- exit codes -------------------------------------------------------------------------------

def test_the_exit_code_reads_the_as_written_cells_only(tmp_path: Path) -> None:
    """bf16 failed its check (invalid): compare's exit code is 1, advise's 0; an as-written
    cell that failed makes advise's 1."""
    run = launch_bound_gpu_run()
    result = RunResult(tmp_path, run.cells, run)
    assert result.exit_code == 1 and result.advise_exit_code == 0
    gpu = next(cell for cell in run.cells if (cell.variant, cell.device)
               == ("as-written", "cuda:0"))
    gpu.status = type(gpu.status)("error")
    assert result.advise_exit_code == 1


def test_a_fix_failing_parity_is_a_finding_and_exit_0(tmp_path: Path) -> None:
    ran = advise_fault(tmp_path, "fault-advise")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "invalid: " in ran.stdout and "fails parity" in ran.stdout
    assert "harness check: " in ran.stdout and " 0 mismatches" in ran.stdout


def test_an_as_written_cell_failing_is_exit_1(tmp_path: Path) -> None:
    ran = advise_fault(tmp_path, "fault-advise-broken")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "harness check: " in ran.stdout and " 0 mismatches" in ran.stdout

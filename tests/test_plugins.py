"""Plugins: a workload package found through its entry point, and plugins that fail to load.

The example package in examples/harness-softmax is made importable with an entry-point record
(a *.dist-info folder, exactly what `pip install` writes) on PYTHONPATH of a child process, so
the test exercises the real discovery path without changing the test environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = PROJECT_ROOT / "examples" / "harness-softmax"


def installed_like_pip(site: Path) -> Path:
    """Copy the example's package and write the dist-info pip would write."""
    shutil.copytree(EXAMPLE / "harness_softmax", site / "harness_softmax")
    info = site / "harness_softmax-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: harness-softmax\n"
                                   "Version: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[harness.workloads]\nsoftmax = harness_softmax.workload:SPEC\n")
    return site


def run_cli(*args: str, pythonpath: Path | None = None, plugins: str = "",
            timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, HARNESS_PLUGINS=plugins)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), str(PROJECT_ROOT)])
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=PROJECT_ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_an_installed_workload_plugin_is_listed_and_runs(tmp_path: Path) -> None:
    site = installed_like_pip(tmp_path / "site")
    listed = run_cli("list", pythonpath=site)
    assert listed.returncode == 0, listed.stderr
    assert "softmax" in listed.stdout and "row-wise softmax" in listed.stdout
    out = tmp_path / "results"
    ran = run_cli("compare", "--workload", "softmax", "--quick", "--device", "cpu",
                  "--no-ceilings", "--out", str(out), pythonpath=site)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_dir = next(out.iterdir())
    document = json.loads((run_dir / "run.json").read_text())
    assert {cell["cell"]["framework"]: cell["status"] for cell in document["cells"]} == {
        "torch": "ok", "numpy": "ok"}
    assert (run_dir / "summary.md").is_file()
    assert document["frameworks"]["torch"]["color"]  # the report's colours travel with the run


def test_without_the_plugin_every_command_still_works(tmp_path: Path) -> None:
    listed = run_cli("list")
    assert listed.returncode == 0 and "softmax" not in listed.stdout
    missing = run_cli("compare", "--workload", "softmax", "--out", str(tmp_path))
    assert missing.returncode == 2 and "unknown workload 'softmax'" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_broken_entry_point_is_one_warning_and_an_unavailable_row(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "broken_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[harness.workloads]\nbroken = no_such_module_anywhere:SPEC\n"
        "[harness.frameworks]\nghost = no_such_backend_anywhere:FRAMEWORK\n")
    listed = run_cli("list", pythonpath=site)
    assert listed.returncode == 0, listed.stderr
    assert "broken: unavailable" in listed.stdout and "No module named" in listed.stdout
    assert "matmul" in listed.stdout and "Traceback" not in listed.stderr
    out = tmp_path / "results"
    ran = run_cli("compare", "--workload", "matmul", "--framework", "numpy,ghost", "--device",
                  "cpu", "--quick", "--sizes", "16", "--no-ceilings", "--no-report",
                  "--out", str(out), pythonpath=site)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    document = json.loads(next(out.glob("*/run.json")).read_text())
    statuses = {cell["cell"]["framework"]: (cell["status"], cell["reason"])
                for cell in document["cells"]}
    assert statuses["numpy"][0] == "ok"
    assert statuses["ghost"][0] == "unavailable" and "failed to load" in statuses["ghost"][1]
    # One warning for the broken framework the run asked for; none for the unused workload.
    warnings = [line for line in ran.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "'ghost'" in warnings[0], ran.stderr
    assert "no_such_module_anywhere" not in ran.stderr and "warning" not in listed.stderr


@pytest.mark.parametrize("module", ["no_such_plugin_module"])
def test_a_plugin_module_that_fails_to_import_is_one_warning_line(module: str) -> None:
    listed = run_cli("list", plugins=module)
    assert listed.returncode == 0
    warnings = [line for line in listed.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and module in warnings[0]
    assert "Traceback" not in listed.stderr and "matmul" in listed.stdout


def test_a_plugin_without_declarations_has_every_variant_tried() -> None:
    """A workload written before declarations (no `capabilities`, like the test plugin's fault
    workload) keeps working: the planner refuses none of its cells, each reaches a worker."""
    from harness.core import registry
    from harness.run import planner
    from harness.spec import Cell

    spec = registry.load_workload("fault")  # tests/fakes/plugin.py, loaded by conftest
    assert not spec.capabilities
    cells = [Cell("fault", variant, "fake", device) for variant in spec.variants
             for device in ("cpu", "cuda:0")]
    # None: harness.api hands the cell to the executor, which starts its worker.
    refuse = planner.refuse_declared(spec)
    assert [cell for cell in cells if refuse(cell) is None] == cells
    assert all(entry.runs_on == ("cpu", "gpu") for entry in planner.capability_matrix(spec))

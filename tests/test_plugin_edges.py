"""The plugin path without its sharp edges: a plugin as one .py file given by path, a spec
object in WORKLOADS, no `kind`, a registered name that differs from the spec's, a variant
declared for one framework only, and a plugin that fails to import listed as unavailable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent

PLUGIN = '''
    from pathlib import Path

    import numpy as np

    from harness.spec import Capability, Check, Param, WorkloadSpec


    class Double:
        def __init__(self, x):
            self.x, self.y = x, None

        def step(self):
            self.y = self.x * 2

        def output(self):
            return {"y": self.y}


    def make_task(case, variant, device, inputs):
        return Double(inputs["x"])


    def make_inputs(case, variant):
        return {"x": np.arange(case["n"], dtype=np.float32)}


    def check(case, variant, inputs, output):
        ok = bool(np.array_equal(output["y"], inputs["x"] * 2))
        return Check(ok, "equal", 0.0 if ok else 1.0, 0.0, "doubled exactly")


    SPEC = WorkloadSpec(  # no kind; named otherwise than its WORKLOADS key
        name="a-name-nobody-uses",
        summary="doubles a vector (test plugin)",
        sweep="n",
        params={"n": Param([4], [4], "length")},
        variants=("plain", "numpy-only-trick"),
        implementations={"numpy": str(Path(__file__)), "torch": str(Path(__file__))},
        make_inputs=make_inputs,
        check=check,
        capabilities={"torch": Capability(variants=("plain",))},
    )
    WORKLOADS = {"doubler": SPEC}
'''


def run_cli(*args: str, plugins: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HARNESS_PLUGINS=plugins, PYTHONPATH=str(PROJECT_ROOT),
               OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=PROJECT_ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_plugin_file_by_path_with_a_spec_object_runs_under_its_registered_name(
        tmp_path: Path) -> None:
    plugin = tmp_path / "doubler_plugin.py"
    plugin.write_text(textwrap.dedent(PLUGIN))
    listed = run_cli("list", plugins=str(plugin))
    assert listed.returncode == 0 and "doubler" in listed.stdout, listed.stderr
    out = tmp_path / "out"
    ran = run_cli("compare", "--workload", "doubler", "--framework", "numpy,torch", "--device",
                  "cpu", "--variant", "all", "--quick", "--no-ceilings", "--no-report",
                  "--out", str(out), plugins=str(plugin))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    document = json.loads(next(out.glob("*/run.json")).read_text())
    statuses = {(cell["cell"]["framework"], cell["cell"]["variant"]): (cell["status"],
                                                                       cell["reason"])
                for cell in document["cells"]}
    assert statuses[("numpy", "plain")][0] == "ok"
    assert statuses[("numpy", "numpy-only-trick")][0] == "ok"
    assert statuses[("torch", "plain")][0] == "ok"
    # Declared for numpy only: torch's cell says so instead of running it.
    assert statuses[("torch", "numpy-only-trick")] == (
        "unavailable", "not implemented (this implementation runs plain)")


def test_a_plugin_that_fails_to_import_lists_as_unavailable(tmp_path: Path) -> None:
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text("raise ImportError('needs a package this machine lacks')\n")
    listed = run_cli("list", plugins=str(plugin))
    assert listed.returncode == 0
    assert "broken_plugin: unavailable" in listed.stdout
    assert "needs a package this machine lacks" in listed.stdout
    warnings = [line for line in listed.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "Traceback" not in listed.stderr

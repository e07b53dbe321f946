"""What --quick cuts to stay a smoke test, and that it says so: the machine's remembered
ceilings instead of a new probe, one child process probing every device, torch.compile on one
compile thread, and the run's --quick line naming each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.analysis.stats import quick_line
from harness.core.settings import Settings
from harness.data.ceilings import MEMORY, DeviceCeiling, Peaks
from harness.data.results import RunDocument
from harness.measure import ceilings
from harness.run import ceiling_probe
from harness.run.runceilings import measure_ceilings
from harness.run.runner import cell_environment
from harness.spec import Cell


def write_cache(folder: Path, device: str, gflops: float) -> None:
    """This machine's remembered --quick probe of DEVICE, in the cache at FOLDER."""
    assert ceilings.cache_path().parent == folder
    ceilings.remember(DeviceCeiling(device, Peaks({"fp32": gflops}, {MEMORY: 900.0}),
                                    description="Some GPU", probe_sizes=(1024, 2048),
                                    measured_with=("torch",)))


def test_quick_takes_the_remembered_ceilings_and_probes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    write_cache(tmp_path, "cuda:0", 50_000.0)

    def probe(*args: Any, **kwargs: Any) -> dict[str, DeviceCeiling]:
        raise AssertionError("probed although the machine remembers this device")

    monkeypatch.setattr(ceiling_probe, "measure_all", probe)
    figures = measure_ceilings(["cuda:0"], None, quick=True).devices["cuda:0"]
    assert figures.description == "Some GPU"
    assert figures.remembered and figures.remembered.how.startswith("best probe")
    assert figures.probe.gflops == {"fp32": 50_000.0}
    assert figures.physical and figures.physical.gflops["fp32"] == pytest.approx(62_500.0)


def test_a_device_the_machine_does_not_remember_is_probed_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    write_cache(tmp_path, "cuda:0", 50_000.0)
    calls: list[list[str]] = []

    def probe(devices: list[str], *args: Any, **kwargs: Any) -> dict[str, DeviceCeiling]:
        calls.append(list(devices))
        return {device: DeviceCeiling(device, error="not here") for device in devices}

    monkeypatch.setattr(ceiling_probe, "measure_all", probe)
    measure_ceilings(["cpu", "cuda:0"], None, quick=True)  # cpu is not remembered
    measure_ceilings(["cuda:0"], None, quick=False)  # a full run's sizes were not probed
    assert calls == [["cpu"], ["cuda:0"]]
    assert ceilings.recall("cuda:1").figures is None


def test_one_child_probes_every_device_and_names_each_devices_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    figures = ceiling_probe.measure_all(["cpu", "nodevice:7"], None, sizes=[64, 128])
    assert (figures["cpu"].gflops("fp32") or 0.0) > 0
    assert figures["nodevice:7"].failed
    # What one child measured is remembered for the next --quick run.
    assert ceilings.recall("cpu").figures is not None


@pytest.mark.parametrize("framework", ["torch", "keras-torch"])
def test_quick_torch_cells_trust_the_cpu_isa_unless_the_user_chose(
        framework: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHINDUCTOR_VEC_ISA_OK", raising=False)
    cell, quick = Cell("matmul", "fp32", framework, "cpu"), Settings(quick=True)
    assert cell_environment(cell, settings=quick)["TORCHINDUCTOR_VEC_ISA_OK"] == "1"
    assert "TORCHINDUCTOR_VEC_ISA_OK" not in cell_environment(cell, settings=Settings())
    assert "TORCHINDUCTOR_VEC_ISA_OK" not in cell_environment(
        Cell("matmul", "fp32", "numpy", "cpu"), settings=quick)
    monkeypatch.setenv("TORCHINDUCTOR_VEC_ISA_OK", "0")
    assert cell_environment(cell, settings=quick)["TORCHINDUCTOR_VEC_ISA_OK"] == "0"


def test_the_quick_line_names_what_quick_changed() -> None:
    document = RunDocument(run_id="r", command=[], started=0.0, workload="matmul", sweep="n",
                           params={}, quick=True, timeout_s=1.0, hints={}, frameworks={},
                           host={}, planned_cells=[{"framework": "torch"}],
                           ceilings={"cuda:0": {"remembered": "best probe"}, "cpu": {}})
    line = quick_line(document)
    assert line.startswith("--quick: one round; short timing; no energy pass; ")
    assert "TORCHINDUCTOR_VEC_ISA_OK=1" in line
    assert "remembered" not in line  # the ceilings line says it (test_ceilings_remembered.py)
    document.quick = False
    assert quick_line(document) == ""


class PidView:
    """A view whose figure names the process that drew it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def draw(self, table: Any, context: Any, out_dir: Path) -> list[Path]:
        import os

        path = out_dir / f"{self.name}-{os.getpid()}.png"
        path.write_text(str(table))
        return [path]


def test_the_figures_are_drawn_in_parallel_processes_and_come_back_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from harness import report

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    jobs = [(PidView(f"v{index}"), index, None, tmp_path) for index in range(4)]
    figures = report._draw_all(jobs)
    assert [paths[0].name.split("-")[0] for paths in figures] == ["v0", "v1", "v2", "v3"]
    assert all(paths[0].read_text() == str(index) for index, paths in enumerate(figures))
    assert str(os.getpid()) not in {paths[0].stem.split("-")[1] for paths in figures}
    # Too few figures to be worth a process each: drawn here, in turn.
    [[here]] = report._draw_all(jobs[:1])
    assert here.stem.endswith(str(os.getpid()))


def test_a_framework_without_cached_bytecode_gets_the_harness_cache_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker would compile such a framework's modules from source again (the H100
    host: 2,312 modules, 10 s per process); the harness's cache keeps them for the next."""
    import compileall
    import sys

    from harness.core import registry
    from harness.core.settings import Settings
    from harness.run import runner
    from harness.spec import FrameworkSpec

    package = tmp_path / "src" / "nopyc_framework"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(registry, "load_framework", lambda name: FrameworkSpec(
        name=name, import_name="nopyc_framework", package="harness.backends.nopyc"))
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    cached = Settings(cache_dir=str(tmp_path / "cache"))  # the run's HARNESS_CACHE_DIR
    assert runner.bytecode_environment("nopyc", env, cached) == {
        "PYTHONPYCACHEPREFIX": str(tmp_path / "cache" / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    worker_env = cell_environment(Cell("matmul", "fp32", "nopyc", "cpu"))
    assert worker_env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "cache" / "pycache")
    assert "PYTHONDONTWRITEBYTECODE" not in worker_env
    # A user's own prefix is theirs; bytecode beside the sources needs nothing.
    assert runner.bytecode_environment("nopyc", {"PYTHONPYCACHEPREFIX": "/elsewhere"}) == {}
    assert compileall.compile_dir(str(package), quiet=1, legacy=False)
    assert runner.bytecode_environment("nopyc", env, cached) == {}
    assert "nopyc_framework" not in sys.modules  # found, never imported


def test_forked_drawers_inherit_the_drawing_modules(tmp_path: Path) -> None:
    """Each figure's forked drawer found pyplot and seaborn imported and a figure's fonts
    loaded (harness.report.warm_drawing) instead of paying them again: a fresh interpreter,
    so nothing else imported them first (the suite's own processes do)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        os.sched_getaffinity = lambda pid: {{0, 1, 2, 3}}
        from harness import report
        from harness.report import style
        style.use_private_matplotlib_config()
        assert "seaborn" not in sys.modules
        class Seen:
            def draw(self, table, context, out_dir):
                path = Path(out_dir) / f"{{table}}.txt"
                path.write_text(str("seaborn" in sys.modules))
                return [path]
        figures = report._draw_all([(Seen(), index, None, Path({str(tmp_path)!r}))
                                    for index in range(3)])
        print(",".join(paths[0].read_text() for paths in figures))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True,True,True"

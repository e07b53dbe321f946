"""Ceilings remembered per machine: every run reuses this machine's probe while its fingerprint
(CPU, cores, GPUs and driver, the probe's library versions) matches and the probe is younger
than REMEMBER_FOR_DAYS, says so on one line, and probes again when either changes or when
--probe-ceilings asks. Why: a probe was ~30 s of a 55 s run on an H200 host, every run."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness import api
from harness.analysis.stats import ceilings_line
from harness.data import store
from harness.data.ceilings import MEMORY, Ceilings, DeviceCeiling, Peaks, as_ceilings
from harness.data.results import RunDocument
from harness.measure import ceilings, envinfo
from harness.run import ceiling_probe
from harness.run.runceilings import QUICK_PROBE_SIZES, measure_ceilings
from tests.cli_in_process import run_cli_in_process

# The probes whose date a test reads are all made at this one time: the date they print and
# the date expected cannot fall either side of a midnight the suite runs across.
PROBED_AT = time.time()
TODAY = time.strftime("%Y-%m-%d", time.localtime(PROBED_AT))


def probe_figures(device: str, fp32: float = 100.0) -> DeviceCeiling:
    """What a child's probe of DEVICE reports (sizes the default ladder: any run may reuse it)."""
    return DeviceCeiling(device, Peaks({"fp32": fp32}, {MEMORY: 10.0}), description="Some CPU",
                         measured_with=("numpy",), probe_sizes=(1024, 2048, 4096, 8192))


def entry(document: RunDocument, device: str) -> DeviceCeiling:
    """A device's ceilings as the run document holds them."""
    return as_ceilings(document.ceilings).devices[device]


@pytest.fixture
def probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """A cache of this test's own and a stub probe child that records which devices it probed
    and remembers its figures as the real one does."""
    monkeypatch.setenv(ceilings.CACHE_ENV, str(tmp_path / "cache"))
    calls: list[list[str]] = []

    def measure_all(devices: list[str], largest_n: int | None = None, **options: Any
                    ) -> dict[str, DeviceCeiling]:
        calls.append(list(devices))
        return {device: ceilings.with_bounds(ceilings.remember(
            probe_figures(device), options.get("fingerprint"), now=PROBED_AT))
            for device in devices}

    monkeypatch.setattr(ceiling_probe, "measure_all", measure_all)
    return calls


def run_rated(out: Path, probe_ceilings: bool = False) -> RunDocument:
    """A fault-rated run (it counts FLOPs, so its ceilings are settled first) of one fake cell."""
    plan = api.plan("fault-rated", frameworks="fake", devices="cpu", variants="ok", sizes=[1],
                    quick=True, out=out, probe_ceilings=probe_ceilings)
    return api.execute(plan, progress=False).document


def test_a_second_run_reuses_the_ceilings_and_says_so(
        probes: list[list[str]], tmp_path: Path) -> None:
    first = run_rated(tmp_path / "results")
    assert probes == [["cpu"]]
    assert entry(first, "cpu").probed_because == "no remembered probe of cpu"
    assert ceilings_line(first).startswith("ceilings probed now (no remembered probe of cpu)")
    second = run_rated(tmp_path / "results")
    assert probes == [["cpu"]], "the second run probed again"
    reused = entry(second, "cpu")
    assert reused.remembered and reused.remembered.probed == TODAY
    assert not reused.probed_because
    assert reused.probe.gflops == {"fp32": 100.0} and reused.physical
    assert ceilings_line(second) == (f"ceilings remembered from {TODAY} (this machine's probe; "
                                     "--probe-ceilings measures again)")
    # Stored in run.json as well, for the report and `harness check`.
    [run_dir] = [path for path in (tmp_path / "results").iterdir()
                 if store.read_run(path)["run_id"] == second.run_id]
    assert store.read_run(run_dir)["ceilings"]["cpu"]["remembered"]["probed"] == TODAY


def test_probe_ceilings_probes_again_and_keeps_the_best(
        probes: list[list[str]], tmp_path: Path) -> None:
    run_rated(tmp_path / "results")
    again = run_rated(tmp_path / "results", probe_ceilings=True)
    assert probes == [["cpu"], ["cpu"]]
    assert entry(again, "cpu").probed_because == "--probe-ceilings"
    assert entry(again, "cpu").remembered is None


def test_a_changed_fingerprint_probes_again(
        probes: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measure_ceilings(["cpu"], None)
    version = envinfo.metadata.version

    def upgraded(name: str) -> str:
        return "99.0" if name == "numpy" else version(name)

    monkeypatch.setattr(envinfo.metadata, "version", upgraded)
    figures = measure_ceilings(["cpu"], None).devices["cpu"]
    assert probes == [["cpu"], ["cpu"]]
    assert figures.probed_because.startswith("this machine changed since cpu's probe: numpy ")
    assert figures.probed_because.endswith(" -> 99.0")
    # Fewer usable cores is another machine for the probe as well.
    monkeypatch.setattr(envinfo, "usable_cores", lambda: 999)
    measure_ceilings(["cpu"], None)
    assert probes[-1] == ["cpu"] and len(probes) == 3
    assert ceilings.recall("cpu").figures is not None  # now remembered for this fingerprint


def test_a_probe_older_than_the_age_probes_again(probes: list[list[str]]) -> None:
    month_ago = time.time() - (ceilings.REMEMBER_FOR_DAYS + 1) * ceilings.DAY_S
    ceilings.remember(probe_figures("cpu", fp32=500.0), now=month_ago)
    figures = measure_ceilings(["cpu"], None).devices["cpu"]
    assert probes == [["cpu"]]
    assert f"is older than {ceilings.REMEMBER_FOR_DAYS} days" in figures.probed_because
    # The stale best is replaced, not merged: it may describe a machine that has changed.
    assert figures.cached is None
    now = ceilings.recall("cpu").figures
    assert now is not None and now.probe.gflops == {"fp32": 100.0}


def test_only_the_devices_without_a_usable_probe_are_probed(probes: list[list[str]]) -> None:
    ceilings.remember(probe_figures("cuda:0", fp32=50_000.0), now=PROBED_AT)
    figures = measure_ceilings(["cpu", "cuda:0"], None)
    assert probes == [["cpu"]]
    assert list(figures.devices) == ["cpu", "cuda:0"] and figures.devices["cuda:0"].remembered
    document = RunDocument(run_id="r", command=[], started=0.0, workload="matmul", sweep="n",
                           params={}, quick=False, timeout_s=1.0, hints={}, frameworks={},
                           host={}, planned_cells=[], ceilings=figures)
    assert ceilings_line(document) == (
        f"ceilings remembered from {TODAY} for cuda:0 (this machine's probe; --probe-ceilings "
        "measures again); ceilings probed now (no remembered probe of cpu), remembered on "
        f"this machine for {ceilings.REMEMBER_FOR_DAYS} days")


def test_a_quick_probe_is_not_a_full_runs_ceiling(probes: list[list[str]]) -> None:
    """Two sizes set a GPU's bar too low for a full run's large matmuls (its bound would flag
    honest results), so a full run probes again; another --quick run reuses it."""
    ceilings.remember(replace(probe_figures("cpu"), probe_sizes=tuple(QUICK_PROBE_SIZES)))
    assert measure_ceilings(["cpu"], None, quick=True).devices["cpu"].remembered
    full = measure_ceilings(["cpu"], None).devices["cpu"]
    assert probes == [["cpu"]] and "did not try n=4096,8192" in full.probed_because


def test_entries_from_before_fingerprints_are_not_reused(probes: list[list[str]],
                                                         tmp_path: Path) -> None:
    old_key = "|".join([envinfo.machine_label(), str(envinfo.usable_cores()), "cpu", "Some"])
    ceilings.cache_path().parent.mkdir(parents=True)
    ceilings.cache_path().write_text(json.dumps({old_key: {
        "figures": {"peak_gflops_by_precision": {"fp32": 1.0}}, "how": "best probe"}}))
    assert ceilings.recall("cpu").why_not == "no remembered probe of cpu"


def test_the_cli_prints_where_the_ceilings_came_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run through the CLI, its cache holding this machine's probe: no probe child (the
    figures are the remembered ones) and the line among the last ones printed."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(ceilings.CACHE_ENV, str(cache))
    ceilings.remember(probe_figures("cpu", fp32=123.0), now=PROBED_AT)
    cached = json.loads((cache / "ceilings.json").read_text())
    done = run_cli_in_process(
        "compare", "--workload", "fault-rated", "--framework", "fake", "--device", "cpu",
        "--variant", "ok", "--sizes", "1", "--quick", "--no-report", "--out",
        str(tmp_path / "results"))
    assert done.returncode == 0, done.stderr
    assert (f"ceilings remembered from {TODAY} (this machine's probe; --probe-ceilings "
            "measures again)") in done.stdout.splitlines()
    [run_json] = (tmp_path / "results").glob("*/run.json")
    stored = Ceilings.from_json(json.loads(run_json.read_text())["ceilings"])
    assert stored.devices["cpu"].probe.gflops == {"fp32": 123.0}
    assert json.loads((cache / "ceilings.json").read_text()) == cached  # nothing probed


def test_a_run_larger_than_the_probe_probes_again(probes: list[list[str]]) -> None:
    """A size inside the remembered ladder is bracketed by the sizes it tried; one above it
    could reach a higher rate than any size probed."""
    ceilings.remember(probe_figures("cpu"))
    assert measure_ceilings(["cpu"], 3000).devices["cpu"].remembered
    larger = measure_ceilings(["cpu"], 10_000).devices["cpu"]
    assert probes == [["cpu"]] and "did not try n=10000" in larger.probed_because

"""A model file's first run on a machine does not wait for the ceilings probe (issue 63: 12.8 s
of a 19.3 s first `compare --model` on the 2-core VM): its rates are judged against the
machine's theoretical bound, still flagged IMPLAUSIBLE above it, the line says the probe waits,
and the next run probes. A device no bound covers is probed at once: no rate goes unjudged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.analysis.plausibility import judge_case
from harness.analysis.stats import ceilings_line
from harness.data.ceilings import MEMORY, Ceilings, DeviceCeiling, Peaks
from harness.data.results import RunDocument
from harness.measure import bounds, ceilings
from harness.run import ceiling_probe
from harness.run.runceilings import DEFERRED_WHY, measure_ceilings


@pytest.fixture
def probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """A cache of this test's own and a stub probe child that records what it probed."""
    monkeypatch.setenv(ceilings.CACHE_ENV, str(tmp_path / "cache"))
    calls: list[list[str]] = []

    def measure_all(devices: list[str], largest_n: int | None = None, **options: Any
                    ) -> dict[str, DeviceCeiling]:
        calls.append(list(devices))
        return {device: ceilings.with_bounds(ceilings.remember(DeviceCeiling(
            device, Peaks({"fp32": 100.0}, {MEMORY: 10.0}), measured_with=("numpy",),
            probe_sizes=(1024, 2048, 4096, 8192)), options.get("fingerprint")))
            for device in devices}

    monkeypatch.setattr(ceiling_probe, "measure_all", measure_all)
    return calls


def document_of(figures: Any) -> RunDocument:
    return RunDocument(run_id="r", workload="matmul", sweep="n", ceilings=figures)


def test_the_first_run_defers_the_probe_and_the_next_one_probes(
        probes: list[list[str]]) -> None:
    first = measure_ceilings(["cpu"], None, defer_first=True).devices["cpu"]
    assert probes == []
    assert first.deferred == DEFERRED_WHY and first.theoretical_only and first.physical
    line = ceilings_line(document_of(Ceilings({"cpu": first})))
    assert line.startswith("ceilings not probed for cpu (this machine's first run of a model "
                           "file): rates checked against the theoretical peak only")
    # A rate above the theoretical peak is still IMPLAUSIBLE; one under it is no share of it.
    bound = first.physical.gflops["fp32"] if first.physical else 0.0
    [above] = judge_case(bound * 2, None, "as-written", "cpu",
                         Ceilings({"cpu": first}))
    assert above.implausible and "theoretical" in above.text()
    [under] = judge_case(bound / 10, None, "as-written", "cpu",
                         Ceilings({"cpu": first}))
    assert under.kind == "unknown"
    # The next run, a model's or not, probes: the deferral is remembered on the machine.
    second = measure_ceilings(["cpu"], None, defer_first=True).devices["cpu"]
    assert probes == [["cpu"]] and not second.deferred and not second.theoretical_only
    assert second.probed_because == "no remembered probe of cpu"
    third = measure_ceilings(["cpu"], None, defer_first=True).devices["cpu"]
    assert probes == [["cpu"]] and third.remembered


def test_only_a_first_run_with_a_bound_defers(probes: list[list[str]],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # Not asked to (a workload's run, advise, --probe-ceilings): probed as before.
    assert not measure_ceilings(["cpu"], None).devices["cpu"].deferred
    assert probes == [["cpu"]]
    monkeypatch.setattr(ceilings, "DEFERRED_FILE", "other-deferred.json")
    again = measure_ceilings(["cpu"], None, probe=True, defer_first=True).devices["cpu"]
    assert probes == [["cpu"], ["cpu"]] and not again.deferred
    # A GPU without a datasheet figure has no bound: probed now, not left unjudged.
    monkeypatch.setattr(bounds.HostFacts, "from_machine", classmethod(
        lambda cls, **options: bounds.HostFacts(cores=2, gpus=("Some Unknown GPU",))))
    figures = measure_ceilings(["cuda:0"], None, defer_first=True).devices["cuda:0"]
    assert probes[-1] == ["cuda:0"] and not figures.deferred

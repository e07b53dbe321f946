"""The ceilings record (harness.data.ceilings): every stored form reads into it, it writes one
form and reads that back unchanged, and the judges hold rates to its figures."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.plausibility import judge_case
from harness.data.ceilings import (
    GFLOPS,
    HOST_LINK,
    MEMORY,
    OLD_GFLOPS,
    Bound,
    Ceilings,
    DeviceCeiling,
    Peaks,
    Remembered,
    RememberedProbe,
    as_ceilings,
)
from harness.measure import ceilings

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "example"

FINGERPRINT = {"cpu_model": "Test CPU", "cores": 2, "gpus": [], "gpu_driver": None,
               "libraries": {"numpy": "2.0", "torch": None}}
CACHED = RememberedProbe(
    "cuda:0", FINGERPRINT, 1_795_000_000.0, Peaks({"fp32": 52_000.0}, {MEMORY: 3100.0}),
    description="NVIDIA H100 80GB HBM3", probed="2026-11-20", probe_sizes=(1024, 8192),
    measured_with=("torch",), how="best probe seen on this machine: sizes [1024, 8192]")
FULL = DeviceCeiling(
    "cuda:0", Peaks({"fp32": 51_000.0, "tf32": 380_000.0, "bf16": 600_000.0},
                    {MEMORY: 3000.0, HOST_LINK: 50.0}),
    physical=Bound({"fp32": 65_000.0}, {MEMORY: 3410.0}, {"fp32": "best probe x 1.25"}),
    description="NVIDIA H100 80GB HBM3", measured_with=("torch", "numpy"),
    probe_sizes=(1024, 2048, 8192), reached_at_n={"fp32": 8192, "bf16": 8192},
    contended_cores=0.5, remembered=Remembered("2026-11-20", "best probe seen"),
    probed_because="", cached=CACHED, extra_fields={"note": "a newer worker's key"})


def test_a_record_round_trips_through_its_json() -> None:
    record = Ceilings({"cuda:0": FULL, "cpu": DeviceCeiling("cpu", error="probe timed out"),
                       "gpu": DeviceCeiling("gpu", physical=Bound(gflops={"fp32": 1.0}),
                                            theoretical_only=True)})
    written = record.to_json()
    assert Ceilings.from_json(json.loads(json.dumps(written))) == record
    # One name for the GFLOP/s by precision: the probe's figures, both bounds, the cache's.
    text = json.dumps(written)
    assert f'"{OLD_GFLOPS}"' not in text
    assert text.count(f'"{GFLOPS}"') == 4
    # Nothing written that says nothing: a failed probe is its device and its reason.
    assert written["cpu"] == {"device": "cpu", "error": "probe timed out"}


def test_both_names_of_the_gflops_read_as_one() -> None:
    old = DeviceCeiling.from_json({"device": "cpu", OLD_GFLOPS: {"fp32": 100.0},
                                   "physical": {GFLOPS: {"fp32": 400.0}}})
    new = DeviceCeiling.from_json({"device": "cpu", GFLOPS: {"fp32": 100.0},
                                   "physical": {OLD_GFLOPS: {"fp32": 400.0}}})
    assert old == new == DeviceCeiling("cpu", Peaks({"fp32": 100.0}),
                                       physical=Bound({"fp32": 400.0}))


def test_the_oldest_forms_read_as_the_record() -> None:
    """peak_gflops (fp32 alone), peak_gflops_<precision>, matmul_n, measured_with as one name."""
    entry = DeviceCeiling.from_json({"device": "cuda:0", "peak_gflops": 90.0,
                                     "peak_gflops_fp16": 400.0, "matmul_n": 2048,
                                     "measured_with": "torch", "bandwidth_gbps": 10,
                                     "h2d_pinned_gbps": "fast"})
    assert entry.probe == Peaks({"fp32": 90.0, "fp16": 400.0}, {MEMORY: 10.0})
    assert entry.probe_sizes == (2048,) and entry.reached_at_n == {"fp32": 2048, "fp16": 2048}
    assert entry.measured_with == ("torch",) and entry.extra_fields == {}
    # The newer name wins over the per-precision key it replaced.
    both = DeviceCeiling.from_json({"peak_gflops": 90.0, OLD_GFLOPS: {"fp32": 95.0}}, "cpu")
    assert both.device == "cpu" and both.gflops("fp32") == 95.0


def stored_ceilings() -> list[tuple[str, object]]:
    """run.json's `ceilings` of every run folder stored under docs/example/."""
    found = []
    for archive in sorted(EXAMPLES.glob("*.tar.gz")):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.name.endswith("run.json"):
                    handle = tar.extractfile(member)
                    assert handle is not None
                    found.append((member.name, json.load(handle).get("ceilings")))
    return found


def test_every_stored_example_runs_ceilings_load_into_the_record() -> None:
    stored = stored_ceilings()
    assert len(stored) >= 10, "the example run folders are gone"
    probed = 0
    for name, document in stored:
        record = as_ceilings(document)
        for device, raw in (document or {}).items():  # type: ignore[attr-defined]
            entry = record.devices[device]
            assert entry.device == device and entry.extra_fields == {}, name
            if "error" in raw:
                assert entry.failed and record.for_device(device) is None, name
                continue
            probed += 1
            # Every figure stored is in the record, under its one name.
            assert entry.gflops("fp32") == raw.get("peak_gflops_by_precision", {}).get(
                "fp32", raw.get("peak_gflops")), name
            assert entry.gbps(MEMORY) == raw.get("bandwidth_gbps"), name
            assert entry.gbps(HOST_LINK) == raw.get("h2d_pinned_gbps"), name
            assert entry.description == raw.get("device_name", ""), name
        # Written and read again, nothing changes.
        assert Ceilings.from_json(record.to_json()) == record, name
    assert probed >= 10


def test_cache_files_of_every_form_are_read(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache written before the one name (peak_gflops_by_precision in its figures) is still
    this machine's probe; an entry from before fingerprints is kept in the file, never used."""
    monkeypatch.setenv(ceilings.CACHE_ENV, str(tmp_path))
    before_fingerprints = {"figures": {OLD_GFLOPS: {"fp32": 1.0}}, "how": "best probe"}
    old_entry: dict[str, Any] = {**CACHED.to_json(), "figures": {
        OLD_GFLOPS: {"fp32": 52_000.0}, "bandwidth_gbps": 3100.0}}
    ceilings.cache_path().write_text(json.dumps({"old|key": before_fingerprints,
                                                 "cuda:0|abc": old_entry}))
    found = ceilings.recall("cuda:0", (), FINGERPRINT, now=CACHED.probed_at + 60)
    assert found.figures is not None and found.figures.cached == CACHED
    assert found.figures.probe == CACHED.figures and found.figures.remembered == Remembered(
        CACHED.probed, CACHED.how)
    # Remembering a new probe writes the one form and leaves the unreadable entry as it was.
    ceilings.remember(DeviceCeiling("cuda:0", Peaks({"fp32": 50_000.0})), FINGERPRINT,
                      now=CACHED.probed_at + 120)
    written = json.loads(ceilings.cache_path().read_text())
    assert written["old|key"] == before_fingerprints
    [new_key] = [key for key in written if key not in ("old|key", "cuda:0|abc")]
    assert written[new_key]["figures"] == {GFLOPS: {"fp32": 50_000.0}}


def test_a_rate_above_the_records_peak_is_flagged() -> None:
    record = Ceilings({"cuda:0": ceilings.with_bounds(
        DeviceCeiling("cuda:0", Peaks({"fp32": 1000.0}, {MEMORY: 100.0})))})
    [fast] = judge_case(1300.0, None, "fp32", "cuda:0", record)  # above 1000 x 1.25
    assert fast.implausible and fast.bound == pytest.approx(1250.0)
    [near] = judge_case(1200.0, None, "fp32", "cuda:0", record)
    assert near.kind == "probe-low"
    [copy] = judge_case(None, 120.0, "fp32", "cuda:1", record)  # no cuda:1, no "cuda": unknown
    assert copy.kind == "unknown"
    [copy] = judge_case(None, 120.0, "fp32", "cuda:0", record)  # above 100 x 1.1
    assert copy.implausible and copy.metric == "GB/s"


def test_the_cli_rate_text_is_a_share_of_the_records_peak() -> None:
    from harness.commands.tables import peak_share_text

    entry = DeviceCeiling("cpu", Peaks({"fp32": 1000.0, "bf16": 4000.0}))
    assert peak_share_text(500.0, entry, "fp32") == " (50% of peak)"
    assert peak_share_text(500.0, entry, "bf16") == " (12% of peak)"
    assert peak_share_text(500.0, entry, "tf32") == ""  # no probe at that precision
    assert peak_share_text(500.0, None, "fp32") == ""

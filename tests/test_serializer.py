"""One serializer (harness.data.serial): stored documents come back key for key, a new field is
one edit, and no function takes `Record | dict` outside the upgrade code."""

from __future__ import annotations

import json
import re
import tarfile
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from harness.data.ceilings import Ceilings
from harness.data.records import CaseEnergy, EnergyRecord, GpuState
from harness.data.results import SCHEMA_VERSION, Attempt, CaseResult, CellResult, RunDocument
from harness.data.serial import ALWAYS, IF_SET, JsonRecord
from harness.data.upgrade import upgrade
from harness.spec import Status
from tests.test_run_document import TARBALLS, WORKER_CASE, WORKER_CELL

ROOT = Path(__file__).resolve().parents[1]


def differences(stored: Any, written: Any, where: str = "", *,
                added_empty_ok: bool = False) -> list[str]:
    """Every path at which two JSON values differ: a key on one side only, or another value
    (objects key by key in any order, lists item by item). ADDED_EMPTY_OK: a key only written,
    as null, '' or {}, is no difference (the typed layout names every key; older ones did not)."""
    if isinstance(stored, dict) and isinstance(written, dict):
        found = [f"{where}/{key}: only stored" for key in stored.keys() - written.keys()]
        found += [f"{where}/{key}: only written" for key in written.keys() - stored.keys()
                  if not (added_empty_ok and written[key] in (None, "", {}))]
        for key in stored.keys() & written.keys():
            found += differences(stored[key], written[key], f"{where}/{key}",
                                 added_empty_ok=added_empty_ok)
        return found
    if isinstance(stored, list) and isinstance(written, list) and len(stored) == len(written):
        return [hit for index, (item, copy) in enumerate(zip(stored, written))
                for hit in differences(item, copy, f"{where}[{index}]",
                                       added_empty_ok=added_empty_ok)]
    same = stored == written and type(stored) is type(written)
    return [] if same else [f"{where}: {stored!r} != {written!r}"]


def stored_run_files(tmp_path: Path) -> list[Path]:
    """run.json of every run folder in docs/example's tarballs, extracted."""
    for tarball in TARBALLS:
        with tarfile.open(tarball) as archive:
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            archive.extractall(tmp_path / tarball.name.split(".")[0], **safe)
    return sorted(tmp_path.glob("**/run.json"))


# Where the upgrade from the stored layout (1) changes a document; nothing else may differ.
# A timed case's keys that moved into its per-round records (layout 4) are compared apart, by
# the figures read back from the records (same_figures).
UPGRADED = re.compile(r"^/(schema_version|hints|frameworks|rounds|seed)[/:]|"
                      r"^/cells\[\d+\]/cases\[\d+\]/(peak_device_memory_bytes|"
                      r"peak_device_allocated_bytes|device_profile|rounds|cold_seconds|samples|"
                      r"calls_per_sample|other_load|call_seconds|sample_steps)[/:]")


def same_figures(stored: dict[str, Any], written: dict[str, Any]) -> list[str]:
    """Where a stored run's timed cases and the written ones' per-round records give other
    figures: pooled samples, the cold call, calls per sample, load, whole calls, block steps."""
    found = []
    for cell, typed_cell in zip(stored["cells"], RunDocument.from_dict(written).cells):
        for old, case in zip(cell["cases"], typed_cell.cases):
            figures = {"samples": case.samples, "cold_seconds": case.cold_seconds,
                       "calls_per_sample": case.calls_per_sample, "other_load": case.other_load,
                       "call_seconds": [seconds for _, seconds in case.whole_calls],
                       "sample_steps": [step for record in case.rounds
                                        for step in record.sample_steps]}
            found += [f"{old['case']}/{name}" for name, value in figures.items()
                      if name in old and old[name] != value]
    return found


def written_ceilings(written: dict[str, Any]) -> Ceilings:
    """The written document's ceilings as the record, taken out of it."""
    return Ceilings.from_json(written.pop("ceilings"))


def test_every_stored_docs_run_json_is_written_back_key_for_key(tmp_path: Path) -> None:
    files = stored_run_files(tmp_path)
    assert len(files) >= 19  # 13 H100 and 6 CPU runs
    for path in files:
        stored = json.loads(path.read_text())
        current = upgrade(stored)
        written = RunDocument.from_dict(current).to_dict()
        # What the typed layout wrote reads back and is written again identically.
        assert differences(written, RunDocument.from_dict(written).to_dict()) == [], path
        # The ceilings are a record that reads every stored form and writes one
        # (harness.data.ceilings: older key names folded into one): equal as records.
        assert Ceilings.from_json(stored.get("ceilings")) == written_ceilings(written), path
        stored.pop("ceilings", None)
        current.pop("ceilings", None)
        # Nothing else stored is lost or changed; the only keys added are empty ones.
        assert differences(current, written, added_empty_ok=True) == [], path
        # Against the file as stored: only what the upgrade brings differs, and the keys
        # the typed layout (2) names that the stored one left out, written empty.
        unexplained = [hit for hit in differences(stored, written, added_empty_ok=True)
                       if not UPGRADED.match(hit)]
        assert unexplained == [], path
        assert same_figures(stored, written) == [], path
        assert json.loads(json.dumps(written)) == written  # plain JSON, nothing typed left


# A current-layout document with every optional part: rounds, attempts, the harness's cost,
# reused calibrations, planned shares, energy and GPU state, a SLURM cell, predictions.
ROUNDS_CASE: dict[str, Any] = {
    **WORKER_CASE,
    "rounds": [{"round": 0, "cold_seconds": 1.3, "samples": [1.0, 1.1], "calls_per_sample": 1,
                "other_load": None, "call_seconds": [1.3, 1.0], "sample_steps": [4, 4]},
               {"round": 1, "cold_seconds": 1.1, "samples": [0.9, 1.2], "calls_per_sample": 1,
                "other_load": {"other_cores": 1.5, "steal_cores": 0.0, "seconds": 2.0},
                "call_seconds": [1.1], "sample_steps": [4, 4],
                "attempts": [{"number": 1, "median_s": 1.4, "samples": 2, "other_cores": 1.5,
                              "contended": "other processes held 1.5 cores", "kept": False},
                             {"number": 2, "median_s": 1.05, "samples": 2, "other_cores": 0.0,
                              "contended": "", "kept": True}]}],
    "planned": {"epochs": 2}, "calls_per_sample_reused": 3,
    "extra": {"steps_per_call": 4,
              "energy": {"device": {"status": "ok", "counter": "NVML", "joules_total": 12.0,
                                    "calls": 3, "idle_settled": True, "new_key": 1},
                         "host": {"status": "unavailable", "reason": "no RAPL"}},
              "gpu_state": {"status": "ok", "cuda_device": "0", "before": {"power_w": 80.0},
                            "while_timed": {"polls": 3, "throttle_reasons": {"sw": 1}},
                            "processes": {"readable": True, "ours": [], "others": [12]},
                            "suspect": ""}},
}
ROUNDS_RUN: dict[str, Any] = {
    "schema_version": SCHEMA_VERSION, "run_id": "r2", "command": ["harness", "compare"],
    "started": 1.5, "finished": None, "workload": "mnist-small", "sweep": "batch_size",
    "params": {"batch_size": [32]}, "quick": False, "timeout_s": None,
    "hints": {"bandwidth_ceiling": "bandwidth_gbps"}, "frameworks": {},
    "host": {"hostname": "box"}, "ceilings": {}, "interrupted": False,
    "cells": [{**WORKER_CELL,
               "cell": {**WORKER_CELL["cell"], "rounds": 2, "round": 1, "calibration": [3]},
               "cases": [ROUNDS_CASE], "host": {"hostname": "node7"},
               "slurm": {"job_id": "17_0", "state": "COMPLETED"},
               "cost": {"wall_s": 4.0, "timed_s": 3.0, "workers": 2,
                        "phases": {"worker start": 0.5}}}],
    "planned_cells": [WORKER_CELL["cell"]], "executor": {"name": "slurm"},
    "resumed": [{"at": 2.0}], "rounds": 2, "seed": 7, "round_orders": [[0], [0]],
    "predictions": [{"framework": "torch", "size": 256}], "advice": {"kept": "as stored"},
}


def test_a_document_with_every_optional_part_round_trips_exactly() -> None:
    document = RunDocument.from_dict(ROUNDS_RUN)
    case = document.cells[0].cases[0]
    assert case.attempts[1] == Attempt(2, 1.05, 2, 0.0, "", True)
    assert case.rounds[1].attempts == tuple(case.attempts)
    assert case.warm_samples()[2] == (case.rounds[1], 0)
    assert case.samples == [1.0, 1.1, 0.9, 1.2] and case.whole_calls[2] == (1, 1.1)
    assert document.cells[0].cost is not None and document.cells[0].cost.workers == 2
    assert document.cells[0].cell.calibration == (3,) and document.cells[0].cell.rounds == 2
    assert isinstance(case.energy, CaseEnergy) and case.energy.device is not None
    assert case.energy.device.extra_fields == {"new_key": 1}
    assert document.extra_fields == {"advice": {"kept": "as stored"}}
    assert differences(ROUNDS_RUN, document.to_dict()) == []
    assert RunDocument.from_dict(document.to_dict()) == document


def test_older_keys_missing_or_null_read_as_the_fields_defaults() -> None:
    case = CaseResult.from_dict({"case": {"n": 1}, "status": "ok", "reason": None,
                                 "rounds": [{"cold_seconds": 0.5, "samples": None,
                                             "calls_per_sample": None}]})
    assert (case.reason, case.samples, case.calls_per_sample, case.attempts) == ("", [], 1, [])
    assert case.rounds[0].samples == () and case.cold_seconds == 0.5
    assert CaseResult.from_dict({}).case == {} and CaseResult.from_dict({}).status is Status.OK
    bare = RunDocument.from_dict({"run_id": "r"})
    assert bare.to_dict() == {**RunDocument().to_dict(), "run_id": "r"}
    assert "interrupted_by" not in bare.to_dict() and "round_orders" not in bare.to_dict()


def test_typed_values_come_back_as_their_types() -> None:
    cell = CellResult.from_dict(WORKER_CELL)
    assert cell.status is Status.OK and cell.cases[1].status is Status.ERROR
    assert isinstance(cell.cases[0], CaseResult)
    state = GpuState.from_dict(ROUNDS_CASE["extra"]["gpu_state"])
    assert state.while_timed is not None and state.while_timed.throttle_reasons == {"sw": 1}
    assert GpuState.from_dict({"status": "ok", "before": "garbled"}).before is None
    # An attempt keeps no unknown keys, as it never did; a case keeps them.
    assert "later" not in Attempt.from_dict({"number": 1, "median_s": None, "samples": 0,
                                             "other_cores": None, "later": 1}).to_dict()
    with pytest.raises(TypeError):
        Attempt.from_dict({"median_s": 1.0})  # no number: refused, not made up


def test_reading_copies_rather_than_sharing_the_callers_lists() -> None:
    stored = {"case": {"n": 1}, "status": "ok", "rounds": [{"cold_seconds": 1.0,
                                                             "samples": [1.0]}]}
    case = CaseResult.from_dict(stored)
    case.samples.append(2.0)  # a computed list: the record's own samples are a tuple
    case.rounds.append(case.rounds[0])
    assert stored["rounds"] == [{"cold_seconds": 1.0, "samples": [1.0]}]
    assert case.rounds[0].samples == (1.0,) and len(case.samples) == 2


# --- adding a field is one edit: the dataclass field ---------------------------------------

@dataclass
class ClockedCase(CaseResult):
    """A case with one more key, declared the only way a new key is declared."""

    gpu_clock_mhz: int | None = None


def test_a_subclass_with_one_more_field_reads_and_writes_that_key() -> None:
    case = ClockedCase.from_dict(WORKER_CASE)  # WORKER_CASE carries gpu_clock_mhz: 1980
    assert case.gpu_clock_mhz == 1980 and case.extra_fields == {}
    assert case.to_dict() == WORKER_CASE
    older = {key: value for key, value in WORKER_CASE.items() if key != "gpu_clock_mhz"}
    assert ClockedCase.from_dict(older).gpu_clock_mhz is None
    assert ClockedCase.from_dict(older).to_dict() == older  # absent, not null, where unset


class Verdict(Enum):
    FASTER = "faster"
    SLOWER = "slower"


@dataclass(frozen=True)
class Reading(JsonRecord):
    WRITE_UNMARKED = IF_SET["json"]
    watts: float | None = None
    label: str = ""
    extra_fields: dict[str, object] = field(default_factory=dict)


@dataclass
class NewRecord(JsonRecord):
    """A record no module declares: nested records, a list of them, an enum, optional parts."""

    name: str
    verdict: Verdict = Verdict.FASTER
    first: Reading | None = None
    readings: list[Reading] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)
    note: str = field(default="", metadata=IF_SET)
    count: int = field(default=0, metadata=ALWAYS)


def test_a_new_record_round_trips_through_the_one_serializer() -> None:
    stored = {"name": "x", "verdict": "slower", "first": {"watts": 80.0},
              "readings": [{"watts": 1.0, "label": "a", "later": True}, {}],
              "cases": [WORKER_CASE], "count": 0}
    record = NewRecord.from_dict(stored)
    assert record.verdict is Verdict.SLOWER and record.first == Reading(80.0)
    assert record.readings[0].extra_fields == {"later": True}
    assert isinstance(record.cases[0], CaseResult) and record.note == ""
    assert record.to_dict() == stored
    energy = EnergyRecord.from_dict({"status": "ok", "joules_total": 1.0})
    assert energy.to_dict() == {"status": "ok", "joules_total": 1.0}


# --- no `Record | dict` outside the upgrade code ---------------------------------------------

# A class or-ed with an untyped dict, either way round: a function that takes either form.
RECORD = r"\b(?!None\b)[A-Z]\w*"  # a class name (None or-ed with a dict is an optional dict)
RECORD_OR_DICT = re.compile(rf"{RECORD}\s*\|\s*dict\[|\bdict\[[^\]]*\]\s*\|\s*{RECORD}")
UPGRADE_CODE = {Path("harness/data/upgrade.py")}
LINKS = {("harness", "backends"), ("harness", "workloads")}  # read as backends/, workloads/


def test_no_function_takes_a_record_or_a_dict_outside_the_upgrade_code() -> None:
    hits = []
    for top in ("harness", "backends", "workloads"):
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative in UPGRADE_CODE or relative.parts[:2] in LINKS:
                continue
            hits += [f"{relative}:{number}: {line.strip()}"
                     for number, line in enumerate(path.read_text().splitlines(), start=1)
                     if RECORD_OR_DICT.search(line)]
    assert hits == []

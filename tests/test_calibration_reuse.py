"""Issue 42, item 2: a cell's later rounds start their calibration from the calls per sample
its first round found, instead of growing them again from 1 call in every worker."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from harness import api
from harness.audit import audit_run
from harness.core import registry
from harness.data import store
from harness.data.results import CellResult
from harness.measure import timing
from harness.measure.timing import TimingPolicy, autorange
from harness.run import rounds, worker
from harness.spec import Cell

# --- the timing core ---------------------------------------------------------------------

CALL_S = 1e-6  # the fake clock's seconds per call: 8192 calls reach the 5 ms target


def _timed_levels(monkeypatch: pytest.MonkeyPatch, reused: int | None) -> list[int]:
    """The calls of every multi-call timing autorange makes before its first sample."""
    seen: list[int] = []

    def fake_timed_calls(step: object, synchronize: object, calls: int) -> float:
        seen.append(calls)
        return calls * CALL_S

    monkeypatch.setattr(timing, "_timed_calls", fake_timed_calls)
    policy = TimingPolicy(min_samples=3, min_time_s=0.0, warmup_s=0.0).reusing(reused)
    measurement = autorange(lambda: None, lambda: None, policy)
    samples = len(measurement.samples)
    calibration = seen[:-samples]  # the samples come last
    assert all(calls == measurement.calls_per_sample for calls in seen[-samples:])
    return [calls for calls in calibration if calls > 1]  # not the cold call, the warm-up


def test_calibration_grows_from_one_call_without_a_reused_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    levels = _timed_levels(monkeypatch, None)
    assert levels == [calls for level in range(1, 14) for calls in (2 ** level,) * 2]


def test_a_reused_count_times_one_level_and_grows_no_more(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _timed_levels(monkeypatch, 8192) == [8192, 8192]


def test_a_reused_count_too_short_now_grows_from_itself_not_from_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _timed_levels(monkeypatch, 2048) == [2048, 2048, 4096, 4096, 8192, 8192]


# --- what travels to a later round's worker --------------------------------------------------


def test_per_call_cases_get_no_reused_calibration() -> None:
    mnist = registry.load_workload("mnist-small")
    cell = Cell("mnist-small", "as-written", "torch", "cpu", {"epochs": 3}, rounds=3, round=1,
                calibration=(64,))
    assert worker.reused_calibration(mnist, cell, 0) is None
    merger = rounds.RoundMerger.of(mnist, [cell], 3)
    merger.seen[cell.key] = [(0, CellResult(cell=cell))]
    assert merger.calibrated(cell).calibration == (64,)  # as it is: nothing added
    assert merger.calibrated(Cell("mnist-small", "as-written", "torch", "cpu",
                                  rounds=3, round=1)).calibration == ()


def test_the_calibration_survives_the_cell_file() -> None:
    cell = Cell("fault", "ok", "fake", "cpu", {"size": [1]}, rounds=3, round=2,
                calibration=(512, None))
    again = Cell(**json.loads(json.dumps(cell.as_dict())))
    assert again.calibration == (512, None) and hash(again) == hash(cell)
    levelled = replace(cell, levels=(0.002, None))
    assert Cell(**json.loads(json.dumps(levelled.as_dict()))).levels == (0.002, None)
    assert "calibration" not in Cell("fault", "ok", "fake", "cpu").as_dict()


def test_later_rounds_reuse_the_first_rounds_calls_per_sample(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrived: list[tuple[Cell, CellResult]] = []
    add = rounds.RoundMerger.add

    def recording_add(self: rounds.RoundMerger, cell: Cell, result: CellResult) -> CellResult:
        arrived.append((cell, result))
        return add(self, cell, result)

    monkeypatch.setattr(rounds.RoundMerger, "add", recording_add)
    run = api.plan("fault", frameworks="fake", devices="cpu", variants="ok", sizes=[1, 2],
                   quick=True, out=out_dir, rounds=3, seed=3)
    path = api.execute(run, ceilings=False, progress=False).path
    by_round = {cell.round: (cell, result) for cell, result in arrived}
    assert sorted(by_round) == [0, 1, 2]
    first_cell, first = by_round[0]
    found = [case.calls_per_sample for case in first.cases]
    assert first_cell.calibration == () and len(found) == 2
    assert all(calls > 1 for calls in found)  # a fast step: calibration had to grow
    assert [case.calls_per_sample_reused for case in first.cases] == [None, None]
    for index in (1, 2):
        cell, result = by_round[index]
        assert cell.calibration == tuple(found)
        # ...and the level each case's samples sat at, where its warm-up may end.
        assert cell.levels == tuple(statistics.median(case.samples) for case in first.cases)
        assert [case.calls_per_sample_reused for case in result.cases] == found
        # Used as given, or grown from it (never below: it starts there, not at 1 call).
        assert all(case.calls_per_sample >= calls
                   for case, calls in zip(result.cases, found, strict=True))
    merged = store.load_run(path).cells[0]
    assert [case.calls_per_sample_reused for case in merged.cases] == found
    assert [case.calls_per_sample for case in merged.cases] == found  # round 1's, as used
    assert audit_run(path).mismatches == []

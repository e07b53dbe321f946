"""`harness advise` never recommends or rejects what it did not measure (issue 64).

Planted, fast: SUSPECT timings judged against the effect they show (a contention reading
planted through harness.measure.hostload, not this machine's), an advice that measured no fix
(no "keep it as written", the budget that would measure the first), the budget's up-front
line from a planted preparation's reference calls, and the "no answer" exit code end to end
on the fake backend.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.analysis import advice, fixresult
from harness.analysis.confidence import UNCONFIRMED
from harness.api import EXIT_NO_ANSWER, RunResult
from harness.data.adviserecord import RUN_KEY
from harness.data.results import RunDocument
from harness.measure import hostload
from harness.run import adviseupfront as upfront
from harness.run import chooser as choosing
from harness.spec import Cell, Status
from tests.test_advise_outcome import advise_fault, cpu_case, cpu_run, threads_fix, tight

WORKER, STRANGER = 100, 200


def contention(cores_taken: float) -> str:
    """The SUSPECT text of a case timed while a stranger used CORES_TAKEN cores (planted)."""
    def snapshot(wall_s: float, busy_s: float, ours_s: float, theirs_s: float
                 ) -> hostload.LoadSnapshot:
        processes = {WORKER: hostload.ProcessTimes("worker", WORKER, ours_s, 0.0),
                     STRANGER: hostload.ProcessTimes("python", STRANGER, theirs_s, 0.0)}
        return hostload.LoadSnapshot(wall_s, busy_s, 0.0, ours_s, 0.0, processes, WORKER)

    load = hostload.other_load(snapshot(0.0, 100.0, 10.0, 0.0),
                               snapshot(1.0, 101.0 + cores_taken, 11.0, cores_taken))
    assert load is not None and load.contended
    return f"round 1: {load.reason()}"


def suspect_fix(speedup: float, cores_taken: float = 1.0) -> fixresult.FixResult:
    """threads-1 SPEEDUP x faster than as-written on tight samples, both cells SUSPECT."""
    run = cpu_run(tight(1e-3), tight(1e-3 / speedup), suspect=contention(cores_taken))
    return threads_fix(run)[1]


@pytest.mark.parametrize("speedup", [1000.0, 1 / 1000.0])
def test_an_effect_far_beyond_the_contention_is_reported_as_measured(speedup: float) -> None:
    """One busy core cannot make a step 1,000x slower: the gain is recommended, the loss did
    not help, each saying the contention it was measured under."""
    fix = suspect_fix(speedup)
    assert fix.verdict is not None and fix.verdict.significant
    assert fix.standing == (fixresult.RECOMMENDED if speedup > 1 else fixresult.DID_NOT_HELP)
    line = fix.line()
    assert "measured on SUSPECT timings (as-written: other processes used 1.0 of " in line
    assert ", not 1,000x)" in line and "not confirmed" not in line
    if speedup < 1:
        assert line.startswith("threads-1: 0.001x, slower here (beyond the noise")


@pytest.mark.parametrize("speedup", [1.2, 1 / 1.2])
def test_an_effect_the_contention_could_cause_is_not_confirmed_either_way(
        speedup: float) -> None:
    fix = suspect_fix(speedup)
    assert fix.verdict is not None and fix.verdict.significant  # the noise rule alone: yes
    assert fix.standing == UNCONFIRMED and not fix.recommended
    line = fix.line()
    assert ("faster (" if speedup > 1 else "slower here (") in line
    assert ", not confirmed: its timing is SUSPECT (as-written: other processes used 1.0 of " \
        in line
    assert ": that can explain up to " in line and ", and it measured 1.2x; re-run" in line
    lines = advice.advise_run(cpu_run(tight(1e-3), tight(1e-3 / speedup),
                                      suspect=contention(1.0))).lines()
    assert not any("slower here (beyond the noise" in text and "not confirmed" not in text
                   for text in lines)
    assert not any("keep it as written" in text for text in lines)


def test_the_bound_grows_with_the_cores_taken() -> None:
    assert choosing is not None  # (the chooser's module is imported for the tests below)
    from harness.analysis.confidence import contention_factor

    assert contention_factor(1.0, 2) == pytest.approx(4.0)
    assert contention_factor(1.6, 2) == pytest.approx(10.0)
    assert contention_factor(0.5, 16) < 2.2


# --- no fix measured --------------------------------------------------------------------------

def unmeasured_run() -> RunDocument:
    """torch on cpu: the as-written cell measured, its five candidates none (the budget left
    them out, each with the budget that would run it)."""
    baseline = {"cell": {"workload": "model-net", "variant": "as-written", "framework": "torch",
                         "device": "cpu", "params": {"batch": [100]}},
                "status": "ok", "reason": "", "cases": [cpu_case(100, tight(28.0))]}
    data: dict[str, Any] = {
        "run_id": "synthetic", "workload": "model-net", "sweep": "batch",
        "params": {"batch": [100]}, "rounds": 3, "cells": [baseline],
        "planned_cells": [baseline["cell"]]}
    data[RUN_KEY] = {"size": 100, "baseline": "as-written", "budget_s": 180.0, "rounds_run": 1,
                     "rounds_planned": 3, "candidate_count": 5, "tried": 0,
                     "candidates": ["compiled", "jacobian-forward", "jacobian-vectorized",
                                    "threads-1", "bf16"],
                     "not_tried": [{"framework": "torch", "device": "cpu", "variant": name,
                                    "budget_s": 180.0, "needed_s": needed}
                                   for name, needed in (("jacobian-forward", 430.0),
                                                        ("jacobian-vectorized", 430.0),
                                                        ("compiled", 500.0),
                                                        ("bf16", 430.0),
                                                        ("threads-1", 440.0))]}
    return RunDocument.from_dict(data)


def test_an_advice_that_measured_no_fix_says_so_and_names_the_budget() -> None:
    found = advice.advise_run(unmeasured_run())
    assert not found.answered
    lines = found.lines()
    text = "\n".join(lines)
    assert "keep it as written" not in text
    assert lines[1] == ("  no answer: no fix was measured, so nothing is recommended or ruled "
                        "out; --budget 430 would measure the first candidate fix, "
                        "jacobian-forward")
    assert ("  no fix measured for torch on cpu: nothing recommended or ruled out; --budget "
            "430 would measure the first candidate fix, jacobian-forward") in lines
    assert "measured 0 of 5 candidate fixes" in text


def test_no_fix_measured_is_the_no_answer_exit_code(tmp_path: Path) -> None:
    """End to end on the fake backend: a budget of 1 s holds no fix (whether or not the
    as-written worker ends in it): exit 4, never 'keep it as written', nor 1 for a worker
    the budget stopped."""
    ran = advise_fault(tmp_path, "fault-advise", budget="1")
    assert ran.returncode == EXIT_NO_ANSWER, ran.stdout + ran.stderr
    assert "keep it as written" not in ran.stdout
    assert "no answer: " in ran.stdout


def test_an_as_written_cell_the_budget_stopped_is_no_failure(tmp_path: Path) -> None:
    run = cpu_run(tight(1e-3), tight(1e-3))
    run.cells[0].status = Status.TIMEOUT
    run.cells[0].reason = f"{choosing.ADVISE_BUDGET} 180 s ran out; worker killed"
    # Nothing failed and nothing was measured: no answer (4), never 1.
    assert RunResult(tmp_path, run.cells, run).advise_exit_code == EXIT_NO_ANSWER
    run.cells[0].reason = "no result within --timeout 600 s; worker killed"
    assert RunResult(tmp_path, run.cells, run).advise_exit_code == 1


# --- the budget, before the first worker ------------------------------------------------------

def reference_folder(tmp_path: Path, per_call: dict[str, float]) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference-calls.json").write_text(json.dumps(
        {"framework": "torch", "device": "cpu", "seconds_per_call": per_call}))
    return folder


def test_a_step_the_budget_cannot_measure_gets_one_line_and_no_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 000's Jacobian on a busy 2-core CPU: 28 s per step at batch 100 (1.75 s at 25),
    140 s of 180 spent preparing, 10 s kept for the end. A measurement needs a worker's start
    and 4 calls (127 s), 290 s in all with batch 25 (430 s with a fix measured beside it):
    the as-written cell is not started, the line says why and what budget would measure it
    and its first candidate; the decision then lists every candidate with its budget."""
    folder = reference_folder(tmp_path, {"100": 28.0, "25": 1.75})
    baseline = Cell("model-jacobian", "as-written", "torch", "cpu",
                    params={"batch": [100, 25], "prepared": str(folder)})
    stored = RunDocument.from_dict({
        "run_id": "synthetic", "workload": "model-jacobian", "sweep": "batch",
        "params": {"batch": [100, 25]}, "rounds": 3, "cells": [],
        "planned_cells": [baseline.as_dict()], RUN_KEY: {"size": 100}})
    added: list[Any] = []
    session: Any = SimpleNamespace(
        document=stored, cells=[baseline], progress=False, run_dir=tmp_path,
        options=SimpleNamespace(), recorder=SimpleNamespace(
            results=stored.cells, save=lambda: None,
            add=lambda result: (added.append(result), stored.cells.append(result))))
    monkeypatch.setattr(choosing, "clock", lambda: 140.0)
    said: list[str] = []
    monkeypatch.setattr(choosing, "say", said.append)
    monkeypatch.setattr(choosing.Chooser, "_stop_in", lambda self, reserve, reason: None)
    chooser = choosing.Chooser(session, {("torch", "cpu"): ["jacobian-forward", "threads-1"]},
                               100, 180.0, 0.0, 7, rounds=3, record=stored.advise,
                               after_run=lambda cells: 10.0)
    assert chooser(0, [baseline]) == []  # no worker, and the choice made at once (the round
    # ends when its pick is empty: the session asks no more of round 1)
    line = said[0]
    assert line == ("advise: the budget of 180 s cannot hold one as-written step measurement "
                    "of torch on cpu: one step at batch 100 took 28 s while preparing, and a "
                    "measurement takes 4 calls and a worker's start (~127 s) after the 140 s "
                    "spent; --budget 290 would measure it, --budget 430 it and its first "
                    "candidate fix (jacobian-forward)")
    [result] = added
    assert result.status == Status.TIMEOUT and choosing.stopped_by_budget(result)
    record = stored.advise
    assert record is not None and record.no_measurement == [line[len("advise: "):]]
    assert [(item.variant, item.needed_s) for item in record.not_tried] == [
        ("jacobian-forward", 430.0), ("threads-1", 430.0)]
    found = advice.advise_run(stored)
    assert not found.answered
    assert not any(line.startswith("1 round of 3") for line in found.lines())
    assert found.lines()[1] == ("  no answer: nothing was measured, so nothing is recommended "
                                "or ruled out; --budget 430 would measure the first candidate "
                                "fix, jacobian-forward")


def test_a_step_the_budget_holds_is_started() -> None:
    reference = upfront.ReferenceCalls("torch", "cpu", {100: 2.0, 25: 0.2})
    cell = Cell("model-jacobian", "as-written", "torch", "cpu")
    assert upfront.unaffordable(cell, reference, [100, 25], 100, 20.0, 10.0, 180.0) is None
    gpu = Cell("model-jacobian", "as-written", "torch", "cuda:0")  # nothing known of it
    assert upfront.unaffordable(gpu, reference, [100, 25], 100, 170.0, 10.0, 180.0) is None


def test_a_preparation_the_budget_stopped_inside_a_call_bounds_the_step_from_below() -> None:
    """The budget stopped the preparation 150 s into batch 100's reference call (batch 25's
    took 1.75 s): that step takes longer than 150 s, and the line says so as a lower bound."""
    reference = upfront.ReferenceCalls("torch", "cpu", {25: 1.75}, calling=100,
                                       since=time.time() - 150.0)
    cell = Cell("model-jacobian", "as-written", "torch", "cpu")
    found = upfront.unaffordable(cell, reference, [100, 25], 100, 170.0, 10.0, 180.0,
                                 "jacobian-forward")
    assert found is not None
    assert "the preparation's reference call at batch 100 had not ended after " in found.why
    assert found.as_written_s >= 170.0 + upfront.measurement_s([150.0, 1.75])
    assert found.first_fix_s is not None and found.first_fix_s > found.as_written_s
    assert found.lower_bound and ": --budget at least " not in found.line(180.0)
    assert f"; --budget at least {found.as_written_s:.0f} would measure it" in found.line(180.0)


def test_the_preparations_calls_are_read_as_they_were_written(tmp_path: Path) -> None:
    """The preparation's writer (a worker-side module) and advise's reader agree: a call under
    way, then its seconds."""
    from harness.data.store import write_json_atomic
    from harness.workloads.usermodel import prepare
    from harness.workloads.usermodel.spec import REFERENCE_CALLS_FILE

    write_json_atomic(tmp_path / REFERENCE_CALLS_FILE, {"framework": "torch", "device": "cpu",
                                                        "seconds_per_call": {}})
    prepare.note_reference_call(tmp_path, 25, None)
    under_way = upfront.read_reference_calls(tmp_path)
    assert under_way is not None and under_way.calling == 25 and under_way.running_s() >= 0
    prepare.note_reference_call(tmp_path, 25, 1.5)
    done = upfront.read_reference_calls(tmp_path)
    assert done == upfront.ReferenceCalls("torch", "cpu", {25: 1.5})
    assert upfront.read_reference_calls(tmp_path / "missing") is None

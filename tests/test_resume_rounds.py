"""Issue 65: --resume resumes rounds, not cells. A case's finished rounds are kept and only its
missing rounds run (after a stop, or a SIGKILL of the main process that left run.json at the
rounds it had); of a round whose worker was stopped, the cases it finished are kept; and
`harness check` fails a run whose cases hold fewer rounds than it states without saying so."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path

import pytest

from harness import api
from harness.audit import audit_run
from harness.core import interrupt
from harness.data import store
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.run import resume, session
from harness.run.rounds import round_orders
from harness.spec import Cell, Status

ROUNDS = 3


def finished_run(out_dir: Path) -> Path:
    """A whole run of two cells of two cases each, in three rounds."""
    run = api.plan("fault", frameworks="fake,fakegpu", devices="cpu", variants="ok",
                   sizes=[1, 2], quick=True, out=out_dir, rounds=ROUNDS, seed=4)
    return api.execute(run, ceilings=False, progress=False).path


def samples(document: RunDocument) -> dict[tuple[str, int, int], tuple[float, ...]]:
    """(framework, case position, round) -> that round's warm samples."""
    return {(cell.framework, position, record.round): record.samples
            for cell in document.cells for position, case in enumerate(cell.cases)
            for record in case.rounds}


def without_round(case: CaseResult, index: int) -> CaseResult:
    return replace(case, rounds=[record for record in case.rounds if record.round != index])


def test_a_resume_runs_only_the_missing_rounds_and_cases(out_dir: Path) -> None:
    run_dir = finished_run(out_dir)
    document = store.load_run(run_dir)
    fake, fakegpu = document.cells
    # fake: the main process was killed (SIGKILL) before its round 3 came back.
    fake = replace(fake, cases=[without_round(case, 2) for case in fake.cases],
                   rounds_ended=[0, 1])
    # fakegpu: its round-3 worker was stopped (SIGTERM) after its first case.
    fakegpu = replace(fakegpu, status=Status.INTERRUPTED, rounds_ended=[0, 1],
                      reason="interrupted by SIGTERM; worker stopped",
                      cases=[fakegpu.cases[0], without_round(fakegpu.cases[1], 2)])
    planted = replace(document, cells=[fake, fakegpu], finished=None, interrupted=True,
                      interrupted_by="SIGTERM")
    store.write_run(run_dir, planted)
    left = resume.remaining(planted, run_dir, lambda cell: 2)
    assert left.rounds_left == {fake.cell.key: {2: ()}, fakegpu.cell.key: {2: (1,)}}
    assert resume.resume_line(left) == ("0 cells kept, 0 to run, 2 with rounds to finish "
                                         "(2 worker rounds; their finished rounds kept)")

    resumed = store.load_run(api.resume_run(run_dir, progress=False).path)
    assert not resumed.interrupted and resumed.finished is not None
    for cell in resumed.cells:
        assert cell.status == Status.OK and cell.rounds_ended == [0, 1, 2]
        assert [sorted(record.round for record in case.rounds) for case in cell.cases] \
            == [[0, 1, 2], [0, 1, 2]]
    before, after = samples(planted), samples(resumed)
    assert {key: after[key] for key in before} == before  # every kept round as it was
    assert sorted(set(after) - set(before)) == [("fake", 0, 2), ("fake", 1, 2),
                                                ("fakegpu", 1, 2)]
    # One worker more for each cell: fakegpu's ran its second case only.
    assert [cell.cost.workers for cell in resumed.cells if cell.cost] \
        == [cell.cost.workers + 1 for cell in planted.cells if cell.cost]


def test_a_stopped_run_resumes_to_every_round(out_dir: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    results = 0
    put = session.RunRecorder.put

    def stop_after_three(recorder: session.RunRecorder, result: CellResult) -> None:
        nonlocal results
        put(recorder, result)
        results += 1
        if results == 3:  # within round 2: a SIGTERM between two workers
            interrupt._STATE.signum = signal.SIGTERM

    monkeypatch.setattr(session.RunRecorder, "put", stop_after_three)
    try:
        run_dir = finished_run(out_dir)
    finally:
        interrupt._STATE.signum = None
    monkeypatch.setattr(session.RunRecorder, "put", put)
    stopped = store.load_run(run_dir)
    assert stopped.interrupted
    held = {cell.framework: sorted({record.round for record in cell.cases[0].rounds})
            for cell in stopped.cells}
    assert sorted(held.values()) == [[0], [0, 1]]
    resumed = store.load_run(api.resume_run(run_dir, progress=False).path)
    before, after = samples(stopped), samples(resumed)
    assert {key: after[key] for key in before} == before
    assert all(sorted(record.round for record in case.rounds) == [0, 1, 2]
               for cell in resumed.cells for case in cell.cases)


def test_a_result_stored_without_its_ended_rounds_reads_them_from_its_records() -> None:
    cell = Cell("fault", "ok", "fake", "cpu", rounds=ROUNDS)
    case = CaseResult({"size": 1})
    from harness.data.results import CaseRound
    two = replace(case, rounds=[CaseRound(round=0, cold_seconds=1.0, samples=(1.0,)),
                                CaseRound(round=1, cold_seconds=1.0, samples=(1.0,))])
    # A SIGKILL of the main process after round 2 of an older run: round 3 runs.
    assert resume.rounds_left(CellResult(cell, cases=[two, two]), ROUNDS, 2) == {2: ()}
    # A stop within round 2 after the first case: its second case runs there, then round 3.
    cut = CellResult(cell, Status.INTERRUPTED, cases=[two, without_round(two, 1)])
    assert resume.rounds_left(cut, ROUNDS, 2) == {1: (1,), 2: ()}
    # A cell that timed out is not run again; one whose worker ended with an error neither.
    assert resume.rounds_left(replace(cut, status=Status.TIMEOUT), ROUNDS, 2) == {}
    failed = CellResult(cell, Status.ERROR, cases=[two, CaseResult({"size": 2}, Status.ERROR)],
                        rounds_ended=[0, 1])
    assert resume.rounds_left(failed, ROUNDS, 2) == {2: ()}
    assert resume.rounds_left(replace(failed, rounds_ended=[0, 1, 2]), ROUNDS, 2) == {}


@pytest.mark.planted
def test_check_fails_a_run_whose_cases_hold_fewer_rounds_than_it_states(
        out_dir: Path) -> None:
    run_dir = finished_run(out_dir)
    assert not audit_run(run_dir, round_orders).mismatches
    document = store.load_run(run_dir)
    short = replace(document.cells[0], cases=[without_round(case, 2)
                                              for case in document.cells[0].cases])
    store.write_run(run_dir, replace(document, cells=[short, *document.cells[1:]]))
    store.write_measurements(run_dir, [row for cell in [short, *document.cells[1:]]
                                       for row in store.measurement_rows(
                                           document.run_id, "", "size", cell, {})])
    mismatches = audit_run(run_dir, round_orders).mismatches
    assert [item.figure for item in mismatches if item.figure == "rounds held"] \
        == ["rounds held", "rounds held"], [item.line() for item in mismatches]
    # The same run stopped says so (interrupted): its short cases are no mismatch.
    store.write_run(run_dir, replace(document, cells=[short, *document.cells[1:]],
                                     interrupted=True, interrupted_by="SIGTERM"))
    assert not [item for item in audit_run(run_dir, round_orders).mismatches
                if item.figure == "rounds held"]

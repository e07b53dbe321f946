"""What the overhead lines cover (issue 49): 'harness overhead: A s of B s' is the run's own wall
time and says what it leaves out, still recomputed by `harness check` (the whole command's own
cost around it: tests/test_command_cost.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.analysis.stats import RUN_SCOPE, WARM_START, overhead_line
from harness.audit import audit_run
from harness.data.store import load_run
from harness.report import render_report
from harness.report import summary as summary_module
from harness.report.figure import FIGURES_FILE
from harness.report.summary import OVERHEAD_FAMILY
from tests.synthetic_runs import cpu_seconds, make_case, make_result, write_fixture_run

COST = {"wall_s": 0.5, "timed_s": 0.2, "workers": 2, "phases": {"worker start": 0.2}}


def costed_run(folder: Path) -> Path:
    """A run of one costed cell (2 workers, 0.5 s of wall) over 60 s, and its report."""
    result = make_result("matmul", "torch", "cpu", [make_case({"n": 64}, cpu_seconds(64))])
    result["cost"] = dict(COST)
    run_dir = write_fixture_run(folder, "vm (cpu only)", [result], params={"n": [64]})
    render_report([run_dir], run_dir)
    return run_dir


def test_the_runs_overhead_line_names_what_it_leaves_out_and_check_recomputes_it(
        tmp_path: Path) -> None:
    run_dir = costed_run(tmp_path / "run")
    line = overhead_line(load_run(run_dir))
    # 60 s from the run's start to its end, 0.2 s of it timed, 2 workers.
    assert line.startswith("harness overhead: 59.8 s of 60.0 s (0.2 s inside the timed calls, "
                           f"2 worker processes; {RUN_SCOPE});")
    assert "not the command's start and planning, the report or harness check" in line
    summary = (run_dir / "summary.md").read_text()
    assert line in summary
    audit = audit_run(run_dir)
    assert audit.mismatches == []
    assert not [item for item in audit.unverifiable if "overhead" in item.figure]
    # Each of its four figures is checked from its record, whatever the words around them.
    rest = audit_run(without_records(run_dir, tmp_path / "bare"))
    assert audit.checked - rest.checked == 4
    # Verified, not skipped: a changed figure is named.
    (run_dir / "summary.md").write_text(summary.replace("of 60.0 s (", "of 61.0 s ("))
    changed = [item.line() for item in audit_run(run_dir).mismatches]
    assert len(changed) >= 1 and all("harness overhead" in item for item in changed), changed


def without_records(run_dir: Path, folder: Path) -> Path:
    """A copy of RUN_DIR whose figures.json leaves out the overhead line's records."""
    shutil.copytree(run_dir, folder)
    stored = json.loads((folder / FIGURES_FILE).read_text())
    stored["figures"] = [record for record in stored["figures"]
                         if record["family"] != OVERHEAD_FAMILY]
    (folder / FIGURES_FILE).write_text(json.dumps(stored))
    return folder


def test_a_reworded_overhead_line_is_still_recomputed(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The line's words are the analysis's; its figures are checked from their records."""
    from harness.analysis import stats

    monkeypatch.setattr(stats, "RUN_SCOPE", "run only")
    original = stats.overhead_line
    monkeypatch.setattr(summary_module, "overhead_line", lambda document: "own cost: " + (
        original(document).removeprefix("harness overhead: ").replace(" of ", " out of ")))
    run_dir = costed_run(tmp_path / "run")
    text = (run_dir / "summary.md").read_text()
    assert "own cost: 59.8 s out of 60.0 s" in text and "harness overhead:" not in text
    audit = audit_run(run_dir)
    assert audit.mismatches == [] and not audit.unverifiable
    rest = audit_run(without_records(run_dir, tmp_path / "bare"))
    assert audit.checked - rest.checked == 4


def test_the_warm_processes_start_is_named_apart_from_the_rest_outside_the_workers(
        tmp_path: Path) -> None:
    """60 s of run, 0.5 s in its workers, 41.5 s waited for the warm processes (run.json
    warm_processes): the line names both parts, and they add up to the 59.5 s outside."""
    run_dir = costed_run(tmp_path / "run")
    document = load_run(run_dir)
    document_path = run_dir / "run.json"
    stored = json.loads(document_path.read_text())
    stored["warm_processes"] = {"prestart_s": 41.5, "frameworks": {"torch": {
        "start_s": 41.5, "import_s": 40.0}}}
    document_path.write_text(json.dumps(stored))
    line = overhead_line(load_run(run_dir))
    assert f"{WARM_START} 41.5 s" in line
    assert "outside the workers (ceilings, shared weights, saving) 18.0 s" in line
    assert overhead_line(document).count("41.5 s") == 0  # none recorded: not named

"""The whole command's own cost (issue 63): one figure from the process's start to the answer,
its parts each from its own clock, recorded in run.json and added up again by `harness check`,
which names a part that was changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.commandcost import (
    AFTER,
    ANSWER,
    BEFORE,
    CHECK,
    CLOSING,
    REPORT,
    RUN,
    CommandClock,
    command_cost,
    own_cost_line,
)
from harness.audit import audit_run
from harness.data.results import RunDocument
from harness.data.store import load_run
from tests.cli_in_process import run_cli_in_process
from tests.synthetic_runs import cpu_seconds, make_case, make_result, write_fixture_run

# A run from 1000.0 to 1060.0 (run.json), its one cell 0.2 s inside the timed calls.
COST = {"wall_s": 0.5, "timed_s": 0.2, "workers": 2, "phases": {"worker start": 0.2}}
CLOCK = CommandClock(process_started=990.0, run_returned=1060.5, report_s=4.0, check_s=1.5,
                     answer_started=1066.2)


def costed_document() -> RunDocument:
    result = make_result("matmul", "torch", "cpu", [make_case({"n": 64}, cpu_seconds(64))])
    result["cost"] = dict(COST)
    return RunDocument.from_dict({"run_id": "r", "workload": "matmul", "sweep": "n",
                                  "started": 1000.0, "finished": 1060.0, "cells": [result]})


def test_the_parts_come_from_their_own_clocks_and_add_up() -> None:
    cost = command_cost(costed_document(), CLOCK, now_s=1066.4)
    assert cost is not None
    assert cost.parts == pytest.approx({BEFORE: 10.0, RUN: 60.0, CLOSING: 0.5, REPORT: 4.0,
                                        CHECK: 1.5, ANSWER: 0.2})
    # 0.2 s between the report's and the check's timers and the answer's start goes unsaid.
    assert sum(cost.parts.values()) == pytest.approx(76.2)
    assert cost.whole_s == pytest.approx(76.4) and cost.timed_s == pytest.approx(0.2)
    line = own_cost_line(cost)
    assert line.startswith("own cost of the whole command: 76.2 s of 76.4 s (100%), 0.2 s "
                           "inside the timed calls; from its start: before the run 10.0 s")
    assert "the run 60.0 s (59.8 s outside the timed calls)" in line
    assert line.endswith("closing the run 0.5 s, the report 4.0 s, harness check 1.5 s, "
                         "the answer 0.2 s")


def test_without_the_commands_clocks_after_the_run_is_one_part() -> None:
    cost = command_cost(costed_document(), CommandClock(990.0), now_s=1066.4)
    assert cost is not None and cost.parts == pytest.approx(
        {BEFORE: 10.0, RUN: 60.0, AFTER: 6.4})
    # A --resume: the run began before this process; only this command's part is its.
    resumed = command_cost(costed_document(), CommandClock(1030.0), now_s=1066.4)
    assert resumed is not None and resumed.parts[BEFORE] == 0.0
    assert resumed.parts[RUN] == pytest.approx(30.0)
    unended = RunDocument.from_dict({"run_id": "r", "workload": "matmul", "sweep": "n",
                                     "started": 1000.0})
    assert command_cost(unended, CLOCK, now_s=1066.4) is None


def costed_run(folder: Path) -> Path:
    """A run folder (run.json from 1.0e9 to its end) of one costed cell."""
    result = make_result("matmul", "torch", "cpu", [make_case({"n": 64}, cpu_seconds(64))])
    result["cost"] = dict(COST)
    return write_fixture_run(folder, "vm (cpu only)", [result], params={"n": [64]})


def record_in(run_dir: Path, record: dict[str, Any]) -> None:
    """RECORD as RUN_DIR's run.json command_cost."""
    stored = json.loads((run_dir / "run.json").read_text())
    stored["command_cost"] = record
    (run_dir / "run.json").write_text(json.dumps(stored))


def planted_record(run_dir: Path) -> dict[str, Any]:
    """The record a command would write around RUN_DIR's run: 2 s before it, 3 s after."""
    document = load_run(run_dir)
    assert document.started is not None and document.finished is not None
    clock = CommandClock(document.started - 2.0, run_returned=document.finished + 0.1,
                         report_s=2.0, check_s=0.5, answer_started=document.finished + 2.7)
    cost = command_cost(document, clock, document.finished + 3.0)
    assert cost is not None
    return cost.to_json()


def mismatches_of(run_dir: Path) -> list[str]:
    return [item.line() for item in audit_run(run_dir).mismatches]


def test_check_adds_the_record_up_and_names_a_changed_part(tmp_path: Path) -> None:
    bare = costed_run(tmp_path / "bare")
    run_dir = costed_run(tmp_path / "run")
    record = planted_record(run_dir)
    record_in(run_dir, record)
    assert mismatches_of(run_dir) == []
    # Checked, not skipped: five figures more than the same run without the record.
    assert audit_run(run_dir).checked - audit_run(bare).checked == 5
    # One part 2 s too short no longer adds up to the wall time: named.
    record_in(run_dir, {**record, "parts": {**record["parts"],
                                            REPORT: record["parts"][REPORT] - 2.0}})
    [line] = mismatches_of(run_dir)
    assert "the whole command: the sum of its parts" in line and "run.json" in line
    # The run's part against run.json's own start and end, the own cost against the whole.
    record_in(run_dir, {**record, "parts": {**record["parts"], RUN: record["parts"][RUN] + 0.5,
                                            BEFORE: record["parts"][BEFORE] - 0.5}})
    assert [line for line in mismatches_of(run_dir) if f"part '{RUN}'" in line]
    record_in(run_dir, {**record, "own_s": record["own_s"] - 1.0})
    assert [line for line in mismatches_of(run_dir) if "own cost" in line]


def test_a_compare_records_its_whole_command_and_check_passes(tmp_path: Path) -> None:
    ran = run_cli_in_process("compare", "--workload", "fault-rated", "--framework", "fake",
                             "--device", "cpu", "--variant", "ok", "--quick", "--no-report",
                             "--no-ceilings", "--out", str(tmp_path))
    assert ran.returncode == 0, ran.stderr
    [run_dir] = [path for path in tmp_path.iterdir() if (path / "run.json").is_file()]
    record = load_run(run_dir).command_cost
    assert set(record["parts"]) == {BEFORE, RUN, CLOSING, REPORT, CHECK, ANSWER}
    assert abs(sum(record["parts"].values()) - record["whole_s"]) <= 1.0
    [line] = [line for line in ran.stdout.splitlines()
              if line.startswith("own cost of the whole command: ")]
    assert f"of {record['whole_s']:.1f} s" in line
    assert mismatches_of(run_dir) == []

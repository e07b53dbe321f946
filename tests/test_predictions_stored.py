"""Every run stores its predicted crossovers when it ends; no report adds, changes or drops one.

A CPU + fake-GPU sweep (the fault workload on `fake` and `fakegpu`, tests/fakes) is run once
with --no-report; its run.json must already hold the predictions, the report drawn afterwards
(into the run folder as `compare` does, or elsewhere with `harness report --out`) must leave
run.json byte-identical, and the report must phrase the very predictions stored.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness
from harness.cli import app
from harness.report import folder_predictions
from harness.reporting import draw_run_report
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn
from tests.synthetic_runs import save_predictions

SWEEP = ["compare", "--workload", "fault", "--variant", "ok", "--quick", "--framework",
         "fake,fakegpu", "--device", "cpu,cuda:0", "--sizes", "1,2,4", "--no-ceilings"]


def stored(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "run.json").read_text()).get("predictions", [])


@pytest.fixture(scope="module")
def undrawn_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sweep run through the CLI with --no-report: nothing drawn."""
    out = tmp_path_factory.mktemp("undrawn")
    result = CliRunner().invoke(app, [*SWEEP, "--no-report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (run_dir,) = [path for path in out.iterdir() if path.is_dir()]
    assert not (run_dir / "summary.md").exists()
    return run_dir


def test_a_run_without_its_report_stores_its_predictions(undrawn_run: Path) -> None:
    predictions = stored(undrawn_run)
    assert [(p["experiment"], p["framework"], p["variant"]) for p in predictions] == [
        ("fault", "fakegpu", "ok")]
    assert predictions[0]["sizes_used"] == 3 and predictions[0]["text"]
    assert predictions == folder_predictions(undrawn_run)


def test_drawing_the_report_afterwards_changes_nothing_in_run_json(
        undrawn_run: Path, tmp_path: Path) -> None:
    """What `compare` without --no-report does after the run: the report in the run folder."""
    copy = shutil.copytree(undrawn_run, tmp_path / undrawn_run.name)
    before = (copy / "run.json").read_bytes()
    outcome = draw_run_report(copy)
    assert not outcome.failure and (copy / "summary.md").is_file()
    assert (copy / "run.json").read_bytes() == before
    summary = (copy / "summary.md").read_text()
    for prediction in stored(copy):  # the report phrases the stored predictions
        assert prediction["text"] in summary


def test_harness_report_elsewhere_leaves_run_json_byte_identical(
        undrawn_run: Path, tmp_path: Path) -> None:
    before = (undrawn_run / "run.json").read_bytes()
    result = CliRunner().invoke(app, ["report", str(undrawn_run), "--out",
                                      str(tmp_path / "other")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "other" / "summary.md").is_file()
    assert (undrawn_run / "run.json").read_bytes() == before


def test_a_run_drawn_with_its_report_stores_the_same_predictions(
        undrawn_run: Path, tmp_path: Path) -> None:
    """compare with its report: the same records (same keys, the same cells predicted) as the
    undrawn run's, and exactly those the stored run recomputes to."""
    result = harness.compare("fault", frameworks="fake,fakegpu", devices="cpu,cuda:0",
                             variants="ok", sizes=[1, 2, 4], quick=True, out=tmp_path,
                             ceilings=False, progress=False)
    assert (result.path / "summary.md").is_file()
    predictions = stored(result.path)
    assert predictions == folder_predictions(result.path) == result.document.predictions
    def cells(records: list[dict]) -> list[tuple]:
        return [(p["experiment"], p["framework"], p["variant"], p["sweep"], p["sizes_used"],
                 sorted(p)) for p in records]

    assert predictions and cells(predictions) == cells(stored(undrawn_run))
    summary = (result.path / "summary.md").read_text()
    assert all(prediction["text"] in summary for prediction in predictions)


def test_saving_unchanged_predictions_does_not_rewrite_run_json(
        undrawn_run: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(undrawn_run, tmp_path / undrawn_run.name)
    before = (copy / "run.json").stat()
    assert save_predictions(copy) == stored(copy)
    after = (copy / "run.json").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

"""The audit checks the report's figure records, not its wording (issue 50): a reworded view
sentence still has every figure of it recomputed; a wrong record or a missing figures.json is
said."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from harness.audit import Audit, audit_summary
from harness.report import render_report
from harness.report.figure import FIGURES_FILE
from harness.report.views import crossover

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "example"
REWORDED = ("- {machine} [{kind}] pays {cold} on the first {call} ({cell}); a warm {call} "
            "takes {warm}.")


def problems(audit: Audit) -> list[str]:
    return [item.line() for item in [*audit.mismatches, *audit.unverifiable]][:10]


@pytest.fixture(scope="module")
def reworded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """One stored GPU-machine run's report, drawn with the cold-start sentence reworded."""
    root = tmp_path_factory.mktemp("reworded")
    with tarfile.open(EXAMPLE / "h100-runs.tar.gz") as packed:
        packed.extractall(root, filter="data")
    runs = sorted(path.parent for path in root.glob("*/*094429-transfer*/run.json"))
    assert runs
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(crossover, "COLD_LINE", REWORDED)
        render_report(runs, root / "report")
    return root / "report", runs


def cold_records(report: Path) -> list[dict[str, object]]:
    stored = json.loads((report / FIGURES_FILE).read_text())["figures"]
    return [record for record in stored if record["family"] == crossover.COLD_FAMILY]


def test_a_reworded_sentence_keeps_every_figure_of_it_verified(
        reworded: tuple[Path, list[Path]]) -> None:
    report, runs = reworded
    text = (report / "summary.md").read_text()
    assert "Cold start on" not in text and "pays" in text
    records = cold_records(report)
    assert len(records) == 4  # the cold call and the warm median of a GPU and a CPU line
    audit = audit_summary(report / "summary.md", runs)
    assert not audit.mismatches and not audit.unverifiable, problems(audit)
    # each record checked: its value, and each cold call's rank among its kind
    bare = report.parent / "bare"
    shutil.copytree(report, bare)
    (bare / FIGURES_FILE).write_text(json.dumps({"format": 1, "figures": []}))
    without = audit_summary(bare / "summary.md", runs)
    assert audit.checked - without.checked == len(records) + 2


def test_a_record_that_disagrees_with_the_raw_data_is_a_mismatch(
        reworded: tuple[Path, list[Path]], tmp_path: Path) -> None:
    report, runs = reworded
    shutil.copytree(report, tmp_path / "report")
    stored = json.loads((tmp_path / "report" / FIGURES_FILE).read_text())
    record = next(r for r in stored["figures"] if r["family"] == crossover.COLD_FAMILY)
    lines = (tmp_path / "report" / "summary.md").read_text().splitlines()
    wrong = "999 ms"
    lines[record["line"] - 1] = lines[record["line"] - 1].replace(record["text"], wrong)
    record["text"] = wrong
    (tmp_path / "report" / "summary.md").write_text("\n".join(lines) + "\n")
    (tmp_path / "report" / FIGURES_FILE).write_text(json.dumps(stored))
    audit = audit_summary(tmp_path / "report" / "summary.md", runs)
    assert [item.stored for item in audit.mismatches] == [wrong], problems(audit)


def test_a_record_not_printed_on_its_line_is_a_mismatch(
        reworded: tuple[Path, list[Path]], tmp_path: Path) -> None:
    report, runs = reworded
    shutil.copytree(report, tmp_path / "report")
    stored = json.loads((tmp_path / "report" / FIGURES_FILE).read_text())
    record = next(r for r in stored["figures"] if r["family"] == crossover.COLD_FAMILY)
    record["line"] = 1
    (tmp_path / "report" / FIGURES_FILE).write_text(json.dumps(stored))
    audit = audit_summary(tmp_path / "report" / "summary.md", runs)
    assert [item.figure for item in audit.mismatches] == [f"{record['name']} printed"]


def test_a_summary_without_figure_records_is_unverifiable(
        reworded: tuple[Path, list[Path]], tmp_path: Path) -> None:
    report, runs = reworded
    shutil.copytree(report, tmp_path / "report")
    (tmp_path / "report" / FIGURES_FILE).unlink()
    audit = audit_summary(tmp_path / "report" / "summary.md", runs)
    assert not audit.mismatches
    assert [item.figure for item in audit.unverifiable] == ["figure records"]

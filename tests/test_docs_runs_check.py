"""The stored runs under docs/example/ and their merged report pass `harness check` with every
figure recomputed: no mismatch and nothing unverifiable (issue 49)."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from harness.audit import Audit, audit_run, audit_summary, formerflops
from harness.run.rounds import round_orders

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "example"


@pytest.fixture(scope="module")
def stored_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every run folder of docs/example/*.tar.gz, unpacked once for the module."""
    root = tmp_path_factory.mktemp("docs-runs")
    archives = sorted(EXAMPLE.glob("*.tar.gz"))
    assert archives, "no stored runs under docs/example/"
    for archive in archives:
        with tarfile.open(archive) as packed:
            packed.extractall(root, filter="data")
    runs = sorted(path.parent for path in root.glob("*/*/run.json"))
    assert len(runs) >= len(archives)
    return runs


def lines(audit: Audit) -> list[str]:
    return [item.line() for item in [*audit.mismatches, *audit.unverifiable]][:10]


def test_every_stored_run_checks_with_every_figure_recomputed(stored_runs: list[Path]) -> None:
    audit = Audit()
    for run in stored_runs:
        audit = audit.add(audit_run(run, round_orders))
    assert audit.checked > 10_000  # the CSVs' figures were read, not skipped
    assert not audit.mismatches and not audit.unverifiable, lines(audit)


def test_the_merged_example_report_checks_against_its_runs(stored_runs: list[Path]) -> None:
    audit = audit_summary(EXAMPLE / "report" / "summary.md", stored_runs)
    assert audit.by_file.get("summary.md", 0) > 500  # its tables and lines were parsed
    assert not audit.mismatches and not audit.unverifiable, lines(audit)


def test_a_former_formula_counts_only_for_runs_started_before_it_was_replaced() -> None:
    case = {"batch_size": 32, "train_samples": 2048}
    before = formerflops.MATMUL_COUNT_LANDED - 1.0
    found = formerflops.count_of_its_day("mnist-small", case, before)
    assert found is not None and found.flops == 6.0 * 101_770 * 2048
    assert formerflops.MATMUL_COUNT_COMMIT in found.label
    assert formerflops.count_of_its_day("mnist-small", case, formerflops.MATMUL_COUNT_LANDED) \
        is None
    assert formerflops.count_of_its_day("mnist-small", case, None) is None
    assert formerflops.count_of_its_day("matmul", {"n": 64}, before) is None


@pytest.mark.planted
def test_a_later_run_printed_with_the_former_formula_stays_unverifiable(
        stored_runs: list[Path], tmp_path: Path) -> None:
    """The former formula explains a stored run of its day, not any figure that happens to
    equal it: moved after the change, the same run's FLOPs cannot be recomputed."""
    original = next(run for run in stored_runs if "mnist-small" in run.name)
    run = tmp_path / original.name
    shutil.copytree(original, run)
    document = json.loads((run / "run.json").read_text())
    document["started"] = formerflops.MATMUL_COUNT_LANDED + 1.0
    (run / "run.json").write_text(json.dumps(document))
    audit = audit_run(run, round_orders)
    assert not audit.mismatches, lines(audit)
    assert audit.unverifiable and all(item.figure == "flops" for item in audit.unverifiable)

"""The audit checks the report's figure records, not its wording (issue 50): a reworded view
sentence, heading or table still has every figure of it recomputed; a wrong record or a missing
figures.json is said."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.crossover import Crossover
from harness.audit import Audit, audit_summary
from harness.core.units import format_size
from harness.report import context as report_context
from harness.report import render_report
from harness.report.figure import CLAIM, DIFFERENCE, FIGURES_FILE, MEDIAN, RATIO, SPREAD, VERSUS
from harness.report.views import (
    best_variant,
    breakdown,
    crossover,
    epochs,
    fastest,
    peak_share,
    ranking,
    warnings,
)
from tests.lines_only import draw_no_figures

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "example"
REWORDED = ("- {machine} [{kind}] pays {cold} on the first {call} ({cell}); a warm {call} "
            "takes {warm}.")
# Each moved view's words, reworded: (module, constant, new wording, a phrase only the old has).
REWORDINGS = [
    (crossover, "COLD_LINE", REWORDED, "Cold start on"),
    (fastest, "FASTEST_HEADING", "### Who wins ({variant}){machine}", "### Fastest framework"),
    (fastest, "FASTEST_SENTENCE", "{best} wins{size}{variant} on {machine} in {median}/{unit}{gap}",
     "fastest on "),
    (fastest, "FASTEST_GAP", "; {runner_up} takes {ratio} as long ({noise})", " ahead of "),
    (ranking, "RANKING_HEADING", "### Ranked", "### Framework verdict"),
    (ranking, "RANKED_LINE", "- {device} ({where}{variant}{size}) -> {entries}", "- **cuda:0**"),
    (ranking, "RANKED_ENTRY", "#{rank} {framework}: {median} a {unit}", "1. torch "),
    (ranking, "RANKED_GAP", ", {ratio} of #1 ({gap}, vs #{above})", " the fastest; "),
    (best_variant, "VARIANTS_HEADING", "### Variant by variant", "### Variants compared"),
    (best_variant, "VS_BEST", "{best} is {ratio} quicker", " slower than "),
    (crossover, "GPU_HEADING", "### Devices", "### GPU vs CPU"),
    (crossover, "SPEEDUP_PHRASE", ", {ratio} the CPU's speed{where}", "(GPU/CPU speedup "),
    (Crossover, "text", lambda verdict, sweep: f"<{verdict.kind} {sweep}" + (
        f" {format_size(verdict.size, sweep)}>" if verdict.size is not None else ">"),
     "faster at the one size measured"),
    (peak_share, "CEILINGS_HEADING", "### Rates", "### Throughput vs the machine's"),
    (warnings, "IMPLAUSIBLE_LINE", "- {cell}{size} on {machine}: {rate} {metric} cannot be "
     "({bound}; {probe}): {why}.", "- IMPLAUSIBLE: "),
    (epochs, "ACCURACY_HEADING", "### Scores", "### Accuracy and data"),
    (epochs, "DISTINCT_LINE", "- {distinct} samples told apart{repeated}.",
     "- Distinct training samples: "),
    (crossover, "WHY_LINE", "- {framework} {variant} on {machine}: {sweep} {low}..{high}, work "
     "x{work}, GPU time x{time}, level {level} a {unit}.", "- Why the GPU loses"),
    (warnings, "NOISY_LINE", "- {cell} on {machine} jitters at {sweep} {sizes} (up to {worst}).",
     "- noisy (IQR/median"),
    (breakdown, "BREAKDOWN_HEADING", "### Costs", "### Where the time goes (cross-check"),
    (breakdown, "BREAKDOWN_LINE", "- {cell} on {machine}: {name} take {overhead} of {median} "
     "({share} a {unit}).", " of each call goes to "),
    (epochs, "REPEATED_PHRASE", ", each seen until {train} a call", "(repeated to "),
]
TIMING = (MEDIAN, SPREAD, RATIO, DIFFERENCE)


def problems(audit: Audit) -> list[str]:
    return [item.line() for item in [*audit.mismatches, *audit.unverifiable]][:10]


@pytest.fixture(scope="module")
def reworded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """The stored transfer runs of both machines, the GPU machine's matmul sweep (a
    crossover) and the CPU machine's elementwise sweep (implausible rates), reported with every
    moved view reworded; the CPU machine's MNIST run has accuracy and repeated samples."""
    root = tmp_path_factory.mktemp("reworded")
    for archive in ("h100-runs.tar.gz", "cpu-runs.tar.gz"):
        with tarfile.open(EXAMPLE / archive) as packed:
            packed.extractall(root, filter="data")
    runs = sorted(path.parent for pattern in ("*/*094429-transfer*", "*/*101801-transfer*",
                                              "*/*094256-matmul*", "*/*102450-elementwise*",
                                              "*/*102810-mnist-wide*")
                  for path in root.glob(f"{pattern}/run.json"))
    assert len(runs) == 5
    with pytest.MonkeyPatch.context() as patch:
        for module, name, wording, _old in REWORDINGS:
            patch.setattr(module, name, wording)
        draw_no_figures(patch)  # the audit reads summary.md and figures.json, never a PNG
        render_report(runs, root / "report")
    return root / "report", runs


def records_of(report: Path, families: tuple[str, ...]) -> list[dict[str, Any]]:
    stored = json.loads((report / FIGURES_FILE).read_text())["figures"]
    return [record for record in stored if record["family"] in families]


def without(report: Path, families: tuple[str, ...]) -> Path:
    """A copy of REPORT whose figures.json leaves out the records of FAMILIES."""
    bare = report.parent / f"without-{'-'.join(families).replace(' ', '_')}"
    if not bare.exists():
        shutil.copytree(report, bare)
        stored = json.loads((report / FIGURES_FILE).read_text())
        stored["figures"] = [r for r in stored["figures"] if r["family"] not in families]
        (bare / FIGURES_FILE).write_text(json.dumps(stored))
    return bare / "summary.md"


def test_reworded_gpu_vs_cpu_verdicts_are_each_recomputed(
        reworded: tuple[Path, list[Path]]) -> None:
    """Each pair's verdict (its kind and sizes compared), crossover size and speedup."""
    report, runs = reworded
    records = records_of(report, (crossover.GPU_FAMILY,))
    names = {record["name"] for record in records}
    assert {crossover.GPU_VERDICT, crossover.CROSSOVER_SIZE, crossover.GPU_SPEEDUP,
            crossover.LARGEST_SIZE} <= names
    verdicts = sum(record["name"] == crossover.GPU_VERDICT for record in records)
    audit = audit_summary(report / "summary.md", runs)
    rest = audit_summary(without(report, (crossover.GPU_FAMILY,)), runs)
    assert audit.checked - rest.checked == len(records) + verdicts


def test_reworded_rates_are_each_recomputed(reworded: tuple[Path, list[Path]]) -> None:
    """Each rate, ceiling and share of the ceilings table and each implausible rate."""
    report, runs = reworded
    records = records_of(report, (peak_share.RATE_FAMILY,))
    assert {record["name"] for record in records} == {peak_share.RATE, peak_share.CEILING,
                                                      peak_share.SHARE}
    text = (report / "summary.md").read_text()
    assert " cannot be (" in text and "### Rates" in text
    audit = audit_summary(report / "summary.md", runs)
    rest = audit_summary(without(report, (peak_share.RATE_FAMILY,)), runs)
    assert audit.checked - rest.checked == len(records)


def test_reworded_accuracy_and_data_lines_are_each_recomputed(
        reworded: tuple[Path, list[Path]]) -> None:
    report, runs = reworded
    records = records_of(report, (epochs.ACCURACY_FAMILY,))
    assert {record["name"] for record in records} == {epochs.ACCURACY, epochs.DISTINCT,
                                                      epochs.TRAINED}
    assert "samples told apart, each seen until 60,000 a call." in (
        report / "summary.md").read_text()
    audit = audit_summary(report / "summary.md", runs)
    rest = audit_summary(without(report, (epochs.ACCURACY_FAMILY,)), runs)
    assert audit.checked - rest.checked == len(records)


def test_reworded_flat_gpu_and_noise_lines_are_each_recomputed(
        reworded: tuple[Path, list[Path]]) -> None:
    report, runs = reworded
    families = (crossover.FLAT_FAMILY, warnings.NOISE_FAMILY)
    records = records_of(report, families)
    assert {record["name"] for record in records} == {
        crossover.WORK_GROWTH, crossover.TIME_GROWTH, crossover.FLAT_LEVEL,
        warnings.NOISY_SIZES, warnings.WORST_NOISE}
    audit = audit_summary(report / "summary.md", runs)
    rest = audit_summary(without(report, families), runs)
    assert audit.checked - rest.checked == len(records)


def cold_records(report: Path) -> list[dict[str, object]]:
    return records_of(report, (crossover.COLD_FAMILY,))


def test_every_reworded_phrase_is_gone_and_the_audit_verifies_everything(
        reworded: tuple[Path, list[Path]]) -> None:
    report, runs = reworded
    text = (report / "summary.md").read_text()
    assert [old for _module, _name, _new, old in REWORDINGS if old in text] == []
    assert "### Who wins" in text and "### Ranked" in text and " quicker |" in text
    assert "<cpu-always bytes>" in text and "<crossover n 256>" in text and "### Devices" in text
    audit = audit_summary(report / "summary.md", runs)
    assert audit.checked > 100
    assert not audit.mismatches and not audit.unverifiable, problems(audit)


def test_reworded_timing_figures_are_each_recomputed(reworded: tuple[Path, list[Path]]) -> None:
    """Every median, IQR and ratio record is checked, and every order one claims."""
    report, runs = reworded
    records = records_of(report, TIMING)
    names = {record["name"] for record in records}
    assert {"median per step", "IQR per step", "runner-up median per step",
            "ranked median per step", "times the fastest", "variant median per step",
            "host<->device copies", "share of host<->device copies"} <= names
    medians = [record["subject"] for record in records if record["family"] == MEDIAN]
    orders = (sum(CLAIM in subject for subject in medians)
              + sum(any(key.startswith(VERSUS) for key in subject) for subject in medians))
    audit = audit_summary(report / "summary.md", runs)
    rest = audit_summary(without(report, TIMING), runs)
    assert audit.checked - rest.checked == len(records) + orders


def test_a_reworded_sentence_keeps_every_figure_of_it_verified(
        reworded: tuple[Path, list[Path]]) -> None:
    report, runs = reworded
    text = (report / "summary.md").read_text()
    assert "Cold start on" not in text and "pays" in text
    records = cold_records(report)
    # the cold call and the warm median of each line (per experiment, machine, device kind)
    assert len(records) >= 8 and len(records) % 2 == 0
    audit = audit_summary(report / "summary.md", runs)
    assert not audit.mismatches and not audit.unverifiable, problems(audit)
    # each record checked: its value, and each cold call's rank among its kind
    rest = audit_summary(without(report, (crossover.COLD_FAMILY,)), runs)
    assert audit.checked - rest.checked == len(records) + len(records) // 2


@pytest.mark.parametrize(("family", "wrong"), [(crossover.COLD_FAMILY, "999 ms"),
                                               (MEDIAN, "999 ms"), (SPREAD, "999 ms"),
                                               (RATIO, "999x")])
def test_a_record_that_disagrees_with_the_raw_data_is_a_mismatch(
        reworded: tuple[Path, list[Path]], tmp_path: Path, family: str, wrong: str) -> None:
    report, runs = reworded
    shutil.copytree(report, tmp_path / "report")
    stored = json.loads((tmp_path / "report" / FIGURES_FILE).read_text())
    record = next(r for r in stored["figures"] if r["family"] == family)
    lines = (tmp_path / "report" / "summary.md").read_text().splitlines()
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


def test_a_reworded_call_share_is_recomputed_on_every_line_that_prints_it(
        tmp_path: Path) -> None:
    """The CPU machine's MNIST run as if its rounds had shared a planned epoch of twice the
    samples out: each line that names the timed call carries its samples and share."""
    with tarfile.open(EXAMPLE / "cpu-runs.tar.gz") as packed:
        packed.extractall(tmp_path, filter="data")
    (run,) = [path.parent for path in tmp_path.glob("*/*102810-mnist-wide*/run.json")]
    stored = json.loads((run / "run.json").read_text())
    stored["params"]["train_samples"] = 2 * stored["params"]["train_samples"]
    (run / "run.json").write_text(json.dumps(stored))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report_context, "CALL_PHRASE", "{samples} samples each ({share} of one")
        render_report([run], tmp_path / "report")
    text = (tmp_path / "report" / "summary.md").read_text()
    assert "-sample call (" not in text and "60,000 samples each (1/2 of one" in text
    records = records_of(tmp_path / "report", (report_context.CALL_FAMILY,))
    assert {(record["name"], record["text"]) for record in records} == {
        (report_context.SAMPLES_PER_CALL, "60,000"), (report_context.EPOCH_SHARE, "1/2")}
    lines = {record["line"] for record in records}
    assert len(lines) >= 2 and len(records) == 2 * len(lines)
    audit = audit_summary(tmp_path / "report" / "summary.md", [run])
    assert not audit.mismatches and not audit.unverifiable, problems(audit)
    rest = audit_summary(without(tmp_path / "report", (report_context.CALL_FAMILY,)), [run])
    assert audit.checked - rest.checked == len(records)

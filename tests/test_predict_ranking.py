"""The predicted-GPU lines name what they are about (issue 64 part 2, issue 61 parts 2-3):
each cell's line names its framework and variant and sets its GPU step against that cell's
own CPU step; a CPU-only run of several frameworks ranks their predicted GPU steps per
profile; the cells with no prediction say why on the terminal; no interval goes below zero
and a spread too wide to help is said plainly; `harness check` recomputes every figure.

The runs are planted: each framework's CPU cell carries the stored features of one of the
lent H100's validation rows (benchmarks/data/), predicted here on the shipped profiles by the
path a run takes (answer.add_predictions), so the ranking is over real predictions and made
without a GPU; the CPU samples are chosen so this CPU's fastest is not the GPU's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.predictlab.validation import read_rows, unpacked
from harness.analysis.verdictline import Topic, VerdictLine
from harness.audit import audit_run
from harness.commands.predicted import print_predictions, with_predictions
from harness.core.registry import load_workload
from harness.data import store
from harness.data.results import RunDocument
from harness.predict import answer, ranking
from harness.predict.interval import WIDE_RATIO, ErrorBand, interval_of
from harness.predict.profile import shipped_names
from harness.report import draw_report
from harness.report.figure import FIGURES_FILE
from harness.terminal import fitted_lines
from tests.planted_figures import planted_copy
from tests.synthetic_runs import write_run

ROWS = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / \
    "predict-validation-h100-20261127.json.gz"
BATCHES = (16, 64)
# framework -> (the validation model whose features it carries, its CPU step in ms): keras-jax
# is this CPU's fastest; the features make another framework the GPU's fastest.
PLANTED = {"torch": ("mnist-small", 5.7), "jax": ("torch_classifier", 2.2),
           "keras-jax": ("mnist-wide", 2.0), "keras-torch": ("small_cnn", 9.0),
           "keras-tensorflow": ("", 4.0)}
NOT_TORCH = "features are recorded from torch steps only, not {}"
MNIST_FLOPS = load_workload("mnist-small").flops


def one_step(batch: int) -> dict[str, int]:
    """An MNIST case whose call (an epoch) is one step."""
    return {"batch_size": batch, "epochs": 1, "train_samples": batch}


def features_by_model() -> tuple[dict[str, Any], dict[tuple[str, int], dict[str, Any]]]:
    meta, rows = read_rows(ROWS)
    return meta, {(row["model"], row["batch"]): unpacked(row["features_packed"])
                  for row in rows if row["batch"] in BATCHES}


def case_of(batch: int, step_ms: float, extra: dict[str, Any],
            spread: float = 1.02) -> dict[str, Any]:
    """A case timed call by call, one step a call: 7 samples around STEP_MS, the first and
    last SPREAD times below and above it."""
    samples = [step_ms * 1e-3 * spread ** ((index - 3) / 3) for index in range(7)]
    return {"case": one_step(batch),
            "status": "ok", "reason": "", "cold_seconds": samples[0] * 5, "samples": samples,
            "calls_per_sample": 1,
            "check": {"passed": True, "metric": "rel_error", "value": 1e-7, "bound": 1e-5,
                      "detail": "planted"},
            "extra": extra}


def cell_of(framework: str, variant: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cell": {"workload": "mnist-small", "variant": variant, "framework": framework,
                     "device": "cpu", "params": {"batch_size": list(BATCHES)}},
            "status": "ok", "reason": "", "framework_version": "2.11.0+cpu",
            "device_name": "", "cases": cases}


def planted_run(run_dir: Path, planted: dict[str, tuple[str, float]] = PLANTED,
                variant: str = "as-written", spread: float = 1.02) -> Path:
    """A CPU-only run of one cell per framework of PLANTED, predicted and reported."""
    meta, features = features_by_model()
    cells = []
    for framework, (model, step_ms) in planted.items():
        cases = []
        for batch in BATCHES:
            extra: dict[str, Any] = {answer.STEPS_KEY: 1,
                                     "flops_per_call": float(MNIST_FLOPS(one_step(batch)))}
            if model:
                extra.update({answer.FEATURES_KEY: features[(model, batch)],
                              answer.HOST_SPEED_KEY: meta["this_host"]})
            else:
                extra[answer.REASON_KEY] = NOT_TORCH.format(framework)
            cases.append(case_of(batch, step_ms, extra, spread))
        cells.append(cell_of(framework, variant, cases))
    host = {"machine_label": "vm", "hostname": "vm", "cpu_model": "a 2-core VM", "cores": 2,
            "memory_bytes": 2**34, "python": "3.12.3", "gpus": [], "os": "Linux"}
    write_run(run_dir, cells, host, {"batch_size": list(BATCHES)}, workload="mnist-small",
              sweep="batch_size",
              work=lambda case: {"flops": float(MNIST_FLOPS(one_step(case["batch_size"])))},
              extra_doc={"interrupted": False})
    document = store.load_run(run_dir)
    answer.add_predictions(document, answer.targets())
    store.write_run(run_dir, document)
    draw_report([run_dir], run_dir)
    return run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted_run(tmp_path_factory.mktemp("ranked") / "run-frameworks")


class Result:
    """What the commands read of an api.RunResult."""

    def __init__(self, document: RunDocument) -> None:
        self.document = document


def gpu_steps(document: RunDocument, profile: str, batch: int) -> dict[str, float]:
    """Each framework's stored predicted step (host 'profiled') at BATCH."""
    found = {}
    for cell in document.cells:
        for case in cell.cases:
            stored = case.gpu_predictions.get(profile)
            seconds = stored["profiled"].seconds if stored else None
            if seconds and case.case["batch_size"] == batch:
                found[cell.framework] = seconds
    return found


def test_each_prediction_names_its_framework_and_variant(run_dir: Path) -> None:
    document = store.load_run(run_dir)
    for cell in document.cells:
        for case in cell.cases:
            for by_host in case.gpu_predictions.values():
                for record in by_host.values():
                    assert record.framework == cell.framework
                    assert record.cell_variant == cell.variant


def test_one_ranking_line_per_profile_fastest_first(run_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    document = store.load_run(run_dir)
    lines = ranking.answer_lines(document)
    assert len(lines) == len(shipped_names())
    for name, line in zip(shipped_names(), lines):
        steps = gpu_steps(document, name, 64)
        order = sorted(steps, key=steps.__getitem__)
        assert set(order) == {"torch", "jax", "keras-jax", "keras-torch"}
        # Only torch's error was measured by the validation: the others are starred.
        said = " < ".join(f"{framework} ~{answer.ms(steps[framework])} ms"
                          + ("" if framework == "torch" else "*") for framework in order)
        assert f"predicted at batch 64, as-written: {said} per step (*: error not measured)" \
            in line
        assert "keras-tensorflow (no TensorFlow profile)" in line
        # keras-jax is this CPU's fastest (2.0 ms); the GPU's is another.
        assert order[0] != "keras-jax"
        assert f"the fastest there ({order[0]}) is not this CPU's (keras-jax)" in line
    printed = [line.text for line in with_predictions(Result(document), [  # type: ignore[arg-type]
        VerdictLine("mnist-small on vm (cpu only):", Topic.HEADING),
        VerdictLine("  GPU vs CPU: no GPU cell measured (CPU only)", Topic.NO_GPU)])]
    assert not any("no GPU cell measured" in line for line in printed)
    folded = [part for line in printed for part in fitted_lines(line)]  # as printed
    assert all(len(line) <= 100 for line in folded), [len(line) for line in folded]
    tail = " ".join(line.strip() for line in printed)
    assert ("GPU step not predicted: keras-tensorflow: unknown: no TensorFlow profile "
            "(harness profile-device measures through torch only") in tail


def test_summary_keeps_each_cells_line_against_its_own_cpu_step(run_dir: Path) -> None:
    text = (run_dir / "summary.md").read_text()
    document = store.load_run(run_dir)
    for cell in document.cells[:4]:
        (case,) = [case for case in cell.cases if case.case["batch_size"] == 64]
        line = next(line for line in text.splitlines()
                    if f", {cell.framework} as-written: ~" in line
                    and "predicted on H100 80GB" in line)
        stored = case.gpu_predictions["h100"]["profiled"].seconds
        cpu = float(sorted(case.samples)[3])
        ratio = cpu / stored
        shown = answer.three_digits(ratio if ratio >= 1 else 1 / ratio)
        assert f"~{shown}x {'faster' if ratio >= 1 else 'slower'} than {cell.framework} " \
               "on this CPU" in line


def test_harness_check_recomputes_the_ranking(run_dir: Path) -> None:
    audit = audit_run(run_dir)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    assert not audit.unverifiable, [item.line() for item in audit.unverifiable]
    figures = json.loads((run_dir / FIGURES_FILE).read_text())["figures"]
    ranked = [item for item in figures if item["family"] == ranking.RANKING_FAMILY]
    assert {item["name"] for item in ranked} == {ranking.RANKED, ranking.FASTEST_CPU}
    assert len([item for item in ranked if item["name"] == ranking.RANKED]) == \
        4 * len(shipped_names())



@pytest.mark.parametrize("name, change", [
    (ranking.RANKED, lambda record: record["text"].replace("~", "~9")),
    (ranking.FASTEST_CPU, lambda record: "keras-torch"),
])
def test_a_planted_wrong_ranking_figure_is_caught(run_dir: Path, tmp_path: Path, name: str,
                                                  change: Any) -> None:
    audit = audit_run(planted_copy(run_dir, tmp_path, ranking.RANKING_FAMILY, name, change))
    assert any(name in item.figure or item.figure == name for item in audit.mismatches), \
        [item.line() for item in audit.mismatches]


def test_a_planted_wrong_place_is_caught(run_dir: Path, tmp_path: Path) -> None:
    """The first-ranked cell's record moved to the second place."""
    copy = planted_copy(run_dir, tmp_path, ranking.RANKING_FAMILY, ranking.RANKED,
                         lambda record: record["text"])
    stored = json.loads((copy / FIGURES_FILE).read_text())
    record = next(item for item in stored["figures"] if item["name"] == ranking.RANKED)
    record["subject"]["rank"] = "1"
    (copy / FIGURES_FILE).write_text(json.dumps(stored))
    audit = audit_run(copy)
    assert any("place in the ranking" in item.figure for item in audit.mismatches)


def test_a_keras_only_run_says_why_on_the_terminal(tmp_path: Path) -> None:
    """No cell predicted: the 'no GPU cell measured' line stays, the reason follows it."""
    run = planted_run(tmp_path / "keras", {"keras-jax": ("", 2.0), "keras-torch": ("", 9.0),
                                           "keras-tensorflow": ("", 4.0)})
    document = store.load_run(run)
    assert ranking.answer_lines(document) == []
    printed = [line.text for line in with_predictions(Result(document), [  # type: ignore[arg-type]
        VerdictLine("  GPU vs CPU: no GPU cell measured (CPU only)", Topic.NO_GPU)])]
    assert printed[0] == "  GPU vs CPU: no GPU cell measured (CPU only)"
    assert printed[1] == ("  GPU step not predicted: keras-jax, keras-torch: features are "
                          "recorded from torch steps only; keras-tensorflow: unknown: no "
                          "TensorFlow profile (harness profile-device measures through torch "
                          "only: docs/predict.md)")
    said: list[str] = []
    print_predictions(said.append, Result(document))  # type: ignore[arg-type]
    assert said[0] == "GPU step predicted (no GPU here):" and "keras-jax" in said[1]


def test_one_predicted_cell_prints_its_line_naming_framework_and_variant(
        tmp_path: Path) -> None:
    """Advise's case: the only predicted cell is a fix, not the as-written one; its line
    names it and sets it against its own CPU step."""
    run = planted_run(tmp_path / "fix", {"torch": ("torch_classifier", 30.0)},
                      variant="jacobian-forward")
    lines = ranking.answer_lines(store.load_run(run))
    assert len(lines) == len(shipped_names())
    assert all(", torch jacobian-forward: ~" in line and "than torch on this CPU" in line
               for line in lines)


def test_a_huge_spread_prints_no_negative_figure_and_says_too_wide(tmp_path: Path) -> None:
    """A busy VM once printed '~2.27 ms per step (-36.2-40.7 ms)'."""
    band = ErrorBand(cells=100, ratio_low=0.8, ratio_high=1.3, source="planted")
    for noise in (0.0, 0.5, 3.0, 33.8, 1e6):
        interval = interval_of(2.27e-3, band, noise)
        assert 0 < interval.low_s <= 2.27e-3 <= interval.high_s
        assert interval.too_wide == (interval.high_s / interval.low_s > WIDE_RATIO)
    assert interval_of(2.27e-3, band, 33.8).too_wide
    assert not interval_of(2.27e-3, band, 0.5).too_wide
    run = planted_run(tmp_path / "busy", {"torch": ("mnist-small", 5.7)}, spread=40.0)
    document = store.load_run(run)
    lines = ranking.answer_lines(document)
    text = (run / "summary.md").read_text()
    for line in lines:
        assert "(range too wide to help: this CPU's timing too noisy)" in line, line
        assert line in text
        assert not re.search(r"(^|[\s(])-\d", line), line  # no negative figure
        assert not re.search(r"\d-[\d.]+ ms\)", line), line  # and no range printed
    audit = audit_run(run)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    figures = json.loads((run / FIGURES_FILE).read_text())["figures"]
    assert {item["text"] for item in figures if item["name"] == "interval"} == \
        {answer.WIDE_TEXT}  # said, and checked as said


def test_the_overview_draws_each_predicted_step_under_its_cpu_bar(run_dir: Path) -> None:
    """Computed first: a row per profile right under the CPU row it was predicted from, its
    step and printed interval the stored prediction's (torch's only: the other frameworks'
    error is not measured yet); then drawn, hatched."""
    from harness.report.context import build_context
    from harness.report.load import load_runs
    from harness.report.views.overview import PREDICTED, OverviewView

    context = build_context(load_runs([run_dir]), {})
    (experiment,) = context.experiments
    table = OverviewView().compute(experiment)
    document = store.load_run(run_dir)
    kinds = list(zip(table["framework"], table["device_kind"]))
    for framework in ("torch", "jax", "keras-jax", "keras-torch"):
        at = kinds.index((framework, "cpu"))
        assert kinds[at + 1:at + 1 + len(shipped_names())] == \
            [(framework, PREDICTED)] * len(shipped_names())
        steps = {name: gpu_steps(document, name, 64)[framework] for name in shipped_names()}
        rows = table[(table["framework"] == framework) & (table["device_kind"] == PREDICTED)]
        assert sorted(rows["median_s"]) == pytest.approx(sorted(steps.values()))
        if framework == "torch":  # the only framework whose error the validation measured
            assert (rows["q1_s"] < rows["median_s"]).all() and \
                (rows["median_s"] < rows["q3_s"]).all()
        else:  # "error not measured for ... steps": no whiskers drawn
            assert rows["q1_s"].isna().all() and rows["q3_s"].isna().all()
    assert ("keras-tensorflow", PREDICTED) not in kinds
    assert (run_dir / "mnist-small-overview.png").is_file()

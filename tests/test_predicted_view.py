"""The GPU run's own check of the prediction (issue 51, part 4): a run holding a torch CPU cell
predicted from its stored features and a torch GPU cell measured on the GPU a profile
describes gets the predicted-vs-measured view, its terminal line and an audit of every
figure; a run without such a pair gets none of them.

The runs are hand-made from the lent H100's validation rows (benchmarks/data/): each row's
CPU step with its recorded features and this host's speed, and the GPU step measured on the
same machine, so the pairs are real measurements, made here without a GPU. The predictions
are the harness's own (answer.add_predictions, the path a run takes), on the shipped profiles.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from benchmarks.predictlab.validation import read_rows, unpacked
from harness.analysis.verdictline import Topic, VerdictLine
from harness.audit import audit_run
from harness.commands.predicted import with_predictions
from harness.core.registry import load_workload
from harness.data import store
from harness.predict import answer, versus
from harness.predict.profile import PROFILES_DIR
from harness.report import draw_report
from harness.report.figure import FIGURES_FILE
from harness.report.views import predicted
from tests.planted_figures import planted_copy
from tests.synthetic_runs import write_run

ROWS = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / \
    "predict-validation-h100-20261127.json.gz"
H100 = "NVIDIA H100 80GB HBM3"
BATCHES = (1, 4, 16, 64, 256, 1024)
MNIST_FLOPS = load_workload("mnist-small").flops


def validation_rows(model: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    meta, rows = read_rows(ROWS)
    return meta, [row for row in rows if row["model"] == model and row["batch"] in BATCHES]


def one_step(batch: int) -> dict[str, int]:
    """An MNIST case whose call (an epoch) is one step: the rows' samples are per step."""
    return {"batch_size": batch, "epochs": 1, "train_samples": batch}


def case_of(batch: int, samples: list[float], extra: dict[str, Any]) -> dict[str, Any]:
    """A case timed call by call, one step a call."""
    return {"case": one_step(batch), "status": "ok", "reason": "",
            "cold_seconds": samples[0] * 5, "samples": samples, "calls_per_sample": 1,
            "check": {"passed": True, "metric": "rel_error", "value": 1e-7, "bound": 1e-5,
                      "detail": "hand-made from validation rows"},
            "extra": extra}


def cell_of(device: str, device_name: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cell": {"workload": "mnist-small", "variant": "as-written", "framework": "torch",
                     "device": device, "params": {"batch_size": list(BATCHES)}},
            "status": "ok", "reason": "", "framework_version": "2.11.0+cu130",
            "device_name": device_name, "cases": cases}


def paired_run(run_dir: Path, model: str = "mnist-small", gpu_name: str = H100,
               with_gpu: bool = True, asked: Sequence[str] = (),
               no_speed_at: Sequence[int] = ()) -> Path:
    """A run folder of MODEL's validation rows: a CPU cell with features, a GPU cell named
    GPU_NAME measured (none without WITH_GPU), its predictions stored (the shipped profiles
    and ASKED, as --predict-for), its report drawn. The batches NO_SPEED_AT lack this host's
    speed (a features pass that could not time it), so host 'this' is unknown there."""
    meta, rows = validation_rows(model)
    # A call is an epoch of one batch: one step, its FLOPs as the workload declares them.
    flops = {row["batch"]: float(MNIST_FLOPS(one_step(row["batch"]))) for row in rows}
    cpu = [case_of(row["batch"], row["cpu"]["samples_s"],
                   {answer.FEATURES_KEY: unpacked(row["features_packed"]),
                    answer.STEPS_KEY: 1, "flops_per_call": flops[row["batch"]],
                    answer.HOST_SPEED_KEY: {} if row["batch"] in no_speed_at
                    else meta["this_host"]})
           for row in rows]
    cells = [cell_of("cpu", meta["host_cpu"], cpu)]
    if with_gpu:
        cells.append(cell_of("cuda:0", gpu_name, [
            case_of(row["batch"], row["gpu"]["samples_s"],
                    {"flops_per_call": flops[row["batch"]]}) for row in rows]))
    host = {"machine_label": "gpubox (NVIDIA H100 80GB HBM3)", "hostname": "gpubox",
            "cpu_model": meta["host_cpu"], "cores": 16, "memory_bytes": 2**37,
            "python": "3.12.3", "gpus": [gpu_name] if with_gpu else [], "os": "Linux"}
    write_run(run_dir, cells, host, {"batch_size": list(BATCHES)}, workload="mnist-small",
              sweep="batch_size", work=lambda case: {"flops": flops[case["batch_size"]]},
              extra_doc={"interrupted": False})
    document = store.load_run(run_dir)
    assert answer.add_predictions(document, answer.targets(asked)) == len(rows)
    store.write_run(run_dir, document)
    draw_report([run_dir], run_dir)
    return run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return paired_run(tmp_path_factory.mktemp("paired") / "run-h100")


def records(run_dir: Path) -> list[dict[str, Any]]:
    figures = json.loads((run_dir / FIGURES_FILE).read_text())["figures"]
    return [item for item in figures if item["family"] == versus.FAMILY]


def test_the_pairs_are_the_h100_profile_host_this_per_step(run_dir: Path) -> None:
    document = store.load_run(run_dir)
    pairs = versus.pairs_of(document)
    assert [pair.size for pair in pairs] == list(BATCHES)
    assert {pair.profile for pair in pairs} == {"h100"}  # the H200 profile is not this GPU
    _meta, rows = validation_rows("mnist-small")
    for pair, row in zip(pairs, rows):
        stored = document.cells[0].cases[BATCHES.index(pair.size)].gpu_predictions[
            "h100"]["this"]
        assert pair.prediction.host_choice == "this"
        assert pair.predicted_s == stored.seconds  # one recorded step a call
        assert pair.measured_s == pytest.approx(row["gpu"]["median_s"])
        assert pair.ratio == pytest.approx(stored.seconds / row["gpu"]["median_s"])
        assert pair.interval is not None  # host 'this' on the shipped h100 was validated
        assert pair.inside == (pair.interval.low_s <= pair.measured_s <= pair.interval.high_s)


def test_the_verdict_is_judged_against_the_measured_cpu_step(run_dir: Path) -> None:
    pairs = versus.pairs_of(store.load_run(run_dir))
    by_batch = {pair.size: pair for pair in pairs}
    # batch 4: CPU 0.78 ms, GPU 1.72 ms measured: the CPU wins; batch 1024: 3.2 vs 1.4 ms.
    assert by_batch[4].measured_s > by_batch[4].cpu_s
    assert by_batch[1024].measured_s < by_batch[1024].cpu_s
    for pair in pairs:
        predicted_s = pair.predicted_s or 0.0
        if pair.verdict != versus.TIE:
            right = (predicted_s < pair.cpu_s) == (pair.measured_s < pair.cpu_s)
            assert pair.verdict == (versus.RIGHT if right else versus.WRONG)


def test_the_view_prints_its_table_and_figure(run_dir: Path) -> None:
    text = (run_dir / "summary.md").read_text()
    assert f"## {predicted.HEADING}" in text
    assert (run_dir / predicted.FIGURE).is_file()
    assert f"]({predicted.FIGURE})" in text
    names = {item["name"] for item in records(run_dir)}
    assert names >= {predicted.PREDICTED, predicted.MEASURED, predicted.RATIO,
                     predicted.INTERVAL, predicted.IN_INTERVAL, predicted.VERDICT,
                     predicted.WITHIN, predicted.MEDIAN_RATIO, predicted.VERDICTS}
    rows = [item for item in records(run_dir) if item["name"] == predicted.PREDICTED]
    assert len(rows) == len(BATCHES)


def test_the_audit_verifies_every_figure_of_the_view(run_dir: Path) -> None:
    audit = audit_run(run_dir)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    assert not audit.unverifiable, [item.line() for item in audit.unverifiable]
    assert audit.by_file.get("summary.md", 0) >= len(records(run_dir))



@pytest.mark.parametrize("name, text", [
    (predicted.PREDICTED, "9.99 ms"),
    (predicted.MEASURED, "0.123 ms"),
    (predicted.RATIO, "7.77x"),
    (predicted.INTERVAL, "0.1-0.2 ms"),
    (predicted.VERDICT, "wrongish"),
    (predicted.IN_INTERVAL, "nowhere"),
    (predicted.WITHIN, "0 of 6"),
    (predicted.MEDIAN_RATIO, "3.33x"),
    (predicted.VERDICTS, "0 of 1"),
])
def test_a_planted_wrong_figure_is_caught(run_dir: Path, tmp_path: Path, name: str,
                                         text: str) -> None:
    audit = audit_run(planted_copy(run_dir, tmp_path, versus.FAMILY, name, lambda _record: text))
    wrong = [item for item in audit.mismatches if item.figure.startswith(name)]
    assert wrong, [item.line() for item in audit.mismatches]


def test_a_reworded_sentence_and_table_still_verify(run_dir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(predicted, "SENTENCE", "{profile} on {gpu} of run {run}: {within}; "
                        "ratio {ratio} (median); verdicts {verdicts}{ties}.")
    monkeypatch.setattr(predicted, "WITHIN_CLAUSE", "inside {count}")
    monkeypatch.setattr(predicted, "HEADERS", ["v", "{sweep}", "pred.", "band", "meas.",
                                               "p/m", "in?", "verdict?"])
    redrawn = tmp_path / "redrawn"
    draw_report([run_dir], redrawn)
    text = (redrawn / "summary.md").read_text()
    assert "inside " in text and "the measured GPU step lies within" not in text
    audit = audit_run_with_summary(run_dir, redrawn)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    assert not audit.unverifiable, [item.line() for item in audit.unverifiable]


def audit_run_with_summary(run_dir: Path, drawn: Path) -> Any:
    from harness.audit import audit_summary

    return audit_summary(drawn / "summary.md", [run_dir])


def test_the_terminal_line_fits_two_lines_and_says_the_tally(run_dir: Path) -> None:
    document = store.load_run(run_dir)
    line = versus.check_line([document])
    (tally,) = versus.tallies(document)
    assert line.startswith("prediction for this GPU (H100 80GB")
    assert ", torch as-written: " in line  # what it checks: torch's as-written cells
    assert len(line) <= versus.LINE_LIMIT
    assert f"within its interval in {tally.within_text()} cases" in line
    assert f"median predicted/measured {tally.ratio_text()}" in line


def test_the_terminal_line_lands_under_the_gpu_verdict(run_dir: Path) -> None:
    class Result:
        document = store.load_run(run_dir)

    verdicts = [VerdictLine("mnist-small on gpubox:", Topic.HEADING),
                VerdictLine("  GPU vs CPU: ...", Topic.GPU_VS_CPU),
                VerdictLine("  fastest: ..."), VerdictLine("  warning: noisy", Topic.WARNING)]
    found = with_predictions(Result(), verdicts)  # type: ignore[arg-type]
    assert found[2].text.startswith("  prediction for this GPU (H100 80GB")
    assert found[:2] == verdicts[:2] and found[3:] == verdicts[2:]


def test_no_view_without_a_measured_gpu_cell(tmp_path: Path) -> None:
    run = paired_run(tmp_path / "cpu-only", with_gpu=False)
    assert versus.pairs_of(store.load_run(run)) == []
    assert predicted.HEADING not in (run / "summary.md").read_text()
    assert not records(run)
    assert versus.check_line([store.load_run(run)]) == ""


def test_no_view_for_a_gpu_no_profile_describes(tmp_path: Path) -> None:
    run = paired_run(tmp_path / "other-gpu", gpu_name="NVIDIA GeForce RTX 4090")
    assert versus.pairs_of(store.load_run(run)) == []
    assert predicted.HEADING not in (run / "summary.md").read_text()


def test_the_gpu_name_matches_without_case_or_spacing() -> None:
    assert versus.same_gpu("NVIDIA H100 80GB HBM3", " nvidia  H100 80GB hbm3")
    assert not versus.same_gpu("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe")
    assert not versus.same_gpu("", "")


def test_a_profile_without_a_validated_band_prints_no_interval(tmp_path: Path) -> None:
    """A profile file of the same GPU (your own): paired too, its rows without an interval,
    said so; the terminal line keeps the shipped profile's and counts the other."""
    own = tmp_path / "my-h100.json"
    own.write_bytes((PROFILES_DIR / "h100.json").read_bytes())
    run = paired_run(tmp_path / "own-profile", asked=[str(own)])
    document = store.load_run(run)
    found = {tally.profile: tally for tally in versus.tallies(document)}
    assert set(found) == {"h100", str(own.resolve())}
    assert not found[str(own.resolve())].with_interval
    assert all(pair.no_interval == "error not measured for this profile"
               for pair in found[str(own.resolve())].pairs)
    line = versus.check_line([document])
    assert "within its interval in" in line and "1 more profile in summary.md" in line
    text = (run / "summary.md").read_text()
    assert "no interval printed (error not measured for this profile)" in text
    audit = audit_run(run)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    assert not audit.unverifiable, [item.line() for item in audit.unverifiable]


def test_an_unknown_prediction_is_said_with_its_reason(tmp_path: Path) -> None:
    """The GRU, which the CPU runs step by step: the model says unknown; the rows say so and
    keep the measured step, the sentence gives the reason, the audit still passes."""
    run = paired_run(tmp_path / "gru", model="gru_net")
    pairs = versus.pairs_of(store.load_run(run))
    assert pairs and all(pair.predicted_s is None for pair in pairs)
    text = (run / "summary.md").read_text()
    assert "no step predicted to set against the measured one" in text
    assert {item["name"] for item in records(run)} == {predicted.MEASURED}
    assert "unknown in all" in versus.check_line([store.load_run(run)])
    audit = audit_run(run)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    assert not [item for item in audit.unverifiable if item.where.startswith("summary.md")], \
        [item.line() for item in audit.unverifiable]


def test_sizes_left_unknown_are_said_once_under_the_table(tmp_path: Path) -> None:
    """Host 'this' needs this machine's host speed: two sizes without it are unknown, listed
    once with the reason; the sentence counts the sizes predicted."""
    run = paired_run(tmp_path / "no-speed", no_speed_at=(256, 1024))
    (tally,) = versus.tallies(store.load_run(run))
    assert len(tally.predicted) == 4 and len(tally.pairs) == 6
    text = (run / "summary.md").read_text()
    (said,) = [line for line in text.splitlines()
               if line.startswith("- not predicted at batch_size 256, 1024: ")]
    assert "host speed" in said
    assert f"in {tally.within_text()} cases" in text and tally.within_text().endswith("of 4")
    audit = audit_run(run)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    assert not audit.unverifiable, [item.line() for item in audit.unverifiable]

"""GPU to GPU (issue 51) from two validation rows files: the baselines, the left-out scale,
the noise floor between two lendings of one GPU kind, on planted rows worked out by hand and
on the rows kept in benchmarks/data/."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.predictlab import gpu2gpu, validation
from tests.in_subprocess import PROJECT_ROOT

MS = 1e-3
PROFILE = "h200"


def row(model: str, batch: int, gpu_s: float, predicted_s: float | None = None, *,
        busy: float | None = None) -> dict:
    """A measured row; PREDICTED_S, where given, is its prediction for PROFILE."""
    gpu: dict = {"median_s": gpu_s}
    if busy is not None:
        gpu["busy_share"] = busy
    made = ({PROFILE: {"profiled": {"status": "predicted", "seconds": predicted_s}}}
            if predicted_s else {})
    return {"model": model, "batch": batch, "status": "ok", "gpu": gpu, "predictions": made}


def test_pairs_score_the_source_gpu_baselines_and_the_model() -> None:
    # The source run's predictions for the target profile are the model's (1.1 and 2 ms).
    source = [row("a", 1, 2 * MS, 1.1 * MS), row("a", 4, 4 * MS, 2 * MS), row("g", 1, 3 * MS)]
    target = [row("a", 1, 1 * MS, 5 * MS), row("a", 4, 2 * MS, 5 * MS), row("g", 1, 3 * MS),
              row("z", 1, 1 * MS, 1 * MS)]  # the source never measured z
    pairs = gpu2gpu.gpu_pairs(source, target, PROFILE, bandwidth_ratio=0.5)
    assert [(pair.model, pair.batch) for pair in pairs] == [("a", 1), ("a", 4), ("g", 1)]
    assert gpu2gpu.pair_errors(pairs, gpu2gpu.SAME_AS_SOURCE) == pytest.approx([1, 1, 0])
    assert gpu2gpu.pair_errors(pairs, gpu2gpu.BANDWIDTH_RATIO) == pytest.approx([0, 0, -0.5])
    # g is measured on both but predicted by neither run: the baselines score it, not the model.
    assert gpu2gpu.pair_errors(pairs, validation.MODEL) == pytest.approx([0.1, 0.0])


def test_the_scale_of_a_model_is_fitted_on_the_other_models_only() -> None:
    # The target reads 2x the source for a, 1x for b and c: a's own ratio never reaches a.
    source = [row(model, 1, 1 * MS) for model in ("a", "b", "c")]
    target = [row("a", 1, 2 * MS), row("b", 1, 1 * MS), row("c", 1, 1 * MS)]
    pairs = gpu2gpu.gpu_pairs(source, target, PROFILE, bandwidth_ratio=None)
    assert gpu2gpu.left_out_ratios(pairs) == pytest.approx({"a": 1.0, "b": 1.5, "c": 1.5})
    scaled = gpu2gpu.with_left_out_scale(pairs)
    assert gpu2gpu.pair_errors(scaled, gpu2gpu.SCALED_LEFT_OUT) == pytest.approx([-0.5, 0.5,
                                                                                  0.5])
    # The scale follows the other models: b and c at 3x make a's prediction 3x its source.
    tripled = [row("a", 1, 2 * MS), row("b", 1, 3 * MS), row("c", 1, 3 * MS)]
    again = gpu2gpu.with_left_out_scale(gpu2gpu.gpu_pairs(source, tripled, PROFILE, None))
    assert again[0].predicted[gpu2gpu.SCALED_LEFT_OUT] == pytest.approx(3 * MS)
    # One model alone has nothing to be scaled by.
    alone = gpu2gpu.with_left_out_scale(pairs[:1])
    assert gpu2gpu.SCALED_LEFT_OUT not in alone[0].predicted


def lines_of(source_meta: dict, target_meta: dict, source: list, target: list) -> list[str]:
    return gpu2gpu.gpu_to_gpu_lines((source_meta, source), (target_meta, target),
                                    lambda _source, _target: 0.5)


def test_lines_split_by_the_targets_regime_and_name_the_noise_floor() -> None:
    source = [row("a", 1, 1 * MS, 1 * MS), row("b", 1, 1 * MS, 1 * MS)]
    target = [row("a", 1, 1.05 * MS, busy=0.2), row("b", 1, 2 * MS, busy=0.9)]
    other = {"device_description": "GPU one", "profile": PROFILE}
    lines = lines_of(other, {"device_description": "GPU two", "profile": PROFILE},
                     source, target)
    assert lines[0].startswith("GPU to GPU: GPU one -> GPU two, 2 cells both measured")
    same = [line.split() for line in lines if line.strip().startswith(gpu2gpu.SAME_AS_SOURCE)]
    # all: |errors| 1 - 1/1.05 (4.8%) and 50%: median 27%, p90 4.8 + 0.9 x 45.2 = 45%;
    # busy < 50%: a alone (within 10%); busy >= 50%: b alone.
    assert [words[6:12] for words in same[:3]] == [
        ["all", "2", "27%", "45%", "50%", "50%"],
        ["busy", "<", "50%", "1", "5%", "5%"],
        ["busy", ">=", "50%", "1", "50%", "50%"]]
    assert any(line.strip().startswith(gpu2gpu.BANDWIDTH_RATIO) for line in lines)
    floor = lines_of({**other, "created": "2026-11-27T06:11:05"},
                     {**other, "created": "2026-11-27T09:06:07"}, source, target)
    assert floor[0].startswith("noise floor (one GPU kind, two lendings): GPU one "
                               "(2026-11-27 06:11) -> GPU one (2026-11-27 09:06)")
    # One GPU kind: the bandwidth ratio is 1, the same time again; not printed.
    assert not any(line.strip().startswith(gpu2gpu.BANDWIDTH_RATIO) for line in floor)


def stored(name: str) -> tuple[dict, list[dict]]:
    return validation.read_rows(PROJECT_ROOT / "benchmarks" / "data"
                                / f"predict-validation-{name}.json.gz")


@pytest.mark.parametrize(("source", "target", "median", "p90"), [
    ("h100-20261127", "h100-20261127b", 20, 35), ("h100-20261127b", "h100-20261127", 20, 46),
    ("h200-20261127", "h200-20261127b", 14, 36), ("h200-20261127b", "h200-20261127", 16, 55),
    ("h100-20261127", "h200-20261127", 17, 34), ("h200-20261127", "h100-20261127", 18, 46),
    ("h100-20261127b", "h200-20261127b", 16, 35), ("h200-20261127b", "h100-20261127b", 19, 54)])
def test_the_docs_noise_floor_and_baseline_are_recomputed_from_the_rows(
        source: str, target: str, median: int, p90: int) -> None:
    """docs/predict.md's GPU-to-GPU table: "the same time as the source GPU" over the 59
    cells both runs measured, from the stored rows (two lendings of one kind: the floor)."""
    (_, source_rows), (target_meta, target_rows) = stored(source), stored(target)
    pairs = gpu2gpu.gpu_pairs(source_rows, target_rows, target_meta["profile"], None)
    stats = validation.ErrorStats.of(gpu2gpu.pair_errors(pairs, gpu2gpu.SAME_AS_SOURCE))
    assert stats is not None and stats.cells == 59
    assert (round(stats.median * 100), round(stats.p90 * 100)) == (median, p90)


def test_the_tool_compares_every_two_files_and_names_the_floor() -> None:
    """Three stored files: three pairs, both ways; the two H100 lendings are the floor."""
    names = ("h100-20261127", "h200-20261127", "h100-20261127b")
    paths = [str(PROJECT_ROOT / "benchmarks" / "data" / f"predict-validation-{name}.json.gz")
             for name in names]
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "benchmarks"
                                               / "predict_validation.py"),
                           *(item for path in paths for item in ("--from", path))],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    titles = [line.split(":")[0] for line in done.stdout.splitlines()
              if line.startswith(("GPU to GPU:", "noise floor"))]
    # (H100 a, H200), (H100 a, H100 b), (H200, H100 b): each pair both ways, in that order.
    floor = "noise floor (one GPU kind, two lendings)"
    assert titles == ["GPU to GPU"] * 2 + [floor] * 2 + ["GPU to GPU"] * 2
    after = done.stdout.split("noise floor (one GPU kind, two lendings): NVIDIA H100 80GB HBM3 "
                              "(2026-11-27 06:11) -> NVIDIA H100 80GB HBM3 (2026-11-27 09:06)")[1]
    first = next(line for line in after.splitlines()
                 if line.strip().startswith(gpu2gpu.SAME_AS_SOURCE))
    assert first.split()[6:10] == ["all", "59", "20%", "35%"]

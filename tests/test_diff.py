"""`harness diff`: the U test, verdicts with threshold, regressions, mismatches, real runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.analysis.diff import average_ranks, diff_runs, mann_whitney_u, verdict_for
from harness.cli import app
from tests.synthetic_runs import HOST, cell_result, write_run


def invoke(*args: str):
    """`harness ARGS` piped without $COLUMNS (whole table columns), whatever ran before."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": None})


def noisy(center: float, count: int = 12, seed: int = 0) -> list[float]:
    """Timings around CENTER with 2% multiplicative noise, reproducible."""
    rng = np.random.default_rng(seed)
    return [float(center * value) for value in rng.lognormal(0.0, 0.02, count)]


def test_average_ranks_share_ties() -> None:
    ranks, ties = average_ranks([3.0, 1.0, 3.0, 2.0])
    assert ranks == [3.5, 1.0, 3.5, 2.0]
    assert sorted(ties) == [1, 1, 2]


def test_u_test_matches_the_hand_computed_normal_approximation() -> None:
    # U=0, mean 4.5, variance 3*3*7/12 = 5.25, z = (4.5 - 0.5) / sqrt(5.25) = 1.7457
    u_stat, p_value = mann_whitney_u([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert u_stat == 0.0
    assert p_value == pytest.approx(0.08086, abs=1e-4)
    assert mann_whitney_u([1.0, 1.0, 1.0], [1.0, 1.0]) == (3.0, 1.0)  # all tied: no evidence


def test_u_test_agrees_with_scipy_with_ties() -> None:
    stats = pytest.importorskip("scipy.stats")  # an oracle for the test only, not a dependency
    first = [1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 8.0]
    second = [2.0, 4.0, 5.0, 6.0, 6.0, 9.0, 9.0, 10.0]
    expected = stats.mannwhitneyu(first, second, alternative="two-sided",
                                  method="asymptotic", use_continuity=True)
    u_stat, p_value = mann_whitney_u(first, second)
    assert u_stat == pytest.approx(expected.statistic)
    assert p_value == pytest.approx(expected.pvalue, rel=1e-9)


def test_verdicts_need_significance_and_the_threshold() -> None:
    assert verdict_for(20.0, 0.001, 5.0) == "slower"
    assert verdict_for(-20.0, 0.001, 5.0) == "faster"
    assert verdict_for(3.0, 0.001, 5.0) == "same"  # real but below the threshold
    assert verdict_for(50.0, 0.2, 5.0) == "same"  # large but within the noise


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    run_a = write_run(tmp_path / "a", [
        cell_result("torch", {64: noisy(1e-3, seed=1), 128: noisy(8e-3, seed=2)}),
        cell_result("numpy", {64: noisy(2e-3, seed=3)}),
        cell_result("tensorflow", {64: noisy(5e-3, seed=4)}),
    ])
    run_b = write_run(tmp_path / "b", [
        cell_result("torch", {64: noisy(1.5e-3, seed=5), 128: noisy(4e-3, seed=6)},
                    version="2.14.0"),
        cell_result("numpy", {64: noisy(2e-3, seed=7)}),
        cell_result("tensorflow", {64: [1.0]}, status="error"),
        cell_result("torch", {64: noisy(1e-3, seed=8)}, variant="bf16"),
    ], host={**HOST, "cpu_model": "Other CPU 1"},
       params={"n": [64, 128], "dtype": "float16"})
    return run_a, run_b


def _by_cell(result) -> dict[tuple[str, str, str], object]:
    return {(case.framework, case.variant, case.size): case for case in result.cases}


def test_diff_labels_each_case_and_lists_what_does_not_match(runs: tuple[Path, Path]) -> None:
    result = diff_runs(*runs, threshold_pct=5.0)
    cases = _by_cell(result)
    slower = cases[("torch", "fp32", "64")]
    assert slower.verdict == "slower" and slower.ratio == pytest.approx(1.5, rel=0.05)
    assert slower.p_value < 1e-3
    assert cases[("torch", "fp32", "128")].verdict == "faster"
    assert cases[("numpy", "fp32", "64")].verdict == "same"
    assert cases[("tensorflow", "fp32", "64")].verdict == "error in B"
    assert not any(case.regression for case in result.cases)  # no --fail-on-regression
    assert [c["variant"] for c in result.only_in_b] == ["bf16"] and not result.only_in_a
    mismatches = {item["what"]: (item["a"], item["b"]) for item in result.mismatches}
    assert mismatches["torch version"] == ("2.13.0", "2.14.0")
    assert mismatches["host CPU"] == ("Test CPU 9000", "Other CPU 1")
    assert mismatches["param dtype"] == ("float32", "float16")
    assert "param n" not in mismatches  # the swept sizes are matched case by case instead


def test_fail_on_regression_exits_1_naming_slower_and_newly_failed_cases(
        runs: tuple[Path, Path]) -> None:
    result = invoke("diff", str(runs[0]), str(runs[1]), "--fail-on-regression", "10")
    assert result.exit_code == 1, result.output
    assert "REGRESSION" in result.output and "Mann-Whitney U" in result.output
    assert "environments differ" in result.output and "only in B" in result.output
    document = json.loads(invoke("diff", str(runs[0]), str(runs[1]), "--json",
                                 "--fail-on-regression", "10").stdout)
    regressed = {(c["framework"], c["size"]) for c in document["regressions"]}
    assert regressed == {("torch", "64"), ("tensorflow", "64")}
    # 50% slower is not beyond a 60% limit; the failed case still is a regression.
    looser = json.loads(invoke("diff", str(runs[0]), str(runs[1]), "--json",
                               "--fail-on-regression", "60").stdout)
    assert {c["framework"] for c in looser["regressions"]} == {"tensorflow"}


def test_two_runs_of_one_model_file_diff_with_no_environment_warning(tmp_path: Path) -> None:
    """A --model run keeps its prepared weights inside its own folder (param prepared:
    results/<run>/model): only where the folders live differs, which describes nothing."""
    def model_run(name: str, model: str) -> Path:
        return write_run(tmp_path / name, [cell_result("torch", {8: noisy(1e-3, seed=1)})],
                         params={"n": [8], "model": model,
                                 "prepared": str(tmp_path / name / "model")})

    same_a, same_b = model_run("a", "/home/me/net.py"), model_run("b", "/home/me/net.py")
    result = invoke("diff", str(same_a), str(same_b))
    assert result.exit_code == 0, result.output
    assert "environments differ" not in result.output and "prepared" not in result.output
    assert diff_runs(same_a, same_b).mismatches == []
    # Another model file is another measurement: still said.
    other = model_run("c", "/home/me/other.py")
    assert [item["what"] for item in diff_runs(same_a, other).mismatches] == ["param model"]


def test_threshold_turns_a_small_significant_change_into_same(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", [cell_result("numpy", {64: noisy(1e-3, 20, seed=1)})])
    run_b = write_run(tmp_path / "b", [cell_result("numpy", {64: noisy(1.08e-3, 20, seed=2)})])
    strict = diff_runs(run_a, run_b, threshold_pct=2.0).cases[0]
    loose = diff_runs(run_a, run_b, threshold_pct=10.0).cases[0]
    assert strict.p_value < 0.05 and strict.verdict == "slower"
    assert loose.verdict == "same"


def test_too_few_samples_are_not_judged(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", [cell_result("numpy", {64: [1.0, 1.1, 1.2]})])
    run_b = write_run(tmp_path / "b", [cell_result("numpy", {64: [3.0, 3.1, 3.2]})])
    case = diff_runs(run_a, run_b).cases[0]
    assert case.verdict == "not judged" and case.ratio == pytest.approx(3.1 / 1.1)


@pytest.mark.parametrize("args, message", [
    (["--threshold", "-1"], ">= 0"),
    (["--fail-on-regression", "-5"], ">= 0"),
])
def test_bad_diff_options_are_one_line_exit_2(runs: tuple[Path, Path], args: list[str],
                                              message: str) -> None:
    result = invoke("diff", str(runs[0]), str(runs[1]), *args)
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_diff_of_a_folder_that_is_no_run_is_bad_input(runs: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    result = invoke("diff", str(runs[0]), str(tmp_path / "missing"))
    assert result.exit_code == 2 and "not a folder" in result.output


@pytest.mark.slow
def test_diff_of_two_real_quick_matmul_runs(out_dir: Path) -> None:
    for _ in range(2):
        ran = invoke("compare", "--workload", "matmul", "--quick", "--framework", "numpy",
                     "--device", "cpu", "--sizes", "32,64", "--no-ceilings", "--no-report",
                     "--out", str(out_dir))
        assert ran.exit_code == 0, ran.output
    run_a, run_b = sorted(p for p in out_dir.iterdir() if p.is_dir())
    result = invoke("diff", str(run_a), str(run_b))
    assert result.exit_code == 0, result.output  # without --fail-on-regression never 1
    assert "B against A per case" in result.output and "numpy" in result.output
    verdicts = json.loads(invoke("diff", str(run_a), str(run_b), "--json").stdout)["cases"]
    assert {case["size"] for case in verdicts} == {"32", "64"}
    assert all(case["verdict"] in ("faster", "slower", "same") for case in verdicts)
    # The same run made 3x slower: every case is a significant regression.
    slowed = out_dir / "slowed"
    shutil.copytree(run_b, slowed)
    frame = pd.read_csv(slowed / "measurements.csv")
    frame.loc[frame["phase"] == "warm", "seconds"] *= 3
    frame.to_csv(slowed / "measurements.csv", index=False)
    # --strict: a case SUSPECT in either run (on a shared machine, contended) gates too.
    gated = invoke("diff", str(run_b), str(slowed), "--fail-on-regression", "50", "--strict")
    assert gated.exit_code == 1, gated.output
    assert gated.output.count("slower REGRESSION") == 2

"""Issue 32: rounds of worker processes, interleaved; verdicts judged against run-to-run drift;
contended cases timed again; diff with SUSPECT cases; the harness's own cost."""

from __future__ import annotations

import json
import shutil
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness import api
from harness.analysis.diff import diff_runs, exact_mann_whitney_p, smallest_p
from harness.analysis.noise import CaseNoise, judge_gap
from harness.cli import app
from harness.core import registry
from harness.core.settings import DEFAULT_ATTEMPTS, Settings
from harness.data import store
from harness.data.results import (
    SCHEMA_VERSION,
    CaseResult,
    CaseRound,
    CellResult,
    RunDocument,
    cell_from_dict,
)
from harness.data.upgrade import upgrade
from harness.measure import gpustate, hostload
from harness.measure.casewatch import CaseWatch
from harness.measure.timing import TimingPolicy
from harness.run import caserun, rounds, worker
from harness.spec import Cell, Status

# A --quick worker's settings, with the default attempts (not the suite's one).
QUICK = Settings(quick=True)

# --- the round order -----------------------------------------------------------------------


def test_round_orders_are_seeded_permutations_new_each_round() -> None:
    orders = rounds.round_orders(8, 3, seed=11)
    assert orders == rounds.round_orders(8, 3, seed=11)  # seeded: the same again
    assert orders != rounds.round_orders(8, 3, seed=12)
    assert all(sorted(order) == list(range(8)) for order in orders)
    assert len({tuple(order) for order in orders}) == 3  # a new order every round
    assert rounds.round_orders(5, 1, seed=3) == [[0, 1, 2, 3, 4]]  # one round: plan order


def test_the_work_is_shared_out_over_the_rounds() -> None:
    assert [rounds.share(10, 3, index) for index in range(3)] == [4, 3, 3]
    assert [rounds.share(1, 3, index) for index in range(3)] == [1, 1, 1]  # >= 1 epoch each
    mnist = registry.load_workload("mnist-small")
    cell = Cell("mnist-small", "as-written", "torch", "cpu", {"epochs": 3, "blocks": 16})
    assert [rounds.round_cell(mnist, cell, index, 3).params["epochs"]
            for index in range(3)] == [1, 1, 1]
    uncut = Cell("mnist-small", "as-written", "torch", "cpu", {"epochs": 2, "blocks": 1})
    assert [rounds.round_cell(mnist, uncut, index, 3).params["epochs"]  # a warm epoch each
            for index in range(3)] == [2, 2, 2]
    # The demo's one epoch over 5 rounds: one epoch each, of a fifth of the samples.
    demo = Cell("mnist-small", "as-written", "torch", "cpu",
                {"epochs": 1, "blocks": 16, "train_samples": 60000})
    shares = [rounds.round_cell(mnist, demo, index, 5).params for index in range(5)]
    assert [share["epochs"] for share in shares] == [1] * 5
    assert [share["train_samples"] for share in shares] == [12000] * 5
    # What sizes a call is the same in every round (pooled samples time the same work), so
    # an uneven split leaves the remainder out rather than timing calls of two sizes.
    uneven = [rounds.round_cell(mnist, demo, index, 7).params["train_samples"]
              for index in range(7)]
    assert uneven == [8571] * 7
    policy = TimingPolicy().share(3)
    assert policy.min_samples == 3 and policy.min_time_s == pytest.approx(0.5 / 3)
    assert TimingPolicy().share(1) == TimingPolicy()


def test_the_recorded_round_orders_are_the_ones_that_ran_without_refused_cells(
        out_dir: Path) -> None:
    # "absent" is not installed: refused without a worker, so it is in no round's order.
    run = api.plan("fault", frameworks="fake,absent,fakegpu", devices="cpu", variants="ok",
                   sizes=[1], quick=True, out=out_dir, rounds=2, seed=5)
    result = api.execute(run, ceilings=False, progress=False)
    document = json.loads((result.path / "run.json").read_text())
    planned = [cell["framework"] for cell in document["planned_cells"]]
    assert planned == ["fake", "absent", "fakegpu"]
    ran = [[planned[index] for index in order] for order in document["round_orders"]]
    # As executed: the seeded shuffle of the two cells that ran, mapped back to plan indices.
    expected = [[["fake", "fakegpu"][position] for position in order]
                for order in rounds.round_orders(2, 2, 5)]
    assert ran == expected


def test_a_run_in_rounds_records_its_order_seed_and_the_round_of_every_sample(
        out_dir: Path) -> None:
    run = api.plan("fault", frameworks="fake,fakegpu", devices="cpu", variants="ok",
                   sizes=[1], quick=True, out=out_dir, rounds=2, seed=5)
    result = api.execute(run, ceilings=False, progress=False)
    document = json.loads((result.path / "run.json").read_text())
    assert document["rounds"] == 2 and document["seed"] == 5
    assert document["round_orders"] == rounds.round_orders(2, 2, 5)
    cells = store.load_run(result.path).cells
    assert [cell.framework for cell in cells] == ["fake", "fakegpu"]  # the plan's order
    for cell in cells:
        assert cell.cost is not None and cell.cost.workers == 2
        assert cell.cost.wall_s > cell.cost.timed_s > 0
        case = cell.cases[0]
        assert case.status == Status.OK and [record.round for record in case.rounds] == [0, 1]
        assert all(len(record.samples) >= 3 for record in case.rounds)  # 3 a round, at least
        assert all(record.cold_seconds for record in case.rounds)  # each worker's own cold call
    csv = pd.read_csv(result.path / "measurements.csv")
    assert set(csv.loc[csv["phase"] == "warm", "round"]) == {0, 1}
    assert csv.loc[csv["phase"] == "warm", "round_spread"].notna().all()  # per-case drift
    parquet = pd.read_parquet(result.path / "measurements.parquet")
    assert str(parquet["round"].dtype) == "Int64"
    assert set(parquet.loc[parquet["phase"] == "warm", "round"]) == {0, 1}


# --- the rule ------------------------------------------------------------------------------


def test_a_drift_between_rounds_larger_than_the_gap_is_within_the_noise() -> None:
    # Tight rounds (IQR ~1%) 10% apart, but the rounds themselves drift by 40%.
    fast = CaseNoise.of({0: [1.00, 1.01, 1.02], 1: [1.40, 1.41, 1.42], 2: [1.20, 1.21, 1.22]})
    slow = CaseNoise.of({0: [1.30, 1.31, 1.32], 1: [1.10, 1.11, 1.12], 2: [1.50, 1.51, 1.52]})
    verdict = judge_gap(fast, slow)
    assert not verdict.significant and verdict.held == 2 and verdict.rounds == 3
    assert verdict.phrase().startswith("within the noise")
    # Steady rounds with the same 20% gap: beyond the noise in every round.
    steady_fast = CaseNoise.of({number: [1.00, 1.01, 1.02] for number in range(3)})
    steady_slow = CaseNoise.of({number: [1.20, 1.21, 1.22] for number in range(3)})
    held = judge_gap(steady_fast, steady_slow)
    assert held.significant and held.phrase() == "beyond the noise, held in 3 of 3 rounds"
    one = judge_gap(CaseNoise.of({0: [1.0, 1.01, 1.02]}), CaseNoise.of({0: [2.0, 2.01, 2.02]}))
    assert one.significant and "run-to-run drift not measured" in one.phrase()
    assert not judge_gap(CaseNoise.of({0: [1.0, 1.1]}), CaseNoise.of({0: [2.0, 2.1, 2.2]})).judged


def test_the_gpu_vs_cpu_answer_is_judged_per_size_by_the_same_rule() -> None:
    from harness.analysis.crossover import noise_phrase, size_verdicts

    def rows(medians: list[float], drift: float) -> pd.DataFrame:
        return pd.DataFrame({
            "valid": True, "size_label": ["64", "256"], "size_value": [64.0, 256.0],
            "median_s": medians, "q1_s": [m * 0.99 for m in medians],
            "q3_s": [m * 1.01 for m in medians], "samples": 9,
            "medians_by_round": [{0: m, 1: m * (1 + drift), 2: m} for m in medians]})

    # At 64 the GPU leads by 20% but its rounds drift by 50%; at 256 it leads 4x, steadily.
    verdicts = size_verdicts(rows([1.0, 4.0], 0.0), rows([0.8, 1.0], 0.5))
    assert [verdict.significant for verdict in verdicts] == [False, True]
    assert noise_phrase(verdicts) == (" (the faster device beyond the noise at 1 of 2 sizes; "
                                      "held in all 3 rounds at 1 of 2)")


def test_the_exact_test_on_round_medians_and_its_power() -> None:
    assert exact_mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    assert exact_mann_whitney_p([1, 5, 3], [4, 2, 6]) == pytest.approx(0.7)
    assert smallest_p(3, 3) == pytest.approx(0.1) and smallest_p(4, 4) < 0.05


# --- contention is timed again --------------------------------------------------------------


@pytest.fixture
def gpu_watch(monkeypatch: pytest.MonkeyPatch) -> CaseWatch:
    monkeypatch.setenv(gpustate.NVML_MODULE_ENV, "tests.fakes.nvml")
    monkeypatch.setenv("FAKE_NVML_THROTTLE", "0")
    monkeypatch.setattr(hostload, "CONTENDED_CORES", float("inf"))  # only the GPU contends
    monkeypatch.setattr(caserun, "QUICK_RETRY_PAUSE_S", 0.0)
    from tests.fakes.backend import fault
    fault.TIMINGS.clear()
    from tests.fakes.gpubackend import device as fake_gpu
    device = fake_gpu.open_device("cuda:0")
    return CaseWatch.open(device, Settings.from_environment())


@pytest.mark.parametrize("variant", ["throttled-once", "throttled-always"])
def test_a_throttled_case_is_timed_again_and_suspect_only_if_every_attempt_was(
        gpu_watch: CaseWatch, variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default, not the suite's.
    monkeypatch.setenv("HARNESS_ATTEMPTS", str(DEFAULT_ATTEMPTS))
    spec = registry.load_workload("fault")
    cell = Cell("fault", variant, "fakegpu", "cuda:0", {"size": [2], "pid_file": ""})
    module = registry.implementation_module(spec, "fakegpu")
    from tests.fakes.gpubackend import device as fake_gpu
    context = caserun.CellContext(spec, module, cell, fake_gpu.open_device("cuda:0"), gpu_watch,
                                  settings=QUICK)
    record = caserun.run_case(context, caserun.CasePlan({"size": 2, "pid_file": ""}))
    assert record.status == Status.OK, record.reason
    first = record.attempts[0]
    assert "GPU throttled" in first.contended and not first.kept
    if variant == "throttled-once":
        assert len(record.attempts) == 2 and record.attempts[1].contended == ""
        assert record.attempts[1].kept and "throttled" not in record.suspect
    else:
        assert len(record.attempts) == DEFAULT_ATTEMPTS and record.attempts[-1].kept
        assert f"contended in all {DEFAULT_ATTEMPTS} attempts" in record.suspect
    again = CaseResult.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.attempts == record.attempts


def test_a_later_round_of_a_cell_contended_throughout_times_each_case_once(
        gpu_watch: CaseWatch, tmp_path: Path) -> None:
    """Round 1 retried a load that lasted through every attempt; round 2's worker times each
    case once, and says why (the H100 host's hypervisor stole a core throughout: the pauses
    cost 2-6 s per run of a small model, in every round)."""
    spec = registry.load_workload("fault")
    case = {"size": 2, "pid_file": ""}
    first = Cell("fault", "throttled-always", "fakegpu", "cuda:0", {"size": [2], "pid_file": ""},
                 rounds=2)
    module = registry.implementation_module(spec, "fakegpu")
    from tests.fakes.gpubackend import device as fake_gpu
    device = fake_gpu.open_device("cuda:0")
    record = caserun.run_case(caserun.CellContext(spec, module, first, device, gpu_watch,
                                                  settings=QUICK), caserun.CasePlan(case))
    assert len(record.attempts) == DEFAULT_ATTEMPTS
    merger = rounds.RoundMerger.of(spec, [first], 2)
    merger.add(first, CellResult(cell=first, cases=[record]))
    later = merger.calibrated(replace(first, round=1))
    assert later.busy == "round 1 of this cell had a case contended in every attempt"
    assert cell_from_dict(json.loads(json.dumps(later.as_dict())))[0] == later
    run = worker.CellRun(later, tmp_path / "result.json")
    again = caserun.run_case(
        caserun.CellContext(spec, module, later, device, gpu_watch, clock=run.clock,
                            settings=QUICK),
        caserun.CasePlan(case))
    assert again.attempts == []  # one attempt: none retried (a retried case lists them all)
    assert "GPU throttled" in again.suspect  # the contention is still recorded
    assert "not timed again" in again.suspect and later.busy in again.suspect
    # A cell whose earlier round had no such case retries as before.
    calm = rounds.RoundMerger.of(spec, [first], 2)
    retimed = [record.attempts[0], replace(record.attempts[1], contended="")]
    calm.add(first, CellResult(cell=first, cases=[replace(record, rounds=[
        replace(record.rounds[0], attempts=tuple(retimed))])]))
    assert calm.calibrated(replace(first, round=1)).busy == ""


# --- old runs, diff with SUSPECT cases ----------------------------------------------------


def test_a_run_from_before_rounds_reads_as_one_round() -> None:
    old = {"schema_version": 2, "run_id": "old", "workload": "matmul", "sweep": "n",
           "cells": [{"cell": {"workload": "matmul", "variant": "fp32", "framework": "numpy",
                               "device": "cpu", "params": {}, "quick": True},
                      "status": "ok", "cases": [{"case": {"n": 64}, "status": "ok",
                                                 "cold_seconds": 1.0, "samples": [1.0, 2.0]}]}]}
    upgraded = upgrade(old)
    assert upgraded["schema_version"] == SCHEMA_VERSION and upgraded["rounds"] == 1
    document = RunDocument.from_dict(upgraded)
    case = document.cells[0].cases[0]
    assert len(case.samples_by_round()) == 1 and document.cells[0].cost is None
    assert case.rounds == [CaseRound(0, 1.0, (1.0, 2.0))]


def v3_case() -> dict[str, Any]:
    """A case as layout 3 stored it: two rounds in parallel arrays, round 2 retried."""
    return {"case": {"epochs": 1}, "status": "ok", "reason": "", "cold_seconds": 3.0,
            "samples": [1.0, 1.2, 1.1, 2.0, 2.4], "calls_per_sample": 2,
            "other_load": {"other_cores": 1.5, "steal_cores": 0.0, "seconds": 2.0},
            "call_seconds": [3.0, 1.1, 4.0, 2.2], "sample_steps": [4, 4, 4, 4, 4],
            "sample_rounds": [0, 0, 0, 1, 1], "round_medians": [1.1, 2.2],
            "call_rounds": [0, 0, 1, 1], "suspect": "round 2: busy",
            "attempts": [{"number": 1, "median_s": 3.0, "samples": 2, "other_cores": 1.5,
                          "contended": "busy", "kept": False, "round": 1},
                         {"number": 2, "median_s": 2.2, "samples": 2, "other_cores": 0.1,
                          "contended": "", "kept": True, "round": 1}]}


def test_a_layout_3_case_upgrades_to_per_round_records_with_the_same_figures() -> None:
    old = v3_case()
    document = {"schema_version": 3, "run_id": "v3", "workload": "mnist-small", "rounds": 2,
                "seed": 1, "sweep": "epochs", "cells": [
                    {"cell": {"workload": "mnist-small", "variant": "as-written",
                              "framework": "torch", "device": "cpu", "params": {}},
                     "status": "ok", "cases": [old, {"case": {"epochs": 2}, "status": "error",
                                                     "reason": "boom"}]}]}
    upgraded = upgrade(document)
    stored = upgraded["cells"][0]["cases"][0]
    assert not {"samples", "sample_rounds", "round_medians", "call_rounds"} & set(stored)
    case, failed = RunDocument.from_dict(upgraded).cells[0].cases
    first, second = case.rounds
    assert (first.round, first.samples, first.call_seconds) == (0, (1.0, 1.2, 1.1), (3.0, 1.1))
    assert (second.round, second.samples, second.call_seconds) == (1, (2.0, 2.4), (4.0, 2.2))
    assert [attempt.number for attempt in second.attempts] == [1, 2] and not first.attempts
    # Every merged figure layout 3 stored or derived reads back the same.
    assert case.samples == old["samples"] and case.cold_seconds == old["cold_seconds"]
    assert case.calls_per_sample == 2 and case.other_load == old["other_load"]
    assert [round(statistics.median(part), 9) for part in case.samples_by_round().values()] \
        == old["round_medians"]
    assert [record.round for record, _ in case.warm_samples()] == old["sample_rounds"]
    assert case.whole_calls == list(zip(old["call_rounds"], old["call_seconds"]))
    assert [record.block_steps(index) for record, index in case.warm_samples()] \
        == old["sample_steps"]
    assert len(case.samples_by_round()) == 2
    assert case.round_spread == pytest.approx((2.2 - 1.1) / 1.65)
    assert failed.rounds == [] and not failed.measured
    written = RunDocument.from_dict(upgraded).to_dict()
    assert upgrade(written) == written and written["cells"][0]["cases"][0]["rounds"] == \
        stored["rounds"]  # layout 4 is written as the upgrade made it, round by round


def _suspect_pair(out_dir: Path) -> tuple[Path, Path]:
    run = api.plan("fault", frameworks="fake", devices="cpu", variants="ok", sizes=[1],
                   quick=True, out=out_dir, rounds=1)
    run_a = api.execute(run, ceilings=False, progress=False).path
    run_b = out_dir / "slow-and-suspect"
    shutil.copytree(run_a, run_b)
    frame = pd.read_csv(run_b / "measurements.csv")
    # 30x, not 3x: the fake's samples on a loaded 2-core machine can spread past 3x, and the
    # test is about SUSPECT cases, not about how small a slowdown the U test can see.
    frame.loc[frame["phase"] == "warm", "seconds"] *= 30
    frame["suspect"] = "other processes used 1.5 of 2 cores"
    frame.to_csv(run_b / "measurements.csv", index=False)
    clean = out_dir / "clean-a"
    shutil.copytree(run_a, clean)
    frame = pd.read_csv(clean / "measurements.csv")
    frame["suspect"] = ""
    frame.to_csv(clean / "measurements.csv", index=False)
    return clean, run_b


def test_diff_lists_suspect_cases_apart_and_gates_on_them_only_with_strict(
        out_dir: Path) -> None:
    run_a, run_b = _suspect_pair(out_dir)
    result = diff_runs(run_a, run_b, fail_on_regression_pct=50)
    assert [case.verdict for case in result.cases] == ["slower"]
    assert len(result.suspect) == 1 and result.regressions == []
    assert diff_runs(run_a, run_b, fail_on_regression_pct=50, strict=True).regressions
    runner = CliRunner()
    loose = runner.invoke(app, ["diff", str(run_a), str(run_b), "--fail-on-regression", "50"])
    assert loose.exit_code == 0, loose.output
    assert "SUSPECT in either run" in loose.output
    strict = runner.invoke(app, ["diff", str(run_a), str(run_b), "--fail-on-regression", "50",
                                 "--strict"])
    assert strict.exit_code == 1, strict.output


def test_merged_rounds_keep_what_one_call_did_the_plan_apart_and_every_round(
        out_dir: Path) -> None:
    planned = Cell("mnist-small", "as-written", "torch", "cpu",
                   {"epochs": 1, "train_samples": 60000}, rounds=2)
    share = {"epochs": 1, "train_samples": 30000}
    first = CellResult(cell=planned, cases=[CaseResult(dict(share), rounds=[
        CaseRound(0, 1.0, (1.0, 1.1, 1.2))])])
    second = CellResult(cell=planned, cases=[CaseResult(dict(share), rounds=[
        CaseRound(0, 2.0, (2.0, 2.1, 2.2))])])  # its worker's record: numbered by the merge
    merged = rounds.merge_cells(planned, [(1, second), (0, first)],
                                ("epochs", "train_samples"))
    case = merged.cases[0]
    # The samples time 30,000-sample calls: the case says so, and keeps the plan apart.
    assert case.case == share and case.planned == {"train_samples": 60000}
    assert CaseResult.from_dict(case.to_dict()).planned == {"train_samples": 60000}
    assert case.cold_seconds == 1.0
    assert case.samples == [1.0, 1.1, 1.2, 2.0, 2.1, 2.2]
    assert [record.round for record, _ in case.warm_samples()] == [0, 0, 0, 1, 1, 1]
    assert [record.median for record in case.rounds] == [1.1, 2.1]
    assert [record.cold_seconds for record in case.rounds] == [1.0, 2.0]


def test_the_exact_test_counts_ties_as_the_enumeration_does() -> None:
    # [1, 2, 3, 4] vs [4, 5, 6, 7]: of the 70 ways to split the 8 values, 4 are as extreme
    # (ties at 4 shared), p = 4/70; the hand-written exact test said 2/70, "significant".
    assert exact_mann_whitney_p([1, 2, 3, 4], [4, 5, 6, 7]) == pytest.approx(4 / 70)


def test_each_rounds_whole_calls_keep_their_round_in_the_csv(out_dir: Path) -> None:
    planned = Cell("mnist-small", "as-written", "torch", "cpu", {"epochs": 2}, rounds=2)
    results = [(index, CellResult(cell=planned, cases=[CaseResult({"epochs": 1}, rounds=[
        CaseRound(index, 1.0 + index, (1.0, 1.1, 1.2), call_seconds=(1.0 + index,),
                  sample_steps=(4, 4, 4))])])) for index in range(2)]
    case = rounds.merge_cells(planned, results, ("epochs",)).cases[0]
    assert case.whole_calls == [(0, 1.0), (1, 2.0)]
    rows = [row for row in store.epoch_rows({}, case)]
    assert [(row["sample"], row["round"]) for row in rows] == [(1, 0), (2, 1)]

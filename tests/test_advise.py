"""`harness advise`: the fixes measured beside the as-written cell, ranked, and the answer.

The ranking is unit-tested on synthetic run documents whose answer is known (a faster fix, a
slower one, one within the noise, one failing parity, a conflict), and so is the choice of what
to measure (the diagnosis ranks the candidates, the budget cuts them, the rest are listed as
not tried with why); the flow runs through real workers on the CPU with a tiny torch model
(marked slow, CI-sized: --quick, two batches).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness.analysis import advice, fixchoice, fixresult
from harness.audit import audit_run
from harness.core.settings import Settings
from harness.core.units import format_ratio
from harness.data.adviserecord import RUN_KEY, AdviseRecord
from harness.data.results import CellResult, HarnessCost, RunDocument
from harness.run import advisebudget as budget
from harness.run import chooser as choosing
from harness.run.rounds import round_orders
from harness.run.runner import RunOptions
from harness.spec import Cell
from tests.cli_in_process import CliOutcome, run_cli_in_process

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PASS = {"passed": True, "metric": "max_rel_diff", "value": 1e-7, "bound": 4e-6,
        "detail": "vs the CPU reference: bound 4e-06 = fp32"}
BF16_FAIL = {"passed": False, "metric": "max_rel_diff", "value": 0.4, "bound": 3e-2,
             "detail": "loss beyond rtol 3e-02 of the fp32 reference (bf16 tolerance); ..."}
GPU_PROFILE = {"calls": 3, "busy_seconds": 2e-4, "copy_seconds": 1e-5, "kernels_per_call": 180,
               "copies_per_call": 2, "launches_per_call": 190, "span_seconds": None,
               "tool": "synthetic"}


def samples_around(median: float, rounds: int = 3, per_round: int = 5) -> list[dict[str, Any]]:
    """Tight samples (1% spread) in each round: a 2x gap between two cases is beyond the noise.
    Each round's record as run.json keeps it."""
    samples = [median * (1 + 0.01 * (index - per_round // 2) / per_round)
               for index in range(per_round)]
    return [{"round": number, "cold_seconds": median * 3, "samples": samples}
            for number in range(rounds)]


def cell(variant: str, device: str, medians: dict[int, float], check: dict[str, Any] | None = None,
         status: str = "ok", profile: dict[str, Any] | None = None) -> dict[str, Any]:
    cases = []
    for batch, median in medians.items():
        cases.append({"case": {"batch": batch}, "status": status, "reason": "",
                      "rounds": samples_around(median), "check": check or PASS,
                      "device_profile": profile})
    return {"cell": {"workload": "model-net", "variant": variant, "framework": "torch",
                     "device": device, "params": {"batch": list(medians)}},
            "status": status, "reason": "", "cases": cases}


def document(cells: list[dict[str, Any]], size: int = 32) -> RunDocument:
    return RunDocument.from_dict({
        "run_id": "synthetic", "workload": "model-net", "sweep": "batch",
        "params": {"batch": [size, 4 * size]}, "rounds": 3, "cells": cells,
        "planned_cells": [item["cell"] for item in cells], RUN_KEY: {"size": size}})


def launch_bound_gpu_run() -> RunDocument:
    """GPU as written 1 ms (launch-bound: busy 0.2 ms), CPU 0.5 ms; on the GPU cuda-graph is
    4x faster, compiled 2x, compile-reduce-overhead 0.93x (slower), bf16 3x but failing its
    tolerance, resident within the noise."""
    return document([
        cell("as-written", "cpu", {32: 5e-4, 128: 1.6e-3}),
        cell("as-written", "cuda:0", {32: 1e-3, 128: 1.05e-3}, profile=GPU_PROFILE),
        cell("cuda-graph", "cuda:0", {32: 2.5e-4, 128: 3e-4}),
        cell("compiled", "cuda:0", {32: 5e-4, 128: 5.5e-4}),
        cell("compile-reduce-overhead", "cuda:0", {32: 1e-3 / 0.93, 128: 1.1e-3}),
        cell("bf16", "cuda:0", {32: 1e-3 / 3, 128: 3.6e-4}, check=BF16_FAIL, status="invalid"),
        cell("resident", "cuda:0", {32: 1e-3 * 0.999, 128: 1.05e-3}),
    ])


def by_variant(found: advice.RunAdvice, device: str) -> dict[str, fixresult.FixResult]:
    own = next(item for item in found.devices if item.device == device)
    return {fix.variant: fix for fix in own.fixes}


def test_faster_fixes_are_ranked_by_speedup_with_noise_and_parity() -> None:
    found = advice.advise_run(launch_bound_gpu_run())
    gpu = next(item for item in found.devices if item.device == "cuda:0")
    assert gpu.diagnosis.kind == "launch-bound"
    recommended = [fix.variant for fix in gpu.fixes if fix.recommended]
    assert recommended == ["cuda-graph", "compiled"]
    graph = by_variant(found, "cuda:0")["cuda-graph"]
    assert graph.speedup == pytest.approx(4.0, rel=0.01)
    assert graph.verdict is not None and graph.verdict.significant
    assert "held in 3 of 3 rounds" in graph.line()
    assert "parity pass" in graph.line()
    assert "launch-bound: the graph replays 180 kernels in one launch" in graph.line()


def test_a_slower_fix_did_not_help_and_says_its_ratio() -> None:
    fixes = by_variant(advice.advise_run(launch_bound_gpu_run()), "cuda:0")
    slower = fixes["compile-reduce-overhead"]
    assert slower.standing == fixresult.DID_NOT_HELP
    assert slower.line().startswith("compile-reduce-overhead: 0.93x, slower here")
    within = fixes["resident"]
    assert within.standing == fixresult.DID_NOT_HELP
    assert "within the noise here" in within.line()


def test_a_fix_failing_parity_is_shown_and_never_recommended() -> None:
    found = advice.advise_run(launch_bound_gpu_run())
    bf16 = by_variant(found, "cuda:0")["bf16"]
    assert bf16.speedup == pytest.approx(3.0, rel=0.01)  # faster, and still not advice
    assert bf16.standing == fixresult.FAILS_PARITY
    assert "fails parity (FAIL (max_rel_diff 0.4 > the bf16 tolerance 0.03))" in bf16.line()
    gpu = next(item for item in found.devices if item.device == "cuda:0")
    assert "bf16" not in gpu.combination
    assert any("bf16" in line and "fails parity" in line for line in found.lines())


def test_the_combination_keeps_what_helped_and_drops_conflicts() -> None:
    found = advice.advise_run(launch_bound_gpu_run())
    gpu = next(item for item in found.devices if item.device == "cuda:0")
    # compiled conflicts with cuda-graph (the catalogue's conflict): the faster one stays.
    assert gpu.combination == ["cuda-graph"]
    recommended = [fixresult.FixResult(name, "torch", "cuda:0", fixresult.RECOMMENDED, speedup,
                                    None, "pass", "", 1e-3)
                   for name, speedup in (("resident", 1.5), ("compiled", 2.0), ("tf32", 1.2))]
    chosen = fixresult.best_combination(recommended)
    assert chosen == ["compiled", "resident", "tf32"]
    assert fixchoice.compose_variant(chosen) == "resident+compiled+tf32"


def test_the_answer_uses_each_devices_best_and_refits_the_crossover() -> None:
    found = advice.advise_run(launch_bound_gpu_run())
    [answer] = found.answers
    # cuda-graph 0.25 ms against the CPU's 0.5 ms: the GPU now wins at batch 32.
    assert answer.gpu_wins is True
    assert "yes, the GPU now wins at batch 32: GPU cuda-graph vs CPU as-written, 2x" in \
        answer.text
    lines = found.lines()
    assert lines[0].startswith("answer (model-net at batch 32):")
    assert lines.index("did not help (never recommended):") > lines.index(
        "  1. " + by_variant(found, "cuda:0")["cuda-graph"].line())


def test_where_the_gpu_still_loses_the_answer_says_from_which_batch() -> None:
    run = document([
        cell("as-written", "cpu", {32: 2e-4, 128: 8e-4}),
        cell("as-written", "cuda:0", {32: 1e-3, 128: 1.02e-3}, profile=GPU_PROFILE),
        cell("compiled", "cuda:0", {32: 5e-4, 128: 5.1e-4}),
    ])
    [answer] = advice.advise_run(run).answers
    assert answer.gpu_wins is False
    assert "no, the GPU still loses at batch 32: GPU compiled vs CPU as-written" in answer.text
    assert answer.prediction is not None and answer.prediction.kind == "crossover"
    assert "refitted with the fixed step's costs, predicted: GPU faster above batch" in \
        answer.text


# --- what to measure: the diagnosis ranks, the budget cuts ---------------------------------------

LAUNCH_BOUND_CANDIDATES = ["resident", "cuda-graph", "bf16", "tf32", "channels-last"]


def test_the_diagnosis_ranks_what_it_points_at_first_and_argues_against_the_rest() -> None:
    ranked = fixchoice.rank_candidates(LAUNCH_BOUND_CANDIDATES, "cuda:0", "launch-bound")
    assert ranked == ["cuda-graph", "resident", "bf16", "tf32", "channels-last"]
    assert fixchoice.candidate_fit("cuda-graph", "cuda:0", "launch-bound") == fixchoice.AIMED
    assert fixchoice.candidate_fit("bf16", "cuda:0", "launch-bound") == fixchoice.ARGUED_AGAINST
    assert fixchoice.candidate_fit("cuda-graph", "cuda:0", "compute-bound") == \
        fixchoice.ARGUED_AGAINST
    # A CPU cell is host-bound as a whole: it ranks, it rules nothing out.
    assert fixchoice.candidate_fit("bf16", "cpu", fixchoice.HOST_BOUND) == fixchoice.UNSAID
    assert fixchoice.rank_candidates(["bf16", "compiled"], "cpu", fixchoice.HOST_BOUND) == \
        ["compiled", "bf16"]
    # An unprofiled GPU cell says nothing either way.
    assert fixchoice.candidate_fit("bf16", "cuda:0", fixchoice.UNPROFILED) == fixchoice.UNSAID
    assert fixchoice.argued_against("bf16", "launch-bound").startswith(
        "launch-bound, bf16 cannot shorten launches (it helps when compute-bound")


def candidate(variant: str, first_s: float, later_s: float, rank: int,
              device: str = "cuda:0") -> budget.Candidate:
    return budget.Candidate(Cell("model-net", variant, "torch", device), fixchoice.UNSAID,
                                 rank, budget.Costs(first_s, later_s), "launch-bound")


def test_a_budget_too_small_keeps_the_first_ranked_fixes_and_prices_the_rest() -> None:
    baseline = budget.Costs(4.0, 3.0)
    ranked = [candidate("cuda-graph", 4, 3, 0), candidate("compiled", 20, 20, 1),
              candidate("resident", 4, 3, 2), candidate("bf16", 4, 3, 3)]
    # 3 rounds: 26 s left after the baseline's two later rounds (6 s); cuda-graph (10 s) fits,
    # compiled (60 s) does not and is passed over for the cheaper resident after it; 6 s are
    # left, so bf16 (10 s) needs a budget of 44 s, offered as 50.
    plan = budget._fill([baseline], ranked, 32.0, 3, 40.0)
    assert [item.cell.variant for item in plan.chosen] == ["cuda-graph", "resident"]
    assert [(item.cell.variant, needed) for item, needed in plan.left_out] == \
        [("compiled", 100.0), ("bf16", 50.0)]
    # fit_budget cuts rounds before fixes: at 2 rounds compiled (40 s) still does not fit, at
    # one round (20 s) it does, and all four fixes are measured.
    chosen = budget.fit_budget([baseline], ranked, 32.0, 3, 40.0)
    assert chosen.rounds == 1 and len(chosen.chosen) == 4 and not chosen.left_out
    # Without a budget: every candidate, every round.
    assert budget.fit_budget([baseline], ranked, None, 3, None).rounds == 3


def priced(variant: str, costs: budget.Costs, rank: int,
           device: str = "cuda:0") -> budget.Candidate:
    return budget.Candidate(Cell("model-net", variant, "torch", device), fixchoice.UNSAID,
                                 rank, costs, "not profiled")


# Seed 000's Jacobian, roughly: a GPU worker of ~100 s whose floor (start, imports, device
# open, check, exit) is 8 s; on the CPU a worker of 10 s, 4 s of it the floor.
SLOW_GPU = budget.Costs(100.0, 95.0, 8.0)
CHEAP_CPU = budget.Costs(10.0, 8.0, 4.0)


def variants(items: list[budget.Candidate]) -> list[str]:
    return [f"{item.cell.variant}@{item.cell.device}" for item in items]


def test_fixes_too_dear_at_their_estimate_are_tried_in_the_time_left_after_the_others() -> None:
    """60 s left: no GPU fix fits at the as-written GPU worker's price, the CPU fixes do (1
    round: at 2 or 3 the as-written GPU cell's later rounds alone overrun it). The 40 s the
    CPU fixes leave hold the GPU fixes' 8 s floors: both are trials, in rank order, after the
    CPU fixes; the rounds are those of the fill at full price."""
    ranked = [priced("jacobian-forward", SLOW_GPU, 0), priced("compiled", CHEAP_CPU, 0, "cpu"),
              priced("vmap", SLOW_GPU, 1), priced("threads-1", CHEAP_CPU, 1, "cpu")]
    plan = budget.fit_budget([CHEAP_CPU, SLOW_GPU], ranked, 60.0, 3, 180.0)
    assert plan.rounds == 1
    assert variants(plan.chosen) == ["compiled@cpu", "threads-1@cpu"]
    assert variants([item for item, _ in plan.trials]) == ["jacobian-forward@cuda:0",
                                                           "vmap@cuda:0"]
    assert variants(plan.to_run) == ["compiled@cpu", "threads-1@cpu",
                                     "jacobian-forward@cuda:0", "vmap@cuda:0"]
    # Each trial's budget at full price: 180 + 100 - the 40 s left after the CPU fixes.
    assert [needed for _, needed in plan.trials] == [240.0, 240.0] and not plan.left_out
    # The floors are spent in rank order: with 15 s left the first (8 s) fits, the second
    # (8 s more) does not and is left out with its budget at full price.
    tight = budget.fit_budget([CHEAP_CPU, SLOW_GPU], ranked, 35.0, 3, 180.0)
    assert variants([item for item, _ in tight.trials]) == ["jacobian-forward@cuda:0"]
    assert [(item.cell.variant, needed) for item, needed in tight.left_out] == [("vmap", 270.0)]


def test_where_no_fix_fits_at_its_estimate_the_rounds_are_those_that_hold_the_most_trials(
) -> None:
    """A GPU-only slow step: no count of rounds holds a fix at full price, and 2 or 3 rounds
    of the as-written cell alone overrun the 35 s; at 1 round the floors (the compile fix's
    21 s with its allowance, then 8 s each) fit in rank order until they do not."""
    compiled = budget.candidate_costs(SLOW_GPU, "torch", "cuda:0", "compiled")
    assert compiled == budget.Costs(113.0, 106.0, 21.0)
    ranked = [priced("compiled", compiled, 0), priced("jacobian-forward", SLOW_GPU, 1),
              priced("vmap", SLOW_GPU, 2), priced("bf16", SLOW_GPU, 3)]
    plan = budget.fit_budget([SLOW_GPU], ranked, 35.0, 3, 180.0)
    assert plan.rounds == 1 and plan.chosen == []
    assert [item.cell.variant for item, _ in plan.trials] == ["compiled", "jacobian-forward"]
    assert [item.cell.variant for item, _ in plan.left_out] == ["vmap", "bf16"]
    # Without a measured floor no fix is a trial: the plan is today's.
    unknown = [priced(item.cell.variant, budget.Costs(100.0, 95.0), item.rank)
               for item in ranked]
    assert budget.fit_budget([SLOW_GPU], unknown, 35.0, 3, 180.0).trials == []


def test_trials_neither_meet_the_target_nor_choose_the_rounds() -> None:
    """At 3 rounds two fixes fit at full price and the two others' floors fit what is left:
    four in all, MIN_FIXES, but two of them trials. The rounds are still the full-price
    fill's: at 1 round all four fit at full price, so 1 round, no trial."""
    baseline = budget.Costs(4.0, 3.0, 1.0)
    ranked = [priced("cuda-graph", budget.Costs(4.0, 3.0, 1.0), 0),
              priced("compiled", budget.Costs(20.0, 20.0, 5.0), 1),
              priced("resident", budget.Costs(4.0, 3.0, 1.0), 2),
              priced("bf16", budget.Costs(4.0, 3.0, 1.0), 3)]
    three = budget._fill([baseline], ranked, 32.0, 3, 40.0)
    assert [item.cell.variant for item in three.chosen] == ["cuda-graph", "resident"]
    assert [item.cell.variant for item, _ in three.trials] == ["compiled", "bf16"]
    assert not three.meets_target(ranked)
    chosen = budget.fit_budget([baseline], ranked, 32.0, 3, 40.0)
    assert chosen.rounds == 1 and len(chosen.chosen) == 4 and not chosen.trials
    # No budget: every candidate at full price, every round, no trial.
    unlimited = budget.fit_budget([baseline], ranked, None, 3, None)
    assert unlimited.rounds == 3 and len(unlimited.chosen) == 4 and not unlimited.trials


def test_a_workers_floor_is_its_wall_less_its_calls_and_the_passes_that_repeat_them() -> None:
    """Two workers, 100 s: 60 s of timed calls, 28 s of warm-up, FLOP count, memory pass and
    device profile (each calls the step again); the rest, 12 s over two workers, is the
    floor. A compile fix's floor adds the first round's compile allowance."""
    cost = HarnessCost(wall_s=100.0, timed_s=60.0, workers=2, phases={
        "warm-up and calibration": 10.0, "FLOP count": 8.0, "memory pass": 6.0,
        "device profile": 4.0, "worker start (python, imports)": 7.0, "check": 2.0})
    result = CellResult(cell=Cell("model-net", "as-written", "torch", "cuda:0"), cost=cost)
    measured = budget.worker_costs(result)
    assert measured == budget.Costs(52.0, 48.0, 6.0)
    assert budget.candidate_costs(measured, "torch", "cuda:0", "bf16") == measured
    assert budget.candidate_costs(measured, "torch", "cuda:0", "compiled").floor_s == 19.0
    assert budget.worker_costs(CellResult(cell=result.cell)) is None


def test_a_trial_starts_where_its_floor_fits_and_says_so(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """The chooser on a GPU as-written worker of 60 s (floor 5 s), 30 s left: no fix fits at
    its estimate; the first five fit by their floors and are announced as trials. Before a
    trial's worker its floor, not its estimate, is held against the time left."""
    slow = costed(cell("as-written", "cuda:0", {32: 2.0, 128: 0.5}, profile=GPU_PROFILE),
                  wall_s=60.0)
    slow["cost"].update(timed_s=54.0, phases={"device profile": 1.0})  # floor: 5 s
    stored = document([slow])
    session: Any = SimpleNamespace(
        document=stored, cells=[result.cell for result in stored.cells], progress=False,
        recorder=SimpleNamespace(results=stored.cells, save=lambda: None))
    now = [0.0]
    monkeypatch.setattr(choosing, "clock", lambda: now[0])
    said: list[str] = []
    monkeypatch.setattr(choosing, "say", said.append)
    chooser = choosing.Chooser(session, {("torch", "cuda:0"): LAUNCH_BOUND_CANDIDATES}, 32,
                                  30.0, 0.0, 7, rounds=3)
    chosen = chooser.decide()
    # Launch-bound: cuda-graph and resident first, then those it argues against; 30 s hold
    # five floors of 5 s.
    assert [item.variant for item in chosen] == ["cuda-graph", "resident", "bf16", "tf32",
                                                 "channels-last"]
    assert said[0] == ("advise: torch on cuda:0: launch-bound; measuring no fix; in the time "
                       "left: cuda-graph, resident, bf16, tf32, channels-last")
    record = stored.advise
    assert record is not None
    assert all(item.trial and item.floor_s == 5.0 for item in record.chosen)
    assert record.not_tried == [] and record.rounds_run == 1
    graph = chosen[0]
    now[0] = 25.0  # 5 s left: the floor fits, the 61 s estimate would not
    assert chooser.fits(graph, 0)
    now[0] = 25.5
    assert not chooser.fits(graph, 0)


def test_a_trial_leaves_the_other_cells_their_later_rounds(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """3 rounds, 100 s: the as-written cell and a chosen fix (3 s a worker each) still need two
    more rounds, 12 s. A trial (floor 2 s) starts only where those 12 s are left over after
    it, and its worker is stopped where they begin; the chosen fix's own worker is held
    against the budget alone."""
    stored = document([costed(cell("as-written", "cpu", {32: 1e-3, 128: 4e-3})),
                       costed(cell("bf16", "cpu", {32: 8e-4, 128: 3e-3}))])
    session: Any = SimpleNamespace(
        document=stored, cells=[result.cell for result in stored.cells], progress=False,
        recorder=SimpleNamespace(results=stored.cells, save=lambda: None),
        options=RunOptions(timeout_s=600.0))
    now = [70.0]
    monkeypatch.setattr(choosing, "clock", lambda: now[0])
    chooser = choosing.Chooser(session, {}, 32, 100.0, 0.0, 7, rounds=3, decided=True)
    trial = replace(stored.cells[0].cell, variant="threads-1")
    chooser.planned[trial.key] = budget.Candidate(
        trial, fixchoice.UNSAID, 1, budget.Costs(4.0, 3.0, 2.0), fixchoice.HOST_BOUND)
    chooser.trials.add(trial.key)
    assert chooser.reserved(0) == 12.0
    assert chooser.fits(trial, 0)  # 70 + 2 + 12 <= 100
    chooser.queue = [trial]
    before = time.monotonic()
    assert chooser._next_stage(0) == [trial]
    after = time.monotonic()
    # Stopped 18 s from its start: 100 - 70 - the 12 s kept for the others.
    assert before + 18.0 <= session.options.deadline <= after + 18.0
    assert session.options.deadline_reason.startswith(
        "its share of the advise budget of 100 s ran out")
    now[0] = 90.0  # 2 s more would fit the budget, not the others' 12 s after it
    assert not chooser.fits(trial, 0)
    assert chooser.fits(stored.cells[1].cell, 1)  # 90 + 3: the chosen fix is no trial


def test_a_trial_stopped_by_the_budget_is_listed_not_measured_never_did_not_help() -> None:
    """Three trials stopped where the budget ended: one before it finished a case, one after
    the quarter batch only, one after the user's batch (its case there is measured, and
    judged). The first two are not measured, each saying why, never under did not help or
    recommended."""
    budget_out = "the advise budget of 180 s ran out; worker killed"
    nothing = {**cell("jacobian-forward", "cuda:0", {32: 1e-4}), "status": "timeout",
               "reason": budget_out, "cases": []}
    quarter = {**cell("vmap", "cuda:0", {128: 2e-4}), "status": "timeout",
               "reason": budget_out}
    user = {**cell("cuda-graph", "cuda:0", {32: 2.5e-4}), "status": "timeout",
            "reason": budget_out}
    run = document([cell("as-written", "cuda:0", {32: 1e-3, 128: 1.05e-3},
                         profile=GPU_PROFILE), nothing, quarter, user])
    trial = {"framework": "torch", "device": "cuda:0", "trial": True, "needed_s": 400}
    run.advise = AdviseRecord.from_dict({
        "size": 32, "chosen": [{**trial, "variant": name}
                               for name in ("jacobian-forward", "vmap", "cuda-graph")]})
    found = advice.advise_run(run)
    fixes = by_variant(found, "cuda:0")
    assert fixes["jacobian-forward"].standing == fixresult.NOT_MEASURED
    assert fixes["vmap"].standing == fixresult.NOT_MEASURED
    assert fixes["cuda-graph"].standing == fixresult.RECOMMENDED
    [gpu] = found.devices
    assert gpu.combination == ["cuda-graph"]
    lines = found.lines()
    heading = lines.index("not measured (never recommended):")
    assert lines[heading + 1:heading + 3] == [
        "  torch on cuda:0: jacobian-forward: not measured (stopped before it finished a case: "
        f"{budget_out}; tried in the time left, --budget 400 would run it)",
        "  torch on cuda:0: vmap: not measured (stopped after batch 128, before batch 32: "
        f"{budget_out}; tried in the time left, --budget 400 would run it)"]
    assert "did not help (never recommended):" not in lines
    assert not any("failed" in line for line in lines)


def costed(item: dict[str, Any], wall_s: float = 4.0) -> dict[str, Any]:
    """A synthetic cell with one worker's cost (what the budget reads)."""
    return {**item, "cost": {"wall_s": wall_s, "timed_s": 1.0, "workers": 1,
                             "phases": {"device profile": 1.0}}}


def test_what_the_diagnosis_argues_against_and_the_budget_cuts_is_listed_not_tried(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The chooser on a launch-bound GPU baseline, 10 s left: the fix the diagnosis points at
    and the next run; the 2 s they leave hold bf16's floor (its worker less its calls: 2 s),
    so it is tried in the time left; the rest are not tried, each with the diagnosis's reason
    and a budget."""
    run = launch_bound_gpu_run()
    baselines = [costed(item) for item in
                 (cell("as-written", "cuda:0", {32: 1e-3, 128: 1.05e-3}, profile=GPU_PROFILE),)]
    stored = document(baselines)
    saved: list[bool] = []
    session: Any = SimpleNamespace(
        document=stored, cells=[result.cell for result in stored.cells], progress=False,
        recorder=SimpleNamespace(results=stored.cells, save=lambda: saved.append(True)))
    monkeypatch.setattr(choosing, "clock", lambda: 0.0)
    chooser = choosing.Chooser(session, {("torch", "cuda:0"): LAUNCH_BOUND_CANDIDATES}, 32,
                                  10.0, 0.0, 7, rounds=3)
    chosen = chooser.decide()
    assert [cell.variant for cell in chosen] == ["cuda-graph", "resident", "bf16"]
    record = stored.advise
    assert record is not None and record.rounds_run == 1 and saved
    assert [item.trial for item in record.chosen] == [False, False, True]
    assert record.chosen[-1].floor_s == 2.0 and record.chosen[-1].needed_s == 20
    assert [item.variant for item in record.not_tried] == ["tf32", "channels-last"]
    assert {item.fit for item in record.not_tried} == {fixchoice.ARGUED_AGAINST}
    # The advice of a run with that record names them, under the answer's notes.
    run.advise = replace(record, size=32, tried=2)
    lines = advice.advise_run(run).lines()
    assert "not tried (never measured):" in lines
    assert ("  torch on cuda:0: tf32: not tried: launch-bound, tf32 cannot shorten launches "
            "(it helps when compute-bound, device-bound); --budget 20 would run it") in lines
    assert "measured 2 of 5 candidate fixes (a budget of 10 s; the as-written cells' first " \
           "round chose them: docs/advise.md)" in lines
    assert any(line.startswith("1 round of 3: the budget of 10 s: the as-written step took")
               for line in lines)


# --- through real workers ---------------------------------------------------------------------

TORCH_MLP = """
    import numpy as np
    import torch.nn as nn

    def model():
        return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 4))

    def inputs(batch, rng):
        return rng.standard_normal((batch, 32), dtype=np.float32)
"""
# Loses its answer in bf16: x * 1e3 + 1 and x * 1e3 round to bf16 apart (one ulp near 1e3 is
# 4), so the two matmuls no longer differ by W @ 1. Rounding x and W alone moves fp32's answer
# by a fraction of a percent (both terms move alike): bf16 is far beyond its sensitivity.
CANCELLING = """
    import numpy as np
    import torch.nn as nn

    class Cancelling(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(32, 8, bias=False)

        def forward(self, x):
            big = x * 1e3
            return self.linear(big + 1) - self.linear(big)

    def model():
        return Cancelling()

    def inputs(batch, rng):
        return rng.standard_normal((batch, 32), dtype=np.float32)
"""


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=PROJECT_ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def advise_model(tmp_path: Path, source: str, *extra: str) -> tuple[CliOutcome, Path | None]:
    """`harness advise` of SOURCE in this process: its workers fork from the session's warm
    processes rather than a child's own, which import torch again."""
    model = tmp_path / "net.py"
    model.write_text(textwrap.dedent(source))
    out = tmp_path / "out"
    # No budget: however slow or loaded the machine, every fix the tests name is measured
    # (under the default 180 s a slow one can leave compiled out; issue 50).
    ran = run_cli_in_process("advise", "--model", str(model), "--device", "cpu", "--sizes", "8",
                  "--quick", "--no-ceilings", "--no-report", "--budget", "0", "--out", str(out),
                  *extra)
    folders = sorted(out.glob("*/run.json"))
    return ran, folders[0].parent if folders else None


@pytest.mark.slow  # real torch workers
def test_advise_measures_compile_and_ranks_it_and_its_rows_pass_check(tmp_path: Path) -> None:
    ran, run_dir = advise_model(tmp_path, TORCH_MLP, "--rounds", "2")
    assert run_dir is not None, ran.stderr
    stored = json.loads((run_dir / "run.json").read_text())
    variants = {item["cell"]["variant"] for item in stored["cells"]}
    assert {"as-written", "compiled"} <= variants
    assert stored[RUN_KEY]["size"] == 8
    found = advice.advise_run(RunDocument.from_dict(stored))
    [cpu] = found.devices
    compiled = next(fix for fix in cpu.fixes if fix.variant == "compiled")
    assert compiled.speedup is not None and compiled.verdict is not None
    assert "compiled: " in ran.stdout and format_ratio(compiled.speedup) in ran.stdout
    assert compiled.verdict.phrase() in ran.stdout
    assert ran.stdout.startswith("answer (model-net at batch 8):")
    # Whatever did not help is never in the recommended combination.
    unhelpful = {fix.variant for fix in cpu.fixes if not fix.recommended}
    assert not unhelpful & set(cpu.combination)
    audit = audit_run(run_dir, round_orders)
    assert audit.mismatches == []
    # Time only: the run's settings say no energy, and the 8-sample batch got a 2-sample one.
    assert stored["settings"]["energy"] is False
    assert [case["case"]["batch"] for case in stored["cells"][0]["cases"]] == [8, 2]


@pytest.mark.slow  # real torch workers
def test_a_budget_too_small_for_every_fix_runs_the_first_ranked_and_lists_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """60 s and a clock that never moves (the test must not hang on the VM's speed): the
    compiled fix, ranked first for a host-bound CPU cell, carries a compile allowance no
    60 s hold, not even as a trial (the allowance is part of its floor), so it is listed as
    not tried with the budget that would run it; the cheaper fixes after it run; the
    as-written cell ran first; every row passes harness check."""
    from harness import api

    model = tmp_path / "net.py"
    model.write_text(textwrap.dedent(TORCH_MLP))
    monkeypatch.setattr(choosing, "clock", lambda: 0.0)
    result = api.advise(model=model, devices="cpu", sizes=[8], quick=True,
                        ceilings=False, out=tmp_path / "out", budget_s=60.0, progress=False)
    stored = result.document
    record = stored.advise
    ran = {cell.variant for cell in stored.cells}
    assert "compiled" not in ran and "as-written" in ran and len(ran) >= 3, ran
    assert record is not None
    [compiled] = [item for item in record.not_tried if item.variant == "compiled"]
    assert compiled.fit == fixchoice.AIMED and compiled.needed_s is not None
    assert compiled.needed_s > 60
    assert "compiled" not in {item.variant for item in record.chosen}
    assert stored.round_orders[0][0] == 0  # planned_cells[0]: the as-written cell, first
    lines = advice.advise_run(stored).lines()
    assert (f"  torch on cpu: compiled: not tried: left out by the budget of 60 s; --budget "
            f"{compiled.needed_s:.0f} would run it") in lines
    # channels-last has no 4-D input to lay out: unavailable, not measured; a combination
    # of two fixes that helped (phase 2) is no candidate.
    measured = sum(cell.variant != "as-written" and "+" not in cell.variant
                   and cell.status.value != "unavailable" for cell in stored.cells)
    assert f"measured {measured} of {record.candidate_count} candidate fixes" in \
        "\n".join(lines)
    assert audit_run(result.path, round_orders).mismatches == []


def test_an_advice_plan_adds_a_smaller_batch_and_measures_no_energy(tmp_path: Path) -> None:
    """One batch gets a second, a quarter of it (4x under 4); 3 rounds unless asked; the
    workers are told to skip idle power and energy passes."""
    from harness.run.advise import advice_sizes, plan_advice

    assert advice_sizes([100]) == [100, 25] and advice_sizes([2]) == [2, 8]
    assert advice_sizes([32, 64]) == [32, 64]
    model = tmp_path / "net.py"
    model.write_text(textwrap.dedent(TORCH_MLP))
    run, size = plan_advice(model=model, sizes=[32], devices="cpu", frameworks="torch",
                            out=tmp_path / "out")
    assert size == 32 and run.rounds == 3 and run.settings.energy is False
    assert run.params["batch"] == [32, 8]
    # Its workers' FLOP count and memory pass get 2 s, not compare's 10 s (the budget is for
    # the fixes); the setting travels to them in run.json's settings.
    assert run.settings.pass_limit_s == 2.0
    assert Settings.from_dict(run.settings.to_dict()).pass_limit_s == 2.0


@pytest.mark.slow  # real torch workers
def test_a_mixed_precision_result_beyond_its_sensitivity_fails_parity(tmp_path: Path) -> None:
    ran, run_dir = advise_model(tmp_path, CANCELLING)
    assert run_dir is not None, ran.stderr
    found = advice.advise_run(RunDocument.from_dict(
        json.loads((run_dir / "run.json").read_text())))
    [cpu] = found.devices
    bf16 = next(fix for fix in cpu.fixes if fix.variant == "bf16")
    assert bf16.standing == fixresult.FAILS_PARITY, bf16.line()
    # Both numbers: how far bf16 moved the loss, how far bf16's rounding moves fp32's.
    assert bf16.parity.startswith("FAIL (bf16: loss ") and ": beyond " in bf16.parity
    assert "rounding the inputs and weights to bf16 moves the fp32 loss by up to" in bf16.parity
    assert "bf16" not in cpu.combination
    assert f"{bf16.line()}" in ran.stdout


@pytest.mark.parametrize("args, says", [
    ((), "give one of --model FILE or --workload NAME"),
    (("--workload", "matmul", "--sizes", "a"), "--sizes 'a'"),
    (("--workload", "matmul", "--framework", "nope"), "nope"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...],
                                          says: str) -> None:
    """The first through a real child, as a shell runs it (its exit code, all of its stderr);
    the others in this process, each stream still read on its own."""
    in_a_child = not args
    cli = functools.partial(run_cli, timeout=120) if in_a_child else run_cli_in_process
    ran = cli("advise", *args, "--out", str(tmp_path / "out"))
    assert ran.returncode == 2
    assert ran.stderr.count("\n") == 1 and says in ran.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_batch_whose_profile_was_left_out_is_diagnosed_from_another_batch() -> None:
    """Seed 000's Jacobian: a 12 s GPU call's profile pass is left out (casepasses.pass_too_long);
    the as-written cell at the quarter batch was profiled, and its diagnosis stands in, naming
    its batch and why the user's has none. Without any profile: unprofiled, as before."""
    left_out = {"reason": "the device profile was left out: a call takes 12 s"}
    user_batch_unprofiled = cell("as-written", "cuda:0", {32: 1e-3}, profile=left_out)
    quarter_profiled = cell("as-written", "cuda:0", {128: 1.05e-3}, profile=GPU_PROFILE)
    merged = {**user_batch_unprofiled,
              "cases": user_batch_unprofiled["cases"] + quarter_profiled["cases"]}
    found = advice.advise_run(document([cell("as-written", "cpu", {32: 5e-4, 128: 1.6e-3}),
                                        merged]))
    [gpu] = [item for item in found.devices if item.device == "cuda:0"]
    assert gpu.diagnosis.kind == "launch-bound", gpu.diagnosis.text
    assert "(at batch 128; at 32 the device profile was left out: a call takes 12 s)" in \
        gpu.diagnosis.text
    alone = advice.advise_run(document([cell("as-written", "cpu", {32: 5e-4}),
                                        cell("as-written", "cuda:0", {32: 1e-3},
                                             profile=left_out)]))
    [gpu] = [item for item in alone.devices if item.device == "cuda:0"]
    assert gpu.diagnosis.kind == fixchoice.UNPROFILED


# --- what follows the last worker, remembered per machine ------------------------------------

def test_the_after_run_reserve_is_remembered_per_cell_for_this_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a memory the flat AFTER_RUN_S; after an advise of 6 cells that took 8.3 s past
    its last worker (seed 000's Jacobian on the H100 host), 1.38 s a cell x the margin for the
    cells run so far; another machine's fingerprint reads nothing."""
    from harness.run import advise as advise_run

    assert advise_run.remembered_per_cell(tmp_path) is None  # tmp_path: the run's cache folder
    assert advise_run.after_run_reserve(6, None) == advise_run.AFTER_RUN_S
    advise_run.remember_after_run(8.3, 6, tmp_path)
    per_cell = advise_run.remembered_per_cell(tmp_path)
    assert per_cell == pytest.approx(8.3 / 6, abs=1e-3)
    assert advise_run.after_run_reserve(6, per_cell) == pytest.approx(
        8.3 * advise_run.AFTER_RUN_MARGIN, abs=0.01)
    assert advise_run.after_run_reserve(1, per_cell) == advise_run.AFTER_RUN_FLOOR_S
    monkeypatch.setattr(advise_run, "after_run_key", lambda: "another machine")
    assert advise_run.remembered_per_cell(tmp_path) is None


def test_the_chooser_keeps_back_more_as_cells_run(monkeypatch: pytest.MonkeyPatch) -> None:
    results: list[object] = []
    session = SimpleNamespace(recorder=SimpleNamespace(results=results))
    monkeypatch.setattr(choosing, "clock", lambda: 100.0)
    chooser = choosing.Chooser(cast(Any, session), {}, 32, 180.0, 40.0, 1,
                               after_run=lambda cells: 2.0 * cells)
    assert chooser.elapsed() == 60.0 + 2.0  # nothing ran yet: the next cell's share
    results += [object(), object(), object()]
    assert chooser.elapsed() == 60.0 + 8.0
    unbudgeted = choosing.Chooser(cast(Any, session), {}, 32, None, 40.0, 1,
                                  after_run=lambda cells: 2.0 * cells)
    assert unbudgeted.elapsed() == 60.0


def test_the_cli_remembers_only_a_reported_budgeted_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.commands.advise import remember_advise_end
    from harness.run import advise as advise_run

    kept: list[tuple[float, int, Path]] = []
    monkeypatch.setattr(advise_run, "remember_after_run",
                        lambda seconds, cells, folder: kept.append((seconds, cells, folder)))
    document = SimpleNamespace(finished=time.time() - 8.0, cells=[object()] * 6, quick=False,
                               settings={"cache_dir": str(tmp_path)})
    result = cast(Any, SimpleNamespace(document=document, stopped_by=None))
    remember_advise_end(result, reported=False)
    assert kept == []
    remember_advise_end(result, reported=True)
    assert len(kept) == 1 and kept[0][1] == 6 and 7.9 < kept[0][0] < 60
    assert kept[0][2] == tmp_path  # the run's own cache folder, from its recorded settings


def test_the_budget_counts_the_commands_own_start() -> None:
    """The CLI hands advise what the process spent before it (Python's start, the imports):
    the budget is the whole command's."""
    import psutil

    from harness.measure.envinfo import process_age_s

    age = time.time() - psutil.Process().create_time()
    spent = process_age_s()
    assert age - 1.0 <= spent <= age + 5.0 and spent > 0


def test_a_cpu_only_run_says_why_it_has_no_answer_and_what_would_give_one() -> None:
    """A new user's trial read 'no answer: ... on both a CPU and a GPU' on a laptop as a
    failure; a run without any GPU says so and what measures both."""
    assert advice.no_answer(["cpu"]) == advice.NO_GPU_ANSWER
    assert advice.no_answer(["cpu", "cuda:0"]) == advice.NO_ANSWER
    lines = advice.advise_run(document([cell("as-written", "cpu", {32: 1e-3})])).lines()
    assert lines[:2] == ["answer (model-net at batch 32):", f"  {advice.NO_GPU_ANSWER}"]
    assert len(lines[1]) <= 200  # two terminal lines at 100 columns

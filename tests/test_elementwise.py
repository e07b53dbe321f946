"""The elementwise workload: work counts, the check, and the Grappler-folding guard firing."""

from __future__ import annotations

import pytest

from harness.run.forkserver import ForkServers
from harness.run.runner import run_worker
from harness.spec import Cell
from harness.workloads.elementwise import (
    SPEC,
    bytes_moved,
    check,
    flops,
    make_inputs,
    summation_bound,
    tensor_shape,
)
from tests.quick_options import quick_options

ELEMENTS, ITERATIONS = 3000, 6


def tiny_case(**overrides) -> dict:
    return {**SPEC.defaults(quick=True), "elements": ELEMENTS, "iterations": ITERATIONS,
            **overrides}


def honest_output(case: dict, inputs: dict) -> dict:
    """What a correct eager run hands back: the loop's float32 result, no time, no evidence."""
    result = inputs["a"] * inputs["b"]
    for _ in range(case["iterations"]):
        result = result + inputs["a"] * inputs["b"]
    return {"result": result, "extra": {"device_kind": "cpu"}}


def test_seed_shape_is_reached_and_other_sizes_fall_back_to_1d() -> None:
    params = SPEC.defaults(quick=False)
    assert tensor_shape({**params, "elements": 10**8}) == (100, 1000, 1000)
    assert tensor_shape({**params, "elements": 10**5}) == (10**5,)
    # Through JSON the tuple arrives as a list; same answer.
    assert tensor_shape({"elements": 2 * 10**6, "trailing_shape": [1000, 1000]}) == (2, 1000, 1000)


def test_work_counts() -> None:
    case = {"elements": 10, "iterations": 100}
    assert bytes_moved(case) == 4 * 10 * (3 + 4 * 100)
    assert flops(case) == 10 * (1 + 2 * 100)


def test_check_accepts_the_loop_and_rejects_a_missing_iteration() -> None:
    case = tiny_case()
    inputs = make_inputs(case, "as-written")
    output = honest_output(case, inputs)
    verdict = check(case, "as-written", inputs, output)
    assert verdict.passed and verdict.value <= summation_bound(ITERATIONS)
    one_short = {**output, "result": output["result"] - inputs["a"] * inputs["b"]}
    assert not check(case, "as-written", inputs, one_short).passed


def test_check_flags_a_graph_with_fewer_additions_than_iterations() -> None:
    case = tiny_case()
    inputs = make_inputs(case, "graph")
    folded = honest_output(case, inputs)
    folded["extra"].update(executed_additions=0, op_count_source="post-Grappler graph")
    verdict = check(case, "graph", inputs, folded)
    assert not verdict.passed and "folded the loop" in verdict.detail
    folded["extra"]["executed_additions"] = ITERATIONS
    assert check(case, "graph", inputs, folded).passed


def test_check_flags_bandwidth_above_the_ceiling() -> None:
    case = tiny_case(max_plausible_gbps=100.0)
    inputs = make_inputs(case, "graph")
    output = honest_output(case, inputs)
    just_possible = bytes_moved(case) / 90e9  # 90 GB/s
    assert check(case, "graph", inputs, {**output, "seconds_per_call": just_possible}).passed
    impossible = check(case, "graph", inputs, {**output, "seconds_per_call": just_possible / 10})
    assert not impossible.passed
    assert "faster than memory bandwidth allows" in impossible.detail
    # A run that may fuse iterations is held only to reading a, b and writing result once.
    fused = {"result": output["result"], "seconds_per_call": just_possible / 10,
             "extra": {"device_kind": "cpu", "may_fuse_iterations": True}}
    assert check(case, "compiled", inputs, fused).passed


def run(servers: ForkServers, framework: str, variant: str, **overrides) -> dict:
    """One cpu cell through a worker forked from SERVERS' warm process for its framework."""
    params = {**SPEC.defaults(quick=True), "elements": [ELEMENTS], "iterations": ITERATIONS,
              **overrides}
    return run_worker(Cell("elementwise", variant, framework, "cpu", params),
                      quick_options(300), servers).to_dict()


def only_case(result: dict) -> dict:
    (case,) = result["cases"]
    return case


@pytest.mark.slow
@pytest.mark.parametrize("framework, variant", [
    ("torch", "as-written"), ("torch", "in-place"), ("tensorflow", "as-written"),
    ("numpy", "as-written"),
])
def test_loop_runs_and_matches_float64_in_every_framework(framework: str, variant: str,
                                                          warm_servers: ForkServers) -> None:
    result = run(warm_servers, framework, variant)
    assert result["status"] == "ok", result["reason"]
    case = only_case(result)
    assert case["check"]["passed"] and case["rounds"][0]["samples"]
    assert case["extra"]["shape"] == str(ELEMENTS)


@pytest.mark.slow
def test_tensorflow_graph_runs_every_addition_with_the_arithmetic_optimizer_off(
        warm_servers: ForkServers) -> None:
    case = only_case(run(warm_servers, "tensorflow", "graph"))
    assert case["status"] == "ok", case["reason"]
    extra = case["extra"]
    assert extra["arithmetic_optimizer"] == "off"
    assert extra["executed_additions"] == ITERATIONS
    assert extra["executed_multiplications"] == ITERATIONS + 1


@pytest.mark.slow
def test_folded_tensorflow_graph_is_marked_invalid(warm_servers: ForkServers) -> None:
    """The trap left on deliberately: the value is right, the guard must still refuse the time."""
    result = run(warm_servers, "tensorflow", "graph", grappler="on")
    case = only_case(result)
    assert result["status"] == "invalid" and case["status"] == "invalid"
    assert "optimizer folded the loop" in case["reason"]
    assert case["extra"]["executed_additions"] < ITERATIONS
    # Folded means (k+1)*a*b computed by multiplies: the value alone would have passed.
    assert case["check"]["value"] <= case["check"]["bound"]


@pytest.mark.slow
def test_worker_hands_the_measured_time_to_the_bandwidth_guard(
        warm_servers: ForkServers) -> None:
    """An absurdly low ceiling makes an honest run 'too fast': proof the guard sees the clock."""
    case = only_case(run(warm_servers, "numpy", "as-written", max_plausible_gbps=1e-4))
    assert case["status"] == "invalid"
    assert "faster than memory bandwidth allows" in case["reason"]

"""MNIST timed in blocks of steps: one epoch gives several warm samples in every framework.

Through the worker subprocess, as users run it, on tiny parameters (8 steps per epoch), forked
from the warm process of its framework (conftest's `warm_servers`), as a run's workers are: jax's
two workers share one import.
"""

from __future__ import annotations

import pytest

from harness.core import registry
from harness.run.forkserver import ForkServers
from harness.run.runner import run_worker
from harness.spec import Cell
from harness.workloads import mnist
from tests.in_subprocess import run_check
from tests.quick_options import quick_options

TINY = {"epochs": 1, "train_samples": 256, "test_samples": 50, "blocks": 16}  # 8 steps
# keras-torch runs the same callback as keras-tensorflow; left out to keep the suite short.
FRAMEWORKS = ("torch", "jax", "keras-jax", "keras-tensorflow")


def run_one_case(servers: ForkServers, framework: str, variant: str = "as-written",
                 **params: object) -> dict:
    cell_params = {**mnist.WIDE.defaults(quick=True), **TINY, **params}
    result = run_worker(Cell("mnist-wide", variant, framework, "cpu", cell_params),
                        quick_options(300), servers).to_dict()
    assert result["status"] == "ok", result["reason"]
    (case,) = result["cases"]
    return case


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_epoch_gives_warm_block_samples(framework: str, warm_servers: ForkServers) -> None:
    if not registry.framework_installed(framework)[0]:
        pytest.skip(f"{framework} is not installed")
    case = run_one_case(warm_servers, framework)
    assert case["extra"]["steps_per_call"] == 8 and case["extra"]["epochs_run"] >= 1
    # 8 steps in 8 blocks of one step; the first is cold, the other 7 are warm samples.
    (record,) = case["rounds"]
    assert len(record["samples"]) >= 3 and record["sample_steps"] == [1] * len(record["samples"])
    assert all(seconds > 0 for seconds in record["samples"])
    # The epoch itself is still reported, as the cold call.
    assert record["call_seconds"] == [record["cold_seconds"]]


@pytest.mark.slow
def test_an_epoch_in_one_jitted_call_stays_one_sample_per_epoch(
        warm_servers: ForkServers) -> None:
    """jax 'compiled' runs the epoch as one lax.scan: no steps to cut, one sample per epoch."""
    if not registry.framework_installed("jax")[0]:
        pytest.skip("jax is not installed")
    case = run_one_case(warm_servers, "jax", "compiled", epochs=2)
    (record,) = case["rounds"]
    assert len(record["samples"]) == 1 and record["sample_steps"] == [8]
    assert len(record["call_seconds"]) == 2



@pytest.mark.parametrize("framework", ("jax", "keras-jax"))
def test_a_part_of_a_call_leaves_a_wait_that_works_and_a_model_that_trains_on(
        framework: str) -> None:
    """The energy pass runs a call's first steps and then waits (sync='output'): the wait
    must block on the state where the part stopped. Keras on JAX donates the weights of the
    last whole call to the next steps, so waiting on those raised "called on deleted or
    donated buffer" (found on an H100, keras-jax cuda:0). The part, the wait and a whole call
    after it, on CPU, in a child process (tests.blocks_checks)."""
    if not registry.framework_installed(framework)[0]:
        pytest.skip(f"{framework} is not installed")
    run_check("tests.blocks_checks", f"part_then_whole({framework!r})", framework=framework)

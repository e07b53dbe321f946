"""A new fix is one catalogue entry: a fake fix registered from the test is offered, ranked,
priced, composed and explained by advise without any other core file knowing its name."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.analysis import advice, fixchoice
from harness.core import registry
from harness.core.fixes import COST_COMPILE, fix
from harness.data.adviserecord import AdviseRecord
from harness.data.results import RunDocument
from harness.run import advise as advise_flow
from harness.run import advisebudget
from harness.workloads.usermodel import spec
from tests.test_advise import GPU_PROFILE, cell, document

# A made-up launch-bound fix of torch on a GPU.
FUSED = fix("fused-optimizer", "torch", "gpu", {"launch-bound"},
            "the optimizer's per-parameter updates run as one fused kernel",
            "torch.optim with fused=True",
            measured_why="one launch for the updates among {kernels}",
            refused_on={"cpu": "a fused optimizer needs a GPU"}, cost=COST_COMPILE,
            conflicts={"cuda-graph": "{other} captures the optimizer already"})


@pytest.fixture
def with_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake fix as a plugin module's FIXES would add it (registry.PLUGIN_FIXES)."""
    monkeypatch.setattr(registry, "PLUGIN_FIXES", [FUSED])


@pytest.mark.usefixtures("with_fused")
def test_a_plugin_fix_is_a_variant_the_planner_accepts_and_advise_offers() -> None:
    model = spec.spec_for_name("model-net", {"family": "torch"})
    assert "fused-optimizer" in model.variants
    capability = model.capabilities["torch"]
    assert capability.refusal("fused-optimizer", "gpu") is None
    assert capability.refusal("fused-optimizer", "cpu") == "a fused optimizer needs a GPU"
    assert spec.catalogue().capability("jax").refusal("fused-optimizer", "gpu") == \
        "a torch variant"
    assert spec.compose_variant(["fused-optimizer", "resident"]) == "resident+fused-optimizer"
    assert spec.conflict(["cuda-graph", "fused-optimizer"]) == \
        "cuda-graph captures the optimizer already"
    offered = advise_flow.candidate_variants(model, "torch", "cuda:0", "as-written")
    assert "fused-optimizer" in offered
    assert "fused-optimizer" not in advise_flow.candidate_variants(model, "torch", "cpu",
                                                                   "as-written")
    # A launch-bound diagnosis points at it; a compute-bound one argues against it.
    assert fixchoice.rank_candidates(["bf16", "fused-optimizer"], "cuda:0", "launch-bound") == \
        ["fused-optimizer", "bf16"]
    assert fixchoice.candidate_fit("fused-optimizer", "cuda:0", "compute-bound") == \
        fixchoice.ARGUED_AGAINST
    # Its cost class prices it before it ran: the compile allowance on a GPU.
    baseline = advisebudget.Costs(10.0, 8.0, 2.0)
    assert advisebudget.candidate_costs(baseline, "torch", "cuda:0", "fused-optimizer") == \
        advisebudget.Costs(23.0, 19.0, 15.0)


@pytest.mark.usefixtures("with_fused")
def test_a_measured_plugin_fix_is_judged_and_explained_from_its_entry() -> None:
    run: RunDocument = document([
        cell("as-written", "cuda:0", {32: 1e-3, 128: 1.05e-3}, profile=GPU_PROFILE),
        cell("fused-optimizer", "cuda:0", {32: 4e-4, 128: 4.2e-4})])
    run = replace(run, advise=AdviseRecord(size=32, baseline="as-written"))
    [gpu] = advice.advise_run(run).devices
    [fused] = gpu.fixes
    assert fused.recommended and fused.speedup == pytest.approx(2.5, rel=0.01)
    assert fused.why == "launch-bound: one launch for the updates among 180 kernels"


def test_without_the_plugin_the_fix_is_unknown() -> None:
    assert "fused-optimizer" not in spec.spec_for_name("model-net").variants
    assert fixchoice.candidate_fit("fused-optimizer", "cuda:0", "launch-bound") == fixchoice.UNSAID

"""MNIST's `preloaded` and `compiled` variants train on a CPU through the worker: the data set
on the device once with batches gathered there (torch), the whole epoch as one jitted lax.scan
(JAX). Tiny params (2 epochs of 1,600 digits) keep the accuracy bound judged."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core import registry
from harness.run.forkserver import ForkServers
from harness.run.runner import run_worker
from harness.spec import Cell
from harness.workloads import mnist
from tests.quick_options import quick_options

TINY = {"epochs": 2, "train_samples": 1600, "test_samples": 200}
SMALL_PARAMS = 101_770


@pytest.mark.slow
@pytest.mark.parametrize("framework, variant", [("torch", "preloaded"), ("jax", "compiled")])
def test_variant_trains_the_small_net(framework: str, variant: str,
                                      warm_servers: ForkServers) -> None:
    if not registry.framework_installed(framework)[0]:
        pytest.skip(f"{framework} is not installed")
    params = {**mnist.SMALL.defaults(quick=True), **TINY}
    result = run_worker(Cell("mnist-small", variant, framework, "cpu", params),
                        quick_options(300),
                        warm_servers).to_dict()
    assert result["status"] == "ok", result["reason"]
    assert result["cell"]["variant"] == variant
    (case,) = result["cases"]
    extra = case["extra"]
    assert extra["params"] == SMALL_PARAMS and extra["steps_per_call"] == 1600 // 32
    assert case["check"]["passed"] and case["check"]["bound"] == mnist.ACCURACY_BOUND
    assert extra["accuracy"] > mnist.ACCURACY_BOUND
    assert np.isfinite(extra["train_loss"]) and extra["train_loss"] < 2.0
    (record,) = case["rounds"]
    assert len(record["samples"]) == 1 and record["cold_seconds"] > 0

"""The demo's TensorFlow cell: Keras on TensorFlow training the seed's wide MNIST net, through
the worker as `make demo` runs it (tiny params: 2 epochs of 1,600 digits, 100 Adam steps)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core import registry
from harness.run.forkserver import ForkServers
from harness.run.runner import run_worker
from harness.spec import Cell
from harness.workloads import mnist
from tests.quick_options import quick_options

TINY = {"epochs": 2, "train_samples": 1600, "test_samples": 200}  # 50 steps an epoch, judged
WIDE_PARAMS = 1_796_010

needs_tensorflow = pytest.mark.skipif(not registry.framework_installed("keras-tensorflow")[0],
                                      reason="keras-tensorflow needs tensorflow and keras")


@needs_tensorflow
@pytest.mark.slow
def test_keras_on_tensorflow_trains_the_wide_net_through_the_worker(
        warm_servers: ForkServers) -> None:
    params = {**mnist.WIDE.defaults(quick=True), **TINY}
    result = run_worker(Cell("mnist-wide", "as-written", "keras-tensorflow", "cpu", params),
                        quick_options(300),
                        warm_servers).to_dict()
    assert result["status"] == "ok", result["reason"]
    (case,) = result["cases"]
    extra = case["extra"]
    assert extra["keras_backend"] == "tensorflow"
    assert extra["params"] == WIDE_PARAMS == mnist.dense_param_count((1000, 1000))
    assert extra["steps_per_call"] == 1600 // 32
    # 100 steps on 200 test digits: the accuracy bound is judged, not waived.
    check = case["check"]
    assert check["passed"] and check["bound"] == mnist.ACCURACY_BOUND
    assert mnist.ACCURACY_BOUND < extra["accuracy"] <= 1.0
    assert np.isfinite(extra["train_loss"]) and extra["train_loss"] < 2.0
    assert extra["data_source"].startswith("embedded:")
    (record,) = case["rounds"]
    assert len(record["samples"]) == 1 and record["cold_seconds"] > 0  # 2 epochs: cold + 1 warm

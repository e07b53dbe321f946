"""Checks of harness.measure.blocks that import a framework: run in a child process
(tests.in_subprocess.run_check), never in the test process."""

from __future__ import annotations

import os

from harness.core import registry
from harness.core.registry import backend_module, implementation_module
from harness.core.settings import Settings
from harness.measure import blocks
from harness.run.caserun import OutputStep, timed_pair
from harness.workloads import mnist

TINY = {"epochs": 1, "train_samples": 256, "test_samples": 50, "blocks": 16}  # 8 steps


def part_then_whole(framework: str) -> None:
    """A whole call, its first 3 steps as a part, the wait, a whole call again: each wait
    blocks on an output that still exists, and the model still trains and evaluates."""
    os.environ.update(registry.load_framework(framework).environment)
    spec = registry.load_workload("mnist-wide")
    device = backend_module(framework, "device").open_device("cpu")
    module = implementation_module(spec, framework)
    case = {**mnist.WIDE.defaults(quick=True), **TINY, "batch_size": 32}
    inputs = spec.inputs(case, "as-written", Settings.from_environment())
    task = module.make_task(case, "as-written", device, inputs)
    step, synchronize = timed_pair(task, device, "output")
    assert isinstance(step, OutputStep)
    call = blocks.CallStep(task, step, step.keep)
    call()
    synchronize()
    call.part(3)()
    synchronize()  # raised before: the last whole call's output had been donated
    call()
    synchronize()
    accuracy = float(task.output()["extra"]["accuracy"])
    assert 0.0 <= accuracy <= 1.0, accuracy

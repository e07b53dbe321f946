"""Checks run in a child process by tests/test_loss_scale.py: they import torch, which the test
process never does.

An fp16 cell as the harness builds it (backends/torch/usermodel.py make_task), on the CPU: torch
2.13's autocast runs float16 there and torch.amp.GradScaler("cpu") skips updates as the CUDA
one does. The device says it is a GPU so that the GPU-only fp16 fix is built at all.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import torch

from harness.backends.torch import usermodel
from harness.backends.torch.device import TorchDevice

# The loss is 1000 x the mean squared error: at the scaler's starting 2^16 its float16
# gradients overflow (float16 holds up to 65,504), so a plain GradScaler skips its first
# updates while it halves the scale. SGD with a small step: the update moves the loss by ~5%.
OVERFLOWING = """
    import numpy as np
    import torch
    import torch.nn as nn

    def model():
        return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Tanh(), nn.Linear(16, 4))

    def inputs(batch, rng):
        return rng.standard_normal((batch, 8), dtype=np.float32)

    def loss(output, target):
        return 1000 * torch.nn.functional.mse_loss(output.float(), target)

    def optimizer(parameters):
        return torch.optim.SGD(parameters, lr=1e-4)
"""
BATCH = 32


class GpuShapedCpu(TorchDevice):
    """The CPU, passed off as a GPU: the fp16 fix is refused on a CPU device."""

    @property
    def is_gpu(self) -> bool:
        return True


def _inputs(path: Path) -> dict:
    rng = np.random.default_rng(0)
    net = usermodel.build(str(path), 0)
    return {"x": [rng.standard_normal((BATCH, 8), dtype=np.float32)],
            "targets": np.zeros((BATCH, 4), dtype=np.float32),
            "weights": usermodel.weight_arrays(net), "weight_names": list(net.state_dict()),
            "model": str(path), "what": "train", "seed": 0, "size": {}}


def _kept_losses(task: usermodel.ModelTask) -> tuple[list[float], dict]:
    task.step()
    task.step()
    output = task.output()
    return [float(np.asarray(value)) for value in output["result"]], output["extra"]


def fp16_kept_steps_are_applied_updates() -> None:
    """The scale is found before the kept calls (its overflowing probes counted, the weights
    and BatchNorm statistics put back), so the second kept loss follows an applied update and
    sits where fp32's does; without that the scaler skipped it and the loss stood still."""
    with TemporaryDirectory() as folder:
        path = Path(folder) / "overflowing.py"
        path.write_text(textwrap.dedent(OVERFLOWING))
        inputs = _inputs(path)
        cpu = TorchDevice("cpu", "cpu", torch.device("cpu"))
        fp32, _ = _kept_losses(usermodel.make_task({"batch": BATCH}, "as-written", cpu,
                                                   inputs))  # type: ignore[arg-type]
        gpu_shaped = GpuShapedCpu("cpu", "cpu", torch.device("cpu"))
        task = usermodel.make_task({"batch": BATCH}, "fp16", gpu_shaped,
                                   inputs)  # type: ignore[arg-type]
        net = usermodel.MODELS[task]
        for name, tensor in net.state_dict().items():  # settling left the initial state
            assert np.array_equal(tensor.numpy(), inputs["weights"][name]), name
        fp16, extra = _kept_losses(task)
    settled = extra["loss_scale"]
    assert settled["overflowed_probes"] >= 1 and settled["settled"], settled
    assert settled["start"] == 2.0**16 > settled["scale"], settled
    assert extra["skipped_update_calls"] == [] and extra["skipped_updates"] == 0, extra
    moved = abs(fp32[1] - fp32[0]) / abs(fp32[0])
    assert moved > 0.01, fp32  # the update moves the loss by more than fp16's rounding
    assert abs(fp16[0] - fp32[0]) / abs(fp32[0]) < 0.1 * moved, (fp16, fp32)
    assert abs(fp16[1] - fp32[1]) / abs(fp32[1]) < 0.1 * moved, (fp16, fp32)


def a_scaler_skipping_a_kept_update_is_counted_by_call() -> None:
    """A kept call whose update the scaler skips is recorded by its number."""
    net = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    scaled = usermodel.ScaledUpdate(optimizer, "cpu", watched=3)
    x = torch.ones(4, 2)
    for factor in (1.0, float("inf"), 1.0, float("inf")):  # the 4th is past the watched 3
        optimizer.zero_grad()
        scaled.backward_and_step(net(x * factor).sum())
    assert scaled.record()["skipped_update_calls"] == [2], scaled.record()
    assert scaled.record()["skipped_updates"] == 1

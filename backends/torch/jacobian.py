"""The tiny MLP's Jacobian in PyTorch: autograd.functional.jacobian vs torch.func per sample."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from harness.backends.torch.device import TorchDevice, require_cuda
from harness.backends.torch.graphs import CapturedOnFirstCall
from harness.workloads.jacobian import fingerprint


def build_net(weights: dict[str, np.ndarray], device: torch.device) -> torch.nn.Sequential:
    """The seed's nn.Sequential with the shared weights (Linear stores (out, in): transpose)."""
    layers = [torch.nn.Linear(1, 20), torch.nn.Tanh(), torch.nn.Linear(20, 20), torch.nn.Tanh(),
              torch.nn.Linear(20, 400)]
    net = torch.nn.Sequential(*layers)
    with torch.no_grad():
        for index, linear in enumerate((layers[0], layers[2], layers[4]), start=1):
            assert isinstance(linear, torch.nn.Linear)  # layers is typed as Modules
            linear.weight.copy_(torch.from_numpy(weights[f"w{index}"].T))
            linear.bias.copy_(torch.from_numpy(weights[f"b{index}"]))
    return net.to(device)


def full_jacobian_summary(jacobian: torch.Tensor) -> dict[str, Any]:
    """Diagonal blocks (batch,400,1) and max |entry| elsewhere, reduced on the device.

    Why not ship it whole: at batch 1000 the (batch,400,batch,1) Jacobian is 1.6 GB. The
    diagonal is zeroed in place for the off-diagonal max (amax/amin avoid an |J| copy) and put
    back, so the task's tensor is left as it was.
    """
    diagonal_view = torch.diagonal(jacobian, dim1=0, dim2=2)  # (400, 1, batch), a view
    blocks = diagonal_view.permute(2, 0, 1).clone()  # (batch, 400, 1)
    diagonal_view.zero_()
    off_diagonal_max = torch.maximum(jacobian.amax(), -jacobian.amin())
    diagonal_view.copy_(blocks.permute(1, 2, 0))
    return {"per_sample": blocks.cpu().numpy(), "off_diagonal_max": float(off_diagonal_max)}


class JacobianTask:
    def __init__(self, compute: Callable[[], torch.Tensor], full: bool) -> None:
        self.compute, self.full = compute, full
        self.jacobian: torch.Tensor | None = None

    def step(self) -> None:
        self.jacobian = self.compute()

    def output(self) -> dict[str, Any]:
        assert self.jacobian is not None  # output() follows the timed step() calls
        shape = "x".join(map(str, self.jacobian.shape))
        with torch.no_grad():
            if self.full:
                found = full_jacobian_summary(self.jacobian)
            else:
                found = {"per_sample": self.jacobian.cpu().numpy()}
        return {**found, "extra": {"jacobian_shape": shape,
                                   "jacobian_entries": self.jacobian.numel(),
                                   **fingerprint(found["per_sample"])}}


def make_task(case: dict, variant: str, device: TorchDevice,
              inputs: dict[str, np.ndarray]) -> JacobianTask:
    net = build_net(inputs, device.handle)
    t = torch.from_numpy(inputs["t"]).to(device.handle)
    if variant == "as-written":
        # The seed's call: default vectorize=False, one backward pass per output element.
        return JacobianTask(lambda: torch.autograd.functional.jacobian(lambda x: net(x), t),
                            full=True)
    # One sample is a (1,) vector here; nn.Linear accepts unbatched input.
    if variant == "per-sample":
        per_sample = torch.func.vmap(torch.func.jacrev(net))
        return JacobianTask(lambda: per_sample(t), full=False)
    if variant == "per-sample-graph":
        require_cuda(device, variant)
        per_sample = torch.func.vmap(torch.func.jacrev(net))
        # Captured by the first call, the cold one, whose time then includes the capture.
        return JacobianTask(CapturedOnFirstCall(lambda: per_sample(t), device.handle),
                            full=False)
    if variant == "per-sample-fwd":
        per_sample = torch.func.vmap(torch.func.jacfwd(net))
        return JacobianTask(lambda: per_sample(t), full=False)
    raise ValueError(f"unknown jacobian variant {variant!r}")

"""torch.matmul on resident tensors; tf32/bf16 are opt-in precision variants.

fp32-graph: the same call captured once in a CUDA graph; each call replays it, which skips
torch's dispatch and cuBLAS's host-side set-up (the part of a small call that is not the kernel).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from harness.backends.torch.device import TorchDevice, require_cuda
from harness.backends.torch.graphs import CapturedOnFirstCall

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
          "fp32-graph": torch.float32}


class MatmulTask:
    def __init__(self, a: torch.Tensor, b: torch.Tensor) -> None:
        self.a, self.b = a, b
        self.c: torch.Tensor | None = None

    def step(self) -> None:
        self.c = torch.matmul(self.a, self.b)

    def output(self) -> dict[str, Any]:
        assert self.c is not None  # output() follows the timed step() calls
        return {"c": self.c.float().cpu().numpy()}


class GraphMatmulTask(MatmulTask):
    """One matmul captured in a CUDA graph by the first call (so the capture is in the cold
    call's time), then replayed; the product lands in the graph's static output."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, device: TorchDevice) -> None:
        super().__init__(a, b)
        self.graph = CapturedOnFirstCall(lambda: torch.matmul(a, b), device.handle)

    def step(self) -> None:
        self.c = self.graph()


def make_task(case: dict, variant: str, device: TorchDevice, inputs: dict[str, np.ndarray]):
    # Plain fp32 must not silently use TF32 tensor cores; only the tf32 variant allows it.
    torch.backends.cuda.matmul.allow_tf32 = variant == "tf32"
    dtype = DTYPES[variant]
    a = torch.from_numpy(inputs["a"]).to(device.handle, dtype)
    b = torch.from_numpy(inputs["b"]).to(device.handle, dtype)
    if variant == "fp32-graph":
        require_cuda(device, variant)
        return GraphMatmulTask(a, b, device)
    return MatmulTask(a, b)

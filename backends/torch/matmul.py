"""torch.matmul on resident tensors; tf32/bf16 are opt-in precision variants."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from backends.torch.device import TorchDevice

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}


class MatmulTask:
    def __init__(self, a: torch.Tensor, b: torch.Tensor) -> None:
        self.a, self.b = a, b
        self.c: torch.Tensor | None = None

    def step(self) -> None:
        self.c = torch.matmul(self.a, self.b)

    def output(self) -> dict[str, Any]:
        return {"c": self.c.float().cpu().numpy()}


def make_task(case: dict, variant: str, device: TorchDevice, inputs: dict[str, np.ndarray]):
    # Plain fp32 must not silently use TF32 tensor cores; only the tf32 variant allows it.
    torch.backends.cuda.matmul.allow_tf32 = variant == "tf32"
    dtype = DTYPES[variant]
    a = torch.from_numpy(inputs["a"]).to(device.handle, dtype)
    b = torch.from_numpy(inputs["b"]).to(device.handle, dtype)
    return MatmulTask(a, b)

"""softmax in torch, on whatever device the harness opened (device.handle is a torch.device)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class SoftmaxTask:
    def __init__(self, x: torch.Tensor) -> None:
        self.x = x
        self.y: torch.Tensor | None = None

    def step(self) -> None:
        self.y = torch.softmax(self.x, dim=1)

    def output(self) -> dict[str, Any]:
        return {"y": self.y.cpu().numpy()}


def make_task(case: dict, variant: str, device: Any, inputs: dict[str, np.ndarray]) -> SoftmaxTask:
    return SoftmaxTask(torch.from_numpy(inputs["x"]).to(device.handle))

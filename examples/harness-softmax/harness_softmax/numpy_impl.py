"""softmax in numpy: the CPU baseline."""

from __future__ import annotations

from typing import Any

import numpy as np


class SoftmaxTask:
    def __init__(self, x: np.ndarray) -> None:
        self.x = x
        self.y: np.ndarray | None = None

    def step(self) -> None:
        shifted = np.exp(self.x - self.x.max(axis=1, keepdims=True))
        self.y = shifted / shifted.sum(axis=1, keepdims=True)

    def output(self) -> dict[str, Any]:
        return {"y": self.y}


def make_task(case: dict, variant: str, device: Any, inputs: dict[str, np.ndarray]) -> SoftmaxTask:
    return SoftmaxTask(inputs["x"])

"""numpy's `@`: the CPU baseline of seed experiment 4."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.backend import VariantUnavailable
from harness.backends.numpy.device import NumpyDevice


class MatmulTask:
    def __init__(self, a: np.ndarray, b: np.ndarray) -> None:
        self.a, self.b = a, b
        self.c: np.ndarray | None = None

    def step(self) -> None:
        self.c = self.a @ self.b

    def output(self) -> dict[str, Any]:
        return {"c": self.c}


def make_task(case: dict, variant: str, device: NumpyDevice, inputs: dict[str, np.ndarray]):
    if variant != "fp32":
        raise VariantUnavailable(f"numpy has no {variant} matmul")
    return MatmulTask(inputs["a"], inputs["b"])

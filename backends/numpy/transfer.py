"""numpy's `@` on the 200x200 inputs: the CPU baseline the seed compared the GPU against."""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.numpy.device import NumpyDevice
from harness.backend import VariantUnavailable


class MatmulTask:
    def __init__(self, a: np.ndarray, b: np.ndarray) -> None:
        self.a, self.b = a, b
        self.c: np.ndarray | None = None

    def step(self) -> None:
        self.c = self.a @ self.b

    def output(self) -> dict[str, Any]:
        return {"c": self.c}


def make_task(case: dict, variant: str, device: NumpyDevice, inputs: dict[str, np.ndarray]):
    if variant != "matmul-resident":
        # There is no device to copy to: matmul-resident already is numpy's whole story.
        raise VariantUnavailable(f"numpy has no device to copy to; {variant} needs a framework "
                                 "with one (numpy's matmul-resident is the CPU baseline)")
    return MatmulTask(inputs["a"], inputs["b"])

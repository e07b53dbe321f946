"""The multiply-add loop in numpy: the CPU baseline, as written and with out= buffers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from harness.backend import VariantUnavailable
from harness.backends.numpy.device import NumpyDevice


def loop_as_written(a: np.ndarray, b: np.ndarray, iterations: int) -> np.ndarray:
    """The seed's loop verbatim: numpy allocates a temporary and a new result each iteration."""
    result = a * b
    for _ in range(iterations):
        result = result + a * b
    return result


def in_place_runner(a: np.ndarray, b: np.ndarray, iterations: int) -> Callable[[], np.ndarray]:
    """Two buffers allocated once; numpy has no fused multiply-add, so a*b goes to a scratch."""
    result, product = np.empty_like(a), np.empty_like(a)

    def run() -> np.ndarray:
        np.multiply(a, b, out=result)
        for _ in range(iterations):
            np.multiply(a, b, out=product)
            np.add(result, product, out=result)
        return result

    return run


class LoopTask:
    def __init__(self, run: Callable[[], np.ndarray]) -> None:
        self.run = run
        self.result: np.ndarray | None = None

    def step(self) -> None:
        self.result = self.run()

    def output(self) -> dict[str, Any]:
        assert self.result is not None  # output() follows the timed step() calls
        return {"result": self.result,
                "extra": {"device_kind": "cpu", "shape": "x".join(map(str, self.result.shape))}}


def make_task(case: dict, variant: str, device: NumpyDevice,
              inputs: dict[str, np.ndarray]) -> LoopTask:
    a, b, iterations = inputs["a"], inputs["b"], case["iterations"]
    if variant == "as-written":
        return LoopTask(lambda: loop_as_written(a, b, iterations))
    if variant == "in-place":
        return LoopTask(in_place_runner(a, b, iterations))
    raise VariantUnavailable(f"numpy has no {variant} mode: it runs each operation as called")

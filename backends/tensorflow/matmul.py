"""tf.linalg.matmul in eager mode under tf.device; tf32/bf16 are opt-in precision variants."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from harness.backend import VariantUnavailable
from harness.backends.tensorflow.device import TensorFlowDevice

DTYPES = {"fp32": tf.float32, "tf32": tf.float32, "bf16": tf.bfloat16}


class MatmulTask:
    def __init__(self, a: tf.Tensor, b: tf.Tensor, placement: str) -> None:
        self.a, self.b, self.placement = a, b, placement
        self.c: tf.Tensor | None = None

    def step(self) -> None:
        with tf.device(self.placement):
            self.c = tf.linalg.matmul(self.a, self.b)

    def output(self) -> dict[str, Any]:
        return {"c": tf.cast(self.c, tf.float32).numpy()}


def make_task(case: dict, variant: str, device: TensorFlowDevice, inputs: dict[str, np.ndarray]):
    if variant not in DTYPES:
        raise VariantUnavailable(f"{variant} replays a PyTorch CUDA graph; TensorFlow has no "
                                 "such call (its graphs are tf.function and XLA)")
    tf.config.experimental.enable_tensor_float_32_execution(variant == "tf32")
    with tf.device(device.handle):
        # tf.identity under the scope makes the copy to the device happen here, not in step().
        a = tf.identity(tf.cast(tf.constant(inputs["a"]), DTYPES[variant]))
        b = tf.identity(tf.cast(tf.constant(inputs["b"]), DTYPES[variant]))
    return MatmulTask(a, b, device.handle)

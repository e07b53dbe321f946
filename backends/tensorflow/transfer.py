"""TensorFlow: 200x200 matmul resident vs copied every call, and host<->device copy bandwidth.

TensorFlow has no user-facing pinned host memory (it stages through its own allocators), so
only the pageable variants run; the pinned ones are `unavailable` with that reason.
Copies are forced with tf.identity under a tf.device scope: the eager runtime copies an input
that lives on another device each time and caches no mirror (its default mirroring policy is
none), so every step() moves the bytes again. d2h lands in a TF host tensor rather than going
through .numpy(), which always adds a second, host-side copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from harness.backend import VariantUnavailable
from harness.backends.tensorflow.device import TensorFlowDevice
from harness.backends.tensorflow.matmul import MatmulTask as ResidentMatmulTask

HOST = "/CPU:0"


class CopyMatmulTask:
    """Host numpy in, host numpy out: each step() converts, copies, multiplies and fetches.

    On the cpu device nothing crosses a bus; what remains is numpy<->tensor conversion
    (.numpy() always returns a fresh copy).
    """

    def __init__(self, a_host: np.ndarray, b_host: np.ndarray, placement: str) -> None:
        self.a_host, self.b_host, self.placement = a_host, b_host, placement
        self.c_host: np.ndarray | None = None

    def step(self) -> None:
        with tf.device(self.placement):
            a = tf.convert_to_tensor(self.a_host)
            b = tf.convert_to_tensor(self.b_host)
            c = tf.linalg.matmul(a, b)
        self.c_host = c.numpy()  # waits for the result, as a user's fetch does

    def output(self) -> dict[str, Any]:
        return {"c": self.c_host}


class CopyTask:
    """Copy one buffer to `placement` per step() with tf.identity of a tensor living elsewhere."""

    def __init__(self, source: tf.Tensor, placement: str) -> None:
        self.source, self.placement = source, placement
        self.copied: tf.Tensor | None = None

    def step(self) -> None:
        with tf.device(self.placement):
            self.copied = tf.identity(self.source)

    def output(self) -> dict[str, Any]:
        # Checked here, after the clock, so the timed calls (the cold one included) stay as is.
        assert self.copied is not None  # output() follows the timed step() calls
        require_on(self.copied, self.placement)
        return {"copied": self.copied.numpy()}


def place(tensor_or_array: Any, placement: str) -> tf.Tensor:
    """A tensor on `placement`, refusing a silent fallback (soft placement) to another device."""
    with tf.device(placement):
        tensor = tf.identity(tensor_or_array)
    require_on(tensor, placement)
    return tensor


def require_on(tensor: tf.Tensor, placement: str) -> None:
    """Raise if the tensor's memory is not where the copy was meant to put it."""
    wanted = placement.strip("/").upper()  # "GPU:0"
    where = tensor.backing_device
    if not where.upper().endswith(wanted):
        raise RuntimeError(f"tensorflow placed the copy on {where}, not {placement}")


def bandwidth_task(variant: str, device: TensorFlowDevice, buffer: np.ndarray) -> CopyTask:
    """The copy task of one bandwidth variant, its source prepared outside the clock."""
    if variant.endswith("-pinned"):
        raise VariantUnavailable("tensorflow exposes no pinned host buffers")
    if not device.is_gpu:
        raise VariantUnavailable(f"variant {variant} needs a GPU device")
    if variant.startswith("h2d"):
        return CopyTask(place(buffer, HOST), device.handle)
    return CopyTask(place(buffer, device.handle), HOST)


def make_task(case: dict, variant: str, device: TensorFlowDevice,
              inputs: dict[str, np.ndarray]):
    tf.config.experimental.enable_tensor_float_32_execution(False)
    if variant == "matmul-resident":
        a, b = place(inputs["a"], device.handle), place(inputs["b"], device.handle)
        return ResidentMatmulTask(a, b, device.handle)
    if variant == "matmul-copy":
        return CopyMatmulTask(inputs["a"], inputs["b"], device.handle)
    if variant == "matmul-overlap":
        raise VariantUnavailable("tensorflow exposes no user streams or pinned host buffers "
                                 "to overlap copies with (tf.data's prefetch_to_device is the "
                                 "closest analogue)")
    return bandwidth_task(variant, device, inputs["buffer"])

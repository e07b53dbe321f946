"""The tiny MLP's Jacobian in TensorFlow: eager tape.jacobian vs batch_jacobian / forward mode.

as-written keeps GradientTape.jacobian's default experimental_use_pfor=True (TF vectorises the
per-output loop with pfor, as a user gets it without asking); set it to False and TF runs a
while loop of 400*batch gradients instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from harness.backend import VariantUnavailable
from harness.backends.tensorflow.device import TensorFlowDevice
from harness.workloads.jacobian import fingerprint


class TanhMlp(tf.Module):
    """x @ w + b layers with the shared (in, out) weights: the same net as torch's Sequential."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.layers = [(tf.Variable(weights[f"w{i}"]), tf.Variable(weights[f"b{i}"]))
                       for i in (1, 2, 3)]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        for index, (weight, bias) in enumerate(self.layers):
            x = tf.matmul(x, weight) + bias
            if index < len(self.layers) - 1:
                x = tf.tanh(x)
        return x


def full_jacobian(net: TanhMlp, t: tf.Tensor) -> tf.Tensor:
    """The seed's question in TF, eager: d net(t) / d t, shape (batch, 400, batch, 1)."""
    with tf.GradientTape() as tape:
        tape.watch(t)
        y = net(t)
    return tape.jacobian(y, t)


def per_sample_reverse(net: TanhMlp) -> Callable[[tf.Tensor], tf.Tensor]:
    """batch_jacobian in a tf.function: (batch, 400, 1), reverse mode."""

    @tf.function
    def jacobian(t: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = net(t)
        return tape.batch_jacobian(y, t)

    return jacobian


def per_sample_forward(net: TanhMlp) -> Callable[[tf.Tensor], tf.Tensor]:
    """Forward mode in a tf.function: one JVP per input coordinate (here one), (batch, 400, 1).

    A tangent that is 1 in coordinate j for every sample gives each sample's own column j,
    because no sample's output depends on another's input (what vmap(jacfwd) relies on too).
    """

    @tf.function
    def jacobian(t: tf.Tensor) -> tf.Tensor:
        columns = []
        for coordinate in range(t.shape[1]):
            tangent = tf.one_hot(tf.fill([tf.shape(t)[0]], coordinate), t.shape[1], dtype=t.dtype)
            with tf.autodiff.ForwardAccumulator(primals=t, tangents=tangent) as accumulator:
                y = net(t)
            columns.append(accumulator.jvp(y))
        return tf.stack(columns, axis=-1)

    return jacobian


def full_jacobian_summary(jacobian: tf.Tensor) -> dict[str, Any]:
    """Diagonal blocks (batch,400,1) and max |entry| elsewhere, reduced on the device.

    Why not ship it whole: at batch 1000 the (batch,400,batch,1) Jacobian is 1.6 GB.
    """
    batch = jacobian.shape[0]
    samples = tf.range(batch)[:, None]
    # J[b, :, b, :] for every b: gather along axis 2 with the batch axis shared.
    blocks = tf.gather(jacobian, samples, axis=2, batch_dims=1)[:, :, 0, :]
    on_diagonal = tf.cast(tf.eye(batch), tf.bool)[:, None, :, None]
    off_diagonal = tf.where(on_diagonal, tf.zeros_like(jacobian), jacobian)
    off_diagonal_max = tf.maximum(tf.reduce_max(off_diagonal), -tf.reduce_min(off_diagonal))
    return {"per_sample": blocks.numpy(), "off_diagonal_max": float(off_diagonal_max)}


class JacobianTask:
    def __init__(self, compute: Callable[[], tf.Tensor], placement: str, full: bool) -> None:
        self.compute, self.placement, self.full = compute, placement, full
        self.jacobian: tf.Tensor | None = None

    def step(self) -> None:
        with tf.device(self.placement):
            self.jacobian = self.compute()

    def output(self) -> dict[str, Any]:
        assert self.jacobian is not None  # output() follows the timed step() calls
        with tf.device(self.placement):
            found = (full_jacobian_summary(self.jacobian) if self.full
                     else {"per_sample": self.jacobian.numpy()})
        return {**found, "extra": {"jacobian_shape": "x".join(map(str, self.jacobian.shape)),
                                   "jacobian_entries": int(tf.size(self.jacobian)),
                                   **fingerprint(found["per_sample"])}}


def make_task(case: dict, variant: str, device: TensorFlowDevice,
              inputs: dict[str, np.ndarray]) -> JacobianTask:
    placement = device.handle
    with tf.device(placement):
        net = TanhMlp(inputs)
        t = tf.identity(tf.constant(inputs["t"]))
    if variant == "as-written":
        return JacobianTask(lambda: full_jacobian(net, t), placement, full=True)
    if variant == "per-sample":
        jacobian = per_sample_reverse(net)
        return JacobianTask(lambda: jacobian(t), placement, full=False)
    if variant == "per-sample-fwd":
        jacobian = per_sample_forward(net)
        return JacobianTask(lambda: jacobian(t), placement, full=False)
    if variant == "per-sample-graph":
        raise VariantUnavailable("per-sample-graph replays a PyTorch CUDA graph; TensorFlow's "
                                 "per-sample form already runs as one tf.function graph")
    raise ValueError(f"unknown jacobian variant {variant!r}")

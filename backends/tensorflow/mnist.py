"""Seed 3 in TensorFlow as the seed wrote it: a Keras Sequential, compile("adam"), fit, evaluate.

Since issue 18 the MNIST workloads list `keras-tensorflow` (backends/keras/training.py, the
same Keras code as keras-jax and keras-torch) instead of this module; `--framework tensorflow`
still runs it, so older runs and command lines stay reproducible. Its preloaded variant is the
TF-native one (tf.function + GradientTape), which the shared Keras code has no equivalent of.

as-written: model.fit under `with tf.device(...)`, softmax output, sparse categorical CE,
            metrics=["accuracy"]; Keras 3's default jit_compile="auto" (XLA when a GPU is visible).
preloaded: the whole set as tensors on the device once; a tf.function train step gathers each
           batch there (GradientTape + the Keras Adam optimizer).
compiled:  as-written with model.compile(jit_compile=True): XLA.
steps-per-execution: as-written with model.compile(steps_per_execution=N): fit runs N steps per
           call of its tf.function, one host round trip per N batches instead of per batch.
compiled-steps: both: jit_compile=True and steps_per_execution=N.
One step() is one epoch: fit(epochs=1, shuffle=False) over the shared numpy order, so TensorFlow
and torch see the same batches.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from backends.keras.model import build_model, epoch_extra, test_accuracy
from backends.tensorflow.device import TensorFlowDevice
from harness.backend import VariantUnavailable
from workloads.mnist import STEPS_PER_EXECUTION, TORCH_ONLY_VARIANTS

SEED = 0
XLA_ERRORS = (tf.errors.NotFoundError, tf.errors.UnimplementedError,
              tf.errors.InvalidArgumentError, tf.errors.InternalError)


class KerasTraining:
    """One Keras model on one device; step() trains one epoch, output() evaluates."""

    def __init__(self, model: keras.Sequential, inputs: dict[str, Any],
                 device: TensorFlowDevice, batch_size: int) -> None:
        self.model, self.inputs, self.placement = model, inputs, device.handle
        self.batch_size = batch_size
        self.epoch = 0
        self.train_loss = float("nan")

    def epoch_order(self) -> np.ndarray:
        orders = self.inputs["orders"]
        return orders[self.epoch % len(orders)]

    def step(self) -> None:
        raise NotImplementedError

    def test_accuracy(self) -> float:
        with tf.device(self.placement):
            return test_accuracy(self.model, self.inputs)

    def extra(self) -> dict[str, Any]:
        return {}

    def output(self) -> dict[str, Any]:
        return {"extra": {
            **epoch_extra(self.model, self.inputs, self.batch_size, self.epoch,
                          self.train_loss, self.test_accuracy()),
            **self.extra(),
        }}


class FitTraining(KerasTraining):
    """The seed's loop: model.fit on numpy arrays; one fit call per epoch."""

    def step(self) -> None:
        order = self.epoch_order()
        with tf.device(self.placement):
            # The gather is the shuffle fit would do itself; shuffle=False keeps our order.
            history = self.model.fit(self.inputs["x_train"][order], self.inputs["y_train"][order],
                                     batch_size=self.batch_size, epochs=1, shuffle=False,
                                     verbose=0)
        self.train_loss = history.history["loss"][-1]
        self.epoch += 1

    def extra(self) -> dict[str, Any]:
        return {"jit_compile": bool(self.model.jit_compile),
                "steps_per_execution": int(self.model.steps_per_execution or 1)}


class XlaFitTraining(FitTraining):
    """as-written with jit_compile=True; an XLA failure on the first epoch means unavailable."""

    def step(self) -> None:
        if self.epoch > 0:
            return super().step()
        try:
            return super().step()
        except XLA_ERRORS as exc:
            message = str(exc).strip()
            if "xla" not in message.lower() and "jit" not in message.lower():
                raise  # not a missing compiler: a real error
            first_line = (message.splitlines() or [""])[0][:300]
            raise VariantUnavailable(f"XLA (jit_compile=True) failed here: "
                                     f"{type(exc).__name__}: {first_line}") from exc


class PreloadedTraining(KerasTraining):
    """Tensors on the device once; a tf.function step gathers its batch on the device."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with tf.device(self.placement):
            # tf.identity under the scope makes the copy to the device happen here, untimed.
            self.x_train = tf.identity(tf.constant(self.inputs["x_train"]))
            self.y_train = tf.identity(tf.constant(self.inputs["y_train"]))
            self.orders = tf.identity(tf.constant(self.inputs["orders"]))
            self.loss_sum = tf.Variable(0.0)
            self.samples_seen = tf.Variable(0.0)
            self.optimizer = keras.optimizers.Adam()
            # Variables must exist before tracing: tf.function may not create them later.
            self.optimizer.build(self.model.trainable_variables)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy()
        # One signature for every batch, so the short last batch does not retrace.
        self.train_step = tf.function(
            self._train_step, input_signature=[tf.TensorSpec([None], tf.int64)])

    def _train_step(self, batch_index: tf.Tensor) -> None:
        images = tf.gather(self.x_train, batch_index)
        labels = tf.gather(self.y_train, batch_index)
        with tf.GradientTape() as tape:
            loss = self.loss_fn(labels, self.model(images, training=True))
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        batch = tf.cast(tf.shape(batch_index)[0], tf.float32)
        self.loss_sum.assign_add(loss * batch)
        self.samples_seen.assign_add(batch)

    def step(self) -> None:
        with tf.device(self.placement):
            order = self.orders[self.epoch % self.orders.shape[0]]
            self.loss_sum.assign(0.0)
            self.samples_seen.assign(0.0)
            for start in range(0, int(order.shape[0]), self.batch_size):
                self.train_step(order[start:start + self.batch_size])
        self.epoch += 1

    def output(self) -> dict[str, Any]:
        self.train_loss = float(self.loss_sum.numpy() / max(float(self.samples_seen.numpy()), 1))
        return super().output()


def compiled_model(inputs: dict[str, Any], jit_compile: bool | str,
                   steps_per_execution: int = 1) -> keras.Sequential:
    """The seed's model.compile; jit_compile is Keras' default "auto" unless asked."""
    model = build_model(tuple(inputs["hidden_units"]), inputs["dropout"])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=jit_compile,
                  steps_per_execution=steps_per_execution)
    if jit_compile is True and not model.jit_compile:
        raise VariantUnavailable("Keras turned jit_compile off: a layer does not support XLA")
    return model


def make_task(case: dict, variant: str, device: TensorFlowDevice,
              inputs: dict[str, Any]) -> KerasTraining:
    if variant in TORCH_ONLY_VARIANTS:
        raise VariantUnavailable(f"{variant} is a PyTorch technique; Keras' counterparts for a "
                                 "host-bound step are compiled (XLA) and steps-per-execution")
    keras.utils.set_random_seed(SEED)  # same initial weights and dropout masks on every run
    batch_size = case["batch_size"]
    with tf.device(device.handle):  # variables are created on the device, as in the seed
        if variant == "as-written":
            return FitTraining(compiled_model(inputs, "auto"), inputs, device, batch_size)
        if variant == "compiled":
            return XlaFitTraining(compiled_model(inputs, True), inputs, device, batch_size)
        if variant == "steps-per-execution":
            model = compiled_model(inputs, "auto", STEPS_PER_EXECUTION)
            return FitTraining(model, inputs, device, batch_size)
        if variant == "compiled-steps":
            model = compiled_model(inputs, True, STEPS_PER_EXECUTION)
            return XlaFitTraining(model, inputs, device, batch_size)
        model = build_model(tuple(inputs["hidden_units"]), inputs["dropout"])
        return PreloadedTraining(model, inputs, device, batch_size)

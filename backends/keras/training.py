"""Seed 3 as the seed wrote it, on any Keras 3 backend: compile("adam"), fit, evaluate.

as-written: model.fit on host numpy arrays under keras.device(...), softmax output, sparse
            categorical CE, metrics=["accuracy"], Keras' default jit_compile="auto" (on jax:
            jitted; on torch: eager; on tensorflow: XLA only when a GPU is visible).
preloaded:  the same fit on backend tensors put on the device once (Keras slices its batches
            from them there: jax arrays, torch tensors or tf tensors).
compiled:   as-written with jit_compile=True (jax: jit, tensorflow: XLA, torch: torch.compile).
One step() is one epoch: fit(epochs=1, shuffle=False) over the shared numpy order, so every
framework sees the same batches. Placement is Keras' own device scope, which each backend maps
to its mechanism (jax.default_device, the torch device Keras creates tensors on, tf.device).

TensorFlow placement, as the seed wrote it: the model is built and compiled, and every fit
and evaluation runs, inside `with tf.device(...)` (on Keras' TensorFlow backend keras.device
*is* tf.device): variables are created on the cell's device, and with jit_compile="auto" Keras
turns XLA on only when a GPU is visible. The `tensorflow` framework runs this same module on
MNIST (its own copy, backends/tensorflow/mnist.py, is retired; its TF-native preloaded step,
tf.function + GradientTape, went with it: preloaded here is fit on device tensors).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import keras
import numpy as np

from harness.backend import StepMarks, VariantUnavailable
from harness.backends.keras.model import build_model, epoch_extra, test_accuracy
from harness.workloads.mnist import (
    ONE_STEP_PER_CALL,
    STEPS_PER_EXECUTION,
    DigitsInputs,
    MnistInputs,
)

SEED = 0  # seeds every initializer and dropout layer: the same model on every run
# Words in a first-epoch failure that mean "the compiler is missing or refuses", not a bug.
COMPILER_WORDS = ("xla", "jit", "compile", "inductor", "dynamo", "triton")


def keras_device_name(device: Any) -> Any:
    """What keras.device() takes for this cell's device, on every backend.

    'cpu', not 'cpu:0': Keras' torch backend moves each new variable with .to(device), and torch
    treats 'cpu:0' as another device than 'cpu', so the variable stops being a Parameter. On
    JAX the opened jax.Device itself, so Keras places on exactly the device the cell opened.
    """
    if device.name == "cpu":
        return "cpu"
    if keras.backend.backend() == "jax":
        return device.handle
    return "gpu:" + device.name.split(":", 1)[1]


class StepMarksCallback(keras.callbacks.Callback):
    """Tells the harness where each step (or steps_per_execution group) of fit starts.

    Only on_train_batch_begin is overridden: a callback with its own on_train_batch_end would
    turn off Keras' asynchronous batch-end dispatch and so change what fit costs.
    """

    def __init__(self, training: KerasTraining) -> None:
        super().__init__()
        self.training = training

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self.training.step_marks.before_step(batch, self.training.current_output)


class KerasTraining:
    """One Keras model on one device; step() trains one epoch, output() evaluates."""

    def __init__(self, model: keras.Sequential, inputs: MnistInputs, device: Any,
                 batch_size: int) -> None:
        self.model, self.inputs, self.device = model, inputs, device
        self.batch_size = batch_size
        self.epoch = 0
        self.train_loss = float("nan")
        # The harness times blocks of an epoch's steps through these (harness.backend).
        self.steps_per_call = -(-len(inputs["y_train"]) // batch_size)
        self.step_marks = StepMarks()
        self.callbacks = [StepMarksCallback(self)]

    @contextmanager
    def placed(self) -> Iterator[None]:
        with keras.device(keras_device_name(self.device)):
            yield

    def epoch_data(self) -> tuple[Any, Any]:
        orders = self.inputs["orders"]
        order = orders[self.epoch % len(orders)]
        # The gather is the shuffle fit would do itself; shuffle=False keeps our order.
        return self.inputs["x_train"][order], self.inputs["y_train"][order]

    def step(self) -> list[Any]:
        """One epoch; returns the weights, which a sync='output' framework (keras-jax) blocks
        on; device-synchronised backends ignore it."""
        images, labels = self.epoch_data()
        with self.placed():
            history = self.model.fit(images, labels, batch_size=self.batch_size, epochs=1,
                                     shuffle=False, verbose=0, callbacks=self.callbacks)
        self.train_loss = history.history["loss"][-1]
        self.epoch += 1
        return self.current_output()

    def current_output(self) -> list[Any]:
        """The trained weights as of now, for a sync='output' framework to block on.

        Keras' JAX trainer keeps its state apart from the variables during fit;
        jax_state_sync (the hook Keras offers callbacks) writes it back first. A no-op after
        fit, which syncs itself.
        """
        if keras.backend.backend() == "jax":
            self.model.jax_state_sync()
        return [variable.value for variable in self.model.trainable_variables]

    def test_accuracy(self) -> float:
        with self.placed():
            return test_accuracy(self.model, self.inputs)

    def output(self) -> dict[str, dict[str, object]]:
        return {"extra": {
            **epoch_extra(self.model, self.inputs, self.batch_size, self.epoch,
                          self.train_loss, self.test_accuracy()),
            "keras_backend": keras.backend.backend(),
            # What Keras settled on ("auto" resolves at compile): XLA/jit on or off, and how
            # many steps each call into the backend runs.
            "jit_compile": bool(self.model.jit_compile),
            "steps_per_execution": int(self.model.steps_per_execution or 1),
        }}


class PreloadedTraining(KerasTraining):
    """fit on backend tensors already on the device; each epoch's order gathered there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with self.placed():
            self.x_train = keras.ops.convert_to_tensor(self.inputs["x_train"])
            self.y_train = keras.ops.convert_to_tensor(self.inputs["y_train"].astype(np.int32))
            self.orders = keras.ops.convert_to_tensor(self.inputs["orders"].astype(np.int32))

    def epoch_data(self) -> tuple[Any, Any]:
        order = self.orders[self.epoch % len(self.inputs["orders"])]
        with self.placed():
            return (keras.ops.take(self.x_train, order, axis=0),
                    keras.ops.take(self.y_train, order, axis=0))


class CompiledTraining(KerasTraining):
    """as-written with jit_compile=True; a compiler failing in the first epoch: unavailable."""

    def step(self) -> list[Any]:
        if self.epoch > 0:
            return super().step()
        try:
            return super().step()
        except Exception as exc:  # backends raise different types; the message tells
            message = str(exc).strip()
            if not any(word in message.lower() for word in COMPILER_WORDS):
                raise
            first_line = (message.splitlines() or [""])[0][:300]
            raise VariantUnavailable(f"jit_compile=True failed on Keras' "
                                     f"{keras.backend.backend()} backend: "
                                     f"{type(exc).__name__}: {first_line}") from exc


def check_compile_possible(device: Any) -> None:
    """torch.compile (Keras' jit_compile on torch) needs a C++ compiler for CPU code."""
    if keras.backend.backend() != "torch" or getattr(device, "is_gpu", False):
        return
    if not any(shutil.which(name) for name in ("g++", "c++", "clang++")):
        raise VariantUnavailable("jit_compile=True on Keras' torch backend is torch.compile, "
                                 "which needs a C++ compiler on CPU; none found")


def compiled_model(inputs: DigitsInputs, jit_compile: bool | str,
                   steps_per_execution: int = 1) -> keras.Sequential:
    """The seed's model.compile; jit_compile is Keras' default "auto" unless asked, and
    steps_per_execution > 1 runs that many steps per call into the backend (fewer dispatches)."""
    model = build_model(tuple(inputs["hidden_units"]), inputs["dropout"], seed=SEED)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=jit_compile,
                  steps_per_execution=steps_per_execution)
    if jit_compile is True and not model.jit_compile:
        raise VariantUnavailable("Keras turned jit_compile off: a layer does not support it")
    return model


TRAININGS = {"as-written": KerasTraining, "preloaded": PreloadedTraining,
             "compiled": CompiledTraining, "steps-per-execution": KerasTraining,
             "compiled-steps": CompiledTraining}
JIT_VARIANTS = ("compiled", "compiled-steps")
MULTI_STEP_VARIANTS = ("steps-per-execution", "compiled-steps")


def make_task(case: dict, variant: str, device: Any, inputs: MnistInputs) -> KerasTraining:
    """The same task on every backend; the framework's device module chose the backend."""
    if variant not in TRAININGS:  # torch's own step variants (CUDA graphs, fused Adam)
        raise VariantUnavailable(f"variant {variant} is written for native torch, not Keras")
    if variant in MULTI_STEP_VARIANTS and keras.backend.backend() == "torch":
        raise VariantUnavailable(ONE_STEP_PER_CALL)  # declared too; Keras would raise in fit
    if variant in JIT_VARIANTS:
        check_compile_possible(device)
    jit_compile: bool | str = True if variant in JIT_VARIANTS else "auto"
    steps = STEPS_PER_EXECUTION if variant in MULTI_STEP_VARIANTS else 1
    with keras.device(keras_device_name(device)):  # variables are created on the device
        model = compiled_model(inputs, jit_compile, steps)
    return TRAININGS[variant](model, inputs, device, case["batch_size"])


def step_features(step: Any, variant: str, inputs: Any,
                  seconds_per_call: float | None) -> dict[str, Any]:
    """The features pass of a CPU case (harness/run/casepasses.py features_pass), by the
    backend Keras runs on (backends/keras/features.py; docs/predict.md)."""
    from harness.backends.keras.features import step_features as by_backend  # noqa: PLC0415

    return by_backend(step, variant, seconds_per_call)

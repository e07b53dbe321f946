"""The features pass of a Keras MNIST cell (backends/keras/training.py step_features), by the
backend Keras runs on.

- **torch** (keras-torch): torch's recorder (backends/torch/features.py) around the first
  steps of an epoch of `fit`, so the ops are the ones Keras' layers, loss and optimizer
  dispatch, and the step's time outside them (Keras' own Python: its fit loop, callbacks,
  layer calls) is the record's outside_ops_s (the time between the recorded ops, less the
  recorder's own cost between two ops), which the model adds to the host work for
  keras-torch (harness/predict/model.py).
- **jax** (keras-jax): Keras' own jitted train_step, reached through the model's
  train_function as fit calls it (a spy records its arguments' shapes and times the call),
  compiled again from `model.train_step` for its program (backends/jax/features.py); the fit
  loop's own host work timed with the step stubbed out.
- TensorFlow cells never get here (harness/run/casepasses.py: no profile can price them).
"""

from __future__ import annotations

import time
from typing import Any

import keras
import numpy as np

from harness.backend import FEATURES_PART_STEPS

FEATURES_KEY, STEPS_KEY, REASON_KEY, HOST_SPEED_KEY = (
    "step_features", "step_features_steps", "step_features_reason", "host_speed")
# Variants whose step runs eagerly on Keras' torch backend (jit_compile: torch.compile).
EAGER_TORCH = ("as-written", "preloaded")


def batch_bytes(task: Any, variant: str) -> tuple[int, str]:
    """(bytes one step copies host->device, how): the batch where fit reads host arrays."""
    if variant not in ("as-written", "steps-per-execution", "compiled", "compiled-steps"):
        return 0, "the training set is resident on the device: 0 per step"
    x_train, y_train = task.inputs["x_train"], task.inputs["y_train"]
    per_sample = int(x_train[0].nbytes) + int(y_train[0].nbytes)
    return per_sample * int(task.batch_size), "one batch's images and labels, copied each step"


def torch_features(step: Any, variant: str, seconds_per_call: float | None) -> dict[str, Any]:
    """keras-torch: torch's recorder around PART_STEPS steps of fit (module docstring)."""
    from harness.backends.torch.features import features_record  # noqa: PLC0415
    from harness.predict.hostspeed import speed_record  # noqa: PLC0415

    if variant not in EAGER_TORCH:
        return {REASON_KEY: f"variant {variant} does not run its step eagerly (torch.compile); "
                            "the features of its as-written step are recorded in that cell"}
    steps = min(FEATURES_PART_STEPS, int(step.steps_per_call))
    per_step = seconds_per_call / step.steps_per_call if seconds_per_call else None
    moved, how = batch_bytes(step.task, variant)
    record = features_record(step.part(steps), step_s=per_step * steps if per_step else None,
                             timed_calls=0, h2d_bytes=moved * steps, h2d_how=how, warmup=0,
                             framework="keras-torch")
    return {FEATURES_KEY: record, STEPS_KEY: steps, HOST_SPEED_KEY: speed_record()}


class Spy:
    """Stands in for a Keras JAX model's train_function: runs the real one, keeps the shapes
    of its first arguments and its last logs, and times each call until it returns."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.seconds: list[float] = []
        self.state: Any = None
        self.data: Any = None
        self.logs: Any = None

    def __call__(self, state: Any, iterator: Any) -> Any:
        import jax  # noqa: PLC0415

        from harness.backends.jax.features import avals  # noqa: PLC0415

        data = next(iterator)
        if self.data is None:
            self.state, self.data = avals(state), avals(data)
        jax.block_until_ready(state)  # every call starts with its inputs ready
        started = time.perf_counter()
        self.logs, state = self.real(state, iter([data]))
        self.seconds.append(time.perf_counter() - started)
        jax.block_until_ready(state)
        return self.logs, state


def jax_features(step: Any, variant: str, seconds_per_call: float | None) -> dict[str, Any]:
    """keras-jax: Keras' jitted train_step (module docstring)."""
    import jax  # noqa: PLC0415

    from harness.backends.jax import features  # noqa: PLC0415

    model = step.task.model
    if not model.jit_compile or model.train_function is None:
        return {REASON_KEY: "Keras runs this model's step eagerly on JAX: no jitted step"}
    real, steps = model.train_function, features.part_steps(step)
    spy = Spy(real)
    model.train_function = spy
    try:
        step.part(steps)()
        logs = spy.logs

        def stub(state: Any, iterator: Any) -> Any:
            next(iterator)  # the batch Keras' iterator makes is the loop's work
            return logs, state

        stamped = features.Stamped(stub)
        model.train_function = stamped
        loop = features.loop_seconds(step, stamped)
    finally:
        model.train_function = real
    if spy.data is None or not spy.seconds:
        return {REASON_KEY: "fit ran no step to record"}
    found = features.program(jax.jit(model.train_step, donate_argnums=0),
                             (spy.state, spy.data))
    device = step.task.device.handle
    return features.with_host_speed(features.features(
        "keras-jax", found, call_here_s=float(np.median(spy.seconds[1:] or spy.seconds)),
        dispatch_here_s=features.null_dispatch_seconds(spy.state, (spy.data,), device),
        tiny_dispatch_here_s=features.tiny_dispatch_seconds(device),
        loop_host_here_s=loop, step_s=features.per_step(step, seconds_per_call),
        h2d=batch_bytes(step.task, variant),
        notes=["the call timed here (call_here_s) is Keras' train_function around its jitted "
               "step"]))


def step_features(step: Any, variant: str, seconds_per_call: float | None) -> dict[str, Any]:
    """The features of a Keras MNIST cell, by backend (module docstring)."""
    backend = keras.backend.backend()
    if backend == "torch":
        return torch_features(step, variant, seconds_per_call)
    if backend == "jax":
        return jax_features(step, variant, seconds_per_call)
    return {REASON_KEY: f"no features recorded on Keras' {backend} backend"}

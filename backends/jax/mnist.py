"""Seed 3 in JAX as its users write it: a jitted training step, optax's Adam, same nets.

The net is the seed's: Flatten -> (Dense relu, Dropout 0.2) per hidden layer -> Dense(10),
logits and softmax cross-entropy (as torch's CrossEntropyLoss), Glorot-uniform weights and zero
biases (Keras' Dense defaults), Adam with its defaults (lr 1e-3). Matmuls ask for float32
(Precision.HIGHEST): JAX's GPU default is TF32-like, the other frameworks train in float32.

as-written: per batch, the host gathers the batch (numpy) and jax.device_put sends it; one
            jitted step (forward, grad, Adam update) per batch, as DataLoader + .to(device).
preloaded:  the set on the device once; the jitted step slices its batch there.
compiled:   the whole epoch is one jitted computation: lax.scan over the batches of the
            preloaded set (no Python, no dispatch per step).
One step() is one epoch over the shared numpy order, so every framework sees the same batches.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np
import optax

from harness.backend import StepMarks, VariantUnavailable
from harness.backends.jax.device import JaxDevice

SEED = 0
EVAL_BATCH = 1000
PIXELS, CLASSES = 28 * 28, 10
HIGHEST = jax.lax.Precision.HIGHEST
Params = list[dict[str, jax.Array]]


class TrainState(TypedDict):
    """What every training step takes and returns: one pytree, jitted and donated whole."""

    params: Params
    opt_state: optax.OptState
    key: jax.Array
    step: jax.Array  # steps so far: folded into the key for a fresh dropout mask per step
    loss_sum: jax.Array  # this epoch's summed loss, on the device (no sync per batch)
    seen: jax.Array  # this epoch's samples


# A task's output: the figures the check and the report read (extra).
Output = dict[str, dict[str, int | float | str]]


def init_params(seed: int, hidden_units: tuple[int, ...]) -> list[dict[str, np.ndarray]]:
    """Glorot-uniform weights in (in, out) layout and zero biases, as Keras' Dense, drawn on
    the host (numpy) and placed by the caller.

    Why not jax.random: each draw is a program XLA compiles in every new process, and the
    threefry bits of 1.8 M weights took 1.4-2.6 s to compile (a jax MNIST worker's first round,
    cpu and cuda:0, on the H100 host and the 2-core VM); the same distribution from numpy costs
    no compile. Initial weights are each framework's own anyway (the check compares accuracy).
    """
    rng = np.random.default_rng(seed)
    widths = (PIXELS, *hidden_units, CLASSES)
    params = []
    for fan_in, fan_out in itertools.pairwise(widths):
        limit = float(np.sqrt(6.0 / (fan_in + fan_out)))
        params.append({"w": rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32),
                       "b": np.zeros(fan_out, np.float32)})
    return params


def forward(params: Params, images: jax.Array, dropout: float,
            key: jax.Array | None) -> jax.Array:
    """Logits; dropout (inverted, as Keras and torch scale) only when a key is given."""
    x = images.reshape(images.shape[0], -1)
    for index, layer in enumerate(params[:-1]):
        x = jax.nn.relu(jnp.dot(x, layer["w"], precision=HIGHEST) + layer["b"])
        if key is not None:
            keep = jax.random.bernoulli(jax.random.fold_in(key, index), 1.0 - dropout, x.shape)
            x = jnp.where(keep, x / (1.0 - dropout), 0.0)
    return jnp.dot(x, params[-1]["w"], precision=HIGHEST) + params[-1]["b"]


def make_train_step(optimizer: optax.GradientTransformation, dropout: float) -> Callable:
    """(state, images, labels) -> state: forward, gradient, Adam update, running loss sum."""

    def loss_fn(params: Params, images: jax.Array, labels: jax.Array, key: jax.Array):
        logits = forward(params, images, dropout, key)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    def train_step(state: TrainState, images: jax.Array, labels: jax.Array) -> TrainState:
        key = jax.random.fold_in(state["key"], state["step"])  # a fresh dropout mask per step
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], images, labels, key)
        updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        return {**state, "params": optax.apply_updates(state["params"], updates),
                "opt_state": opt_state, "step": state["step"] + 1,
                "loss_sum": state["loss_sum"] + loss * labels.shape[0],
                "seen": state["seen"] + labels.shape[0]}

    return train_step


def initial_state(optimizer: optax.GradientTransformation,
                  hidden_units: tuple[int, ...]) -> dict[str, Any]:
    """The state before the first step, all on the host (numpy); the caller places it.

    Why on the host: every jitted or eager JAX call here was a program compiled in every new
    process before the first step (on the VM: Adam's init 0.18 s, the dropout key 0.23 s), in
    every round's worker. Adam's moments and count start at zero: their structure comes from
    tracing optimizer.init abstractly (jax.eval_shape compiles nothing). The key is what
    jax.random.PRNGKey makes with threefry, JAX's default ([0, seed] for a seed below 2**32),
    and PRNGKey itself under any other implementation.
    """
    params = init_params(SEED, hidden_units)
    moments = jax.tree.map(lambda shape: np.zeros(shape.shape, shape.dtype),
                           jax.eval_shape(optimizer.init, params))
    return {"params": params, "opt_state": moments, "key": host_key(SEED + 1),
            "step": np.int32(0), "loss_sum": np.float32(0.0), "seen": np.int32(0)}


def host_key(seed: int) -> np.ndarray | jax.Array:
    """jax.random.PRNGKey(seed), made on the host where the implementation is threefry."""
    implementation = getattr(jax.config, "jax_default_prng_impl", "")  # not in its stubs
    if implementation == "threefry2x32" and 0 <= seed < 2 ** 32:
        return np.array([0, seed], np.uint32)
    return jax.random.PRNGKey(seed)


class JaxTraining:
    """Training state on one device; step() trains one epoch, output() evaluates."""

    def __init__(self, inputs: dict[str, Any], device: JaxDevice, batch_size: int) -> None:
        self.inputs, self.device, self.batch_size = inputs, device, batch_size
        self.epoch = 0
        # The harness times blocks of an epoch's steps through these (harness.backend); a
        # variant whose epoch is one jitted call reports no steps and is timed per epoch.
        self.steps_per_call = -(-len(inputs["y_train"]) // batch_size)
        self.step_marks = StepMarks()
        optimizer = optax.adam(1e-3)
        with jax.default_device(device.handle):
            initial = initial_state(optimizer, tuple(inputs["hidden_units"]))
            self.state: TrainState = jax.device_put(initial, device.handle)
        self.train_step = make_train_step(optimizer, inputs["dropout"])
        # The accuracy check's program is never timed: XLA's GEMM autotuning of it cost 8.7 s
        # of a jax cuda:0 cell's first round on an H200 (its default kernels give the same
        # argmax to within float32 rounding, and the check compares accuracy, not bits).
        self.predict = jax.jit(lambda params, images: jnp.argmax(
            forward(params, images, 0.0, None), axis=1),
            compiler_options={"xla_gpu_autotune_level": 0})

    def order(self) -> np.ndarray:
        orders = self.inputs["orders"]
        return orders[self.epoch % len(orders)]

    def run_epoch(self) -> None:
        raise NotImplementedError

    def current_state(self) -> TrainState:
        """The latest training state: what a block boundary blocks on (JAX has no device sync)."""
        return self.state

    def step(self) -> TrainState:
        """One epoch; returns the training state, which the worker blocks on (sync='output')."""
        self.state = {**self.state, "loss_sum": jnp.zeros((), jnp.float32),
                      "seen": jnp.zeros((), jnp.int32)}
        self.run_epoch()
        self.epoch += 1
        return self.state

    def test_accuracy(self) -> float:
        x_test, y_test = self.inputs["x_test"], self.inputs["y_test"]
        correct = 0
        for start in range(0, len(y_test), EVAL_BATCH):
            images = jax.device_put(x_test[start:start + EVAL_BATCH], self.device.handle)
            predicted = np.asarray(self.predict(self.state["params"], images))
            correct += int(np.sum(predicted == y_test[start:start + EVAL_BATCH]))
        return correct / len(y_test)

    def output(self) -> Output:
        seen = int(self.state["seen"])
        return {"extra": {
            "params": sum(int(leaf.size) for leaf in jax.tree.leaves(self.state["params"])),
            "accuracy": self.test_accuracy(),
            "train_loss": float(self.state["loss_sum"]) / max(seen, 1),
            "steps_per_call": self.steps_per_call,
            "samples_distinct": self.inputs["samples_distinct"],
            "data_source": self.inputs["data_source"],
            "epochs_run": self.epoch,
            "matmul_precision": "highest (float32)",
        }}


class HostBatchTraining(JaxTraining):
    """Batches gathered on the host and sent with device_put, one jitted step per batch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.jitted_step = jax.jit(self.train_step, donate_argnums=0)

    def run_epoch(self) -> None:
        order, x_train, y_train = self.order(), self.inputs["x_train"], self.inputs["y_train"]
        for start in range(0, len(order), self.batch_size):
            self.step_marks.before_step(start // self.batch_size, self.current_state)
            index = order[start:start + self.batch_size]
            images, labels = jax.device_put((x_train[index], y_train[index]), self.device.handle)
            self.state = self.jitted_step(self.state, images, labels)


class PreloadedTraining(JaxTraining):
    """The set and every epoch's order on the device once; the step slices its batch there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.data = jax.block_until_ready(jax.device_put(
            {"x": self.inputs["x_train"], "y": self.inputs["y_train"].astype(np.int32),
             "orders": self.inputs["orders"].astype(np.int32)}, self.device.handle))
        self.gathered_step = jax.jit(self._gathered_step, donate_argnums=0,
                                     static_argnames="size")

    def _gathered_step(self, state: TrainState, data: dict[str, jax.Array],
                       epoch: jax.Array, start: jax.Array, size: int) -> TrainState:
        index = jax.lax.dynamic_slice(data["orders"][epoch], (start,), (size,))
        return self.train_step(state, data["x"][index], data["y"][index])

    def run_epoch(self) -> None:
        samples = len(self.inputs["y_train"])
        epoch = self.epoch % len(self.inputs["orders"])
        for start in range(0, samples, self.batch_size):
            self.step_marks.before_step(start // self.batch_size, self.current_state)
            size = min(self.batch_size, samples - start)  # the short last batch: one retrace
            self.state = self.gathered_step(self.state, self.data, epoch, start, size)


class ScannedEpochTraining(PreloadedTraining):
    """The whole epoch as one jitted computation: lax.scan over the full batches, then the
    short last batch, all inside the same jit (compiled once, in the cold epoch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.jitted_epoch = jax.jit(partial(self._epoch, batch=self.batch_size),
                                    donate_argnums=0)

    def _epoch(self, state: TrainState, data: dict[str, jax.Array], epoch: jax.Array,
               batch: int) -> TrainState:
        order = data["orders"][epoch]
        full = order.shape[0] // batch

        def one_batch(carry: TrainState, index: jax.Array) -> tuple[TrainState, None]:
            return self.train_step(carry, data["x"][index], data["y"][index]), None

        state, _ = jax.lax.scan(one_batch, state, order[:full * batch].reshape(full, batch))
        if order.shape[0] > full * batch:
            rest = order[full * batch:]
            state = self.train_step(state, data["x"][rest], data["y"][rest])
        return state

    def run_epoch(self) -> None:
        epoch = self.epoch % len(self.inputs["orders"])
        self.state = self.jitted_epoch(self.state, self.data, epoch)


TRAININGS = {"as-written": HostBatchTraining, "preloaded": PreloadedTraining,
             "compiled": ScannedEpochTraining}


def make_task(case: dict, variant: str, device: JaxDevice,
              inputs: dict[str, Any]) -> JaxTraining:
    if variant not in TRAININGS:  # torch's or Keras' own step variants
        raise VariantUnavailable(f"variant {variant} is not written for jax (its 'compiled' "
                                 "variant runs the whole epoch as one jitted scan)")
    return TRAININGS[variant](inputs, device, case["batch_size"])


# --- the features pass of a CPU case (harness/run/casepasses.py features_pass) ------------------

def stubbed_loop(step: Any, task: JaxTraining, attribute: str) -> float:
    """Seconds per step of the epoch's loop with the jitted step ATTRIBUTE replaced by a stub
    that returns the state at once (backends/jax/features.py loop_seconds)."""
    from harness.backends.jax.features import Stamped, loop_seconds  # noqa: PLC0415

    real, state = getattr(task, attribute), task.state
    setattr(task, attribute, Stamped(lambda state, *args, **kwargs: state))
    try:
        return loop_seconds(step, getattr(task, attribute))
    finally:
        setattr(task, attribute, real)
        task.state = state


def host_batch_features(step: Any, task: HostBatchTraining,
                        seconds_per_call: float | None) -> dict[str, Any]:
    """as-written: the jitted step of one batch gathered on the host and placed each step."""
    from harness.backends.jax import features  # noqa: PLC0415 - only the features pass

    index = task.order()[:task.batch_size]
    batch = jax.device_put((task.inputs["x_train"][index], task.inputs["y_train"][index]),
                           task.device.handle)
    found = features.program(task.jitted_step, (task.state, *batch))

    def call() -> TrainState:
        task.state = task.jitted_step(task.state, *batch)
        return task.state

    called = features.call_seconds(call)
    dispatch = features.null_dispatch_seconds(task.state, batch, task.device.handle)
    loop = stubbed_loop(step, task, "jitted_step")
    moved = int(batch[0].nbytes) + int(batch[1].nbytes)
    return features.with_host_speed(features.features(
        "jax", found, dispatch_here_s=dispatch, call_here_s=called,
        tiny_dispatch_here_s=features.tiny_dispatch_seconds(task.device.handle),
        loop_host_here_s=loop, step_s=features.per_step(step, seconds_per_call),
        h2d=(moved, "one batch's images and labels, placed with device_put each step")))


def preloaded_features(step: Any, task: PreloadedTraining,
                       seconds_per_call: float | None) -> dict[str, Any]:
    """preloaded: the jitted step slicing its batch from the resident set."""
    from harness.backends.jax import features  # noqa: PLC0415 - only the features pass

    epoch = task.epoch % len(task.inputs["orders"])
    size = task.batch_size
    found = features.program(task.gathered_step, (task.state, task.data, epoch, 0),
                             {"size": size})

    def call() -> TrainState:
        task.state = task.gathered_step(task.state, task.data, epoch, 0, size)
        return task.state

    called = features.call_seconds(call)
    dispatch = features.null_dispatch_seconds(task.state, (task.data, epoch, 0),
                                              task.device.handle)
    loop = stubbed_loop(step, task, "gathered_step")
    return features.with_host_speed(features.features(
        "jax", found, dispatch_here_s=dispatch, call_here_s=called,
        tiny_dispatch_here_s=features.tiny_dispatch_seconds(task.device.handle),
        loop_host_here_s=loop, step_s=features.per_step(step, seconds_per_call),
        h2d=(0, "the training set is resident on the device: 0 per step")))


def step_features(step: Any, variant: str, inputs: Any,
                  seconds_per_call: float | None) -> dict[str, Any]:
    """The features pass of a CPU case (harness/run/casepasses.py features_pass): the jitted
    step's program and host costs (backends/jax/features.py; docs/predict.md)."""
    task = getattr(step, "task", None)
    if isinstance(task, ScannedEpochTraining):
        return {"step_features_reason": "variant compiled runs the epoch as one jitted scan "
                                        "(a loop whose trip count the features do not read); "
                                        "the as-written and preloaded steps are recorded"}
    if isinstance(task, PreloadedTraining):
        return preloaded_features(step, task, seconds_per_call)
    if isinstance(task, HostBatchTraining):
        return host_batch_features(step, task, seconds_per_call)
    return {"step_features_reason": "no jitted step of the JAX MNIST workload to record"}

"""A user's JAX init/apply pair in one cell: ops as written (unjitted), the step jitted, bf16.

The file gives init(seed) -> params (any pytree) and apply(params, *inputs). The shared
weights are the pytree's leaves in tree order; a cell rebuilds the tree's structure with
init(seed) and puts the stored leaves in it. Training: optax Adam on the mean squared error.
bf16: apply runs on bfloat16 copies of the params and inputs and its output is cast back to
float32, so the loss, the gradients (through the casts) and the update stay float32, as
mixed precision keeps its master weights; parts join with '+' ("compiled+bf16").
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from harness.backend import VariantUnavailable
from harness.backends.jax import jaxprflops
from harness.workloads.usermodel import sensitivity
from harness.workloads.usermodel.common import (
    ModelTask,
    add_deterministic,
    forward_variant,
    nested_map,
    user_code,
)
from harness.workloads.usermodel.source import UserCodeError, call_user, load_user_module
from harness.workloads.usermodel.spec import (
    CAPABILITIES,
    KEPT_RESULTS,
    ModelInputs,
    split_parts,
    training_targets,
)

RUNS = frozenset(CAPABILITIES["jax"].variants)

# The CPU reference is float32; JAX's GPU default for float32 matmuls is TF32-like.
jax.config.update("jax_default_matmul_precision", "highest")


def build(path: str, seed: int) -> Any:
    user = load_user_module(path)
    return call_user(path, "init(seed)", user.init, seed)


def weight_arrays(params: Any) -> dict[str, np.ndarray]:
    return {f"w{index:03d}": np.asarray(leaf) for index, leaf in
            enumerate(jax.tree_util.tree_leaves(params))}


def to_numpy(value: Any) -> Any:
    return nested_map(lambda v: np.asarray(v, dtype=np.float64), value)


def make_task(case: dict, variant: str, device: Any, inputs: ModelInputs,
              dtype: str = "float32", keep: int | None = None) -> ModelTask:
    with user_code(inputs["model"], f"preparing {variant}"):
        forward = forward_variant(variant, ("bf16",))
        return add_deterministic(_make_task(variant, device, inputs, dtype, keep), inputs,
                                 lambda forward_inputs: _make_task(forward, device,
                                                                   forward_inputs, dtype, 1))


def in_bfloat16(apply: Callable[..., Any]) -> Callable[..., Any]:
    """apply on bfloat16 copies of its floating arguments, its output back in float32."""
    def cast(value: Any, to: Any) -> Any:
        return value.astype(to) if jnp.issubdtype(jnp.result_type(value), jnp.floating) \
            else value

    def applied(params: Any, *xs: Any) -> Any:
        low = jax.tree_util.tree_map(lambda leaf: cast(leaf, jnp.bfloat16), (params, xs))
        output = apply(low[0], *low[1])
        return jax.tree_util.tree_map(lambda leaf: cast(leaf, jnp.float32), output)
    return applied


def _make_task(variant: str, device: Any, inputs: ModelInputs, dtype: str,
               keep: int | None) -> ModelTask:
    parts = frozenset(split_parts(variant))
    for part in parts:
        if part not in RUNS:
            raise VariantUnavailable(f"jax runs no variant {part!r} of a user model")
    path, what = inputs["model"], inputs["what"]
    user: Any = load_user_module(path)
    if "bf16" in parts:
        if what == "step":
            raise VariantUnavailable("bf16 casts apply's params and inputs; your step() runs "
                                     "as written only")
        user = _BFloat16User(user)
    handle = device.handle

    def placed(array: np.ndarray) -> Any:
        if np.issubdtype(array.dtype, np.floating):
            array = array.astype(dtype)
        return jax.device_put(array, handle)

    structure = jax.tree_util.tree_structure(build(path, inputs["seed"]))
    leaves = [placed(inputs["weights"][name]) for name in inputs["weight_names"]]
    params = jax.tree_util.tree_unflatten(structure, leaves)
    xs = [placed(array) for array in inputs["x"]]
    jit = "compiled" in parts
    trained_with = ""
    if what == "train":
        loss_of, optimizer, trained_with = training_parts(path, user)
        call = training_call(user.apply, params, xs, placed(training_targets(inputs)), jit, loss_of,
                             optimizer)
        traced = call.traced  # type: ignore[attr-defined]
    elif what == "inference":
        apply = jax.jit(user.apply) if jit else user.apply
        call = functools.partial(apply, params, *xs)
        traced = tracing(user.apply, params, *xs)
    else:
        def stepped(p: Any, *arrays: Any) -> Any:
            return user.step(functools.partial(user.apply, p), *arrays)
        call = functools.partial(jax.jit(stepped) if jit else stepped, params, *xs)
        traced = tracing(stepped, params, *xs)

    def placed_call() -> Any:
        with jax.default_device(handle):
            return call()

    parameters = sum(int(np.prod(leaf.shape)) for leaf in leaves)
    # A training call returns (loss, params) so the worker waits for the update too; the
    # loss is the result compared with the reference.
    kept = (lambda v: v[0]) if what == "train" else (lambda v: v)
    extra: dict[str, object] = {"parameters": parameters, "what": what}
    if "bf16" in parts:
        extra["precision"] = "apply in bfloat16 (params and inputs cast), loss and update float32"
    if trained_with:
        extra["trained_with"] = trained_with
    task = ModelTask(placed_call, path, keep or KEPT_RESULTS[what], kept, to_numpy, extra=extra)
    task.traced = traced
    task.lowered = lambda: traced().lower()
    return task


def tracing(function: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """The step jitted and traced once, when the FLOP counter asks: its jaxpr (the second
    opinion's shapes) and, lowered and compiled, what XLA's cost analysis reads."""
    return lambda: jax.jit(function).trace(*args)


class _BFloat16User:
    """The user's module with apply in bfloat16 (in_bfloat16); every other name as the file's."""

    def __init__(self, user: Any) -> None:
        self._user = user
        self.apply = in_bfloat16(user.apply)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._user, name)


def count_flops(task: ModelTask) -> tuple[float | None, str, None, dict[str, object] | None]:
    """(FLOPs of one call, who counted them, None, second opinion): XLA's own cost analysis
    of the step, jitted as the compiled variant runs it (the unjitted ops do the same
    arithmetic), and beside it the count of the same trace's jaxpr (backends/jax/jaxprflops.py).
    What XLA cannot say is no number: some GPU backends answer -1, None or no 'flops', and 0
    for a model with parameters is a count that missed its work. XLA names no ops it skipped,
    so there is no coverage record."""
    traced = task.traced() if task.traced is not None else None
    if traced is None and task.lowered is None:
        return None, "no step to lower", None, None
    lowered = traced.lower() if traced is not None else task.lowered()  # type: ignore[misc]
    flops, why = xla_flops(lowered.compile().cost_analysis())
    if flops is None:
        return None, why, None, None
    parameters = task.extra.get("parameters") or 0
    if flops == 0 and isinstance(parameters, int) and parameters > 0:
        return None, (f"XLA's cost analysis counted 0 FLOPs for a model with {parameters} "
                      "parameters on this backend"), None, None
    second = jaxprflops.second_opinion(traced.jaxpr, flops) if traced is not None else None
    return flops, "jax.jit(step).lower(...).compile().cost_analysis()['flops']", None, second


def xla_flops(analysis: Any) -> tuple[float | None, str]:
    """(flops, '') from what cost_analysis() returned, or (None, why there is no count). Older
    JAX returned one dict per computation: a single one is the step's, several are not."""
    if isinstance(analysis, (list, tuple)):
        if len(analysis) != 1:
            return None, (f"XLA's cost analysis gave {len(analysis)} per-computation "
                          "analyses, not one for the step")
        analysis = analysis[0]
    if analysis is None:
        return None, "XLA's cost analysis returned None on this backend"
    if not isinstance(analysis, dict) or "flops" not in analysis:
        return None, "XLA's cost analysis gave no 'flops' on this backend"
    value = analysis["flops"]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or \
            not math.isfinite(value) or value < 0:
        return None, f"XLA's cost analysis gave flops={value!r} on this backend (unknown)"
    return float(value), ""


def mean_squared_error(output: Any, target: Any) -> Any:
    return jnp.mean((output - target) ** 2)


def training_parts(path: str, user: Any) -> tuple[Callable[[Any, Any], Any], Any, str]:
    """(loss, optax transformation, what they are in words): the file's loss(output, target)
    and optimizer() where it defines them, else mean squared error and Adam(1e-3)."""
    names = ["loss: your loss()" if callable(getattr(user, "loss", None))
             else "loss: mean squared error"]
    loss_of = user.loss if callable(getattr(user, "loss", None)) else mean_squared_error
    if callable(getattr(user, "optimizer", None)):
        optimizer = call_user(path, "optimizer()", user.optimizer)
        if not (callable(getattr(optimizer, "init", None)) and
                callable(getattr(optimizer, "update", None))):
            raise UserCodeError(f"{Path(path).name}: optimizer() returned a "
                                f"{type(optimizer).__name__}, not an optax "
                                "GradientTransformation")
        names.append("optimizer: your optimizer()")
    else:
        optimizer = optax.adam(1e-3)
        names.append("optimizer: optax.adam(1e-3)")
    return loss_of, optimizer, ", ".join(names)


def training_call(apply: Callable, params: Any, xs: list, target: Any, jit: bool,
                  loss_fn: Callable[[Any, Any], Any] = mean_squared_error,
                  optimizer: Any = None) -> Callable[[], Any]:
    """One optax step (Adam unless given); returns the loss (the worker blocks on it: the
    step's last output, computed after the update in dispatch order)."""
    optimizer = optimizer if optimizer is not None else optax.adam(1e-3)

    def loss_of(p: Any) -> Any:
        return loss_fn(apply(p, *xs), target)

    def update(p: Any, state: Any) -> tuple[Any, Any, Any]:
        loss, grads = jax.value_and_grad(loss_of)(p)
        updates, state = optimizer.update(grads, state, p)
        return optax.apply_updates(p, updates), state, loss

    update_step = jax.jit(update) if jit else update
    current = {"params": params, "state": optimizer.init(params)}

    def call() -> Any:
        current["params"], current["state"], loss = update_step(current["params"],
                                                                current["state"])
        return loss, current["params"]

    # Traced from the current params and state when the counter asks (their shapes are all
    # it reads), so no copy of the initial ones stays alive.
    call.traced = lambda: jax.jit(update).trace(  # type: ignore[attr-defined]
        current["params"], current["state"])
    return call


def rounding_sensitivity(case: dict, variant: str, device: Any, inputs: ModelInputs,
                         **options: Any) -> dict[str, Any]:
    """How far the fp32 step moves under the variant's rounding (workloads/usermodel/
    sensitivity.py), on this device: its as-written task, built outside any dtype policy."""
    return sensitivity.rounding_sensitivity(sys.modules[__name__], case, variant, device,
                                            inputs, **options)

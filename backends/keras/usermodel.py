"""A user's Keras builder in one cell, on whichever Keras backend the cell's framework set.

Timed the way its author trains it, through fit(): one call of as-written is
`fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)` over KERAS_FIT_STEPS copies
of the batch (fewer for large inputs; no callbacks), with Keras' default jit_compile="auto";
the case's extra records steps_per_call and the report gives the time per step (call / steps).
One train_on_batch per call cost 2.6-3x fit's time per step (an H200 host's audit), so a
train_on_batch loop is timed only where the file sets HARNESS_KERAS_STEP = "train_on_batch".
Inference (what=inference) is predict over the same block (predict_on_batch with that opt-in).
The model trains as the file compiled it (its optimizer, fresh per cell, its loss, loss
weights and metrics), or, returned uncompiled, with Adam and mean squared error.
compiled: the same with jit_compile=True; steps-per-execution: the same fit (or predict) with
steps_per_execution=STEPS_PER_EXECUTION (with the opt-in: fit over STEPS_PER_EXECUTION copies
of the batch in one execution); bf16 / fp16: the model built under the dtype policy
"mixed_bfloat16" / "mixed_float16" (Keras wraps the optimizer of a mixed_float16 model in a
LossScaleOptimizer when it compiles), the global policy put back once the model is built.
Parts join with '+' ("compiled+bf16").
Weights travel as arrays (get_weights / set_weights), so every backend starts from the same.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from harness.backend import VariantUnavailable
from harness.backends.keras.training import keras_device_name
from harness.workloads.usermodel import sensitivity
from harness.workloads.usermodel.common import (
    ModelTask,
    add_deterministic,
    forward_variant,
    nested_map,
    user_code,
)
from harness.workloads.usermodel.inspect import keras_step_of
from harness.workloads.usermodel.source import call_user, load_user_module
from harness.workloads.usermodel.spec import (
    KEPT_RESULTS,
    KERAS_FIT_BLOCK_BYTES,
    KERAS_FIT_STEPS,
    KERAS_PARTS,
    STEPS_PER_EXECUTION,
    ModelInputs,
    split_parts,
    training_targets,
)

if TYPE_CHECKING:  # the torch counter is imported only where Keras runs on torch
    from harness.backends.torch.flops import CoverageRecord

# The dtype policy each precision part builds the model under.
POLICIES = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


@contextmanager
def dtype_policy(name: str | None) -> Iterator[None]:
    """Layers built inside take the policy `name` ("mixed_bfloat16"); None leaves it alone.
    Put back afterwards: a layer keeps the policy it was built with, nothing else should."""
    if name is None:
        yield
        return
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)


@contextmanager
def floatx(dtype: str) -> Iterator[None]:
    """Layers built inside take `dtype` as their default (float64 for the rounding estimate)."""
    before = keras.config.floatx()
    keras.config.set_floatx(dtype)
    try:
        yield
    finally:
        keras.config.set_floatx(before)


def model_input(arrays: list[Any]) -> Any:
    return arrays[0] if len(arrays) == 1 else list(arrays)


def build(path: str, sample: list[np.ndarray], seed: int | None = None,
          dtype: str = "float32") -> keras.Model:
    """The file's model(), built (called once on `sample` if it has no weights yet)."""
    user = load_user_module(path)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    with floatx(dtype):
        net = call_user(path, "model()", user.model)
        if not net.built or not net.weights:
            call_user(path, "the model's first call", net, model_input(sample))
    return net


def weight_arrays(net: keras.Model) -> dict[str, np.ndarray]:
    return {f"w{index:03d}": np.asarray(value) for index, value in
            enumerate(net.get_weights())}


def weight_paths(net: keras.Model) -> list[str]:
    return [variable.path for variable in net.weights]


def snapshot(value: Any) -> Any:
    """Keras on torch hands back torch tensors, which later calls may reuse: copy those."""
    return nested_map(lambda v: v.detach().clone() if hasattr(v, "detach") else v, value)


def to_numpy(value: Any) -> Any:
    return nested_map(lambda v: np.asarray(keras.ops.convert_to_numpy(v), dtype=np.float64),
                      value)


def cast(arrays: list[np.ndarray], dtype: str) -> list[np.ndarray]:
    return [array.astype(dtype) if np.issubdtype(array.dtype, np.floating) else array
            for array in arrays]


def repeated(arrays: list[np.ndarray], copies: int) -> list[np.ndarray]:
    return [np.concatenate([array] * copies) for array in arrays]


def fit_steps(arrays: list[np.ndarray]) -> int:
    """Steps in one timed fit call: KERAS_FIT_STEPS, fewer where that many copies of the
    batch would pass KERAS_FIT_BLOCK_BYTES of inputs, a multiple of STEPS_PER_EXECUTION (the
    steps-per-execution variant runs the same block) and never fewer.

    Counted on the stored arrays, never on a cast copy: the float64 reference run must take
    as many steps as the float32 cells it bounds.
    """
    per_batch = max(1, sum(array.nbytes for array in arrays))
    steps = min(KERAS_FIT_STEPS, KERAS_FIT_BLOCK_BYTES // per_batch)
    return max(STEPS_PER_EXECUTION, steps // STEPS_PER_EXECUTION * STEPS_PER_EXECUTION)


def steps_per_call(how: str, spe: bool, stored: list[np.ndarray]) -> int:
    """Training steps (or predicted batches) in one timed call."""
    if how == "fit":
        return fit_steps(stored)
    if how == "train_on_batch" and spe:
        return STEPS_PER_EXECUTION
    return 1


def compile_arguments(net: keras.Model) -> dict[str, object] | None:
    """The arguments of the file's own compile(), rebuilt from its config (so every cell gets a
    fresh optimizer of the same class and settings), or None for an uncompiled model."""
    config = net.get_compile_config() if getattr(net, "compiled", False) else {}
    if not config:
        return None
    from keras.src.saving import serialization_lib

    arguments = dict(serialization_lib.deserialize_keras_object(config))
    arguments.pop("jit_compile", None)  # the variant decides these two
    arguments.pop("steps_per_execution", None)
    return arguments


def _name(value: Any) -> str:
    """A loss, optimizer or metric as a person names it: 'adam', 'sparse_categorical_...'."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):  # a serialized object; Keras numbers repeated names: adam_2
        name = str((value.get("config") or {}).get("name") or value.get("class_name"))
        return re.sub(r"_\d+$", "", name)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_name(item) for item in value) + "]"
    return str(getattr(value, "name", None) or getattr(value, "__name__", None)
               or type(value).__name__)


def trained_with(net: keras.Model) -> dict[str, str]:
    """What a training cell of this model trains with, in words (the cell records it)."""
    config = net.get_compile_config() if getattr(net, "compiled", False) else {}
    if not config:
        return {"loss": "mean_squared_error", "optimizer": "adam", "source": "the harness's "
                "default (model() returned an uncompiled model)"}
    found = {"loss": _name(config.get("loss")), "optimizer": _name(config.get("optimizer")),
             "source": "your compile()"}
    if config.get("metrics"):
        found["metrics"] = _name(config["metrics"])
    if config.get("loss_weights") is not None:
        found["loss_weights"] = str(config["loss_weights"])
    return found


def trained_with_text(found: dict[str, str]) -> str:
    return f"loss: {found['loss']}, optimizer: {found['optimizer']}, from {found['source']}"


def make_task(case: dict, variant: str, device: Any, inputs: ModelInputs,
              dtype: str = "float32", keep: int | None = None) -> ModelTask:
    with user_code(inputs["model"], f"preparing {variant}"):
        forward = forward_variant(variant, POLICIES)
        return add_deterministic(_make_task(case, variant, device, inputs, dtype, keep), inputs,
                                 lambda forward_inputs: _make_task(case, forward, device,
                                                                   forward_inputs, dtype, 1))


def parts_of(variant: str, what: str, device: Any) -> frozenset[str]:
    """The variant's parts, or VariantUnavailable for one Keras does not run here."""
    parts = frozenset(split_parts(variant))
    for part in parts:
        if part not in KERAS_PARTS:
            raise VariantUnavailable(f"Keras runs no variant {part!r} of a user model")
    if what == "step" and parts != {"as-written"}:
        raise VariantUnavailable(f"{variant} changes how Keras runs its own train/predict "
                                 "functions; your step() runs as written only")
    if "fp16" in parts and not getattr(device, "is_gpu", False):
        raise VariantUnavailable("fp16 (mixed_float16) is a GPU fix: CPUs have no fast "
                                 "float16 matmuls")
    return parts


def _make_task(case: dict, variant: str, device: Any, inputs: ModelInputs, dtype: str,
               keep: int | None) -> ModelTask:
    path, what, batch = inputs["model"], inputs["what"], case["batch"]
    parts = parts_of(variant, what, device)
    policy = next((POLICIES[part] for part in parts if part in POLICIES), None)
    placement = keras_device_name(device)
    arrays = cast(inputs["x"], dtype)
    with keras.device(placement), dtype_policy(policy):
        net = build(path, arrays, dtype=dtype)
        net.set_weights([np.asarray(inputs["weights"][name], dtype=value.dtype) for name, value
                         in zip(inputs["weight_names"], net.get_weights())])
    spe = "steps-per-execution" in parts
    # "fit" (as the file's author trains), the file's "train_on_batch" opt-in, or its step().
    how = "step" if what == "step" else keras_step_of(load_user_module(path))
    steps = steps_per_call(how, spe, inputs["x"])
    training = trained_with(net)
    if what != "step":
        arguments = compile_arguments(net) or {"optimizer": "adam",
                                               "loss": "mean_squared_error"}
        with keras.device(placement):  # the optimizer's variables next to the weights
            net.compile(**arguments, jit_compile=True if "compiled" in parts else "auto",
                        steps_per_execution=STEPS_PER_EXECUTION if spe else 1)
    with keras.device(placement):  # the user's step gets tensors already on the device
        call = _call(net, what, steps, arrays, inputs, dtype, batch, path)

    def placed_call() -> Any:
        with keras.device(placement):
            return call()

    extra: dict[str, object] = {"parameters": int(net.count_params()), "what": what,
                             "steps_per_call": steps}
    if what != "step":
        extra["keras_step"] = how
    if what == "train":
        extra["trained_with"] = trained_with_text(training)
    if policy is not None:
        extra["dtype_policy"] = policy
    # Through fit every variant runs the same block of steps per call, so each is checked
    # against the as-written reference. Only the opt-in's steps-per-execution call runs other
    # steps than its as-written (STEPS_PER_EXECUTION batches in one call against one): its
    # loss, their mean, is checked against as many as-written losses averaged (reference_spe).
    other_steps = how == "train_on_batch" and spe
    kept = keep or (1 if other_steps else KEPT_RESULTS[what])
    task = ModelTask(placed_call, path, kept, snapshot, to_numpy, extra=extra,
                     spe=other_steps)
    task.eager = placed_call
    return task


def count_flops(task: ModelTask) -> tuple[float | None, str, CoverageRecord | None,
                                          dict[str, object] | None]:
    """(FLOPs of one call, who counted them, coverage, second opinion): on Keras' torch
    backend by the harness's formulas and torch's (backends/torch/flops.py) around one call,
    the second opinion from any torch layers the model calls (Keras' own layers are no
    torch modules to hook); on JAX and TensorFlow the step is compiled inside Keras' trainer,
    out of a counter's reach."""
    backend = keras.backend.backend()
    if backend != "torch":
        return None, (f"Keras' {backend} backend compiles its train step inside Keras' "
                      "trainer; no framework counter reaches it (keras-torch counts the same "
                      "model)"), None, None
    from harness.backends.torch import flops

    if task.eager is None:
        return None, "the task has no eager call to count", None, None
    counted = flops.count(task.eager)
    return (float(counted.flops), f"{flops.HOW}, one call on Keras' torch backend",
            counted.coverage, counted.second_opinion)


def _call(net: keras.Model, what: str, steps: int, arrays: list[np.ndarray],
          inputs: ModelInputs, dtype: str, batch: int, path: str) -> Callable[[], Any]:
    """One timed call: more than one step is fit / predict over `steps` copies of the batch
    (the same arrays on every backend), one is train_on_batch / predict_on_batch."""
    if what == "step":
        user_step = load_user_module(path).step
        tensors = [keras.ops.convert_to_tensor(array) for array in arrays]
        return lambda: user_step(net, *tensors)
    if steps > 1:
        many_x = model_input(repeated(arrays, steps))
        if what == "train":
            many_target = repeated(cast([training_targets(inputs)], dtype), steps)[0]
            # History's loss is the mean over the call's steps: one number per call.
            return lambda: net.fit(many_x, many_target, batch_size=batch, epochs=1,
                                   shuffle=False, verbose=0).history["loss"][-1]
        return lambda: nested_map(lambda out: out[:batch],
                                  net.predict(many_x, batch_size=batch, verbose=0))
    x = model_input(arrays)
    if what == "train":
        target = cast([training_targets(inputs)], dtype)[0]
        return lambda: net.train_on_batch(x, target)
    return lambda: net.predict_on_batch(x)


def rounding_sensitivity(case: dict, variant: str, device: Any, inputs: ModelInputs,
                         **options: Any) -> dict[str, Any]:
    """How far the fp32 step moves under the variant's rounding (workloads/usermodel/
    sensitivity.py), on this device: its as-written task, built outside any dtype policy."""
    return sensitivity.rounding_sensitivity(sys.modules[__name__], case, variant, device,
                                            inputs, **options)

"""`python -m harness.workloads.usermodel.inspect FILE OUT.json`: a user's model file, as JSON.

A child process, so the parent never imports the file's framework. It imports the file, finds
its builder (model() returning a torch nn.Module or a keras.Model, or JAX's init/apply pair),
checks inputs(batch, rng) on two batch sizes, runs one forward pass at batch 2 and reports the
family, the output's shape, the parameter count, and the optional step/targets/tolerance.
Any problem is {"error": one line}, which the parent turns into exit 2.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from harness.data.store import write_json_atomic
from harness.workloads.usermodel.precheck import CONVENTION, NO_INPUTS, misspelled_hooks
from harness.workloads.usermodel.precheck import near_misses as precheck_misses
from harness.workloads.usermodel.source import (
    UserCodeError,
    call_user,
    load_user_module,
    user_error_text,
)
from harness.workloads.usermodel.spec import KERAS_FIT_STEPS, KERAS_STEP_OPTION, KERAS_STEPS

PROBE_BATCHES = (2, 3)


class NotAModel(ValueError):
    """The file does not follow the convention (message: what is wrong, in one line)."""


def as_arrays(made: Any, what: str, batch: int) -> list[np.ndarray]:
    """inputs()/targets() output as a list of numpy arrays whose first dimension is `batch`."""
    arrays = list(made) if isinstance(made, (tuple, list)) else [made]
    if not arrays:
        raise NotAModel(f"{what} returned nothing; return a numpy array or a tuple of them")
    for array in arrays:
        if not isinstance(array, np.ndarray):
            raise NotAModel(f"{what} returned a {type(array).__module__}.{type(array).__name__}"
                            "; return numpy arrays (the harness places them on each device)")
        if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
            raise NotAModel(f"{what} returned an array of dtype {array.dtype}; use numbers")
        if array.ndim == 0 or array.shape[0] != batch:
            raise NotAModel(f"{what} returned shape {array.shape}: its first dimension must "
                            f"be the batch ({batch})")
    return arrays


def make_inputs(user: Any, path: str, batch: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng([seed, batch])
    made = call_user(path, f"inputs({batch}, rng)", user.inputs, batch, rng)
    return as_arrays(made, f"inputs({batch}, rng)", batch)


def family_of_model(net: Any) -> str:
    """'torch' or 'keras' from the object's type; the frameworks are only looked at if the
    file already imported them."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(net, torch.nn.Module):
        return "torch"
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(net, keras.Model):
        return "keras"
    raise NotAModel(f"model() returned a {type(net).__module__}.{type(net).__name__}; "
                    f"{CONVENTION}")


def forward(family: str, user: Any, path: str, arrays: list[np.ndarray]) -> tuple[Any, int]:
    """(output, parameter count) of one forward pass at the probe batch, on the CPU."""
    if family == "jax":
        import jax

        params = call_user(path, "init(0)", user.init, 0)
        out = call_user(path, "apply(params, *inputs)", user.apply, params, *arrays)
        count = sum(int(np.prod(np.shape(leaf))) for leaf in jax.tree_util.tree_leaves(params))
        return out, count
    net = call_user(path, "model()", user.model)
    if family == "torch":
        import torch

        with torch.no_grad():
            out = call_user(path, "the model's forward", net,
                            *[torch.from_numpy(array) for array in arrays])
        return out, sum(p.numel() for p in net.parameters())
    out = call_user(path, "the model's call", net, arrays[0] if len(arrays) == 1 else arrays)
    return out, int(net.count_params())


def output_shape(out: Any) -> list[int] | None:
    """The shape of a single array output; None for tuples, dicts and other structures."""
    shape = getattr(out, "shape", None)
    if shape is None or isinstance(out, (tuple, list, dict)):
        return None
    return [int(dim) for dim in shape]


def tolerance_of(user: Any) -> float | None:
    value = getattr(user, "tolerance", None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value <= 0:
        raise NotAModel(f"tolerance = {value!r}: give a number > 0 (the largest difference "
                        "allowed, relative to the reference's largest |value|)")
    return float(value)


def keras_step_of(user: Any) -> str:
    """How a Keras file's calls are made: its HARNESS_KERAS_STEP, else "fit" (as its author
    trains it). A value the harness does not know is NotAModel, so a typo never silently times
    the other call."""
    value = getattr(user, KERAS_STEP_OPTION, KERAS_STEPS[0])
    if value not in KERAS_STEPS:
        raise NotAModel(f"{KERAS_STEP_OPTION} = {value!r}: give 'fit' (the default: one call "
                        "is fit over a block of steps) or 'train_on_batch' (one call is one "
                        "train_on_batch)")
    return str(value)


def keras_step_text(step: str) -> str:
    """How a Keras training call is timed, in words (harness list, the plan's summary)."""
    if step == "train_on_batch":
        return f"timed one train_on_batch per call (your {KERAS_STEP_OPTION})"
    return (f"timed through fit() over up to {KERAS_FIT_STEPS} steps per call, per step = "
            "call / steps")


def hook_place(path: str, function: Any) -> str:
    """'mymodel.py:14 (loss)': where the file defines a hook, for one-line messages."""
    code = getattr(function, "__code__", None)
    line = f":{code.co_firstlineno}" if code is not None else ""
    return f"{Path(path).name}{line} ({getattr(function, '__name__', 'hook')})"


def check_signature(path: str, function: Any, call: str, *args: Any) -> None:
    """A hook that cannot take the arguments the harness passes is named with its line."""
    import inspect as python_inspect

    try:
        python_inspect.signature(function).bind(*args)
    except TypeError as exc:
        raise NotAModel(f"{hook_place(path, function)}: the harness calls {call}: {exc}") \
            from None
    except ValueError:  # builtins without a signature: let the call tell
        pass


def probe_targets(user: Any, path: str, out: Any) -> np.ndarray | None:
    """The targets a training step at the probe batch gets (the file's or the default)."""
    if callable(getattr(user, "targets", None)):
        made = call_user(path, f"targets({PROBE_BATCHES[0]}, rng)", user.targets,
                         PROBE_BATCHES[0], np.random.default_rng(0))
        return as_arrays(made, f"targets({PROBE_BATCHES[0]}, rng)", PROBE_BATCHES[0])[0]
    shape = output_shape(out)
    return None if shape is None else np.zeros(shape, np.float32)


def training_of(family: str, user: Any, path: str, arrays: list[np.ndarray],
                out: Any) -> str:
    """What a training step trains with, in words; the file's hooks tried once at the probe
    batch (a hook with the wrong signature, an optimizer factory that raises, targets the
    loss rejects: NotAModel or UserCodeError naming the file and line)."""
    target = probe_targets(user, path, out)
    if family == "keras":
        return keras_training(user, path, arrays, target)
    loss, optimizer = getattr(user, "loss", None), getattr(user, "optimizer", None)
    parts = []
    if callable(loss) and target is not None:
        check_signature(path, loss, "loss(output, target)", out, target)
        if family == "torch":
            import torch

            value = _hook_call(path, loss, "loss(output, target)", target, out,
                               torch.from_numpy(target))
        else:
            value = _hook_call(path, loss, "loss(output, target)", target, out, target)
        if int(np.prod(np.shape(value))) != 1:
            raise NotAModel(f"{hook_place(path, loss)}: loss(output, target) returned shape "
                            f"{tuple(np.shape(value))}; return one number (reduce over the "
                            "batch)")
    parts.append("loss: your loss()" if callable(loss) else
                 "loss: mean squared error (the harness's default: no loss() in your file)")
    if callable(optimizer):
        if family == "torch":
            net = call_user(path, "model()", user.model)
            check_signature(path, optimizer, "optimizer(parameters)", net.parameters())
            made = call_user(path, "optimizer(parameters)", optimizer, net.parameters())
            import torch

            if not isinstance(made, torch.optim.Optimizer):
                raise NotAModel(f"{hook_place(path, optimizer)}: optimizer(parameters) "
                                f"returned a {type(made).__name__}, not a "
                                "torch.optim.Optimizer")
        else:
            check_signature(path, optimizer, "optimizer()")
            made = call_user(path, "optimizer()", optimizer)
            if not (callable(getattr(made, "init", None)) and
                    callable(getattr(made, "update", None))):
                raise NotAModel(f"{hook_place(path, optimizer)}: optimizer() returned a "
                                f"{type(made).__name__}, not an optax GradientTransformation")
        parts.append(f"optimizer: your optimizer() -> {type(made).__name__}")
    else:
        parts.append(("optimizer: Adam" if family == "torch" else "optimizer: optax.adam(1e-3)")
                     + " (the harness's default: no optimizer() in your file)")
    return ", ".join(parts)


def _hook_call(path: str, function: Any, call: str, target: np.ndarray, *args: Any) -> Any:
    """A hook called at the probe batch; an error that is not in the file's own lines is
    told as the targets' shape the hook rejected."""
    try:
        return function(*args)
    except Exception as exc:  # noqa: BLE001 - told as the user's line, one line
        text = user_error_text(exc, path, call)
        raise NotAModel(f"{text} (targets of shape {target.shape}, {target.dtype})") from None


def keras_training(user: Any, path: str, arrays: list[np.ndarray],
                   target: np.ndarray | None) -> str:
    """A Keras model's own compile() (or the default), tried with one train_on_batch."""
    from harness.backends.keras.usermodel import compile_arguments, trained_with, trained_with_text

    net = call_user(path, "model()", user.model)
    found = trained_with(net)
    if target is not None:
        arguments = compile_arguments(net) or {"optimizer": "adam",
                                               "loss": "mean_squared_error"}
        net.compile(**arguments)
        x = arrays[0] if len(arrays) == 1 else list(arrays)
        try:
            net.train_on_batch(x, target)
        except Exception as exc:  # noqa: BLE001 - one line naming what was rejected
            targets = getattr(user, "targets", None)
            place = hook_place(path, targets) if callable(targets) else Path(path).name
            first = (f"{type(exc).__name__}: {exc}".splitlines() or [""])[0][:300]
            raise NotAModel(f"{place}: loss {found['loss']} rejects the targets of shape "
                            f"{target.shape} ({target.dtype}): {first}") from None
    return f"{trained_with_text(found)}; {keras_step_text(keras_step_of(user))}"


def own_functions(user: Any) -> set[str]:
    """The names of the functions the loaded module defines itself (not those it imported)."""
    return {name for name, value in vars(user).items()
            if callable(value) and getattr(value, "__module__", None) == user.__name__}


def near_misses(user: Any) -> list[str]:
    """precheck.near_misses over the loaded module: its own functions against the hooks."""
    return precheck_misses(own_functions(user), set(vars(user)))


def describe(path: str) -> dict[str, Any]:
    """The inspection report of one file (raises NotAModel or UserCodeError)."""
    user = load_user_module(path)
    misses = near_misses(user)
    has_jax_pair = callable(getattr(user, "init", None)) and callable(getattr(user, "apply",
                                                                              None))
    hint = f" ({'; '.join(misses)})" if misses else ""
    if not has_jax_pair and not callable(getattr(user, "model", None)):
        raise NotAModel(f"no builder: {CONVENTION}{hint}")
    if not callable(getattr(user, "inputs", None)):
        raise NotAModel(f"{NO_INPUTS}{hint}")
    probes = {batch: make_inputs(user, path, batch) for batch in PROBE_BATCHES}
    family = "jax" if has_jax_pair else family_of_model(call_user(path, "model()", user.model))
    out, parameters = forward(family, user, path, probes[PROBE_BATCHES[0]])
    has_targets = callable(getattr(user, "targets", None))
    has_step = callable(getattr(user, "step", None))
    training = "" if has_step else training_of(family, user, path,
                                                probes[PROBE_BATCHES[0]], out)
    if misses:
        training = "; ".join(filter(None, [training, *misses]))
    builder = "init(seed) + apply(params, *inputs)" if family == "jax" else "model()"
    return {
        "path": str(Path(path).resolve()), "family": family, "builder": builder,
        "has_step": has_step, "has_targets": has_targets, "tolerance": tolerance_of(user),
        "inputs": [{"shape": list(a.shape), "dtype": str(a.dtype)}
                   for a in probes[PROBE_BATCHES[0]]],
        "output_shape": output_shape(out), "parameters": int(parameters),
        "default_what": "step" if has_step else "train", "training": training,
        "keras_step": keras_step_of(user) if family == "keras" else None,
        # [the file's function, the hook it is close to]: said before a run (plan.py)
        "misspelled": [list(pair) for pair in misspelled_hooks(own_functions(user),
                                                               set(vars(user)))],
    }


def main(argv: list[str]) -> int:
    path, out_path = argv[0], Path(argv[1])
    try:
        document = describe(path)
    except (NotAModel, UserCodeError) as exc:
        document = {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - anything else is still one line for the user
        document = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:400]}
    write_json_atomic(out_path, document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

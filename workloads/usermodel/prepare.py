"""`python -m harness.workloads.usermodel.prepare FILE FOLDER FRAMEWORK WHAT SEED SIZES OUT.json`.

Runs once per run, on the CPU, before any cell: makes the shared initial weights from the seed
(weights.npz, in a stable order), each batch size's inputs and targets, and the CPU reference
every cell is compared with (batch-N.npz), plus prepared.json saying how close a cell must come.

The bound is measured, not guessed: the reference is computed in float32 and again in float64
from the same weights; another float32 evaluation (another device, another summation order)
errs by about as much as this one, so a cell may differ from the reference by up to
SAFETY x |float32 - float64|, never less than FLOOR (relative to the reference's largest
|value|); a `tolerance` in the file replaces it. The same step is run twice from the same
weights, and the model built twice from the same seed: where either differs, the seed does not
fix the model's randomness and cells are reported as not comparable.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.registry import backend_module
from harness.data.store import write_json_atomic
from harness.workloads.usermodel.inspect import NotAModel, as_arrays, keras_step_of, make_inputs
from harness.workloads.usermodel.source import (
    UserCodeError,
    call_user,
    load_user_module,
    user_error_text,
)
from harness.workloads.usermodel.spec import (
    IMPLEMENTATIONS,
    KEPT_RESULTS,
    PARTIAL_KEY,
    PREPARED_FILE,
    REFERENCE_CALLS_FILE,
    STEPS_PER_EXECUTION,
    WEIGHTS_FILE,
    ModelInputs,
    PreparedDocument,
    SizeEntry,
    case_file,
    family_of,
    flat_result,
)

U = 2.0**-24  # float32 unit roundoff
SAFETY = 8.0
FLOOR = 64 * U
# Without a float64 evaluation (the file's code refuses float64) nothing was measured: allow
# what float32 arithmetic typically keeps of a deep net's output, and say so.
UNMEASURED_BOUND = 1e-4


def initial_weights(family: str, impl: Any, path: str, seed: int,
                    sample: list[np.ndarray]) -> tuple[dict[str, np.ndarray], list[str]]:
    """The weights built from `seed`, keyed in the order cells load them, and readable names."""
    if family == "torch":
        arrays = impl.weight_arrays(impl.build(path, seed))
        return arrays, list(arrays)
    if family == "keras":
        net = impl.build(path, sample, seed)
        return impl.weight_arrays(net), impl.weight_paths(net)
    params = impl.build(path, seed)
    import jax

    names = [jax.tree_util.keystr(key) for key, _ in
             jax.tree_util.tree_flatten_with_path(params)[0]]
    return impl.weight_arrays(params), names


def differs(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> str:
    """'' when two weight sets are identical, else which array differs first and by how much."""
    for name, value in first.items():
        other = second.get(name)
        if other is None or other.shape != value.shape or not np.array_equal(value, other):
            gap = np.max(np.abs(value - other)) if other is not None and \
                other.shape == value.shape else float("nan")
            return f"two builds with the same seed differ ({name}: largest difference {gap:.3g})"
    return ""


def run_reference(impl: Any, device: Any, case: dict[str, int], inputs: ModelInputs,
                  calls: int, **options: Any) -> list[Any]:
    """The kept results of `calls` as-written calls from the initial weights."""
    task = impl.make_task(case, "as-written", device, inputs, keep=calls, **options)
    for _ in range(calls):
        task.step()
    return task.output()["result"]


def runs_on_jax(family: str) -> bool:
    """JAX computes in float64 only with x64 switched on (Keras on JAX included)."""
    return family == "jax" or (family == "keras" and os.environ.get("KERAS_BACKEND") == "jax")


def float64_options(family: str) -> dict[str, object]:
    if family == "torch":
        import torch

        return {"dtype": torch.float64}
    if runs_on_jax(family):
        import jax

        jax.config.update("jax_enable_x64", True)
    return {"dtype": "float64"}


def float32_again(family: str) -> None:
    if runs_on_jax(family):
        import jax

        jax.config.update("jax_enable_x64", False)


def bound_for(reference: np.ndarray, family: str, impl: Any, device: Any, case: dict[str, int],
              inputs: ModelInputs, calls: int, tolerance: float | None) -> SizeEntry:
    """scale, bound and its formula for one batch size."""
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    scale = scale if scale > 0 else 1.0
    if tolerance is not None:
        return {"scale": scale, "bound": tolerance, "bound_formula": "the file's tolerance"}
    try:
        exact = flat_result(run_reference(impl, device, case, inputs, calls,
                                          **float64_options(family)))
    except Exception as exc:  # noqa: BLE001 - no float64 run: say so, use the fallback
        return {"scale": scale, "bound": UNMEASURED_BOUND,
                "bound_formula": f"{UNMEASURED_BOUND:g} (no float64 evaluation: "
                                 f"{type(exc).__name__})"}
    finally:
        float32_again(family)
    if exact.shape != reference.shape:
        return {"scale": scale, "bound": UNMEASURED_BOUND,
                "bound_formula": f"{UNMEASURED_BOUND:g} (float64 result has another shape)"}
    rounding = float(np.max(np.abs(reference - exact))) / scale if reference.size else 0.0
    bound = max(SAFETY * rounding, FLOOR)
    return {"scale": scale, "bound": bound,
            "bound_formula": f"max({SAFETY:g} x |float32 - float64| = {SAFETY * rounding:.2g}, "
                             f"64u) on the CPU"}


def targets_for(user: Any, path: str, family: str, impl: Any, device: Any,
                case: dict[str, int], inputs: ModelInputs, batch: int,
                seed: int) -> np.ndarray:
    """The file's targets(batch, rng), else fixed normal numbers of the output's shape."""
    rng = np.random.default_rng([seed, batch, 1])
    if callable(getattr(user, "targets", None)):
        made = call_user(path, f"targets({batch}, rng)", user.targets, batch, rng)
        return as_arrays(made, f"targets({batch}, rng)", batch)[0]
    output = run_reference(impl, device, case, {**inputs, "what": "inference"}, 1)[0]
    if not isinstance(output, np.ndarray):
        raise NotAModel("training needs a model whose output is one array; give step(net, "
                        "*inputs) or use --param what=inference")
    return np.asarray(rng.standard_normal(output.shape), dtype=np.float32)


DETERMINISTIC_MODE = {"torch": "eval() under no_grad", "keras": "training=False",
                      "jax": "apply(params, *inputs)"}


def deterministic_mode(family: str, impl: Any, device: Any, case: dict[str, int],
                       inputs: ModelInputs, tolerance: float | None, why: str,
                       stored: dict[str, np.ndarray]) -> SizeEntry:
    """What a random step's cells are checked on: the model's output in its deterministic mode
    from the shared weights and inputs (torch eval(), Keras training=False), if that repeats;
    else nothing, and the reason. Adds the reference to `stored` (reference_eval)."""
    forward: ModelInputs = {**inputs, "what": "inference"}
    first = flat_result(run_reference(impl, device, case, forward, 1))
    second = flat_result(run_reference(impl, device, case, forward, 1))
    mode = DETERMINISTIC_MODE[family]
    scale = float(np.max(np.abs(first))) if first.size else 0.0
    if first.shape != second.shape or (first.size and float(
            np.max(np.abs(first - second))) / (scale or 1.0) > FLOOR):
        return {"compare": "none", "random_step": why,
                "not_compared": f"{why}; the model in its deterministic mode ({mode}) also "
                                "gave two results from the same weights: random numbers drawn "
                                "in the forward pass itself"}
    stored["reference_eval"] = first
    bound = bound_for(first, family, impl, device, case, forward, 1, tolerance)
    return {"compare": "deterministic", "random_step": why, "deterministic_mode": mode,
            "eval_scale": bound["scale"], "eval_bound": bound["bound"],
            "eval_bound_formula": bound["bound_formula"]}


def prepare_size(user: Any, path: str, family: str, impl: Any, device: Any, folder: Path,
                 batch: int, base: ModelInputs, tolerance: float | None,
                 check_repeat: bool, random_step: str = "") -> SizeEntry:
    """Write batch-N.npz and return its entry of prepared.json."""
    what, seed = base["what"], base["seed"]
    arrays = make_inputs(user, path, batch, seed)
    case = {"batch": batch}
    inputs: ModelInputs = {**base, "x": arrays, "targets": None}
    if what == "train":
        inputs["targets"] = targets_for(user, path, family, impl, device, case, inputs, batch,
                                        seed)
    # fit files check steps-per-execution against as-written's reference: only a file timed
    # through train_on_batch needs the reference of STEPS_PER_EXECUTION calls.
    spe_calls = (STEPS_PER_EXECUTION if family == "keras" and what == "train"
                 and keras_step_of(user) == "train_on_batch" else 0)
    calls = max(KEPT_RESULTS[what], spe_calls)
    note_reference_call(folder, batch, None)
    started = time.perf_counter()
    results = run_reference(impl, device, case, inputs, calls)
    note_reference_call(folder, batch, (time.perf_counter() - started) / calls)
    reference = flat_result(results[:KEPT_RESULTS[what]])
    entry: SizeEntry = {"inputs": len(arrays),
                        **bound_for(reference, family, impl, device, case, inputs,
                                    KEPT_RESULTS[what], tolerance)}
    stored: dict[str, np.ndarray] = {}
    why = random_step
    if check_repeat:  # the same step from the same weights again, with the RNG moved on
        again = flat_result(run_reference(impl, device, case, inputs, KEPT_RESULTS[what]))
        gap = float(np.max(np.abs(again - reference))) / entry["scale"] if reference.size \
            else 0.0
        if again.shape != reference.shape or gap > FLOOR:
            why = (f"the {what} step gave another result from the same weights ({gap:.2g} "
                   "apart): it draws random numbers (dropout, noise) the seed does not fix")
    if why:
        entry.update(deterministic_mode(family, impl, device, case, inputs, tolerance, why,
                                        stored))
    stored.update({f"x{index}": array for index, array in enumerate(arrays)})
    stored["reference"] = reference
    if inputs["targets"] is not None:
        stored["targets"] = inputs["targets"]
    if spe_calls:  # fit's loss over steps_per_execution steps is their mean
        stored["reference_spe"] = np.array([np.mean(flat_result(results[:spe_calls]))])
    elif what == "inference":
        stored["reference_spe"] = reference
    np.savez(case_file(folder, batch), **stored)  # type: ignore[arg-type]  # numpy's stub
    # types **kwds as its own keyword options, not as the arrays they are
    return entry


def note_reference_call(folder: Path, batch: int, seconds_per_call: float | None) -> None:
    """Keep in REFERENCE_CALLS_FILE that BATCH's first reference run starts now (None), or
    took SECONDS_PER_CALL: a cold call and its set-up included, as a worker's first call is."""
    path = folder / REFERENCE_CALLS_FILE
    known = json.loads(path.read_text()) if path.is_file() else {"seconds_per_call": {}}
    if seconds_per_call is None:
        known["calling"] = {"batch": batch, "since": time.time()}
    else:
        known["seconds_per_call"][str(batch)] = round(seconds_per_call, 6)
        known.pop("calling", None)
    write_json_atomic(path, known)


def started_document(folder: Path) -> PreparedDocument | None:
    """The document an earlier preparer of this folder left when it was killed (at a size that
    hung: harness.workloads.usermodel.plan goes on without it), or None: start afresh."""
    path = folder / PREPARED_FILE
    if not (path.is_file() and (folder / WEIGHTS_FILE).is_file()):
        return None
    document: Any = json.loads(path.read_text())
    return document if document.get(PARTIAL_KEY) else None


def first_weights(family: str, impl: Any, user: Any, path: str, folder: Path, framework: str,
                  what: str, seed: int, sizes: list[int]) -> PreparedDocument:
    """The document with the initial weights made from SEED (built twice: does the seed fix
    them?), saved as WEIGHTS_FILE."""
    sample = make_inputs(user, path, min(sizes), seed)
    first, names = initial_weights(family, impl, path, seed, sample)
    second, _ = initial_weights(family, impl, path, seed, sample)
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / REFERENCE_CALLS_FILE, {"framework": framework, "device": "cpu",
                                                      "seconds_per_call": {}})
    np.savez(folder / WEIGHTS_FILE, **first)  # type: ignore[arg-type]  # as above
    return {"framework": framework, "seed": seed, "what": what, "weight_names": list(first),
            "weight_labels": names, "nondeterministic": differs(first, second), "sizes": {}}


def prepare(path: str, folder: Path, framework: str, what: str, seed: int,
            sizes: list[int]) -> PreparedDocument:
    """Every size's inputs and references; the document is saved before each size with the
    size it prepares (PARTIAL_KEY), so a preparer killed at a size that hung leaves the sizes
    done, and the next one (given the sizes left) goes on from them with the same weights."""
    family = family_of(framework)
    if family is None:
        raise ValueError(f"{framework} runs no model file (torch, jax or a keras-* framework)")
    device = backend_module(framework, "device").open_device("cpu")
    impl = importlib.import_module(IMPLEMENTATIONS[framework])
    user = load_user_module(path)
    tolerance = getattr(user, "tolerance", None)
    document = started_document(folder) or first_weights(family, impl, user, path, folder,
                                                         framework, what, seed, sizes)
    with np.load(folder / WEIGHTS_FILE) as stored:
        weights = {name: stored[name] for name in document["weight_names"]}
    base: ModelInputs = {"model": path, "what": what, "seed": seed, "weights": weights,
                         "weight_names": list(weights)}
    # found at the first size: every size's cells are checked the same way
    random_step = next((str(entry.get("random_step")) for entry in document["sizes"].values()
                        if entry.get("random_step")), "")
    for batch in sorted(sizes):
        document[PARTIAL_KEY] = batch  # type: ignore[literal-required]  # a note, not a field
        write_json_atomic(folder / PREPARED_FILE, document)
        try:
            entry = prepare_size(user, path, family, impl, device, folder, batch, base,
                                 tolerance, check_repeat=not document["sizes"],
                                 random_step=random_step)
            random_step = random_step or entry.get("random_step", "")
        except (UserCodeError, NotAModel) as exc:
            entry = {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - one size failing leaves the others
            entry = {"error": user_error_text(exc, path, f"preparing batch {batch}")}
        document["sizes"][str(batch)] = entry
    document.pop(PARTIAL_KEY, None)  # type: ignore[misc]
    write_json_atomic(folder / PREPARED_FILE, document)
    return document


def main(argv: list[str]) -> int:
    path, folder, framework, what, seed, sizes, out_path = argv
    try:
        document = prepare(path, Path(folder), framework, what, int(seed),
                           [int(size) for size in sizes.split(",")])
        summary = {"ok": True, "nondeterministic": document["nondeterministic"],
                   "sizes": document["sizes"]}
    except (UserCodeError, NotAModel) as exc:
        summary = {"ok": False, "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the cells will say why, from prepared.json
        summary = {"ok": False, "error": user_error_text(exc, path, "preparing the weights")}
    if not summary["ok"]:
        write_json_atomic(Path(folder) / PREPARED_FILE, {
            "error": summary["error"], "weight_names": [], "nondeterministic": "",
            "sizes": {str(size): {"error": summary["error"]} for size in sizes.split(",")}})
    write_json_atomic(Path(out_path), json.loads(json.dumps(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The WorkloadSpec of a user's model file: framework-free, rebuilt in every worker by name.

A cell's workload is `model-<file stem>`; the registry hands any such name to `spec_for_name`.
Everything that differs between files travels in the cell's parameters (the file's path, what
is timed, the seed, the prepared folder) or in that folder (weights, inputs, CPU references),
so a worker needs no inspection of its own. What each framework family runs is declared here
(Capability), not found out by trying.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness.spec import Capability, Check, Param, WorkloadSpec

NAME_PREFIX = "model-"
FAMILIES: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "keras": ("keras-jax", "keras-torch", "keras-tensorflow"),
    "jax": ("jax",),
}
IMPLEMENTATIONS = {
    "torch": "harness.backends.torch.usermodel",
    "keras-jax": "harness.backends.keras.usermodel",
    "keras-torch": "harness.backends.keras.usermodel",
    "keras-tensorflow": "harness.backends.keras.usermodel",
    "jax": "harness.backends.jax.usermodel",
}
VARIANTS = ("as-written", "resident", "compiled", "cuda-graph", "steps-per-execution")
WHAT = ("train", "inference", "step")
# Keras' steps-per-execution variant: fit (or predict) compiled with this many steps in one
# execution (with HARNESS_KERAS_STEP = "train_on_batch": one call is this many batches).
STEPS_PER_EXECUTION = 8
# A Keras model is timed the way its author trains it, through fit(): one timed call is fit
# (or predict) over KERAS_FIT_STEPS copies of the batch, enough that fit's fixed cost per call
# (data adapter, epoch iterator, callbacks, the first steps' start-up: a few ms on keras-jax,
# tens of ms on keras-tensorflow) is spread thin. Seed 002's model at batch 32 on the 2-core
# CPU VM, per step against a plain 1,875-step fit() epoch (interleaved, paired): 64 steps a
# call 1.11x (keras-jax), 128 steps 1.05x (keras-jax), 1.09x (keras-tensorflow), 1.01x
# (keras-torch), 256 steps 1.02x (keras-jax), 512 steps 0.99-1.02x. Fewer copies where they
# would hold more than KERAS_FIT_BLOCK_BYTES of inputs: such a step dwarfs fit's fixed cost
# anyway. The case's extra records steps_per_call, which the report divides by.
KERAS_FIT_STEPS = 256
KERAS_FIT_BLOCK_BYTES = 256 * 2**20
# The module-level setting a Keras model file may give to be timed otherwise, and its values:
# "fit" (the default), or "train_on_batch" (one call is one train_on_batch / predict_on_batch,
# as a loop of the file's own would run them).
KERAS_STEP_OPTION = "HARNESS_KERAS_STEP"
KERAS_STEPS = ("fit", "train_on_batch")
# Results kept from the first calls of a cell and compared with the CPU reference: the losses
# of the first two training calls (the second shows the update; a Keras fit call's loss is the
# mean over its steps), or the first output.
KEPT_RESULTS = {"train": 2, "inference": 1, "step": 1}
DEFAULT_SEED = 0

ON_CPU_RESIDENT = "on the CPU the data already sits where the model runs: same as as-written"
TORCH_ONLY = "a torch variant"
KERAS_ONLY = "a Keras variant (fit/predict with steps_per_execution)"
CAPABILITIES = {
    "torch": Capability(
        variants=("as-written", "resident", "compiled", "cuda-graph"),
        refused={"steps-per-execution": KERAS_ONLY},
        refused_on={"cpu": {"resident": ON_CPU_RESIDENT,
                            "cuda-graph": "CUDA graphs need a GPU device"}}),
    "jax": Capability(
        variants=("as-written", "compiled"),
        refused={"resident": "JAX cells always keep the data on the device",
                 "cuda-graph": TORCH_ONLY, "steps-per-execution": KERAS_ONLY}),
    **{framework: Capability(
        variants=("as-written", "compiled", "steps-per-execution"),
        refused={"resident": "Keras cells place the data with keras.device",
                 "cuda-graph": TORCH_ONLY})
       for framework in FAMILIES["keras"]},
}
# Keras' torch backend runs one step per call (its trainer refuses steps_per_execution > 1).
CAPABILITIES["keras-torch"] = Capability(
    variants=("as-written", "compiled"),
    refused={"resident": "Keras cells place the data with keras.device",
             "cuda-graph": TORCH_ONLY,
             "steps-per-execution": "Keras' torch backend refuses steps_per_execution > 1"})

NOTES = (
    "as-written: the model as the file builds it, inputs copied from host numpy on every call "
    f"(torch), Keras' fit / predict over {KERAS_FIT_STEPS} copies of the batch per call (fewer "
    "for large inputs; jit_compile='auto'; time per step = call / steps_per_call), or "
    f"train_on_batch / predict_on_batch where the file sets {KERAS_STEP_OPTION} = "
    "'train_on_batch', JAX ops unjitted; "
    "resident (torch, GPU): inputs put on the device once; compiled: torch.compile / Keras "
    "jit_compile=True / jax.jit of the whole step; cuda-graph (torch, GPU): the step captured "
    "once and replayed; steps-per-execution (keras-jax, keras-tensorflow): the same fit/predict "
    f"with steps_per_execution={STEPS_PER_EXECUTION} (train_on_batch files: fit over "
    f"{STEPS_PER_EXECUTION} batches in one execution). Training: "
    "Adam (each framework's defaults), mean squared error against fixed random targets of the "
    "output's shape (or the file's targets(batch, rng)). Matmuls and convolutions in float32 "
    "(TF32 off), as the CPU reference computes them."
)


def family_of(framework: str) -> str | None:
    return next((family for family, members in FAMILIES.items() if framework in members), None)


def spec_for_name(name: str, info: Mapping[str, Any] | None = None) -> WorkloadSpec:
    """The spec of `model-<stem>`; `info` (the inspector's report) narrows it for planning.

    Without info (in a worker) it accepts every family's frameworks: the cell names one.
    """
    info = dict(info or {})
    family = info.get("family")
    frameworks = info.get("frameworks") or (FAMILIES[family] if family else
                                            tuple(IMPLEMENTATIONS))
    default_what = info.get("default_what", "train")
    summary = info.get("summary") or "your model (harness compare --model FILE)"
    return WorkloadSpec(
        name=name,
        kind="usermodel",
        summary=summary,
        sweep="batch",
        params={
            "batch": Param([1, 32], [2, 8], "batch sizes (set with --sizes)"),
            "what": Param(default_what, default_what, "what one timed call is: train (one "
                          "Adam step), inference, or step (your step(net, *inputs))",
                          kind=str, minimum=None, choices=WHAT),
            "seed": Param(DEFAULT_SEED, DEFAULT_SEED, "seed of the shared initial weights",
                          minimum=0),
            "model": Param(info.get("path", ""), info.get("path", ""), "the model file "
                           "(set with --model)", kind=str, minimum=None),
        },
        variants=VARIANTS,
        frameworks=tuple(frameworks),
        implementations={fw: IMPLEMENTATIONS[fw] for fw in frameworks},
        make_inputs=make_inputs,
        check=check,
        notes=NOTES,
        overhead_pairs=(("as-written", "resident", "host->device copies"),),
        capabilities={fw: CAPABILITIES[fw] for fw in frameworks},
        counts_flops=True,
    )


# --- the prepared folder: written once by usermodel.prepare, read by every cell ----

PREPARED_PARAM = "prepared"
WEIGHTS_FILE = "weights.npz"
PREPARED_FILE = "prepared.json"


def case_file(folder: str | Path, batch: int) -> Path:
    return Path(folder) / f"batch-{batch}.npz"


def read_prepared(folder: str | Path) -> dict[str, Any]:
    return json.loads((Path(folder) / PREPARED_FILE).read_text())


class PreparationFailed(RuntimeError):
    """The preparing child could not make this batch size's inputs or reference."""


def wants_deterministic(inputs: Mapping[str, Any]) -> bool:
    """Whether a cell must also give its model's deterministic-mode output (a random step)."""
    return (inputs.get("size") or {}).get("compare") == "deterministic"


def make_inputs(case: Mapping[str, Any], variant: str) -> dict[str, Any]:
    """The batch's inputs, targets and weights from the run folder: every cell the same arrays."""
    folder = case.get(PREPARED_PARAM)
    if not folder:
        raise PreparationFailed("no prepared folder: run through harness compare --model")
    prepared = read_prepared(folder)
    size = prepared["sizes"].get(str(case["batch"]), {})
    if size.get("error"):
        raise PreparationFailed(size["error"])
    with np.load(case_file(folder, case["batch"])) as stored:
        arrays = {name: stored[name] for name in stored.files}
    with np.load(Path(folder) / WEIGHTS_FILE) as stored:
        weights = {name: stored[name] for name in stored.files}
    inputs = [arrays[f"x{index}"] for index in range(size["inputs"])]
    return {"x": inputs, "targets": arrays.get("targets"), "weights": weights,
            "weight_names": prepared["weight_names"], "reference": arrays.get("reference"),
            "reference_spe": arrays.get("reference_spe"), "size": size,
            "reference_eval": arrays.get("reference_eval"),
            "nondeterministic": prepared.get("nondeterministic", ""),
            "model": case["model"], "what": case["what"], "seed": case["seed"]}


def flat_result(values: Any) -> np.ndarray:
    """Every number of a result (arrays, scalars, nested lists) as one float64 vector."""
    if isinstance(values, (list, tuple)):
        parts = [flat_result(value) for value in values]
        return np.concatenate(parts) if parts else np.zeros(0)
    return np.asarray(values, dtype=np.float64).ravel()


def parity(result: np.ndarray, reference: np.ndarray, scale: float, bound: float,
           formula: str) -> Check:
    """max |result - reference| / scale against the bound; a shape change or NaN fails."""
    if result.shape != reference.shape:
        return Check(False, "max_rel_diff", math.inf, bound,
                     f"result has {result.size} numbers, the CPU reference {reference.size}")
    if not np.all(np.isfinite(result)):
        return Check(False, "max_rel_diff", math.inf, bound, "non-finite numbers in the result")
    difference = float(np.max(np.abs(result - reference))) if result.size else 0.0
    value = difference / scale if scale > 0 else (0.0 if difference == 0 else math.inf)
    detail = (f"vs the CPU reference: largest difference {difference:.3g} "
              f"({value:.2g} of max |reference| {scale:.3g}), bound {bound:.2g} = {formula}")
    return Check(value <= bound, "max_rel_diff", value, bound, detail)


def check(case: Mapping[str, Any], variant: str, inputs: dict[str, Any],
          output: dict[str, Any]) -> Check:
    """Same answer as the CPU reference made from the same weights, or say why not.

    A step random by design (dropout) is compared in the model's deterministic mode, where the
    same weights and inputs must give the reference's output; where even that is random, it is
    not compared (passed, metric 'not_compared', the reason in the detail).
    """
    size = inputs["size"]
    compare = size.get("compare", "step")
    if compare == "none":
        return Check(True, "not_compared", 0.0, 0.0, f"not compared: {size['not_compared']}")
    if compare == "deterministic":
        verdict = parity(flat_result(output.get("deterministic", [])),
                         flat_result(inputs["reference_eval"]), size["eval_scale"],
                         size["eval_bound"], size["eval_bound_formula"])
        return Check(verdict.passed, "deterministic_mode_diff", verdict.value, verdict.bound,
                     f"compared the model in its deterministic mode "
                     f"({size['deterministic_mode']}) on the shared weights and inputs, since "
                     f"{size['random_step']}; the step is timed as written; {verdict.detail}")
    reference = inputs["reference_spe"] if output.get("spe") else inputs["reference"]
    result = flat_result(output["result"])
    verdict = parity(result, flat_result(reference), size["scale"], size["bound"],
                     size["bound_formula"])
    why = inputs["nondeterministic"] or size.get("nondeterministic", "")
    if why:  # equal answers cannot be asked of a model the seed does not fix
        return Check(False, verdict.metric, verdict.value, verdict.bound,
                     f"not comparable: {why}; {verdict.detail}")
    return verdict

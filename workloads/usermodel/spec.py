"""The WorkloadSpec of a user's model file: framework-free, rebuilt in every worker by name.

A cell's workload is `model-<file stem>`; the registry hands any such name to `spec_for_name`.
Everything that differs between files travels in the cell's parameters (the file's path, what
is timed, the seed, the prepared folder) or in that folder (weights, inputs, CPU references),
so a worker needs no inspection of its own. What each framework family runs is declared here
(Capability), not found out by trying.
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from harness.core import registry
from harness.core.fixes import Catalogue, Fix
from harness.spec import Check, Param, ReportHints, WorkloadSpec
from harness.variants import Capability, declared_name
from harness.variants import variant_parts as split_parts
from harness.workloads.usermodel import lossscale
from harness.workloads.usermodel.fixes import (
    AUTOGRAD_FUNCTIONAL,
    CATALOGUE,
    COMPUTE,
    COPY,
    DEVICE,
    DIAGNOSIS_KINDS,
    FAMILIES,
    HOST,
    KERAS_ONLY,
    KERAS_PLACES,
    LAUNCH,
    MEMORY,
    ON_CPU_RESIDENT,
    ON_GPU_THREADS,
    STEPS_PER_EXECUTION,
    THREADS,
    TORCH_ONLY,
    TRANSFER,
    thread_counts,
)
from harness.workloads.usermodel.precision import (
    SENSITIVITY_KEY,
    judged,
    judged_precision,
    precision_text,
)

# Names the backends and the other modules of this plugin read from here, where they always
# lived; they are declared once, in the catalogue's module.
__all__ = ["AUTOGRAD_FUNCTIONAL", "COMPUTE", "COPY", "DEVICE", "DIAGNOSIS_KINDS", "FAMILIES",
           "HOST", "KERAS_ONLY", "KERAS_PLACES", "LAUNCH", "MEMORY", "ON_CPU_RESIDENT",
           "ON_GPU_THREADS", "STEPS_PER_EXECUTION", "THREADS", "TORCH_ONLY", "TRANSFER",
           "declared_name", "split_parts", "thread_counts"]
NAME_PREFIX = "model-"
IMPLEMENTATIONS = {
    "torch": "harness.backends.torch.usermodel",
    "keras-jax": "harness.backends.keras.usermodel",
    "keras-torch": "harness.backends.keras.usermodel",
    "keras-tensorflow": "harness.backends.keras.usermodel",
    "jax": "harness.backends.jax.usermodel",
}
# The canonical order of a composed name's parts ("resident+compiled+bf16"): the catalogue's
# (workloads/usermodel/fixes.py), where every list about fixes below comes from.
VARIANTS = CATALOGUE.variants
COMPILE_MODES = tuple(item.name for item in CATALOGUE.fixes if item.exclusive == "compile")
# torch.compile's mode per compile variant (None: the default mode).
TORCH_COMPILE_MODE = {"compiled": None, "compile-reduce-overhead": "reduce-overhead",
                      "compile-max-autotune": "max-autotune-no-cudagraphs"}
# The fixes that change how torch.autograd.functional.jacobian / hessian differentiate the
# step (their arguments, not the user's file): vectorize=True runs the backward passes, one per
# output element, as one batched pass (vmap); forward mode, vectorized, pushes one batched
# tangent per input element instead. Each part's keyword arguments per function.
JACOBIAN_PARTS: dict[str, dict[str, dict[str, object]]] = {
    "jacobian-forward": {"jacobian": {"vectorize": True, "strategy": "forward-mode"},
                         "hessian": {"vectorize": True, "outer_jacobian_strategy": "forward-mode"}},
    "jacobian-vectorized": {"jacobian": {"vectorize": True}, "hessian": {"vectorize": True}},
}
NO_JACOBIAN = (f"the file calls no {AUTOGRAD_FUNCTIONAL}.jacobian or hessian: nothing to "
               "vectorize")
WHAT = ("train", "inference", "step")
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

# The parts a backend refuses on a CPU, with why.
GPU_ONLY = CATALOGUE.gpu_only()
# Parts only torch's implementation runs, and those a Keras implementation runs.
TORCH_PARTS = tuple(name for name in CATALOGUE.family_parts("torch")
                    if name not in CATALOGUE.family_parts("keras") + CATALOGUE.family_parts("jax"))
KERAS_PARTS = ("as-written", *CATALOGUE.family_parts("keras"))
CAPABILITIES = CATALOGUE.capabilities()
FIXES = {item.name: item for item in CATALOGUE.fixes}
FAMILY_LABELS = {"torch": "torch", "keras": "Keras", "jax": "JAX"}
DEVICE_LABELS = {"cpu": "CPU", "gpu": "GPU"}


def where_it_runs(item: Fix) -> str:
    """' (torch, GPU)': the families (or frameworks, where a family's are refused it) and
    the kind of device a fix applies to; '' where it runs everywhere."""
    whose: list[str] = []
    for family in sorted(item.families, key=list(FAMILIES).index):
        members = [name for name in FAMILIES[family] if name not in item.refused]
        whose += [FAMILY_LABELS[family]] if len(members) == len(FAMILIES[family]) else members
    if whose == [FAMILY_LABELS[family] for family in FAMILIES]:
        whose = []  # every framework runs it
    kinds = [DEVICE_LABELS[kind] for kind in sorted(item.devices)] \
        if len(item.devices) == 1 else []
    return f" ({', '.join(whose + kinds)})" if whose + kinds else ""


NOTES = (
    "as-written: the model as the file builds it, inputs copied from host numpy on every call "
    f"(torch), Keras' fit / predict over {KERAS_FIT_STEPS} copies of the batch per call (fewer "
    "for large inputs; jit_compile='auto'; time per step = call / steps_per_call), or "
    f"train_on_batch / predict_on_batch where the file sets {KERAS_STEP_OPTION} = "
    "'train_on_batch', JAX ops unjitted. Every other variant changes one thing of it: "
    + "; ".join(f"{item.name}{where_it_runs(item)}: {item.does}" for item in CATALOGUE.fixes)
    + ". Join variants with '+' to run them at once (resident+compiled+bf16). "
    + ", ".join(item.name for item in CATALOGUE.fixes if item.changes_numerics)
    + " may move the float32 reference's answer as far as rounding the inputs and weights to "
    "their format moves it (measured, 4x, stated in the check). Training: "
    "Adam (each framework's defaults), mean squared error against fixed random targets of the "
    "output's shape (or the file's targets(batch, rng)). Matmuls and convolutions in float32 "
    "(TF32 off unless the variant is tf32), as the CPU reference computes them."
)


def catalogue() -> Catalogue:
    """The fixes a model file has here: the catalogue and the settings' plugins' fixes."""
    return registry.fix_catalogue()


# --- composed variants -------------------------------------------------------------------------

def variant_parts(name: str) -> tuple[str, ...]:
    """The parts of a (possibly composed) variant name; BadInput for a part not declared."""
    return catalogue().parts(name)


def compose_variant(parts: Iterable[str]) -> str:
    """The one name of a set of parts, in VARIANTS' order: the same set, the same cell."""
    return catalogue().compose(parts)


def conflict(parts: Iterable[str]) -> str | None:
    """Why these parts cannot run at once; None when they can."""
    return catalogue().conflict(parts)


def fixes_for(framework: str, device: str, *, cpu_cores: int | None = None) -> list[str]:
    """The single variants worth trying for `framework` on `device`, in VARIANTS' order:
    the fixes of its family for that kind of device that its implementation runs there.
    threads-N: one name per count of thread_counts (none without cpu_cores)."""
    return catalogue().fixes_for(framework, device, cpu_cores)


def autograd_functional_calls(source: str) -> list[str]:
    """Which of torch.autograd.functional's jacobian / hessian the file's text uses: names or
    attributes `jacobian` / `hessian` in a file that imports or names torch.autograd.functional
    (`torch.autograd.functional.jacobian(...)`, `from torch.autograd.functional import
    jacobian`, `import torch.autograd.functional as F`). A reading of the text, not of what
    runs: the worker counts the calls it changed (a jacobian fix whose step made none says so)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names: set[str] = set()
    functional = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            functional |= node.module == AUTOGRAD_FUNCTIONAL or (
                node.module == "torch.autograd"
                and any(alias.name == "functional" for alias in node.names))
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            functional |= any(alias.name == AUTOGRAD_FUNCTIONAL for alias in node.names)
        elif isinstance(node, ast.Attribute):
            functional |= node.attr == "functional" and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "autograd"
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return sorted(names & {"jacobian", "hessian"}) if functional else []


def family_of(framework: str) -> str | None:
    return CATALOGUE.family_of(framework)


def file_capability(framework: str, info: Mapping[str, Any]) -> Capability:
    """What FRAMEWORK runs of this file: its CAPABILITIES, less what the inspection's report
    shows cannot apply: the Jacobian fixes where the file calls no torch.autograd.functional
    jacobian / hessian, channels-last where no input is 4-D. Without the report (in a worker):
    the declared capability; the worker finds out itself (VariantUnavailable)."""
    declared = catalogue().capability(framework)
    if framework != "torch":
        return declared
    refused: dict[str, str] = {}
    if "autograd_functional" in info and not info["autograd_functional"]:
        refused.update(dict.fromkeys(JACOBIAN_PARTS, NO_JACOBIAN))
    shapes = [tuple(entry.get("shape") or ()) for entry in info.get("inputs") or ()]
    if shapes and not any(len(shape) == 4 for shape in shapes):
        refused["channels-last"] = (f"channels-last lays out 4-D (image) tensors; this model's "
                                    f"inputs have none ({', '.join(map(str, shapes))})")
    return replace(declared, refused={**declared.refused, **refused}) if refused else declared


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
    known = catalogue()
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
        variants=known.variants,
        frameworks=tuple(frameworks),
        implementations={fw: IMPLEMENTATIONS[fw] for fw in frameworks},
        make_inputs=make_inputs,
        check=check,
        notes=NOTES,
        report=ReportHints(overhead_pairs=(("as-written", "resident", "host->device copies"),)),
        capabilities={fw: file_capability(fw, info) for fw in frameworks},
        variant_conflict=known.conflict,
        counts_flops=True,
    )


# --- the prepared folder: written once by usermodel.prepare, read by every cell ----

PREPARED_PARAM = "prepared"
WEIGHTS_FILE = "weights.npz"
PREPARED_FILE = "prepared.json"
# In prepared.json while its preparer runs: the batch size it prepares now (a preparer killed
# there leaves the sizes before it; harness.workloads.usermodel.plan goes on without that one).
PARTIAL_KEY = "preparing"
# The seconds per call of each batch's first float32 reference run, written as the preparation
# goes (a batch being called: its start), so that `harness advise` knows the CPU step's cost
# before its first worker, and even where its budget stopped the preparation (issue 64).
REFERENCE_CALLS_FILE = "reference-calls.json"


def case_file(folder: str | Path, batch: int) -> Path:
    return Path(folder) / f"batch-{batch}.npz"


class SizeEntry(TypedDict, total=False):
    """One batch size's entry of prepared.json: how many input arrays, how its cells are
    compared (scale, bound and its formula; for a random step the deterministic-mode ones, or
    why nothing is compared), or the error that left it without inputs."""

    inputs: int
    scale: float
    bound: float
    bound_formula: str
    compare: str  # "deterministic" or "none"; absent: the step's own results
    random_step: str
    deterministic_mode: str
    eval_scale: float
    eval_bound: float
    eval_bound_formula: str
    not_compared: str
    nondeterministic: str
    error: str


class PreparedDocument(TypedDict, total=False):
    """prepared.json: what usermodel.prepare made (or the reason it made nothing)."""

    framework: str
    seed: int
    what: str
    weight_names: list[str]
    weight_labels: list[str]
    nondeterministic: str
    sizes: dict[str, SizeEntry]
    error: str


class ModelInputs(TypedDict, total=False):
    """A cell's inputs (make_inputs): the batch, targets and initial weights every cell shares,
    the CPU references the check compares with, and which file runs how."""

    x: list[np.ndarray]
    targets: np.ndarray | None
    weights: dict[str, np.ndarray]
    weight_names: list[str]
    reference: np.ndarray | None
    reference_spe: np.ndarray | None
    reference_eval: np.ndarray | None
    size: SizeEntry
    nondeterministic: str
    model: str
    what: str
    seed: int


def read_prepared(folder: str | Path) -> PreparedDocument:
    document: PreparedDocument = json.loads((Path(folder) / PREPARED_FILE).read_text())
    return document


class PreparationFailed(RuntimeError):
    """The preparing child could not make this batch size's inputs or reference."""


def training_targets(inputs: ModelInputs) -> np.ndarray:
    """A training cell's targets (prepared for what=train only: an inference cell has none)."""
    targets = inputs.get("targets")
    if targets is None:
        raise PreparationFailed("no targets: these inputs were prepared for inference")
    return targets


def wants_deterministic(inputs: ModelInputs) -> bool:
    """Whether a cell must also give its model's deterministic-mode output (a random step)."""
    return (inputs.get("size") or SizeEntry()).get("compare") == "deterministic"


def shared_weights(path: Path) -> dict[str, np.ndarray]:
    """The shared weights file's arrays, read-only, read once per worker while the file is
    unchanged (its size and time are the key)."""
    status = path.stat()
    return _read_weights(str(path), status.st_size, status.st_mtime_ns)


@functools.lru_cache(maxsize=1)
def _read_weights(path: str, size: int, modified_ns: int) -> dict[str, np.ndarray]:
    """Why once: every case of a worker starts from the same weights (a 4-layer LM's 140 MB
    were read again for each batch size, 0.12 s a case). Read-only: the cases share them, so
    a backend that wrote into them would change the next case's start; each copies them."""
    with np.load(path) as stored:
        weights = {name: stored[name] for name in stored.files}
    for array in weights.values():
        array.setflags(write=False)
    return weights


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
    weights = shared_weights(Path(folder) / WEIGHTS_FILE)
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


def check(case: Mapping[str, Any], variant: str, inputs: ModelInputs,
          output: Mapping[str, Any]) -> Check:
    """Same answer as the CPU reference made from the same weights, or say why not.

    A step random by design (dropout) is compared in the model's deterministic mode, where the
    same weights and inputs must give the reference's output; where even that is random, it is
    not compared (passed, metric 'not_compared', the reason in the detail). A variant that
    computes in a lower precision (bf16, fp16, tf32) may move the answer as far as the model
    itself moves under that precision's rounding, measured on its device (precision.py); the
    detail states both figures, and the check keeps what `harness check` recomputes them from.
    """
    size = inputs["size"]
    compare = size.get("compare", "step")
    measured = (output.get("extra") or {}).get(SENSITIVITY_KEY)
    precision = judged_precision(variant, measured)
    if compare == "none":
        return Check(True, "not_compared", 0.0, 0.0, f"not compared: {size['not_compared']}")
    if compare == "deterministic":
        verdict = judged(flat_result(output.get("deterministic", [])),
                         flat_result(inputs["reference_eval"]), size["eval_scale"],
                         size["eval_bound"], size["eval_bound_formula"], precision, measured,
                         "output")
        sentence = precision_text(verdict.passed, verdict.value, verdict.bound, precision,
                                  "output", measured)
        return Check(verdict.passed, "deterministic_mode_diff", verdict.value, verdict.bound,
                     f"compared the model in its deterministic mode "
                     f"({size['deterministic_mode']}) on the shared weights and inputs, since "
                     f"{size['random_step']}; the step is timed as written; "
                     f"{sentence}{verdict.detail}", verdict.sensitivity)
    reference = inputs["reference_spe"] if output.get("spe") else inputs["reference"]
    compared = {"train": "loss", "inference": "output"}.get(inputs.get("what", ""), "result")
    extra = output.get("extra") or {}
    # fp16's loss scaler: each kept loss beside fp32's after as many applied updates.
    applied, scaler_said = lossscale.over_applied_updates(output["result"],
                                                         flat_result(reference), extra)
    verdict = judged(flat_result(output["result"]), applied, size["scale"],
                     size["bound"], size["bound_formula"], precision, measured, compared)
    why = inputs["nondeterministic"] or size.get("nondeterministic", "")
    if why:  # equal answers cannot be asked of a model the seed does not fix
        return Check(False, verdict.metric, verdict.value, verdict.bound,
                     f"not comparable: {why}; {verdict.detail}")
    if precision is None:
        return verdict
    detail = precision_text(verdict.passed, verdict.value, verdict.bound, precision, compared,
                            measured) + verdict.detail + lossscale.settled_text(extra)
    skipped = extra.get(lossscale.SKIPPED_COUNT)
    if scaler_said or skipped:  # a record without call numbers says how many only
        detail += scaler_said or (f"; the loss scaler skipped {skipped} of the first "
                                  "optimizer updates (inf/NaN gradients at its scale)")
    return Check(verdict.passed, verdict.metric, verdict.value, verdict.bound, detail,
                 verdict.sensitivity)

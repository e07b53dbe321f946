"""The WorkloadSpec of a user's model file: framework-free, rebuilt in every worker by name.

A cell's workload is `model-<file stem>`; the registry hands any such name to `spec_for_name`.
Everything that differs between files travels in the cell's parameters (the file's path, what
is timed, the seed, the prepared folder) or in that folder (weights, inputs, CPU references),
so a worker needs no inspection of its own. What each framework family runs is declared here
(Capability), not found out by trying.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from harness.core.units import device_kind
from harness.spec import (
    BadInput,
    Capability,
    Check,
    Param,
    WorkloadSpec,
    compose,
    declared_name,
    is_declared,
)
from harness.spec import variant_parts as split_parts
from harness.workloads.usermodel.precision import (
    SENSITIVITY_KEY,
    judged,
    judged_precision,
    precision_text,
)

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
# The canonical order of a composed name's parts ("resident+compiled+bf16"): this tuple's.
VARIANTS = ("as-written", "jacobian-forward", "jacobian-vectorized", "resident", "compiled",
            "compile-reduce-overhead",
            "compile-max-autotune", "cuda-graph", "steps-per-execution", "bf16", "fp16", "tf32",
            "channels-last", "cudnn-benchmark", "threads-N")
COMPILE_MODES = ("compiled", "compile-reduce-overhead", "compile-max-autotune")
# torch.compile's mode per compile variant (None: the default mode).
TORCH_COMPILE_MODE = {"compiled": None, "compile-reduce-overhead": "reduce-overhead",
                      "compile-max-autotune": "max-autotune-no-cudagraphs"}
THREADS = "threads-N"
# The fixes that change how torch.autograd.functional.jacobian / hessian differentiate the
# step (their arguments, not the user's file): vectorize=True runs the backward passes, one per
# output element, as one batched pass (vmap); forward mode, vectorized, pushes one batched
# tangent per input element instead. Each part's keyword arguments per function.
JACOBIAN_PARTS: dict[str, dict[str, dict[str, object]]] = {
    "jacobian-forward": {"jacobian": {"vectorize": True, "strategy": "forward-mode"},
                         "hessian": {"vectorize": True, "outer_jacobian_strategy": "forward-mode"}},
    "jacobian-vectorized": {"jacobian": {"vectorize": True}, "hessian": {"vectorize": True}},
}
AUTOGRAD_FUNCTIONAL = "torch.autograd.functional"
NO_JACOBIAN = (f"the file calls no {AUTOGRAD_FUNCTIONAL}.jacobian or hessian: nothing to "
               "vectorize")
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
KERAS_PLACES = "Keras cells place the data with keras.device"
GPU_ONLY = {
    "cuda-graph": "CUDA graphs need a GPU device",
    "compile-reduce-overhead": "reduce-overhead's gain is Inductor's CUDA graphs: on a CPU it "
                               "is the default compiled",
    "fp16": "float16 autocast is a GPU fix (CPUs have no fast float16 matmuls; try bf16)",
    "tf32": "TF32 is a GPU tensor-core format",
    "cudnn-benchmark": "cuDNN runs on a GPU only",
}
ON_GPU_THREADS = ("the CPU's thread count: a GPU cell's host threads launch kernels, the "
                  "arithmetic runs on the device")
# Parts only torch's implementation runs (every other family refuses them as TORCH_ONLY).
TORCH_PARTS = (*JACOBIAN_PARTS, "resident", "compile-reduce-overhead", "compile-max-autotune",
               "cuda-graph", "tf32", "channels-last", "cudnn-benchmark", THREADS)
KERAS_PARTS = ("as-written", "compiled", "steps-per-execution", "bf16", "fp16")
JAX_FP16 = ("float16 needs loss scaling the file's optax chain would have to carry; bf16 is "
            "JAX's mixed precision")
CAPABILITIES = {
    "torch": Capability(
        variants=tuple(name for name in VARIANTS if name != "steps-per-execution"),
        refused={"steps-per-execution": KERAS_ONLY},
        refused_on={"cpu": {"resident": ON_CPU_RESIDENT, **GPU_ONLY},
                    "gpu": {THREADS: ON_GPU_THREADS}}),
    "jax": Capability(
        variants=("as-written", "compiled", "bf16"),
        refused={**dict.fromkeys(TORCH_PARTS, TORCH_ONLY),
                 "resident": "JAX cells always keep the data on the device",
                 "steps-per-execution": KERAS_ONLY, "fp16": JAX_FP16}),
    **{framework: Capability(
        variants=KERAS_PARTS,
        refused={**dict.fromkeys(TORCH_PARTS, TORCH_ONLY), "resident": KERAS_PLACES},
        refused_on={"cpu": {"fp16": GPU_ONLY["fp16"]}})
       for framework in FAMILIES["keras"]},
}
# Keras' torch backend runs one step per call (its trainer refuses steps_per_execution > 1).
CAPABILITIES["keras-torch"] = Capability(
    variants=tuple(name for name in KERAS_PARTS if name != "steps-per-execution"),
    refused={**dict.fromkeys(TORCH_PARTS, TORCH_ONLY), "resident": KERAS_PLACES,
             "steps-per-execution": "Keras' torch backend refuses steps_per_execution > 1"},
    refused_on={"cpu": {"fp16": GPU_ONLY["fp16"]}})

NOTES = (
    "as-written: the model as the file builds it, inputs copied from host numpy on every call "
    f"(torch), Keras' fit / predict over {KERAS_FIT_STEPS} copies of the batch per call (fewer "
    "for large inputs; jit_compile='auto'; time per step = call / steps_per_call), or "
    f"train_on_batch / predict_on_batch where the file sets {KERAS_STEP_OPTION} = "
    "'train_on_batch', JAX ops unjitted. Every other variant changes one thing of it: "
    "jacobian-forward / jacobian-vectorized (torch, a file that calls "
    f"{AUTOGRAD_FUNCTIONAL}.jacobian or hessian): those calls made with strategy='forward-mode' "
    "(hessian: outer_jacobian_strategy) and vectorize=True / with vectorize=True, the file "
    "unchanged; "
    "resident (torch, GPU): inputs put on the device once; compiled: torch.compile / Keras "
    "jit_compile=True / jax.jit of the whole step (torch: inputs still copied each call; "
    "resident+compiled: both); compile-reduce-overhead (torch, GPU) and compile-max-autotune "
    "(torch): torch.compile(mode='reduce-overhead' / 'max-autotune-no-cudagraphs'); "
    "cuda-graph (torch, GPU): the step, its inputs resident, captured once and replayed; "
    "steps-per-execution (keras-jax, keras-tensorflow): the same fit/predict "
    f"with steps_per_execution={STEPS_PER_EXECUTION} (train_on_batch files: fit over "
    f"{STEPS_PER_EXECUTION} batches in one execution); bf16: torch.autocast(bfloat16) around "
    "forward and loss / Keras policy mixed_bfloat16 / JAX params and inputs cast to bfloat16 "
    "in apply (loss and update in float32); fp16 (torch, Keras; GPU): autocast float16 with a "
    "GradScaler / policy mixed_float16 (its LossScaleOptimizer); tf32 (torch, GPU): TF32 "
    "matmuls and convolutions; channels-last (torch, 4-D inputs): model and inputs in "
    "torch.channels_last; cudnn-benchmark (torch, GPU): cudnn.benchmark=True; threads-N "
    "(torch, CPU): torch.set_num_threads(N). Join variants with '+' to run them at once "
    "(resident+compiled+bf16). bf16, fp16 and tf32 may move the float32 reference's answer as "
    "far as rounding the inputs and weights to their format moves it (measured, 4x, stated in "
    "the check). Training: "
    "Adam (each framework's defaults), mean squared error against fixed random targets of the "
    "output's shape (or the file's targets(batch, rng)). Matmuls and convolutions in float32 "
    "(TF32 off unless the variant is tf32), as the CPU reference computes them."
)


# --- composed variants -------------------------------------------------------------------------

def variant_parts(name: str) -> tuple[str, ...]:
    """The parts of a (possibly composed) variant name; BadInput for a part not declared."""
    parts = split_parts(name)
    for part in parts:
        if not is_declared(part, VARIANTS):
            raise BadInput(f"unknown variant {part!r} of a model file; valid: "
                           f"{', '.join(VARIANTS)} (threads-N: N a positive integer), "
                           "joined with '+'")
    return parts


def compose_variant(parts: Iterable[str]) -> str:
    """The one name of a set of parts, in VARIANTS' order: the same set, the same cell."""
    chosen = tuple(parts)
    for part in chosen:
        variant_parts(part)
    return compose(chosen, VARIANTS)


def conflict(parts: Iterable[str]) -> str | None:
    """Why these parts cannot run at once; None when they can."""
    chosen = tuple(parts)
    declared = [declared_name(part) for part in chosen]
    repeated = sorted({name for name in declared if declared.count(name) > 1})
    if repeated:
        return f"{repeated[0]} given twice: a cell runs one of each"
    if "as-written" in declared and len(declared) > 1:
        return "as-written is the model unchanged: it joins no other variant"
    compiles = [name for name in declared if name in COMPILE_MODES]
    if len(compiles) > 1:
        return f"{' and '.join(compiles)} are two compile modes: one torch.compile per step"
    if compiles and "cuda-graph" in declared:
        return (f"{compiles[0]} with cuda-graph: the hand-made capture runs eager steps; "
                "compile-reduce-overhead is torch.compile's own CUDA graphs")
    strategies = [name for name in declared if name in JACOBIAN_PARTS]
    if len(strategies) > 1:
        return f"{' and '.join(strategies)} are two Jacobian strategies: one at a time"
    if "bf16" in declared and "fp16" in declared:
        return "bf16 and fp16 are two autocast precisions: one at a time"
    if "fp16" in declared and "cuda-graph" in declared:
        return ("fp16's GradScaler checks the gradients for inf on the host every step, which "
                "a captured graph cannot do")
    return None


# --- the fixes `harness advise` tries: what each is, where it applies, when it helps ----------

# Diagnosis kinds: harness/measure/devicetime.py's Diagnosis.kind for a GPU cell, and
# "host-bound" (a CPU cell, or a GPU cell whose host work dominates) / "copy-bound" (the
# host<->device copies; devicetime calls it transfer-bound).
LAUNCH, TRANSFER, COMPUTE, MEMORY, DEVICE = ("launch-bound", "transfer-bound", "compute-bound",
                                             "memory-bound", "device-bound")
HOST, COPY = "host-bound", "copy-bound"
DIAGNOSIS_KINDS = frozenset({LAUNCH, TRANSFER, COMPUTE, MEMORY, DEVICE, HOST, COPY})


@dataclass(frozen=True)
class Fix:
    """One fix of a user's model, as a variant a cell runs: where it applies and why it helps."""

    name: str  # the variant's name (THREADS stands for every threads-N)
    families: frozenset[str]  # torch, keras, jax
    devices: frozenset[str]  # "cpu", "gpu"
    changes_numerics: bool  # judged by the model's sensitivity to its rounding
    helps_when: frozenset[str]  # DIAGNOSIS_KINDS
    why: str


def _fix(name: str, families: str, devices: str, numerics: bool, helps: set[str],
         why: str) -> Fix:
    return Fix(name, frozenset(families.split()), frozenset(devices.split()), numerics,
               frozenset(helps), why)


FIXES: dict[str, Fix] = {fix.name: fix for fix in (
    _fix("jacobian-forward", "torch", "cpu gpu", False, {LAUNCH, HOST, COMPUTE, MEMORY, DEVICE},
         f"{AUTOGRAD_FUNCTIONAL}.jacobian / hessian in forward mode, vectorized: one batched "
         "tangent per input element instead of one backward pass per output element, far "
         "less work where the outputs outnumber the inputs"),
    _fix("jacobian-vectorized", "torch", "cpu gpu", False, {LAUNCH, HOST},
         f"{AUTOGRAD_FUNCTIONAL}.jacobian / hessian with vectorize=True: the backward passes, "
         "one per output element, run as one batched pass instead of a Python loop of small "
         "launches"),
    _fix("resident", "torch", "gpu", False, {TRANSFER, COPY},
         "the inputs are put on the device once, so no step waits on a host-to-device copy"),
    _fix("compiled", "torch keras jax", "cpu gpu", False, {LAUNCH, HOST, MEMORY, DEVICE},
         "the compiler fuses elementwise ops into fewer kernels and drops per-op Python "
         "dispatch, so fewer launches and fewer trips through memory"),
    _fix("compile-reduce-overhead", "torch", "gpu", False, {LAUNCH, HOST},
         "the compiled step is replayed as CUDA graphs: one launch for all its kernels"),
    _fix("compile-max-autotune", "torch", "cpu gpu", False, {COMPUTE, MEMORY, DEVICE},
         "Inductor times several kernel configurations per matmul and fused op and keeps the "
         "fastest"),
    _fix("cuda-graph", "torch", "gpu", False, {LAUNCH, HOST},
         "the whole step is captured once and replayed: one launch instead of one per kernel"),
    _fix("steps-per-execution", "keras", "cpu gpu", False, {LAUNCH, HOST},
         f"Keras runs {STEPS_PER_EXECUTION} steps per compiled execution, paying its "
         "per-execution host overhead once for all of them"),
    _fix("bf16", "torch keras jax", "cpu gpu", True, {COMPUTE, MEMORY, DEVICE},
         "matmuls and convolutions run in bfloat16 on tensor cores (or a CPU's bf16 units) "
         "and move half the bytes"),
    _fix("fp16", "torch keras", "gpu", True, {COMPUTE, MEMORY, DEVICE},
         "matmuls and convolutions run in float16 on tensor cores and move half the bytes"),
    _fix("tf32", "torch", "gpu", True, {COMPUTE, DEVICE},
         "float32 matmuls and convolutions run on TF32 tensor cores, several times the "
         "float32 FLOP rate"),
    _fix("channels-last", "torch", "cpu gpu", False, {COMPUTE, MEMORY, DEVICE},
         "convolutions read NHWC, the layout cuDNN's tensor-core and oneDNN's kernels use, "
         "without transposing every activation"),
    _fix("cudnn-benchmark", "torch", "gpu", False, {COMPUTE, DEVICE},
         "cuDNN times its convolution algorithms for these shapes once and keeps the fastest"),
    _fix(THREADS, "torch", "cpu", False, {HOST, COMPUTE},
         "the CPU's intra-op thread count: fewer threads spin less on small ops, more use "
         "every core on large ones"),
)}


def thread_counts(cpu_cores: int | None, default_threads: int | None = None) -> list[int]:
    """Thread counts worth a cell: half and all of the physical cores, each only where it
    differs from the count the cell would use anyway (torch's default: the physical cores)."""
    if not cpu_cores or cpu_cores < 1:
        return []
    default = default_threads or cpu_cores
    return [count for count in sorted({max(1, cpu_cores // 2), cpu_cores}) if count != default]


def fixes_for(framework: str, device: str, *, cpu_cores: int | None = None,
              default_threads: int | None = None) -> list[str]:
    """The single variants worth trying for `framework` on `device`, in VARIANTS' order:
    the fixes of its family for that kind of device that its implementation runs there.
    threads-N: one name per count of thread_counts (none without cpu_cores)."""
    family, kind = family_of(framework), device_kind(device)
    capability = CAPABILITIES.get(framework)
    names = []
    for fix in FIXES.values():
        if family not in fix.families or kind not in fix.devices:
            continue
        candidates = ([f"threads-{count}" for count in thread_counts(cpu_cores, default_threads)]
                      if fix.name == THREADS else [fix.name])
        names += [name for name in candidates
                  if capability is None or capability.refusal(name, kind) is None]
    return names


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
    return next((family for family, members in FAMILIES.items() if framework in members), None)


def file_capability(framework: str, info: Mapping[str, Any]) -> Capability:
    """What FRAMEWORK runs of this file: its CAPABILITIES, less what the inspection's report
    shows cannot apply: the Jacobian fixes where the file calls no torch.autograd.functional
    jacobian / hessian, channels-last where no input is 4-D. Without the report (in a worker):
    the declared capability; the worker finds out itself (VariantUnavailable)."""
    declared = CAPABILITIES[framework]
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
        capabilities={fw: file_capability(fw, info) for fw in frameworks},
        variant_conflict=conflict,
        counts_flops=True,
    )


# --- the prepared folder: written once by usermodel.prepare, read by every cell ----

PREPARED_PARAM = "prepared"
WEIGHTS_FILE = "weights.npz"
PREPARED_FILE = "prepared.json"


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
    verdict = judged(flat_result(output["result"]), flat_result(reference), size["scale"],
                     size["bound"], size["bound_formula"], precision, measured, compared)
    why = inputs["nondeterministic"] or size.get("nondeterministic", "")
    if why:  # equal answers cannot be asked of a model the seed does not fix
        return Check(False, verdict.metric, verdict.value, verdict.bound,
                     f"not comparable: {why}; {verdict.detail}")
    if precision is None:
        return verdict
    detail = precision_text(verdict.passed, verdict.value, verdict.bound, precision, compared,
                            measured) + verdict.detail
    skipped = (output.get("extra") or {}).get("skipped_updates")
    if skipped:
        detail += (f"; the loss scaler skipped {skipped} of the first optimizer updates "
                   "(inf/NaN gradients at its starting scale)")
    return Check(verdict.passed, verdict.metric, verdict.value, verdict.bound, detail,
                 verdict.sensitivity)

"""The fixes of a user's model: one catalogue entry each (harness.core.fixes.Fix).

Everything the harness says or decides about a fix reads its entry here: the variants a model
file has and their order, what each framework runs (spec.CAPABILITIES), what a backend refuses
off a GPU, which fixes run together, the fixes `harness advise` tries on a device, the
diagnoses under which each is expected to help, what its worker costs before it ran, the
lines that explain it, and the variants the GPU step prediction models (`predicted`; pinned
copies are modelled there before any cell runs them). A new fix is an entry here plus the
backend code that applies it.
"""

from __future__ import annotations

from harness.core.diagnosis import BOUND_KINDS, DiagnosisKind
from harness.core.fixes import COST_AUTOTUNE, COST_COMPILE, Catalogue, fix

# Diagnosis kinds (harness.core.diagnosis): devicetime's for a GPU cell, HOST for a CPU cell
# (or a GPU cell whose host work dominates), COPY for the host<->device copies (devicetime
# calls it TRANSFER). Typed as the catalogue's keys are (str): a member is its string.
LAUNCH: str = DiagnosisKind.LAUNCH
TRANSFER: str = DiagnosisKind.TRANSFER
COMPUTE: str = DiagnosisKind.COMPUTE
MEMORY: str = DiagnosisKind.MEMORY
DEVICE: str = DiagnosisKind.DEVICE
HOST: str = DiagnosisKind.HOST
COPY: str = DiagnosisKind.COPY
DIAGNOSIS_KINDS = BOUND_KINDS

FAMILIES: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "keras": ("keras-jax", "keras-torch", "keras-tensorflow"),
    "jax": ("jax",),
}
THREADS = "threads-N"
AUTOGRAD_FUNCTIONAL = "torch.autograd.functional"
# Keras' steps-per-execution variant: fit (or predict) compiled with this many steps in one
# execution (with HARNESS_KERAS_STEP = "train_on_batch": one call is this many batches).
STEPS_PER_EXECUTION = 8

TORCH_ONLY = "a torch variant"
KERAS_ONLY = "a Keras variant (fit/predict with steps_per_execution)"
KERAS_PLACES = "Keras cells place the data with keras.device"
ON_CPU_RESIDENT = "on the CPU the data already sits where the model runs: same as as-written"
ON_GPU_THREADS = ("the CPU's thread count: a GPU cell's host threads launch kernels, the "
                  "arithmetic runs on the device")
FP16_ON_CPU = ("float16 autocast is a GPU fix (CPUs have no fast float16 matmuls; try bf16)")
JAX_FP16 = ("float16 needs loss scaling the file's optax chain would have to carry; bf16 is "
            "JAX's mixed precision")
COMPILE_WHY = {LAUNCH: "compiling fuses {kernels} into fewer launches"}
COMPILE_WHY_OTHERWISE = "compiling fuses the step's ops and drops the Python dispatch"
HALVES = "{name} halves the bytes moved and runs matmuls on tensor cores"
JACOBIAN_FILE = (f"in a file that calls {AUTOGRAD_FUNCTIONAL}.jacobian or hessian, those calls "
                 "made with ")

def thread_counts(cpu_cores: int | None, default_threads: int | None = None) -> list[int]:
    """Thread counts worth a cell: half and all of the physical cores, each only where it
    differs from the count the cell would use anyway (torch's default: the physical cores)."""
    if not cpu_cores or cpu_cores < 1:
        return []
    default = default_threads or cpu_cores
    return [count for count in sorted({max(1, cpu_cores // 2), cpu_cores}) if count != default]


FIXES = (
    fix("jacobian-forward", "torch", "cpu gpu", {LAUNCH, HOST, COMPUTE, MEMORY, DEVICE},
        f"{AUTOGRAD_FUNCTIONAL}.jacobian / hessian in forward mode, vectorized: one batched "
        "tangent per input element instead of one backward pass per output element, far "
        "less work where the outputs outnumber the inputs",
        JACOBIAN_FILE + "strategy='forward-mode' (hessian: outer_jacobian_strategy) and "
        "vectorize=True, the file unchanged", exclusive="jacobian"),
    fix("jacobian-vectorized", "torch", "cpu gpu", {LAUNCH, HOST},
        f"{AUTOGRAD_FUNCTIONAL}.jacobian / hessian with vectorize=True: the backward passes, "
        "one per output element, run as one batched pass instead of a Python loop of small "
        "launches", JACOBIAN_FILE + "vectorize=True, the file unchanged", exclusive="jacobian"),
    fix("resident", "torch", "gpu", {TRANSFER, COPY},
        "the inputs are put on the device once, so no step waits on a host-to-device copy",
        "inputs put on the device once",
        measured_why="inputs stay on the device: {copies} per call are gone",
        refused={"jax": "JAX cells always keep the data on the device", "keras": KERAS_PLACES},
        refused_on={"cpu": ON_CPU_RESIDENT}, predicted=True),
    fix("compiled", "torch keras jax", "cpu gpu", {LAUNCH, HOST, MEMORY, DEVICE},
        "the compiler fuses elementwise ops into fewer kernels and drops per-op Python "
        "dispatch, so fewer launches and fewer trips through memory",
        "torch.compile / Keras jit_compile=True / jax.jit of the whole step (torch: inputs "
        "still copied each call; resident+compiled: both)",
        measured_why=COMPILE_WHY_OTHERWISE, measured_why_when=COMPILE_WHY, exclusive="compile",
        cost=COST_COMPILE, predicted=True),
    fix("compile-reduce-overhead", "torch", "gpu", {LAUNCH, HOST},
        "the compiled step is replayed as CUDA graphs: one launch for all its kernels",
        "torch.compile(mode='reduce-overhead')",
        measured_why=COMPILE_WHY_OTHERWISE, measured_why_when=COMPILE_WHY, needs_gpu=True,
        refused_on={"cpu": "reduce-overhead's gain is Inductor's CUDA graphs: on a CPU it is "
                           "the default compiled"}, exclusive="compile", cost=COST_COMPILE),
    fix("compile-max-autotune", "torch", "cpu gpu", {COMPUTE, MEMORY, DEVICE},
        "Inductor times several kernel configurations per matmul and fused op and keeps the "
        "fastest", "torch.compile(mode='max-autotune-no-cudagraphs')",
        measured_why=COMPILE_WHY_OTHERWISE, measured_why_when=COMPILE_WHY, exclusive="compile",
        cost=COST_AUTOTUNE),
    fix("cuda-graph", "torch", "gpu", {LAUNCH, HOST},
        "the whole step is captured once and replayed: one launch instead of one per kernel",
        "the step, its inputs resident, captured once and replayed",
        measured_why="the graph replays {kernels} in one launch", needs_gpu=True,
        refused_on={"cpu": "CUDA graphs need a GPU device"},
        conflicts={"compile": "{other} with cuda-graph: the hand-made capture runs eager steps; "
                              "compile-reduce-overhead is torch.compile's own CUDA graphs",
                   "fp16": "fp16's GradScaler checks the gradients for inf on the host every "
                           "step, which a captured graph cannot do"}, predicted=True),
    fix("steps-per-execution", "keras", "cpu gpu", {LAUNCH, HOST},
        f"Keras runs {STEPS_PER_EXECUTION} steps per compiled execution, paying its "
        "per-execution host overhead once for all of them",
        f"the same fit/predict with steps_per_execution={STEPS_PER_EXECUTION} (train_on_batch "
        f"files: fit over {STEPS_PER_EXECUTION} batches in one execution)",
        measured_why="one execution runs several steps: fewer host round trips",
        refused={"keras-torch": "Keras' torch backend refuses steps_per_execution > 1"}),
    fix("bf16", "torch keras jax", "cpu gpu", {COMPUTE, MEMORY, DEVICE},
        "matmuls and convolutions run in bfloat16 on tensor cores (or a CPU's bf16 units) "
        "and move half the bytes",
        "torch.autocast(bfloat16) around forward and loss / Keras policy mixed_bfloat16 / JAX "
        "params and inputs cast to bfloat16 in apply (loss and update in float32)",
        measured_why=HALVES, changes_numerics=True, exclusive="autocast", predicted=True),
    fix("fp16", "torch keras", "gpu", {COMPUTE, MEMORY, DEVICE},
        "matmuls and convolutions run in float16 on tensor cores and move half the bytes",
        "autocast float16 with a GradScaler / policy mixed_float16 (its LossScaleOptimizer)",
        measured_why=HALVES, changes_numerics=True, needs_gpu=True,
        refused={"jax": JAX_FP16}, refused_on={"cpu": FP16_ON_CPU}, exclusive="autocast",
        predicted=True),
    fix("tf32", "torch", "gpu", {COMPUTE, DEVICE},
        "float32 matmuls and convolutions run on TF32 tensor cores, several times the "
        "float32 FLOP rate", "TF32 matmuls and convolutions",
        measured_why="TF32 matmuls run on tensor cores at fp32 range", changes_numerics=True,
        needs_gpu=True, refused_on={"cpu": "TF32 is a GPU tensor-core format"}),
    fix("channels-last", "torch", "cpu gpu", {COMPUTE, MEMORY, DEVICE},
        "convolutions read NHWC, the layout cuDNN's tensor-core and oneDNN's kernels use, "
        "without transposing every activation",
        "model and inputs in torch.channels_last (4-D inputs)",
        measured_why="convolutions in the layout cuDNN's fastest kernels read"),
    fix("cudnn-benchmark", "torch", "gpu", {COMPUTE, DEVICE},
        "cuDNN times its convolution algorithms for these shapes once and keeps the fastest",
        "cudnn.benchmark=True",
        measured_why="cuDNN times its convolution algorithms once and keeps the fastest",
        needs_gpu=True, refused_on={"cpu": "cuDNN runs on a GPU only"}),
    fix(THREADS, "torch", "cpu", {HOST, COMPUTE},
        "the CPU's intra-op thread count: fewer threads spin less on small ops, more use "
        "every core on large ones", "torch.set_num_threads(N)",
        measured_why="the CPU's thread count set to {number}",
        refused_on={"gpu": ON_GPU_THREADS}, counts=thread_counts),
)

# Modelled by the GPU step prediction, run by no cell yet: its entry waits for a backend.
PINNED = fix("pinned", "torch", "gpu", {TRANSFER, COPY},
             "the host->device copies start from page-locked memory and run asynchronously, so "
             "the step no longer blocks on them", "inputs copied from pinned host memory",
             predicted=True)

CATALOGUE = Catalogue(
    FIXES, FAMILIES, modelled=(PINNED,),
    groups={"compile": "are two compile modes: one torch.compile per step",
            "jacobian": "are two Jacobian strategies: one at a time",
            "autocast": "are two autocast precisions: one at a time"},
    family_only={"torch": TORCH_ONLY, "keras": KERAS_ONLY, "jax": "a JAX variant"})

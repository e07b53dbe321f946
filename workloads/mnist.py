"""Seed experiment 3: Keras MNIST, a small and a wide dense network, trained epoch by epoch.

One timed call is one training epoch (per_call timing: epoch 1 is the cold one, tracing and
allocator growth included), timed in `blocks` blocks of steps (harness.measure.blocks): every
block but epoch 1's first is a warm sample, scaled to seconds per epoch. Both frameworks train
on the same float32 pixels in the same per-epoch order (generated here with numpy), then report
test accuracy, which the check reads together with the exact parameter count of the seed's
Keras models.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

import numpy as np

from harness.core.fixes import Catalogue, variant
from harness.spec import (
    CallPlan,
    CaseParams,
    Check,
    Param,
    ReportHints,
    WorkloadSpec,
    int_param,
    str_param,
)
from harness.workloads.mnist_data import epoch_order, load_mnist, repeat_to, validate_data

SMALL_HIDDEN = (128,)
WIDE_HIDDEN = (1000, 1000)
DROPOUT = 0.2
PIXELS = 28 * 28
CLASSES = 10

# Test accuracy is not a rounding-error quantity: training in float32 with a different
# summation order, or TF vs torch, moves it by ~0.01, so no u-based model applies and a fixed
# bound is right. It separates "learned" from "broken" (NaN loss, shuffled labels, a layer
# not trained): chance is 1/10; with the quick params (2048 samples, 2 epochs, batch 32: 128
# Adam steps) on the embedded subset, measured test accuracy is 0.87-0.89 (small) and 0.89-0.91
# (wide) in both frameworks, and full runs reach 0.92-0.98. 0.5 sits between the two.
ACCURACY_BOUND = 0.5
CHANCE_ACCURACY = 1 / 10
TRAINED_ACCURACY = 0.85  # a little under the lowest measured on the quick params
# Below this many optimizer steps (e.g. --sizes 4096 with --quick) no model has learned enough
# to judge, so only the parameter count and a finite, valid accuracy are checked.
MIN_STEPS_TO_JUDGE = 100


class DigitsInputs(TypedDict):
    """What every MNIST cell trains and evaluates on (pixels scaled to [0, 1], float32;
    labels int64) and the net it builds; what its extras report about the data."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    hidden_units: tuple[int, ...]
    dropout: float
    data_source: str
    samples_distinct: int


class MnistInputs(DigitsInputs):
    """One process's inputs: `orders[epoch]` is the sample order of that epoch's batches."""

    orders: np.ndarray
# Measured on n test digits, an accuracy p has binomial standard error sqrt(p(1-p)/n). The
# bound is judged when it lies this many standard errors from both chance and a trained model.
JUDGE_SIGMAS = 4.0


def min_test_samples() -> int:
    """Test digits needed for the bound to be JUDGE_SIGMAS standard errors from either side.

    17 with the constants above; the embedded subset has 1,000, the full set 10,000.
    """
    return max(math.ceil(JUDGE_SIGMAS**2 * p * (1 - p) / (p - ACCURACY_BOUND) ** 2)
               for p in (CHANCE_ACCURACY, TRAINED_ACCURACY))


def dense_param_count(hidden_units: tuple[int, ...]) -> int:
    """Weights plus biases of Flatten -> Dense(hidden...) -> Dense(10); dropout has none."""
    widths = (PIXELS, *hidden_units, CLASSES)
    return sum(fan_in * fan_out + fan_out for fan_in, fan_out in itertools.pairwise(widths))


def steps_per_epoch(case: CaseParams) -> int:
    """Batches in one epoch; the last, partial batch counts (fit and DataLoader keep it)."""
    return math.ceil(int_param(case, "train_samples") / int_param(case, "batch_size"))


def blocks_per_epoch(case: CaseParams) -> int:
    """Timed blocks of steps per epoch (1: the epoch is one sample)."""
    return int_param(case, "blocks") if "blocks" in case else 1


def make_inputs_for(hidden_units: tuple[int, ...]) -> Callable[[CaseParams, str],
                                                                dict[str, Any]]:
    """make_inputs for one architecture: data, per-epoch orders, and the layer widths (arrays,
    numbers and names side by side: what every backend's make_task reads)."""

    def make_inputs(case: CaseParams, variant: str, settings: Any = None) -> dict[str, Any]:
        # SETTINGS: the run's (harness.core.settings), whose mnist_download lets the loader
        # fetch the full set; None (a test, a library call): never.
        download = bool(settings is not None and settings.mnist_download)
        digits = load_mnist(str_param(case, "data") if "data" in case else "", download)
        train_samples = int_param(case, "train_samples")
        train_index = repeat_to(train_samples, len(digits.y_train), "train")
        test_count = min(int_param(case, "test_samples"), len(digits.y_test))
        test_index = repeat_to(test_count, len(digits.y_test), "test")
        orders = np.stack([epoch_order(epoch, len(train_index))
                           for epoch in range(int_param(case, "epochs"))])
        return {
            # Scaled by 1/255 once, before training, as the seed does (float32, as Keras casts).
            "x_train": digits.x_train[train_index].astype(np.float32) / np.float32(255),
            "y_train": digits.y_train[train_index].astype(np.int64),
            "x_test": digits.x_test[test_index].astype(np.float32) / np.float32(255),
            "y_test": digits.y_test[test_index].astype(np.int64),
            "orders": orders,  # orders[epoch]: the sample order of that epoch's batches
            "hidden_units": hidden_units,
            "dropout": DROPOUT,
            "data_source": digits.source,
            "samples_distinct": int(min(train_samples, len(digits.y_train))),
        }

    return make_inputs


def check_for(hidden_units: tuple[int, ...]) -> Callable[..., Check]:
    """The check for one architecture: exact parameter count, test accuracy above a bound."""
    expected_params = dense_param_count(hidden_units)

    def check(case: CaseParams, variant: str, inputs: Mapping[str, Any],
              output: Mapping[str, Any]) -> Check:
        extra = output["extra"]
        params, accuracy = int(extra["params"]), float(extra["accuracy"])
        total_steps = steps_per_epoch(case) * int_param(case, "epochs")
        tested = (len(inputs["y_test"]) if "y_test" in inputs
                  else int_param(case, "test_samples"))
        judged = total_steps >= MIN_STEPS_TO_JUDGE and tested >= min_test_samples()
        bound = ACCURACY_BOUND if judged else 0.0
        if params != expected_params:
            return Check(False, "test_accuracy", accuracy, bound,
                         f"model has {params:,} parameters, the seed's has {expected_params:,}")
        if not 0.0 <= accuracy <= 1.0:  # NaN lands here too
            return Check(False, "test_accuracy", accuracy, bound, f"accuracy {accuracy} invalid")
        why = "" if judged else (f" (only {total_steps} steps on {tested} test digits: "
                                 "accuracy not judged)")
        return Check(accuracy >= bound, "test_accuracy", accuracy, bound,
                     f"test accuracy {accuracy:.3f} (bound {bound:.2f}), "
                     f"{params:,} parameters{why}")

    return check


def training_matmul_flops_per_sample(hidden_units: tuple[int, ...]) -> int:
    """Matmul FLOPs one training sample executes (2 per multiply-add): per dense layer the
    forward product and the weight gradient, and the input gradient of every layer but the
    first (nothing asks for the pixels' gradient, so no framework computes it). Bias adds and
    bias gradients, activations, dropout, the loss and Adam's elementwise update are not
    counted: they are a few FLOPs per weight per step, not per weight per sample. This is what
    torch's FlopCounterMode counts for the same training step, to the FLOP (measured:
    13,090,816 and 294,272,000 per 32-sample step of the small and the wide net); the rule of
    thumb 6 x parameters over-states it by 49% (small) and 17% (wide)."""
    widths = (PIXELS, *hidden_units, CLASSES)
    weights = [fan_in * fan_out for fan_in, fan_out in itertools.pairwise(widths)]
    return 6 * sum(weights) - 2 * weights[0]


def training_flops_for(hidden_units: tuple[int, ...]) -> Callable[[CaseParams], float]:
    """Matmul FLOPs of one epoch (training_matmul_flops_per_sample x samples)."""
    per_sample = training_matmul_flops_per_sample(hidden_units)
    return lambda case: float(per_sample * int_param(case, "train_samples"))


# What the declared count covers, said beside every rate made from it.
FLOPS_COVERAGE = ("matmul FLOPs executed (forward, weight gradients, input gradients but the "
                  "first layer's); bias, activation, dropout, loss and Adam not counted")


PARAMS = {
    "batch_size": Param([32], [32], "batch sizes (set with --sizes; the seed used 32)"),
    "epochs": Param(10, 2, "training epochs; each is one timed call"),
    "train_samples": Param(60000, 2048, "training samples per epoch (small data is repeated)"),
    "test_samples": Param(10000, 1000, "test samples for accuracy (capped at what exists)"),
    "data": Param("", "", "MNIST .npz (set with --data); empty: Keras cache, else embedded",
                  kind=str, minimum=None),
    # Quick epochs (64 steps) cut in 16 would be blocks of ~10 ms, where a scheduler hiccup on
    # a shared machine is the measurement; a quick run is a smoke test, one sample per epoch.
    "blocks": Param(16, 1, "timed blocks of steps per epoch; each but epoch 1's first is a warm "
                    "sample (1: one sample per epoch)"),
}
# Steps Keras runs inside one tf.function call with steps_per_execution (one host round trip
# per this many steps instead of per step); a constant, not a parameter, so runs with and
# without these variants keep the same parameters and merge.
STEPS_PER_EXECUTION = 32
NOTES = (
    "as-written: Keras model.fit under tf.device (softmax + sparse CE; Keras 3's default "
    "jit_compile='auto' turns XLA on when a GPU is visible) / torch nn.Sequential with a "
    "DataLoader and .to(device) per batch. preloaded: whole set on the device once, batches "
    "gathered there (torch index slicing; TF tf.function train step). compiled: as-written "
    "plus torch.compile(model) / Keras jit_compile=True (XLA). Each fit call is one epoch "
    "(shuffle=False over the shared numpy order), so both frameworks see identical batches. "
    "Against the host-bound GPU step (torch, all on preloaded data): adam-fused / adam-foreach: "
    "Adam(fused=True) / Adam(foreach=True); cuda-graph: gather, forward, backward and "
    "Adam(capturable=True) captured once in a CUDA graph and replayed per batch (the first "
    "batches run eagerly to warm up; a short last batch runs eagerly); reduce-overhead: "
    "the whole training step (gather, forward, backward, Adam(capturable=True)) under "
    "torch.compile(mode='reduce-overhead'): Inductor's CUDA graphs (captured, or torch's "
    "reasons not to, in extra['cuda_graphs']). Keras: steps-per-execution: as-written with "
    f"steps_per_execution={STEPS_PER_EXECUTION}; compiled-steps: that plus jit_compile=True. "
    "keras-jax / keras-torch / keras-tensorflow: the same Keras code on each Keras 3 backend "
    "(preloaded: fit on device tensors; compiled: jit_compile=True). jax: a jitted step with "
    "optax Adam (preloaded: batches sliced on the device; compiled: the epoch as one lax.scan). "
    "tensorflow (on request) runs keras-tensorflow's code on TensorFlow's devices: placement "
    "with keras.device, which on that backend is tf.device, as the seed placed it."
)
# keras-tensorflow took the place of tensorflow here (issue 18): the TF cell was Keras code.
# The three keras-* frameworks run one module, and so does `--framework tensorflow` (on request,
# not by default): its own Keras trainer, a copy of this one, is retired (issue 21). Keras'
# device scope on its TensorFlow backend is tf.device, so the seed's placement (variables
# created and fit run under `with tf.device(...)`) holds for both.
FRAMEWORKS = ("torch", "jax", "keras-tensorflow", "keras-jax", "keras-torch")
KERAS_MODULE = "harness.backends.keras.training"
IMPLEMENTATIONS = {"torch": "harness.backends.torch.mnist", "jax": "harness.backends.jax.mnist",
                   "keras-tensorflow": KERAS_MODULE, "keras-jax": KERAS_MODULE,
                   "keras-torch": KERAS_MODULE, "tensorflow": KERAS_MODULE}
# The variants, declared once (harness.core.fixes): what each implementation runs, for the
# planner, which writes a refused cell as an `unavailable` row without a worker (the backends
# keep their own checks as a safety net). Every implementation runs as-written, preloaded and
# compiled; against the host-bound GPU step each framework has its own, the others say why not.
# cuda-graph and reduce-overhead need a GPU everywhere (device_only_variants).
KERAS_REFUSES = ("written for native torch, not Keras; Keras' counterparts for a host-bound "
                 "step are compiled (jit_compile) and steps-per-execution")
TORCH_REFUSES = ("a Keras fit option (steps_per_execution); torch's counterparts are cuda-graph "
                 "and reduce-overhead")
JAX_REFUSES = "not written for jax (its 'compiled' variant runs the whole epoch as one jitted scan)"
ONE_STEP_PER_CALL = ("Keras' torch backend runs one step per call: steps_per_execution must be "
                     "1 with the PyTorch backend")
TORCH_ONLY = {"keras": KERAS_REFUSES, "jax": JAX_REFUSES}
KERAS_ONLY = {"torch": TORCH_REFUSES, "jax": JAX_REFUSES, "keras-torch": ONE_STEP_PER_CALL}
CATALOGUE = Catalogue(
    (variant("preloaded", "torch jax keras"),
     variant("compiled", "torch jax keras"),
     variant("adam-fused", "torch", refused=TORCH_ONLY),
     variant("adam-foreach", "torch", refused=TORCH_ONLY),
     variant("cuda-graph", "torch", gpu_only=True, refused=TORCH_ONLY),
     variant("reduce-overhead", "torch", gpu_only=True, refused=TORCH_ONLY),
     variant("steps-per-execution", "keras", refused=KERAS_ONLY),
     variant("compiled-steps", "keras", refused=KERAS_ONLY)),
    {"torch": ("torch",), "jax": ("jax",),
     "keras": ("keras-tensorflow", "keras-jax", "keras-torch", "tensorflow")})
# The Keras fit options (steps_per_execution), which torch's implementation refuses.
KERAS_ONLY_VARIANTS = tuple(name for name in CATALOGUE.family_parts("keras")
                            if name not in CATALOGUE.family_parts("torch"))


# The report's epochs-and-accuracy view: how the sweep and the accuracy read, chance with 10
# classes, and the case extras that hold the accuracy and where the data came from.
EPOCHS_ACCURACY_LABELS = {"size": "batch size", "metric": "test accuracy", "chance": 0.1,
                          "accuracy_field": "accuracy", "data_source_field": "data_source",
                          "distinct_samples_field": "samples_distinct",
                          "accuracy_check": "accuracy"}


def mnist_spec(name: str, hidden_units: tuple[int, ...], summary: str) -> WorkloadSpec:
    return WorkloadSpec(
        name=name,
        kind="mnist",
        frameworks=FRAMEWORKS,
        implementations=IMPLEMENTATIONS,
        capabilities=CATALOGUE.capabilities(),
        summary=summary,
        sweep="batch_size",
        params=PARAMS,
        variants=CATALOGUE.variants,
        run=CallPlan(
            timing="per_call",
            calls=lambda case: int_param(case, "epochs"),
            call_blocks=blocks_per_epoch,
            # --rounds N: the epochs are shared out, not repeated; with fewer epochs than
            # rounds, each round trains one epoch of its share of the samples.
            round_split=("epochs", "train_samples")),
        flops=training_flops_for(hidden_units),
        flops_covers=FLOPS_COVERAGE,
        make_inputs=make_inputs_for(hidden_units),
        inputs_read_settings=True,
        check=check_for(hidden_units),
        validate_data=validate_data,
        notes=NOTES,
        report=ReportHints(
            overhead_pairs=(("as-written", "preloaded", "input pipeline"),),
            epoch_samples_param="train_samples",
            views=("epochs-accuracy",),
            view_labels={"epochs-accuracy": EPOCHS_ACCURACY_LABELS}),
        # CUDA graphs exist on a GPU only; on a CPU reduce-overhead would be plain `compiled`.
        device_only_variants=CATALOGUE.device_only,
    )


SMALL = mnist_spec(
    "mnist-small", SMALL_HIDDEN,
    "seed 3: Flatten-Dense(128)-Dropout-Dense(10), 101,770 params; one call = one epoch",
)
WIDE = mnist_spec(
    "mnist-wide", WIDE_HIDDEN,
    "seed 3: Flatten-Dense(1000)x2 with Dropout-Dense(10), 1,796,010 params; one call = one epoch",
)

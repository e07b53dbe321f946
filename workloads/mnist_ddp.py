"""Data-parallel scaling of the seed-3 MNIST nets: 1..N processes (torch DDP) or replicas (TF).

The question after "is one GPU faster than my CPU": do two GPUs halve my epoch? Every process
trains the same net on its own shard of each global batch (per-process batch `batch_size`, so
the global batch is processes x batch_size) and the gradients are all-reduced every step.
One timed call is one epoch over the same `train_samples` in total, whatever the number of
processes, so ideal scaling halves the epoch at 2 processes; the step time (epoch / steps per
process) stays flat when scaling is perfect. Accuracy is comparable across process counts
because every run sees the same data; only the global batch grows.

Framework-free: the shard of each rank, the check and the spec. Each rank builds its own
inputs with `rank_inputs` (deterministic numpy), so no 200 MB array travels between processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np

from harness.core.fixes import Catalogue, one_each
from harness.measure.timing import Measurement
from harness.spec import BadInput, CallPlan, Check, Param, ReportHints, WorkloadSpec
from harness.workloads import mnist
from harness.workloads.mnist_data import epoch_order, load_mnist, repeat_to, validate_data

NETS = {"small": mnist.SMALL_HIDDEN, "wide": mnist.WIDE_HIDDEN}
# Fewer optimizer steps than this (all epochs, per process) and no net has learned enough to
# judge; the parameter count and a valid accuracy are still checked.
MIN_STEPS_TO_JUDGE = mnist.MIN_STEPS_TO_JUDGE
# Test accuracy within this of the 1-process run counts as parity (quick params on the embedded
# digits: 1 and 2 gloo processes measured 0.02 apart; the global batch doubles at 2).
PARITY_POINTS = 0.05


class RankInputs(mnist.DigitsInputs):
    """One rank's inputs: `batches[epoch]` holds that rank's shard of each global batch."""

    batches: np.ndarray


class DeviceMemorySummary(TypedDict):
    """A cell's device memory over its ranks, in bytes (None where no rank reported it)."""

    allocated: int | None
    reserved: int | None
    allocated_sum: int | None
    reserved_sum: int | None
    per_rank: list[dict[str, int | None]]
    measured_in: str


class RankResult(TypedDict):
    """What rank 0 (torch) or the child (TF) hands back to the cell's worker: the timed
    epochs, the cell's extras and the device memory of every rank."""

    measurement: Measurement
    extra: dict[str, object]
    device_memory: DeviceMemorySummary


def hidden_units(case: Mapping[str, Any]) -> tuple[int, ...]:
    return NETS[case["net"]]


def steps_per_epoch(case: Mapping[str, Any]) -> int:
    """Optimizer steps per process in one timed epoch: whole global batches only (drop_last).

    `steps` > 0 caps it, for a short timed epoch on a large data set.
    """
    full = case["train_samples"] // (case["processes"] * case["batch_size"])
    return min(full, case["steps"]) if case["steps"] > 0 else full


def samples_per_epoch(case: Mapping[str, Any]) -> int:
    """Samples the whole job trains on in one timed epoch (every process together)."""
    return steps_per_epoch(case) * case["processes"] * case["batch_size"]


def rank_batches(case: Mapping[str, Any], epoch: int, rank: int) -> np.ndarray:
    """(steps, batch_size) sample indices of one rank in one epoch.

    Global step s takes the shared epoch order's slice [s*P*B, (s+1)*P*B) and rank r its r-th
    block of B: the same samples per global step as one process with batch P*B, the way
    DistributedSampler shards and MirroredStrategy splits a global batch.
    """
    shape = (steps_per_epoch(case), case["processes"], case["batch_size"])
    return global_order(case, epoch).reshape(shape)[:, rank, :]


def global_order(case: Mapping[str, Any], epoch: int) -> np.ndarray:
    """The samples of one epoch of the whole job, global batch after global batch."""
    return epoch_order(epoch, case["train_samples"])[: samples_per_epoch(case)]


def rank_inputs(case: Mapping[str, Any], rank: int) -> RankInputs:
    """What rank `rank` trains and evaluates on; identical in every framework and process."""
    if steps_per_epoch(case) < 1:
        raise BadInput(f"train_samples={case['train_samples']} is less than one global batch "
                       f"({case['processes']} x {case['batch_size']})")
    digits = load_mnist(case.get("data", ""))
    train_index = repeat_to(case["train_samples"], len(digits.y_train), "train")
    test_count = min(case["test_samples"], len(digits.y_test))
    test_index = repeat_to(test_count, len(digits.y_test), "test")
    return {
        "x_train": digits.x_train[train_index].astype(np.float32) / np.float32(255),
        "y_train": digits.y_train[train_index].astype(np.int64),
        "x_test": digits.x_test[test_index].astype(np.float32) / np.float32(255),
        "y_test": digits.y_test[test_index].astype(np.int64),
        "batches": np.stack([rank_batches(case, epoch, rank) for epoch in range(case["epochs"])]),
        "hidden_units": hidden_units(case),
        "dropout": mnist.DROPOUT,
        "data_source": digits.source,
        "samples_distinct": int(min(case["train_samples"], len(digits.y_train))),
    }


def check(case: Mapping[str, Any], variant: str, inputs: Mapping[str, object],
          output: Mapping[str, Any]) -> Check:
    """Exact parameter count of the chosen net, test accuracy above the MNIST bound."""
    extra = output["extra"]
    params, accuracy = int(extra["params"]), float(extra["accuracy"])
    expected = mnist.dense_param_count(hidden_units(case))
    total_steps = steps_per_epoch(case) * case["epochs"]
    bound = mnist.ACCURACY_BOUND if total_steps >= MIN_STEPS_TO_JUDGE else 0.0
    if params != expected:
        return Check(False, "test_accuracy", accuracy, bound,
                     f"model has {params:,} parameters, the seed's has {expected:,}")
    if not 0.0 <= accuracy <= 1.0:
        return Check(False, "test_accuracy", accuracy, bound, f"accuracy {accuracy} invalid")
    judged = "" if bound else f" (only {total_steps} steps: accuracy not judged)"
    return Check(accuracy >= bound, "test_accuracy", accuracy, bound,
                 f"test accuracy {accuracy:.3f} (bound {bound:.2f}), {params:,} parameters, "
                 f"{case['processes']} process(es){judged}")


def training_flops(case: Mapping[str, Any]) -> float:
    """Matmul FLOPs of one timed epoch of the whole job (mnist's executed count)."""
    per_sample = mnist.training_matmul_flops_per_sample(hidden_units(case))
    return float(per_sample * samples_per_epoch(case))


PARAMS = {
    "processes": Param([1, 2], [1, 2], "data-parallel processes (torch) / replicas (TF); set "
                       "with --sizes; on a GPU one per device from the cell's cuda:N on"),
    "net": Param("small", "small", "small: dense-128; wide: dense-1000x2", kind=str,
                 minimum=None, choices=tuple(NETS)),
    "batch_size": Param(32, 32, "per-process batch (the global batch is processes x this)"),
    "epochs": Param(5, 3, "timed epochs; the first is the cold one", minimum=2),
    "train_samples": Param(60000, 3200, "training samples per epoch of the whole job, split "
                           "across the processes (small data is repeated)"),
    "steps": Param(0, 0, "cap on optimizer steps per process per timed epoch; 0: whole epoch",
                   minimum=0),
    "test_samples": Param(10000, 1000, "test samples for accuracy (capped at what exists)"),
    "data": Param("", "", "MNIST .npz (set with --data); empty: Keras cache, else embedded",
                  kind=str, minimum=None),
}
NOTES = (
    "preloaded: every process holds the data on its device and gathers its shard of each "
    "global batch there (the seed's Adam and loss). torch: DistributedDataParallel, one process "
    "per device launched by torch.distributed's elastic launcher (torchrun's engine) from the "
    "cell's worker, NCCL on GPUs, gloo on CPU; rank 0 times each epoch with the harness clock "
    "between barriers, and a second pass under DDP's no_sync() measures the step without the "
    "gradient all-reduce. TensorFlow: tf.distribute.MirroredStrategy with one replica per GPU "
    "(logical CPU devices on a CPU) in one child process, Keras model.fit per epoch."
)

# Both run the one variant on either device; how many GPUs a case needs is found out in the
# worker (it depends on the machine), as is every backend's safety net.
CATALOGUE = Catalogue((), one_each(("torch", "tensorflow")), baseline="preloaded")

SPEC = WorkloadSpec(
    name="mnist-ddp",
    kind="mnist_ddp",
    implementations={"torch": "harness.backends.torch.mnist_ddp",
                     "tensorflow": "harness.backends.tensorflow.mnist_ddp"},
    summary="seed 3's nets data-parallel over 1..N processes (torch DDP, TF MirroredStrategy); "
            "one call = one epoch of the whole job",
    sweep="processes",
    params=PARAMS,
    variants=CATALOGUE.variants,
    capabilities=CATALOGUE.capabilities(),
    run=CallPlan(timing="measure"),
    flops=training_flops,
    flops_covers=mnist.FLOPS_COVERAGE,
    check=check,
    validate_data=validate_data,
    # Stored in run.json's hints; the report's scaling section reads it from there.
    report=ReportHints(
        scaling={"processes": "processes", "samples_per_call": "samples_per_call",
                 "allreduce_share": "allreduce_share", "parity_points": PARITY_POINTS},
        views=("epochs-accuracy", "scaling"),
        view_labels={
            "scaling": {"share_explanation": (
                "the all-reduce share is 1 - (step under DDP's no_sync()) / (step), i.e. the "
                "communication the step does not hide behind its backward pass"),
                # A series is named by these when the runs' other parameters agree.
                "series_params": ["net", "batch_size"]},
            "epochs-accuracy": {"size": "processes", "metric": "test accuracy", "chance": 0.1,
                                "accuracy_field": "accuracy", "accuracy_check": "accuracy"},
        }),
    notes=NOTES,
)


def device_memory_summary(per_rank: list[dict[str, int | None]]) -> DeviceMemorySummary:
    """The cell's device memory from every rank's peaks: the largest (what one GPU must hold),
    the sum over ranks (what the job holds), and each rank's."""
    def known(key: str) -> list[int]:
        return [value for rank in per_rank if (value := rank.get(key)) is not None]

    allocated, reserved = known("allocated"), known("reserved")
    return {"allocated": max(allocated) if allocated else None,
            "reserved": max(reserved) if reserved else None,
            "allocated_sum": sum(allocated) if allocated else None,
            "reserved_sum": sum(reserved) if reserved else None,
            "per_rank": per_rank, "measured_in": "each rank's process (max over ranks)"}

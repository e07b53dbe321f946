"""mnist-ddp in TensorFlow: tf.distribute.MirroredStrategy, one replica per device, Keras fit.

MirroredStrategy is TensorFlow's single-host data parallelism: one process, one replica per
device, gradients all-reduced across replicas every step. The replica count must be fixed before
TensorFlow's runtime starts (logical CPU devices cannot be added later), so each case runs in a
fresh spawned child process of the worker (same process group: the runner's kill reaches it).
On a CPU the replicas are logical CPU devices sharing the cores: the code path is the real one,
the speed-up cannot be. The child times each epoch with the harness's per_call and pickles the
measurement to a file the worker reads.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import statistics
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness.backend import VariantUnavailable
from harness.backends.tensorflow.device import TensorFlowDevice
from harness.measure.timing import Measurement, TimingPolicy, per_call
from harness.workloads import mnist_ddp

SEED = 0
EVAL_BATCH = 1000


def replica_devices(device: TensorFlowDevice, replicas: int) -> list[str]:
    """'/GPU:K'..'/GPU:K+N-1' from the cell's GPU, or N logical CPUs '/CPU:0'..'/CPU:N-1'."""
    import tensorflow as tf  # noqa: PLC0415 - already loaded by the device module

    if not device.is_gpu:
        return [f"/CPU:{index}" for index in range(replicas)]
    first = int(device.handle.split(":")[1])
    visible = len(tf.config.list_physical_devices("GPU"))
    if first + replicas > visible:
        raise VariantUnavailable(f"{replicas} replicas need {replicas} GPUs from "
                                 f"cuda:{first} on; tensorflow sees {visible}")
    return [f"/GPU:{first + index}" for index in range(replicas)]


def measure(case: dict[str, Any], variant: str, device: TensorFlowDevice,
            inputs: Mapping[str, object],
            policy: TimingPolicy) -> tuple[Measurement, dict[str, Any]]:
    """Run the case in a spawned child with its own replica devices; read back its result."""
    devices = replica_devices(device, case["processes"])
    if mnist_ddp.steps_per_epoch(case) < 1:
        raise ValueError(f"train_samples={case['train_samples']} is less than one global batch "
                         f"({case['processes']} x {case['batch_size']})")
    with tempfile.TemporaryDirectory(prefix="harness-mirrored-") as scratch:
        result_path = Path(scratch) / "result.pickle"
        child = multiprocessing.get_context("spawn").Process(
            target=child_main, args=(case, devices, str(result_path)))
        child.start()
        child.join()
        if child.exitcode != 0 or not result_path.exists():
            raise RuntimeError(f"MirroredStrategy child process {_exit_text(child.exitcode)}")
        result = pickle.loads(result_path.read_bytes())  # our own child's file
    result["extra"]["rank_devices"] = devices
    result["extra"]["device_memory"] = result["device_memory"]
    # Measured in the child: the worker's own process holds none of the job's tensors.
    return result["measurement"], {"extra": result["extra"],
                                   "device_memory": result["device_memory"]}


def _exit_text(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode} without a result (traceback on stderr)"


def replica_device_memory(tf: Any, devices: list[str]) -> mnist_ddp.DeviceMemorySummary:
    """Each replica GPU's peak bytes in this child, where the training ran."""
    per_replica = []
    for rank, device in enumerate(devices):
        peak = None
        if device.startswith("/GPU"):
            peak = int(tf.config.experimental.get_memory_info(device.strip("/"))["peak"])
        per_replica.append({"rank": rank, "allocated": peak, "reserved": None})
    return mnist_ddp.device_memory_summary(per_replica)


# --- inside the spawned child --------------------------------------------------------------

def child_main(case: dict[str, Any], devices: list[str], result_path: str) -> None:
    """Configure the replica devices before TF starts, train, write the result file."""
    import tensorflow as tf  # noqa: PLC0415 - the logical devices must precede runtime start

    if devices[0].startswith("/CPU"):
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in devices])
    else:  # as the worker's device module does: else TF takes every GPU's memory at start
        for gpu in tf.config.list_physical_devices("GPU"):
            tf.config.experimental.set_memory_growth(gpu, True)
    timed, extra = MirroredTraining(case, devices).run()
    result: mnist_ddp.RankResult = {"measurement": timed, "extra": extra,
                                    "device_memory": replica_device_memory(tf, devices)}
    Path(result_path).write_bytes(pickle.dumps(result))


class MirroredTraining:
    """A Keras model compiled under MirroredStrategy.scope(); epoch() is one fit call.

    fit splits each global batch of replicas x batch_size into contiguous per-replica blocks,
    so replica r trains on the same samples as torch's rank r.
    """

    def __init__(self, case: dict[str, Any], devices: list[str]) -> None:
        import keras  # noqa: PLC0415
        import tensorflow as tf  # noqa: PLC0415

        from harness.backends.keras.model import build_model  # noqa: PLC0415

        self.case, self.tf = case, tf
        self.on_gpu = devices[0].startswith("/GPU")
        self.strategy = tf.distribute.MirroredStrategy(devices=devices)
        self.inputs = mnist_ddp.rank_inputs(case, 0)
        self.orders = [mnist_ddp.global_order(case, epoch) for epoch in range(case["epochs"])]
        self.global_batch = self.strategy.num_replicas_in_sync * case["batch_size"]
        keras.utils.set_random_seed(SEED)
        with self.strategy.scope():  # variables mirrored on every replica device
            self.model = build_model(tuple(self.inputs["hidden_units"]), self.inputs["dropout"])
            self.model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        self.epoch_index = 0
        self.train_loss = float("nan")

    def epoch(self) -> None:
        order = self.orders[self.epoch_index % len(self.orders)]
        history = self.model.fit(self.inputs["x_train"][order], self.inputs["y_train"][order],
                                 batch_size=self.global_batch, epochs=1, shuffle=False,
                                 verbose=0)
        self.train_loss = history.history["loss"][-1]
        self.epoch_index += 1

    def synchronize(self) -> None:
        if self.on_gpu:
            self.tf.test.experimental.sync_devices()

    def run(self) -> tuple[Measurement, dict[str, object]]:
        """The timed epochs and the cell's extras (test accuracy after the last epoch)."""
        timed = per_call(self.epoch, self.synchronize, self.case["epochs"])
        return timed, self.extra(timed)

    def test_accuracy(self) -> float:
        x_test, y_test = self.inputs["x_test"], self.inputs["y_test"]
        correct = 0
        for start in range(0, len(y_test), EVAL_BATCH):
            probabilities = self.model(x_test[start:start + EVAL_BATCH], training=False)
            correct += int(np.sum(np.argmax(np.asarray(probabilities), axis=1)
                                  == y_test[start:start + EVAL_BATCH]))
        return correct / len(y_test)

    def extra(self, timed: Measurement) -> dict[str, object]:
        steps = mnist_ddp.steps_per_epoch(self.case)
        samples_per_call = mnist_ddp.samples_per_epoch(self.case)
        epoch_s = statistics.median(timed.samples)
        return {
            "params": int(self.model.count_params()),
            "accuracy": self.test_accuracy(),
            "train_loss": float(self.train_loss),
            "steps_per_call": steps,
            "processes": self.strategy.num_replicas_in_sync,
            "samples_per_call": samples_per_call,
            "samples_per_second": samples_per_call / epoch_s,
            "step_seconds": epoch_s / steps,
            # MirroredStrategy has no no_sync(): inside fit the all-reduce is not separable.
            "allreduce_share": None,
            "communication": "MirroredStrategy (one process, one replica per device)",
            "samples_distinct": self.inputs["samples_distinct"],
            "data_source": self.inputs["data_source"],
        }

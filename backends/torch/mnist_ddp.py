"""mnist-ddp in PyTorch: DistributedDataParallel launched by torch.distributed's elastic launcher.

The cell's worker calls `measure`, which starts one process per rank through
`torch.distributed.launcher.api.elastic_launch` (the engine behind torchrun) with a *function*
entrypoint: the ranks are multiprocessing-spawned children of the worker, so they stay in the
worker's process group and the runner's kill on timeout reaches them (torchrun's command
entrypoints start each rank in a new session, out of reach). max_restarts=0 and short
rendezvous / collective timeouts make a dead or hung rank fail the launch in seconds.

Every rank runs the harness's `per_call` around each epoch with synchronize = device sync +
dist.barrier(), so every clock read on rank 0 happens after all ranks finished the epoch; rank 0
returns the measurement, the no_sync() comparison and the test accuracy to the worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any, TypedDict

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch
from torch.nn.parallel import DistributedDataParallel

from harness.backend import VariantUnavailable
from harness.backends.torch.device import TorchDevice
from harness.backends.torch.mnist import SEED, build_model
from harness.measure.timing import Measurement, TimingPolicy, per_call
from harness.workloads import mnist_ddp

EVAL_BATCH = 1000
# A collective that waits this long means a rank is gone or stuck: fail, don't hang the cell.
COLLECTIVE_TIMEOUT_S = 60
RENDEZVOUS_TIMEOUT_S = 60
# Seconds the agent waits after SIGTERM before SIGKILL when it stops the surviving ranks.
SHUTDOWN_TIMEOUT_S = 5


def rank_devices(device: TorchDevice, processes: int) -> list[str]:
    """One device per rank: cuda:K..cuda:K+N-1 from the cell's cuda:K, or cpu for every rank."""
    if not device.is_gpu:
        return ["cpu"] * processes
    first = device.handle.index or 0
    visible = torch.cuda.device_count()
    if first + processes > visible:
        raise VariantUnavailable(f"{processes} processes need {processes} GPUs from "
                                 f"cuda:{first} on; torch sees {visible}")
    return [f"cuda:{first + rank}" for rank in range(processes)]


def threads_per_rank(processes: int) -> int:
    """Split the cores between CPU ranks (torchrun sets OMP_NUM_THREADS=1 for the same reason)."""
    return max(1, (os.cpu_count() or 1) // processes)


class LaunchOptions(TypedDict, total=False):
    """The LaunchConfig fields set here (shutdown_timeout only where this torch has it)."""

    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    run_id: str
    rdzv_backend: str
    rdzv_endpoint: str
    rdzv_configs: dict[str, int]
    max_restarts: int
    monitor_interval: float
    start_method: str
    shutdown_timeout: int
    logs_specs: DefaultLogsSpecs


def launch_config(processes: int, log_dir: str) -> LaunchConfig:
    """A single-node launch on a free port (torchrun --standalone) that never restarts a rank;
    the agent's per-rank logs under LOG_DIR (its default is a new torchelastic_* folder in the
    system's temp folder, left behind after every launch)."""
    options: LaunchOptions = {
        "min_nodes": 1, "max_nodes": 1, "nproc_per_node": processes,
        "run_id": f"harness-{uuid.uuid4().hex[:8]}", "rdzv_backend": "c10d",
        "rdzv_endpoint": "127.0.0.1:0", "rdzv_configs": {"timeout": RENDEZVOUS_TIMEOUT_S},
        "max_restarts": 0, "monitor_interval": 0.1, "start_method": "spawn",
        "logs_specs": DefaultLogsSpecs(log_dir=log_dir),
    }
    # Older torch (< 2.12) has no shutdown_timeout field; its default is then used.
    if "shutdown_timeout" in {field.name for field in dataclasses.fields(LaunchConfig)}:
        options["shutdown_timeout"] = SHUTDOWN_TIMEOUT_S
    return LaunchConfig(**options)


@contextlib.contextmanager
def launch_scratch() -> Iterator[str]:
    """A temp folder for one launch, removed after it: the agent's logs go there, and so do
    the error files (pytorch-errorfile-*.pickle) that its spawn start makes with tempfile."""
    before = tempfile.tempdir
    with tempfile.TemporaryDirectory(prefix="harness-ddp-") as scratch:
        tempfile.tempdir = scratch
        try:
            yield scratch
        finally:
            tempfile.tempdir = before


def failure_text(error: ChildFailedError) -> str:
    """'rank 1 (pid 123) died: SIGKILL' for the first failed rank, from the agent's record."""
    rank, failure = error.get_first_failure()
    if failure.exitcode < 0:
        try:
            how = f"killed by {signal.Signals(-failure.exitcode).name}"
        except ValueError:
            how = f"killed by signal {-failure.exitcode}"
    else:
        how = f"exited with code {failure.exitcode}"
    message = failure.message if isinstance(failure.message, str) else ""
    detail = message.strip().splitlines()[-1][:300] if message.strip() else ""
    return f"rank {rank} (pid {failure.pid}) {how}" + (f": {detail}" if detail else "")


def measure(case: dict[str, Any], variant: str, device: TorchDevice,
            inputs: Mapping[str, object],
            policy: TimingPolicy) -> tuple[Measurement, dict[str, Any]]:
    """Launch the ranks, return rank 0's measurement and output (the worker's 'measure' style)."""
    processes = case["processes"]
    devices = rank_devices(device, processes)
    if mnist_ddp.steps_per_epoch(case) < 1:
        raise ValueError(f"train_samples={case['train_samples']} is less than one global batch "
                         f"({processes} x {case['batch_size']})")
    try:
        with launch_scratch() as scratch:
            outputs = elastic_launch(launch_config(processes, scratch), rank_main)(case, devices)
    except ChildFailedError as error:
        raise RuntimeError(f"data-parallel job failed: {failure_text(error)}") from None
    result = outputs[0]  # rank 0's return value, pickled back by the launcher
    result["extra"]["rank_devices"] = devices
    result["extra"]["device_memory"] = result["device_memory"]
    # Measured in the ranks: the worker's own process holds none of the job's tensors.
    return result["measurement"], {"extra": result["extra"],
                                   "device_memory": result["device_memory"]}


# --- inside each rank (a spawned process) ------------------------------------------------------

def rank_main(case: dict[str, Any], devices: list[str]) -> mnist_ddp.RankResult | None:
    """One rank: join the group, train under DDP with the harness clock, leave the group."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    handle = torch.device(devices[int(os.environ["LOCAL_RANK"])])
    torch.set_num_threads(threads_per_rank(world))
    if handle.type == "cuda":
        torch.cuda.set_device(handle)
        torch.cuda.reset_peak_memory_stats(handle)
        dist.init_process_group("nccl", timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S),
                                device_id=handle)
    else:
        dist.init_process_group("gloo", timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    try:
        training = RankTraining(case, rank, world, handle)  # DDP's constructor is a collective
        # On the worker's stderr (its tail lands in error rows): which rank is which process.
        # One write() with its newline: the ranks share the worker's stderr, and print()'s
        # separate write of the line end let two ranks' lines run together on one line.
        line = f"rank {rank} of {world} (pid {os.getpid()}, {handle}): process group up\n"
        os.write(sys.stderr.fileno(), line.encode())
        return training.run()
    finally:
        dist.destroy_process_group()


class RankTraining:
    """One rank's model, optimizer and shard; epoch() trains one timed epoch."""

    def __init__(self, case: dict[str, Any], rank: int, world: int,
                 handle: torch.device) -> None:
        self.case, self.rank, self.world, self.handle = case, rank, world, handle
        self.inputs = mnist_ddp.rank_inputs(case, rank)
        torch.manual_seed(SEED)  # same start on every rank (DDP also broadcasts rank 0's)
        self.model = build_model(tuple(self.inputs["hidden_units"]),
                                 self.inputs["dropout"]).to(handle)
        device_ids = [handle.index] if handle.type == "cuda" else None
        self.ddp = DistributedDataParallel(self.model, device_ids=device_ids)
        self.optimizer = torch.optim.Adam(self.ddp.parameters())
        self.loss_fn = nn.CrossEntropyLoss()
        # The data lives on the device, as in the hand-written loop the question came from.
        self.x_train = torch.from_numpy(self.inputs["x_train"]).to(handle)
        self.y_train = torch.from_numpy(self.inputs["y_train"]).to(handle)
        self.batches = torch.from_numpy(self.inputs["batches"]).to(handle)
        self.epoch_index = 0
        self.loss_sum = torch.zeros((), device=handle)

    def synchronize(self) -> None:
        """Device sync, then a barrier: a clock read on rank 0 means every rank is done."""
        if self.handle.type == "cuda":
            torch.cuda.synchronize(self.handle)
            dist.barrier(device_ids=[self.handle.index])
        else:
            dist.barrier()

    def epoch(self) -> None:
        self.ddp.train()
        self.loss_sum = torch.zeros((), device=self.handle)
        for batch_index in self.batches[self.epoch_index % len(self.batches)]:
            self.optimizer.zero_grad()
            loss = self.loss_fn(self.ddp(self.x_train[batch_index]), self.y_train[batch_index])
            loss.backward()  # DDP all-reduces the gradients in buckets during backward
            self.optimizer.step()
            self.loss_sum += loss.detach()
        self.epoch_index += 1

    def epoch_without_allreduce(self) -> None:
        """The same epoch under no_sync(): gradients stay local, so no all-reduce runs."""
        with self.ddp.no_sync():
            self.epoch()

    def run(self) -> mnist_ddp.RankResult | None:
        epochs = self.case["epochs"]
        timed = per_call(self.epoch, self.synchronize, epochs)
        train_loss = float(self.loss_sum.cpu()) / len(self.batches[0])
        accuracy = self.test_accuracy() if self.rank == 0 else None
        # After the timed epochs and the accuracy: no_sync lets the replicas drift apart.
        # Its first epoch is dropped like a cold one; the rest match the timed epochs' count.
        local = per_call(self.epoch_without_allreduce, self.synchronize, epochs)
        busy_share = self.device_busy_share(float(np.median(timed.samples)))
        peaks: list[Any] = [None] * self.world
        dist.all_gather_object(peaks, self.peak_device_memory())  # a collective: every rank
        if self.rank != 0:
            return None
        extra = self.extra(timed, local, accuracy, train_loss)
        extra["device_busy_share"] = busy_share
        return {"measurement": timed, "extra": extra,
                "device_memory": mnist_ddp.device_memory_summary(peaks)}

    def device_busy_share(self, epoch_s: float) -> float | None:
        """Rank 0's device-busy time over one more epoch, as a share of the timed epoch.

        Low means host-bound: the step's time is the host's launch path, so scaling
        efficiency compares hosts, not GPUs (issue 24). Every rank runs the epoch (its
        all-reduces are collectives); only rank 0 records it. None on CPU ranks.
        """
        if self.handle.type != "cuda":
            return None
        if self.rank != 0:
            self.epoch()
            self.synchronize()
            return None
        from harness.backends.torch.device import PROFILE_TOOL, profiled_events  # noqa: PLC0415
        from harness.measure.devicetime import summarize  # noqa: PLC0415

        ran: list[bool] = []

        def epoch() -> None:
            ran.append(True)
            self.epoch()

        try:
            events, launches = profiled_events(epoch, 1, self.handle)
        except Exception:  # noqa: BLE001 - no profile is no share, never a hung collective
            events, launches = [], None
        if not ran:  # the other ranks' all-reduces wait for this epoch
            self.epoch()
        self.synchronize()
        if not events:
            return None
        busy = summarize(events, 1, launches, epoch_s, PROFILE_TOOL).busy_seconds
        return min(1.0, busy / epoch_s) if epoch_s > 0 else None

    def peak_device_memory(self) -> dict[str, int | None]:
        """This rank's peak bytes on its GPU since it started (None on a CPU rank)."""
        if self.handle.type != "cuda":
            return {"rank": self.rank, "allocated": None, "reserved": None}
        return {"rank": self.rank,
                "allocated": int(torch.cuda.max_memory_allocated(self.handle)),
                "reserved": int(torch.cuda.max_memory_reserved(self.handle))}

    def test_accuracy(self) -> float:
        self.model.eval()
        x_test = torch.from_numpy(self.inputs["x_test"]).to(self.handle)
        y_test = torch.from_numpy(self.inputs["y_test"]).to(self.handle)
        with torch.no_grad():
            correct = sum(int((self.model(x_test[start:start + EVAL_BATCH]).argmax(dim=1)
                               == y_test[start:start + EVAL_BATCH]).sum())
                          for start in range(0, len(y_test), EVAL_BATCH))
        return correct / len(y_test)

    def extra(self, timed: Measurement, local: Measurement, accuracy: float | None,
              train_loss: float) -> dict[str, object]:
        steps = len(self.batches[0])
        samples_per_call = mnist_ddp.samples_per_epoch(self.case)
        epoch_s, local_s = float(np.median(timed.samples)), float(np.median(local.samples))
        return {
            "params": sum(p.numel() for p in self.model.parameters()),
            "accuracy": accuracy,
            "train_loss": train_loss,
            "steps_per_call": steps,
            "processes": self.world,
            "samples_per_call": samples_per_call,
            "samples_per_second": samples_per_call / epoch_s,
            "step_seconds": epoch_s / steps,
            "no_sync_samples": local.samples,
            "no_sync_step_seconds": local_s / steps,
            # The exposed all-reduce: what the step costs beyond the same step without it.
            "allreduce_share": max(0.0, 1.0 - local_s / epoch_s),
            "communication": f"{dist.get_backend()} (DistributedDataParallel)",
            "threads_per_rank": torch.get_num_threads(),
            "samples_distinct": self.inputs["samples_distinct"],
            "data_source": self.inputs["data_source"],
        }

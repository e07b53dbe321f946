"""The measuring half of benchmarks/predict_validation.py: one row per (model, batch) of the zoo.

Imported only when the tool measures (`--from` needs neither torch nor a GPU). Per cell, on
the machine it runs on: the CPU step (a warm-up call, then the median of 2-7 calls) and its
features (backends/torch/features.py, the path the harness's prediction uses); the GPU step
predicted from them with --profile and every shipped profile, for both hosts; and the GPU
step measured: three warm-up calls, then each call timed alone between two synchronised
clock reads (the median of 5-30 calls: no step overlaps the next), the same step pipelined
(calls back to back, synchronised at the ends only: what a training loop without a sync
sees, and what the model's max(host, device) assumes), and the device's busy time per call
(TorchDevice.profile's two passes: CUDA events for the span, then torch.profiler, apart
from the timed calls), with the kernel table the profiler's events give.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import numpy as np
import predict_zoo
import torch
from predictlab import validation

from harness.backends.torch.device import (
    PROFILE_TOOL,
    TorchDevice,
    event_span_seconds,
    open_device,
    profiled_events,
)
from harness.backends.torch.features import features_of
from harness.backends.torch.usermodel import on_device, training_call
from harness.measure.devicetime import summarize
from harness.measure.envinfo import cpu_model
from harness.predict import hostspeed
from harness.predict.profile import Profile
from harness.predict.rates import HostSpeed
from harness.predict.timed import policy
from harness.spec import BadInput

CPU_TARGET_S = 0.6  # CPU calls timed per cell: about this long, 2 to 7 calls
CPU_CAP_S = 1.5  # a CPU step longer than this ends the model's sweep (larger ones cost more)
GPU_SYNCED_S, GPU_PIPELINED_S = 0.25, 0.1
BUSY_CALLS = 3
SEED = 0


def float32_switches(cudnn_tf32: bool) -> dict[str, bool]:
    """Set torch's float32 switches as a user's script has them (importing the harness's
    usermodel backend turned cuDNN's TF32 off for its own cells); what was set, for meta.
    Why: the model prices a float32 convolution at conv.tf32, cuDNN's default."""
    torch.backends.cuda.matmul.allow_tf32 = False  # torch's default
    torch.backends.cudnn.allow_tf32 = cudnn_tf32  # torch's default: True
    return {"matmul_allow_tf32": False, "cudnn_allow_tf32": cudnn_tf32}


def step_on(entry: predict_zoo.ZooModel, batch: int,
            handle: torch.device) -> tuple[Callable[[], Any], int]:
    """(one training step of ENTRY at BATCH on HANDLE, bytes it copies host->device): the
    same weights, inputs and targets on every device (one seed), inputs copied each call."""
    torch.manual_seed(SEED)
    net = entry.build().to(handle)
    net.train()
    rng = np.random.default_rng(SEED)
    host_arrays = entry.inputs(batch, rng)
    with torch.no_grad():
        probe = net(*[on_device(array, handle, torch.float32) for array in host_arrays])
    target = on_device(entry.targets(batch, rng, probe), handle, torch.float32)
    optimizer = entry.optimizer(net.parameters())
    step = training_call(net, optimizer,
                         lambda: [on_device(array, handle, torch.float32)
                                  for array in host_arrays], target, entry.loss)
    return step, int(sum(array.nbytes for array in host_arrays))


def timed_calls(step: Callable[[], Any], synchronize: Callable[[], None],
                calls: int, per_sample: int = 1, issued: list[float] | None = None
                ) -> list[float]:
    """Seconds per call of CALLS samples, each PER_SAMPLE calls between two synchronised
    clock reads. ISSUED, where given, gets the seconds until the last call returned, before
    the closing synchronise: the host's own time to issue the work (its queue, measured)."""
    seconds = []
    for _ in range(calls):
        synchronize()
        started = time.perf_counter()
        for _ in range(per_sample):
            step()
        if issued is not None:
            issued.append((time.perf_counter() - started) / per_sample)
        synchronize()
        seconds.append((time.perf_counter() - started) / per_sample)
    return seconds


def calls_for(target_s: float, one_s: float, least: int, most: int) -> int:
    return max(least, min(most, int(target_s / max(one_s, 1e-6))))


def measure_cpu(entry: predict_zoo.ZooModel, batch: int) -> tuple[dict[str, Any], Any]:
    """(the CPU step's timing, its features): warm-up, timed calls, then one recorded call."""
    step, h2d = step_on(entry, batch, torch.device("cpu"))
    warm = timed_calls(step, lambda: None, 1)[0]
    samples = timed_calls(step, lambda: None, calls_for(CPU_TARGET_S, warm, 2, 7))
    median = statistics.median(samples)
    features = features_of(step, step_s=median, h2d_bytes=h2d, warmup=0,
                           h2d_how="the batch's input arrays, copied from host each call")
    timing = {"median_s": median, "samples_s": samples, "warmup_s": warm,
              "threads": torch.get_num_threads()}
    return timing, features


def busy_of(step: Callable[[], Any], device: TorchDevice, step_s: float) -> dict[str, Any]:
    """The device's busy time per call (TorchDevice.profile's two passes, its events kept
    for the kernel table); why not, where the profiler cannot run."""
    try:
        span = event_span_seconds(step, BUSY_CALLS, device.handle)
        events, launches = profiled_events(step, BUSY_CALLS, device.handle)
        profiled = summarize(events, BUSY_CALLS, launches, span, PROFILE_TOOL)
    except Exception as why:  # noqa: BLE001 - a busy share is optional: say why it is missing
        return {"busy_unavailable": f"{type(why).__name__}: {why}"[:200]}
    if not events:
        return {"busy_unavailable": "torch.profiler recorded no device activity"}
    return {"busy_s": profiled.busy_seconds, "busy_share": profiled.busy_seconds / step_s,
            "kernels_per_call": profiled.kernels_per_call,
            "launches_per_call": profiled.launches_per_call,
            "copy_s": profiled.copy_seconds, "span_s": profiled.span_seconds,
            "kernels_packed": validation.packed(
                {"kernels": validation.kernel_table(events, BUSY_CALLS)})}


def measure_gpu(entry: predict_zoo.ZooModel, batch: int, device: TorchDevice,
                busy: bool) -> dict[str, Any]:
    """The measured step on DEVICE: per call synchronised, pipelined, and busy time."""
    step, _ = step_on(entry, batch, device.handle)
    synchronize = device.synchronize
    warm = timed_calls(step, synchronize, 3)
    one, issued = min(warm), []
    samples = timed_calls(step, synchronize, calls_for(GPU_SYNCED_S, one, 5, 30),
                          issued=issued)
    per_sample = calls_for(GPU_PIPELINED_S / 3, one, 2, 50)
    pipelined = timed_calls(step, synchronize, 3, per_sample)
    found: dict[str, Any] = {
        "median_s": statistics.median(samples), "samples_s": samples,
        "issued_s": statistics.median(issued), "issued_samples_s": issued,
        "pipelined_s": statistics.median(pipelined), "pipelined_samples_s": pipelined,
        "pipelined_calls_per_sample": per_sample, "warmup_s": warm}
    if busy and device.is_gpu:
        found.update(busy_of(step, device, found["median_s"]))
    return found


def described(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"[:300]


def measured_row(entry: predict_zoo.ZooModel, batch: int, device: TorchDevice,
                 profiles: dict[str, Profile], this_host: HostSpeed, busy: bool
                 ) -> dict[str, Any]:
    """One cell: the CPU step and features, the predictions, the measured GPU step."""
    started = time.monotonic()
    row: dict[str, Any] = {"model": entry.name, "source": entry.source, "batch": batch,
                           "status": "ok"}
    try:
        row["cpu"], features = measure_cpu(entry, batch)
        record = features.record()
        row["features"] = {key: record.get(key) for key in validation.FEATURE_TOTALS}
        row["features_packed"] = validation.packed(record)
        try:  # a model that breaks on a step is fixed offline (--repredict): measure on
            row.update(validation.predicted_row(row, profiles, this_host))
        except Exception as why:  # noqa: BLE001
            row["predictions_failed"] = described(why)
        row["gpu"] = measure_gpu(entry, batch, device, busy)
    except Exception as why:  # noqa: BLE001 - one failed cell is a row, the run goes on
        row.update(status="error", reason=described(why))
    row["elapsed_s"] = time.monotonic() - started
    return row


def row_line(row: dict[str, Any], profile: str) -> str:
    if row["status"] != "ok":
        return f"  {row['model']:<20} b{row['batch']:<5} {row['status']}: {row.get('reason')}"
    cpu, gpu = row["cpu"], row["gpu"]
    made = validation.prediction_of(row, profile, "profiled")
    busy = gpu.get("busy_share")
    predicted = "unknown" if made is None else (
        f"{made['seconds'] * 1e3:8.3f} ms ({100 * validation.relative_error(made['seconds'], gpu['median_s']):+4.0f}%)"  # noqa: E501
        f" {made['regime']}")
    return (f"  {row['model']:<20} b{row['batch']:<5} cpu {cpu['median_s'] * 1e3:9.3f} ms  "
            f"gpu {gpu['median_s'] * 1e3:8.3f} ms (pipelined {gpu['pipelined_s'] * 1e3:7.3f},"
            f" issued {gpu['issued_s'] * 1e3:7.3f})"
            f"  busy {'-' if busy is None else f'{busy:4.0%}'}  predicted {predicted}"
            f"  [{row['elapsed_s']:.1f} s]")


def this_host_speed() -> HostSpeed:
    entries = hostspeed.measure(policy(quick=True))
    return HostSpeed(python_loop_s=float(entries["host.python"].rows[0].median_s or 0.0),
                     numpy_loop_s=float(entries["host.numpy"].rows[0].median_s or 0.0),
                     cpu_model=cpu_model())


def meta_of(args: argparse.Namespace, device: TorchDevice, this_host: HostSpeed,
            skipped: list[str]) -> dict[str, Any]:
    return {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "device": args.device, "device_description": device.description,
            "profile": args.profile, "torch": torch.__version__, "cuda": torch.version.cuda,
            "host_cpu": cpu_model(), "cpu_threads": torch.get_num_threads(),
            "this_host": this_host.record(), "zoo_skipped": skipped,
            "budget_s": args.budget_s, "argv": sys.argv[1:]}


def chosen_zoo(args: argparse.Namespace) -> tuple[list[predict_zoo.ZooModel], list[str]]:
    models, skipped = predict_zoo.zoo()
    if args.models:
        wanted = args.models.split(",")
        unknown = sorted(set(wanted) - {entry.name for entry in models})
        if unknown:
            raise BadInput(f"--models: no model {', '.join(unknown)} here (have: "
                           f"{', '.join(entry.name for entry in models)})")
        models = [entry for entry in models if entry.name in wanted]
    return models, skipped


class Budget:
    """Refuses a cell that would end past --budget-s: a cell is guessed to cost twice the
    model's previous one (a batch 4x larger), the first cell of a model FIRST_CELL_S. A
    refused cell ends its model's sweep; the next model still gets its small batches."""

    FIRST_CELL_S = 2.0

    def __init__(self, seconds: float, started: float) -> None:
        self.seconds, self.started = seconds, started
        self.refused: list[str] = []

    def allows(self, model: str, batch: int, previous_s: float | None) -> bool:
        guess = self.FIRST_CELL_S if previous_s is None else 2 * previous_s
        elapsed = time.monotonic() - self.started
        if elapsed + guess <= self.seconds:
            return True
        self.refused.append(f"{model} from batch {batch} (at {elapsed:.0f} s, ~{guess:.1f} s "
                            "more)")
        return False

    @property
    def spent(self) -> bool:
        """Not even a model's first cell fits any more."""
        return time.monotonic() - self.started + self.FIRST_CELL_S > self.seconds

    def text(self) -> str:
        if not self.refused:
            return "every model's sweep measured"
        return (f"--budget-s {self.seconds:.0f} left out: " + "; ".join(self.refused)
                + ("; then stopped" if self.spent else ""))


def sweep(entry: predict_zoo.ZooModel, batches: tuple[int, ...], run: dict[str, Any],
          budget: Budget) -> None:
    """Every batch of ENTRY's sweep, a row each, written as it comes."""
    started, previous = time.monotonic(), None
    for batch in batches:
        if not budget.allows(entry.name, batch, previous):
            break
        row = measured_row(entry, batch, run["device"], run["profiles"], run["this_host"],
                           run["busy"])
        run["rows"].append(row)
        validation.write_rows(run["out"], run["meta"], run["rows"])
        print(row_line(row, run["meta"]["profile"]), flush=True)
        previous = row["elapsed_s"]
        if row["status"] != "ok" or row["cpu"]["median_s"] > CPU_CAP_S:
            break  # a failed cell fails larger; a slow CPU step grows with the batch
    print(f"{entry.name}: {time.monotonic() - started:.1f} s ({entry.source})", flush=True)


def measure(args: argparse.Namespace, started: float,
            profiles: dict[str, Profile]) -> list[str]:
    """Every cell of the chosen zoo, rows written as they come; the closing lines."""
    if args.threads:
        torch.set_num_threads(args.threads)
    switches = float32_switches(args.cudnn_tf32 == "on")
    device = open_device(args.device)
    models, skipped = chosen_zoo(args)
    this_host = this_host_speed()
    meta = {**meta_of(args, device, this_host, skipped), **switches}
    for line in skipped:
        print(f"skipped {line}")
    run = {"device": device, "profiles": profiles, "this_host": this_host, "rows": [],
           "meta": meta, "out": args.out, "busy": not args.no_busy}
    budget = Budget(args.budget_s, started)
    chosen = tuple(int(text) for text in args.batches.split(",")) if args.batches else None
    for entry in models:
        if budget.spent:
            budget.refused.append(f"{entry.name} (not started)")
            continue
        sweep(entry, chosen or entry.batches, run, budget)
    meta.update(elapsed_s=time.monotonic() - started, budget=budget.text())
    validation.write_rows(args.out, meta, run["rows"])
    return [budget.text(),
            *validation.summary_lines(meta, run["rows"]),
            f"wrote {args.out} ({len(run['rows'])} rows, {meta['elapsed_s']:.0f} s)"]

"""A device profile measured with torch (`harness profile-device`; harness/predict/profile.py).

Runs in the profile's child process (harness/predict/devicechild.py), never in the parent.
Each measurement is a function returning catalogue entries; on a CPU the GPU-only ones are
absent with the reason. Times come from the harness's clock (harness.predict.timed: autorange,
a synchronise before both clock reads of every sample) except two, which need the device's
own clock: the kernel floor (CUDA events) and the host's launch cost while the device sleeps
(see kernel_floor for why that one reads the host clock without synchronising).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from harness.backends.torch import commonops
from harness.backends.torch.device import TorchDevice, capture_cuda_graph, open_device, tf32
from harness.data.serial import JsonValue
from harness.measure.timing import TimingPolicy
from harness.predict import hostspeed
from harness.predict.profile import Entry, Row, absent, measured
from harness.predict.timed import policy, timed_row

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Sizes:
    """What one profile measures: shapes and sizes per device kind, full or --quick."""

    matmul: tuple[Shape, ...]  # (m, n, k)
    conv: tuple[Shape, ...]  # (batch, in channels, height = width, out channels, kernel, stride)
    elementwise: tuple[int, ...]  # elements
    transfer: tuple[int, ...] = ()  # bytes
    graph_kernels: tuple[int, ...] = ()
    # Tiny kernels queued per kernel-floor sample, one row each: a launch ahead of a sleeping
    # device cost the host 6.8-10.8 us on the H200 (torch 2.11), against 5.6-6.1 us back to
    # back, varying with the queue's depth from one process to the next (docs/predict.md).
    floor_kernels: tuple[int, ...] = ()
    floor_samples: int = 0


SIZES = {
    ("cuda", False): Sizes(
        matmul=((32, 512, 512), (64, 1024, 1024), (256, 256, 256), (1024, 1024, 1024),
                (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192)),
        conv=((8, 16, 32, 16, 3, 1), (32, 64, 56, 64, 3, 1), (32, 128, 28, 128, 3, 1),
              (32, 256, 14, 256, 3, 1), (32, 256, 56, 64, 1, 1), (32, 3, 224, 64, 7, 2)),
        elementwise=(2**10, 2**14, 2**18, 2**22, 2**26, 2**28),
        transfer=(2**12, 2**16, 2**20, 2**24, 2**28),
        graph_kernels=(1, 10, 100, 1000), floor_kernels=(32, 128, 512), floor_samples=15),
    ("cuda", True): Sizes(
        matmul=((256, 256, 256), (1024, 1024, 1024), (4096, 4096, 4096)),
        conv=((32, 64, 56, 64, 3, 1), (32, 256, 14, 256, 3, 1)),
        elementwise=(2**10, 2**20, 2**26), transfer=(2**12, 2**20, 2**26),
        graph_kernels=(1, 100), floor_kernels=(64, 256), floor_samples=7),
    ("cpu", False): Sizes(
        matmul=((64, 256, 256), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024)),
        conv=((8, 16, 32, 16, 3, 1), (8, 32, 16, 32, 3, 1)),
        elementwise=(2**10, 2**14, 2**18, 2**22)),
    ("cpu", True): Sizes(matmul=((64, 128, 128), (128, 128, 128)), conv=((2, 8, 16, 8, 3, 1),),
                         elementwise=(2**10, 2**16)),
}
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
          "fp16": torch.float16}
# Why each GPU-only entry is absent on a CPU.
ON_CPU = {
    "host.launch_ahead": "cpu: eager CPU ops run on the calling thread; there is no device "
                         "queue for the host to get ahead of",
    "device.kernel_floor": "cpu: no kernels on a device, no CUDA events",
    "device.graph_replay": "cpu: CUDA graphs need a CUDA device",
    "device.sync": "cpu: nothing to wait for (an eager CPU op is done when it returns)",
    "matmul.tf32": "cpu: TF32 is a tensor-core format of NVIDIA GPUs",
    "matmul.bf16": "cpu: a CPU profile times float32 only, as CPU cells run as written",
    "matmul.fp16": "cpu: a CPU profile times float32 only, as CPU cells run as written",
    "conv.tf32": "cpu: TF32 is a tensor-core format of NVIDIA GPUs",
    "conv.bf16": "cpu: a CPU profile times float32 only, as CPU cells run as written",
    "transfer.h2d.pageable": "cpu: no host<->device link",
    "transfer.h2d.pinned": "cpu: no host<->device link",
    "transfer.d2h.pageable": "cpu: no host<->device link",
    "transfer.d2h.pinned": "cpu: no host<->device link",
    "ops.kernels": "cpu: no device kernels (ops.aten counts the ops each common op runs)",
}


class Bench:
    """One device, its sizes and timing policy: what every measurement below needs."""

    def __init__(self, device: TorchDevice, quick: bool) -> None:
        self.device, self.handle, self.quick = device, device.handle, quick
        self.gpu = device.is_gpu
        self.sizes = SIZES[(self.handle.type, quick)]
        self.policy: TimingPolicy = policy(quick)

    def row(self, step: Callable[[], object], params: dict[str, JsonValue],
            **work: float | None) -> Row:
        return timed_row(step, self.device.synchronize, self.policy, params,
                         flops=work.get("flops"), moved_bytes=work.get("moved_bytes"))

    def tiny(self) -> torch.Tensor:
        return torch.zeros(1, device=self.handle)


def host_dispatch(bench: Bench) -> dict[str, Entry]:
    """The pipelined cost of a tiny eager op, out of place and in place."""
    left, right = bench.tiny(), bench.tiny()
    rows = [bench.row(lambda: torch.add(left, right), {"op": "add", "elements": 1}),
            bench.row(lambda: left.add_(right), {"op": "add_", "elements": 1})]
    return {"host.dispatch": measured("host.dispatch", rows)}


def sleep_cycles_per_second(handle: torch.device) -> float:
    """How many cycles of torch.cuda._sleep the device spins per second (CUDA events)."""
    cycles = 20_000_000
    torch.cuda._sleep(1000)
    torch.cuda.synchronize(handle)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize(handle)
    return cycles / (start.elapsed_time(end) * 1e-3)


def floor_sample(bench: Bench, kernels: int, sleep_cycles: int,
                 target: torch.Tensor) -> tuple[float, float] | None:
    """(device seconds per kernel, host seconds per launch) of KERNELS tiny kernels queued
    behind a device sleep, or None where the device reached them before the host was done.

    Why the host clock without a synchronise here: the sleep keeps the device off these
    kernels while the host queues them, so the host's time is its own cost alone (the
    harness's rule of a synchronise before each clock read exists to stop launch time from
    passing for device time; here launch time is what is wanted, and the start event still
    unreached after the last launch proves the device did none of it)."""
    torch.cuda.synchronize(bench.handle)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(sleep_cycles)
    start.record()
    began = time.perf_counter()
    for _ in range(kernels):
        target.add_(1.0)
    host_s = time.perf_counter() - began
    end.record()
    ahead = not start.query()
    torch.cuda.synchronize(bench.handle)
    if not ahead:
        return None
    return start.elapsed_time(end) * 1e-3 / kernels, host_s / kernels


def floor_rows(bench: Bench, kernels: int, rate: float,
               target: torch.Tensor) -> tuple[Row, Row] | str:
    """(device row, host row) of FLOOR_SAMPLES samples of KERNELS queued kernels, or why
    none: the sleep doubles (to 1 s at most) while the host fails to get ahead."""
    sleep_s, behind = 0.02, 0
    device_s: list[float] = []
    host_s: list[float] = []
    floor_sample(bench, kernels, int(rate * sleep_s), target)  # warm-up
    while len(device_s) < bench.sizes.floor_samples and behind < 20:
        sample = floor_sample(bench, kernels, int(rate * sleep_s), target)
        if sample is None:
            behind, sleep_s = behind + 1, min(1.0, sleep_s * 2)
            continue
        device_s.append(sample[0])
        host_s.append(sample[1])
    if not device_s:
        return f"the host never got ahead of a {sleep_s:g} s device sleep ({kernels} kernels)"
    params: dict[str, JsonValue] = {"op": "add_", "elements": 1, "kernels": kernels,
                                    "samples_behind": behind}
    return Row.timed(params, device_s, kernels), Row.timed(params, host_s, kernels)


def kernel_floor(bench: Bench) -> dict[str, Entry]:
    """device.kernel_floor and host.launch_ahead from the same samples, a row per queue
    depth (Sizes.floor_kernels)."""
    names = ("device.kernel_floor", "host.launch_ahead")
    if not bench.gpu:
        return {name: absent(name, ON_CPU[name]) for name in names}
    target, rate = bench.tiny(), sleep_cycles_per_second(bench.handle)
    device_rows, host_rows = [], []
    for kernels in bench.sizes.floor_kernels:
        found = floor_rows(bench, kernels, rate, target)
        if isinstance(found, str):
            return {name: absent(name, found) for name in names}
        device_rows.append(found[0])
        host_rows.append(found[1])
    return {"device.kernel_floor": measured("device.kernel_floor", device_rows),
            "host.launch_ahead": measured("host.launch_ahead", host_rows)}


def graph_replay(bench: Bench) -> dict[str, Entry]:
    if not bench.gpu:
        return {"device.graph_replay": absent("device.graph_replay", ON_CPU["device.graph_replay"])}
    rows = []
    for kernels in bench.sizes.graph_kernels:
        target = bench.tiny()

        def body(target: torch.Tensor = target, kernels: int = kernels) -> None:
            for _ in range(kernels):
                target.add_(1.0)
        graph, _ = capture_cuda_graph(body, bench.handle)
        rows.append(bench.row(graph.replay, {"kernels": kernels, "op": "add_"}))
    return {"device.graph_replay": measured("device.graph_replay", rows)}


def sync_cost(bench: Bench) -> dict[str, Entry]:
    if not bench.gpu:
        return {"device.sync": absent("device.sync", ON_CPU["device.sync"])}
    target, handle = bench.tiny(), bench.handle

    def after_kernel() -> None:
        target.add_(1.0)
        torch.cuda.synchronize(handle)
    rows = [bench.row(lambda: torch.cuda.synchronize(handle), {"after": "idle"}),
            bench.row(after_kernel, {"after": "one tiny kernel"})]
    return {"device.sync": measured("device.sync", rows)}


def matmul(bench: Bench) -> dict[str, Entry]:
    entries = {}
    for label, dtype in DTYPES.items():
        name = f"matmul.{label}"
        if not bench.gpu and label != "fp32":
            entries[name] = absent(name, ON_CPU[name])
            continue
        rows = []
        with tf32(label == "tf32"):
            for m, n, k in bench.sizes.matmul:
                left = torch.randn(m, k, device=bench.handle, dtype=dtype)
                right = torch.randn(k, n, device=bench.handle, dtype=dtype)
                out = torch.empty(m, n, device=bench.handle, dtype=dtype)
                rows.append(bench.row(partial(torch.mm, left, right, out=out),
                                      {"m": m, "n": n, "k": k}, flops=2.0 * m * n * k))
        entries[name] = measured(name, rows)
    return entries


def conv(bench: Bench) -> dict[str, Entry]:
    entries = {}
    for label in ("fp32", "tf32", "bf16"):
        name = f"conv.{label}"
        if not bench.gpu and label != "fp32":
            entries[name] = absent(name, ON_CPU[name])
            continue
        rows = []
        with tf32(label == "tf32"), torch.no_grad():
            for batch, cin, size, cout, kernel, stride in bench.sizes.conv:
                x = torch.randn(batch, cin, size, size, device=bench.handle,
                                dtype=DTYPES[label])
                w = torch.randn(cout, cin, kernel, kernel, device=bench.handle,
                                dtype=DTYPES[label])
                out_size = (size + 2 * (kernel // 2) - kernel) // stride + 1
                flops = 2.0 * batch * cout * out_size * out_size * cin * kernel * kernel
                rows.append(bench.row(
                    partial(F.conv2d, x, w, stride=stride, padding=kernel // 2),
                    {"batch": batch, "in": cin, "size": size, "out": cout, "kernel": kernel,
                     "stride": stride}, flops=flops))
        entries[name] = measured(name, rows)
    return entries


def bandwidth(bench: Bench) -> dict[str, Entry]:
    """elementwise.add (3 x numel x 4 bytes: two reads, one write) and reduction.sum."""
    adds, sums = [], []
    for numel in bench.sizes.elementwise:
        a, b, c = (torch.rand(numel, device=bench.handle) for _ in range(3))
        adds.append(bench.row(partial(torch.add, a, b, out=c), {"elements": numel},
                              moved_bytes=3.0 * numel * 4))
        sums.append(bench.row(a.sum, {"elements": numel}, moved_bytes=numel * 4.0))
    return {"elementwise.add": measured("elementwise.add", adds),
            "reduction.sum": measured("reduction.sum", sums)}


def written_host_buffer(size: int, *, pinned: bool) -> torch.Tensor:
    """SIZE bytes of host memory, every page written. Why written: an untouched pageable
    buffer's pages all map the kernel's one zero page, so copying from it reads no memory;
    on a lent H200 host that read 17.7-18 GB/s where the same copy of written data (a numpy
    batch's) read 7.1-7.3 GB/s (128-256 MiB), and the profile priced input copies 2.5x fast."""
    host = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
    host.fill_(1)
    return host


def transfers(bench: Bench) -> dict[str, Entry]:
    """Host<->device copies by size, pageable and pinned; the smallest size is the latency."""
    entries = {}
    for direction in ("h2d", "d2h"):
        for memory in ("pageable", "pinned"):
            name = f"transfer.{direction}.{memory}"
            if not bench.gpu:
                entries[name] = absent(name, ON_CPU[name])
                continue
            rows = []
            for size in bench.sizes.transfer:
                host = written_host_buffer(size, pinned=memory == "pinned")
                device = torch.empty(size, dtype=torch.uint8, device=bench.handle)
                source, target = (host, device) if direction == "h2d" else (device, host)
                rows.append(bench.row(
                    partial(target.copy_, source, non_blocking=memory == "pinned"),
                    {"bytes": size}, moved_bytes=float(size)))
            entries[name] = measured(name, rows)
    return entries


def op_counts(bench: Bench) -> dict[str, Entry]:
    """ops.aten everywhere (a dispatch mode), ops.kernels on a GPU (torch.profiler)."""
    from harness.backends.torch.features import record_step  # noqa: PLC0415 - profile only

    aten_rows, kernel_rows = [], []
    for name, step in commonops.common_ops(bench.handle).items():
        recording = record_step(step, warmup=2)
        kernels = sum(op.kernel for op in recording.ops)
        aten_rows.append(Row(params={"op": name}, counts={
            "aten_ops": len(recording.ops), "kernel_ops": kernels}))
        if bench.gpu:
            kernel_rows.append(Row(params={"op": name}, counts=commonops.kernel_counts(
                step, bench.handle)))
    entries = {"ops.aten": measured("ops.aten", aten_rows)}
    entries["ops.kernels"] = measured("ops.kernels", kernel_rows) if bench.gpu else absent(
        "ops.kernels", ON_CPU["ops.kernels"])
    return entries


MEASUREMENTS: tuple[Callable[[Bench], dict[str, Entry]], ...] = (
    host_dispatch, kernel_floor, graph_replay, sync_cost, matmul, conv, bandwidth, transfers,
    op_counts)


def device_info(device: TorchDevice) -> dict[str, JsonValue]:
    if not device.is_gpu:
        return {"name": "cpu", "type": "cpu", "description": device.description,
                "threads": torch.get_num_threads()}
    props = torch.cuda.get_device_properties(device.handle)
    return {"name": device.name, "type": "cuda", "description": props.name,
            "memory_bytes": int(props.total_memory),
            "capability": f"{props.major}.{props.minor}",
            "multiprocessors": int(props.multi_processor_count),
            "l2_bytes": int(getattr(props, "L2_cache_size", 0)) or None,
            "context_s": device.init_seconds}


def software_info() -> dict[str, JsonValue]:
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn,
            "numpy": np.__version__, "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)}


def measure(device_name: str, quick: bool) -> dict[str, Any]:
    """Everything the profile's child writes: device, software and the catalogue's entries
    (those it lacks are filled in as absent by the child, harness.predict.profile.completed)."""
    device = open_device(device_name)
    bench = Bench(device, quick)
    entries: dict[str, Entry] = {}
    host_passes = []  # the host loops between the groups: hostspeed.fastest says why
    for measurement in MEASUREMENTS:
        entries.update(measurement(bench))
        host_passes.append(hostspeed.measure(bench.policy))
    entries.update(hostspeed.fastest(host_passes))
    return {"device": device_info(device), "software": software_info(), "entries": entries}

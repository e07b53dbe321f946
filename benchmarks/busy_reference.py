"""Hand measurements to hold the harness's device-busy pass against, on one GPU.

    python3 benchmarks/busy_reference.py OUT.json [--device cuda] [--batch 32]
                                         [--sizes 256,512,1024,2048,4096,8192]

Independent of the harness's code on purpose (only torch and triton):
- MNIST training step (dense-128 and dense-1000x2, Adam defaults, data already on the device):
  wall time per step over a loop with a synchronize at each end; the device time the way one
  measures it by hand, the sum of `self_device_time_total` over torch.profiler's key_averages;
  the kernel count; the same step replayed from a CUDA graph (CUDA events).
- float32 matmul: triton.testing.do_bench (median; it clears the L2 before every call) and the
  same event-per-call timing without that clearing, which is what back-to-back calls see.
On a machine without CUDA it still runs the MNIST part on the CPU (a smoke test of this file).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

PIXELS, CLASSES = 28 * 28, 10
WARMUP_STEPS = 30
TIMED_STEPS = 300
PROFILED_STEPS = 100
GRAPH_REPLAYS = 300
MATMUL_EVENT_CALLS = 100


def build_step(hidden: tuple[int, ...], batch: int, device: torch.device,
               capturable: bool = False) -> Callable[[], None]:
    """One training step on a fixed batch already on the device (the seed's model, in torch).

    Adam with its defaults, as the harness's preloaded variant; capturable=True only for the
    step that is captured in a CUDA graph (its step counter must live on the device).
    """
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Flatten()]
    width = PIXELS
    for units in hidden:
        layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(0.2)]
        width = units
    model = nn.Sequential(*layers, nn.Linear(width, CLASSES)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), capturable=capturable)
    images = torch.rand(batch, 28, 28, device=device)
    labels = torch.randint(0, CLASSES, (batch,), device=device)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images), labels).backward()
        optimizer.step()

    return step


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall_per_call(step: Callable[[], None], device: torch.device, calls: int) -> float:
    synchronize(device)
    started = time.perf_counter()
    for _ in range(calls):
        step()
    synchronize(device)
    return (time.perf_counter() - started) / calls


def profiled_device_time(step: Callable[[], None], device: torch.device) -> dict[str, float]:
    """Device time and kernels per step, read the way one reads torch.profiler by hand."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                           else [])
    with profile(activities=activities) as profiler:
        for _ in range(PROFILED_STEPS):
            step()
        synchronize(device)
    # As the profiler table's "Self CUDA time total": device-side rows only (a CPU op's row
    # repeats the time of the kernels it launched).
    cuda = torch.autograd.DeviceType.CUDA
    device_us = sum(item.self_device_time_total for item in profiler.key_averages()
                    if item.device_type == cuda)
    kernels = sum(1 for event in profiler.events() if event.device_type == cuda)
    return {"device_s": device_us * 1e-6 / PROFILED_STEPS, "kernels": kernels / PROFILED_STEPS}


def graph_replay_per_step(hidden: tuple[int, ...], batch: int,
                          device: torch.device) -> float | None:
    """Seconds per replay of the step captured in a CUDA graph (CUDA events)."""
    if device.type != "cuda":
        return None
    step = build_step(hidden, batch, device, capturable=True)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(10):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(GRAPH_REPLAYS):
        graph.replay()
    end.record()
    torch.cuda.synchronize(device)
    return start.elapsed_time(end) * 1e-3 / GRAPH_REPLAYS


def mnist_reference(hidden: tuple[int, ...], batch: int, device: torch.device) -> dict[str, Any]:
    step = build_step(hidden, batch, device)
    for _ in range(WARMUP_STEPS):
        step()
    wall = statistics.median(wall_per_call(step, device, TIMED_STEPS) for _ in range(3))
    profiled = profiled_device_time(step, device)
    return {"wall_s": wall, "device_s": profiled["device_s"],
            "busy_share": profiled["device_s"] / wall, "kernels": profiled["kernels"],
            "graph_step_s": graph_replay_per_step(hidden, batch, device)}


def events_per_call(fn: Callable[[], object], calls: int) -> float:
    """Median seconds of single calls between CUDA events, no cache clearing between them."""
    for _ in range(10):
        fn()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(calls)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in pairs) * 1e-3


def matmul_row(n: int, do_bench: Callable[..., float] | None) -> dict[str, float]:
    a = torch.rand(n, n, device="cuda")
    b = torch.rand(n, n, device="cuda")

    def call() -> torch.Tensor:
        return torch.matmul(a, b)

    row = {"events_no_flush_s": events_per_call(call, MATMUL_EVENT_CALLS if n <= 4096 else 20)}
    if do_bench is not None:
        row["do_bench_s"] = do_bench(call, return_mode="median") * 1e-3
    return row


def matmul_reference(sizes: list[int]) -> dict[str, Any]:
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as in the harness
    try:
        from triton.testing import do_bench
    except ImportError:
        do_bench = None
    found = {str(n): matmul_row(n, do_bench) for n in sizes}
    torch.cuda.empty_cache()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--sizes", default="256,512,1024,2048,4096,8192")
    args = parser.parse_args()
    device = torch.device(args.device)
    document: dict[str, Any] = {
        "torch": torch.__version__, "device": args.device, "batch": args.batch,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "mnist": {"mnist-small": mnist_reference((128,), args.batch, device),
                  "mnist-wide": mnist_reference((1000, 1000), args.batch, device)},
    }
    if device.type == "cuda":
        document["matmul"] = matmul_reference([int(n) for n in args.sizes.split(",")])
    args.out.write_text(json.dumps(document, indent=2))
    print(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()

"""PyTorch devices: placement with `.to(device)`, synchronisation with torch.cuda.synchronize.

The device-busy pass (`TorchDevice.profile`) reads two device clocks: CUDA events around the
calls for the span, and torch.profiler's CUPTI trace for each kernel's and copy's own time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from harness.backend import (
    DeviceUnavailable,
    ProfileUnavailable,
    VariantUnavailable,
    parse_cuda_index,
)
from harness.measure.devicetime import DeviceEvent, DeviceProfile, classify, summarize
from harness.measure.envinfo import cpu_model

PROFILE_TOOL = "torch.profiler (CUPTI kernel and copy times) + CUDA events (span)"
# Host API calls that put work on a stream; a graph replay is one launch of many kernels.
# A CUDA runtime or driver API call by name (cudaLaunchKernel, cuLaunchKernel, cudaMemcpyAsync).
RUNTIME_CALL = re.compile(r"^cu(da)?[A-Z]")
LAUNCH_CALL = re.compile(r"^cu(da)?(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|"
                         r"Memcpy\w*Async|Memset\w*Async)")


def version() -> str:
    cuda = torch.version.cuda
    return f"{torch.__version__}" + (f" (CUDA {cuda})" if cuda else "")


def threads() -> dict[str, Any]:
    return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}


def list_devices() -> list[dict[str, str]]:
    devices = [{"name": "cpu", "description": cpu_model()}]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            devices.append({"name": f"cuda:{index}",
                            "description": torch.cuda.get_device_name(index)})
    return devices


@dataclass
class TorchDevice:
    """An opened torch device; `handle` is what `.to()` takes."""

    name: str
    description: str
    handle: torch.device
    init_seconds: float | None = None  # CUDA context creation, measured when opened

    def synchronize(self) -> None:
        if self.handle.type == "cuda":
            torch.cuda.synchronize(self.handle)

    def peak_memory_bytes(self) -> int | None:
        if self.handle.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.handle))
        return None

    def peak_device_memory(self) -> dict[str, int | None]:
        """Peak bytes held by tensors (allocated) and by the caching allocator (reserved).

        Reserved is what other processes cannot use; allocated is what the tensors needed.
        """
        if self.handle.type != "cuda":
            return {"allocated": None, "reserved": None}
        return {"allocated": int(torch.cuda.max_memory_allocated(self.handle)),
                "reserved": int(torch.cuda.max_memory_reserved(self.handle))}

    def reset_peak_memory(self) -> None:
        """Start a new peak, so each case reports its own."""
        if self.handle.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.handle)

    @property
    def is_gpu(self) -> bool:
        return self.handle.type == "cuda"

    def profile(self, step: Callable[[], object], calls: int) -> DeviceProfile:
        """Per-call device busy time, copies, kernels and launches of `calls` warm calls.

        Two passes, neither of them timed samples: the span with CUDA events only (so the
        profiler's per-event cost is not in it), then the kernels under torch.profiler.
        """
        if not self.is_gpu:
            raise ProfileUnavailable("cpu: no device clock")
        span = event_span_seconds(step, calls, self.handle)
        events, launches = profiled_events(step, calls, self.handle)
        if not events:
            raise ProfileUnavailable("torch.profiler recorded no device activity "
                                     "(CUPTI unavailable or blocked?)")
        return summarize(events, calls, launches, span, PROFILE_TOOL)


def capture_cuda_graph(fn: Callable[[], Any], handle: torch.device,
                       warmup_calls: int = 3) -> tuple[torch.cuda.CUDAGraph, Any]:
    """Capture one call of `fn` in a CUDA graph; returns the graph and fn's (static) output.

    As torch.cuda.graphs asks: warm-up calls on a side stream first (cuBLAS workspaces and
    autograd's streams are set up outside the capture). Capture records, it does not run: the
    caller replays the graph to run it. A capture torch refuses makes the variant unavailable.
    """
    side = torch.cuda.Stream(handle)
    side.wait_stream(torch.cuda.current_stream(handle))
    with torch.cuda.stream(side):
        for _ in range(warmup_calls):
            fn()
    torch.cuda.current_stream(handle).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            output = fn()
    except RuntimeError as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        raise VariantUnavailable(f"CUDA graph capture failed here: {first_line}") from exc
    return graph, output


def require_cuda(device: TorchDevice, variant: str) -> None:
    if not device.is_gpu:
        raise VariantUnavailable(f"variant {variant} replays CUDA graphs: it needs a CUDA device")


def event_span_seconds(step: Callable[[], object], calls: int, handle: torch.device) -> float:
    """Seconds per call between CUDA events recorded before the first and after the last call."""
    torch.cuda.synchronize(handle)
    stream = torch.cuda.current_stream(handle)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    for _ in range(calls):
        step()
    end.record(stream)
    torch.cuda.synchronize(handle)
    return start.elapsed_time(end) * 1e-3 / calls


def profiled_events(step: Callable[[], object], calls: int,
                    handle: torch.device) -> tuple[list[DeviceEvent], int | None]:
    """The device's kernels, copies and memsets during `calls` calls, and the host's launches.

    CUDA activity only: recording every CPU operator too would cost far more per call and
    is not needed for device time. The raw kineto events are read directly, because building
    torch's FunctionEvent tree for an epoch of ~100,000 kernels takes longer than the epoch.
    """
    from torch.profiler import ProfilerActivity, profile  # GPU cells only: imported late

    torch.cuda.synchronize(handle)
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(calls):
            step()
        torch.cuda.synchronize(handle)
    results = getattr(profiler.profiler, "kineto_results", None)
    if results is None:
        raise ProfileUnavailable(f"torch {torch.__version__}: profiler results carry no "
                                 "kineto events")
    return device_events(results.events())


def device_events(raw_events: Any) -> tuple[list[DeviceEvent], int | None]:
    """Kineto events -> device work (kernels, copies, memsets) and a count of launch calls."""
    events, launches, saw_host_calls = [], 0, False
    for raw in raw_events:
        # torch 2.11's kineto events have no activity_type (2.13's do): then names decide,
        # as for TensorFlow's trace (seen on the H200 machine).
        activity = str(raw.activity_type()) if hasattr(raw, "activity_type") else ""
        name = str(raw.name())
        if raw.device_type() == torch.autograd.DeviceType.CUDA:
            kind = classify(activity, name)
            if kind is not None:
                events.append(DeviceEvent(kind, name, int(raw.start_ns()),
                                          int(raw.duration_ns())))
        elif activity in ("cuda_runtime", "cuda_driver") or (
                not activity and RUNTIME_CALL.match(name)):
            saw_host_calls = True
            launches += bool(LAUNCH_CALL.match(name))
    return events, launches if saw_host_calls else None


def open_device(name: str) -> TorchDevice:
    """'cpu' or 'cuda:N'; DeviceUnavailable with the reason if it is not there."""
    if name == "cpu":
        return TorchDevice("cpu", cpu_model(), torch.device("cpu"))
    index = parse_cuda_index(name)
    if index is None:
        raise DeviceUnavailable(f"torch has no device {name!r}")
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else "a CUDA build, no GPU visible"
        raise DeviceUnavailable(f"torch {torch.__version__} sees no CUDA device ({build})")
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceUnavailable(f"{name} does not exist: torch sees {count} CUDA device(s)")
    handle = torch.device("cuda", index)
    # The context must exist before memory stats can be reset ("Invalid device argument");
    # creating it is the first-use cost users see, so it is timed and reported apart.
    started = time.perf_counter()
    torch.empty(1, device=handle)
    torch.cuda.synchronize(handle)
    init_seconds = time.perf_counter() - started
    torch.cuda.reset_peak_memory_stats(handle)
    return TorchDevice(name, torch.cuda.get_device_name(index), handle, init_seconds)


@contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """TF32 for matmuls and cuDNN on or off inside, as it was after (a variant may have set it
    process-wide: the sensitivity's float32 reruns and the device profile's rows set their own)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved

"""TensorFlow devices: placement with `tf.device('/CPU:0' | '/GPU:N')`.

Synchronisation: `tf.test.experimental.sync_devices()` waits for every device's queued work
(TF >= 2.13); eager ops on the CPU are already synchronous.

Device-busy pass: tf.profiler's trace (an XPlane protobuf) holds every kernel and copy per GPU
stream; TensorFlow has no CUDA events, so the span is the trace's own first-to-last extent.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorflow as tf

from harness.backend import DeviceUnavailable, ProfileUnavailable, parse_cuda_index
from harness.measure.devicetime import DeviceEvent, DeviceProfile, classify, summarize
from harness.measure.envinfo import cpu_model

PROFILE_TOOL = "tf.profiler (XPlane device trace; span from the trace)"


def _configure_gpus() -> list[Any]:
    """Memory growth on, so TF does not reserve the whole card at start."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # already initialised: growth can no longer change
            pass
    return gpus


GPUS = _configure_gpus()
# Plain float32 must mean float32: TF enables TF32 matmuls on Ampere+ GPUs by default.
tf.config.experimental.enable_tensor_float_32_execution(False)


def version() -> str:
    build = tf.sysconfig.get_build_info()
    cuda = build.get("cuda_version")
    return f"{tf.__version__}" + (f" (CUDA {cuda})" if cuda else "")


def threads() -> dict[str, Any]:
    # 0 means "let TF choose" (all cores); report what it was told.
    return {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
            "TF_NUM_INTRAOP_THREADS": os.environ.get("TF_NUM_INTRAOP_THREADS", "")}


def _gpu_description(index: int) -> str:
    details = tf.config.experimental.get_device_details(GPUS[index])
    return details.get("device_name", f"GPU {index}")


def list_devices() -> list[dict[str, str]]:
    devices = [{"name": "cpu", "description": cpu_model()}]
    devices += [{"name": f"cuda:{i}", "description": _gpu_description(i)} for i in range(len(GPUS))]
    return devices


@dataclass
class TensorFlowDevice:
    """An opened TF device; `handle` is the string `tf.device()` takes."""

    name: str
    description: str
    handle: str

    def synchronize(self) -> None:
        if self.is_gpu:
            tf.test.experimental.sync_devices()

    def peak_memory_bytes(self) -> int | None:
        if not self.is_gpu:
            return None
        return int(tf.config.experimental.get_memory_info(self.handle.strip("/"))["peak"])

    def peak_device_memory(self) -> dict[str, int | None]:
        """Peak bytes in use by TF's allocator; TF reports no separate reserved figure."""
        return {"allocated": self.peak_memory_bytes(), "reserved": None}

    def reset_peak_memory(self) -> None:
        """Start a new peak, so each case reports its own."""
        if self.is_gpu:
            tf.config.experimental.reset_memory_stats(self.handle.strip("/"))

    @property
    def is_gpu(self) -> bool:
        return self.handle.startswith("/GPU")

    def profile(self, step: Callable[[], object], calls: int) -> DeviceProfile:
        """Per-call busy time, copies and kernels of `calls` warm calls, from tf.profiler."""
        if not self.is_gpu:
            raise ProfileUnavailable("cpu: no device clock")
        space = traced_space(step, calls)
        events = xspace_device_events(space, int(self.handle.rsplit(":", 1)[1]))
        if not events:
            raise ProfileUnavailable("tf.profiler's trace holds no GPU kernels (CUPTI missing?)")
        span = (max(e.end_ns for e in events) - min(e.start_ns for e in events)) * 1e-9 / calls
        return summarize(events, calls, None, span, PROFILE_TOOL)


def traced_space(step: Callable[[], object], calls: int) -> Any:
    """Run `calls` calls under tf.profiler and read back the XSpace it wrote."""
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2  # where TF 2.x ships it
    except ImportError as exc:
        raise ProfileUnavailable(f"tensorflow {tf.__version__} ships no XPlane reader") from exc
    with tempfile.TemporaryDirectory(prefix="harness-tf-trace-") as log_dir:
        tf.test.experimental.sync_devices()
        tf.profiler.experimental.start(log_dir)
        try:
            for _ in range(calls):
                step()
            tf.test.experimental.sync_devices()
        finally:
            tf.profiler.experimental.stop()
        traces = sorted(Path(log_dir).rglob("*.xplane.pb"))
        if not traces:
            raise ProfileUnavailable("tf.profiler wrote no trace")
        space = xplane_pb2.XSpace()
        space.ParseFromString(traces[-1].read_bytes())
    return space


def xspace_device_events(space: Any, gpu_index: int) -> list[DeviceEvent]:
    """Kernels, copies and memsets on the GPU's stream lines of an XSpace.

    Only lines named 'Stream ...' hold device activity; the plane's other lines ('XLA Ops',
    'TensorFlow Ops', 'Steps') are annotations spanning those kernels and would count twice.
    """
    events = []
    for plane in space.planes:
        if plane.name != f"/device:GPU:{gpu_index}":
            continue
        for line in plane.lines:
            if not (line.display_name or line.name).startswith("Stream"):
                continue
            for item in line.events:
                name = plane.event_metadata[item.metadata_id].name
                kind = classify("", name)
                if kind is not None:
                    start_ns = line.timestamp_ns + item.offset_ps // 1000
                    events.append(DeviceEvent(kind, name, start_ns, item.duration_ps // 1000))
    return events


def open_device(name: str) -> TensorFlowDevice:
    if name == "cpu":
        return TensorFlowDevice("cpu", cpu_model(), "/CPU:0")
    index = parse_cuda_index(name)
    if index is None:
        raise DeviceUnavailable(f"tensorflow has no device {name!r}")
    if not GPUS:
        built = tf.test.is_built_with_cuda()
        why = "a build without CUDA (tensorflow-cpu)" if not built else "no GPU visible"
        raise DeviceUnavailable(f"tensorflow {tf.__version__} sees no GPU ({why})")
    if index >= len(GPUS):
        raise DeviceUnavailable(f"{name} does not exist: tensorflow sees {len(GPUS)} GPU(s)")
    tf.config.experimental.reset_memory_stats(f"GPU:{index}")
    return TensorFlowDevice(name, _gpu_description(index), f"/GPU:{index}")

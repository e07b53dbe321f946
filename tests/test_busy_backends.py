"""The backends' device-busy plumbing and the new variants, each framework in its own process.

GPU profiling cannot run here; what can: torch's kineto-event reader on made-up and on real
(CPU) events, TensorFlow's XPlane reader on a made-up trace, the CPU refusals, and the Keras
steps_per_execution / jit_compile variants and torch's Adam variants through the worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from harness.run.forkserver import ForkServers
from harness.run.runner import PROJECT_ROOT, cell_environment, run_worker
from harness.spec import Cell
from harness.workloads import mnist
from tests.quick_options import quick_options

TORCH_SCRIPT = """
import json, types
import torch
from torch.profiler import ProfilerActivity, profile
from harness.backends.torch.device import device_events, open_device
from harness.backend import ProfileUnavailable

def raw(activity, name, device, start, duration):
    return types.SimpleNamespace(activity_type=lambda: activity, name=lambda: name,
        device_type=lambda: device, start_ns=lambda: start, duration_ns=lambda: duration)

CUDA, CPU = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
made_up = [raw("kernel", "sgemm", CUDA, 0, 10_000),
           raw("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", CUDA, 10_000, 5_000),
           raw("gpu_user_annotation", "ProfilerStep#0", CUDA, 0, 20_000),
           raw("cuda_runtime", "cudaLaunchKernel", CPU, 0, 3_000),
           raw("cuda_runtime", "cudaMemcpyAsync", CPU, 0, 3_000),
           raw("cuda_runtime", "cudaStreamSynchronize", CPU, 0, 3_000)]
events, launches = device_events(made_up)

def bare(name, device, start, duration):  # torch 2.11: no activity_type on kineto events
    return types.SimpleNamespace(name=lambda: name, device_type=lambda: device,
        start_ns=lambda: start, duration_ns=lambda: duration)

old_style, old_launches = device_events([
    bare("sgemm", CUDA, 0, 10_000), bare("Memcpy HtoD (Pinned -> Device)", CUDA, 10_000, 5_000),
    bare("cudaLaunchKernel", CPU, 0, 3_000), bare("cudaStreamSynchronize", CPU, 0, 3_000),
    bare("aten::mm", CPU, 0, 3_000)])
with profile(activities=[ProfilerActivity.CPU]) as prof:
    torch.ones(8) @ torch.ones(8)
real_events, real_launches = device_events(prof.profiler.kineto_results.events())
try:
    open_device("cpu").profile(lambda: None, 1)
    refused = ""
except ProfileUnavailable as exc:
    refused = str(exc)
print(json.dumps({"kinds": [e.kind for e in events], "launches": launches,
                  "old_kinds": [e.kind for e in old_style], "old_launches": old_launches,
                  "real": len(real_events), "real_launches": real_launches,
                  "refused": refused}))
"""

TF_SCRIPT = """
import json
from tensorflow.tsl.profiler.protobuf import xplane_pb2
from harness.backends.tensorflow.device import open_device, xspace_device_events
from harness.backend import ProfileUnavailable

space = xplane_pb2.XSpace()
gpu = space.planes.add(name="/device:GPU:0")
for key, name in {1: "volta_sgemm", 2: "MemcpyH2D", 3: "fusion_1"}.items():
    gpu.event_metadata[key].id, gpu.event_metadata[key].name = key, name
stream = gpu.lines.add(name="Stream #7(Compute)", timestamp_ns=1000)
stream.events.add(metadata_id=1, offset_ps=0, duration_ps=4_000_000)
stream.events.add(metadata_id=2, offset_ps=5_000_000, duration_ps=1_000_000)
ops = gpu.lines.add(name="XLA Ops", timestamp_ns=1000)
ops.events.add(metadata_id=3, offset_ps=0, duration_ps=6_000_000)
other = space.planes.add(name="/device:GPU:1")
other.event_metadata[1].name = "volta_sgemm"
other.lines.add(name="Stream #1").events.add(metadata_id=1, duration_ps=9_000_000)
events = xspace_device_events(space, 0)
try:
    open_device("cpu").profile(lambda: None, 1)
    refused = ""
except ProfileUnavailable as exc:
    refused = str(exc)
print(json.dumps({"events": [[e.kind, e.name, e.start_ns, e.duration_ns] for e in events],
                  "refused": refused}))
"""


def run_script(source: str, framework: str) -> dict[str, Any]:
    """One framework's snippet in its own interpreter (never two frameworks in one)."""
    env = cell_environment(Cell("test", "-", framework, "cpu"))
    completed = subprocess.run([sys.executable, "-c", source], cwd=PROJECT_ROOT, env=env,
                               capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_torch_reads_device_work_and_launches_from_kineto_events() -> None:
    found = run_script(TORCH_SCRIPT, "torch")
    assert found["kinds"] == ["kernel", "memcpy"]  # the annotation is not device work
    assert found["launches"] == 2  # a launch and a copy; a synchronize enqueues nothing
    assert found["old_kinds"] == ["kernel", "memcpy"] and found["old_launches"] == 1
    # A real (CPU-only) trace: no device work, and no host launch calls recorded at all.
    assert found["real"] == 0 and found["real_launches"] is None
    assert "no device clock" in found["refused"]


@pytest.mark.slow
def test_tensorflow_reads_kernels_and_copies_from_gpu_stream_lines() -> None:
    found = run_script(TF_SCRIPT, "tensorflow")
    assert found["events"] == [["kernel", "volta_sgemm", 1000, 4000],
                               ["memcpy", "MemcpyH2D", 6000, 1000]]
    assert "no device clock" in found["refused"]


def run_mnist(framework: str, variant: str, servers: ForkServers) -> dict[str, Any]:
    """One cpu cell through a worker forked from SERVERS' warm process for its framework."""
    # 2 epochs of 50 steps: the fewest at which the check still judges accuracy.
    params = {**mnist.SMALL.defaults(quick=True), "epochs": 2,
              "train_samples": 32 * mnist.MIN_STEPS_TO_JUDGE // 2}
    result = run_worker(Cell("mnist-small", variant, framework, "cpu", params),
                        quick_options(300), servers).to_dict()
    return result


@pytest.mark.slow
@pytest.mark.parametrize("framework, variant, extra", [
    ("tensorflow", "steps-per-execution",
     {"steps_per_execution": mnist.STEPS_PER_EXECUTION, "jit_compile": False}),
    ("tensorflow", "compiled-steps",
     {"steps_per_execution": mnist.STEPS_PER_EXECUTION, "jit_compile": True}),
    ("torch", "adam-fused", {"adam_fused": True}),
])
def test_host_overhead_variants_train_and_pass_the_check(framework: str, variant: str,
                                                          extra: dict[str, Any],
                                                          warm_servers: ForkServers) -> None:
    result = run_mnist(framework, variant, warm_servers)
    assert result["status"] == "ok", result["reason"]
    case = result["cases"][0]
    assert case["check"]["passed"] and case["extra"]["accuracy"] > mnist.ACCURACY_BOUND
    assert {key: case["extra"][key] for key in extra} == extra
    assert case["device_profile"]["reason"].startswith("cpu cell")


@pytest.mark.slow
def test_a_variant_of_the_other_framework_is_unavailable_with_the_reason(
        warm_servers: ForkServers) -> None:
    result = run_mnist("torch", "steps-per-execution", warm_servers)
    assert result["status"] == "unavailable" and "Keras fit option" in result["reason"]


def test_gpu_only_variants_are_declared() -> None:
    from harness.core import registry

    assert "fp32-graph" in registry.load_workload("matmul").device_only_variants
    assert "per-sample-graph" in registry.load_workload("jacobian").device_only_variants
    assert set(mnist.SMALL.device_only_variants) == {"cuda-graph", "reduce-overhead"}

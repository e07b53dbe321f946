"""Common ops of a training step, each one call, for counting what they dispatch and launch.

A device profile (backends/torch/gpuprofile.py) counts, per op below, the aten ops it
dispatches (device-independent) and, on a GPU, the kernels, memsets and copies it runs and the
host's launch calls (torch.profiler): what turns a CPU run's op list into a GPU's launches.
Sizes are small on purpose: the counts, not the times, are wanted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import torch

from harness.backends.torch.device import profiled_events
from harness.measure.devicetime import COPY, KERNEL, MEMSET

WIDTH, BATCH = 256, 64


def common_ops(handle: torch.device) -> dict[str, Callable[[], object]]:
    """name -> one call of it on HANDLE (inputs and modules made here, once)."""
    torch.manual_seed(0)
    x = torch.randn(BATCH, WIDTH, device=handle)
    linear = torch.nn.Linear(WIDTH, WIDTH).to(handle)
    conv = torch.nn.Conv2d(16, 16, 3, padding=1).to(handle)
    image = torch.randn(8, 16, 32, 32, device=handle)
    norm = torch.nn.LayerNorm(WIDTH).to(handle)
    mlp = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
                              torch.nn.Linear(WIDTH, 10)).to(handle)
    adam = torch.optim.Adam(mlp.parameters())  # torch's default implementation for HANDLE
    for parameter in mlp.parameters():
        parameter.grad = torch.randn_like(parameter)

    def linear_forward_backward() -> None:
        linear.zero_grad(set_to_none=True)
        linear(x).sum().backward()

    def conv_forward() -> object:
        with torch.no_grad():
            return conv(image)

    def layernorm_forward() -> object:
        with torch.no_grad():
            return norm(x)

    return {"linear fwd+bwd": linear_forward_backward, "conv2d fwd": conv_forward,
            "layernorm fwd": layernorm_forward,
            "softmax fwd": lambda: torch.softmax(x, dim=-1),
            "adam step (4 tensors)": adam.step}


def kernel_counts(step: Callable[[], object], handle: torch.device,
                  calls: int = 3) -> dict[str, float]:
    """Per call of STEP (after two warm-up calls): kernels, memsets, copies and, where the
    profiler saw the runtime's calls, the host's launch calls."""
    for _ in range(2):
        step()
    events, launches = profiled_events(step, calls, handle)
    kinds = Counter(event.kind for event in events)
    counts = {"kernels": kinds[KERNEL] / calls, "memsets": kinds[MEMSET] / calls,
              "copies": kinds[COPY] / calls}
    if launches is not None:
        counts["launches"] = launches / calls
    return counts

"""torch: 200x200 matmul resident vs copied every call, and pageable/pinned copy bandwidth."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from backends.torch.device import TorchDevice
from backends.torch.matmul import MatmulTask as ResidentMatmulTask
from harness.backend import VariantUnavailable


class CopyMatmulTask:
    """Host numpy in, host numpy out: each step() pays both copies, as the seed's loop did.

    On the cpu device the same code has nowhere to copy to (from_numpy and .cpu() share memory),
    so what remains is the cost of crossing between numpy and torch.
    """

    def __init__(self, a_host: np.ndarray, b_host: np.ndarray, device: torch.device) -> None:
        self.a_host, self.b_host, self.device = a_host, b_host, device
        self.c_host: np.ndarray | None = None

    def step(self) -> None:
        a = torch.from_numpy(self.a_host).to(self.device)
        b = torch.from_numpy(self.b_host).to(self.device)
        # .cpu() waits for the matmul: the caller gets a finished numpy array every call.
        self.c_host = torch.matmul(a, b).cpu().numpy()

    def output(self) -> dict[str, Any]:
        return {"c": self.c_host}


class HostToDeviceTask:
    """Copy one host buffer to the device per step(); pinned buffers go asynchronously."""

    def __init__(self, host: torch.Tensor, device: torch.device, non_blocking: bool) -> None:
        self.host, self.device, self.non_blocking = host, device, non_blocking
        self.on_device: torch.Tensor | None = None

    def step(self) -> None:
        # A fresh tensor each call (the caching allocator makes that cheap): nothing to reuse.
        self.on_device = self.host.to(self.device, non_blocking=self.non_blocking)

    def output(self) -> dict[str, Any]:
        return {"copied": self.on_device.cpu().numpy()}


class DeviceToHostTask:
    """Copy one device buffer into a preallocated host buffer per step().

    Preallocated for both kinds so that pageable vs pinned differs only in the memory: a fresh
    .to("cpu") of a large tensor would also time malloc and first-touch page faults.
    """

    def __init__(self, on_device: torch.Tensor, host: torch.Tensor, non_blocking: bool) -> None:
        self.on_device, self.host, self.non_blocking = on_device, host, non_blocking

    def step(self) -> None:
        self.host.copy_(self.on_device, non_blocking=self.non_blocking)

    def output(self) -> dict[str, Any]:
        return {"copied": self.host.numpy().copy()}


def bandwidth_task(variant: str, device: TorchDevice, buffer: np.ndarray):
    """The copy task of one bandwidth variant, its buffers prepared outside the clock."""
    if not device.is_gpu:
        raise VariantUnavailable(f"variant {variant} needs a GPU device")
    pinned = variant.endswith("-pinned")
    host = torch.from_numpy(buffer)
    if variant.startswith("h2d"):
        return HostToDeviceTask(host.pin_memory() if pinned else host, device.handle, pinned)
    on_device = host.to(device.handle)
    destination = torch.empty(host.shape, dtype=host.dtype, pin_memory=pinned)
    return DeviceToHostTask(on_device, destination, pinned)


def make_task(case: dict, variant: str, device: TorchDevice, inputs: dict[str, np.ndarray]):
    # Plain float32 must not silently use TF32 tensor cores.
    torch.backends.cuda.matmul.allow_tf32 = False
    if variant == "matmul-resident":
        a = torch.from_numpy(inputs["a"]).to(device.handle)
        b = torch.from_numpy(inputs["b"]).to(device.handle)
        return ResidentMatmulTask(a, b)
    if variant == "matmul-copy":
        return CopyMatmulTask(inputs["a"], inputs["b"], device.handle)
    return bandwidth_task(variant, device, inputs["buffer"])

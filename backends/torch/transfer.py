"""torch: 200x200 matmul resident vs copied every call, and pageable/pinned copy bandwidth."""

from __future__ import annotations

import numpy as np
import torch

from harness.backend import VariantUnavailable
from harness.backends.torch.device import TorchDevice
from harness.backends.torch.matmul import MatmulTask as ResidentMatmulTask


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

    def output(self) -> dict[str, np.ndarray]:
        assert self.c_host is not None  # output() follows the timed step() calls
        return {"c": self.c_host}


class OverlappedCopyMatmulTask:
    """matmul-copy done the idiomatic fast way: pinned host buffers, non-blocking copies, and a
    copy stream that moves call i+1's inputs while call i multiplies and sends its result back.

    Two slots of device inputs and pinned outputs; an event per slot keeps a copy from
    overwriting inputs a queued matmul has not read yet. Nothing here waits for the host, so
    back-to-back calls pipeline; the harness's device-wide synchronize closes each sample.
    """

    SLOTS = 2

    def __init__(self, a_host: np.ndarray, b_host: np.ndarray, device: torch.device) -> None:
        self.device = device
        self.a_host = torch.from_numpy(a_host).pin_memory()
        self.b_host = torch.from_numpy(b_host).pin_memory()
        self.a_slots = [torch.empty_like(self.a_host, device=device) for _ in range(self.SLOTS)]
        self.b_slots = [torch.empty_like(self.b_host, device=device) for _ in range(self.SLOTS)]
        out_shape = (a_host.shape[0], b_host.shape[1])
        self.c_slots = [torch.empty(out_shape, pin_memory=True) for _ in range(self.SLOTS)]
        self.slot_free: list[torch.cuda.Event | None] = [None] * self.SLOTS
        self.copy_stream = torch.cuda.Stream(device)
        self.compute_stream = torch.cuda.Stream(device)
        self.calls = 0

    def step(self) -> None:
        slot = self.calls % self.SLOTS
        self.calls += 1
        with torch.cuda.stream(self.copy_stream):
            if (free := self.slot_free[slot]) is not None:  # the matmul two calls ago read it
                self.copy_stream.wait_event(free)
            self.a_slots[slot].copy_(self.a_host, non_blocking=True)
            self.b_slots[slot].copy_(self.b_host, non_blocking=True)
            inputs_ready = torch.cuda.Event()
            inputs_ready.record(self.copy_stream)
        with torch.cuda.stream(self.compute_stream):
            self.compute_stream.wait_event(inputs_ready)
            result = torch.matmul(self.a_slots[slot], self.b_slots[slot])
            self.c_slots[slot].copy_(result, non_blocking=True)
            finished = torch.cuda.Event()
            finished.record(self.compute_stream)
        self.slot_free[slot] = finished

    def output(self) -> dict[str, np.ndarray]:
        torch.cuda.synchronize(self.device)
        last_slot = (self.calls - 1) % self.SLOTS
        return {"c": self.c_slots[last_slot].numpy().copy()}


class HostToDeviceTask:
    """Copy one host buffer to the device per step(); pinned buffers go asynchronously."""

    def __init__(self, host: torch.Tensor, device: torch.device, non_blocking: bool) -> None:
        self.host, self.device, self.non_blocking = host, device, non_blocking
        self.on_device: torch.Tensor | None = None

    def step(self) -> None:
        # A fresh tensor each call (the caching allocator makes that cheap): nothing to reuse.
        self.on_device = self.host.to(self.device, non_blocking=self.non_blocking)

    def output(self) -> dict[str, np.ndarray]:
        assert self.on_device is not None  # output() follows the timed step() calls
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

    def output(self) -> dict[str, np.ndarray]:
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
    if variant == "matmul-overlap":
        if not device.is_gpu:
            raise VariantUnavailable("matmul-overlap needs a GPU: there is nothing to overlap")
        return OverlappedCopyMatmulTask(inputs["a"], inputs["b"], device.handle)
    return bandwidth_task(variant, device, inputs["buffer"])

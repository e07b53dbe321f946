"""PyTorch devices: placement with `.to(device)`, synchronisation with torch.cuda.synchronize."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from harness.backend import DeviceUnavailable, parse_cuda_index
from harness.envinfo import cpu_model


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

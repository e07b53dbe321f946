"""NumPy: the CPU baseline (seed experiment 4 compared against numpy). Synchronous by nature."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.backend import DeviceUnavailable
from harness.measure.envinfo import cpu_model


def version() -> str:
    return np.__version__


def threads() -> dict[str, Any]:
    try:
        config = np.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {}).get("name", "")
    except TypeError:  # numpy < 1.25 has no mode argument
        blas = ""
    return {"blas": blas}


def list_devices() -> list[dict[str, str]]:
    return [{"name": "cpu", "description": cpu_model()}]


@dataclass
class NumpyDevice:
    name: str
    description: str

    def synchronize(self) -> None:
        """Nothing to wait for: numpy returns when its work is done."""

    def peak_memory_bytes(self) -> int | None:
        return None

    is_gpu = False


def open_device(name: str) -> NumpyDevice:
    if name != "cpu":
        raise DeviceUnavailable(f"numpy runs on the cpu only, not {name}")
    return NumpyDevice("cpu", cpu_model())

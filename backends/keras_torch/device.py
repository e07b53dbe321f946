"""Keras 3 on its torch backend: torch's devices and sync, Keras' version in the label."""

from __future__ import annotations

from typing import Any

import keras

from backends.keras.model import require_backend
from backends.torch import device as torch_device

require_backend("torch")

list_devices = torch_device.list_devices
open_device = torch_device.open_device


def version() -> str:
    return f"keras {keras.__version__} on torch {torch_device.version()}"


def threads() -> dict[str, Any]:
    return torch_device.threads()

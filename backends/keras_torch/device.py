"""Keras 3 on its torch backend: torch's devices and sync, Keras' version in the label."""

from __future__ import annotations

import os

# Keras reads KERAS_BACKEND once, at its first import. The runner sets it for every cell of
# this framework; set here too, before that import, for any other process that opens this
# backend (a contract test, a notebook). require_backend still refuses a Keras already up on
# another backend.
os.environ["KERAS_BACKEND"] = "torch"

from typing import Any

import keras

from harness.backends.keras.model import require_backend
from harness.backends.torch import device as torch_device

require_backend("torch")

list_devices = torch_device.list_devices
open_device = torch_device.open_device


def version() -> str:
    return f"keras {keras.__version__} on torch {torch_device.version()}"


def threads() -> dict[str, Any]:
    return torch_device.threads()

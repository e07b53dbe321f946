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
import torch

from harness.backends.keras.model import require_backend
from harness.backends.torch import device as torch_device

require_backend("torch")

list_devices = torch_device.list_devices


def settle_default_device() -> None:
    """Keras' default torch device, chosen again as Keras chooses it at import
    (keras/src/backend/torch/core.py), from this process's own environment.

    Why: `torch.cuda.is_available()` at Keras' import initialises the CUDA driver, which
    starts a thread even with every GPU hidden, so the run's warm process (harness.run.
    forkserver) could not fork and each keras-torch worker imported Keras anew (5.5 s of every
    worker on the H200 host). The warm process imports Keras with KERAS_TORCH_DEVICE=cpu
    (forkserver.WARM_ONLY_VARIABLES); the forked worker, whose GPUs are visible, chooses here.
    """
    from keras.src.backend.torch import core

    if "KERAS_TORCH_DEVICE" in os.environ:
        core.DEFAULT_DEVICE = os.environ["KERAS_TORCH_DEVICE"]
    elif torch.backends.mps.is_available():
        core.DEFAULT_DEVICE = "mps"
    elif torch.cuda.is_available():
        core.DEFAULT_DEVICE = "cuda"
    elif hasattr(torch, "xpu") and torch.xpu.is_available():
        core.DEFAULT_DEVICE = "xpu"
    else:
        core.DEFAULT_DEVICE = "cpu"


def open_device(name: str) -> Any:
    """torch's device NAME, after Keras' default device is chosen in this process."""
    settle_default_device()
    return torch_device.open_device(name)


def version() -> str:
    return f"keras {keras.__version__} on torch {torch_device.version()}"


def threads() -> dict[str, Any]:
    return torch_device.threads()

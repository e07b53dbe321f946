"""Keras 3 on its JAX backend: JAX's devices and sync, Keras' version in the label.

Keras' JAX backend leaves matmul precision to JAX, whose GPU default for float32 is TF32-like;
every other cell trains in float32, so this process asks JAX for float32 dots throughout.
"""

from __future__ import annotations

import os

# Keras reads KERAS_BACKEND once, at its first import. The runner sets it for every cell of
# this framework; set here too, before that import, for any other process that opens this
# backend (a contract test, a notebook). require_backend still refuses a Keras already up on
# another backend.
os.environ["KERAS_BACKEND"] = "jax"

from typing import Any

import jax
import keras

from harness.backends.jax import device as jax_device
from harness.backends.keras.model import require_backend

require_backend("jax")
jax.config.update("jax_default_matmul_precision", "highest")

list_devices = jax_device.list_devices
open_device = jax_device.open_device


def version() -> str:
    return f"keras {keras.__version__} on jax {jax_device.version()}"


def threads() -> dict[str, Any]:
    return {**jax_device.threads(), "matmul_precision": "highest"}

"""Keras 3 on its TensorFlow backend: TF's devices, memory growth and sync."""

from __future__ import annotations

import os

# Keras reads KERAS_BACKEND once, at its first import. The runner sets it for every cell of
# this framework; set here too, before that import, for any other process that opens this
# backend (a contract test, a notebook). require_backend still refuses a Keras already up on
# another backend.
os.environ["KERAS_BACKEND"] = "tensorflow"

from typing import Any

import keras

from harness.backends.keras.model import require_backend
from harness.backends.tensorflow import device as tf_device

require_backend("tensorflow")

list_devices = tf_device.list_devices
open_device = tf_device.open_device


def version() -> str:
    return f"keras {keras.__version__} on tensorflow {tf_device.version()}"


def threads() -> dict[str, Any]:
    return tf_device.threads()

"""The stored stand-in for a step no device profile can price (TensorFlow's, today).

In the data layer, below harness.run, because a CPU cell's own-cost pass stores it
(harness/run/casepasses.py) and the prediction reads it back (harness/predict/jaxfeatures.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from harness.data.serial import JsonRecord, JsonValue

TENSORFLOW_FRAMEWORKS = ("tensorflow", "keras-tensorflow")
NO_TENSORFLOW_PROFILE = (
    "no TensorFlow profile: the harness measures its profiles through torch and JAX, and the "
    "lent GPUs have no TensorFlow; one would need a TensorFlow profile backend "
    "(backends/tensorflow/gpuprofile.py) run by `harness profile-device` on a GPU host with "
    "TensorFlow")


@dataclass(frozen=True)
class NoProfileFeatures(JsonRecord):
    """A step whose framework no profile can price: its framework, and why its features were
    not recorded."""

    WRITE_UNMARKED: ClassVar[str] = "always"

    framework: str = ""
    no_profile: str = ""

    def record(self) -> dict[str, JsonValue]:
        return self.to_dict()

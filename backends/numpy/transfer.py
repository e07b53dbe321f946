"""numpy's `@` on the 200x200 inputs: the CPU baseline the seed compared the GPU against."""

from __future__ import annotations

import numpy as np

from harness.backend import VariantUnavailable
from harness.backends.numpy.device import NumpyDevice
from harness.backends.numpy.matmul import MatmulTask


def make_task(case: dict, variant: str, device: NumpyDevice, inputs: dict[str, np.ndarray]):
    if variant != "matmul-resident":
        # There is no device to copy to: matmul-resident already is numpy's whole story.
        raise VariantUnavailable(f"numpy has no device to copy to; {variant} needs a framework "
                                 "with one (numpy's matmul-resident is the CPU baseline)")
    return MatmulTask(inputs["a"], inputs["b"])

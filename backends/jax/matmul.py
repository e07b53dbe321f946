"""jnp.matmul under jax.jit on resident arrays, with the precision stated, never defaulted.

JAX's default precision for float32 dots on recent GPUs is TF32-like (and bf16 passes on TPUs),
so fp32 asks for Precision.HIGHEST: float32 then means float32, as in the other backends. tf32
asks for DEFAULT (TF32 tensor cores on Ampere and later); bf16 casts the inputs to bfloat16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.backends.jax.device import JaxDevice

PRECISIONS = {"fp32": jax.lax.Precision.HIGHEST, "tf32": jax.lax.Precision.DEFAULT,
              "bf16": jax.lax.Precision.DEFAULT}
DTYPES = {"fp32": jnp.float32, "tf32": jnp.float32, "bf16": jnp.bfloat16}


def jitted_matmul(variant: str) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """A fresh jit per task, so the task's first call pays tracing and compilation (cold)."""
    precision = PRECISIONS[variant]
    return jax.jit(lambda a, b: jnp.matmul(a, b, precision=precision))


class MatmulTask:
    """C = A @ B on arrays already on the device; the result stays there until output()."""

    def __init__(self, matmul: Callable, a: jax.Array, b: jax.Array, device: JaxDevice) -> None:
        self.matmul, self.a, self.b, self.device = matmul, a, b, device
        self.c: jax.Array | None = None

    def step(self) -> jax.Array:
        self.c = self.matmul(self.a, self.b)
        return self.c

    def output(self) -> dict[str, Any]:
        assert self.c is not None  # output() follows the timed step() calls
        return {"c": np.asarray(self.c.astype(jnp.float32))}


def resident_inputs(inputs: dict[str, np.ndarray], variant: str,
                    device: JaxDevice) -> tuple[jax.Array, jax.Array]:
    """A and B committed to the device (and cast there), ready before the clock starts."""
    dtype = DTYPES[variant]
    a, b = (jax.device_put(inputs[key], device.handle).astype(dtype) for key in ("a", "b"))
    return jax.block_until_ready((a, b))


def make_task(case: dict, variant: str, device: JaxDevice,
              inputs: dict[str, np.ndarray]) -> MatmulTask:
    a, b = resident_inputs(inputs, variant, device)
    return MatmulTask(jitted_matmul(variant), a, b, device)

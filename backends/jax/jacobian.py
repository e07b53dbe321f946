"""The tiny MLP's Jacobian in JAX: jax.jacrev of the batch (full) vs vmap(jacrev/jacfwd).

as-written: the full (batch,400,batch,1) Jacobian, jax.jacrev of the batched net, jitted, as a
            JAX user would write "the Jacobian of net at t" (jacrev vmaps the 400*batch
            backward passes, unlike torch's default loop: same answer, other cost).
per-sample: jax.vmap(jax.jacrev(net_one)), one (400,1) block per sample; per-sample-fwd: jacfwd.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.backends.jax.device import JaxDevice
from harness.workloads.jacobian import fingerprint

LAYERS = (1, 2, 3)
# Float32 means float32 here too: the 20-wide dots must not drop to TF32 on a GPU.
HIGHEST = jax.lax.Precision.HIGHEST


def net(weights: dict[str, jax.Array], t: jax.Array) -> jax.Array:
    """Linear-tanh-Linear-tanh-Linear with (in, out) weights; t is (batch, 1) or (1,)."""
    hidden = jnp.tanh(jnp.dot(t, weights["w1"], precision=HIGHEST) + weights["b1"])
    hidden = jnp.tanh(jnp.dot(hidden, weights["w2"], precision=HIGHEST) + weights["b2"])
    return jnp.dot(hidden, weights["w3"], precision=HIGHEST) + weights["b3"]


def jacobian_function(variant: str, weights: dict[str, jax.Array]) -> Callable:
    """The jitted t -> Jacobian of one variant (compiled at its first, cold, call)."""

    def of_t(t: jax.Array) -> jax.Array:
        return net(weights, t)

    if variant == "as-written":
        return jax.jit(jax.jacrev(of_t))
    if variant == "per-sample":
        return jax.jit(jax.vmap(jax.jacrev(of_t)))
    if variant == "per-sample-fwd":
        return jax.jit(jax.vmap(jax.jacfwd(of_t)))
    raise ValueError(f"unknown jacobian variant {variant!r}")


@jax.jit
def full_jacobian_summary(jacobian: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Diagonal blocks (batch,400,1) and max |entry| off them, reduced on the device."""
    batch = jacobian.shape[0]
    index = jnp.arange(batch)
    blocks = jacobian[index, :, index, :]  # advanced indices first: (batch, 400, 1)
    on_diagonal = jnp.eye(batch, dtype=bool)[:, None, :, None]
    off_diagonal_max = jnp.max(jnp.abs(jnp.where(on_diagonal, 0.0, jacobian)))
    return blocks, off_diagonal_max


class JacobianTask:
    def __init__(self, compute: Callable, t: jax.Array, device: JaxDevice, full: bool) -> None:
        self.compute, self.t, self.device, self.full = compute, t, device, full
        self.jacobian: jax.Array | None = None

    def step(self) -> jax.Array:
        self.jacobian = self.compute(self.t)
        return self.jacobian

    def output(self) -> dict[str, Any]:
        assert self.jacobian is not None  # output() follows the timed step() calls
        shape = "x".join(map(str, self.jacobian.shape))
        found: dict[str, Any]
        if self.full:
            blocks, off_diagonal_max = full_jacobian_summary(self.jacobian)
            found = {"per_sample": np.asarray(blocks), "off_diagonal_max": float(off_diagonal_max)}
        else:
            found = {"per_sample": np.asarray(self.jacobian)}
        return {**found, "extra": {"jacobian_shape": shape,
                                   "jacobian_entries": int(self.jacobian.size),
                                   **fingerprint(found["per_sample"])}}


def make_task(case: dict, variant: str, device: JaxDevice,
              inputs: dict[str, np.ndarray]) -> JacobianTask:
    names = [f"{kind}{layer}" for layer in LAYERS for kind in ("w", "b")]
    weights = {name: jax.device_put(inputs[name], device.handle) for name in names}
    t = jax.device_put(inputs["t"], device.handle)
    return JacobianTask(jacobian_function(variant, weights), t, device,
                        full=variant == "as-written")

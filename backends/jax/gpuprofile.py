"""The JAX rows of a device profile, measured with JAX (`harness profile-device`; the torch
rows: backends/torch/gpuprofile.py).

Runs in its own child process (harness/predict/devicechild.py with framework "jax"), beside
torch's: the two frameworks never share a process, so neither's allocator or threads slow
the other's rows. Two entries, on a GPU and on a CPU alike:

- `jax.dispatch`: a jitted `x + 1` of an 8-element array, called back to back, each sample
  ended by block_until_ready (the harness's clock: autorange): the pipelined cost of one
  executable, max(host dispatch, its one kernel);
- `jax.kernel_floor`: jitted chains of K tiny kernels that XLA cannot fuse, K in a few
  values, timed the same way; each kernel a reduction of an 8x8 array made from the previous
  kernel's result (a reduction is not fused into the reduction that reads it; an
  optimization barrier is not enough: XLA removes it before fusing). The slope of the
  time over K is what one more kernel of an executable costs back to back (a GPU executable
  runs its kernels from XLA's runtime, often as a CUDA graph: not torch's launch cost). Each
  row stores the kernels its optimized HLO holds (`hlo_kernels`), read as the features are.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import jaxlib

from harness.backends.jax.device import JaxDevice, open_device
from harness.predict.hlo import entry_kernels, parse
from harness.predict.profile import Entry, Row, measured
from harness.predict.timed import policy, timed_row

# Chains of tiny kernels per kernel-floor row: the slope is read between the smallest and
# the largest (harness/predict/jaxrates.py); quick keeps two.
FLOOR_KERNELS = {False: (1, 16, 64, 256), True: (1, 64)}


WIDTH = 8  # the chain's vectors: 8 floats, its matrix 8x8


def tiny_chain(kernels: int) -> Any:
    """A jitted chain of KERNELS dependent tiny kernels XLA does not fuse: each reduces an
    8x8 array made from the previous one's 8 results (module docstring)."""
    weights = jnp.arange(WIDTH * WIDTH, dtype=jnp.float32).reshape(WIDTH, WIDTH) / WIDTH ** 3

    def chain(x: jax.Array) -> jax.Array:
        for _ in range(kernels):
            x = jnp.sum(x[:, None] * weights, axis=1)
        return x
    return jax.jit(chain)


class Looped:
    """Calls a jitted function of one array back to back on its own output; the sync waits
    for the latest result (what autorange's synchronise does before each clock read)."""

    def __init__(self, function: Any, device: JaxDevice) -> None:
        self.function = function
        self.value = jax.device_put(jnp.ones((WIDTH,), jnp.float32), device.handle)

    def __call__(self) -> None:
        self.value = self.function(self.value)

    def synchronize(self) -> None:
        self.value.block_until_ready()


def hlo_kernel_count(function: Any, device: JaxDevice) -> int:
    """Kernels the optimized HLO of FUNCTION holds (as the features read them)."""
    argument = jax.device_put(jnp.ones((WIDTH,), jnp.float32), device.handle)
    kernels, _, _ = entry_kernels(parse(function.lower(argument).compile().as_text()))
    return len(kernels)


def row_of(function: Any, device: JaxDevice, quick: bool, params: dict[str, Any]) -> Row:
    looped = Looped(function, device)
    looped()  # compiled here, before the clock
    looped.synchronize()
    return timed_row(looped, looped.synchronize, policy(quick), params)


def dispatch_entry(device: JaxDevice, quick: bool) -> Entry:
    tiny = jax.jit(lambda x: x + 1.0)
    return measured("jax.dispatch", [row_of(tiny, device, quick, {
        "op": "jit(x + 1)", "elements": WIDTH, "hlo_kernels": hlo_kernel_count(tiny, device)})])


def floor_entry(device: JaxDevice, quick: bool) -> Entry:
    rows = []
    for kernels in FLOOR_KERNELS[quick]:
        chain = tiny_chain(kernels)
        rows.append(row_of(chain, device, quick, {
            "kernels": kernels, "hlo_kernels": hlo_kernel_count(chain, device)}))
    return measured("jax.kernel_floor", rows)


def device_record(device: JaxDevice) -> dict[str, Any]:
    handle = device.handle
    return {"name": device.name, "type": "cuda" if device.is_gpu else "cpu",
            "description": device.description, "platform": handle.platform,
            "device_kind": getattr(handle, "device_kind", "")}


def software() -> dict[str, Any]:
    backend = jax.extend.backend.get_backend() if hasattr(jax, "extend") else None
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "xla_platform_version": str(getattr(backend, "platform_version", "") or "")}


def measure(device_name: str, quick: bool) -> dict[str, Any]:
    """The JAX rows of DEVICE_NAME ('cpu' or 'cuda:N'); DeviceUnavailable where JAX cannot
    open it."""
    device = open_device(device_name)
    entries = {"jax.dispatch": dispatch_entry(device, quick),
               "jax.kernel_floor": floor_entry(device, quick)}
    return {"device": device_record(device), "software": software(), "entries": entries}

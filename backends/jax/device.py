"""JAX devices: placement with jax.device_put / jax.default_device, sync on the step's output.

JAX has no device-wide synchronize: work is dispatched asynchronously and a result is a future.
So the framework's sync style is "output": every task's step() returns its output, and the
worker blocks on the last one (`JaxDevice.block`). That is enough: one device runs its
computations in dispatch order (one compute stream on a GPU; on the CPU, jaxlib enqueues a
computation only after the previous one), so the last output ready means every earlier one is.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import jax
import jaxlib

from harness.backend import DeviceUnavailable, parse_cuda_index
from harness.measure.envinfo import cpu_model, usable_cores

GPU_PLATFORMS = ("cuda", "rocm", "gpu")

_platforms_settled = False


def settle_platforms() -> None:
    """Before JAX's first backend starts: a cpu cell runs with CUDA_VISIBLE_DEVICES="" (the
    runner hides GPUs from it), and JAX would still try its CUDA plugin and log the failure,
    so it is told to use the CPU alone.

    Why here and not at import: the run's warm process imports this module with every GPU
    hidden, and a setting made then was inherited by every worker forked from it, so each GPU
    cell of JAX and Keras-on-JAX found no GPU and was started again in a new interpreter
    (4-5 s of imports per GPU worker on the H100 host). Read at first use, the setting is the
    forked worker's own environment's."""
    global _platforms_settled
    if _platforms_settled:
        return
    _platforms_settled = True
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        jax.config.update("jax_platforms", "cpu")


def version() -> str:
    gpus = gpu_devices()
    platform = f" ({gpus[0].platform})" if gpus else ""
    return f"{jax.__version__} (jaxlib {jaxlib.__version__}){platform}"


def threads() -> dict[str, Any]:
    # XLA:CPU sizes its thread pool from the cores it may use; XLA_FLAGS can change that.
    return {"cores": usable_cores(), "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
            "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "")}


def gpu_devices() -> list[Any]:
    """JAX's GPU devices, [] when jaxlib has no GPU plugin or the plugin finds no device."""
    settle_platforms()
    try:
        return [d for d in jax.devices() if d.platform in GPU_PLATFORMS]
    except RuntimeError:  # no backend could initialise
        return []


def _describe(device: Any) -> str:
    return getattr(device, "device_kind", "") or str(device)


def list_devices() -> list[dict[str, str]]:
    devices = [{"name": "cpu", "description": cpu_model()}]
    devices += [{"name": f"cuda:{i}", "description": _describe(d)}
                for i, d in enumerate(gpu_devices())]
    return devices


@dataclass
class JaxDevice:
    """An opened JAX device; `handle` is the jax.Device that device_put takes."""

    name: str
    description: str
    handle: Any
    init_seconds: float | None = None

    def block(self, output: Any) -> None:
        """Wait until `output` (any pytree of arrays) is computed: JAX's only way to sync."""
        jax.block_until_ready(output)

    def synchronize(self) -> None:
        """Nothing device-wide to wait for in JAX; the worker blocks on outputs instead."""

    def peak_memory_bytes(self) -> int | None:
        """XLA's allocator peak on a GPU (since the process started: JAX cannot reset it)."""
        stats = self.handle.memory_stats() if self.is_gpu else None
        return int(stats["peak_bytes_in_use"]) if stats and "peak_bytes_in_use" in stats else None

    @property
    def is_gpu(self) -> bool:
        return self.handle.platform in GPU_PLATFORMS


def use_compile_cache() -> None:
    """Take up the compile cache the runner named for this cell (harness.run.runner
    `compile_cache_environment`). JAX reads these variables at import, which in a worker forked
    from the run's warm process happened before they were set; nothing has compiled yet here."""
    folder = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not folder:
        return
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(
        os.environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", int(
        os.environ.get("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")))


def open_device(name: str) -> JaxDevice:
    """'cpu' or 'cuda:N'; DeviceUnavailable with the reason if it is not there."""
    use_compile_cache()
    settle_platforms()
    if name == "cpu":
        return JaxDevice("cpu", cpu_model(), jax.devices("cpu")[0])
    index = parse_cuda_index(name)
    if index is None:
        raise DeviceUnavailable(f"jax has no device {name!r}")
    gpus = gpu_devices()
    if not gpus:
        raise DeviceUnavailable(f"jax {jax.__version__} sees no GPU (backend: "
                                f"{jax.default_backend()}; GPU needs pip install 'jax[cuda13]')")
    if index >= len(gpus):
        raise DeviceUnavailable(f"{name} does not exist: jax sees {len(gpus)} GPU(s)")
    handle = gpus[index]
    # The first transfer creates the context and streams: the first-use cost, reported apart.
    started = time.perf_counter()
    jax.device_put(0.0, handle).block_until_ready()
    return JaxDevice(name, _describe(handle), handle, time.perf_counter() - started)

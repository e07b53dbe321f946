"""The machine's ceilings measured in a child process, so the parent never imports a framework."""

from __future__ import annotations

from collections.abc import Mapping

from harness.core.settings import cache_folder
from harness.data.ceilings import DeviceCeiling, failed
from harness.measure.ceilings import probe_sizes, remember, with_bounds
from harness.run.context import RunContext
from harness.run.runner import run_json_child
from harness.spec import Cell


def measure_all(device_names: list[str], largest_run_n: int | None = None,
                timeout_s: float = 300.0, sizes: list[int] | None = None,
                fingerprint: Mapping[str, object] | None = None,
                context: RunContext | None = None) -> dict[str, DeviceCeiling]:
    """Ceilings of every device, probed one after the other in one child process (one
    framework import for all: ~4 s a device on the H100 machine's host). CONTEXT: the run's
    (None: this process's environment's, no warm process); under --quick the child gets a
    --quick cell's environment, so that it is forked from the warm process the run's torch
    workers use (harness.run.forkserver), and the figures are remembered in its settings'
    cache folder. FINGERPRINT: the machine the figures are remembered for (default: read now),
    the one the caller matched the remembered ceilings against."""
    context = RunContext.from_environment() if context is None else context
    sizes_text = ",".join(map(str, sizes or probe_sizes(largest_run_n)))
    # A cpu-only probe hides the GPUs, as a cpu cell does; with a GPU among them, it sees them.
    device = ",".join(device_names)
    document, why_not = run_json_child("harness.measure.ceilings", [device, sizes_text],
                                       Cell("ceilings", "-", "torch", device),
                                       timeout_s * len(device_names), context)
    if document is None:
        return {name: failed(name, f"measurement failed: {why_not}") for name in device_names}
    # The child writes one device's figures, or {"devices": {name: figures}} for several.
    by_device = document.get("devices") if len(device_names) > 1 else {device: document}
    stored = by_device if isinstance(by_device, dict) else {}
    return {name: with_bounds(remember(
        DeviceCeiling.from_json(stored[name], name) if isinstance(stored.get(name), dict)
        else failed(name, "measurement failed: the probe wrote no figures"), fingerprint,
        folder=cache_folder(context.settings)))
        for name in device_names}

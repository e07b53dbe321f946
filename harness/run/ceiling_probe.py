"""The machine's ceilings measured in a child process, so the parent never imports a framework."""

from __future__ import annotations

from typing import Any

from harness.measure.ceilings import probe_sizes, remember, with_bounds
from harness.run.runner import run_json_child
from harness.spec import Cell


def measure(device_name: str, largest_run_n: int | None = None, timeout_s: float = 300.0,
            sizes: list[int] | None = None) -> dict[str, Any]:
    """Ceilings of one device, measured in a child process; an 'error' key if that failed."""
    sizes_text = ",".join(map(str, sizes or probe_sizes(largest_run_n)))
    figures, why_not = run_json_child("harness.measure.ceilings", [device_name, sizes_text],
                                      Cell("ceilings", "-", "torch", device_name), timeout_s)
    if figures is None:
        return {"device": device_name, "error": f"measurement failed: {why_not}"}
    return with_bounds(remember(figures))

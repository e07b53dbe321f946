"""The machine's own ceilings, measured once per run: peak matmul FLOP/s and memory bandwidth.

Why: a cell faster than what the hardware can do (a graph optimizer folded the loop, a timer
missed the work) must be flagged, not celebrated; and "percent of peak" says how far a cell is
from the best this machine allows. Datasheet numbers are leads only: we measure.
Runs in a worker process (`python -m harness.ceilings DEVICE OUT.json`); the parent reads JSON.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness.backend import DeviceUnavailable
from harness.registry import backend_has_module, backend_module, framework_installed
from harness.runner import run_json_child
from harness.spec import Cell
from harness.store import write_json_atomic

# First installed provider that has a ceilings module wins (numpy covers cpu-only installs).
PROVIDERS = ("torch", "numpy")


def _best_of(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure, the best any library reached: a ceiling one library misses is still there
    (seen: torch's CPU matmul at 144 GFLOP/s where numpy and TF reach 180-200)."""
    best: dict[str, Any] = {"peak_gflops_by_precision": {}}
    for figures in measured:
        for key, value in figures.items():
            if key == "peak_gflops_by_precision":
                for precision, rate in value.items():
                    previous = best[key].get(precision, 0.0)
                    best[key][precision] = max(previous, rate)
            elif isinstance(value, float):
                best[key] = max(best.get(key, 0.0), value)
            else:
                best.setdefault(key, value)
    return best


def measure_in_process(device_name: str) -> dict[str, Any]:
    """Measure with every installed provider that can open the device; keep the best."""
    measured, used, description = [], [], ""
    for framework in PROVIDERS:
        installed, _ = framework_installed(framework)
        if not (installed and backend_has_module(framework, "ceilings")):
            continue
        try:
            device = backend_module(framework, "device").open_device(device_name)
        except DeviceUnavailable:
            continue
        measured.append(backend_module(framework, "ceilings").measure(device))
        used.append(framework)
        description = description or device.description
    if not measured:
        return {"device": device_name, "error": "no installed framework can open this device"}
    return {"device": device_name, "device_name": description, "measured_with": used,
            **_best_of(measured)}


def measure(device_name: str, timeout_s: float = 300.0) -> dict[str, Any]:
    """Ceilings of one device, measured in a child process; an 'error' key if that failed."""
    figures, why_not = run_json_child("harness.ceilings", [device_name],
                                      Cell("ceilings", "-", "torch", device_name), timeout_s)
    if figures is None:
        return {"device": device_name, "error": f"measurement failed: {why_not}"}
    return figures


def main(argv: list[str]) -> int:
    device_name, out_path = argv[0], Path(argv[1])
    try:
        document = measure_in_process(device_name)
    except Exception as exc:  # noqa: BLE001 - reported as data
        document = {"device": device_name, "error": f"{type(exc).__name__}: {exc}"}
    write_json_atomic(out_path, document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`python -m harness.predict.devicechild FRAMEWORK DEVICE full|quick OUT.json`: measure one
device profile and write it (the child process of `harness profile-device`).

The framework's measurements are its backend's `gpuprofile.measure` (backends/torch/
gpuprofile.py; JAX's rows: backends/jax/gpuprofile.py, in a child of their own); this module
adds what needs no framework (the host, the driver, the date,
the harness's version) and fills every catalogue entry the backend did not measure as absent.
A device the framework cannot open is written as {"error": why}.
"""

from __future__ import annotations

import platform
import re
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from harness.backend import DeviceUnavailable
from harness.core.registry import backend_module
from harness.data.serial import JsonValue
from harness.data.store import write_json_atomic
from harness.measure import envinfo
from harness.predict.profile import Profile, completed


def host_info() -> dict[str, JsonValue]:
    """The CPU that drove the device (no hostname: shipped profiles name no machine)."""
    return {"cpu_model": envinfo.cpu_model(), "cores": envinfo.usable_cores(),
            "memory_bytes": envinfo.memory_bytes(), "os": platform.platform(),
            "python": sys.version.split()[0]}


def _harness_version() -> str:
    """The installed package's version, else a source checkout's (its pyproject.toml)."""
    try:
        return metadata.version("crossframe-harness")
    except metadata.PackageNotFoundError:
        pass
    try:
        text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    except OSError:
        return "unknown (not installed)"
    found = re.search(r'^version = "([^"]+)"', text, re.MULTILINE)
    return f"{found.group(1)} (source checkout)" if found else "unknown (not installed)"


def main(argv: list[str]) -> int:
    framework, device, mode, out_path = argv[0], argv[1], argv[2], Path(argv[3])
    started = time.perf_counter()
    try:
        found = backend_module(framework, "gpuprofile").measure(device, mode == "quick")
    except DeviceUnavailable as exc:
        write_json_atomic(out_path, {"error": f"{device}: {exc}"})
        return 0
    driver = next(iter(envinfo.only_visible(envinfo.nvidia_query("driver_version"))), None) \
        if device != "cpu" else None
    profile = Profile(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), framework=framework,
        quick=mode == "quick", measured_s=round(time.perf_counter() - started, 3),
        device=found["device"], host=host_info(),
        software={**found["software"], "driver": driver, "harness": _harness_version()},
        entries=completed(found["entries"]))
    write_json_atomic(out_path, profile.to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`python -m harness.measure.probe FRAMEWORK OUT.json`: what one framework sees (`harness env`)."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.core.registry import backend_module
from harness.data.store import write_json_atomic


def main(argv: list[str]) -> int:
    framework, out_path = argv[0], Path(argv[1])
    device_module = backend_module(framework, "device")
    write_json_atomic(out_path, {
        "framework": framework,
        "installed": True,
        "version": device_module.version(),
        "devices": device_module.list_devices(),
        "threads": device_module.threads(),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`python -m tests.fakes.helper_child MODE OUT.json`: a helper child that hangs, crashes or
answers.

Stands in for the framework probe, the ceilings probe and the `--model` inspect child, so the
parent's handling of each outcome is tested without importing a framework.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import os
import sys
import time


def main(mode: str, out_path: str) -> None:
    if mode == "hang":
        time.sleep(600)
    if mode == "crash":
        raise SystemExit("helper child gave up: no document")
    if mode == "optional":  # what a preload kept out, and what the child may import again
        optional = sys.modules.get("tests.fakes.optional_import")
        with open(out_path, "w") as out:
            json.dump({"found_at_preload": getattr(optional, "FOUND", None),
                       "importable": importlib.util.find_spec("colorsys") is not None
                       and importlib.import_module("colorsys") is not None,
                       "frozen": gc.get_freeze_count()}, out)
        return
    if mode == "describe":  # what a forked child was given: its environment, group, modules
        with open(out_path, "w") as out:
            json.dump({"pid": os.getpid(), "pgid": os.getpgid(0), "cwd": os.getcwd(),
                       "env": dict(os.environ), "argv": sys.argv,
                       "preloaded": "tests.fakes.backend.device" in sys.modules,
                       "modules": sorted(name for name in ("jax", "sklearn", "shared_library")
                                         if name in sys.modules)}, out)
        print("to the cell's stream")
        return
    with open(out_path, "w") as out:
        json.dump({"answer": 42}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""A check's child forked from a warm process: `python -m tests.check_child MODULE CALL OUT`
(tests.in_subprocess.run_check starts it through harness.run.runner.run_json_child)."""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> None:
    """Import MODULE, evaluate CALL on it, and write whether it passed (and its traceback) to
    OUT: the parent reads a file, never this process's streams."""
    module, call, out = argv
    try:
        checks = importlib.import_module(module)
        eval(f"checks.{call}", {"checks": checks})  # the suite's own calls, as `python -c` ran them
        outcome = {"passed": True, "error": ""}
    except BaseException:  # noqa: BLE001 - an assertion or a crash: both are the check's answer
        outcome = {"passed": False, "error": traceback.format_exc()}
    Path(out).write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(sys.argv[1:])

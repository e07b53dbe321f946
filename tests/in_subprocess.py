"""Run a check that imports a framework in a child process, so the test process never does."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def run_check(module: str, call: str, timeout_s: float = 600) -> None:
    """Import MODULE in a fresh interpreter and evaluate CALL there; fail with its stderr."""
    code = f"import {module} as checks; checks.{call}"
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=timeout_s)
    assert done.returncode == 0, f"{call} failed in its child process:\n{done.stderr[-3000:]}"


def installed(name: str) -> bool:
    """Whether a framework is installed, without importing it (pytest.importorskip would)."""
    return importlib.util.find_spec(name) is not None

"""Run a check that imports a framework in a child process, so the test process never does."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def run_check(module: str, call: str, timeout_s: float = 600, framework: str = "") -> None:
    """Import MODULE in a child process and evaluate CALL there; fail with its error.

    FRAMEWORK: the framework MODULE imports; the child is then forked from the session's warm
    process of it (tests/conftest.py), as a run's workers are, in that framework's CPU cell
    environment (GPUs hidden), instead of a new interpreter importing it again (torch ~3 s on
    the 2-core VM). Empty: a new interpreter in this process's environment."""
    if framework:
        _run_check_forked(module, call, timeout_s, framework)
        return
    code = f"import {module} as checks; checks.{call}"
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=timeout_s)
    assert done.returncode == 0, f"{call} failed in its child process:\n{done.stderr[-3000:]}"


def _run_check_forked(module: str, call: str, timeout_s: float, framework: str) -> None:
    from harness.core.settings import Settings
    from harness.run import context
    from harness.run.runner import run_json_child
    from harness.spec import Cell

    with context.opened(Settings.from_environment()) as run_context:
        outcome, why_not = run_json_child("tests.check_child", [module, call],
                                          Cell("check", "-", framework, "cpu"), timeout_s,
                                          run_context)
    assert outcome is not None, f"{call}: its child gave no answer ({why_not})"
    assert outcome["passed"], f"{call} failed in its child process:\n{outcome['error']}"


def installed(name: str) -> bool:
    """Whether a framework is installed, without importing it (pytest.importorskip would)."""
    return importlib.util.find_spec(name) is not None

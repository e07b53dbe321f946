"""RunOptions of a --quick run for tests that start a worker themselves: --quick is a setting
(harness.core.settings), not a mark on the cell, so it travels with the options."""

from __future__ import annotations

from typing import Any

from harness.core.settings import Settings
from harness.run.runner import RunOptions


def quick_settings() -> Settings:
    """The suite's settings (its HARNESS_* variables, conftest.py), made quick."""
    return Settings.from_environment(quick=True)


def quick_options(timeout_s: float, **changes: Any) -> RunOptions:
    """RunOptions(timeout_s, ...) under quick_settings()."""
    return RunOptions(timeout_s=timeout_s, settings=quick_settings(), **changes)

"""Run the `harness` command line inside the pytest process, read as a child process is read.

Why: a `python -m harness.cli` child opens its own warm processes and imports every framework
its cells use again (torch ~3 s, Keras ~5-10 s, TensorFlow ~12 s on the 2-core VM), per test.
Through typer's CliRunner the command's runs fork their workers from the session's lent warm
processes (tests/conftest.py) instead. Tests about the process itself (signals, the real
interpreter's exit code, a parent that never imports a framework) keep a real child.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from typer.testing import CliRunner

from harness.cli import app


@dataclass(frozen=True)
class CliOutcome:
    """What a finished command left: its exit code and its two streams, kept apart."""

    returncode: int
    stdout: str
    stderr: str


def run_cli_in_process(*args: str, env: Mapping[str, str | None] | None = None) -> CliOutcome:
    """`harness ARGS` with ENV set for the call alone (None unsets a variable).

    An exception the command did not turn into an exit code is raised here rather than read as
    exit code 1: a child would print its traceback and exit 1, and a test that expects 1 for a
    failed cell must not pass on a crash."""
    result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
    return CliOutcome(result.exit_code, result.stdout, result.stderr)

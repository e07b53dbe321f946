"""A helper child's entry point: `python -m harness.core.child SETTINGS MODULE ARGS...`
(harness.core.settings.child_arguments builds the list; harness.run.runner starts it)."""

from __future__ import annotations

import faulthandler
import runpy
import signal
import sys

from harness.core import lifeline, registry
from harness.core.settings import Settings

# The signal on which a helper child writes every thread's Python stack to its stderr: its
# parent sends it before killing a child that ran past its time, to say where it hung.
STACK_SIGNAL = signal.SIGUSR1


def run_child(argv: list[str]) -> None:
    """Merge the plugins the settings of ARGV[0] name (the one setting a helper child reads:
    its registry's), then run ARGV[1] as __main__ with the rest as its arguments."""
    faulthandler.register(STACK_SIGNAL, all_threads=True)
    registry.use_plugins(Settings.from_json(argv[0]).plugins)
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    lifeline.die_with_parent()  # dies with the process that started it (lifeline.py)
    run_child(sys.argv[1:])

"""A run's context: its settings and its warm processes, handed down, never looked up.

Why an object: the settings and the warm processes used to sit in process-global stacks that
the runner, the helper children and the NVML, RAPL and MNIST readers looked up, so what a
function did depended on which block its caller happened to be inside. Now whoever opens a
run (harness.api, the CLI, a RunSession) makes one RunContext and passes it: on RunOptions
to the runner and the executors, as an argument to run_json_child, and on the worker's
argument list (the settings; the worker's own context is harness.run.caserun.CellContext).
pyperf passes everything a worker needs on its argument list for the same reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.core.settings import Settings
from harness.run import forkserver
from harness.run.forkserver import ForkServers


@dataclass(frozen=True)
class RunContext:
    """The run's settings (--quick and the HARNESS_* variables, read once) and its warm
    processes (None: every child a new interpreter)."""

    settings: Settings = field(default_factory=Settings)
    servers: ForkServers | None = None

    @property
    def fork_from(self) -> ForkServers | None:
        """The warm processes a child is forked from; None where the settings say not to
        (HARNESS_FORK_WORKERS=0), even where a caller's set is open."""
        return self.servers if self.settings.fork_workers else None

    @classmethod
    def from_environment(cls, quick: bool = False) -> RunContext:
        """A library call's context: this process's environment's settings, no warm process
        (each child a new interpreter)."""
        return cls(Settings.from_environment(quick=quick))


@contextlib.contextmanager
def opened(settings: Settings, servers: ForkServers | None = None) -> Iterator[RunContext]:
    """SETTINGS with warm processes for the block: SERVERS where the caller opened a set to
    share (the CLI's, from the --model inspection to the last cell), else a new set closed
    with the block (none where the settings say fork_workers False)."""
    if servers is not None or not settings.fork_workers:
        yield RunContext(settings, servers)
        return
    # Looked up on its module at each call, as harness.api and the commands do, so that one
    # replacement reaches every opener (the test suite lends its session's warm processes).
    with forkserver.warm_processes(settings.fork_workers) as fresh:
        yield RunContext(settings, fresh)

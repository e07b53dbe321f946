"""Real framework workers forked from the warm processes of conftest's `warm_servers`, as a
run's workers are, so a pytest process imports each framework once (tests/warm_pool.py) rather
than once per worker (TensorFlow takes 3-12 s to import on the 2-core VM). The spawned path
keeps its own tests (test_runner's `servers`, test_forkserver)."""

from __future__ import annotations

import pytest

from harness.data.results import CellResult
from harness.run.forkserver import ForkServers
from harness.run.runner import RunOptions, run_worker
from harness.spec import Cell

# pytest names the running test in this variable; a worker shares a warm process only with
# cells whose environment equals its own (forkserver.server_key), so it is left out of the
# worker's environment, which it never reads.
PER_TEST_VARIABLE = "PYTEST_CURRENT_TEST"


def run_forked(cell: Cell, options: RunOptions, servers: ForkServers) -> CellResult:
    """run_worker(CELL, OPTIONS, SERVERS) without the per-test variable in its environment."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(PER_TEST_VARIABLE, raising=False)
        return run_worker(cell, options, servers)

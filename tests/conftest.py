"""Test-wide set-up: keep frameworks' home-folder writes in temp dirs, load the fault plugin."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.core import registry

if TYPE_CHECKING:
    from harness.run.forkserver import ForkServers
    from tests.warm_pool import WarmProcessPool

_SCRATCH = Path(tempfile.mkdtemp(prefix="harness-tests-"))
# The suite's HARNESS_* variables: read by harness.core.settings wherever a test's run reads
# its settings (the CLI, harness.api, a RunOptions made here), and handed to the workers.
os.environ["HARNESS_PLUGINS"] = "tests.fakes.plugin"
# Merged now, not at the registry's first lookup: a module-level loop over registry.WORKLOADS
# (collected before any lookup) must see the fault plugin, and must not see it arrive mid-loop.
registry.use_plugins(("tests.fakes.plugin",))
# One round unless a test asks for more: the suite's timings and worker counts predate rounds.
os.environ.setdefault("HARNESS_ROUNDS", "1")
# One attempt per case unless a test asks for retries: two pytest processes on 2 cores contend
# with each other by design, and retrying every contended case would triple the workers' time.
os.environ.setdefault("HARNESS_ATTEMPTS", "1")
os.environ.setdefault("KERAS_HOME", str(_SCRATCH / "keras"))
os.environ.setdefault("MPLCONFIGDIR", str(_SCRATCH / "mpl"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("HARNESS_MNIST_DOWNLOAD", "0")
# The per-machine ceilings cache: tests must neither read nor grow the user's.
os.environ.setdefault("HARNESS_CACHE_DIR", str(_SCRATCH / "cache"))
# Where a `harness` child process lists the run folders it makes (tests/fakes/plugin.py), so
# the audit below reaches them too. Set after this process loaded the plugin: its own runs
# are recorded by the fixture's monkeypatch instead.
_CHILD_RUNS = _SCRATCH / "child-runs.txt"
os.environ["HARNESS_TEST_RUN_LOG"] = str(_CHILD_RUNS)


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """A results folder for one test."""
    return tmp_path / "results"


@pytest.fixture(scope="session")
def warm_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmProcessPool]:
    """This pytest process's warm processes (tests/warm_pool.py), closed when the session ends."""
    from tests.warm_pool import WarmProcessPool

    pool = WarmProcessPool(tmp_path_factory.mktemp("warm-pool"))
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(autouse=True)
def runs_borrow_the_sessions_warm_processes(request: pytest.FixtureRequest,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run a test makes in this process (harness.api, the CLI through CliRunner, a
    RunSession) forks its workers from the session's warm processes rather than importing each
    framework again. A test marked fresh_warm_processes runs as outside the suite: the
    session's idle ones are closed first (one that looks for processes left behind sees only
    its own), and its runs open their own."""
    pool = request.getfixturevalue("warm_pool")
    if request.node.get_closest_marker("fresh_warm_processes") is not None:
        pool.close()
        return
    from harness.run import forkserver
    from tests.warm_pool import lent_warm_processes

    monkeypatch.setattr(forkserver, "warm_processes",
                        functools.partial(lent_warm_processes, pool))


# The variables a command's output depends on that tests set for one call: whatever a test did
# to them (a CliRunner call that raised half-way, a child's environment copied back), the next
# test starts with the session's (a folded line in a test that reads whole ones was one).
TERMINAL_VARIABLES = ("COLUMNS", "LINES")
# Unset for the whole session: pytest-xdist sets COLUMNS=80 in its workers (and a developer's
# shell may export it), and `compare` folds its lines at $COLUMNS; a test that wants a width
# sets one for its own call, so the suite reads the same on one process and on two.
for _name in TERMINAL_VARIABLES:
    os.environ.pop(_name, None)
_SESSION_TERMINAL: dict[str, str | None] = {name: None for name in TERMINAL_VARIABLES}


@pytest.fixture(autouse=True)
def terminal_variables_as_the_session_began() -> Iterator[None]:
    yield
    for name, value in _SESSION_TERMINAL.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="module")
def warm_servers(warm_pool: WarmProcessPool) -> Iterator[ForkServers]:
    """One test module's set of warm processes, borrowed from the session's (a test's
    run_worker(cell, options, warm_servers) forks its workers from them, as a run's are forked)
    and handed back when the module's last test ends."""
    from tests.warm_pool import PooledRun

    with PooledRun(warm_pool) as servers:
        yield servers


@pytest.fixture(autouse=True)
def every_run_checks_its_own_arithmetic(request: pytest.FixtureRequest,
                                        monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every run folder a test makes, in this process or in a `harness` child, is audited by
    `harness check` when the test ends: no mismatch and no unverifiable figure. A test that
    edits its runs on purpose says so with @pytest.mark.planted."""
    from harness.data import store

    made: list[Path] = []
    new_run_dir = store.new_run_dir

    def recording(*args: Any, **kwargs: Any) -> Path:
        path = new_run_dir(*args, **kwargs)
        made.append(path)
        return path

    monkeypatch.setattr(store, "new_run_dir", recording)
    _CHILD_RUNS.write_text("")
    yield
    if request.node.get_closest_marker("planted") is not None:
        return
    from harness.audit import audit_run
    from harness.run.rounds import round_orders

    children = [Path(line) for line in _CHILD_RUNS.read_text().splitlines() if line]
    for path in dict.fromkeys([*made, *children]):
        if (path / "run.json").is_file():
            audit = _audited_with_its_plugins(path, audit_run, round_orders)
            assert not audit.mismatches, "harness check: " + "; ".join(
                item.line() for item in audit.mismatches[:5])
            # Every figure a run prints must recompute (issue 49): one it cannot is a gap in
            # what the run stores or in what check reads, not a figure to take on trust.
            assert not audit.unverifiable, "harness check: " + "; ".join(
                item.line() for item in audit.unverifiable[:5])


def _audited_with_its_plugins(path: Path, audit_run: Any, round_orders: Any) -> Any:
    """The run's audit with the plugin modules its settings named loaded for it alone: a child
    run of a test-only plugin (tests/fakes/adviseplugin.py) is checked as `harness check` in
    that child checks it, and the suite's registry is left as it was (every workload it holds
    is contract-tested)."""
    import json

    from harness.core import registry

    plugins = (json.loads((path / "run.json").read_text()).get("settings") or {}).get(
        "plugins") or []
    saved = (dict(registry.WORKLOADS), dict(registry.FRAMEWORKS), list(registry.PLUGINS_LOADED))
    try:
        registry.use_plugins([str(name) for name in plugins])
        return audit_run(path, round_orders)
    finally:
        for live, kept in zip((registry.WORKLOADS, registry.FRAMEWORKS, registry.PLUGINS_LOADED),
                              saved):
            live.clear()
            live.update(kept) if isinstance(live, dict) else live.extend(kept)

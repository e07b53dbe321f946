"""Test-wide set-up: keep frameworks' home-folder writes in temp dirs, load the fault plugin."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.core import registry

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


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """A results folder for one test."""
    return tmp_path / "results"


@pytest.fixture(autouse=True)
def every_run_checks_its_own_arithmetic(request: pytest.FixtureRequest,
                                        monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every run folder a test makes in this process is audited by `harness check` when the
    test ends (runs made through the CLI in a child check themselves: compare exits 1 on a
    mismatch). A test that edits its runs on purpose says so with @pytest.mark.planted."""
    from harness.data import store

    made: list[Path] = []
    new_run_dir = store.new_run_dir

    def recording(*args: Any, **kwargs: Any) -> Path:
        path = new_run_dir(*args, **kwargs)
        made.append(path)
        return path

    monkeypatch.setattr(store, "new_run_dir", recording)
    yield
    if request.node.get_closest_marker("planted") is not None:
        return
    from harness.analysis.check import audit_run
    from harness.run.rounds import round_orders

    for path in made:
        if (path / "run.json").is_file():
            mismatches = audit_run(path, round_orders).mismatches
            assert not mismatches, "harness check: " + "; ".join(
                item.line() for item in mismatches[:5])

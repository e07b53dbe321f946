"""Files the harness writes get the mode a plain open() gives under the umask (0666 & ~umask),
not the 0600 of the temporary file they are written through: a shared results folder
(docs/cluster.md) needs the group to read them."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_in_process import run_cli_in_process


@pytest.fixture
def umask_set() -> Iterator[None]:
    """Restore the process's umask after a test sets its own."""
    previous = os.umask(0o022)
    os.umask(previous)
    yield
    os.umask(previous)


def _modes(folder: Path) -> dict[str, int]:
    return {str(path.relative_to(folder)): stat.S_IMODE(path.stat().st_mode)
            for path in folder.rglob("*") if path.is_file()}


@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o644), (0o077, 0o600)])
def test_a_run_its_report_and_an_export_get_the_umasks_mode(
        out_dir: Path, umask_set: None, umask: int, expected: int) -> None:
    os.umask(umask)
    ran = run_cli_in_process("compare", "--workload", "fault", "--framework", "fake",
                             "--device", "cpu", "--variant", "ok", "--quick", "--no-ceilings",
                             "--no-report", "--out", str(out_dir))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (run_dir,) = [path for path in out_dir.iterdir() if path.is_dir()]
    reported = run_cli_in_process("report", str(run_dir), "--html")
    assert reported.returncode == 0, reported.stdout + reported.stderr
    export = out_dir / "all.parquet"
    exported = run_cli_in_process("export", str(run_dir), "--out", str(export))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    modes = {**_modes(run_dir), "all.parquet": stat.S_IMODE(export.stat().st_mode)}
    for name in ("run.json", "measurements.csv", "measurements.parquet", "all.parquet"):
        assert name in modes, sorted(modes)
    assert any(name.endswith("report.html") for name in modes), sorted(modes)
    wrong = {name: oct(mode) for name, mode in modes.items() if mode != expected}
    assert not wrong, f"expected {oct(expected)}: {wrong}"


def test_the_umask_read_without_proc_is_the_same_and_left_unchanged(
        umask_set: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.core import filemode

    os.umask(0o027)
    assert filemode.current_umask() == 0o027  # from /proc/self/status on Linux
    monkeypatch.setattr(filemode, "_umask_from_proc", lambda: None)
    assert filemode.current_umask() == 0o027
    assert filemode.created_file_mode() == 0o640
    assert os.umask(0o022) == 0o027  # the fallback put it back

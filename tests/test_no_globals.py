"""No process-global settings, warm processes, draw jobs or colours: each is handed down.

The run's settings and warm processes travel as a RunContext (harness.run.context), the worker's
as its CellContext; a report's draw jobs and framework colours as arguments. These tests keep
the old globals from coming back and pin what replaced them.
"""

from __future__ import annotations

import dataclasses
import io
import re
import tokenize
from pathlib import Path
from typing import Any

import pytest

from harness.core.settings import Settings
from harness.data.results import cell_from_dict
from harness.report import style
from harness.run.context import RunContext, opened
from harness.run.forkserver import ForkServers
from harness.run.plan import RunPlan
from harness.spec import Cell

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("harness", "backends", "workloads")
# The removed registries and their readers and writers, as code (comments and strings aside).
REMOVED = {
    "_INSTALLED": r"\b_INSTALLED\b",
    "_ACTIVE": r"\b_ACTIVE\b",
    "active()": r"(?<![\w.])active\(|\.active\(",
    "install(": r"\binstall\(",
    "using(": r"\busing\(",
    "forkserver.shared": r"\bshared\(",
    "_DRAW_JOBS": r"\b_DRAW_JOBS\b",
    "FRAMEWORK_COLORS": r"\bFRAMEWORK_COLORS\b",
    "set_framework_colors": r"\bset_framework_colors\b",
}


def code_only(text: str) -> str:
    """TEXT with its comments and string literals (docstrings too) blanked out, the code left
    where it was."""
    lines = text.splitlines(keepends=True)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in (tokenize.COMMENT, tokenize.STRING):
            continue
        (first, start), (last, end) = token.start, token.end
        for row in range(first - 1, last):
            line = lines[row]
            left = start if row == first - 1 else 0
            right = end if row == last - 1 else len(line.rstrip("\n"))
            lines[row] = line[:left] + " " * (right - left) + line[right:]
    return "".join(lines)


def uses(pattern: str, roots: tuple[Path, ...], base: Path = PROJECT_ROOT) -> list[str]:
    """'path: match' (PATH from BASE) for every use of PATTERN in the Python code under ROOTS."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for match in re.finditer(pattern, code_only(path.read_text())):
                found.append(f"{path.relative_to(base)}: {match.group(0)}")
    return found


@pytest.mark.parametrize("name", sorted(REMOVED))
def test_no_removed_global_is_used_again(name: str) -> None:
    roots = tuple(PROJECT_ROOT / folder for folder in SCANNED)
    assert uses(REMOVED[name], roots) == []


def test_the_scan_finds_a_planted_use(tmp_path: Path) -> None:
    (tmp_path / "planted.py").write_text(
        '"""active() in a docstring is no use."""\n'
        "from harness.core import settings  # nor settings.active() in a comment\n"
        "chosen = settings.active().attempts\n")
    assert uses(REMOVED["active()"], (tmp_path,), tmp_path) == ["planted.py: .active("]


def test_quick_is_a_setting_alone() -> None:
    """Not a field of a cell or a plan: the worker and the runner read the settings'."""
    assert "quick" not in {item.name for item in dataclasses.fields(Cell)}
    assert "quick" not in {item.name for item in dataclasses.fields(RunPlan)}
    assert "quick" in {item.name for item in dataclasses.fields(Settings)}


def test_a_cell_stored_with_quick_still_loads() -> None:
    """run.json of runs from before kept `quick` on every cell: it loads (the cell's settings
    are the run's), and a stored result keeps the key as it was written."""
    stored = {"workload": "fault", "variant": "ok", "framework": "fake", "device": "cpu",
              "params": {"size": [1]}, "quick": True}
    cell, unknown = cell_from_dict(stored)
    assert Cell.from_dict(stored) == cell == Cell("fault", "ok", "fake", "cpu", {"size": [1]})
    assert unknown == {"quick": True} and "quick" not in cell.as_dict()


def test_a_context_forks_from_its_warm_processes_only_where_its_settings_allow(
        tmp_path: Path) -> None:
    with ForkServers(tmp_path) as servers:
        assert RunContext(Settings(), servers).fork_from is servers
        assert RunContext(Settings(fork_workers=False), servers).fork_from is None
        with opened(Settings(), servers) as shared:  # the caller's set is used, not a new one
            assert shared.servers is servers
    with opened(Settings(fork_workers=False)) as none:
        assert none.servers is None and none.fork_from is None
    with opened(Settings()) as own:
        assert isinstance(own.servers, ForkServers)


def test_a_framework_colour_comes_from_the_colours_handed_in() -> None:
    """Two reports in one process with different stored colours each get their own."""
    assert style.framework_color("torch", {"torch": "#111111"}) == "#111111"
    assert style.framework_color("torch", {"torch": "#222222"}) == "#222222"
    fallback = style.framework_color("torch", {})
    assert fallback in style.OTHER_COLORS and fallback == style.framework_color("torch", {})


class FailingView:
    """A view whose drawing fails (in the forked child)."""

    def draw(self, table: Any, context: Any, out_dir: Path) -> list[Path]:
        raise ValueError(f"no figure for {table}")


class WritingView:
    def draw(self, table: Any, context: Any, out_dir: Path) -> list[Path]:
        path = out_dir / f"{table}.png"
        path.write_text(str(context))
        return [path]


def test_a_figure_that_fails_in_its_process_raises_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from harness import report

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    good = [(WritingView(), f"t{index}", {"colors": index}, tmp_path) for index in range(3)]
    drawn = report._draw_all(good)
    assert [paths[0].read_text() for paths in drawn] == [str({"colors": index})
                                                         for index in range(3)]
    with pytest.raises(ValueError, match="no figure for bad"):
        report._draw_all([*good, (FailingView(), "bad", None, tmp_path)])

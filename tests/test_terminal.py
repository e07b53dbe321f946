"""Issue 42, item 4: the terminal after a run reads at a glance (answer first, a compact table of
one line per case within 100 columns, each sentence said once)."""

from __future__ import annotations

import io
from pathlib import Path

from tests.cli_in_process import run_cli_in_process
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn
from tests.terminal_lines import unfolded

WIDTH = 100
# 8 cells: 2 variants x 2 frameworks x 2 devices; fake has no GPU (2 unavailable rows), the
# other 6 cells have 2 sizes each.
CASE_ROWS = 2 * 1 + 6 * 2


def run_cli(out_dir: Path) -> list[str]:
    """`harness compare`'s stdout, not a terminal, with $COLUMNS at 100 (in this process: its
    stdout is read apart from its stderr, as a pipe's would be, and its report draws no PNG,
    which no line here depends on).

    The second variant is the fault backend's bimodal one: its calls are timed on a virtual
    clock (tests/fakes/backend/fault.py), so it adds rows and a SUSPECT warning in no time;
    the slow variant's 0.5 s calls cost 3 cells ~3 s each for the same layout."""
    ran = run_cli_in_process(
        "compare", "--workload", "fault", "--framework", "fake,fakegpu", "--device",
        "cpu,cuda:0", "--variant", "ok,bimodal", "--quick", "--no-ceilings", "--out",
        str(out_dir), env={"COLUMNS": str(WIDTH)})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout.splitlines()


def table_of(lines: list[str]) -> tuple[int, list[str]]:
    """The compact table's title index and its lines (title to bottom rule)."""
    title = next(i for i, line in enumerate(lines) if line.startswith("fault: median per call"))
    rules = [i for i in range(title, len(lines)) if set(lines[i].strip()) == {"─"}]
    return title, lines[title:rules[2] + 1]


def test_the_answer_comes_first_in_a_compact_table_and_each_sentence_once(
        out_dir: Path) -> None:
    lines = run_cli(out_dir)
    title, table = table_of(lines)
    verdict = lines.index("verdict:")
    assert verdict < title and lines[verdict + 1].startswith("fault on ")  # its one machine
    # Title, top rule, header, rule, one line per case, bottom rule.
    header, body = table[2], table[4:-1]
    assert header.split()[:4] == ["variant", "framework", "device", "size"]
    assert len(body) == CASE_ROWS, "\n".join(table)
    assert sum("unavailable" in line for line in body) == 2
    assert all(len(line.rstrip()) <= WIDTH for line in table), "\n".join(table)
    # Warnings and context after the table, the report's path last.
    assert lines.index("warnings:") > title
    assert lines[-1].startswith("report: ") and lines[-1].endswith("report.html")
    context = [i for i, line in enumerate(lines)
               if line.startswith(("rounds: ", "--quick: ", "harness check: "))]
    assert len(context) == 3 and min(context) > lines.index("warnings:")
    said = [line.strip() for line in unfolded(lines, WIDTH)
            if line.strip() and set(line.strip()) != {"─"}]
    repeated = {line for line in said if said.count(line) > 1}
    assert not repeated, repeated
    # An energy counter that measured nothing is one line per run, not one per comparison.
    reasons = [line for line in lines if "/sys/class/powercap" in line]
    assert len(reasons) <= 1, reasons


def test_without_a_terminal_the_progress_bar_leaves_no_empty_lines(tmp_path: Path) -> None:
    """Piped to a file, rich's transient bar left one empty line per call, and advise calls
    it once per worker: a screen of blank lines between its progress lines."""
    from typing import Any, cast

    from rich.console import Console

    from harness.run import progress
    from harness.run.executors import Executor
    from harness.run.runner import RunOptions

    class Finishing:
        def run(self, *args: Any, **kwargs: Any) -> bool:
            return True

    written = io.StringIO()
    saved, progress.console = progress.console, Console(file=written, force_terminal=False)
    try:
        assert progress.run_with_progress(cast(Executor, Finishing()), [],
                                          RunOptions(timeout_s=1.0), tmp_path, lambda *_: None)
    finally:
        progress.console = saved
    assert written.getvalue() == ""

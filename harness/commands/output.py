"""Where the commands print: stdout's console, stderr's, and plain lines said once."""

from __future__ import annotations

import sys

from rich.console import Console

from harness.terminal import fitted_lines

# A terminal's width; 160 when piped, so the tables do not fold. Fixed here, at import, and
# never from $COLUMNS: a width read from the environment at import would depend on which test
# or caller imported the module first. The compact table reads $COLUMNS when it prints
# (harness.terminal.table_width).
console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True)


def print_plain(line: str) -> None:
    """A line on stdout, no markup, no highlighting: within $COLUMNS (or the terminal's width)
    where one is set, folded at words with a hanging indent; whole when piped without it, for
    the scripts that read it (harness.terminal.fitted_lines)."""
    for part in fitted_lines(line):
        print_whole(part)


def print_whole(line: str) -> None:
    """A line on stdout as it is (a table's line, already fitted): folded only by the
    terminal."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


class Said:
    """Prints plain lines on stdout, each once: a sentence already printed is not repeated."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str, whole: bool = False) -> None:
        """LINE once, fitted to the width; WHOLE: as it is (a path, which a fold would break
        for the reader who copies it)."""
        if line and line not in self.lines:
            self.lines.append(line)
            (print_whole if whole else print_plain)(line)

    def mentions(self, text: str) -> bool:
        return any(text in line for line in self.lines)

"""Text that fits the terminal: $COLUMNS read when printing, hanging indents, plain tables.

Why a module: `harness env`, `harness list` and `harness diff` printed rich tables at a fixed
160 columns when piped, 140-160 characters wide at COLUMNS=100. The width is read at each call,
never at import: a width fixed at import would depend on which caller imported first.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Sequence

# Piped output without $COLUMNS keeps the width it always had: lines are not folded for
# scripts and tests that read them.
PIPED_WIDTH = 160
GAP = "  "


def fit_width() -> int | None:
    """The width to fit: $COLUMNS where set, else the terminal's; None when piped without
    $COLUMNS (then lines are printed whole)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def table_width() -> int:
    """The width a rich table is drawn to: fit_width(), else the piped default."""
    return fit_width() or PIPED_WIDTH


def wrapped(text: str, indent: int = 0, hang: int = 2, width: int | None = None) -> list[str]:
    """TEXT as lines of at most the width (words never split), INDENT spaces before the first
    and INDENT + HANG before the others; one line when there is no width to fit."""
    width = width if width is not None else fit_width()
    first = " " * indent
    if width is None:
        return [first + text]
    return textwrap.wrap(text, width=max(width, indent + hang + 20), initial_indent=first,
                         subsequent_indent=" " * (indent + hang), break_long_words=False,
                         break_on_hyphens=False) or [first]


def split_header(header: str) -> list[str]:
    """A header on two lines: at its first space, else after its first hyphen."""
    if " " in header:
        head, tail = header.split(" ", 1)
        return [head, tail]
    if "-" in header.strip("-"):
        head, tail = header.split("-", 1)
        return [head + "-", tail]
    return [header]


def column_lines(header: Sequence[str], rows: Sequence[Sequence[str]], indent: int = 0,
                 width: int | None = None) -> list[str]:
    """A plain table, columns apart by two spaces; where one header line would not fit the
    width, every header that can goes over two lines (the cells are never cut)."""
    width = width if width is not None else fit_width()
    headers = [[text] for text in header]

    def widths() -> list[int]:
        return [max([*map(len, headers[index]), *(len(row[index]) for row in rows)])
                for index in range(len(header))]

    if width is not None and indent + sum(widths()) + len(GAP) * (len(header) - 1) > width:
        headers = [split_header(text) for text in header]
    sizes = widths()
    depth = max(map(len, headers))
    lines = []
    for level in range(depth):
        cells = [(part[level - (depth - len(part))] if level >= depth - len(part) else "")
                 for part in headers]
        lines.append(_line(cells, sizes, indent))
    return lines + [_line(row, sizes, indent) for row in rows]


def _line(cells: Sequence[str], sizes: list[int], indent: int) -> str:
    return (" " * indent + GAP.join(cell.ljust(size) for cell, size in zip(cells, sizes))).rstrip()

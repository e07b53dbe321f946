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
from collections.abc import Collection, Sequence

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


def fitted_lines(line: str, width: int | None = None) -> list[str]:
    """LINE as the terminal should show it: whole where there is no width to fit (piped
    without $COLUMNS), else folded at words into lines of at most the width, each continuation
    indented two spaces past the line's own indent."""
    width = width if width is not None else fit_width()
    if width is None or len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    return wrapped(body, indent=len(line) - len(body), width=width)


# The rule above and below a table, as rich's HORIZONTALS box draws it.
RULE = "─"


def cell_lines(text: str, width: int) -> list[str]:
    """A cell's text in lines of at most WIDTH: broken at spaces and after hyphens, a word
    longer than WIDTH kept whole (the column is never narrower than its longest word)."""
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width=width, break_long_words=False,
                         break_on_hyphens=True) or [text]


def longest_word(texts: Sequence[str]) -> int:
    """The widest piece a column's texts can be broken into (spaces, and after hyphens)."""
    pieces = [piece for text in texts
              for word in text.split() for piece in word.replace("-", "- ").split()]
    return max(map(len, pieces), default=1)


def fitted_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]],
                 width: int | None = None, whole: Collection[int] = ()) -> list[str]:
    """A plain table within the width, no cell ever cut: the title, a rule, the header, a rule,
    the rows, a rule. Piped without a width it is as wide as its cells. Where the natural width
    does not fit, headers go over two lines, then the widest columns wrap their cells (at
    spaces and after hyphens: 'keras-' over 'tensorflow'); only a table whose longest words
    alone exceed the width is wider than it. The columns WHOLE (their indexes: figures) never
    wrap their cells."""
    width = width if width is not None else fit_width()
    headers = [[text] for text in header]
    sizes = [max([len(text), *(len(row[index]) for row in rows)])
             for index, text in enumerate(header)]

    def total() -> int:
        return sum(sizes) + len(GAP) * (len(sizes) - 1)

    if width is not None and total() > width:
        headers = [split_header(text) for text in header]
        floors = [max([*map(len, headers[index]),
                       *((len(row[index]) for row in rows) if index in whole
                         else [longest_word([row[index] for row in rows])])])
                  for index in range(len(header))]
        sizes = [max([*map(len, headers[index]), *(len(row[index]) for row in rows)])
                 for index in range(len(header))]
        while total() > width:
            widest = max(range(len(sizes)), key=lambda index: sizes[index] - floors[index])
            if sizes[widest] <= floors[widest]:
                break  # every column at its longest word: wider than the width, not cut
            sizes[widest] -= 1
    depth = max(map(len, headers))
    lines = [*fitted_lines(title, width), RULE * total()]
    for level in range(depth):
        lines.append(_line([(part[level - (depth - len(part))] if level >= depth - len(part)
                             else "") for part in headers], sizes, 0))
    lines.append(RULE * total())
    for row in rows:
        wrapped_cells = [cell_lines(text, size) for text, size in zip(row, sizes)]
        for level in range(max(map(len, wrapped_cells))):
            lines.append(_line([cell[level] if level < len(cell) else ""
                                for cell in wrapped_cells], sizes, 0))
    return lines + [RULE * total()]

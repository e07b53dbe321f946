"""Reading what the commands print at a width: lines folded by harness.terminal.fitted_lines
joined again, so a test reads each sentence whole."""

from __future__ import annotations


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def unfolded(lines: list[str], width: int) -> list[str]:
    """LINES with each fold undone: a line indented two spaces past the line it continues,
    whose first word did not fit at the end of the physical line before it (a fold's two
    marks: the hanging indent, and a greedy fill that moved the word down)."""
    whole: list[str] = []
    start, last_length = 0, 0  # the logical line's indent; its last physical line's length
    for line in lines:
        if whole and line.strip() and indent_of(line) == start + 2 \
                and last_length + 1 + len(line.split()[0]) > width:
            whole[-1] = f"{whole[-1]} {line.strip()}"
        else:
            whole.append(line)
            start = indent_of(line)
        last_length = len(line.rstrip())
    return whole


def too_wide(lines: list[str], width: int) -> list[str]:
    """The lines wider than WIDTH, less those a path makes so (a path is printed whole: a
    fold would break it for the reader who copies it)."""
    return [line for line in lines if len(line.rstrip()) > width
            and not line.startswith(("results: ", "report: "))]

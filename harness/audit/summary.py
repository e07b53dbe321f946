"""summary.md's numbers in exponent notation, found line by line. Every figure is checked from
its record (harness.audit.figures), never from the words around it; this scan reads only the
form of a number ('1.2e+02 s'), which no record can miss: a plain number is always printed
(harness.core.units.three_digits)."""

from __future__ import annotations

import re

from harness.audit.ledger import SUMMARY_FILE, Ledger

# A number's own format, not the report's wording: digits, an exponent, a unit after it.
EXPONENT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?e[+-]?\d+\b")
UNIT_AFTER = re.compile(r"\s?(?:ns|us|ms|s|B|KiB|MiB|GiB|TiB|kJ|J|mJ|uJ|W|x|%|GFLOP/s|GB/s)\b")
CODE_SPAN = re.compile(r"`[^`]*`")


def check_exponents(ledger: Ledger, lines: list[str]) -> None:
    """Every figure printed in exponent notation is a mismatch of form."""
    for number, line in enumerate(lines, start=1):
        for text in exponent_figures(line):
            ledger.verdict("", "number in exponent notation", f"{SUMMARY_FILE} line {number}",
                           False, text, "a plain number (harness.core.units.three_digits)")


def exponent_figures(line: str) -> list[str]:
    """Numbers in exponent notation that a reader takes for a figure: followed by a unit, or
    alone in a table cell (code spans, such as a command line, are the user's text; a check's
    '4.2e-07' error bound in prose is a number of another kind)."""
    text = CODE_SPAN.sub("", line)
    found = []
    for match in EXPONENT.finditer(text):
        unit = UNIT_AFTER.match(text, match.end())
        if unit is not None or _alone_in_cell(text, match):
            found.append(match.group(0) + (unit.group(0) if unit is not None else ""))
    return found


def _alone_in_cell(text: str, match: re.Match[str]) -> bool:
    if not text.startswith("|"):
        return False
    before, after = text[:match.start()].rstrip(), text[match.end():].lstrip()
    return before.endswith("|") and after.startswith("|")

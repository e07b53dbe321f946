"""Where in summary.md the audit is, and the comparisons every family of its lines makes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.audit.ledger import (
    SUMMARY_FILE,
    Ledger,
)
from harness.audit.measured import Measured
from harness.audit.pool import Pool, _subject_of
from harness.audit.printed import printed_ratio, printed_seconds
from harness.core.units import (
    format_ratio,
    format_seconds,
)

EXPONENT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?e[+-]?\d+\b")
UNIT_AFTER = re.compile(r"\s?(?:ns|us|ms|s|B|KiB|MiB|GiB|TiB|kJ|J|mJ|uJ|W|x|%|GFLOP/s|GB/s)\b")
CODE_SPAN = re.compile(r"`[^`]*`")

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


@dataclass
class Place:
    """Where in summary.md the parser is: the section, the table and what its heading said."""

    experiment: str = ""
    table: str = ""


class SummaryBase:
    """The audit's place in summary.md and the comparisons its families of lines make."""

    def __init__(self, ledger: Ledger, pool: Pool, lines: list[str]) -> None:
        self.ledger, self.pool, self.lines = ledger, pool, lines
        self.place = Place()
        self.number = 0
        self.run_id = ""  # the run whose bullet in "Drawn from ..." the lines below belong to
        self.warned: list[str] = []  # experiments whose warnings section was read
        self.disputed_named: set[tuple[str, ...]] = set()  # cases a DISPUTED line named

    @property
    def where(self) -> str:
        return f"{SUMMARY_FILE} line {self.number}"

    def parsed(self, handler: Callable[[str], None], line: str) -> None:
        """Run one line's parser; a line in a shape it does not expect is unverifiable (a
        report whose wording changed must say so, not stop the audit or pass silently)."""
        try:
            handler(line)
        except (ValueError, KeyError, IndexError, ZeroDivisionError) as exc:
            self.ledger.cannot("", "line", self.where,
                               f"not in the shape its parser reads ({type(exc).__name__}: "
                               f"{exc})")

    # -- the case behind a figure --

    def case(self, figure: str, experiment: str | None = None,
             **where: Any) -> Measured | None:
        """The one case a printed figure names, or None (noted as unverifiable)."""
        label = self.place.experiment if experiment is None else experiment
        found = self.pool.one(experiment=label, **where)
        if isinstance(found, str):
            self.ledger.cannot(_subject_of(where), figure, self.where, found)
            return None
        return found

    def seconds(self, subject: str, figure: str, text: str, value: float | None) -> None:
        self.ledger.printed(subject, figure, self.where, printed_seconds(text), value,
                            format_seconds)

    def ratio(self, subject: str, figure: str, text: str, value: float | None) -> None:
        self.ledger.printed(subject, figure, self.where, printed_ratio(text), value, format_ratio)

    def order(self, subject: str, figure: str, faster: float | None,
              slower: float | None) -> None:
        if faster is None or slower is None:
            return
        self.ledger.verdict(subject, figure, self.where, faster <= slower * (1 + 1e-12),
                            format_seconds(faster), f"not above {format_seconds(slower)}")

    # -- headings and tables --

"""What `harness check` finds, one figure at a time: the ledger its checks write to (a figure
matched, mismatched or unverifiable), the audit it sums up to, and a number as summary.md printed
it. Its own module so that the families of checks beside check.py (checkcounts, sensitivity)
write to it without importing check.py, which imports them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from harness.report.figure import SUMMARY_FILE, Figure

# Stored floats that are copies of one another (CSV vs run.json) agree to the last bit; a
# median recomputed with another library may differ in the last one.
COPY_TOLERANCE = 1e-12

@dataclass(frozen=True)
class Printed:
    """A number as summary.md printed it, with half a unit of its last significant digit."""

    text: str
    value: float
    tolerance: float

    def matches(self, recomputed: float, shown: Callable[[float], str]) -> bool:
        """Equal as printed, or within the printed precision (a rounding boundary)."""
        if shown(recomputed) == self.text:
            return True
        slack = self.tolerance * (1 + 1e-6) + 1e-12 * abs(recomputed)
        return abs(self.value - recomputed) <= slack



# --- findings ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mismatch:
    """One figure whose stored or printed value disagrees with the value recomputed."""

    run: str  # the run folder's name
    subject: str  # 'jax cpu as-written batch_size=32', a cell, or '' for the run itself
    figure: str  # which figure: 'rate', 'seconds of warm sample 3', 'round median 2'
    stored: str  # as stored or printed
    recomputed: str  # as recomputed (formatted as the figure was)
    where: str  # 'measurements.csv row 14', 'run.json', 'summary.md line 40'

    def line(self) -> str:
        verb = "printed" if self.where.startswith(SUMMARY_FILE) else "stored"
        subject = f"{self.subject}: " if self.subject else ""
        return (f"run {self.run}: {subject}{self.figure} {verb} {self.stored} ({self.where}), "
                f"recomputed {self.recomputed}")


@dataclass(frozen=True)
class Unverifiable:
    """A figure the raw data cannot place (a warning, not a mismatch)."""

    run: str
    subject: str
    figure: str
    where: str
    why: str

    def line(self) -> str:
        subject = f"{self.subject}: " if self.subject else ""
        return f"run {self.run}: unverifiable: {subject}{self.figure} ({self.where}): {self.why}"


@dataclass
class Audit:
    """What checking one or more run folders found, and how many figures it compared."""

    runs: int = 0
    checked: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    unverifiable: list[Unverifiable] = field(default_factory=list)
    by_file: dict[str, int] = field(default_factory=dict)  # figures checked, per file

    def add(self, other: Audit) -> Audit:
        files = dict(self.by_file)
        for name, count in other.by_file.items():
            files[name] = files.get(name, 0) + count
        return Audit(self.runs + other.runs, self.checked + other.checked,
                     self.mismatches + other.mismatches, self.unverifiable + other.unverifiable,
                     files)

    def unverifiable_lines(self, every: bool = False) -> list[str]:
        """Every unverifiable figure, or one line per kind (figure and file) with a count:
        an old run can hold hundreds of the same kind (a field it predates)."""
        if every:
            return [item.line() for item in self.unverifiable]
        kinds: dict[tuple[str, str], list[Unverifiable]] = {}
        for item in self.unverifiable:
            kinds.setdefault((item.figure, item.where.split(" ")[0]), []).append(item)
        return [items[0].line() + (f" (and {len(items) - 1} more of this kind; --verbose "
                                   "lists them)" if len(items) > 1 else "")
                for items in kinds.values()]

    def files_line(self) -> str:
        """'measurements.csv 700, run.json 60, summary.md 51': where the figures were."""
        return ", ".join(f"{name} {count}" for name, count in sorted(self.by_file.items()))

    def summary_line(self) -> str:
        return (f"checked {self.checked} figures in {self.runs} run"
                f"{'s' if self.runs != 1 else ''}: {len(self.mismatches)} mismatch"
                f"{'es' if len(self.mismatches) != 1 else ''}, {len(self.unverifiable)} "
                "unverifiable")


class Ledger:
    """Collects one run's comparisons: every call is one figure checked or one it could not."""

    def __init__(self, run: str) -> None:
        self.audit = Audit(runs=1)
        self.run = run
        self._noted: set[tuple[str, str, str]] = set()

    def verdict(self, subject: str, figure: str, where: str, same: bool, stored: str,
                recomputed: str) -> bool:
        """Record one compared figure; True when it agreed."""
        self.audit.checked += 1
        name = where.split(" ")[0]
        self.audit.by_file[name] = self.audit.by_file.get(name, 0) + 1
        if not same:
            self.audit.mismatches.append(
                Mismatch(self.run, subject, figure, stored, recomputed, where))
        return same

    def number(self, subject: str, figure: str, where: str, stored: Any, recomputed: Any,
               tolerance: float = COPY_TOLERANCE, shown: Callable[[Any], str] = repr) -> bool:
        """Two stored numbers (None = absent) equal within a relative tolerance."""
        same = _same_number(stored, recomputed, tolerance)
        return self.verdict(subject, figure, where, same, _shown(stored, shown),
                            _shown(recomputed, shown))

    def printed(self, subject: str, figure: str, where: str, printed: Printed,
                recomputed: float | None, shown: Callable[[float], str]) -> bool:
        """A printed figure against the value recomputed, within the printed precision."""
        if recomputed is None or not math.isfinite(recomputed):
            self.cannot(subject, figure, where, "no value to recompute it from")
            return False
        same = printed.matches(recomputed, shown)
        return self.verdict(subject, figure, where, same, printed.text, shown(recomputed))

    def cannot(self, subject: str, figure: str, where: str, why: str) -> None:
        """A figure the raw data cannot place; noted once per (subject, figure, where)."""
        key = (subject, figure, where)
        if key not in self._noted:
            self._noted.add(key)
            self.audit.unverifiable.append(Unverifiable(self.run, subject, figure, where, why))


# How a figure's text is read back and a recomputed value printed alike (harness.audit.printed).
Reading = tuple[Callable[[str], Printed], Callable[[float], str]]


@dataclass(frozen=True)
class FigureCheck:
    """One figure record under check: the ledger, the line it was printed on and the subject
    its findings are filed under, so that a family's check states only what it recomputed.
    NAME, where given, files a finding under another name than the record's."""

    ledger: Ledger
    figure: Figure
    where: str
    subject: str = ""

    def about(self, subject: str) -> FigureCheck:
        return replace(self, subject=subject)

    def verdict(self, same: bool, stored: str, recomputed: str, name: str = "") -> bool:
        return self.ledger.verdict(self.subject, name or self.figure.name, self.where, same,
                                   stored, recomputed)

    def text_is(self, expected: str, name: str = "", shown: str = "") -> bool:
        """The printed text is exactly the one recomputed (SHOWN: how to say it otherwise)."""
        return self.verdict(self.figure.text == expected, self.figure.text, shown or expected,
                            name)

    def reads(self, reading: Reading, recomputed: float | None, name: str = "") -> bool:
        """The printed text, read by READING, against the value recomputed."""
        parse, shown = reading
        return self.ledger.printed(self.subject, name or self.figure.name, self.where,
                                   parse(self.figure.text), recomputed, shown)

    def cannot(self, why: str, name: str = "") -> None:
        self.ledger.cannot(self.subject, name or self.figure.name, self.where, why)


def _shown(value: Any, shown: Callable[[Any], str]) -> str:
    return "nothing" if value is None or value == "" else shown(value)


def _same_number(stored: Any, recomputed: Any, tolerance: float) -> bool:
    if stored is None or recomputed is None:
        return stored is None and recomputed is None
    a, b = float(stored), float(recomputed)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=1e-300)

"""The figures summary.md prints, as records: what each is of, its name, value, unit and text.

Why records: the audit (harness.audit) recomputes every printed figure from the run's raw data.
Reading them back out of the prose tied the audit to the report's wording, so that a reworded
sentence turned its figures unverifiable. A view instead makes its line from Figure records
(a `Line` carries them), the summary builder stores them in figures.json beside summary.md
with the line each landed on, and the audit checks the records and that each text is printed
on its line, never the words around it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.core.units import format_ratio, format_seconds

SUMMARY_FILE = "summary.md"
FIGURES_FILE = "figures.json"
FORMAT = 1  # figures.json's layout; the audit reads only the layout it knows


@dataclass(frozen=True)
class Figure:
    """One printed number. `subject` names the cases it is of the way the audit selects them
    (experiment, machine, variant, framework, device, size, device kind); `family` is the
    audit's recomputation for it; `line` is summary.md's line it was printed on (1-based)."""

    family: str
    name: str
    value: float
    unit: str
    text: str
    subject: Mapping[str, str] = field(default_factory=dict)
    line: int = 0

    @classmethod
    def read(cls, record: Mapping[str, Any]) -> Figure:
        return cls(str(record["family"]), str(record["name"]), float(record["value"]),
                   str(record["unit"]), str(record["text"]),
                   {str(k): str(v) for k, v in dict(record.get("subject") or {}).items()},
                   int(record.get("line", 0)))


class Line(str):
    """A summary.md line made from figure records: the text, with the records it prints."""

    figures: tuple[Figure, ...]

    def __new__(cls, text: str, figures: Iterable[Figure]) -> Line:
        line = super().__new__(cls, text)
        line.figures = tuple(figures)
        return line


def carried(text: str, *sources: str) -> str:
    """TEXT as a Line with the records of every Line among SOURCES (a sentence placed inside
    another line keeps its figures); plain TEXT where none carries any."""
    figures = figures_in(*sources)
    return Line(text, figures) if figures else text


def figures_in(*sources: str) -> list[Figure]:
    """The records of every Line among SOURCES."""
    return [figure for source in sources if isinstance(source, Line)
            for figure in source.figures]


# --- the timing of cases: families the audit recomputes from the raw samples (harness.audit.
# medians). A record's subject names its case (CASE_FIELDS); a second case it is compared with,
# by the same fields prefixed with VERSUS (those left out are the first case's own).
MEDIAN = "step median"  # the case's median per step; with a second case: not faster than it
SPREAD = "step IQR"  # the case's interquartile range per step
RATIO = "median ratio"  # the case's median over the second case's
# The case's median less the second case's (not below 0): in seconds, or (unit '%') as a share
# of the case's median.
DIFFERENCE = "median difference"
CASE_FIELDS = ("machine", "variant", "framework", "device", "size")
VERSUS = "vs_"
# A subject's CLAIM: the case is the fastest valid one of its size (machine, variant, size).
CLAIM, FASTEST = "claim", "fastest of its size"


def case_subject(experiment: str, row: Mapping[str, Any], **more: str) -> dict[str, str]:
    """The subject of a case's figure from a case-table row (its size: the size label)."""
    subject = {"experiment": experiment, "size": str(row["size_label"])}
    subject.update({name: str(row[name]) for name in CASE_FIELDS if name != "size"})
    return {**subject, **more}


def versus(**case: str) -> dict[str, str]:
    """The second case of a figure, by the fields where it differs from the first."""
    return {VERSUS + name: value for name, value in case.items()}


def seconds_figure(family: str, name: str, value: float, subject: Mapping[str, str]) -> Figure:
    return Figure(family, name, float(value), "s", format_seconds(value), dict(subject))


def ratio_figure(name: str, value: float, subject: Mapping[str, str]) -> Figure:
    return Figure(RATIO, name, float(value), "x", format_ratio(value), dict(subject))


def placed(text: str, lines: Iterable[str]) -> list[Figure]:
    """The records of every Line among LINES, each with the line of TEXT it landed on (the
    first not yet taken that equals it)."""
    numbers: dict[str, list[int]] = {}
    for number, printed in enumerate(text.splitlines(), start=1):
        numbers.setdefault(printed, []).append(number)
    found = []
    for line in lines:
        if isinstance(line, Line) and numbers.get(str(line)):
            number = numbers[str(line)].pop(0)
            found += [replace(figure, line=number) for figure in line.figures]
    return found


def write_figures(path: Path, figures: list[Figure]) -> Path:
    """One record a line: a report prints hundreds, and a redrawn report's diff stays readable."""
    records = [json.dumps({**asdict(figure), "subject": dict(figure.subject)})
               for figure in figures]
    path.write_text(f'{{"format": {FORMAT}, "figures": [\n' + ",\n".join(records) + "\n]}\n")
    return path


def read_figures(path: Path) -> list[Figure] | None:
    """The records of a figures.json, or None when there is none or of another layout."""
    if not path.is_file():
        return None
    stored = json.loads(path.read_text())
    if not isinstance(stored, dict) or stored.get("format") != FORMAT:
        return None
    return [Figure.read(record) for record in stored.get("figures", [])]

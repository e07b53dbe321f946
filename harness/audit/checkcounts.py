"""`harness check` on disputed FLOP counts: the second opinion's verdict recomputed from the
figures the run stored, and every place that shows it held to that verdict.

A second implementation, as the rest of the audit (harness.audit): the stored
record (extra['flops_second_opinion']: parts, each with the op-level figure and the second
count's range, and the margin) is read and judged here without harness.data.secondopinion,
whose verdict made the printed lines. Held to it: measurements.csv's flops_disputed column,
summary.md's "DISPUTED FLOP count" lines (each part named, with both figures and their
ratio, and no disputed case left out) and the ceilings table (no share of a peak from a
disputed count).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from harness.audit.ledger import Ledger
from harness.audit.measured import Measured
from harness.audit.pool import Pool
from harness.core.units import format_ratio
from harness.report.views.warnings import DISPUTED_PREFIX

RECORD = "flops_second_opinion"
LINE = re.compile(r"^, (?P<fw>\S+) (?P<dev>\S+) (?P<variant>\S+)(?: at [^=]+=(?P<size>[^:]+?))?"
                  r": (?P<text>.+); its FLOP rate is printed as disputed and is no share of a "
                  r"peak\.$")
PART = re.compile(r"^(?P<name>.+?): (?P<counted>[\d,]+) FLOPs by op \((?P<ops>[^)]*)\) vs "
                  r"(?P<low>[\d,]+)(?: to (?P<high>[\d,]+))? by (?P<second>.+?)"
                  r"(?: \((?P<ratio>[^)]+)\))?$")
MORE = re.compile(r"^and (?P<more>\d+) more parts?$")
NAMED = 3  # parts a line names before "and N more parts"


@dataclass(frozen=True)
class Dispute:
    """A stored part whose op-level figure lies outside the margin around the second count."""

    name: str
    counted: int
    low: int
    high: int

    def ratio(self) -> str:
        nearer = self.high if self.counted > self.high else self.low
        return format_ratio(self.counted / nearer) if nearer else ""


def disputes(extra: Mapping[str, object]) -> list[Dispute]:
    """The disputed parts of a case's stored second opinion, in stored order."""
    record = extra.get(RECORD)
    if not isinstance(record, dict) or not isinstance(record.get("parts"), list):
        return []
    margin = record.get("margin")
    margin = float(margin) if isinstance(margin, (int, float)) else 0.10
    found = []
    for part in record["parts"]:
        try:
            counted, low, high = (int(part[key]) for key in ("counted", "low", "high"))
        except (KeyError, TypeError, ValueError):
            continue
        if counted < low - margin * low or counted > high + margin * high:
            found.append(Dispute(str(part["name"]), counted, low, high))
    return found


def check_column(ledger: Ledger, measured: Measured, where: str, stored: str) -> None:
    """measurements.csv's flops_disputed: filled exactly where a part is disputed, naming the
    parts it has room for."""
    found = disputes(measured.case.extra)
    expected = "; ".join(item.name for item in found[:NAMED]) or "nothing"
    named = all(item.name in stored for item in found[:NAMED])
    ledger.verdict(measured.subject, "flops_disputed (the count is disputed)", where,
                   bool(stored) == bool(found) and named, stored or "nothing", expected)


def _integer(text: str | None) -> int | None:
    return None if text is None else int(text.replace(",", ""))


def check_line(ledger: Ledger, pool: Pool, where: str, experiment: str,
               line: str) -> tuple[str, ...] | None:
    """One summary.md line: its case, and each named part's name and figures; returns the
    case's identity (for the omission check), None where the line names no case."""
    found = pool.machine_prefix(line[len(DISPUTED_PREFIX):])
    match = None if found is None else LINE.match(found[1])
    if found is None or match is None:
        ledger.cannot("", "DISPUTED FLOP count", where, "not in the shape its parser reads")
        return None
    measured = pool.one(experiment=experiment, machine=found[0], variant=match["variant"],
                        framework=match["fw"], device=match["dev"], size=match["size"] or "")
    if isinstance(measured, str):
        ledger.cannot("", "DISPUTED FLOP count", where, measured)
        return None
    expected = disputes(measured.case.extra)
    printed = match["text"].split("; ")
    more = MORE.match(printed[-1])
    if more is not None:
        printed = printed[:-1]
    ledger.verdict(measured.subject, "disputed parts", where,
                   len(printed) + (int(more["more"]) if more else 0) == len(expected),
                   str(len(printed) + (int(more["more"]) if more else 0)), str(len(expected)))
    for text, part in zip(printed, expected):
        _check_part(ledger, measured.subject, where, text, part)
    return identity(measured)


def _check_part(ledger: Ledger, subject: str, where: str, text: str, part: Dispute) -> None:
    match = PART.match(text)
    if match is None:
        ledger.cannot(subject, "disputed part", where, f"not in the shape its parser reads: "
                                                       f"{text[:80]}")
        return
    low = _integer(match["low"])
    high = _integer(match["high"]) if match["high"] else low
    printed = (match["name"], _integer(match["counted"]), low, high, match["ratio"] or "")
    stored = (part.name, part.counted, part.low, part.high, part.ratio())
    ledger.verdict(subject, f"disputed part {part.name}", where, printed == stored,
                   str(printed), str(stored))


def identity(measured: Measured) -> tuple[str, ...]:
    return (measured.machine, measured.document.workload, measured.cell.variant,
            measured.cell.framework, measured.cell.device, measured.size_label)


def check_omissions(ledger: Ledger, pool: Pool, where: str, named: set[tuple[str, ...]],
                    experiments: list[str]) -> None:
    """Every valid case with a disputed count has its line in the experiment's warnings."""
    for experiment in experiments:
        for measured in pool.select(experiment=experiment, valid=True):
            found = disputes(measured.case.extra)
            if found and measured.median_call is not None and identity(measured) not in named:
                ledger.verdict(measured.subject, "DISPUTED FLOP count line", where, False,
                               "no line", "; ".join(item.name for item in found[:NAMED]))


def check_share(ledger: Ledger, measured: Measured, where: str, metric: str,
                share: str) -> bool:
    """A share of the ceiling printed for a FLOP rate whose count is disputed is a mismatch.
    Returns whether the count is disputed (then no share should be checked further)."""
    if metric != "GFLOP/s" or not disputes(measured.case.extra):
        return False
    ledger.verdict(measured.subject, "% of ceiling from a disputed FLOP count", where, False,
                   share, "none: the count is disputed")
    return True

"""A counter's log of reads, read for its updates: edges, the observed period, and spans.

An energy counter advances in steps (NVML every 20-100 ms, RAPL every ~1 ms). A poller's log
of reads (harness.measure.edgepass) shows each update between two reads; the power is the
energy between two observed updates over their time apart, each end known to within half of
the bracket of reads that saw it.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

# Updates seen after the calls start that open no span (a guard against a counter that reports
# with a delay). 0: on an H100 (benchmarks/energy_edges_check.py, 2026-11-24) the span from the
# first update gave the same power as from the second within 0.1%, three steps x 3 repeats.
EDGE_SETTLE_UPDATES = 0
# An update bracketed by reads further apart than this (the poller was held up: a call that
# kept the GIL) is not used as a span's end: it would add up to its bracket to the span.
EDGE_SHARP_S = 0.02


@dataclass(frozen=True)
class Reading:
    """One read of a counter: the clock just before and just after it, and its joules."""

    started_s: float
    ended_s: float
    joules: float | None


@dataclass(frozen=True)
class Edge:
    """An update of a counter: it happened after the read before it started and before the
    read that saw it ended; `joules` is the value it set."""

    after_s: float  # the previous read's start
    before_s: float  # the seeing read's end
    joules: float

    @property
    def at_s(self) -> float:
        return (self.after_s + self.before_s) / 2

    @property
    def resolution_s(self) -> float:
        return self.before_s - self.after_s


def find_edges(readings: list[Reading]) -> list[Edge]:
    """Every change of value in a counter's log (reads that gave nothing are skipped)."""
    edges: list[Edge] = []
    previous: Reading | None = None
    for reading in readings:
        if reading.joules is None:
            continue
        if previous is not None and previous.joules is not None \
                and reading.joules != previous.joules:
            edges.append(Edge(previous.started_s, reading.ended_s, reading.joules))
        previous = reading
    return edges


def update_period(edges: list[Edge]) -> float | None:
    """The counter's update period as observed: the median gap between updates (a counter
    faster than the poller shows the poller's interval instead)."""
    gaps = [b.at_s - a.at_s for a, b in itertools.pairwise(edges)]
    return statistics.median(gaps) if gaps else None


@dataclass(frozen=True)
class EdgeSpan:
    """The counter between two of its updates seen while the calls ran."""

    first: Edge
    last: Edge
    updates: int  # updates seen from first to last (the periods between them, as observed)

    @property
    def seconds(self) -> float:
        return self.last.at_s - self.first.at_s

    @property
    def joules(self) -> float:
        return self.last.joules - self.first.joules

    @property
    def watts(self) -> float:
        return self.joules / self.seconds

    @property
    def resolution_s(self) -> float:
        """The bracket of the less sharp end: each end is within half of its own."""
        return max(self.first.resolution_s, self.last.resolution_s)

    @property
    def period_s(self) -> float:
        return self.seconds / self.updates

    @property
    def error_bound(self) -> float:
        """The largest relative error of the power: each end is off by half its bracket."""
        return (self.first.resolution_s + self.last.resolution_s) / 2 / self.seconds


def edge_span(edges: list[Edge], opened_s: float, closed_s: float,
              settle: int = EDGE_SETTLE_UPDATES) -> EdgeSpan | None:
    """The span between the first sharp update after the calls opened (past `settle` updates)
    and the last sharp one before they closed; None where fewer than two are sharp."""
    inside = [edge for edge in edges if edge.after_s >= opened_s and edge.before_s <= closed_s]
    sharp = [index for index, edge in enumerate(inside)
             if index >= settle and edge.resolution_s <= EDGE_SHARP_S]
    if len(sharp) < 2:
        return None
    first, last = sharp[0], sharp[-1]
    return EdgeSpan(inside[first], inside[last], last - first)

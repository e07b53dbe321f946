"""The edge-aligned energy pass: more of a case's calls while a poller thread logs every counter.

Where the timed samples were too short for a counter that advances every 20-100 ms, the pass
does not rely on two arbitrary reads: a poller thread logs every counter every POLL_S while the
calls run, and the power is the energy between two observed counter updates over their time
apart (harness.measure.counteredges), so it needs a span of a few counter periods
(EDGE_MIN_UPDATES, EDGE_MIN_SPAN_S), not EXTEND_TO_S; where no two updates are seen it runs to
EXTEND_TO_S and falls back to the two reads around it. RAPL counters in the same pass go
through the same code (they update every ~1 ms, so every poll sees an update).
"""

from __future__ import annotations

import bisect
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from harness.measure.counteredges import (
    Edge,
    EdgeSpan,
    Reading,
    edge_span,
    find_edges,
    update_period,
)
from harness.measure.energycounters import EnergyCounter, EnergyWindow

# An energy pass runs calls for about this long (two 100 ms steps are then 10% at worst).
EXTEND_TO_S = 2.0
# The edge-aligned pass. The poller reads every counter this often (an NVML read itself took
# ~3.4 ms on an H100 host, so an update is bracketed within ~10 ms there).
POLL_S = 0.002
# The span between the two updates used must cover this many counter periods (the period as
# observed: the median gap between updates; half a period of slack, as the edges are only seen
# to within a poll) and last this long, so that the power is the loop's over several periods
# (a 1 ms RAPL counter would otherwise be done in 4 ms): four updates of a 100 ms counter.
EDGE_MIN_UPDATES, EDGE_MIN_SPAN_S = 4, 0.35
# ... and this many calls of the timed median, so that a call's phases (host work, then device
# work) average out in it; where a call is a block of steps (an MNIST epoch: 625 steps), this
# many steps: the phases repeat per step, and 4 whole calls of 0.5-1 s each were most of a
# GPU cell's energy pass (2-5 s) in the main job on an H200.
EDGE_MIN_CALLS = 4
# The pass's first chunk of calls: a 100 ms counter's first update, then 4 periods, and slack.
# The calls go in chunks with a sync after each: an asynchronous loop would otherwise queue
# seconds of device work (a CUDA queue of ~1,000 matmuls of 2.6 ms) before the span is seen
# to be long enough, and the closing sync would wait for all of it.
EDGE_FIRST_CHUNK_S = 0.55
# How often the poller tests whether the span is long enough (the test walks the log).
EDGE_CHECK_S = 0.01
# Python's GIL switch interval during the pass: a loop that holds the GIL (a host-bound step)
# would otherwise keep the poller waiting up to 5 ms (the default) before and after each read,
# widening every bracket by as much; handing the GIL over costs the loop microseconds.
EDGE_SWITCH_INTERVAL_S = 0.0005


def span_is_enough(span: EdgeSpan | None, period_s: float | None, min_span_s: float) -> bool:
    """Whether SPAN covers EDGE_MIN_UPDATES periods of PERIOD_S (update_period: the median
    gap, which an update the poller missed does not stretch) and lasts min_span_s."""
    return (span is not None and period_s is not None
            and span.seconds >= max(min_span_s, (EDGE_MIN_UPDATES - 0.5) * period_s))


class CounterPoller:
    """A thread that reads every counter every poll_s and logs the reads (NVML's and RAPL's
    reads release the GIL); `enough` is set once every counter's span since open() is.

    The thread only lives between start() and stop(): a worker must not keep one (the fork
    server refuses to fork a process with threads). Only the poller reads the counters
    between the two (RaplEnergy's unwrapping is not safe to share).
    """

    def __init__(self, counters: dict[str, EnergyCounter],
                 clock: Callable[[], float] = time.perf_counter, poll_s: float = POLL_S,
                 min_span_s: float = EDGE_MIN_SPAN_S) -> None:
        self.counters, self.clock, self.poll_s = counters, clock, poll_s
        self.min_span_s = min_span_s
        self.readings: dict[str, list[Reading]] = {name: [] for name in counters}
        self.enough = threading.Event()
        self.opened_s: float | None = None
        self._stop = threading.Event()
        self._first_round = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start polling; returns once every counter has been read once."""
        self._thread = threading.Thread(target=self._run, name="energy-edge-poll", daemon=True)
        self._thread.start()
        self._first_round.wait()

    def open(self, opened_s: float) -> None:
        """The calls start at opened_s: spans count from there."""
        self.opened_s = opened_s

    def stop(self) -> None:
        """Stop and join the thread, then read every counter once more (after the calls)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.read_all()

    def read_all(self) -> None:
        for name, counter in self.counters.items():
            started = self.clock()
            try:
                joules = counter.read_joules()
            except Exception:  # noqa: BLE001 - a failed read is a gap in the log, not a crash
                joules = None
            self.readings[name].append(Reading(started, self.clock(), joules))

    def _run(self) -> None:
        try:
            checked = self.clock()
            while True:
                self.read_all()
                self._first_round.set()
                if self.clock() - checked >= EDGE_CHECK_S:
                    checked = self.clock()
                    self._check(checked)
                if self._stop.wait(self.poll_s):
                    return
        finally:
            self._first_round.set()  # start() must not wait for a thread that failed

    def _check(self, now_s: float) -> None:
        if self.opened_s is not None and not self.enough.is_set() \
                and self.seconds_needed(now_s) <= 0:
            self.enough.set()

    def seconds_needed(self, now_s: float) -> float:
        """How much longer the calls must run (0: every span is long enough), for the counter
        that needs most: the span it lacks and a period for the closing update to come; with
        no period seen yet, EDGE_FIRST_CHUNK_S. Safe while the thread runs (it reads copies)."""
        needed = 0.0
        for log in list(self.readings.values()):
            edges = find_edges(list(log))
            period = update_period(edges)
            span = edge_span(edges, self.opened_s or 0.0, now_s)
            if period is None:
                return EDGE_FIRST_CHUNK_S
            if span_is_enough(span, period, self.min_span_s):
                continue
            wanted = max(self.min_span_s, (EDGE_MIN_UPDATES - 0.5) * period)
            needed = max(needed, wanted - (span.seconds if span else 0.0) + period)
        return needed


@dataclass
class EdgePass:
    """An edge-aligned pass: its calls and their seconds (opened_s to closed_s), each
    counter's span (None: fewer than two sharp updates seen), observed period and updates
    seen, and the two reads around the calls (today's window, the fallback)."""

    calls: float
    opened_s: float
    closed_s: float
    spans: dict[str, EdgeSpan | None]
    periods: dict[str, float | None]
    edges: dict[str, list[Edge]]
    windows: dict[str, EnergyWindow]
    poll_s: float

    @property
    def seconds(self) -> float:
        return self.closed_s - self.opened_s

    def in_whole_calls(self, share: float) -> EdgePass:
        """The pass counted in whole calls where each of its calls ran SHARE of one (the
        first steps of a long call): joules per call = W x window / calls then holds."""
        return replace(self, calls=self.calls * share,
                       windows={name: replace(window, calls=window.calls * share)
                                for name, window in self.windows.items()})


def min_span_s(seconds_per_call: float, steps_per_call: float | None = None) -> float:
    """The shortest span a pass's power is read over: EDGE_MIN_SPAN_S, and EDGE_MIN_CALLS of
    the repeated unit: a call, or a step where a call holds at least that many steps."""
    steps = steps_per_call if steps_per_call and steps_per_call >= EDGE_MIN_CALLS else 1.0
    return max(EDGE_MIN_SPAN_S, EDGE_MIN_CALLS * seconds_per_call / steps)


def edge_energy_pass(counters: dict[str, EnergyCounter], step: Callable[[], object],
                     synchronize: Callable[[], None], seconds_per_call: float,
                     target_s: float = EXTEND_TO_S,
                     clock: Callable[[], float] = time.perf_counter,
                     poll_s: float = POLL_S, max_calls_factor: int = 16,
                     steps_per_call: float | None = None) -> EdgePass:
    """Back-to-back calls while a poller logs the counters, until every counter's span
    between two updates is long enough (span_is_enough) or the calls have run target_s (a
    counter that never moves: the two reads then cover today's window).

    Chunks with a sync after each: the first EDGE_FIRST_CHUNK_S of calls at the timed rate,
    each further one what the spans still need at the rate seen (the timed median is only an
    estimate: a loaded host inflates it, a warm cache shrinks it, and a chunk count fixed from
    it once left windows of 0.38 s where 2 s were meant); a chunk ends early once the poller
    finds the spans long enough. max_calls_factor x target_s / seconds_per_call calls at
    most: a clock that does not advance must not loop for ever. The span covers
    EDGE_MIN_CALLS calls, or as many steps where `steps_per_call` says a call is a block of
    them (min_span_s); the pass still runs whole calls, at least one.
    """
    poller = CounterPoller(counters, clock, poll_s, min_span_s(seconds_per_call, steps_per_call))
    max_calls = max_calls_factor * max(1, math.ceil(target_s / max(seconds_per_call, 1e-9)))
    switch_interval = sys.getswitchinterval()
    synchronize()
    sys.setswitchinterval(min(switch_interval, EDGE_SWITCH_INTERVAL_S))
    poller.start()
    calls = 0
    try:
        opened = clock()
        poller.open(opened)
        chunk_s, per_call, closed = EDGE_FIRST_CHUNK_S, seconds_per_call, opened
        while calls < max_calls:
            chunk = min(max_calls - calls, max(1, math.ceil(chunk_s / max(per_call, 1e-9))))
            for _ in range(chunk):
                step()
                calls += 1
                if poller.enough.is_set():
                    break
            synchronize()
            closed = clock()  # the calls end here; what follows is the pass's own work
            elapsed = closed - opened
            chunk_s = min(poller.seconds_needed(closed), target_s - elapsed)
            if poller.enough.is_set() or chunk_s <= 0:
                break
            per_call = elapsed / calls if elapsed > 0 else per_call
    finally:
        poller.stop()
        sys.setswitchinterval(switch_interval)
    logs = poller.readings
    edges = {name: find_edges(log) for name, log in logs.items()}
    return EdgePass(
        calls=calls, opened_s=opened, closed_s=closed,
        spans={name: edge_span(found, opened, closed) for name, found in edges.items()},
        periods={name: update_period(found) for name, found in edges.items()}, edges=edges,
        windows={name: reads_around(counters[name], log, opened, closed, calls)
                 for name, log in logs.items()},
        poll_s=poll_s)


def reads_around(counter: EnergyCounter, log: list[Reading], opened_s: float,
                 closed_s: float, calls: int) -> EnergyWindow:
    """Today's two reads from the log: the last one started before the calls opened, the
    first one started after they closed (stop() makes one)."""
    starts = [reading.started_s for reading in log]
    before = log[max(0, bisect.bisect_right(starts, opened_s) - 1)]
    after = log[min(len(log) - 1, bisect.bisect_left(starts, closed_s))]
    return EnergyWindow(counter, start_j=before.joules, end_j=after.joules,
                        start_s=before.started_s, end_s=after.started_s, calls=calls)

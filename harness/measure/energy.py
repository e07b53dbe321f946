"""Energy per call and per step, from the hardware's own energy counters; never a guess.

GPU: NVML's total-energy counter (millijoules since the driver loaded, Volta and newer), read
around the timed samples. It advances in steps (every 20-100 ms), so a window shorter than
MIN_WINDOW_S is not reported from the samples: an energy pass of more calls runs after the
check, or the record says `not measured` and why. The pass (edge_energy_pass) does not rely on
two arbitrary reads: a poller thread logs every counter every POLL_S while the calls run, and
the power is the energy between two observed counter updates over their time apart, so it
needs a span of a few counter periods (EDGE_MIN_UPDATES, EDGE_MIN_SPAN_S), not EXTEND_TO_S;
where no two updates are seen it runs to EXTEND_TO_S and falls back to the two reads. RAPL
counters in the same pass go through the same code (they update every ~1 ms, so every poll
sees an update). The counter holds the whole board's energy, idle included (~80 W on an H200
at rest), so the idle power measured before the cell is stored beside it, and both figures are
kept: the total (what the board drew per call: the one reported) and the share above idle
(what the work added).

Idle power is remembered per machine (idle_power.json in the harness's cache folder, beside
the ceilings): a settled measurement is reused for IDLE_REMEMBER_S by every cell on the same
device whose fingerprint (host, CPU, cores, the device and its counters) is unchanged, and each
record then says when it was measured; absent, older or another fingerprint: measured again.

CPU: RAPL through the kernel's powercap files (intel-rapl:N/energy_uj, package domains only,
wrapping at max_energy_range_uj), where the kernel exposes them and they are readable (root
only since Linux 5.10); else `unavailable` with the reason. Never an estimate from a TDP.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from harness.core import settings
from harness.data.records import EnergyRecord
from harness.data.serial import JsonObject
from harness.data.store import read_json_object, write_json_atomic
from harness.measure import envinfo

POWERCAP_ENV = "HARNESS_POWERCAP_ROOT"  # read by harness.core.settings, never here
POWERCAP_ROOT = Path("/sys/class/powercap")
# A window must be this long for a counter that advances every 20-100 ms to be within ~10%.
MIN_WINDOW_S = 1.0
# An energy pass runs calls for about this long (two 100 ms steps are then 10% at worst).
EXTEND_TO_S = 2.0
# Idle power: the counter over this long with nothing launched, before the cell's first case.
IDLE_WINDOW_S = 1.0
# Idle windows are repeated (at most IDLE_MAX_WINDOWS) until two in a row agree this closely.
IDLE_MAX_WINDOWS, IDLE_SETTLED = 5, 0.03
# A settled idle power is reused this long on an unchanged machine (idle_power.json). Why an
# hour: measuring it costs 2-5 s of every run's first round (a GPU's idle draw settles for
# seconds after its context opens); what moves it under the same fingerprint (the room's and
# the board's temperature, a fan curve, another tenant) changes over hours, not minutes.
IDLE_REMEMBER_S = 3600.0
IDLE_CACHE_FILE = "idle_power.json"
# The edge-aligned pass. The poller reads every counter this often (an NVML read itself took
# ~3.4 ms on an H100 host, so an update is bracketed within ~10 ms there).
POLL_S = 0.002
# The span between the two updates used must cover this many counter periods (the period as
# observed: the median gap between updates; half a period of slack, as the edges are only seen
# to within a poll) and last this long, so that the power is the loop's over several periods
# (a 1 ms RAPL counter would otherwise be done in 4 ms): four updates of a 100 ms counter.
EDGE_MIN_UPDATES, EDGE_MIN_SPAN_S = 4, 0.35
# ... and this many calls of the timed median, so that a call's phases (host work, then device
# work) average out in it.
EDGE_MIN_CALLS = 4
# Updates seen after the calls start that open no span (a guard against a counter that reports
# with a delay). 0: on an H100 (benchmarks/energy_edges_check.py, 2026-11-24) the span from the
# first update gave the same power as from the second within 0.1%, three steps x 3 repeats.
EDGE_SETTLE_UPDATES = 0
# The pass's first chunk of calls: a 100 ms counter's first update, then 4 periods, and slack.
# The calls go in chunks with a sync after each, as in energy_pass: an asynchronous loop would
# otherwise queue seconds of device work (a CUDA queue of ~1,000 matmuls of 2.6 ms) before the
# span is seen to be long enough, and the closing sync would wait for all of it.
EDGE_FIRST_CHUNK_S = 0.55
# An update bracketed by reads further apart than this (the poller was held up: a call that
# kept the GIL) is not used as a span's end: it would add up to its bracket to the span.
EDGE_SHARP_S = 0.02
# How often the poller tests whether the span is long enough (the test walks the log).
EDGE_CHECK_S = 0.01
# Python's GIL switch interval during the pass: a loop that holds the GIL (a host-bound step)
# would otherwise keep the poller waiting up to 5 ms (the default) before and after each read,
# widening every bracket by as much; handing the GIL over costs the loop microseconds.
EDGE_SWITCH_INTERVAL_S = 0.0005
REPORTED = "total (idle included)"


class EnergyCounter(Protocol):
    """A monotonic energy reading in joules (None when the hardware gives none)."""

    name: str

    def read_joules(self) -> float | None: ...


@dataclass
class NvmlEnergy:
    """The NVML total-energy counter of one GPU (harness.measure.gpustate.NvmlGpu)."""

    gpu: Any
    name: str = "NVML total energy counter"

    def read_joules(self) -> float | None:
        return self.gpu.energy_joules()


@dataclass
class RaplDomain:
    name: str
    energy_path: Path
    max_range_uj: int
    last_uj: int = 0
    total_uj: int = 0  # accumulated across wraparounds since the counter was opened


@dataclass
class RaplEnergy:
    """The sum of RAPL package domains, unwrapped: each read adds the step since the last."""

    domains: list[RaplDomain] = field(default_factory=list)
    name: str = "RAPL"

    def read_joules(self) -> float | None:
        for domain in self.domains:
            try:
                now = int(domain.energy_path.read_text())
            except (OSError, ValueError):
                return None
            step = now - domain.last_uj
            if step < 0:  # wrapped at max_energy_range_uj
                step += domain.max_range_uj
            domain.total_uj += step
            domain.last_uj = now
        return sum(domain.total_uj for domain in self.domains) / 1e6


def open_rapl(root: Path | None = None) -> RaplEnergy | str:
    """The package domains under the powercap folder, or why there are none."""
    root = Path(root or settings.active().powercap_root or POWERCAP_ROOT)
    if not root.is_dir():
        return f"no {root} (the kernel exposes no powercap/RAPL here)"
    zones = sorted(path for path in root.glob("intel-rapl:*") if path.name.count(":") == 1)
    domains = []
    for zone in zones:
        try:
            name = (zone / "name").read_text().strip()
        except OSError:
            continue
        if not name.startswith("package"):
            continue  # psys would count the packages twice; dram/core are inside subzones
        try:
            first = int((zone / "energy_uj").read_text())
            max_range = int((zone / "max_energy_range_uj").read_text())
        except PermissionError:
            return (f"{zone / 'energy_uj'} is not readable by this user (root only since "
                    "Linux 5.10)")
        except (OSError, ValueError) as exc:
            return f"{zone / 'energy_uj'} unreadable: {type(exc).__name__}: {exc}"
        domains.append(RaplDomain(name, zone / "energy_uj", max_range, last_uj=first))
    if not domains:
        return f"no RAPL package domain under {root}"
    return RaplEnergy(domains, name="RAPL " + " + ".join(d.name for d in domains))


@dataclass
class EnergyWindow:
    """A TimedWindow reading one counter at begin() and end(calls)."""

    counter: EnergyCounter
    clock: Callable[[], float] = time.perf_counter
    start_j: float | None = None
    end_j: float | None = None
    start_s: float = 0.0
    end_s: float = 0.0
    calls: int = 0

    def begin(self) -> None:
        self.start_s, self.start_j = self.clock(), self.counter.read_joules()

    def end(self, calls: int) -> None:
        self.end_s, self.end_j, self.calls = self.clock(), self.counter.read_joules(), calls

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def joules(self) -> float | None:
        if self.start_j is None or self.end_j is None:
            return None
        return self.end_j - self.start_j


def measure_idle(counters: dict[str, EnergyCounter], seconds: float = IDLE_WINDOW_S,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.perf_counter,
                 max_windows: int = IDLE_MAX_WINDOWS) -> dict[str, IdlePower]:
    """Each counter's power with nothing launched (watts None where it gave no reading).

    Quiet windows one after another until two in a row agree within IDLE_SETTLED (every
    counter), at most max_windows: a GPU that has just been busy, or whose context was just
    created, draws more for a few seconds (131 W read against 122 W settled on an H200, which
    made the share above idle negative). The last window is the figure; 'settled' says
    whether it agreed with the one before.
    """
    found: dict[str, IdlePower] = {}
    previous: dict[str, float] = {}
    for count in range(1, max_windows + 1):
        windows = {name: EnergyWindow(counter, clock) for name, counter in counters.items()}
        for window in windows.values():
            window.begin()
        sleep(seconds)
        for window in windows.values():
            window.end(0)
        found = {name: idle_record(window) for name, window in windows.items()}
        watts = {name: record.watts for name, record in found.items()
                 if record.watts is not None}
        settled = bool(watts) and all(
            name in previous and abs(value - previous[name]) <= IDLE_SETTLED * previous[name]
            for name, value in watts.items())
        found = {name: replace(record, settled=settled, windows=count)
                 for name, record in found.items()}
        if settled or not watts:
            break
        previous = watts
    return found


@dataclass(frozen=True)
class IdlePower:
    """A counter's power over one quiet window before the cell (None: it gave no reading),
    and whether it agreed with the window before it (`settled`, after `windows` windows)."""

    counter: str
    watts: float | None
    window_s: float = 0.0
    settled: bool = False
    windows: int = 1
    measured_at: float = 0.0  # time.time() at the end of its window
    remembered: bool = False  # read back from idle_power.json, not measured by this worker


def idle_record(window: EnergyWindow) -> IdlePower:
    joules = window.joules
    if joules is None or window.seconds <= 0:
        return IdlePower(window.counter.name, None)
    return IdlePower(window.counter.name, joules / window.seconds, window.seconds,
                     measured_at=time.time())


def idle_cache_path() -> Path:
    return settings.cache_folder() / IDLE_CACHE_FILE


def _idle_entry_key(fingerprint: JsonObject) -> str:
    """One entry per fingerprint (which names the device): a shared home folder keeps each
    machine's and each device's own idle power."""
    return envinfo.fingerprint_key(fingerprint)


def _read_idle_cache() -> dict[str, Any]:
    return read_json_object(idle_cache_path())


def recall_idle(fingerprint: JsonObject, counters: list[str],
                now: float | None = None) -> dict[str, IdlePower] | None:
    """The idle power remembered for FINGERPRINT, one per counter name in COUNTERS, when
    every one is there, settled and younger than IDLE_REMEMBER_S; else None (measure it)."""
    now = time.time() if now is None else now
    entry = _read_idle_cache().get(_idle_entry_key(fingerprint))
    if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint:
        return None
    stored = entry.get("counters")
    if not isinstance(stored, dict) or set(stored) != set(counters):
        return None
    found = {}
    for name, fields in stored.items():
        try:
            record = IdlePower(**fields)
        except TypeError:  # a layout this version cannot read
            return None
        if record.watts is None or not record.settled \
                or not 0 <= now - record.measured_at <= IDLE_REMEMBER_S:
            return None
        found[name] = replace(record, remembered=True)
    return found


def remember_idle(fingerprint: JsonObject, found: dict[str, IdlePower]) -> None:
    """Store FOUND for FINGERPRINT where every counter gave a settled figure (an unsettled
    one is measured again next time); a cache that cannot be written costs the reuse only."""
    if not found or not all(record.watts is not None and record.settled
                            for record in found.values()):
        return
    cache = _read_idle_cache()
    cache[_idle_entry_key(fingerprint)] = {
        "fingerprint": fingerprint,
        "counters": {name: {key: value for key, value in vars(record).items()
                            if key != "remembered"} for name, record in found.items()}}
    try:
        write_json_atomic(idle_cache_path(), cache)
    except OSError:
        pass


def energy_pass(counters: dict[str, EnergyCounter], step: Callable[[], object],
                synchronize: Callable[[], None], seconds_per_call: float,
                target_s: float = EXTEND_TO_S,
                clock: Callable[[], float] = time.perf_counter,
                max_chunks: int = 8) -> dict[str, EnergyWindow]:
    """Back-to-back calls between reads of every counter until the window lasts target_s.

    The calls go in chunks sized from seconds_per_call, with a sync and a clock read after
    each: the timed median is only an estimate (a loaded host inflates it, a warm cache
    shrinks it), and a chunk count fixed from it once left windows of 0.38 s where 2 s were
    meant. Each further chunk is sized from the rate seen so far; max_chunks bounds the pass
    when a clock that does not advance (or calls that take no time) would never reach it.
    """
    windows = {name: EnergyWindow(counter, clock) for name, counter in counters.items()}
    synchronize()
    for window in windows.values():
        window.begin()
    started, calls = clock(), 0
    chunk = max(1, math.ceil(target_s / max(seconds_per_call, 1e-9)))
    for _ in range(max_chunks):
        for _ in range(chunk):
            step()
        synchronize()
        calls += chunk
        elapsed = clock() - started
        if elapsed >= target_s:
            break
        per_call = elapsed / calls if elapsed > 0 else seconds_per_call
        chunk = max(1, math.ceil((target_s - elapsed) / max(per_call, 1e-9) * 1.1))
    for window in windows.values():
        window.end(calls)
    return windows


# --- the edge-aligned pass --------------------------------------------------------------------

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

    calls: int
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


def edge_energy_pass(counters: dict[str, EnergyCounter], step: Callable[[], object],
                     synchronize: Callable[[], None], seconds_per_call: float,
                     target_s: float = EXTEND_TO_S,
                     clock: Callable[[], float] = time.perf_counter,
                     poll_s: float = POLL_S, max_calls_factor: int = 16) -> EdgePass:
    """Back-to-back calls while a poller logs the counters, until every counter's span
    between two updates is long enough (span_is_enough) or the calls have run target_s (a
    counter that never moves: the two reads then cover today's window).

    Chunks with a sync after each, as energy_pass runs them: the first EDGE_FIRST_CHUNK_S of
    calls at the timed rate, each further one what the spans still need at the rate seen; a
    chunk ends early once the poller finds the spans long enough. max_calls_factor x target_s
    / seconds_per_call calls at most: a clock that does not advance must not loop for ever.
    """
    poller = CounterPoller(counters, clock, poll_s,
                           max(EDGE_MIN_SPAN_S, EDGE_MIN_CALLS * seconds_per_call))
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


def window_record(window: EnergyWindow, steps_per_call: float | None,
                  idle: IdlePower | None, source: str) -> EnergyRecord:
    """Energy per call and per step from one window, total and above idle."""
    joules, calls = window.joules, window.calls
    if joules is None:
        return EnergyRecord.not_measured(f"{window.counter.name} gave no reading")
    if calls < 1:
        return EnergyRecord.not_measured("no warm calls in the window")
    if window.seconds < MIN_WINDOW_S:
        return EnergyRecord.not_measured(
            f"window too short: {window.seconds:.2g} s < {MIN_WINDOW_S} s for a counter that "
            "advances every 20-100 ms")
    return figures_record(window.counter.name, window.seconds, calls, joules, steps_per_call,
                          idle, source)


def edge_record(counter: EnergyCounter, found: EdgePass, name: str,
                steps_per_call: float | None, idle: IdlePower | None,
                source: str) -> EnergyRecord:
    """Energy per call from the edge-aligned pass: the power between the counter's two updates
    x the pass's own seconds per call. window_s and calls stay the pass's (so joules = W x
    window / calls holds, as `harness check` recomputes it); the span is in edge_* fields.
    Falls back to the two reads around the pass (window_record) where no span was seen."""
    span = found.spans.get(name)
    if span is None:
        return window_record(found.windows[name], steps_per_call, idle, source)
    if found.calls < 1:
        return EnergyRecord.not_measured("no warm calls in the window")
    return figures_record(
        counter.name, found.seconds, found.calls, span.watts * found.seconds, steps_per_call,
        idle, source,
        {"edge_span_s": span.seconds, "edge_joules": span.joules,
         "edge_updates": span.updates, "edge_resolution_s": span.resolution_s,
         "edge_error_bound": span.error_bound,
         "counter_period_s": found.periods.get(name), "poll_s": found.poll_s})


def figures_record(counter_name: str, seconds: float, calls: int, joules: float,
                   steps_per_call: float | None, idle: IdlePower | None, source: str,
                   extra: JsonObject | None = None) -> EnergyRecord:
    """The record of JOULES over SECONDS and CALLS: per call and per step, total and above
    idle."""
    steps = steps_per_call or 1
    idle_watts = idle.watts if idle else None
    above = None if idle_watts is None else joules - idle_watts * seconds
    return EnergyRecord(
        status="ok", counter=counter_name, source=source, reported=REPORTED,
        window_s=seconds, calls=calls, joules_total=joules,
        watts_mean=joules / seconds, joules_per_call=joules / calls,
        joules_per_step=joules / calls / steps, steps_per_call=steps,
        idle_watts=idle_watts,
        idle_window_s=None if idle is None or above is None else idle.window_s,
        idle_settled=None if idle is None or above is None else idle.settled,
        joules_per_call_above_idle=None if above is None else above / calls,
        joules_per_step_above_idle=None if above is None else above / calls / steps,
        extra_fields={**(extra or {}), **(idle_origin(idle) if above is not None else {})})


def idle_origin(idle: IdlePower | None) -> JsonObject:
    """Where the idle power came from, for the record: {'idle_remembered_from': 'HH:MM'}
    (with its date and time) when it was read back from the machine's cache, else nothing
    (measured before this cell)."""
    if idle is None or not idle.remembered:
        return {}
    return {"idle_remembered_from": time.strftime("%H:%M", time.localtime(idle.measured_at)),
            "idle_measured_at": time.strftime("%Y-%m-%d %H:%M:%S",
                                              time.localtime(idle.measured_at))}

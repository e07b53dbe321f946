"""The clock: cold call apart, warm-up, calibrated repeats, a sync before every clock read.

Why the harness owns the clock: device work is asynchronous, so a timer read without a
synchronise measures only the launch (seed experiment 5 reported a flat ~1 ms GPU curve that
way). Backends supply `synchronize()` and nothing else; every `_clock()` here is preceded by one.
The calibration follows torch.utils.benchmark's blocked_autorange and pyperf: grow the calls per
sample until the timer's own overhead is a negligible fraction of a sample.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from harness.core.units import format_seconds
from harness.data.results import sample_stats
from harness.data.serial import JsonObject
from harness.measure import hostload

# Two clusters of per-call times whose gap is at least this factor are two behaviours (a call
# that sometimes waits for a descheduled thread, a cache that sometimes misses), not noise.
BIMODAL_GAP_FACTOR = 2.0
# The median per call may drift from what calibration saw, but not by this factor.
CALIBRATION_DRIFT_FACTOR = 2.0


# Warm-up settles when the last SETTLE_CALLS single calls all lie within SETTLE_BAND of their
# median and do not each fall below the one before (calls still getting faster warm up to
# warmup_s). Chosen from 23 fixed warm-ups replayed offline (benchmarks/warmup_check.py, 2-core
# VM, the example LSTM and small CNN and torch/numpy matmul): 5 calls within 5% stopped after a
# median 13 calls with their median 2.0% (worst 8.8%) from the warm level; 3 calls stopped on
# a stall (worst 1264%), 2% bands ran hundreds of calls, 8 calls gained nothing.
SETTLE_CALLS = 5
SETTLE_BAND = 0.05
# The fewest warm-up calls, however settled the first ones look.
MIN_WARMUP_CALLS = 2
WARMUP_SETTLED = "settled"
WARMUP_CAP = "cap"
# A step slower than the whole warm-up, as slow cold as warm: its one warm-up call is also the
# first sample (steady_from_the_start).
WARMUP_KEPT = "kept as the first sample"
# ...where its cold call took at most this much longer than that call: what a compile or an
# autotune adds is more (the H100's 11 s Jacobian calls scatter by +-5%, so SETTLE_BAND kept
# one case of four). A stray slow kept call is one sample of at least three: not the median.
KEPT_BAND = 0.10


@dataclass(frozen=True)
class TimingPolicy:
    """How long and how often to sample one case."""

    min_samples: int = 7
    min_time_s: float = 0.5  # keep sampling at least this long (after warm-up)
    max_time_s: float = 10.0  # stop once this is spent and at least 3 samples exist
    warmup_s: float = 0.25  # the most uncounted calls after the cold one may take
    # Warm-up ends before warmup_s once the last `settle_calls` single calls agree (settled);
    # 0: every warm-up runs to warmup_s (the rule before issue 42).
    settle_calls: int = SETTLE_CALLS
    target_sample_s: float = 0.005  # calibrate calls per sample up to about this
    overhead_ratio: float = 1000.0  # ...and to at least this many times the timer overhead
    # Calls per sample an earlier round of the same cell found: calibration starts there, not
    # at 1 call (None: calibrate from 1). Why: every round's worker grew it anew.
    reused_calls: int | None = None
    # Seconds per call the cell's first round settled at (its samples' median; None: unknown):
    # a later round's warm-up ends once its calls are back at that level (warm_up).
    reused_level: float | None = None

    @classmethod
    def quick(cls) -> TimingPolicy:
        return cls(min_samples=5, min_time_s=0.1, max_time_s=2.0, warmup_s=0.1)

    def share(self, rounds: int) -> TimingPolicy:
        """This policy's samples and time budget shared out over `rounds` worker processes.

        Each round keeps its own warm-up (a new process must warm up again) and at least
        MIN_ROUND_SAMPLES samples, so every round has a median and quartiles of its own.
        """
        if rounds <= 1:
            return self
        return replace(self, min_samples=max(MIN_ROUND_SAMPLES, -(-self.min_samples // rounds)),
                       min_time_s=self.min_time_s / rounds,
                       max_time_s=max(self.max_time_s / rounds, self.min_time_s))

    def reusing(self, calls: int | None, level: float | None = None) -> TimingPolicy:
        """This policy calibrating from `calls` calls per sample (None: from 1 call), its
        warm-up ending at the first round's LEVEL (seconds per call; None: by its own calls)."""
        return replace(self, reused_calls=None if calls is None else max(1, calls),
                       reused_level=level if level and level > 0 else None)


# A round's fewest samples: three give a median and quartiles (see sample_stats).
MIN_ROUND_SAMPLES = 3


@dataclass
class Measurement:
    """Raw seconds-per-call samples of one case plus its cold first call."""

    cold_seconds: float
    samples: list[float] = field(default_factory=list)  # seconds per call, one per sample
    calls_per_sample: int = 1
    timer_overhead_s: float = 0.0
    predicted_call_s: float | None = None  # what calibration measured per call
    single_calls: list[float] = field(default_factory=list)  # warm-up calls, timed one by one
    # Why the warm-up stopped: WARMUP_SETTLED (its last calls agreed), WARMUP_CAP (warmup_s
    # spent) or WARMUP_KEPT (one slow steady call, also the first sample); '' where there was
    # no warm-up (per_call).
    warmup_stopped: str = ""
    other_load: hostload.OtherLoad | None = None  # what ran beside the sampling
    suspect: str = ""  # why these samples may not be what a user's loop costs ('' if none)

    def warmup_record(self) -> JsonObject:
        """How the warm-up went, for the case's record: calls, seconds and why it stopped."""
        return {"calls": len(self.single_calls), "seconds": sum(self.single_calls),
                "stopped": self.warmup_stopped}

    @property
    def median(self) -> float | None:  # None without samples
        return sample_stats(self.samples).median


def bimodal_split(values: list[float]) -> tuple[float, float, float] | None:
    """(low median, high median, share of high values) when the values form two clusters.

    The largest multiplicative gap between neighbours in sorted order, among splits that leave
    at least 2 values and 10% of them on each side, must reach BIMODAL_GAP_FACTOR. A long tail
    of a few stalls is not bimodal (it stays under 10%); smooth noise has no such gap.
    """
    ordered = sorted(value for value in values if value > 0)
    count = len(ordered)
    least = max(2, -(-count // 10))
    if count < 2 * least:
        return None
    best_index, best_gap = -1, 1.0
    for index in range(least - 1, count - least):
        gap = ordered[index + 1] / ordered[index]
        if gap > best_gap:
            best_index, best_gap = index, gap
    if best_gap < BIMODAL_GAP_FACTOR:
        return None
    low, high = ordered[:best_index + 1], ordered[best_index + 1:]
    return statistics.median(low), statistics.median(high), len(high) / count


def suspect_reason(measurement: Measurement) -> str:
    """Why a measurement may misreport a user's loop: bimodal calls, drift, contention."""
    reasons = []
    for name, values in (("single calls", measurement.single_calls),
                         ("samples", measurement.samples)):
        split = bimodal_split(values)
        if split is not None:
            low, high, share = split
            reasons.append(f"bimodal {name}: {100 * (1 - share):.0f}% near "
                           f"{format_seconds(low)}, {100 * share:.0f}% near "
                           f"{format_seconds(high)}")
            break
    predicted = measurement.predicted_call_s
    if predicted and measurement.samples:
        # Only slower than predicted is suspect: a pool of threads still waking up during
        # calibration makes the samples faster than predicted, and the samples are right.
        drift = statistics.median(measurement.samples) / predicted
        if drift > CALIBRATION_DRIFT_FACTOR:
            reasons.append(f"median per call is {drift:.2g}x what calibration measured "
                           f"({format_seconds(predicted)})")
    if measurement.other_load is not None and measurement.other_load.contended:
        reasons.append(measurement.other_load.reason())
    return "; ".join(reasons)


class TimedWindow(Protocol):
    """Read right before the first and right after the last timed call (GPU state, energy).

    Synchronised on both sides like every clock read: begin() follows a synchronize, end()
    follows the last sample's synchronize, and `calls` is how many calls ran in between.
    """

    def begin(self) -> None: ...

    def end(self, calls: float) -> None: ...


def _clock() -> float:
    return time.perf_counter()


def _timed_calls(step: Callable[[], object], synchronize: Callable[[], None], calls: int) -> float:
    """Seconds for `calls` calls, synchronised on both sides of the clock reads."""
    synchronize()
    start = _clock()
    for _ in range(calls):
        step()
    synchronize()
    return _clock() - start


def timer_overhead(synchronize: Callable[[], None], repeats: int = 50) -> float:
    """Median cost of an empty synchronised measurement: the floor of any sample."""
    return statistics.median(_timed_calls(lambda: None, synchronize, 0) for _ in range(repeats))


def autorange(
    step: Callable[[], object],
    synchronize: Callable[[], None],
    policy: TimingPolicy,
    window: TimedWindow | None = None,
    say: Callable[[str, float | None], None] | None = None,
) -> Measurement:
    """Time `step` the way a steady-state user sees it, plus its cold first call.

    The cold call is returned apart (context creation, tracing, allocator growth belong to it).
    Warm-up calls are not counted. Each sample is `calls_per_sample` back-to-back calls divided
    by that count, so on a GPU this is pipelined wall time per call, not a lone kernel's time.
    SAY: told each stage as it starts (cold call, warm-up, calibration, samples) with the
    seconds it should take where the calibration knows (the run's progress line); never
    inside a timed call.
    """
    tell = say or (lambda stage, estimate_s: None)
    tell("cold call", None)
    cold = _timed_calls(step, synchronize, 1)
    overhead = timer_overhead(synchronize)
    load_before = hostload.snapshot()  # before the warm-up: its call may be kept as a sample
    tell("warm-up", policy.warmup_s if cold < policy.warmup_s else None)
    singles, stopped = warm_up(step, synchronize, policy)
    tell("calibration", None)
    calls, predicted = _calibrate(step, synchronize, policy, overhead, min(singles))
    tell(f"samples of {calls} call{'s' if calls > 1 else ''}",
         samples_estimate_s(policy, calls * predicted))
    kept = calls == 1 and steady_from_the_start(cold, singles, stopped, policy)
    measurement = Measurement(cold, calls_per_sample=calls, timer_overhead_s=overhead,
                              predicted_call_s=predicted, single_calls=singles,
                              warmup_stopped=WARMUP_KEPT if kept else stopped)
    if kept:
        measurement.samples.append(singles[0])
    if window is not None:  # around the samples timed from here (not a kept warm-up call)
        window.begin()
    started = _clock()
    while True:
        measurement.samples.append(_timed_calls(step, synchronize, calls) / calls)
        elapsed = _clock() - started
        enough = len(measurement.samples) >= policy.min_samples and elapsed >= policy.min_time_s
        out_of_budget = elapsed >= policy.max_time_s and len(measurement.samples) >= 3
        if enough or out_of_budget:
            if window is not None:
                window.end((len(measurement.samples) - kept) * calls)
            measurement.other_load = hostload.other_load(load_before, hostload.snapshot())
            measurement.suspect = suspect_reason(measurement)
            return measurement


def samples_estimate_s(policy: TimingPolicy, sample_s: float) -> float:
    """How long autorange's samples should take at SAMPLE_S seconds each: min_samples of them
    or min_time_s, whichever is longer, cut at max_time_s (but 3 samples at least)."""
    wanted = max(policy.min_samples * sample_s, policy.min_time_s)
    return min(wanted, max(policy.max_time_s, 3 * sample_s))


def steady_from_the_start(cold: float, singles: list[float], stopped: str,
                          policy: TimingPolicy) -> bool:
    """Whether a warm-up's one call is kept as the first sample: a step slower than the whole
    warm-up (its one call spent the cap) whose cold call took no more than that call plus
    KEPT_BAND had nothing left to warm after it: no compilation, no lazy start-up of any
    size. Why: seed 000's Jacobian takes 19 s per call on the H100, and throwing away one
    such call per case and round cost advise its whole budget for fixes; a step whose cold
    call was longer (a compile, an autotune) keeps its warm-up call uncounted, as before."""
    if policy.settle_calls < 1 or stopped != WARMUP_CAP or len(singles) != 1:
        return False
    return singles[0] >= policy.warmup_s and cold <= singles[0] * (1 + KEPT_BAND)


def warm_up(step: Callable[[], object], synchronize: Callable[[], None],
            policy: TimingPolicy) -> tuple[list[float], str]:
    """Uncounted single calls until they settle or policy.warmup_s is spent: (their times, why
    it stopped). Their times feed calibration and the bimodal guard.

    Why not always warmup_s: a small model's calls settle within a few calls, and 0.25 s per
    case in every round's worker was most of a small run's own cost. Settled needs at least
    MIN_WARMUP_CALLS calls (one call alone says nothing about the next); a call that alone
    takes warmup_s is its whole warm-up, as before (a 5 s step must not pay 10 s per round).
    """
    singles = [_timed_calls(step, synchronize, 1)]
    total = singles[0]  # kept running: sum(singles) per call made a 0.6 us step's warm-up 3.5 s
    while total < policy.warmup_s:
        if len(singles) >= MIN_WARMUP_CALLS and (
                at_level(singles, policy.reused_level)
                or settled(singles, policy.settle_calls)):
            return singles, WARMUP_SETTLED
        singles.append(_timed_calls(step, synchronize, 1))
        total += singles[-1]
    return singles, WARMUP_CAP


def at_level(singles: list[float], level: float | None, band: float = SETTLE_BAND) -> bool:
    """Whether the last MIN_WARMUP_CALLS calls each sit within BAND of LEVEL, the seconds per
    call the cell's first round settled at (None: no level known).

    Why: a later round's worker runs the same step in the same way, so calls back at the
    level its first round measured are warm; waiting for settle_calls more of them to agree
    among themselves cost a later round 5-6 calls per case (0.2 s of a 46 ms step) again.
    A process that sits elsewhere (a second level, a slower GPU clock) is not at the level
    and warms up by the rules that found the first round's level; its samples say where it
    sits."""
    if level is None or len(singles) < MIN_WARMUP_CALLS:
        return False
    return all(abs(value - level) <= band * level for value in singles[-MIN_WARMUP_CALLS:])


def settled(singles: list[float], window: int, band: float = SETTLE_BAND,
            level: bool = True) -> bool:
    """Whether the last WINDOW calls are warm: not each faster than the one before (a call still
    getting faster is not warm yet), and either each within BAND of their median, or (LEVEL)
    their median within BAND of the median of the WINDOW calls before them. WINDOW 0: never
    (a fixed warm-up).

    Why the level: a step whose single calls scatter by more than BAND (a small LSTM on a
    16-thread CPU, 6.5 ms calls) never has WINDOW calls agreeing, so it warmed up to the cap
    in every case of every round, though its level had stopped moving after a few calls; the
    scatter is the samples' to measure (their IQR), not the warm-up's to wait out. The level
    also needs the two windows' trend flat within BAND per window (trend)."""
    if window < 1 or len(singles) < window:
        return False
    last = singles[-window:]
    if window >= 3 and all(later < earlier for earlier, later in itertools.pairwise(last)):
        return False
    middle = statistics.median(last)
    if all(abs(value - middle) <= band * middle for value in last):
        return True
    if not level or len(singles) < 2 * window:
        return False
    if levels_settled(singles[-2 * window:], window, band):
        return True
    before = statistics.median(singles[-2 * window:-window])
    # Two windows' medians also meet by chance on a level still falling under the scatter: the
    # trend over both windows (Theil-Sen: the median of the pairwise slopes, which a stray slow
    # call does not tilt) must move the level by no more than BAND over a window too.
    return abs(middle - before) <= band * before and \
        abs(trend(singles[-2 * window:])) * window <= band * middle


def levels_settled(recent: list[float], window: int, band: float) -> bool:
    """Whether calls that alternate between two levels are warm: the last 2 x WINDOW calls
    split into two levels (level_split), each shows in both windows, and each level's median
    moved by no more than BAND between the windows.

    Why: a GPU step that sometimes waits (a second stream, an allocator's free, a host thread
    woken late) splits its calls into two levels, and a window's median jumps between them as
    the mix varies, so neither rule above ever held and such a step warmed up to the cap in
    every case of every round (19.9 s of a small GPT-2 file's 34 s repeat run on the H100).
    The two levels are still the samples' to measure (their IQR, the bimodal flag)."""
    threshold = level_split(recent)
    if threshold is None:
        return False
    before, after = recent[:window], recent[window:]
    for on_level in (lambda value: value < threshold, lambda value: value >= threshold):
        was = [value for value in before if on_level(value)]
        now = [value for value in after if on_level(value)]
        if not was or not now:
            return False
        if abs(statistics.median(now) - statistics.median(was)) > band * statistics.median(was):
            return False
    return True


# Two levels, not scatter: the largest gap between neighbouring calls in sorted order is at
# least this factor (4 SETTLE_BANDs: scatter at one level that no two windows' medians within
# 5% could show), with two calls on each side at least.
LEVELS_GAP_FACTOR = 1.2


def level_split(values: list[float]) -> float | None:
    """The time between two levels of VALUES (the geometric middle of their widest gap), or
    None where they show no such gap."""
    ordered = sorted(value for value in values if value > 0)
    gaps = [(ordered[index + 1] / ordered[index], index)
            for index in range(1, len(ordered) - 2)]  # two values on each side at least
    if not gaps:
        return None
    gap, index = max(gaps)
    if gap < LEVELS_GAP_FACTOR:
        return None
    return math.sqrt(ordered[index] * ordered[index + 1])


def trend(values: list[float]) -> float:
    """The Theil-Sen slope of VALUES against their index: the median of the pairwise slopes."""
    return statistics.median((later - earlier) / (second - first)
                             for (first, earlier), (second, later)
                             in itertools.combinations(enumerate(values), 2))


def _calibrate(
    step: Callable[[], object],
    synchronize: Callable[[], None],
    policy: TimingPolicy,
    overhead: float,
    single_call_s: float,
) -> tuple[int, float]:
    """Double the calls per sample until a sample dwarfs the timer overhead.

    Starts from the fastest warm-up call: one pre-empted call must not stop the doubling.
    A later round starts from the calls its cell's first round found (policy.reused_calls):
    one level timed instead of every level from 1, and still doubled from there if the
    machine got faster. Returns the calls per sample and the per-call time the last level
    measured (the prediction the samples are held to).
    """
    target = max(policy.target_sample_s, overhead * policy.overhead_ratio)
    calls = policy.reused_calls or 1
    # One call's time is the warm-up's already: a slow step is not called twice more for it.
    sample = single_call_s if calls == 1 else _fastest_sample(step, synchronize, calls)
    while sample < target and calls < 1_000_000:
        calls *= 2
        sample = _fastest_sample(step, synchronize, calls)
    return calls, sample / calls


def _fastest_sample(step: Callable[[], object], synchronize: Callable[[], None],
                    calls: int) -> float:
    """The faster of two samples of `calls` calls: a pre-empted try must not stop the
    doubling early, nor pass for the prediction."""
    return min(_timed_calls(step, synchronize, calls) for _ in range(2))


def per_call(
    step: Callable[[], object],
    synchronize: Callable[[], None],
    count: int,
    window: TimedWindow | None = None,
) -> Measurement:
    """Time `count` calls one by one; the first is the cold one (e.g. epoch 1 of training).

    The window (if any) spans the warm calls only: the cold one is not a user's steady state.
    """
    load_before = hostload.snapshot()
    seconds = [_timed_calls(step, synchronize, 1)]
    if window is not None:
        window.begin()
    seconds += [_timed_calls(step, synchronize, 1) for _ in range(count - 1)]
    if window is not None:
        window.end(count - 1)
    measurement = Measurement(cold_seconds=seconds[0], samples=seconds[1:])
    measurement.other_load = hostload.other_load(load_before, hostload.snapshot())
    measurement.suspect = suspect_reason(measurement)
    return measurement

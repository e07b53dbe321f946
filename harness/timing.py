"""The clock: cold call apart, warm-up, calibrated repeats, a sync before every clock read.

Why the harness owns the clock: device work is asynchronous, so a timer read without a
synchronise measures only the launch (seed experiment 5 reported a flat ~1 ms GPU curve that
way). Backends supply `synchronize()` and nothing else; every `_clock()` here is preceded by one.
The calibration follows torch.utils.benchmark's blocked_autorange and pyperf: grow the calls per
sample until the timer's own overhead is a negligible fraction of a sample.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

NOISY_IQR_FRACTION = 0.10


@dataclass(frozen=True)
class TimingPolicy:
    """How long and how often to sample one case."""

    min_samples: int = 7
    min_time_s: float = 0.5  # keep sampling at least this long (after warm-up)
    max_time_s: float = 10.0  # stop once this is spent and at least 3 samples exist
    warmup_s: float = 0.25  # uncounted calls after the cold one (thread pools spin up)
    target_sample_s: float = 0.005  # calibrate calls per sample up to about this
    overhead_ratio: float = 1000.0  # ...and to at least this many times the timer overhead

    @classmethod
    def quick(cls) -> TimingPolicy:
        return cls(min_samples=5, min_time_s=0.1, max_time_s=2.0, warmup_s=0.1)


@dataclass
class Measurement:
    """Raw seconds-per-call samples of one case plus its cold first call."""

    cold_seconds: float
    samples: list[float] = field(default_factory=list)  # seconds per call, one per sample
    calls_per_sample: int = 1
    timer_overhead_s: float = 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def iqr(self) -> float:
        return iqr(self.samples)

    @property
    def noisy(self) -> bool:
        return is_noisy(self.samples)


def iqr(values: list[float]) -> float:
    """Interquartile range (inclusive method, so 2-3 samples still give a number)."""
    if len(values) < 2:
        return 0.0
    quartiles = statistics.quantiles(values, n=4, method="inclusive")
    return quartiles[2] - quartiles[0]


def is_noisy(values: list[float]) -> bool:
    """IQR/median above 10%, the threshold torch.utils.benchmark warns at."""
    if len(values) < 2:
        return False
    median = statistics.median(values)
    return median > 0 and iqr(values) / median > NOISY_IQR_FRACTION


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
) -> Measurement:
    """Time `step` the way a steady-state user sees it, plus its cold first call.

    The cold call is returned apart (context creation, tracing, allocator growth belong to it).
    Warm-up calls are not counted. Each sample is `calls_per_sample` back-to-back calls divided
    by that count, so on a GPU this is pipelined wall time per call, not a lone kernel's time.
    """
    cold = _timed_calls(step, synchronize, 1)
    overhead = timer_overhead(synchronize)
    warm_spent, fastest_single = 0.0, cold
    while warm_spent < policy.warmup_s:
        single = _timed_calls(step, synchronize, 1)
        warm_spent += single
        # The fastest warm-up call estimates the cost: one pre-empted call must not stop
        # the calibration.
        fastest_single = min(fastest_single, single)
        if single > policy.warmup_s:
            break
    calls = _calibrate(step, synchronize, policy, overhead, fastest_single)
    measurement = Measurement(cold, calls_per_sample=calls, timer_overhead_s=overhead)
    started = _clock()
    while True:
        measurement.samples.append(_timed_calls(step, synchronize, calls) / calls)
        elapsed = _clock() - started
        enough = len(measurement.samples) >= policy.min_samples and elapsed >= policy.min_time_s
        out_of_budget = elapsed >= policy.max_time_s and len(measurement.samples) >= 3
        if enough or out_of_budget:
            return measurement


def _calibrate(
    step: Callable[[], object],
    synchronize: Callable[[], None],
    policy: TimingPolicy,
    overhead: float,
    single_call_s: float,
) -> int:
    """Double the calls per sample until a sample dwarfs the timer overhead."""
    target = max(policy.target_sample_s, overhead * policy.overhead_ratio)
    calls = 1
    sample = single_call_s
    while sample < target and calls < 1_000_000:
        calls *= 2
        # Two tries per level, keep the faster: a pre-empted try would stop the doubling early.
        sample = min(_timed_calls(step, synchronize, calls) for _ in range(2))
    return calls


def per_call(
    step: Callable[[], object],
    synchronize: Callable[[], None],
    count: int,
) -> Measurement:
    """Time `count` calls one by one; the first is the cold one (e.g. epoch 1 of training)."""
    seconds = [_timed_calls(step, synchronize, 1) for _ in range(count)]
    return Measurement(cold_seconds=seconds[0], samples=seconds[1:])

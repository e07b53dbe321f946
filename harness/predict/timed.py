"""Profile rows timed with the harness's own clock (harness.measure.timing.autorange).

Why autorange and not a loop of our own: it is the clock every cell is timed with (a
synchronise before both clock reads of every sample, a settled warm-up, calls per sample
grown until the timer's overhead is negligible) and it reads the other processes' CPU use
while the samples ran, which a row keeps as `contended` instead of passing a slowed figure
off as the device's.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.data.serial import JsonValue
from harness.measure.timing import TimingPolicy, autorange
from harness.predict.profile import Row

# A full profile: ~90 rows of ~0.5-1 s each; 37 s of measuring on the H200 with 9 samples
# and 0.25 s a row, so 15 samples and 0.4 s stay well under 3 minutes. Quick: ~0.1 s a row.
FULL = TimingPolicy(min_samples=15, min_time_s=0.4, max_time_s=2.0, warmup_s=0.1,
                    target_sample_s=0.01)
QUICK = TimingPolicy(min_samples=5, min_time_s=0.03, max_time_s=0.3, warmup_s=0.02,
                     target_sample_s=0.002)


def policy(quick: bool) -> TimingPolicy:
    return QUICK if quick else FULL


def timed_row(step: Callable[[], object], synchronize: Callable[[], None],
              chosen: TimingPolicy, params: dict[str, JsonValue], *,
              flops: float | None = None, moved_bytes: float | None = None) -> Row:
    """One row: STEP timed by autorange under CHOSEN, with its work per call for a rate."""
    measurement = autorange(step, synchronize, chosen)
    load = measurement.other_load
    return Row.timed(params, measurement.samples, measurement.calls_per_sample,
                     flops=flops, bytes=moved_bytes,
                     contended=load.reason() if load is not None and load.contended else "")


def no_sync() -> None:
    """A CPU op has finished when it returns: nothing to wait for before a clock read."""

"""The wall time of a worker's own phases, by name: what the run's cost line shows.

A worker spends time besides the timed calls (the framework import, warm-up and calibration,
the passes after the samples, the check); HarnessCost.phases keeps each by name, so that a slow
run says where its time went.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class PhaseClock:
    """Wall time of the harness's own phases in a worker, by name (HarnessCost.phases)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.timed_s = 0.0
        # A case of this worker was contended in every attempt: the load is not a passing
        # spike, so later cases are timed once (their contention is still recorded).
        self.busy = False

    def add(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def timing(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)


def phase(clock: PhaseClock | None, name: str) -> contextlib.AbstractContextManager[None]:
    """CLOCK's timing of NAME, or nothing where no clock is kept."""
    return clock.timing(name) if clock is not None else contextlib.nullcontext()

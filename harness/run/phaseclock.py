"""The wall time of a worker's own phases, by name: what the run's cost line shows; and the
phase the worker is in now, said to its parent (harness.run.phases) through a small file.

A worker spends time besides the timed calls (the framework import, warm-up and calibration,
the passes after the samples, the check); HarnessCost.phases keeps each by name, so that a slow
run says where its time went. The same names, as they start, tell a long run's progress line
what the worker is doing (a 28 s step's warm-up said nothing for minutes).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# (phase, case, estimate_s): what the worker does now, handed to the announcer.
Announce = Callable[[dict[str, Any]], None]


class PhaseClock:
    """Wall time of the harness's own phases in a worker, by name (HarnessCost.phases), and the
    phase it is in now (`announce`: told each change; None: nobody listens)."""

    def __init__(self, announce: Announce | None = None) -> None:
        self.phases: dict[str, float] = {}
        self.timed_s = 0.0
        # A case of this worker was contended in every attempt: the load is not a passing
        # spike, so later cases are timed once (their contention is still recorded).
        self.busy = False
        self.announce = announce
        self.doing: list[str] = []  # the phases entered and not left, innermost last
        self.case = ""  # the case being run, in words ("batch=100, 1 of 2")
        self.step = ""  # a step within the innermost phase (timing's "warm-up", "samples")
        self.estimate_s: float | None = None  # how long that step should take, where known

    def add(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    def _said(self) -> None:
        if self.announce is None:
            return
        phase = self.doing[-1] if self.doing else ""
        if self.step:
            phase = f"{phase}: {self.step}" if phase else self.step
        self.announce({"phase": phase, "case": self.case, "estimate_s": self.estimate_s})

    def now(self, step: str, estimate_s: float | None = None) -> None:
        """Say a step within the current phase (its time is the phase's, not counted apart)."""
        self.step, self.estimate_s = step, estimate_s
        self._said()

    @contextlib.contextmanager
    def saying(self, name: str) -> Iterator[None]:
        """NAME is what the worker does meanwhile (said, not timed apart)."""
        self.doing.append(name)
        self.step, self.estimate_s = "", None
        self._said()
        try:
            yield
        finally:
            self.doing.pop()
            self.step, self.estimate_s = "", None
            self._said()

    @contextlib.contextmanager
    def timing(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            with self.saying(name):
                yield
        finally:
            self.add(name, time.perf_counter() - started)


def phase(clock: PhaseClock | None, name: str) -> contextlib.AbstractContextManager[None]:
    """CLOCK's timing of NAME, or nothing where no clock is kept."""
    return clock.timing(name) if clock is not None else contextlib.nullcontext()


def phase_file_writer(path: Path) -> Announce:
    """An announcer that keeps PATH holding the worker's phase now, with the time it started
    (a rename over the old one: the parent never reads half a file). No fsync: a scratch file
    the parent polls, lost with the worker."""
    def write(said: dict[str, Any]) -> None:
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps({**said, "since": time.time()}))
            os.replace(temporary, path)
        except OSError:  # progress is never worth failing a cell over
            pass
    return write

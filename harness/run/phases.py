"""What a run is doing now, said while it runs: the phase, how long it has lasted, an estimate.

A phase is the parent's (the ceilings probe, the shared weights, the warm processes' start,
cell i of n) with, while a worker runs, the worker's own (its framework import, a case's
warm-up, calibration and samples, the check), read from the small file the worker keeps
(harness.run.phaseclock). Why: a Jacobian run of 464 s said nothing but "ETA -:--" in a
terminal, and nothing at all between "run folder:" and its end in a log.

In a terminal the phase is the progress bar's words (harness.run.progress) or a spinner line
(`showing`); elsewhere (a log, CI, nohup, a SLURM job's file) `PlainReporter` prints a plain
line when a phase has lasted SETTLE_S and at least every INTERVAL_S, never a control character.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TimeElapsedColumn
from rich.text import Text

# A plain line at least this often while a run goes on (a log's reader must never wait longer
# to learn what the run is doing), and one when a new phase has lasted SETTLE_S: a phase
# shorter than that (a remembered ceiling, a tiny cell) is said by the next line if at all.
INTERVAL_S = 15.0
SETTLE_S = 1.0
LINE_WIDTH = 100  # a plain line is cut to this


@dataclass
class Phase:
    """One phase of the parent: its words, when it started, how long it should take."""

    text: str
    started: float
    estimate_s: float | None = None


def worker_phase(path: Path | None, wall_now: float) -> str:
    """What the worker keeping PATH does now, in words ('batch=100 (1 of 2): timing: warm-up,
    12 s (~40 s)'); '' without a readable file."""
    if path is None:
        return ""
    try:
        said = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    if not isinstance(said, dict) or not said.get("phase"):
        return ""
    text = ": ".join(str(part) for part in (said.get("case"), said["phase"]) if part)
    since = said.get("since")
    timing = lasted(wall_now - since if isinstance(since, (int, float)) else None,
                    said.get("estimate_s"))
    return f"{text}, {timing}" if timing else text


def lasted(seconds: float | None, estimate_s: float | None) -> str:
    """'12 s', '12 s (~40 s)': how long a phase has lasted and the estimate where one exists."""
    if seconds is None:
        return ""
    text = whole_seconds(seconds)
    if isinstance(estimate_s, (int, float)) and estimate_s > 0:
        text += f" (~{whole_seconds(estimate_s)} expected)"
    return text


def whole_seconds(seconds: float) -> str:
    """'0.4 s', '12 s', '3 min 05 s': a progress line's time, to the second from 10 s on."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 600:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class PhaseBoard:
    """The run's phase now (thread-safe: the reporters read it from their own threads).

    `context`: words before every phase ('round 2 of 5'); `phase(...)`: a phase of the parent
    for the duration; `worker(path)`: the running worker's phase file (None when none runs).
    """

    def __init__(self, now: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self._now, self._wall = now, wall
        self._lock = threading.Lock()
        self._phases: list[Phase] = []
        self._worker: Path | None = None
        self.context = ""
        self.started = now()

    @contextlib.contextmanager
    def phase(self, text: str, estimate_s: float | None = None) -> Iterator[None]:
        with self._lock:
            self._phases.append(Phase(text, self._now(), estimate_s))
        try:
            yield
        finally:
            with self._lock:
                self._phases.pop()

    def enter(self, text: str, estimate_s: float | None = None) -> None:
        """Replace the innermost phase (a cell after the one before it), or begin one."""
        with self._lock:
            if self._phases:
                self._phases.pop()
            self._phases.append(Phase(text, self._now(), estimate_s))

    def worker(self, path: Path | None) -> None:
        with self._lock:
            self._worker = path

    def key(self) -> tuple[str, float] | None:
        """The innermost phase's words and start: what a reporter tells apart."""
        with self._lock:
            phase = self._phases[-1] if self._phases else None
        return None if phase is None else (phase.text, phase.started)

    def age(self) -> float:
        """Seconds since the innermost phase began (0 without one)."""
        key = self.key()
        return 0.0 if key is None else self._now() - key[1]

    def text(self) -> str:
        """'round 2 of 5, cell 3 of 8: torch cpu fp32, 45 s: n=1024 (1 of 2): timing:
        samples of 4 calls, 3.1 s (~5.0 s expected)'; '' before any phase."""
        with self._lock:
            phase = self._phases[-1] if self._phases else None
            worker = self._worker
        if phase is None:
            return ""
        words = ", ".join(part for part in (self.context, phase.text) if part)
        timing = lasted(self._now() - phase.started, phase.estimate_s)
        words = f"{words}, {timing}" if timing else words
        inside = worker_phase(worker, self._wall())
        return f"{words}: {inside}" if inside else words


def plain_line(board: PhaseBoard, elapsed_s: float, width: int = LINE_WIDTH) -> str:
    """A log's line: '[2:13] cell 3 of 8: ...', cut to WIDTH characters."""
    minutes, seconds = divmod(int(elapsed_s), 60)
    line = f"[{minutes}:{seconds:02d}] {board.text() or 'starting'}"
    return line if len(line) <= width else line[:width - 3] + "..."


class PlainReporter:
    """Prints the board's phase as plain lines from a thread of its own: when a new phase has
    lasted SETTLE_S, and whenever INTERVAL_S passed since the last line (a log, CI).
    SAY: where a line goes (one call per line, no newline)."""

    def __init__(self, board: PhaseBoard, say: Callable[[str], None],
                 interval_s: float = INTERVAL_S, settle_s: float = SETTLE_S,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.board, self.say = board, say
        self.interval_s, self.settle_s = interval_s, min(settle_s, interval_s)
        self._now = now
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="harness-phase", daemon=True)

    def __enter__(self) -> PlainReporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _loop(self) -> None:
        last_said, said_key = self._now(), None
        tick = min(0.25, self.settle_s / 2 or 0.25)
        while not self._stop.wait(min(tick, max(0.0, last_said + self.interval_s
                                                - self._now()))):
            key = self.board.key()
            now = self._now()
            fresh = key is not None and key != said_key and self.board.age() >= self.settle_s
            if fresh or now - last_said >= self.interval_s:
                self.say(plain_line(self.board, now - self.board.started))
                last_said, said_key = now, key


class PhaseColumn(ProgressColumn):
    """The board's phase as a progress bar's words (a terminal)."""

    def __init__(self, board: PhaseBoard) -> None:
        super().__init__()
        self.board = board

    def render(self, task: Task) -> Text:
        return Text(self.board.text() or str(task.description), overflow="ellipsis",
                    no_wrap=True)


class PhaseProgress(Progress):
    """A progress bar under a line of its own that says the board's phase (a terminal): the
    phase's words get the whole width, not what the bar's columns leave."""

    def __init__(self, board: PhaseBoard, *columns: str | ProgressColumn,
                 **options: Any) -> None:
        self.board = board  # first: rich's __init__ renders the display once
        super().__init__(*columns, **options)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield Text(self.board.text() or "starting", overflow="ellipsis", no_wrap=True)
        yield self.make_tasks_table(self.tasks)


@contextlib.contextmanager
def showing(board: PhaseBoard, console: Console, text: str,
            estimate_s: float | None = None) -> Iterator[None]:
    """TEXT as the board's phase for the duration; in a terminal, a spinner line with it and
    the time so far (gone after). Without a terminal the run's PlainReporter says it."""
    with board.phase(text, estimate_s):
        if not console.is_terminal:
            yield
            return
        with Progress(SpinnerColumn(), PhaseColumn(board), TimeElapsedColumn(),
                      console=console, transient=True) as spinner:
            spinner.add_task(text, total=None)
            yield


def reporting(board: PhaseBoard, console: Console,
              interval_s: float | None = None) -> contextlib.AbstractContextManager[object]:
    """The run's plain reporter where CONSOLE is no terminal (its lines through CONSOLE, no
    markup); nothing in a terminal, whose bar and spinners show the board. INTERVAL_S: the
    longest silence (default INTERVAL_S, read when called: a test sets the module's)."""
    if console.is_terminal:
        return contextlib.nullcontext()

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    return PlainReporter(board, say, INTERVAL_S if interval_s is None else interval_s)

"""The progress bar's ETA: the mean time of the cells already done times the cells left.

Why not rich's TimeRemainingColumn: it estimates speed from the last 30 s only, and a cell
usually takes longer than that, so it would show no estimate for most of a run.
"""

from __future__ import annotations

from rich.progress import ProgressColumn, Task
from rich.text import Text


def eta_seconds(elapsed: float | None, completed: float, total: float | None) -> float | None:
    """Seconds left, or None until the first cell has finished."""
    if not elapsed or completed <= 0 or total is None:
        return None
    return elapsed / completed * max(total - completed, 0.0)


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA -:--"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"ETA {hours}:{minutes:02d}:{secs:02d}" if hours else f"ETA {minutes}:{secs:02d}"


class CellEtaColumn(ProgressColumn):
    """Shows the estimated time left, from the cells already done."""

    def render(self, task: Task) -> Text:
        return Text(format_eta(eta_seconds(task.elapsed, task.completed, task.total)),
                    style="progress.remaining")

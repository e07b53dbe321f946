"""One run folder's report drawn for a caller that goes on either way: `harness compare`,
`harness advise` and harness.compare.

Beside the front doors, not in harness.api: a run never needs its report (it stores its
predictions itself when it ends, harness.api._finish), so the run's facade imports nothing
from the report, and the front doors that want pictures ask for them here. The report package
is imported only when a report is drawn, so the CLI starts without it.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.analysis.verdictline import VerdictLine
from harness.core.interrupt import EXIT_SIGNAL_BASE
from harness.run.progress import console as progress_console

# The measurements are saved but the report could not be written (disk full, permissions).
EXIT_REPORT_FAILED = 3


@dataclass(frozen=True)
class ReportOutcome:
    """What drawing a run's report gave: its files, or one line saying why there are none."""

    written: list[Path]
    failure: str = ""
    exit_code: int = 0  # EXIT_REPORT_FAILED, or 130 when Ctrl-C stopped the drawing
    # The verdict lines computed with the report (harness.report.summary.terminal_verdicts):
    # the CLI prints them rather than building the report's context a second time.
    verdicts: list[VerdictLine] = field(default_factory=list)
    seconds: float = 0.0  # drawing it took (the CLI's whole-command line)


def draw_run_report(run_dir: Path) -> ReportOutcome:
    """Draw the run's report into its folder; a failure is printed and returned, not raised.

    It writes no run.json: the run stored its predictions when it ended.

    A drawing failure (disk full, no permission, a bug) never costs the measurements, which
    are already on disk; the CLI exits with the outcome's code so scripts can tell.
    """
    started = time.perf_counter()
    try:
        # Looked up when called, so a test can stand in for the drawing (a full disk).
        from harness import report

        drawn = report.draw_report([run_dir], run_dir, html=True)
        progress_console.print(f"report: {len(drawn.written)} files in {run_dir}")
        return ReportOutcome(drawn.written, verdicts=drawn.verdicts,
                             seconds=time.perf_counter() - started)
    except KeyboardInterrupt:  # the results are complete; only the pictures are missing
        outcome = ReportOutcome([], f"report interrupted; results are in {run_dir}",
                                EXIT_SIGNAL_BASE + signal.SIGINT.value)
    except Exception as exc:  # noqa: BLE001 - the results are already safe on disk
        outcome = ReportOutcome([], f"report failed ({type(exc).__name__}: "
                                    f"{' '.join(str(exc).split())}); results are in {run_dir}",
                                EXIT_REPORT_FAILED)
    progress_console.print(outcome.failure, markup=False, highlight=False, soft_wrap=True)
    return replace(outcome, seconds=time.perf_counter() - started)

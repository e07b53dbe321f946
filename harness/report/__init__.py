"""Reports: a context built once from the stored runs, then one view per thing shown.

render_report reads run folders (CSV and JSON only, through harness.report.load), prepares them
once into a context (harness.report.context: experiments, case stats, cells, headline sizes,
hints, ceilings), asks every applicable view (harness/report/views/) for its table, draws the
non-empty ones, and assembles summary.md from the views' lines in their fixed order
(summary.py). Several runs merge into one report, each series labelled with its machine; runs
of one workload whose parameters differ are kept apart.
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from harness.analysis.crossover import crossovers, experiment_predictions
from harness.analysis.verdictline import VerdictLine
from harness.data.store import StoreError
from harness.measure import envinfo
from harness.report import style
from harness.report.context import ExperimentContext, ReportContext, build_context
from harness.report.figure import FIGURES_FILE, SUMMARY_FILE, write_figures
from harness.report.html import write_html_report
from harness.report.load import load_runs
from harness.report.summary import Shown, render_summary, terminal_verdicts
from harness.report.tensorboard import export_scalars, scalar_series
from harness.report.views import EXPERIMENT, REPORT, View, registered
from harness.report.views.epochs import epoch_times


@dataclass(frozen=True)
class DrawnReport:
    """A drawn report: the files written, and the verdicts `harness compare` prints, taken from
    the same context and views (the report is computed once)."""

    written: list[Path]
    verdicts: list[VerdictLine] = field(default_factory=list)


def render_report(run_dirs: list[Path], out_dir: Path,
                  tensorboard_dir: Path | None = None, html: bool = False) -> list[Path]:
    """Write the views' PNGs and summary.md into out_dir; return their paths.

    Raises harness.data.store.StoreError when a folder is not a readable harness run.
    """
    return draw_report(run_dirs, out_dir, tensorboard_dir, html).written


def draw_report(run_dirs: list[Path], out_dir: Path, tensorboard_dir: Path | None = None,
                html: bool = False) -> DrawnReport:
    """render_report, keeping the terminal's verdicts computed from the same views."""
    if not run_dirs:
        raise StoreError("no run folders given")
    context = read_context(run_dirs)
    style.use_private_matplotlib_config()  # before any view draws
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    views = registered()
    shown = {experiment.name: show(views, EXPERIMENT, experiment, out_dir)
             for experiment in context.experiments}
    report_shown = show(views, REPORT, context, out_dir)
    notes = list(context.notes)
    if tensorboard_dir is not None:
        notes.append(_tensorboard(context.experiments, Path(tensorboard_dir)))
    summary_path = out_dir / SUMMARY_FILE
    text, printed = render_summary(context, shown, report_shown, notes, out_dir)
    summary_path.write_text(text)
    figures_path = write_figures(out_dir / FIGURES_FILE, printed)
    html_files = [write_html_report(summary_path)] if html else []
    figures = [path for items in [*shown.values(), report_shown] for item in items
               for path in item.figures]
    return DrawnReport([*figures, summary_path, figures_path, *html_files],
                       terminal_verdicts(context, shown, out_dir))


def folder_predictions(run_dir: Path) -> list[dict[str, Any]]:
    """The predicted crossovers of one stored run, as run.json stores them; nothing drawn.

    The same context and the same analysis (harness.analysis.crossover) the crossover view
    phrases, so what a run stores when it ends is what its report says, whichever command
    draws it and wherever. Of this run alone: a report merging runs stores nothing.
    """
    context = read_context([run_dir])
    return [record for experiment in context.experiments
            for record in experiment_predictions(
                experiment.name, crossovers(experiment.stats, experiment.hints))]


def show(views: list[View], scope: str, context: ExperimentContext | ReportContext,
         out_dir: Path, draw: bool = True) -> list[Shown]:
    """Every applicable view of this scope: its table, and its figures where it has rows
    (none drawn when DRAW is false: only the lines are wanted)."""
    computed = [(view, view.compute(context)) for view in views
                if view.scope == scope and view.applies(context)]
    to_draw = [(view, table) for view, table in computed if draw and not table.empty]
    drawn = dict(zip([id(view) for view, _ in to_draw],
                     _draw_all([(view, table, context, out_dir) for view, table in to_draw]),
                     strict=True))
    return [Shown(view, table, drawn.get(id(view), [])) for view, table in computed]


# Drawing is most of a report's time (a small CNN run's report under cProfile, 2-core VM:
# 8.6 s, the views 7.8 s of it, savefig 3.5 s) and the figures are independent: each in a forked
# process where the machine has the cores. Forked, so nothing is serialised on the way in (the
# job, its table and context are the child's own inherited memory, handed to it as the fork's
# arguments) and the parent never imported a framework to fork with.
MIN_FIGURES_TO_FORK = 3
# One figure to draw: (view, its table, its context, the folder its PNGs go to).
DrawJob = tuple[Any, Any, Any, Path]


def _draw_all(jobs: list[DrawJob]) -> list[list[Path]]:
    """Each job's figures, drawn in parallel processes where that can help, else in turn."""
    workers = min(len(jobs), envinfo.usable_cores())
    if workers < 2 or len(jobs) < MIN_FIGURES_TO_FORK or "fork" not in \
            multiprocessing.get_all_start_methods():
        return [_draw(job) for job in jobs]
    return _draw_forked(jobs, workers)


def _draw(job: DrawJob) -> list[Path]:
    view, table, context, out_dir = job
    return list(view.draw(table, context, out_dir))


def _draw_forked(jobs: list[DrawJob], workers: int) -> list[list[Path]]:
    """Each job drawn in a process forked for it, at most WORKERS at once; only the paths of
    its figures come back, through a pipe. A job that fails raises here, as drawn in turn."""
    fork = multiprocessing.get_context("fork")
    warm_drawing()
    drawn: dict[int, list[Path]] = {}
    running: dict[Connection, tuple[int, BaseProcess]] = {}
    waiting = list(enumerate(jobs))[::-1]
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                index, job = waiting.pop()
                receiving, sending = fork.Pipe(duplex=False)
                child = fork.Process(target=_draw_into, args=(job, sending))
                child.start()
                sending.close()  # the child's end: EOF here once the child is gone
                running[receiving] = (index, child)
            for ready in wait(list(running)):
                assert isinstance(ready, Connection)
                index, finished = running.pop(ready)
                drawn[index] = _received(ready, finished)
    finally:
        for receiving, (_, left) in running.items():  # left over after a failed job
            left.terminate()
            left.join()
            receiving.close()
    return [drawn[index] for index in range(len(jobs))]


def warm_drawing() -> None:
    """Import what the views draw with and draw one small figure, here, before forking.

    Why: a view imports pyplot and seaborn and matplotlib loads its fonts only when a figure is
    drawn, so every forked drawer paid them again (the suite's docs-run report: 23 s of CPU
    in its drawers, 12.5 s once its process had drawn one figure first). A fork inherits them.
    """
    import io

    import matplotlib.pyplot as plt
    import seaborn  # noqa: F401 - imported for the forks to inherit

    figure, axes = plt.subplots(figsize=(1, 1))
    axes.plot([1, 10], [1, 10], label="warm")
    axes.set_yscale("log")
    axes.set_title("warm")
    axes.legend()
    figure.savefig(io.BytesIO(), format="png")
    plt.close(figure)


def _received(receiving: Connection, process: BaseProcess) -> list[Path]:
    """What a drawing child sent: its figures' paths, or its exception, raised here."""
    try:
        outcome = receiving.recv()
    except EOFError:
        outcome = RuntimeError(f"a figure's drawing process ended without an answer "
                               f"(exit code {process.exitcode})")
    finally:
        receiving.close()
    process.join()
    if isinstance(outcome, BaseException):
        raise outcome
    return list(outcome)


def _draw_into(job: DrawJob, sending: Connection) -> None:
    """In the forked child: draw JOB and send its figures' paths, or why it failed."""
    try:
        sending.send(_draw(job))
    except Exception as exc:  # noqa: BLE001 - raised again in the parent (_received)
        try:
            sending.send(exc)
        except Exception:  # noqa: BLE001 - an exception the pipe cannot carry: its text
            sending.send(RuntimeError(f"{type(exc).__name__}: {exc}"))
    finally:
        sending.close()


def read_context(run_dirs: list[Path]) -> ReportContext:
    """The runs read and prepared once; each framework drawn in the colour its run stored ('':
    a palette colour)."""
    run_set = load_runs([Path(run_dir) for run_dir in run_dirs])
    colors: dict[str, str] = {}
    for document in run_set.documents:
        for name in [*document.frameworks, *document.cell_frameworks()]:
            colors.setdefault(name, document.framework_color(name))
    return build_context(run_set, colors)


def _tensorboard(experiments: list[ExperimentContext], log_dir: Path) -> str:
    series = [item for experiment in experiments
              for item in scalar_series(experiment.stats,
                                        epoch_times(experiment.rows, experiment.headline))]
    return export_scalars(series, log_dir)


def verdicts_without_drawing(run_dirs: list[Path]) -> list[VerdictLine]:
    """The verdict lines `harness compare` ends with (summary.terminal_verdicts) when no report
    is drawn (--no-report): the same context and views summary.md is assembled from, with
    nothing drawn."""
    run_dirs = [Path(run_dir) for run_dir in run_dirs]
    context = read_context(run_dirs)
    views = registered()
    shown = {experiment.name: show(views, EXPERIMENT, experiment, run_dirs[0], draw=False)
             for experiment in context.experiments}
    return terminal_verdicts(context, shown, run_dirs[0])

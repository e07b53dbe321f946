"""The report's views: one module per thing the report shows, each behind the same small interface.

A view computes its table first (pure pandas, from the report context; no files), then draws it
and phrases it. render_report asks every applicable view for its table, skips the empty ones,
draws, and assembles summary.md from the views' lines in the fixed order of `View.order`.
Benchopt's plot classes are the model: a class with a name, `compute`, and the drawing apart.

Adding a view is adding one module to this folder with a `View` subclass in it: the registry
below finds it by discovery. A workload asks for an optional view by its name in
`WorkloadSpec.report.views`, with the labels the view uses in
`WorkloadSpec.report.view_labels[name]`.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.verdictline import VerdictLine

# Where a view's lines go in summary.md.
EXPERIMENT = "experiment"  # one table per experiment, its lines inside the experiment's section
REPORT = "report"  # one table for the whole report, its own `## heading` after the experiments


class View:
    """One thing the report shows: a table computed from the context, then a figure and lines.

    Subclasses set the class attributes and override `compute`, and `draw` / `markdown` /
    `glance` where they draw or say something. `context` is an ExperimentContext for
    experiment-scope views and the ReportContext for report-scope ones (harness.report.context).
    """

    name: str = ""  # what WorkloadSpec.report.views names; unique
    order: int = 0  # place in summary.md (and among the figures of an experiment)
    scope: str = EXPERIMENT
    # An optional view runs only where the workload declares it in WorkloadSpec.report.views.
    optional: bool = False
    # Set for an experiment-scope view whose lines go under their own `## heading` after every
    # experiment section (one subsection per experiment) rather than inside each section.
    heading: str = ""
    # Alt text of the figure an experiment-scope view draws, linked at the top of the section.
    caption: str = ""

    def applies(self, context: Any) -> bool:
        """Whether this view runs for this context: always, or where the workload declares it."""
        return not self.optional or self.name in context.views

    def compute(self, context: Any) -> pd.DataFrame:
        """The view's table; an empty table means there is nothing to show (the view is skipped)."""
        raise NotImplementedError

    def when_empty(self, context: Any) -> list[str]:
        """summary.md lines for an empty table; none by default: the view is skipped."""
        return []

    def draw(self, table: pd.DataFrame, context: Any, out_dir: Path) -> list[Path]:
        """Write the view's figures into out_dir; return their paths (none by default)."""
        return []

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        """summary.md lines for this table (none by default)."""
        return []

    def glance(self, table: pd.DataFrame, context: Any) -> list[str]:
        """Sentences for the report's "At a glance" list (none by default)."""
        return []

    def verdict(self, table: pd.DataFrame, context: Any) -> list[str]:
        """The terminal's verdict lines (`harness compare`): the glance sentences, unless the
        view words them shorter (each must fit two lines at 100 columns)."""
        return self.glance(table, context)

    def verdict_lines(self, table: pd.DataFrame, context: Any) -> list[VerdictLine]:
        """The verdict lines with what each answers (Topic.ANSWER unless the view says)."""
        return [VerdictLine(line) for line in self.verdict(table, context)]

    def caption_of(self, table: pd.DataFrame) -> str:
        """The caption of this run's figure: `caption` unless what was drawn says otherwise."""
        return self.caption


def drawn(*paths: Path | None) -> list[Path]:
    """The figures a view drew (a figure function returns None where it had nothing to draw)."""
    return [path for path in paths if path is not None]


def figure_links(caption: str, paths: list[Path], out_dir: Path) -> list[str]:
    """summary.md's lines that show each figure of PATHS under CAPTION."""
    return [line for path in paths for line in (f"![{caption}]({figure_link(path, out_dir)})", "")]


def figure_link(path: Path, out_dir: Path) -> str:
    """A figure's path as summary.md links it: relative to the report's folder where it lies
    inside it, else as it is."""
    try:
        return path.relative_to(out_dir).as_posix()
    except ValueError:
        return path.as_posix()


def registered() -> list[View]:
    """One instance of every View subclass defined in this folder's modules, in `order`."""
    found: dict[str, View] = {}
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, View) and value is not View
                    and value.__module__ == module.__name__ and value.name):
                if value.name in found:
                    raise ValueError(f"two report views are named {value.name!r}")
                found[value.name] = value()
    return sorted(found.values(), key=lambda view: (view.order, view.name))

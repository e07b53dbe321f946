"""summary.md: assembled from the views' lines in a fixed order, with the PNGs embedded.

The reader's question is "when does the GPU win, why not here, and which framework should I
pick?", so the report opens with the runs, the machines and one line per experiment at a
glance; then each experiment's section (its figures first, then each view's lines in view
order, warnings last); then the parts that span experiments (measured time, memory, scaling).
Every number comes from a view's table; this module only places the views' lines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.memoryfit import method_lines as memory_method_lines
from harness.analysis.memoryfit import terminal_lines as memory_terminal_lines
from harness.analysis.noise import ONE_ROUND
from harness.analysis.stats import overhead_line, run_overhead
from harness.analysis.verdictline import Topic, VerdictLine
from harness.core.units import format_size
from harness.report.figure import Figure, Line, carried, placed
from harness.report.views import figure_links


@dataclass(frozen=True)
class Shown:
    """One view's output for one context: its table and the figures drawn from it."""

    view: Any  # a harness.report.views.View
    table: pd.DataFrame
    figures: list[Path]

    def lines(self, context: Any, out_dir: Path) -> list[str]:
        """The view's lines, or what it says when its table is empty."""
        if self.table.empty:
            return self.view.when_empty(context)
        return self.view.markdown(self.table, context, self.figures, out_dir)


def markdown_table(headers: list[str], rows: list[list[Any]],
                   records: list[list[Figure]] | None = None) -> list[str]:
    """A markdown table; RECORDS, where given, the figure records each row prints."""
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")
    lines: list[str] = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for index, row in enumerate(rows):
        text = "| " + " | ".join(cell(value) for value in row) + " |"
        lines.append(Line(text, records[index]) if records is not None else text)
    return lines + [""]


def size_phrase(context: Any, size: str) -> str:
    """' at n=4096': where a verdict applies ('' for a case outside the sweep)."""
    return f" at {context.sweep}={format_size(size, context.sweep)}" if size else ""


def size_cell(label: str, sweep: str) -> str:
    """A size as a table cell prints it ('-' for a case outside the sweep)."""
    return format_size(label, sweep) if label else "-"


def render_summary(context: Any, shown: dict[str, list[Shown]], report_shown: list[Shown],
                   notes: list[str], out_dir: Path) -> tuple[str, list[Figure]]:
    """summary.md's text and the figure records it prints, each with its line: `shown` holds
    each experiment's views, `report_shown` the report's."""
    lines = ["# Benchmark report", ""]
    lines += _runs_section(context.runs, context.documents)
    lines += _machines_section(context.runs, context.experiments)
    lines += _glance_section(context.experiments, shown)
    # Right under the glance: on a run without a GPU cell, the GPU's side of its answer.
    lines += _predicted_section(context.documents)
    if notes:
        lines += ["## Notes on the data", ""] + [f"- {note}" for note in notes] + [""]
    for experiment in context.experiments:
        lines += _experiment_section(experiment, shown[experiment.name], out_dir)
    text = "\n".join(lines).rstrip() + "\n"
    for heading, part in _parts(context, shown, report_shown, out_dir):
        text = text.rstrip() + "\n\n" + "\n".join([f"## {heading}", "", *part]) + "\n"
        lines += part
    return text, placed(text, lines)


def _predicted_section(documents: list[Any]) -> list[str]:
    """A CPU-only run's GPU step predicted from its features (harness.predict.answer: the
    terminal's lines), each line with its figure records."""
    from harness.predict.ranking import summary_entries

    lines: list[str] = []
    for heading, entries in summary_entries(documents):
        lines += [heading, ""]
        lines += [Line(f"- {text}", [Figure(item.family, item.name, item.value, item.unit,
                                            item.text, item.subject) for item in figures])
                  for text, figures in entries]
        lines.append("")
    return ["## GPU step predicted (no GPU measured)", "", *lines] if lines else []


def _parts(context: Any, shown: dict[str, list[Shown]], report_shown: list[Shown],
           out_dir: Path) -> list[tuple[str, list[str]]]:
    """(heading, lines) of every view with a part of its own, in view order; empty ones left out.

    An experiment-scope view with a heading gives one subsection per experiment; a report-scope
    view gives its lines once.
    """
    by_view: dict[str, tuple[Any, list[str]]] = {}
    for experiment in context.experiments:
        for item in shown[experiment.name]:
            if item.view.heading:
                _view, lines = by_view.setdefault(item.view.name, (item.view, []))
                lines += item.lines(experiment, out_dir)
    for item in report_shown:
        by_view[item.view.name] = (item.view, item.lines(context, out_dir))
    ordered = sorted(by_view.values(), key=lambda pair: (pair[0].order, pair[0].name))
    return [(view.heading or view.name, lines) for view, lines in ordered if lines]


def _when(timestamp: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(timestamp)))
    except (TypeError, ValueError, OverflowError):
        return "unknown time"


def _runs_section(runs: pd.DataFrame, documents: list[Any]) -> list[str]:
    lines = [f"Drawn from {len(runs)} stored run(s), re-rendered from their CSV/JSON alone:", ""]
    by_id = {document.run_id: document for document in documents}
    for _, run in runs.iterrows():
        flags = " (quick)" if run["quick"] else ""
        state = run_state(run)
        flags += f"; {state}" if state else ""
        lines.append(f"- `{run['run_id']}`: {run['workload']} on {run['machine']}, "
                     f"{_when(run['started'])}{flags}; command `{run['command'] or '-'}`")
        lines += [f"  - {run[name]}" for name in ("rounds_line", "quick_line")
                  if isinstance(run.get(name), str) and run.get(name)]
        document = by_id.get(run["run_id"])
        if document is not None and (overhead := overhead_line(document)):
            lines.append(Line(f"  - {overhead}", overhead_figures(document)))
    return lines + [""]


# The run's own cost (family OVERHEAD_FAMILY, harness.audit.overhead), each figure as the
# overhead line prints it (harness.analysis.stats.overhead_line): its subject is the run.
OVERHEAD_FAMILY = "harness overhead"
OVERHEAD = OVERHEAD_FAMILY  # the run's wall time outside the timed calls
RUN_WALL, TIMED, WORKERS = (f"{OVERHEAD_FAMILY}: {name}" for name in (
    "run wall time", "inside the timed calls", "worker processes"))


def overhead_figures(document: Any) -> list[Figure]:
    overhead = run_overhead(document)
    if overhead is None:
        return []
    subject = {"run": document.run_id}
    seconds = [(RUN_WALL, overhead.wall_s), (TIMED, overhead.timed_s),
               (OVERHEAD, overhead.wall_s - overhead.timed_s)]
    return [*(Figure(OVERHEAD_FAMILY, name, value, "s", f"{value:.1f} s", subject)
              for name, value in seconds),
            Figure(OVERHEAD_FAMILY, WORKERS, overhead.workers, "workers",
                   f"{overhead.workers} worker process", subject)]


def run_state(run: pd.Series) -> str:
    """Why a run's cells may be incomplete, in words; '' for a run that ran to its end."""
    if run["interrupted"]:
        by = f" by {run['interrupted_by']}" if run.get("interrupted_by") else ""
        return (f"run `{run['run_id']}` was interrupted{by}: the cell it was running is marked "
                "interrupted and the cells after it never ran")
    if not _has_end_time(run.get("finished")):
        return (f"run `{run['run_id']}` did not finish (no end time): its cells may be "
                "incomplete (the harness was killed, or is still running)")
    return ""


def _has_end_time(finished: Any) -> bool:
    """A number; pandas turns a missing end time into NaN when other runs have one."""
    return isinstance(finished, (int, float)) and not pd.isna(finished)


def _machines_section(runs: pd.DataFrame, experiments: list[Any]) -> list[str]:
    lines = ["## Machines", ""]
    rows = []
    for machine, group in runs.groupby("machine", sort=False):
        host = group["host"].iloc[0] or {}
        memory = host.get("memory_bytes")
        versions = _versions(experiments, machine)
        rows.append([machine, host.get("cpu_model") or "-", host.get("cores") or "-",
                     f"{memory / 2**30:.0f} GiB" if isinstance(memory, (int, float)) else "-",
                     ", ".join(host.get("gpus") or []) or "none",
                     host.get("python") or "-", versions or "-"])
    lines += markdown_table(["machine", "CPU", "cores", "memory", "GPUs", "python",
                             "framework versions"], rows)
    return lines


def _versions(experiments: list[Any], machine: str) -> str:
    found: dict[str, str] = {}
    for experiment in experiments:
        cells = experiment.cells[experiment.cells["machine"] == machine]
        for framework, version in zip(cells["framework"], cells["framework_version"]):
            if version and framework not in found:
                found[framework] = version
    return ", ".join(f"{name} {version}" for name, version in found.items())


# --- at a glance ------------------------------------------------------------------------------

def _glance_section(experiments: list[Any], shown: dict[str, list[Shown]]) -> list[str]:
    """Every view's "At a glance" sentences per experiment, in view order."""
    lines = ["## At a glance", ""]
    for experiment in experiments:
        sentences = [sentence for item in shown[experiment.name] if not item.table.empty
                     for sentence in item.view.glance(item.table, experiment)]
        lines += [carried(f"- **{experiment.name}**: {sentence}", sentence)
                  for sentence in sentences or ["no valid measurement"]]
    return lines + [""]


# --- one experiment ---------------------------------------------------------------------------

def _experiment_section(experiment: Any, shown: list[Shown], out_dir: Path) -> list[str]:
    lines = [f"## {experiment.name}", ""]
    call = experiment.call_name
    shared = call not in ("epoch", "call")  # rounds shared the planned epoch out
    lines += [carried(
        f"Parameters{' (as planned)' if shared else ''}: {_params_text(experiment)}. "
        f"Times are medians per {experiment.unit}"
        + (f" (the time of a {call}, or of a timed block of its steps, / its steps)"
           if experiment.unit == "step" else "")
        + (f". One timed call is one {call}: the rounds shared the planned epochs out, "
           "each worker timing its share" if shared else "")
        + "; the first (cold) call is kept apart.", call), ""]
    if experiment.cells.empty:
        return lines + [("No cell results are stored for this experiment (the run may have "
                         "been interrupted before any cell finished)."), ""]
    in_section = [item for item in shown if not item.view.heading]
    for item in in_section:
        caption = item.view.caption_of(item.table) or item.view.name
        lines += figure_links(f"{experiment.name}: {caption}", item.figures, out_dir)
    for item in in_section:
        lines += item.lines(experiment, out_dir)
    return lines


def _params_text(experiment: Any) -> str:
    parts = []
    for name, value in experiment.params.items():
        shown = "x".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        if name == experiment.sweep and isinstance(value, list):
            shown = ", ".join(format_size(v, experiment.sweep) for v in value)
            name = f"{name} (swept)"
        parts.append(f"{name}={shown if shown != '' else '(default)'}")
    return "; ".join(parts) or "none recorded"



# --- the verdicts for the terminal ------------------------------------------------------------

# What a verdict line taken from a view's bullets says it is: the warnings view's follow the
# verdicts, each said to be a warning (Topic.WARNING; the other views' lines are typed by
# their own verdict_lines).
BULLET_LABELS = {"warnings": "warning: "}


def terminal_verdicts(context: Any, shown: dict[str, list[Shown]],
                      out_dir: Path) -> list[VerdictLine]:
    """summary.md's answer in plain lines, for the end of `harness compare`.

    Per experiment: the views' verdict lines (GPU vs CPU per machine, the fastest cell, the
    ranking per device), then the warnings' bullets, then the memory fits: the figures summary.md
    writes from the same context, in a form that fits two lines at 100 columns. What a line
    would repeat is said once: the machine, where the experiment ran on one, in its heading;
    that one round measured no run-to-run drift, in the rounds line after the table; how a
    memory figure was measured, in summary.md and details_lines (--details). Each line says
    what it answers (harness.analysis.verdictline.Topic).
    """
    lines: list[VerdictLine] = []
    for experiment in context.experiments:
        machines = list(dict.fromkeys(experiment.runs["machine"]))
        machine = machines[0] if len(machines) == 1 else ""
        lines.append(VerdictLine(f"{experiment.name}{f' on {machine}' if machine else ''}:",
                                 Topic.HEADING))
        if experiment.cells.empty:
            lines.append(VerdictLine("  no cell results stored (interrupted before any cell "
                                     "finished)"))
            continue
        lines += [line.retold(f"  {_terminal_text(line.text, machine)}")
                  for line in _experiment_verdicts(context, experiment, shown, out_dir)]
    return lines


def _experiment_verdicts(context: Any, experiment: Any, shown: dict[str, list[Shown]],
                         out_dir: Path) -> list[VerdictLine]:
    """One experiment's verdict lines, in view order, then its memory fits."""
    items = shown[experiment.name]
    lines = [line for item in items if not item.table.empty
             for line in item.view.verdict_lines(item.table, experiment)] or [
                 VerdictLine("no valid measurement")]
    for item in items:
        label = BULLET_LABELS.get(item.view.name)
        if label is None:
            continue
        # No warnings, no line: the verdict says what was measured, and the warnings block
        # after the table says "warnings: none" (harness.commands.epilogue.print_warnings).
        lines += [VerdictLine(f"{label}{_plain(line)}", Topic.WARNING)
                  for line in item.lines(experiment, out_dir) if line.startswith("- ")]
    run_ids = set(experiment.runs["run_id"])
    return lines + [VerdictLine(f"memory: {line}", Topic.MEMORY) for document in
                    context.documents if document.run_id in run_ids
                    for line in memory_terminal_lines(document)]


def _terminal_text(line: str, machine: str) -> str:
    """A verdict line without what the terminal says once elsewhere: the MACHINE (named in the
    experiment's heading; '' where it ran on several) and the one-round clause."""
    if machine:
        line = line.replace(f" on {machine}", "").replace(f": {machine}, ", ": ")
    return line.replace(f" ({ONE_ROUND})", "").replace(f"; {ONE_ROUND}", "")


def details_lines(documents: list[Any]) -> list[str]:
    """How the verdicts' energy and memory figures were measured, for `--details`: what every
    cell shares said once per run, then each cell's own (harness.report.views.energy,
    harness.analysis.memoryfit)."""
    from harness.report.views.energy import energy_method_lines

    return [line for document in documents
            for line in [*energy_method_lines(document), *memory_method_lines(document)]]


def _plain(markdown_bullet: str) -> str:
    """A summary.md bullet as terminal text: no leading '- ', no bold, no code marks."""
    return markdown_bullet.removeprefix("- ").replace("**", "").replace("`", "")

"""The `harness` command line: compare, advise, list, env, report, export, diff, check.

Never imports a framework: everything framework-specific runs in worker processes.
Bad input is one line on stderr and exit code 2 (so is `diff` of runs that share no case); a
failed cell is exit code 1 with every result still written; a report that cannot be written
after the measurements were saved is exit code 3 with its one-line reason; a run that measured
nothing (every cell unavailable) is exit code 4 with a line saying why; Ctrl-C, SIGTERM and
SIGHUP save what finished, stop the running worker and exit 128 + the signal's number (130,
143, 129), naming the `--resume` command that runs the rest.

This module declares the app and its commands; their bodies, the options compare and advise
share, the tables and what a run prints after its cells live in harness/commands/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from harness import api
from harness.commands.advise import run_advise
from harness.commands.compare import run_compare
from harness.commands.inputs import fail_input, fail_write
from harness.commands.options import CommandOptions, CompareOptions, ExecutorOptions, takes_options
from harness.commands.output import console, errors
from harness.core import registry
from harness.core.settings import Settings
from harness.data import store
from harness.predict.command import profile_device
from harness.run.plan import check_writable
from harness.spec import BadInput

app = typer.Typer(
    help="Run the same workloads in every installed framework (torch, TensorFlow, JAX, Keras 3, "
         "numpy, plugins) on CPU and GPU, timed honestly.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.command("compare")
@takes_options("compare")
def compare_command(options: CommandOptions, choices: CompareOptions,
                    where: ExecutorOptions) -> None:
    """Run WORKLOAD for every framework x device cell, each in its own process."""
    run_compare(options, choices, where)


@app.command("advise")
@takes_options("advise")
def advise_command(
    options: CommandOptions,
    budget: Annotated[float, typer.Option(
        help="Seconds for the whole run, from its start: the fixes the diagnosis points at "
             "first, as many as fit (0: no limit, every fix).")] = 180.0,
) -> None:
    """What to change: each candidate fix measured beside the as-written cell, ranked."""
    run_advise(options, budget)


@app.command("list")
def list_workloads(model: Annotated[Optional[Path], typer.Option(
        help="Show what the harness understood of this model file instead.")] = None) -> None:
    """Workloads, their variants and parameters (default / --quick)."""
    from harness.listing import listing_lines
    from harness.run.context import RunContext
    from harness.run.runner import ChildRunner
    from harness.terminal import wrapped

    if model is None:
        lines = listing_lines()
    else:
        try:
            described = registry.model_plugin("describe").model_lines(
                model, ChildRunner(RunContext.from_environment()))
        except BadInput as exc:
            fail_input(str(exc))
        lines = [part for line in described
                 for part in wrapped(line.lstrip(), indent=len(line) - len(line.lstrip()))]
    for line in lines:  # fitted to $COLUMNS where set; piped without it, one line each
        print(line)


@app.command()
def env(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Host, frameworks (installed, version, devices, threads), each as its probe answers."""
    from harness.envreport import print_env

    print_env(lambda line: print(line, flush=True), as_json)


@app.command()
def report(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run folders to merge.")],
    out: Annotated[Optional[Path], typer.Option(
        help="Output folder (default: the first run's).")] = None,
    tensorboard: Annotated[Optional[Path], typer.Option(
        help="Also write TensorBoard scalars to this folder.")] = None,
    html: Annotated[bool, typer.Option(
        "--html", help="Also write report.html: one self-contained page.")] = False,
) -> None:
    """Re-draw the report (PNGs and summary.md) from stored runs alone."""
    from harness.report import render_report

    try:
        for run_dir in run_dirs:
            store.read_run(run_dir)
        target = out or run_dirs[0]
        check_writable(target)
    except (store.StoreError, BadInput) as exc:
        fail_input(str(exc))
    try:
        written = render_report(run_dirs, target, tensorboard_dir=tensorboard, html=html)
    except store.StoreError as exc:
        fail_input(str(exc))
    except OSError as exc:  # a full disk, a folder gone read-only: the runs are untouched
        fail_write(f"{target}: cannot write the report ({exc.strerror or exc}); the run "
                   "folders read are untouched")
    for path in written:
        console.print(str(path))


@app.command()
def export(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run folders to merge.")],
    fmt: Annotated[str, typer.Option("--format", help="parquet, csv or json.")] = "csv",
    out: Annotated[Optional[Path], typer.Option(
        help="File to write (atomically); csv and json go to stdout without it.")] = None,
) -> None:
    """Merge the measurements of several runs into one typed table (one row per sample)."""
    from harness.data.export import ExportError, export_runs

    try:
        data, rows = export_runs(run_dirs, fmt, out)
    except (ExportError, store.StoreError) as exc:
        fail_input(str(exc))
    except OSError as exc:  # written atomically: a full disk leaves no part of a file
        fail_write(f"--out {out}: cannot write ({exc.strerror or exc}); nothing written")
    if data is not None:  # text formats only: Parquet always goes to --out
        typer.echo(data.decode(), nl=False)
    else:
        errors.print(f"{rows} rows from {len(run_dirs)} run(s) -> {out}")


@app.command()
def diff(
    run_a: Annotated[Path, typer.Argument(help="The baseline run folder (A).")],
    run_b: Annotated[Path, typer.Argument(help="The run compared against it (B).")],
    threshold: Annotated[float, typer.Option(
        help="PCT: a significant change smaller than this is 'same'.")] = 5.0,
    fail_on_regression: Annotated[Optional[float], typer.Option(
        help="PCT: exit 1 when a case got significantly slower by more than this, or failed.",
    )] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    strict: Annotated[bool, typer.Option(
        help="Let cases SUSPECT in either run (contended, throttled) fail "
             "--fail-on-regression too; without it they are listed apart.")] = False,
) -> None:
    """Per case: ratio of medians B/A, Mann-Whitney U significance, faster/slower/same.

    Exit 2 when the runs share no case (the message says what each holds).
    """
    from harness.analysis.diff import diff_runs, print_diff

    if not threshold >= 0 or (fail_on_regression is not None and not fail_on_regression >= 0):
        fail_input("--threshold and --fail-on-regression take a percentage >= 0")
    try:
        result = diff_runs(run_a, run_b, threshold, fail_on_regression, strict)
    except store.StoreError as exc:
        fail_input(str(exc))
    if not result.cases:  # nothing to compare: as much a usage error as a wrong folder
        from harness.analysis.diff import no_shared_case

        fail_input(no_shared_case(result))
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
    else:
        from harness.terminal import table_width

        print_diff(Console(width=table_width()), result)  # $COLUMNS read now
    raise typer.Exit(api.EXIT_FAILED_CELL if result.regressions else 0)


@app.command()
def check(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run folders.")],
    summary: Annotated[Optional[Path], typer.Option(
        help="Also check this summary.md, drawn from the RUNs merged (harness report A B "
             "--out DIR), against them all.")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="List every unverifiable figure, not one per kind.")] = False,
) -> None:
    """Recompute every figure a run stores and prints from its own raw samples.

    measurements.csv against run.json, run.json's derived fields (the kept attempt,
    FLOPs, energy), the round orders, and summary.md's figures. One line per
    mismatch; exit 1 on any, 0 otherwise, 2 for a path that is not a run folder.
    """
    from harness.audit import Audit, audit_run, audit_summary
    from harness.run.rounds import round_orders  # the seeded shuffle the orders must equal

    try:
        for run_dir in run_dirs:
            store.read_run(run_dir)
        if summary is not None and not summary.is_file():
            raise BadInput(f"--summary {summary}: no such file")
    except (store.StoreError, BadInput) as exc:
        fail_input(str(exc))
    audit = Audit()
    for run_dir in run_dirs:
        audit = audit.add(audit_run(run_dir, round_orders))
    if summary is not None:
        audit = audit.add(audit_summary(summary, run_dirs))
    for mismatch in audit.mismatches:
        typer.echo(mismatch.line())
    for line in audit.unverifiable_lines(every=verbose):
        typer.echo(line)
    typer.echo(f"figures per file: {audit.files_line() or 'none'}")
    typer.echo(audit.summary_line())
    raise typer.Exit(api.EXIT_FAILED_CELL if audit.mismatches else 0)


app.command("profile-device")(profile_device)  # harness/predict/command.py (issue 51)


def harness_version() -> str:
    """The installed package's version (pyproject.toml), or why there is none."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crossframe-harness")
    except PackageNotFoundError:
        return "unknown (not installed; run `pip install -e .`)"


def _print_version(value: bool) -> None:
    if value:
        print(f"harness {harness_version()}")
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the version and exit.")] = False) -> None:
    """Options that apply before any command."""
    try:  # a bad HARNESS_* value (harness.core.settings) is one line and exit 2, whatever the
        Settings.from_environment()  # command; compare reads them again, with its --quick
    except BadInput as exc:
        fail_input(str(exc))
    registry.warn_once()  # a plugin that failed to load: one line each, then carry on


def main() -> None:
    app()


if __name__ == "__main__":
    main()

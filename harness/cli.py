"""The `harness` command line: compare, advise, list, env, report, export, diff, check.

Never imports a framework: everything framework-specific runs in worker processes.
Bad input is one line on stderr and exit code 2 (so is `diff` of runs that share no case); a
failed cell is exit code 1 with every result still written; a report that cannot be written
after the measurements were saved is exit code 3 with its one-line reason; Ctrl-C, SIGTERM and
SIGHUP save what finished, stop the running worker and exit 128 + the signal's number (130,
143, 129).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness import api
from harness.analysis.plausibility import device_entry, flop_limits, precision_of
from harness.analysis.stats import CaseSummary, implausibility, summarize_result
from harness.core import interrupt, registry
from harness.core.settings import Settings
from harness.core.units import format_seconds, three_digits
from harness.data import fields, store
from harness.data.ceilings import Ceilings, DeviceCeiling
from harness.data.serial import JsonObject
from harness.measure import envinfo
from harness.measure.memory import memory_text
from harness.predict.command import profile_device
from harness.reporting import ReportOutcome, draw_run_report
from harness.run.executors import executor_from_options
from harness.spec import BadInput, Status, WorkloadSpec

app = typer.Typer(
    help="Run the same workloads in every installed framework (torch, TensorFlow, JAX, Keras 3, "
         "numpy, plugins) on CPU and GPU, timed honestly.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
# A terminal's width; 160 when piped, so the tables do not fold. Fixed here, at import, and
# never from $COLUMNS: a width read from the environment at import would depend on which test
# or caller imported the module first. The compact table reads $COLUMNS when it prints.
console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True)

EXIT_BAD_INPUT = 2


def fail_input(message: str) -> None:
    """One clear line, exit 2, nothing written."""
    print(f"harness: error: {message}", file=sys.stderr)  # plain print: rich would wrap it
    raise typer.Exit(EXIT_BAD_INPUT)


def parse_sizes(text: str | None) -> list[int] | None:
    if text is None:
        return None
    sizes = []
    for part in text.split(","):
        part = part.strip()
        if not part.lstrip("-").isdigit():
            raise BadInput(f"--sizes {text!r}: {part!r} is not an integer (example: 64,256,1024)")
        if int(part) < 1:
            raise BadInput(f"--sizes {text!r}: sizes must be >= 1")
        sizes.append(int(part))
    if not sizes:
        raise BadInput("--sizes is empty (example: 64,256,1024)")
    return sizes


def parse_param_overrides(values: list[str] | None) -> dict[str, str]:
    overrides = {}
    for value in values or []:
        if "=" not in value:
            raise BadInput(f"--param {value!r}: expected NAME=VALUE (example: epochs=2)")
        name, text = value.split("=", 1)
        overrides[name.strip()] = text.strip()
    return overrides


def peak_share_text(gflops: float, entry: DeviceCeiling | None, precision: str) -> str:
    """' (12% of peak)': an achieved FLOP rate against the device's measured matmul peak."""
    peak = flop_limits(entry, precision)[0]
    return f" ({gflops / peak:.0%} of peak)" if peak else ""


def flop_rate_text(row: CaseSummary, entry: DeviceCeiling | None, precision: str) -> str:
    """'43 GFLOP/s (22% of peak)'; from a count with gaps a lower bound and no share of the
    peak: '>= 0.01 GFLOP/s (partial: aten._cudnn_rnn x2 not counted)'; from a count its second
    opinion disputes, no share of the peak either: '4.3 GFLOP/s (count disputed: ...)'."""
    if row.gflops is None:
        return ""
    bound = ">= " if row.flops_gaps else ""
    notes = [f"partial: {row.flops_gaps}"] if row.flops_gaps else []
    if row.flops_disputed:
        notes.append(f"count disputed: {row.flops_disputed}")
    if notes:
        return f"{bound}{three_digits(row.gflops)} GFLOP/s ({'; '.join(notes)})"
    return f"{three_digits(row.gflops)} GFLOP/s" + peak_share_text(row.gflops, entry, precision)


def results_table(spec: WorkloadSpec, summaries: list[CaseSummary],
                  ceilings: Ceilings | None = None) -> Table:
    table = Table(title=f"{spec.name}: median per call (IQR), cold first call apart")
    # Declared per-case values (harness.data.fields) get a column where any row has one.
    extras = [item for item in fields.cli_fields()
              if any(row.extras.get(item.name) is not None for row in summaries)]
    for column in ("variant", "framework", "device", spec.sweep, "status", "median", "IQR",
                   "cold", "rate", "peak mem", *(item.cli for item in extras),
                   "check / reason"):
        table.add_column(column, overflow="fold")
    for row in summaries:
        rates = [flop_rate_text(row, device_entry(ceilings, row.device),
                                precision_of(row.variant, dict(spec.variant_precision))),
                 f"{three_digits(row.gbps)} GB/s" if row.gbps is not None else ""]
        rate = ", ".join(filter(None, rates)) or "-"
        spread = format_seconds(row.iqr_s) + (" noisy" if row.noisy else "")
        note = row.check if row.status == "ok" else (row.check + " " + row.reason).strip()
        flag = implausibility(row, device_entry(ceilings, row.device), spec.bandwidth_ceiling,
                              dict(spec.variant_precision))
        # The failure reason or check first, the suspicion last: both must stay readable.
        note = "; ".join(filter(None, [flag, note,
                                       f"SUSPECT: {row.suspect}" if row.suspect else ""]))
        table.add_row(row.variant, row.framework, row.device,
                      "" if row.size is None else str(row.size), row.status,
                      format_seconds(row.median_s), spread, format_seconds(row.cold_s), rate,
                      memory_text(row.peak_host_bytes, row.peak_device_bytes),
                      *(item.text(row.extras.get(item.name)) for item in extras),
                      escape(note[:320]))  # reasons hold brackets: 'harness[torch]'
    return table


# The compact table's widest line; long texts go to the warnings, the rest to --details.
COMPACT_WIDTH = 100


def terminal_width() -> int:
    """The width to fit: $COLUMNS where set (read now, not at import), else the console's."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else console.width


def median_text(row: CaseSummary) -> str:
    """'2.42 ms ±156 us', or '-' for a case without samples."""
    if row.median_s is None:
        return "-"
    spread = f" ±{format_seconds(row.iqr_s)}" if row.iqr_s is not None else ""
    return format_seconds(row.median_s) + spread


def short_check(row: CaseSummary) -> str:
    """'pass', 'FAIL', 'not compared' or '-': the figure itself is in --details."""
    if not row.check:
        return "-"
    return row.check if row.check == "not compared" else row.check.split()[0]


def short_rate(row: CaseSummary) -> str:
    """'43.2 GFLOP/s', '>= 0.01 GFLOP/s' (a partial count), '4.3 GFLOP/s disputed' (a count
    its second opinion disputes), '12 GB/s', or '-'."""
    rates = []
    if row.gflops is not None:
        rates.append((">= " if row.flops_gaps else "") + f"{three_digits(row.gflops)} GFLOP/s"
                     + (" disputed" if row.flops_disputed else ""))
    if row.gbps is not None:
        rates.append(f"{three_digits(row.gbps)} GB/s")
    return ", ".join(rates) or "-"


def compact_table(spec: WorkloadSpec, summaries: list[CaseSummary]) -> Table:
    """One line per case: who, where, status, median ± IQR, rate, check. The figures are never
    cut (their columns are as wide as their longest text); names are, with an ellipsis."""
    table = Table(title=f"{spec.name}: median per call ± IQR (--details: every column)",
                  box=box.HORIZONTALS, show_edge=True, pad_edge=False, title_justify="left")
    columns = ("variant", "framework", "device", spec.sweep, "status", "median ± IQR", "rate",
               "check")
    rows = [(escape(row.variant), row.framework, row.device,
             "" if row.size is None else str(row.size), row.status, median_text(row),
             short_rate(row), short_check(row)) for row in summaries]
    whole = {spec.sweep, "median ± IQR", "rate", "check"}
    for index, column in enumerate(columns):
        longest = max([len(column), *(len(row[index]) for row in rows)])
        table.add_column(column, no_wrap=True, overflow="ellipsis",
                         min_width=longest if column in whole else None,
                         max_width=20 if column == "variant" else None)
    for row_cells in rows:
        table.add_row(*row_cells)
    return table


# A case's disputed FLOP count in the warnings (the report words its own line otherwise).
DISPUTED_TEXT = "FLOP count DISPUTED (no share of the peak is made from it): "


def case_warnings(spec: WorkloadSpec, summaries: list[CaseSummary],
                  ceilings: Ceilings | None) -> dict[str, list[str]]:
    """The long texts of the full table's last column, each with the cases it concerns."""
    texts: dict[str, list[str]] = {}
    for row in summaries:
        where = f"{row.variant} {row.framework} {row.device}" + (
            "" if row.size is None else f", {spec.sweep} {row.size}")
        flag = implausibility(row, device_entry(ceilings, row.device), spec.bandwidth_ceiling,
                              dict(spec.variant_precision))
        gaps = f"FLOP count partial: {row.flops_gaps}" if row.flops_gaps else ""
        disputed = DISPUTED_TEXT + row.flops_disputed if row.flops_disputed else ""
        check = row.check if row.check.startswith("FAIL") else ""
        for text in (row.reason if row.status != "ok" else "", check, flag, gaps, disputed,
                     f"SUSPECT: {row.suspect}" if row.suspect else ""):
            # A dispute names parts and both figures of each: room for three of them.
            text = " ".join(text.split())[:640 if text == disputed else 320]
            if text:
                texts.setdefault(text, []).append(where)
    return texts


@app.command()
def compare(
    workload: Annotated[Optional[str], typer.Option(
        help="Workload name (see `harness list`). Default: matmul.")] = None,
    model: Annotated[Optional[Path], typer.Option(
        help="Your own model file instead of a workload (see README: Your own model).")] = None,
    framework: Annotated[Optional[list[str]], typer.Option(
        help=f"{', '.join(registry.framework_names())}; repeat or comma-separate. Default: "
             "every one the workload implements (see `harness list`).",
    )] = None,
    device: Annotated[Optional[list[str]], typer.Option(
        help="cpu, cuda, cuda:N; repeat or comma-separate. Default: cpu plus every visible GPU.",
    )] = None,
    variant: Annotated[Optional[str], typer.Option(
        help="Variant name(s), comma-separated, or 'all'. Default: the workload's default "
             "variants (see `harness list`), usually the as-written one.")] = None,
    sizes: Annotated[Optional[str], typer.Option(
        help="Comma list for the workload's sweep parameter (matmul: n).")] = None,
    param: Annotated[Optional[list[str]], typer.Option(
        help="NAME=VALUE workload parameter; repeatable (see `harness list`).")] = None,
    data: Annotated[Optional[Path], typer.Option(
        help="MNIST .npz file to use (mnist-* workloads).")] = None,
    quick: Annotated[bool, typer.Option(
        help="CI-sized parameters (the quick column of `harness list`) and a short timing "
             "budget.")] = False,
    out: Annotated[Path, typer.Option(help="Folder that receives the run folder.")] = Path(
        "results"),
    timeout: Annotated[float, typer.Option(
        help="Seconds before a cell's worker is killed.")] = 900.0,
    report: Annotated[bool, typer.Option(
        help="Draw the report (PNGs, summary.md, report.html) into the run folder.")] = True,
    ceilings: Annotated[bool, typer.Option(
        help="Measure each device's peak FLOP/s and bandwidth first (for plausibility).")] = True,
    probe_ceilings: Annotated[bool, typer.Option(
        "--probe-ceilings", help="Probe the ceilings again although this machine remembers "
        "them (reused otherwise while its fingerprint matches, for 30 days).")] = False,
    executor: Annotated[Optional[str], typer.Option(
        help="Where cells run: local (here, one after another) or slurm (one SLURM job-array "
             "task per cell, through submitit). Default: local; with --resume, the run's "
             "own.", show_default=False)] = None,
    partition_cpu: Annotated[Optional[str], typer.Option(
        help="slurm: partition for CPU cells (each gets a whole node, --exclusive).")] = None,
    partition_gpu: Annotated[Optional[str], typer.Option(
        help="slurm: partition for GPU cells (each gets one GPU, --gres=gpu:1).")] = None,
    time_limit: Annotated[Optional[int], typer.Option(
        help="slurm: minutes per task (default: --timeout plus 5 minutes).")] = None,
    pending_limit: Annotated[Optional[float], typer.Option(
        help="slurm: seconds a task may wait unable to start (drained or down node, hold) "
             "before it is cancelled and its cell interrupted (default: the time limit).")
    ] = None,
    sbatch: Annotated[Optional[list[str]], typer.Option(
        help="slurm: KEY=VALUE (or KEY) sbatch setting for every task; repeatable "
             "(account=mylab, constraint=a100, qos=short).")] = None,
    resume: Annotated[Optional[Path], typer.Option(
        help="Run folder to complete: run only its cells without a result (its own workload, "
             "parameters and SLURM settings; --executor and the slurm options given replace "
             "the run's, the others are ignored).")] = None,
    cancel_running: Annotated[bool, typer.Option(
        help="With --resume: scancel the run's SLURM tasks still queued or running first "
             "(without it such a resume is refused).")] = False,
    rounds: Annotated[Optional[int], typer.Option(
        help="Worker processes per cell: the matrix runs round by round, cells in a new "
             "random order each round, the samples (MNIST: epochs) shared out; verdicts must "
             "hold against the spread between rounds. Default 5, 1 with --quick (HARNESS_ROUNDS "
             "overrides); 1: run-to-run drift is not measured.")] = None,
    seed: Annotated[Optional[int], typer.Option(
        help="Seed of the rounds' cell orders (default: drawn; recorded in run.json).")] = None,
    details: Annotated[bool, typer.Option(
        "--details", help="Also print the full results table (cold call, peak memory, "
        "FLOPs/call, steps/call, round drift, accuracy, reasons).")] = False,
) -> None:
    """Run WORKLOAD for every framework x device cell, each in its own process."""
    from harness.run import forkserver

    # One set of warm processes for every child, from the --model inspection to the last cell.
    with forkserver.shared():
        try:
            chosen = executor_from_options(executor if executor or resume else "local",
                                           partition_cpu=partition_cpu,
                                           partition_gpu=partition_gpu, time_limit_min=time_limit,
                                           sbatch=sbatch, pending_limit_s=pending_limit,
                                           stored=stored_executor(resume))
            if resume is None:
                # api.plan splits `--x a --x b,c` itself, as it does for Python callers.
                run = api.plan(workload, frameworks=framework, devices=device,
                               variants=variant, sizes=parse_sizes(sizes),
                               params=parse_param_overrides(param), data=data, quick=quick,
                               out=out, timeout_s=timeout, model=model, rounds=rounds,
                               seed=seed, probe_ceilings=probe_ceilings,
                               # Read once, here: a bad HARNESS_* value is exit 2 too.
                               settings=Settings.from_environment(quick=quick))
        except (BadInput, store.StoreError) as exc:
            fail_input(str(exc))
        with interrupt.stop_on_signals():
            try:
                result = api.execute(run, ceilings=ceilings, command=sys.argv, executor=chosen) \
                    if resume is None else \
                    api.resume_run(resume, executor=chosen, command=sys.argv,
                                   cancel_running=cancel_running)
            except BadInput as exc:
                fail_input(str(exc))
    # A resumed run's spec by its stored name, as resume_run loaded it.
    spec = run.spec if resume is None else registry.load_workload(result.document.workload)
    # Outside the handlers: the cells are saved, a signal now only stops the drawing.
    drawn = draw_run_report(result.path) if result.stopped_by is None and report else None
    mismatches, check_line = self_check(result) if result.stopped_by is None else (0, "")
    print_run(spec, result, drawn, check_line, details)
    # A failed cell says more than a failed drawing; either way the measurements are saved.
    raise typer.Exit(result.exit_code or (drawn.exit_code if drawn else 0)
                     or (api.EXIT_FAILED_CELL if mismatches else 0))


@app.command()
def advise(
    workload: Annotated[Optional[str], typer.Option(
        help="Workload name (see `harness list`), or give --model.")] = None,
    model: Annotated[Optional[Path], typer.Option(
        help="Your own model file (see docs/advise.md).")] = None,
    sizes: Annotated[Optional[str], typer.Option(
        help="Your batch (the sweep's value), first; one size gets a second (a quarter of "
             "it; 4x under 4) for the refitted crossover.")] = None,
    device: Annotated[Optional[list[str]], typer.Option(
        help="cpu, cuda, cuda:N. Default: cpu plus every visible GPU.")] = None,
    framework: Annotated[Optional[list[str]], typer.Option(
        help="Frameworks to advise (default: every one the model or workload runs in).")] = None,
    rounds: Annotated[Optional[int], typer.Option(
        help="Worker processes per cell, interleaved (default 3; 1 with --quick).")] = None,
    quick: Annotated[bool, typer.Option(help="A short timing budget, one round.")] = False,
    out: Annotated[Path, typer.Option(help="Folder that receives the run folder.")] = Path(
        "results"),
    timeout: Annotated[float, typer.Option(
        help="Seconds before a cell's worker is killed.")] = 900.0,
    report: Annotated[bool, typer.Option(help="Draw the report into the run folder.")] = True,
    ceilings: Annotated[bool, typer.Option(
        help="Measure each device's peak FLOP/s and bandwidth first, as compare does.")] = True,
    budget: Annotated[float, typer.Option(
        help="Seconds for the whole run, from its start: the fixes the diagnosis points at "
             "first, as many as fit (0: no limit, every fix).")] = 180.0,
) -> None:
    """What to change: each candidate fix measured beside the as-written cell, ranked."""
    from harness.analysis.advice import advise_run
    from harness.analysis.advicenotes import advise_rounds_line
    from harness.run import forkserver

    with forkserver.shared(), interrupt.stop_on_signals():
        try:
            if (workload is None) == (model is None):
                raise BadInput("give one of --model FILE or --workload NAME")
            result = api.advise(workload, model=model, sizes=parse_sizes(sizes),
                                devices=device, frameworks=framework, rounds=rounds,
                                quick=quick, out=out, timeout_s=timeout, command=sys.argv,
                                ceilings=ceilings, budget_s=budget,
                                spent_s=since_process_start())
        except (BadInput, store.StoreError) as exc:
            fail_input(str(exc))
    drawn = draw_run_report(result.path) if result.stopped_by is None and report else None
    mismatches, check_line = self_check(result) if result.stopped_by is None else (0, "")
    say = Said()
    if result.stopped_by is None:
        for line in advise_run(result.document).lines():
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        print_advise_warnings(say, result, drawn)
    print_context(say, result, drawn, check_line, advise_rounds_line(result.document))
    remember_after_run(result, drawn is not None and budget > 0)
    # A fix that failed or did not help is a finding; only the as-written cells decide.
    raise typer.Exit(result.advise_exit_code or (drawn.exit_code if drawn else 0)
                     or (api.EXIT_FAILED_CELL if mismatches else 0))


def since_process_start() -> float:
    """Seconds since this process started: the budget is the whole command's, and Python's
    start and the CLI's imports (1-2 s on the H100 host) came before advise's own clock; one
    advise of seed 000's Jacobian ended at 179.8 s of its 180 without them."""
    return envinfo.process_age_s()


def remember_after_run(result: api.RunResult, reported: bool) -> None:
    """What this advise took after its last worker (the report, the check, the answer), kept
    per cell for the next advise's budget on this machine (harness.run.advise AFTER_RUN_FILE);
    only from a run that drew its report and had a budget, whose end a later one repeats."""
    from harness.run.advise import remember_after_run as remember

    finished = result.document.finished
    if reported and result.stopped_by is None and finished:
        remember(time.time() - finished, len(result.document.cells))


def stored_executor(resume: Path | None) -> JsonObject | None:
    """The executor a run to resume was made with (its run.json's): --executor and the slurm
    options given replace its settings one by one. StoreError when RESUME is no run folder."""
    stored = store.read_run(resume).get("executor") if resume is not None else None
    return stored if isinstance(stored, dict) else None


def self_check(result: api.RunResult) -> tuple[int, str]:
    """`harness check` on the run just made, before its verdicts are printed: a figure that
    does not recompute from the run's own samples is a bug in the harness, said as such (one
    line each, on stderr now) and exit 1. Returns the number of mismatches and the check's
    summary line, printed with the run's other context lines."""
    from harness.analysis.check import audit_run
    from harness.run.rounds import round_orders

    try:
        audit = audit_run(result.path, round_orders)
    except Exception as exc:  # noqa: BLE001 - the run is saved; say the check could not run
        errors.print(f"harness check could not run: {type(exc).__name__}: {exc}")
        return 0, ""
    for mismatch in audit.mismatches:
        errors.print(f"harness check: {mismatch.line()}", markup=False, highlight=False)
    return len(audit.mismatches), f"harness check: {audit.summary_line()}"


class Said:
    """Prints plain lines on stdout, each once: a sentence already printed is not repeated."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        if line and line not in self.lines:
            self.lines.append(line)
            console.print(line, markup=False, highlight=False, soft_wrap=True)

    def mentions(self, text: str) -> bool:
        return any(text in line for line in self.lines)


def is_warning(line: str) -> bool:
    return line.lstrip().startswith("warning: ")


def print_run(spec: WorkloadSpec, result: api.RunResult, drawn: ReportOutcome | None,
              check_line: str, details: bool = False) -> None:
    """The answer first: the verdicts, the compact table, the warnings, then one line each
    of context (rounds, --quick, ceilings, harness check, overhead) and the report's path."""
    say = Said()
    verdicts = verdict_lines(result, drawn)
    print_verdict(say, [line for line in verdicts if not is_warning(line)])
    print_variant_advice(result)
    summaries = print_results(spec, result, say, details)
    print_warnings(say, [line for line in verdicts if is_warning(line)],
                   case_warnings(spec, summaries, result.document.ceilings))
    print_context(say, result, drawn, check_line)


def print_variant_advice(result: api.RunResult) -> None:
    """A run of several variants: each ranked against the as-written one, as `harness advise`
    ranks its fixes (harness.analysis.advice), so `--variant all` says what to change."""
    if result.stopped_by is not None or len({cell.variant for cell in result.cells}) < 2:
        return
    from harness.analysis.advice import advise_run

    lines = advise_run(result.document).ranked_lines(others=True)
    if lines:
        console.print("what to change (each variant against the as-written one):")
    for line in lines:  # not through Said: two devices may print the same words
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


def print_results(spec: WorkloadSpec, result: api.RunResult, say: Said,
                  details: bool = False) -> list[CaseSummary]:
    """The compact table on stdout (and the full one with --details), the scaling and energy
    lines where the run has them. Returns the table's rows."""
    summaries = [row for cell in result.cells for row in summarize_result(spec, cell)]
    console.print(compact_table(spec, summaries), width=min(terminal_width(), COMPACT_WIDTH))
    if details:
        # As wide as before (160 at least): its long reasons must not fold letter by letter.
        Console(width=max(console.width, 160)).print(
            results_table(spec, summaries, result.document.ceilings))
    if spec.scaling:  # data-parallel runs: throughput and efficiency per process
        from harness.report.views.scaling import console_lines

        for line in console_lines(result.document):
            say(line)
    from harness.report.views.energy import console_lines as energy_lines  # measured energy only

    for line in energy_lines(result.document):
        say(line)
    if result.stopped_by is not None:
        finished = sum(cell.status != Status.INTERRUPTED for cell in result.cells)
        errors.print(f"interrupted by {interrupt.describe(result.stopped_by)}: "
                     f"{finished} finished cells saved in {result.path}")
    return summaries


def print_warnings(say: Said, verdict_warnings: list[str],
                   case_texts: dict[str, list[str]]) -> None:
    """'warnings:', the verdicts' warnings, then each case's long text that none of them (nor
    a line printed before) said already."""
    def said(text: str) -> str:  # what the report's own warning of the same thing holds
        return text.removeprefix("SUSPECT: ").removeprefix(DISPUTED_TEXT)

    unsaid = [f"  warning: {', '.join(dict.fromkeys(cases))}: {text}"
              for text, cases in case_texts.items()
              if not say.mentions(said(text))
              and not any(said(text) in line for line in verdict_warnings)]
    if verdict_warnings or unsaid:
        say("warnings:")
    for line in [*verdict_warnings, *unsaid]:
        say(line)


def print_advise_warnings(say: Said, result: api.RunResult,
                          drawn: ReportOutcome | None) -> None:
    """compare's warnings block under the advice (failed cells, SUSPECT or noisy timings,
    disputed counts): the advice says why a fix is not recommended, these say what to doubt."""
    try:
        spec = registry.load_workload(result.document.workload)
    except Exception as exc:  # noqa: BLE001 - the advice is printed; only the warnings are lost
        say(f"warnings: not listed ({type(exc).__name__}: {exc})")
        return
    summaries = [row for cell in result.cells for row in summarize_result(spec, cell)]
    print_warnings(say, [line for line in verdict_lines(result, drawn) if is_warning(line)],
                   case_warnings(spec, summaries, result.document.ceilings))


def verdict_lines(result: api.RunResult, drawn: ReportOutcome | None) -> list[str]:
    """The summary's verdict lines; none for a stopped run.

    Drawn: the verdicts computed with the report; not drawn (--no-report, or the drawing
    failed): computed here from the stored run, with nothing drawn.
    """
    if result.stopped_by is not None:
        return []
    from harness.report import verdicts_without_drawing

    try:
        return drawn.verdicts if drawn is not None and drawn.written else \
            verdicts_without_drawing([result.path])
    except Exception as exc:  # noqa: BLE001 - the measurements are saved; only the words are lost
        return [f"no verdict: {type(exc).__name__}: {exc}"]


def print_verdict(say: Said, lines: list[str]) -> None:
    """'verdict:' and the summary's verdict lines, warnings apart: the first lines after a run."""
    if lines:
        say("verdict:")
    for line in lines:
        say(line)


def print_context(say: Said, result: api.RunResult, drawn: ReportOutcome | None,
                  check_line: str, rounds: str | None = None) -> None:
    """One line each: rounds (ROUNDS where the command orders them its own way: advise),
    --quick, ceilings, harness check, overhead and the whole command, what to run for the GPU
    answer where no GPU cell ran; then the run folder and report.html's path, the last line a
    run prints."""
    from harness.analysis.nextstep import next_step_lines
    from harness.analysis.stats import (
        ceilings_line,
        command_line,
        overhead_line,
        quick_line,
        rounds_line,
    )

    if result.stopped_by is None:
        now = time.time()
        for line in (rounds or rounds_line(result.document), quick_line(result.document),
                     ceilings_line(result.document), check_line,
                     overhead_line(result.document),
                     command_line(result.document, now - since_process_start(), now,
                                  drawn.seconds if drawn is not None else None),
                     *next_step_lines(result.document, result.path)):
            say(line)
    say(f"results: {result.path}")
    html = next((path for path in (drawn.written if drawn else []) if path.suffix == ".html"),
                None)
    if html is not None:
        say(f"report: {html}")


@app.command("list")
def list_workloads(model: Annotated[Optional[Path], typer.Option(
        help="Show what the harness understood of this model file instead.")] = None) -> None:
    """Workloads, their variants and parameters (default / --quick)."""
    from harness.listing import listing_lines
    from harness.terminal import wrapped

    if model is None:
        lines = listing_lines()
    else:
        try:
            described = registry.model_plugin("describe").model_lines(model)
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
        api.check_writable(target)
    except (store.StoreError, BadInput) as exc:
        fail_input(str(exc))
    try:
        written = render_report(run_dirs, target, tensorboard_dir=tensorboard, html=html)
    except store.StoreError as exc:
        fail_input(str(exc))
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

    measurements.csv against run.json, run.json's derived fields (round medians, the kept
    attempt, FLOPs, energy), the round orders, and summary.md's figures. One line per
    mismatch; exit 1 on any, 0 otherwise, 2 for a path that is not a run folder.
    """
    from harness.analysis.check import Audit, audit_run, audit_summary
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

"""What a run prints after its last cell: the verdicts, the tables, the warnings, the context.

The answer first (the verdicts), then the compact table and the warnings, then one line each of
context (rounds, --quick, ceilings, harness check, overhead) and the paths; `advise` prints its
advice in place of the table and shares the warnings and the context.
"""

from __future__ import annotations

import time

from rich.console import Console

from harness import api
from harness.analysis.casetable import CaseRow
from harness.analysis.commandcost import CommandClock, CommandCost, command_cost, own_cost_line
from harness.analysis.stats import cli_rows
from harness.analysis.verdictline import Topic, VerdictLine
from harness.commands.output import Said, console, errors, print_plain, print_whole
from harness.commands.predicted import with_predictions
from harness.commands.shortwarnings import short_warnings
from harness.commands.tables import (
    DISPUTED_TEXT,
    case_warnings,
    compact_table,
    results_table,
)
from harness.core import interrupt, registry
from harness.measure import envinfo
from harness.reporting import ReportOutcome, draw_run_report
from harness.run import phases
from harness.spec import Status, WorkloadSpec


def report_and_check(result: api.RunResult, report: bool, clock: CommandClock | None = None
                     ) -> tuple[ReportOutcome | None, int, str]:
    """After the last cell of a run not stopped: its report drawn (unless --no-report), then
    its self-check. Returns the drawing's outcome, the check's mismatches and its line. CLOCK:
    the command's, told when the run handed back and what the report and the check took."""
    if clock is not None:
        clock.run_returned = time.time()
    if result.stopped_by is not None:
        return None, 0, ""
    board = phases.PhaseBoard()  # a log still hears from a long drawing (no bar: no terminal)
    with phases.reporting(board, errors):
        with board.phase("drawing the report"):
            drawn = draw_run_report(result.path) if report else None
        checking = time.perf_counter()
        with board.phase("harness check: recomputing every figure from the samples"):
            mismatches, check_line = self_check(result)
    if clock is not None:
        clock.report_s = drawn.seconds if drawn is not None else 0.0
        clock.check_s = time.perf_counter() - checking
    return drawn, mismatches, check_line


def self_check(result: api.RunResult) -> tuple[int, str]:
    """`harness check` on the run just made, before its verdicts are printed: a figure that
    does not recompute from the run's own samples is a bug in the harness, said as such (one
    line each, on stderr now) and exit 1. Returns the number of mismatches and the check's
    summary line, printed with the run's other context lines."""
    from harness.audit import audit_run
    from harness.run.rounds import round_orders

    try:
        audit = audit_run(result.path, round_orders)
    except Exception as exc:  # noqa: BLE001 - the run is saved; say the check could not run
        errors.print(f"harness check could not run: {type(exc).__name__}: {exc}")
        return 0, ""
    for mismatch in audit.mismatches:
        errors.print(f"harness check: {mismatch.line()}", markup=False, highlight=False)
    return len(audit.mismatches), f"harness check: {audit.summary_line()}"


def print_run(spec: WorkloadSpec, result: api.RunResult, drawn: ReportOutcome | None,
              check_line: str, details: bool = False, clock: CommandClock | None = None
              ) -> None:
    """The answer first: the verdicts, the compact table, the warnings, then one line each
    of context (rounds, --quick, ceilings, harness check, overhead) and the report's path.
    CLOCK: the command's (the own-cost line's parts; recorded in run.json)."""
    if clock is not None:
        clock.answer_started = time.time()
    say = Said()
    verdicts = with_predictions(result, verdict_lines(result, drawn))
    print_verdict(say, [line.text for line in verdicts if line.topic is not Topic.WARNING])
    print_variant_advice(result)
    summaries = print_results(spec, result, say, details)
    print_warnings(say, warning_texts(verdicts),
                   case_warnings(spec, summaries, result.document.ceilings), details)
    print_context(say, result, drawn, check_line, clock=clock)


def warning_texts(verdicts: list[VerdictLine]) -> list[str]:
    """The verdicts' warnings (Topic.WARNING), printed with the warnings block."""
    return [line.text for line in verdicts if line.topic is Topic.WARNING]


def print_variant_advice(result: api.RunResult) -> None:
    """A run of several variants: each ranked against the as-written one, as `harness advise`
    ranks its fixes (harness.analysis.advice), so `--variant all` says what to change."""
    if result.stopped_by is not None or len({cell.variant for cell in result.cells}) < 2:
        return
    from harness.analysis.advice import advise_run

    lines = advise_run(result.document).ranked_lines(others=True)
    if lines:
        print_plain("what to change (each variant against the as-written one):")
    for line in lines:  # not through Said: two devices may print the same words
        print_plain(f"  {line}")


def print_results(spec: WorkloadSpec, result: api.RunResult, say: Said,
                  details: bool = False) -> list[CaseRow]:
    """The compact table on stdout (and the full one with --details), the scaling and energy
    lines where the run has them. Returns the table's rows."""
    summaries = cli_rows(spec, result.document)
    for line in compact_table(spec, summaries):
        print_whole(line)
    if details:
        # As wide as before (160 at least): its long reasons must not fold letter by letter.
        Console(width=max(console.width, 160)).print(
            results_table(spec, summaries, result.document.ceilings))
        from harness.report.summary import details_lines  # how each figure was measured

        for line in details_lines([result.document]):
            say(line)
    if spec.report.scaling:  # data-parallel runs: throughput and efficiency per process
        from harness.report.views.scaling import console_lines

        for line in console_lines(result.document):
            say(line)
    from harness.report.views.energy import (
        energy_console_lines as energy_lines,  # measured energy only
    )

    for line in energy_lines(result.document):
        say(line)
    for line in interrupted_lines(result):
        errors.print(line, markup=False, highlight=False, soft_wrap=True)
    return summaries


def say_no_measurement(result: api.RunResult) -> None:
    """The last line on stderr of a run that ended without one valid measurement: why, in one
    line (api.no_measurement_line); its exit code is 4 unless a failed cell's 1 says more."""
    line = api.no_measurement_line(result)
    if line:
        errors.print(line, markup=False, highlight=False, soft_wrap=True)


def interrupted_lines(result: api.RunResult) -> list[str]:
    """A stopped run's two lines: what was saved, and the exact command that runs the rest
    (`harness compare --resume RUN`); none for a run that was not stopped. A run stopped
    before its first cell (in the ceilings or the shared weights) is started again instead:
    a resumed run does neither."""
    if result.stopped_by is None:
        return []
    import shlex

    stopped = f"interrupted by {interrupt.describe(result.stopped_by)}"
    if not result.cells:
        return [f"{stopped} before any cell ran; nothing to keep: run the same command again"]
    finished = sum(cell.status != Status.INTERRUPTED for cell in result.cells)
    planned = max(len(result.document.planned_cells), len(result.cells))
    return [f"{stopped}: {finished} of {planned} cells finished and saved; to run the rest:",
            f"  harness compare --resume {shlex.quote(str(result.path))}"]


def print_warnings(say: Said, verdict_warnings: list[str],
                   case_texts: dict[str, list[str]], details: bool = False) -> None:
    """'warnings:', the verdicts' warnings, then each case's long text that none of them (nor
    a line printed before) said already; 'warnings: none' where there is none. Without
    DETAILS in their short form (harness.commands.shortwarnings): SUSPECT cases under one
    heading by the kind of their reasons, long texts cut, the whole of each in summary.md."""
    def said(text: str) -> str:  # what the report's own warning of the same thing holds
        return text.removeprefix("SUSPECT: ").removeprefix(DISPUTED_TEXT)

    unsaid = [(f"  warning: SUSPECT timing: {', '.join(dict.fromkeys(cases))}: {said(text)}"
               if text.startswith("SUSPECT: ") else
               f"  warning: {', '.join(dict.fromkeys(cases))}: {text}")
              for text, cases in case_texts.items()
              if not say.mentions(said(text))
              and not any(said(text) in line for line in verdict_warnings)]
    lines = [*verdict_warnings, *unsaid]
    if not lines:
        say("warnings: none")
        return
    say("warnings:")
    for line in (lines if details else short_warnings(lines)):
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
    summaries = cli_rows(spec, result.document)
    print_warnings(say, warning_texts(verdict_lines(result, drawn)),
                   case_warnings(spec, summaries, result.document.ceilings))


def verdict_lines(result: api.RunResult, drawn: ReportOutcome | None) -> list[VerdictLine]:
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
        return [VerdictLine(f"no verdict: {type(exc).__name__}: {exc}")]


def print_verdict(say: Said, lines: list[str]) -> None:
    """'verdict:' and the summary's verdict lines, warnings apart: the first lines after a run."""
    if lines:
        say("verdict:")
    for line in lines:
        say(line)


def print_context(say: Said, result: api.RunResult, drawn: ReportOutcome | None,
                  check_line: str, rounds: str | None = None,
                  clock: CommandClock | None = None) -> None:
    """One line each: rounds (ROUNDS where the command orders them its own way: advise),
    --quick, ceilings, harness check, overhead and the whole command's own cost (recorded in
    run.json where the command kept its CLOCK), what to run for the GPU answer where no GPU
    cell ran; then the run folder and report.html's path, the last line a run prints."""
    from harness.analysis.nextstep import next_step_lines
    from harness.analysis.stats import (
        ceilings_line,
        overhead_line,
        quick_line,
        rounds_line,
    )

    if result.stopped_by is None:
        for line in (rounds or rounds_line(result.document), quick_line(result.document),
                     ceilings_line(result.document), check_line,
                     overhead_line(result.document), whole_command_line(result, clock),
                     *next_step_lines(result.document, result.path)):
            say(line)
    say(f"results: {result.path}", whole=True)  # paths whole: copied, never read folded
    html = next((path for path in (drawn.written if drawn else []) if path.suffix == ".html"),
                None)
    if html is not None:
        say(f"report: {html}", whole=True)



def whole_command_line(result: api.RunResult, clock: CommandClock | None) -> str:
    """The whole command's own cost, from its start to now: recorded in run.json where the
    command kept its CLOCK (then `harness check` adds its parts up again); without one, its
    parts after the run are one. '' without the run's times."""
    now = time.time()
    kept = clock or CommandClock(now - envinfo.process_age_s())
    cost = command_cost(result.document, kept, now)
    if cost is None:
        return ""
    if clock is not None:
        record_command_cost(result, cost)
    return own_cost_line(cost)


def record_command_cost(result: api.RunResult, cost: CommandCost) -> None:
    """run.json's command_cost, written beside what the run stored (the run has ended: no
    other writer); a folder that cannot be written only loses the record."""
    from harness.data import store

    try:
        document = store.read_run(result.path)
        document["command_cost"] = cost.to_json()
        store.write_json_atomic(result.path / store.RUN_FILE, document)
    except (OSError, store.StoreError) as exc:
        errors.print(f"harness: the whole command's cost not recorded: {exc}", markup=False)
    result.document.command_cost = cost.to_json()

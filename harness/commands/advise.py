"""`harness advise`: the as-written cells, the candidate fixes measured beside them, ranked."""

from __future__ import annotations

import sys
import time

import typer

from harness import api
from harness.analysis.commandcost import CommandClock
from harness.commands.epilogue import (
    print_advise_warnings,
    print_context,
    report_and_check,
    say_no_measurement,
)
from harness.commands.inputs import fail_input, fail_write, parse_sizes
from harness.commands.options import CommandOptions
from harness.commands.output import Said, print_plain
from harness.commands.predicted import print_predictions
from harness.core import interrupt
from harness.core.settings import cache_folder
from harness.data import store
from harness.measure import envinfo
from harness.spec import BadInput


def run_advise(options: CommandOptions, budget: float) -> None:
    """What to change: each candidate fix measured beside the as-written cell, ranked; print
    the advice and exit 0 once the as-written cells ran (api.RunResult.advise_exit_code), 4
    (api.EXIT_NO_ANSWER) where no fix was measured."""
    from harness.analysis.advice import advise_run
    from harness.analysis.advicenotes import advise_rounds_line
    from harness.run import forkserver

    clock = CommandClock(time.time() - envinfo.process_age_s())  # the own-cost line's
    # One set of warm processes for both phases, from the --model inspection on. The budget is
    # the whole command's: Python's start and the CLI's imports (1-2 s on the H100 host) came
    # before advise's own clock (spent_s); one advise of seed 000's Jacobian ended at 179.8 s
    # of its 180 without them.
    with forkserver.warm_processes() as servers, interrupt.stop_on_signals():
        try:
            if (options.workload is None) == (options.model is None):
                raise BadInput("give one of --model FILE or --workload NAME")
            api.check_predict_for(options.predict_for or ())
            result = api.advise(options.workload, model=options.model,
                                sizes=parse_sizes(options.sizes), devices=options.device,
                                frameworks=options.framework, rounds=options.rounds,
                                quick=options.quick, out=options.out, timeout_s=options.timeout,
                                command=sys.argv, ceilings=options.ceilings, budget_s=budget,
                                spent_s=envinfo.process_age_s(), servers=servers,
                                predict_for=list(options.predict_for or []))
        except (BadInput, store.StoreError) as exc:
            fail_input(str(exc))
        except store.WriteFailed as exc:  # a full disk mid-run: the folder as saved before
            fail_write(str(exc))
    drawn, mismatches, check_line = report_and_check(result, options.report, clock)
    clock.answer_started = time.time()
    say = Said()
    answered = True
    if result.stopped_by is None:
        advice = advise_run(result.document)
        answered = advice.answered
        for line in advice.lines():
            print_plain(line)
        print_predictions(say, result)
        print_advise_warnings(say, result, drawn)
    print_context(say, result, drawn, check_line, advise_rounds_line(result.document), clock)
    remember_advise_end(result, drawn is not None and budget > 0)
    say_no_measurement(result)
    # A fix that failed or did not help is a finding; only the as-written cells decide, and
    # an advice that measured no fix says it has no answer.
    raise typer.Exit(result.advise_exit_code or (drawn.exit_code if drawn else 0)
                     or (api.EXIT_FAILED_CELL if mismatches else 0)
                     or (0 if answered else api.EXIT_NO_ANSWER))


def remember_advise_end(result: api.RunResult, reported: bool) -> None:
    """What this advise took after its last worker (the report, the check, the answer), kept
    per cell for the next advise's budget on this machine (harness.run.advise AFTER_RUN_FILE);
    only from a run that drew its report and had a budget, whose end a later one repeats."""
    from harness.run.advise import remember_after_run as remember
    from harness.run.session import recorded_settings

    finished = result.document.finished
    if reported and result.stopped_by is None and finished:
        remember(time.time() - finished, len(result.document.cells),
                 cache_folder(recorded_settings(result.document)))

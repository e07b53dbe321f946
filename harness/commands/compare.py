"""`harness compare`: plan the matrix (or reopen a run to resume), run it, then the answer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from harness import api
from harness.analysis.commandcost import CommandClock
from harness.commands.epilogue import print_run, report_and_check, say_no_measurement
from harness.commands.inputs import (
    fail_input,
    fail_write,
    parse_param_overrides,
    parse_sizes,
)
from harness.commands.options import CommandOptions, CompareOptions, ExecutorOptions
from harness.core import interrupt, registry
from harness.core.settings import Settings
from harness.data import store
from harness.data.serial import JsonObject
from harness.measure import envinfo
from harness.run.executors import Executor, executor_from_options
from harness.run.forkserver import ForkServers
from harness.spec import BadInput


def run_compare(options: CommandOptions, choices: CompareOptions, where: ExecutorOptions) -> None:
    """Run WORKLOAD for every framework x device cell, each in its own process; print the
    answer and exit with the run's code (harness/cli.py's docstring lists them)."""
    from harness.run import forkserver

    # The command's own clock, from the process's start: the own-cost line's parts.
    clock = CommandClock(time.time() - envinfo.process_age_s())
    # One set of warm processes for every child, from the --model inspection to the last cell
    # (each forks from it only where the run's settings fork workers).
    with forkserver.warm_processes() as servers:
        try:
            api.check_predict_for(options.predict_for or ())
            executor = chosen_executor(where)
            # A new run's plan, or the stored folder --resume completes.
            target = planned(options, choices, servers) if where.resume is None \
                else where.resume
        except (BadInput, store.StoreError) as exc:
            fail_input(str(exc))
        with interrupt.stop_on_signals():
            try:
                asked = list(options.predict_for or [])
                result = api.resume_run(target, executor=executor, command=sys.argv,
                                        cancel_running=where.cancel_running, servers=servers,
                                        predict_for=asked) \
                    if isinstance(target, Path) else \
                    api.execute(target, ceilings=options.ceilings, command=sys.argv,
                                executor=executor, servers=servers, predict_for=asked)
            except BadInput as exc:
                fail_input(str(exc))
            except store.WriteFailed as exc:  # a full disk mid-run: the folder as saved before
                fail_write(str(exc))
    # A resumed run's spec by its stored name, as resume_run loaded it.
    spec = registry.load_workload(result.document.workload) if isinstance(target, Path) \
        else target.spec
    # Outside the handlers: the cells are saved, a signal now only stops the drawing.
    drawn, mismatches, check_line = report_and_check(result, options.report, clock)
    print_run(spec, result, drawn, check_line, choices.details, clock)
    say_no_measurement(result)
    # A failed cell says more than a failed drawing; either way the measurements are saved.
    raise typer.Exit(result.exit_code or (drawn.exit_code if drawn else 0)
                     or (api.EXIT_FAILED_CELL if mismatches else 0))


def chosen_executor(where: ExecutorOptions) -> Executor:
    """The executor --executor and the slurm options name, over a resumed run's own."""
    return executor_from_options(where.executor if where.executor or where.resume else "local",
                                 partition_cpu=where.partition_cpu,
                                 partition_gpu=where.partition_gpu,
                                 time_limit_min=where.time_limit, sbatch=where.sbatch,
                                 pending_limit_s=where.pending_limit,
                                 stored=stored_executor(where.resume))


def planned(options: CommandOptions, choices: CompareOptions,
            servers: ForkServers | None = None) -> api.RunPlan:
    """The run the options describe; BadInput (exit 2) for any that does not fit. SERVERS:
    the command's warm processes (a --model file's inspection forks from them)."""
    # api.plan splits `--x a --x b,c` itself, as it does for Python callers.
    return api.plan(options.workload, frameworks=options.framework, devices=options.device,
                    variants=choices.variant, sizes=parse_sizes(options.sizes),
                    params=parse_param_overrides(choices.param), data=choices.data,
                    quick=options.quick, out=options.out, timeout_s=options.timeout,
                    model=options.model, rounds=options.rounds, seed=choices.seed,
                    probe_ceilings=choices.probe_ceilings,
                    # Read once, here: a bad HARNESS_* value is exit 2 too.
                    settings=Settings.from_environment(quick=options.quick), servers=servers)


def stored_executor(resume: Path | None) -> JsonObject | None:
    """The executor a run to resume was made with (its run.json's): --executor and the slurm
    options given replace its settings one by one. StoreError when RESUME is no run folder."""
    stored = store.read_run(resume).get("executor") if resume is not None else None
    return stored if isinstance(stored, dict) else None

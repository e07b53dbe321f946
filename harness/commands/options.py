"""Command-line options declared once, as fields of frozen dataclasses a command takes whole.

Why: `compare` and `advise` take the same eleven options (which workload, where, how many
rounds, how long, what is written). Declared in each command's signature they were declared
twice, and a new one had to be added twice. Here each option is one dataclass field that
carries its typer declaration; `takes_options` turns a command whose parameters are such
dataclasses into the flat signature typer reads, and hands the command the filled dataclasses.
A new option both commands take is one field of CommandOptions.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer

from harness.core import registry

OPTION = "harness.commands.options"  # the field metadata key that holds a Declared
COMMAND_BODY = Callable[..., None]


@dataclass(frozen=True)
class Declared:
    """How a field shows on the command line: its help (one text, or one per command name
    where the commands word it apart: their defaults differ), any flags typer would not
    derive from the field's name, and whether --help shows the default."""

    help: str | Mapping[str, str]
    flags: tuple[str, ...] = ()
    show_default: bool = True

    def typer_option(self, command: str) -> Any:
        help_text = self.help if isinstance(self.help, str) else self.help[command]
        return typer.Option(*self.flags, help=help_text, show_default=self.show_default)


def declare(help: str | Mapping[str, str], *flags: str,
            show_default: bool = True) -> dict[str, Declared]:
    """A dataclass field's metadata that makes it a command-line option."""
    return {OPTION: Declared(help, flags, show_default)}


@dataclass(frozen=True)
class CommandOptions:
    """What `compare` and `advise` both take: the workload, where it runs, for how long, and
    what is written. The sizes stay text here: parsing them is the command's (exit 2)."""

    workload: str | None = field(default=None, metadata=declare({
        "compare": "Workload name (see `harness list`). Default: matmul.",
        "advise": "Workload name (see `harness list`), or give --model."}))
    model: Path | None = field(default=None, metadata=declare({
        "compare": "Your own model file instead of a workload (see README: Your own model).",
        "advise": "Your own model file (see docs/advise.md)."}))
    sizes: str | None = field(default=None, metadata=declare({
        "compare": "Comma list for the workload's sweep parameter (matmul: n).",
        "advise": "Your batch (the sweep's value), first; one size gets a second (a quarter "
                  "of it; 4x under 4) for the refitted crossover."}))
    device: list[str] | None = field(default=None, metadata=declare({
        "compare": "cpu, cuda, cuda:N; repeat or comma-separate. Default: cpu plus every "
                   "visible GPU.",
        "advise": "cpu, cuda, cuda:N. Default: cpu plus every visible GPU."}))
    framework: list[str] | None = field(default=None, metadata=declare({
        "compare": f"{', '.join(registry.framework_names())}; repeat or comma-separate. "
                   "Default: every one the workload implements (see `harness list`).",
        "advise": "Frameworks to advise (default: every one the model or workload runs in)."}))
    rounds: int | None = field(default=None, metadata=declare({
        "compare": "Worker processes per cell: the matrix runs round by round, cells in a new "
                   "random order each round, the samples (MNIST: epochs) shared out; verdicts "
                   "must hold against the spread between rounds. Default 5, 1 with --quick "
                   "(HARNESS_ROUNDS overrides); 1: run-to-run drift is not measured.",
        "advise": "Worker processes per cell, interleaved (default 3; 1 with --quick)."}))
    quick: bool = field(default=False, metadata=declare({
        "compare": "CI-sized parameters (the quick column of `harness list`) and a short "
                   "timing budget.",
        "advise": "A short timing budget, one round."}))
    out: Path = field(default=Path("results"),
                      metadata=declare("Folder that receives the run folder."))
    timeout: float = field(default=900.0,
                           metadata=declare("Seconds before a cell's worker is killed."))
    report: bool = field(default=True, metadata=declare({
        "compare": "Draw the report (PNGs, summary.md, report.html) into the run folder.",
        "advise": "Draw the report into the run folder."}))
    ceilings: bool = field(default=True, metadata=declare({
        "compare": "Measure each device's peak FLOP/s and bandwidth first (for plausibility).",
        "advise": "Measure each device's peak FLOP/s and bandwidth first, as compare does."}))
    predict_for: list[str] | None = field(default=None, metadata=declare(
        "A device profile (a shipped name or a `harness profile-device` file) to predict a "
        "CPU run's torch step on, beside the shipped ones; repeatable (docs/predict.md).",
        "--predict-for"))


@dataclass(frozen=True)
class CompareOptions:
    """What only `compare` takes about the matrix and its answer."""

    variant: str | None = field(default=None, metadata=declare(
        "Variant name(s), comma-separated, or 'all'. Default: the workload's default variants "
        "(see `harness list`), usually the as-written one."))
    param: list[str] | None = field(default=None, metadata=declare(
        "NAME=VALUE workload parameter; repeatable (see `harness list`)."))
    data: Path | None = field(default=None, metadata=declare(
        "MNIST .npz file to use (mnist-* workloads)."))
    probe_ceilings: bool = field(default=False, metadata=declare(
        "Probe the ceilings again although this machine remembers them (reused otherwise "
        "while its fingerprint matches, for 30 days).", "--probe-ceilings"))
    seed: int | None = field(default=None, metadata=declare(
        "Seed of the rounds' cell orders (default: drawn; recorded in run.json)."))
    details: bool = field(default=False, metadata=declare(
        "Also print the full results table (cold call, peak memory, FLOPs/call, steps/call, "
        "round drift, accuracy, reasons).", "--details"))


@dataclass(frozen=True)
class ExecutorOptions:
    """Where `compare`'s cells run (here or as SLURM tasks), and a stored run to complete."""

    executor: str | None = field(default=None, metadata=declare(
        "Where cells run: local (here, one after another) or slurm (one SLURM job-array task "
        "per cell, through submitit). Default: local; with --resume, the run's own.",
        show_default=False))
    partition_cpu: str | None = field(default=None, metadata=declare(
        "slurm: partition for CPU cells (each gets a whole node, --exclusive)."))
    partition_gpu: str | None = field(default=None, metadata=declare(
        "slurm: partition for GPU cells (each gets one GPU, --gres=gpu:1)."))
    time_limit: int | None = field(default=None, metadata=declare(
        "slurm: minutes per task (default: --timeout plus 5 minutes)."))
    pending_limit: float | None = field(default=None, metadata=declare(
        "slurm: seconds a task may wait unable to start (drained or down node, hold) before "
        "it is cancelled and its cell interrupted (default: the time limit)."))
    sbatch: list[str] | None = field(default=None, metadata=declare(
        "slurm: KEY=VALUE (or KEY) sbatch setting for every task; repeatable (account=mylab, "
        "constraint=a100, qos=short)."))
    resume: Path | None = field(default=None, metadata=declare(
        "Run folder to complete: run only its cells without a result (its own workload, "
        "parameters and SLURM settings; --executor and the slurm options given replace the "
        "run's, the others are ignored)."))
    cancel_running: bool = field(default=False, metadata=declare(
        "With --resume: scancel the run's SLURM tasks still queued or running first (without "
        "it such a resume is refused)."))


def is_option_group(hint: Any) -> bool:
    """Whether a parameter's type is a dataclass of options (every field declared here)."""
    return (isinstance(hint, type) and dataclasses.is_dataclass(hint)
            and all(OPTION in item.metadata for item in dataclasses.fields(hint)))


def group_parameters(group: type, command: str) -> list[inspect.Parameter]:
    """The typer parameters of an option dataclass's fields, in field order."""
    hints = get_type_hints(group)
    return [inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, default=item.default,
                              annotation=Annotated[hints[item.name],
                                                   item.metadata[OPTION].typer_option(command)])
            for item in dataclasses.fields(group)]


def takes_options(command: str) -> Callable[[COMMAND_BODY], COMMAND_BODY]:
    """Decorates a command whose parameters include option dataclasses: typer sees each
    dataclass's fields as options, where the dataclass's parameter stands, with COMMAND's help
    texts; the command is called with the dataclasses filled. Other parameters pass as they are."""
    def decorate(body: COMMAND_BODY) -> COMMAND_BODY:
        hints = get_type_hints(body, include_extras=True)
        groups = {name: hint for name, hint in hints.items() if is_option_group(hint)}
        parameters: list[inspect.Parameter] = []
        for parameter in inspect.signature(body).parameters.values():
            if parameter.name in groups:
                parameters += group_parameters(groups[parameter.name], command)
            else:  # keyword-only: typer passes every value by name
                parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY,
                                                    annotation=hints[parameter.name]))

        def command_function(**values: Any) -> None:
            filled = {name: group(**{item.name: values.pop(item.name)
                                     for item in dataclasses.fields(group)})
                      for name, group in groups.items()}
            body(**filled, **values)

        # typer names the command and reads its help and options from these; no __wrapped__
        # (functools.wraps): typing.get_type_hints would then resolve names in body's module.
        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(command_function, name, getattr(body, name))
        command_function.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        return command_function
    return decorate

"""The options `compare` and `advise` share are declared once (harness/commands/options.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated

import typer
import typer.main
from typer.testing import CliRunner

from harness.cli import app
from harness.commands.options import OPTION, CommandOptions, declare, takes_options


def command_options(typer_app: typer.Typer, command: str) -> dict[str, tuple[list[str], str]]:
    """A command's options as click builds them: name -> (flags, help)."""
    group = typer.main.get_command(typer_app)
    assert isinstance(group, typer.main.TyperGroup)
    return {param.name: ([*param.opts, *param.secondary_opts], getattr(param, "help", ""))
            for param in group.commands[command].params if param.name}


def test_every_shared_option_reaches_both_commands_with_its_own_help() -> None:
    for command in ("compare", "advise"):
        options = command_options(app, command)
        for item in dataclasses.fields(CommandOptions):
            declared = item.metadata[OPTION].help
            help_text = declared if isinstance(declared, str) else declared[command]
            assert options[item.name][1] == help_text, (command, item.name)
    assert command_options(app, "compare")["rounds"][1] != \
        command_options(app, "advise")["rounds"][1]  # their defaults differ, so do their words


def test_compare_and_advise_keep_every_flag() -> None:
    shared = {"--workload", "--model", "--sizes", "--device", "--framework", "--rounds",
              "--quick", "--no-quick", "--out", "--timeout", "--report", "--no-report",
              "--ceilings", "--no-ceilings", "--predict-for"}
    compare_only = {"--variant", "--param", "--data", "--probe-ceilings", "--seed", "--details",
                    "--executor", "--partition-cpu", "--partition-gpu", "--time-limit",
                    "--pending-limit", "--sbatch", "--resume", "--cancel-running",
                    "--no-cancel-running"}
    flags = {command: {flag for names, _ in command_options(app, command).values()
                       for flag in names} for command in ("compare", "advise")}
    assert flags["compare"] == shared | compare_only
    assert flags["advise"] == shared | {"--budget"}


@dataclass(frozen=True)
class Planted:
    """A new shared option group, as a later change would add one: fields only."""

    colour: str = field(default="red", metadata=declare(
        {"paint": "The colour to paint.", "sketch": "The colour to sketch."}))
    loud: bool = field(default=False, metadata=declare("Say it loudly.", "--loud"))


PLANTED_APP = typer.Typer()
called: list[tuple[str, Planted, int]] = []


@PLANTED_APP.command()
@takes_options("paint")
def paint(planted: Planted, coats: Annotated[int, typer.Option(help="Coats.")] = 1) -> None:
    called.append(("paint", planted, coats))


@PLANTED_APP.command()
@takes_options("sketch")
def sketch(planted: Planted) -> None:
    called.append(("sketch", planted, 0))


def test_a_field_of_an_option_group_is_an_option_of_every_command_taking_it() -> None:
    called.clear()
    runner = CliRunner()
    ran = runner.invoke(PLANTED_APP, ["paint", "--colour", "blue", "--loud", "--coats", "3"])
    assert ran.exit_code == 0, ran.output
    ran = runner.invoke(PLANTED_APP, ["sketch"])
    assert ran.exit_code == 0, ran.output
    assert called == [("paint", Planted("blue", True), 3), ("sketch", Planted("red", False), 0)]
    assert command_options(PLANTED_APP, "paint") == {
        "colour": (["--colour"], "The colour to paint."), "loud": (["--loud"], "Say it loudly."),
        "coats": (["--coats"], "Coats.")}
    assert command_options(PLANTED_APP, "sketch")["colour"] == (["--colour"],
                                                                 "The colour to sketch.")
    refused = runner.invoke(PLANTED_APP, ["sketch", "--coats", "2"])
    assert refused.exit_code == 2  # an option of one command only stays that command's

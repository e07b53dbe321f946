"""The options' text made values, and bad input said as one line with exit code 2."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer

from harness.spec import BadInput

EXIT_BAD_INPUT = 2
EXIT_NOT_WRITTEN = 3  # the README's code for results or a report that could not be written


def fail_input(message: str) -> NoReturn:
    """One clear line, exit 2, nothing written."""
    print(f"harness: error: {message}", file=sys.stderr)  # plain print: rich would wrap it
    raise typer.Exit(EXIT_BAD_INPUT)


def fail_write(message: str) -> NoReturn:
    """A file the command had to write could not be (a full disk, a read-only mount): one
    line, exit 3; whatever was saved before stays as it was."""
    print(f"harness: error: {message}", file=sys.stderr)
    raise typer.Exit(EXIT_NOT_WRITTEN)


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

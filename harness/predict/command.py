"""`harness profile-device`: measure a device profile, list the shipped ones, or show one.

Registered on the CLI's app in harness/cli.py (one line there); bad input is one line on
stderr and exit 2 with nothing written, as everywhere in the CLI; a measurement that broke
is exit 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.core.units import format_bytes, format_seconds, three_digits
from harness.predict.make import (
    MeasurementFailed,
    add_jax,
    default_device,
    default_out,
    measure_profile,
)
from harness.predict.profile import (
    PROFILES_DIR,
    Entry,
    Profile,
    Row,
    load_profile,
    read_profile,
    resolve,
    shipped_names,
    write_profile,
)
from harness.spec import BadInput

EXIT_FAILED, EXIT_BAD_INPUT = 1, 2


def rate_text(row: Row) -> str:
    rate = row.rate()
    if rate is None:
        return ""
    if row.flops is not None:
        return f"  {three_digits(rate / 1e12)} TFLOP/s" if rate >= 1e12 else \
            f"  {three_digits(rate / 1e9)} GFLOP/s"
    return f"  {format_bytes(rate)}/s"


def row_text(row: Row) -> str:
    params = " ".join(f"{key}={value}" for key, value in row.params.items())
    if row.counts:
        counts = " ".join(f"{key} {three_digits(value)}" for key, value in row.counts.items())
        return f"    {params}: {counts}"
    spread = f" (IQR {format_seconds(row.iqr_s)})" if row.iqr_s is not None else ""
    contended = "  [contended]" if row.contended else ""
    return f"    {params}: {format_seconds(row.median_s)}{spread}{rate_text(row)}{contended}"


def entry_lines(name: str, entry: Entry) -> list[str]:
    if entry.absent:
        return [f"  {name}: absent ({entry.absent})"]
    return [f"  {name}:", *(row_text(row) for row in entry.rows)]


def summary_lines(profile: Profile) -> list[str]:
    """What a profile holds, one line per row: medians, spreads and rates."""
    lines = [f"{profile.identity()}",
             f"  framework {profile.framework}, schema_version {profile.schema_version}, "
             f"host {profile.host.get('cpu_model', '?')}, measured in "
             f"{format_seconds(profile.measured_s)}"]
    for name, entry in profile.entries.items():
        lines += entry_lines(name, entry)
    return lines


def list_lines(folder: Path = PROFILES_DIR) -> list[str]:
    """One line per shipped profile: its name and what it is."""
    names = shipped_names(folder)
    if not names:
        return [f"no shipped profiles (in {folder})"]
    return [f"{name}: {load_profile(name, folder).identity()}" for name in names]


def bad_input(message: str) -> None:
    print(f"harness: error: {message}", file=sys.stderr)  # plain print: one line, unwrapped
    raise typer.Exit(EXIT_BAD_INPUT)


def profile_device(
    device: Annotated[str | None, typer.Option(
        help="cpu or cuda:N (default: cuda:0 where a GPU is visible, else cpu).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Where to write the profile (default: ./<device name>[-quick].json).")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="Fewer sizes and samples (~30 s on a GPU): a smoke test, not a "
                        "profile to predict from.")] = False,
    list_shipped: Annotated[bool, typer.Option(
        "--list", help="List the profiles shipped with the harness and exit.")] = False,
    show: Annotated[str | None, typer.Option(
        help="Print what a profile (a shipped name or a file) holds and exit.")] = None,
    timeout: Annotated[float, typer.Option(
        help="Seconds the measuring may take before it is stopped.")] = 900.0,
    add_jax_to: Annotated[str | None, typer.Option(
        "--add-jax", help="Measure only the JAX rows (jax.dispatch, jax.kernel_floor) and add "
                          "them to this profile (a file or a shipped name), or make them "
                          "again; written back to it unless --out.")] = None,
) -> None:
    """Measure a device profile: dispatch and launch cost, kernel floor, matmul, conv and
    memory rates, host<->device copies, sync and CUDA-graph costs, kernels per common op,
    the host CPU's single-thread speed (docs/predict.md)."""
    try:
        if list_shipped:
            typer.echo("\n".join(list_lines()))
            return
        if show is not None:
            typer.echo("\n".join(summary_lines(load_profile(show))))
            return
        if add_jax_to is not None:
            path = resolve(add_jax_to)
            chosen = device or str(read_profile(path).device.get("name") or default_device())
            profile = add_jax(path, chosen, quick, timeout)
            out = out or path
        else:
            chosen = device or default_device()
            profile = measure_profile(chosen, quick, timeout)
    except BadInput as exc:
        bad_input(str(exc))
        return
    except MeasurementFailed as exc:
        print(f"harness: {exc}", file=sys.stderr)
        raise typer.Exit(EXIT_FAILED) from None
    path = out or default_out(profile)
    write_profile(profile, path)
    read_profile(path)  # what was written loads back
    typer.echo("\n".join(summary_lines(profile)))
    typer.echo(f"wrote {path}")

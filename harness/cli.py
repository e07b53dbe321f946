"""The `harness` command line: compare, list, env, report.

Never imports a framework: everything framework-specific runs in worker processes.
Bad input is one line on stderr and exit code 2; a failed cell is exit code 1 with every
result still written; Ctrl-C, SIGTERM and SIGHUP save what finished, stop the running worker and
exit 128 + the signal's number (130, 143, 129).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness import envinfo, interrupt, registry, store
from harness.backend import canonical_device, parse_cuda_index
from harness.memory import memory_text
from harness.progress import CellEtaColumn
from harness.runner import RunOptions, run_json_child, run_matrix
from harness.spec import BadInput, Cell, Status, WorkloadSpec, expand_matrix, worst_status
from harness.stats import CaseSummary, implausibility, summarize_result, work_of

app = typer.Typer(
    help="Run the same workloads in PyTorch and TensorFlow on CPU and GPU, timed honestly.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
# Wide even when piped: the results table must not fold into unreadable columns.
console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True)

EXIT_FAILED_CELL = 1
EXIT_BAD_INPUT = 2
EXIT_SIGNAL_BASE = 128  # shells' convention: killed by signal N -> 128 + N


def fail_input(message: str) -> None:
    """One clear line, exit 2, nothing written."""
    print(f"harness: error: {message}", file=sys.stderr)  # plain print: rich would wrap it
    raise typer.Exit(EXIT_BAD_INPUT)


def split_names(values: list[str] | None) -> list[str]:
    """`--x a --x b,c` -> [a, b, c]."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


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


def resolve_devices(values: list[str] | None) -> list[str]:
    """Canonical device names; default cpu plus every GPU nvidia-smi lists."""
    if not values:
        return ["cpu"] + [f"cuda:{index}" for index in range(len(envinfo.visible_gpus()))]
    devices = []
    for name in split_names(values):
        device = canonical_device(name)
        if device != "cpu" and parse_cuda_index(device) is None:
            raise BadInput(f"unknown device {name!r}; valid: cpu, cuda, cuda:N")
        if device not in devices:
            devices.append(device)
    return devices


def resolve_frameworks(spec: WorkloadSpec, values: list[str] | None) -> list[str]:
    names = split_names(values) or list(spec.frameworks)
    for name in names:
        registry.check_framework_name(name)
    return list(dict.fromkeys(names))


def resolve_variants(spec: WorkloadSpec, value: str | None) -> list[str]:
    if value is None:
        return list(spec.variants_by_default)
    if value == "all":
        return list(spec.variants)
    names = split_names([value])
    for name in names:
        if name not in spec.variants:
            raise BadInput(f"unknown variant {name!r} for {spec.name}; valid: "
                           f"{', '.join(spec.variants)}, all")
    return names


def check_writable(out: Path) -> None:
    """Refuse an --out that cannot hold a run folder, before any cell runs.

    Why try rather than ask: os.access says yes to root on a read-only mount and knows nothing
    of pseudo-filesystems such as /proc; creating the folders and a probe file is the honest
    test. Whatever the probe created is removed again when it fails.
    """
    try:
        missing = _missing_folders(out)
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot be checked ({exc.strerror or exc})") from None
    created: list[Path] = []
    try:
        for folder in missing:
            folder.mkdir()
            created.append(folder)
        handle, probe = tempfile.mkstemp(dir=out, prefix=".harness-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        for folder in reversed(created):
            with suppress(OSError):
                folder.rmdir()
        raise BadInput(f"--out {out}: not writable ({exc.strerror or exc})") from None


def _missing_folders(out: Path) -> list[Path]:
    """The folders that must be created for `out` to exist, outermost first."""
    missing = []
    existing = out
    while not existing.exists():
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        raise BadInput(f"--out {out}: {existing} is not a folder")
    return missing[::-1]


class RunRecorder:
    """Keeps run.json and measurements.csv on disk up to date after every cell."""

    def __init__(self, run_dir: Path, spec: WorkloadSpec, document: dict[str, Any]) -> None:
        self.run_dir, self.spec, self.document = run_dir, spec, document
        self.results: list[dict[str, Any]] = []
        self.rows: list[dict[str, Any]] = []

    def add(self, result: dict[str, Any]) -> None:
        self.results.append(result)
        work = {index: work_of(self.spec, case["case"])
                for index, case in enumerate(result.get("cases") or [])}
        self.rows.extend(store.case_rows(self.document["run_id"], self.document["host"]
                                         ["machine_label"], self.spec.sweep, result, work))
        self.document["cells"].append(result)
        self.save()

    def save(self, finished: bool = False, stopped_by: signal.Signals | None = None) -> None:
        """Write both files; `finished` stamps the end time, `stopped_by` the stop signal."""
        if finished:
            self.document["finished"] = time.time()
        self.document["interrupted"] = stopped_by is not None
        if stopped_by is not None:
            self.document["interrupted_by"] = stopped_by.name
        store.write_run(self.run_dir, self.document)
        store.write_measurements(self.run_dir, self.rows)


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def results_table(spec: WorkloadSpec, summaries: list[CaseSummary],
                  ceilings: dict[str, Any] | None = None) -> Table:
    table = Table(title=f"{spec.name}: median per call (IQR), cold first call apart")
    for column in ("variant", "framework", "device", spec.sweep, "status", "median", "IQR",
                   "cold", "rate", "peak mem", "check / reason"):
        table.add_column(column, overflow="fold")
    for row in summaries:
        rates = [f"{row.gflops:.3g} GFLOP/s" if row.gflops is not None else "",
                 f"{row.gbps:.3g} GB/s" if row.gbps is not None else ""]
        rate = ", ".join(filter(None, rates)) or "-"
        spread = _fmt_seconds(row.iqr_s) + (" noisy" if row.noisy else "")
        note = row.check if row.status == "ok" else (row.check + " " + row.reason).strip()
        flag = implausibility(row, (ceilings or {}).get(row.device), spec.bandwidth_ceiling)
        # The failure reason or check first, the suspicion last: both must stay readable.
        note = "; ".join(filter(None, [flag, note,
                                       f"SUSPECT: {row.suspect}" if row.suspect else ""]))
        table.add_row(row.variant, row.framework, row.device,
                      "" if row.size is None else str(row.size), row.status,
                      _fmt_seconds(row.median_s), spread, _fmt_seconds(row.cold_s), rate,
                      memory_text(row.peak_host_bytes, row.peak_device_bytes),
                      escape(note[:320]))  # reasons hold brackets: 'harness[torch]'
    return table


def exit_code_for(results: list[dict[str, Any]], stopped_by: signal.Signals | None) -> int:
    if stopped_by is not None:
        return EXIT_SIGNAL_BASE + stopped_by.value
    status = worst_status([Status(result["status"]) for result in results])
    return EXIT_FAILED_CELL if status in (Status.ERROR, Status.TIMEOUT, Status.INVALID) else 0


def render_report_safely(run_dir: Path) -> None:
    """Draw the run's report; a drawing failure must never cost the measurements."""
    try:
        from harness.report import render_report
    except ImportError as exc:
        errors.print(f"report skipped: {exc}")
        return
    try:
        written = render_report([run_dir], run_dir, html=True)
        console.print(f"report: {len(written)} files in {run_dir}")
    except KeyboardInterrupt:  # the results are complete; only the pictures are missing
        errors.print(f"report interrupted; results are in {run_dir}")
    except Exception as exc:  # noqa: BLE001 - the results are already safe on disk
        errors.print(f"report failed ({type(exc).__name__}: {exc}); results are in {run_dir}")


@app.command()
def compare(
    workload: Annotated[str, typer.Option(help="Workload name (see `harness list`).")] = "matmul",
    framework: Annotated[Optional[list[str]], typer.Option(
        help="torch, tensorflow, numpy; repeat or comma-separate. Default: all for the workload.",
    )] = None,
    device: Annotated[Optional[list[str]], typer.Option(
        help="cpu, cuda, cuda:N; repeat or comma-separate. Default: cpu plus every visible GPU.",
    )] = None,
    variant: Annotated[Optional[str], typer.Option(
        help="Variant name(s), comma-separated, or 'all'. Default: the as-written one.")] = None,
    sizes: Annotated[Optional[str], typer.Option(
        help="Comma list for the workload's sweep parameter (matmul: n).")] = None,
    param: Annotated[Optional[list[str]], typer.Option(
        help="NAME=VALUE workload parameter; repeatable (see `harness list`).")] = None,
    data: Annotated[Optional[Path], typer.Option(help="MNIST .npz file to use.")] = None,
    quick: Annotated[bool, typer.Option(help="CI-sized sizes and a short timing budget.")] = False,
    out: Annotated[Path, typer.Option(help="Folder that receives the run folder.")] = Path(
        "results"),
    timeout: Annotated[float, typer.Option(
        help="Seconds before a cell's worker is killed.")] = 900.0,
    report: Annotated[bool, typer.Option(help="Draw the report into the run folder.")] = True,
    ceilings: Annotated[bool, typer.Option(
        help="Measure each device's peak FLOP/s and bandwidth first (for plausibility).")] = True,
) -> None:
    """Run WORKLOAD for every framework x device cell, each in its own process."""
    try:
        spec = registry.load_workload(workload)
        frameworks = resolve_frameworks(spec, framework)
        devices = resolve_devices(device)
        variants = resolve_variants(spec, variant)
        overrides = parse_param_overrides(param)
        params = spec.resolve_params(overrides, parse_sizes(sizes), quick)
        if data is not None:
            if spec.validate_data is None:
                raise BadInput(f"--data applies to the MNIST workloads, not {spec.name}")
            spec.validate_data(data)
            params["data"] = str(data.resolve())
        if not timeout > 0:
            raise BadInput(f"--timeout {timeout:g}: must be > 0 seconds")
        check_writable(out)
    except BadInput as exc:
        fail_input(str(exc))
    cells = expand_matrix(spec.name, variants, frameworks, devices, params, quick)
    document = {
        "command": sys.argv, "started": time.time(), "finished": None, "workload": spec.name,
        "sweep": spec.sweep, "params": params, "quick": quick, "timeout_s": timeout,
        "hints": spec.report_hints(),
    }
    with interrupt.stop_on_signals():
        run_dir, recorder, stopped_by = run_cells(spec, cells, devices, document, out, timeout,
                                                  ceilings)
    # Outside the handlers: the cells are saved, a signal now only stops the drawing.
    if stopped_by is None and report:
        render_report_safely(run_dir)
    console.print(f"results: {run_dir}")
    raise typer.Exit(exit_code_for(recorder.results, stopped_by))


def run_cells(spec: WorkloadSpec, cells: list[Cell], devices: list[str],
              document: dict[str, Any], out: Path, timeout: float,
              ceilings: bool) -> tuple[Path, RunRecorder, signal.Signals | None]:
    """Measure, run and save every cell; a stop signal ends it early with what finished saved.

    Returns the run folder, its recorder and the stop signal (None when every cell ran).
    """
    run_dir = store.new_run_dir(out, spec.name)
    document = {"run_id": run_dir.name, **document, "host": envinfo.host_metadata(),
                "cells": []}
    recorder = RunRecorder(run_dir, spec, document)
    recorder.save()  # a readable run folder from the start, even if stopped in the ceilings
    console.print(f"run folder: {run_dir}  ({len(cells)} cells)")
    if ceilings:
        document["ceilings"] = measure_ceilings(devices, largest_square_matmul(spec, cells))
        recorder.save()
    if interrupt.requested() is None:
        _run_with_progress(cells, RunOptions(timeout_s=timeout), recorder)
    stopped_by = interrupt.requested()
    recorder.save(finished=True, stopped_by=stopped_by)
    summaries = [row for result in recorder.results for row in summarize_result(spec, result)]
    console.print(results_table(spec, summaries, document.get("ceilings")))
    if spec.scaling:  # data-parallel runs: throughput and efficiency per process
        from harness.report.scaling import console_lines

        for line in console_lines(document):
            console.print(line, markup=False)
    if stopped_by is not None:
        errors.print(f"interrupted by {interrupt.describe(stopped_by)}: "
                     f"{len(recorder.results)} finished cells saved in {run_dir}")
    return run_dir, recorder, stopped_by


def largest_square_matmul(spec: WorkloadSpec, cells: list[Cell]) -> int | None:
    """The n of a square matmul doing the run's largest call's FLOPs (2n^3), for the probe."""
    if spec.flops is None:
        return None
    counts = [spec.flops(case) for cell in cells
              for case in spec.cases_for(cell.params, cell.variant)]
    largest = max((count for count in counts if count), default=None)
    return round((largest / 2) ** (1 / 3)) if largest else None


def measure_ceilings(devices: list[str], largest_n: int | None) -> dict[str, Any]:
    """Peak FLOP/s and bandwidth per device, measured before the cells while the machine idles."""
    from harness import ceilings as ceilings_module

    measured: dict[str, Any] = {}
    with errors.status("measuring the machine's ceilings (--no-ceilings skips this)"):
        for device in devices:
            if interrupt.requested() is not None:
                break
            measured[device] = ceilings_module.measure(device, largest_n)
    return measured


def _run_with_progress(cells: list[Cell], options: RunOptions, recorder: RunRecorder) -> bool:
    """run_matrix with a progress bar on stderr; False when a stop signal ended it early."""
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total}"), TimeElapsedColumn(), CellEtaColumn(), console=errors,
                  transient=True) as bar:
        task = bar.add_task("cells", total=len(cells))

        def on_result(cell: Cell, result: dict[str, Any]) -> None:
            recorder.add(result)
            bar.update(task, advance=1, description=f"{cell.label}: {result['status']}")

        return run_matrix(cells, options, on_result)


@app.command("list")
def list_workloads() -> None:
    """Workloads, their variants and parameters (default / --quick)."""
    for name in registry.WORKLOADS:
        try:
            spec = registry.load_workload(name)
        except ImportError as exc:
            console.print(f"{name}: not available ({exc})")
            continue
        console.print(f"[bold]{name}[/bold]: {spec.summary}")
        console.print(f"  frameworks: {', '.join(spec.frameworks)}; variants: "
                      f"{', '.join(spec.variants)} "
                      f"(default: {', '.join(spec.variants_by_default)})")
        console.print(f"  --sizes sets: {spec.sweep}")
        for param_name, p in spec.params.items():
            console.print(f"  --param {param_name}=  default {p.default!r}, quick {p.quick!r}: "
                          f"{p.help}", markup=False)


def probe_framework(name: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """Ask a child process what a framework sees (the parent never imports it)."""
    installed, reason = registry.framework_installed(name)
    if not installed:
        return {"framework": name, "installed": False, "reason": reason}
    info, why_not = run_json_child("harness.probe", [name], Cell("probe", "-", name, "cuda:0"),
                                   timeout_s)
    if info is None:
        return {"framework": name, "installed": True, "reason": f"probe failed: {why_not}"}
    return info


@app.command()
def env(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Host, frameworks (installed, version, devices, threads)."""
    document = {"host": envinfo.host_metadata(),
                "frameworks": [probe_framework(name) for name in registry.FRAMEWORKS]}
    if as_json:
        console.print_json(json.dumps(document))
        return
    host = document["host"]
    memory = host["memory_bytes"] / 2**30 if host["memory_bytes"] else float("nan")
    console.print(f"host: {host['hostname']}  cpu: {host['cpu_model']}  cores: {host['cores']}  "
                  f"memory: {memory:.1f} GiB  python: {host['python']}  os: {host['os']}")
    console.print(f"gpus (nvidia-smi): {', '.join(host['gpus']) or 'none'}")
    table = Table(title="frameworks")
    for column in ("framework", "installed", "version", "devices", "threads / note"):
        table.add_column(column, overflow="fold")
    for info in document["frameworks"]:
        devices = ", ".join(f"{d['name']} ({d['description']})" for d in info.get("devices", []))
        table.add_row(info["framework"], "yes" if info["installed"] else "no",
                      info.get("version") or "-", devices or "-",
                      escape(json.dumps(info["threads"]) if info.get("threads")
                             else info.get("reason", "")))
    console.print(table)


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
    from harness.export import ExportError, export_runs

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
) -> None:
    """Per case: ratio of medians B/A, Mann-Whitney U significance, faster/slower/same."""
    from harness.diff import diff_runs, print_diff

    if not threshold >= 0 or (fail_on_regression is not None and not fail_on_regression >= 0):
        fail_input("--threshold and --fail-on-regression take a percentage >= 0")
    try:
        result = diff_runs(run_a, run_b, threshold, fail_on_regression)
    except store.StoreError as exc:
        fail_input(str(exc))
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
    else:
        print_diff(console, result)
    raise typer.Exit(EXIT_FAILED_CELL if result.regressions else 0)


def harness_version() -> str:
    """The installed package's version (pyproject.toml), or why there is none."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("harness")
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



def main() -> None:
    app()


if __name__ == "__main__":
    main()

"""Energy per step beside time per step, the GPU's state per case, and CUDA-graph capture.

Driven by run.json only: each case's extra['energy'] (harness.measure.energy: NVML's board
counter on GPU cells, RAPL packages on CPU cells, each with its status and reason) and
extra['gpu_state'] (harness.measure.gpustate), read as the typed records of
harness.data.records (CaseResult.energy, CaseResult.gpu_state), which the case table's rows
carry (harness.analysis.casetable.run_rows): the view's rows are those CaseRows, their times
the table's. The figure reported is the total the counter saw, idle included, per step; the
share above the idle power measured before the cell is shown beside it. A verdict compares a
GPU cell with the CPU cell of the same framework, variant and size: "GPU 3.9x faster and 2.1x
less energy per step" - the GPU's board against the CPU's packages, which is what each device
itself drew (the host under a GPU cell is not in the GPU's figure; it is shown apart where
RAPL was readable).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from harness.analysis.casetable import CaseRow, run_rows
from harness.analysis.noise import judge_gap
from harness.core.units import (
    device_kind,
    digits,
    format_joules,
    format_ratio,
    format_seconds,
    said_once,
    series,
    size_label,
)
from harness.data.casekey import CaseKey
from harness.data.records import (
    NOT_RECORDED,
    CaseEnergy,
    EnergyRecord,
    GpuProcesses,
    GpuReadings,
    GpuState,
    WhileTimed,
)
from harness.data.results import RunDocument
from harness.report.figure import Figure, Line, carried, versus
from harness.report.views import REPORT, View

EXPLANATION = (
    "Energy from the hardware's counters over the timed calls (or an energy pass of the same "
    "calls where the timed window was under 1 s): GPU cells read NVML's board energy counter, "
    "CPU cells RAPL's package counters; never an estimate. The figure per step is the total the "
    "counter saw, idle power included; 'above idle' subtracts the idle power measured before "
    "the cell over the same window. Both counters cover the whole device (a GPU board, the CPU "
    "packages): another process's work would be in them too, which the GPU state and the "
    "host-load check flag. Unavailable counters say why."
)


class EnergyView(View):
    """Energy per step beside time per step, and the GPU-vs-CPU verdict in both."""

    name = "energy"
    order = 450
    scope = REPORT
    heading = "Energy per step"

    def compute(self, context: Any) -> pd.DataFrame:
        return pd.DataFrame({CASE: energy_table(context.documents)}, dtype=object)

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        rows: list[CaseRow] = list(table[CASE])
        return [EXPLANATION, "",
                *[carried(f"- {line}", line) for line in gpu_vs_cpu_sentences(rows)],
                *[carried(f"- {line}", line) for row in rows if measured_record(row) is not None
                  for line in [case_line(row)]],
                *[f"- {line}" for line in unmeasured_lines(
                    [row for row in rows if measured_record(row) is None])]]


CASE = "case"  # the energy view's one column: the case-table rows (CaseRow) of energy_table


class GpuStateView(View):
    """Per GPU case: clocks, temperature, power, throttling and CUDA-graph capture."""

    name = "gpu-state"
    order = 460
    scope = REPORT
    heading = "GPU state per case"

    def compute(self, context: Any) -> pd.DataFrame:
        return pd.DataFrame({"line": gpu_state_lines(context.documents)})

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        return [GPU_STATE_EXPLANATION, "", *[f"- {line}" for line in table["line"]]]


GPU_STATE_EXPLANATION = (
    "From NVML before, during (polled every 0.1 s while timed) and after each case; a case "
    "timed while throttled by power or temperature, or shared with another compute process, "
    "is SUSPECT.")


def primary(row: CaseRow) -> EnergyRecord:
    """What the case's own device drew (harness.data.records.CaseEnergy.primary)."""
    return (row.energy or CaseEnergy()).primary(device_kind(row.device))


def measured_record(row: CaseRow) -> EnergyRecord | None:
    """The case's own counter's record where it measured joules per step, else None."""
    record = primary(row)
    return record if record.ok and record.joules_per_step is not None else None


def joules(row: CaseRow) -> float | None:
    record = measured_record(row)
    return None if record is None else record.joules_per_step


def step_s(row: CaseRow) -> float | None:
    """The median time per step of a timed case (all rounds' samples pooled)."""
    return row.median_s if row.valid else None


def host_joules(row: CaseRow) -> float | None:
    """The host's CPU packages under a GPU cell, per step, where RAPL was readable."""
    host = (row.energy or CaseEnergy()).host
    gpu = device_kind(row.device) == "gpu"
    return host.joules_per_step if gpu and host is not None and host.ok else None


def _window_step_s(record: EnergyRecord) -> float | None:
    """Seconds per step over the energy window: window / calls / steps per call."""
    if not record.window_s or not record.calls:
        return None
    return record.window_s / record.calls / (record.steps_per_call or 1)


def energy_table(documents: Sequence[RunDocument]) -> list[CaseRow]:
    """Every case of these runs whose own device's counter left a record: its case-table row
    (harness.analysis.casetable.run_rows, which carries the records); the latest run wins."""
    latest: dict[CaseKey, CaseRow] = {}
    for row in (row for document in documents for row in run_rows(document)):
        latest.pop(row.key, None)  # where it stood in the runs' order: at its latest run
        latest[row.key] = row
    return [row for row in latest.values() if primary(row).status != NOT_RECORDED]


# The figures of the energy lines (family ENERGY_FAMILY, harness.audit.energy), by name. A
# record's subject is its case in its run; a GPU-vs-CPU record's second case the CPU cell's
# (harness.report.figure.versus), its WAY whether the GPU is faster / uses less energy.
ENERGY_FAMILY = "energy"
JOULES, POWER, IDLE = "joules per step", "mean power", "idle power"
ABOVE_IDLE, HOST_JOULES = "joules per step above idle", "host CPU packages joules per step"
WINDOW, WINDOW_STEP = "energy window", "energy window per step"
TIMED, SPEED, ENERGY_RATIO = "median per step timed", "GPU vs CPU speed", "GPU vs CPU energy"
WAY = "way"
# The lines' words; the audit reads the records, never these.
CASE_SENTENCE = ("{where}: {joules} per step over the energy window ({watts} W mean x "
                 "{window_step} per step, {window} s in all; {source}; {counter}, idle included")
ABOVE_IDLE_PHRASE = "; {above} above the {idle} W idle"
TIMED_PHRASE = "); {timed} per step timed ({pooled})"
HOST_PHRASE = "; host CPU packages {host} per step"
SPEED_PHRASE = "GPU {ratio} {way}"
ENERGY_PHRASE = "; {ratio} {way} energy per step ({gpu} GPU board vs {cpu} CPU packages)"


def energy_subject(row: CaseRow) -> dict[str, str]:
    """A case of one run (a row made by hand may name no run: its records name none)."""
    return {"run": row.run_id, "machine": row.key.machine, "framework": row.framework,
            "device": row.device, "variant": row.variant, "size": row.key.size_label}


def energy_figure(name: str, value: float, unit: str, text: str,
                  subject: dict[str, str]) -> Figure:
    return Figure(ENERGY_FAMILY, name, float(value), unit, text, subject)


def verdict(gpu: CaseRow, cpu: CaseRow) -> str:
    """'GPU 3.9x faster (beyond the noise, ...); 2.1x less energy per step (...)', or why the
    energy half is missing. The speed is judged by the one noise rule (IQRs and rounds)."""
    gpu_s, cpu_s = step_s(gpu), step_s(cpu)
    if gpu_s is None or cpu_s is None:
        return ""
    pair = {**energy_subject(gpu), **versus(run=cpu.run_id, device=cpu.device)}
    speed = cpu_s / gpu_s
    way = "faster" if speed >= 1 else "slower"
    shown = [energy_figure(SPEED, speed if speed >= 1 else 1 / speed, "x",
                           format_ratio(speed if speed >= 1 else 1 / speed), {**pair, WAY: way})]
    text = SPEED_PHRASE.format(ratio=shown[0].text, way=way)
    text += f" ({judge_gap(gpu.noise, cpu.noise).phrase()})"
    gpu_j, cpu_j = joules(gpu), joules(cpu)
    if gpu_j is not None and cpu_j is not None and gpu_j > 0:
        ratio = cpu_j / gpu_j
        less = "less" if ratio >= 1 else "more"
        shown += [energy_figure(ENERGY_RATIO, ratio if ratio >= 1 else 1 / ratio, "x",
                                format_ratio(ratio if ratio >= 1 else 1 / ratio),
                                {**pair, WAY: less}),
                  energy_figure(JOULES, gpu_j, "J", format_joules(gpu_j), energy_subject(gpu)),
                  energy_figure(JOULES, cpu_j, "J", format_joules(cpu_j), energy_subject(cpu))]
        text += ENERGY_PHRASE.format(ratio=shown[1].text, way=less, gpu=shown[2].text,
                                     cpu=shown[3].text)
        return Line(text, shown)
    missing = [f"{kind} energy {primary(row).status}: {primary(row).reason}"
               for kind, row in (("GPU", gpu), ("CPU", cpu)) if joules(row) is None]
    return Line(text + "; " + "; ".join(missing), shown)


def gpu_vs_cpu_sentences(rows: list[CaseRow]) -> list[str]:
    """One verdict per (machine, workload, framework, variant, size) with a GPU and a CPU cell."""
    lines = []
    for key, group in _grouped(rows, lambda row: row.key.without("device")).items():
        cpus = [row for row in group if device_kind(row.device) == "cpu"]
        for gpu, cpu in ((gpu, cpus[0]) for gpu in group
                         if device_kind(gpu.device) == "gpu" and cpus):
            text = verdict(gpu, cpu)
            if text:
                lines.append(carried(f"{key.experiment} {key.framework} {key.variant}, size "
                                     f"{key.size_label} ({key.machine}): "
                                     f"{gpu.device} vs {cpu.device}: {text}", text))
    return lines


def _grouped(rows: list[CaseRow], by: Callable[[CaseRow], Any]) -> dict[Any, list[CaseRow]]:
    """The rows by BY's value, in the order each value first appears."""
    groups: dict[Any, list[CaseRow]] = {}
    for row in rows:
        groups.setdefault(by(row), []).append(row)
    return groups


def _cell_name(row: CaseRow) -> str:
    return f"{row.key.experiment} {row.framework} {row.device} {row.variant}"


def case_line(row: CaseRow) -> str:
    """'<framework> cuda:0 <variant>, size 32: 0.41 ms and 62 mJ per step (...)'."""
    where = f"{_cell_name(row)}, size {row.key.size_label}"
    record = measured_record(row)
    if record is None:
        return (f"{where}: {format_seconds(step_s(row))} per step; energy "
                f"{primary(row).status}: {primary(row).reason}")
    # Joules, power and the time they imply come from one window, printed together; the
    # pooled median (all rounds' samples) is named as such where it is shown too.
    figures = case_figures(row, record)
    shown = {name: figure.text for name, figure in figures.items()}
    text = CASE_SENTENCE.format(where=where, joules=shown[JOULES], watts=shown[POWER],
                                window_step=shown.get(WINDOW_STEP, "-"), window=shown[WINDOW],
                                source=source_phrase(record.source), counter=record.counter or "")
    if ABOVE_IDLE in shown:
        text += ABOVE_IDLE_PHRASE.format(above=shown[ABOVE_IDLE], idle=shown[IDLE])
        if remembered_from(record):
            text += f", remembered from {remembered_from(record)}"
    pooled = ("median of all rounds' samples" if len(row.medians_by_round) > 1
              else "median of the timed samples")
    text += TIMED_PHRASE.format(timed=shown.get(TIMED, "-"), pooled=pooled)
    if HOST_JOULES in shown:
        text += HOST_PHRASE.format(host=shown[HOST_JOULES])
    return Line(text + (f"; SUSPECT: {row.gpu_suspect}" if row.gpu_suspect else ""),
                figures.values())


def remembered_from(record: EnergyRecord) -> str:
    """HH:MM where the idle power was read back from the machine's, '' where it was measured."""
    return record.idle_remembered_from


def case_figures(row: CaseRow, record: EnergyRecord) -> dict[str, Figure]:
    """The records of one measured case's energy line, by name."""
    window = _window_step_s(record) or step_s(row)
    printed: list[tuple[str, float | None, str, Callable[[float], str]]] = [
        (JOULES, record.joules_per_step, "J", format_joules),
        (POWER, record.watts_mean, "W", _whole),
        (WINDOW_STEP, window, "s", format_seconds),
        (WINDOW, record.window_s, "s", lambda value: digits(value, 2)),
        (TIMED, step_s(row), "s", format_seconds)]
    if record.joules_per_step_above_idle is not None:
        printed += [(ABOVE_IDLE, record.joules_per_step_above_idle, "J", format_joules),
                    (IDLE, record.idle_watts, "W", _whole)]
    printed.append((HOST_JOULES, host_joules(row), "J", format_joules))
    return {name: energy_figure(name, value, unit, shown(value), energy_subject(row))
            for name, value, unit, shown in printed if value is not None and value == value}


def _whole(value: float) -> str:
    return f"{value:.0f}"


# EnergyRecord.source as the worker writes it (harness.measure.casewatch): the timed samples'
# own window, or an energy pass of more calls after the check where that window was too short.
TIMED_SOURCE, PASS_SOURCE = "the timed samples", "an energy pass"


def source_phrase(source: Any) -> str:
    """Where a figure's window came from, in a few words: 'from the timed samples' or
    'separate pass (the timed samples lasted 0.3 s, ...)'; the stored text where it is neither
    (another worker's wording), 'source not recorded' where there is none (older runs)."""
    text = str(source or "")
    if text == TIMED_SOURCE:
        return "from the timed samples"
    if text.startswith(PASS_SOURCE):
        why = text[text.find("("):] if "(" in text else ""
        return f"separate pass {why}".strip()
    return text or "source not recorded"


def unmeasured_lines(rows: list[CaseRow]) -> list[str]:
    """One line per reason energy was not measured, naming its cells (not one per case)."""
    lines = []
    for (status, reason), group in _grouped(
            rows, lambda row: (primary(row).status, primary(row).reason)).items():
        cells = sorted({_cell_name(row) for row in group})
        lines.append(f"energy {status} ({len(group)} case{'s' if len(group) != 1 else ''}: "
                     f"{', '.join(cells)}): {reason}")
    return lines


def gpu_state_lines(documents: Sequence[RunDocument]) -> list[str]:
    """Per GPU case: clocks, temperature, power and throttling while timed; CUDA graphs."""
    lines = []
    for document in documents:
        for result in document.cells:
            name = f"{result.workload} {result.framework} {result.device} {result.variant}"
            for case in result.cases:
                where = f"{name}, size {size_label(case.case.get(document.sweep))}"
                state = case.gpu_state
                if state is not None:
                    lines.append(f"{where}: {state_text(state)}")
                graphs = case.extra.get("cuda_graphs")
                if graphs:
                    lines.append(f"{where}: {graphs_text(graphs)}")
    return lines


def state_text(state: GpuState) -> str:
    if not state.ok:
        return f"GPU state {state.status}: {state.reason}"
    timed = state.while_timed or WhileTimed()
    before, after = state.before or GpuReadings(), state.after or GpuReadings()
    processes = state.processes or GpuProcesses()
    text = (f"SM clock {timed.sm_clock_mhz_min}-{timed.sm_clock_mhz_max} MHz "
            f"while timed (max {state.max_sm_clock_mhz}), memory clock "
            f"{before.memory_clock_mhz} MHz, {before.temperature_c} -> "
            f"{after.temperature_c} C, {_watts(before.power_w)} -> "
            f"{_watts(after.power_w)} (limit {_watts(before.power_limit_w)}); "
            f"throttle reasons polled: {timed.throttles_text()}; other compute processes: "
            f"{len(processes.others or [])}"
            + (f" ({processes.note})" if processes.note else ""))
    return text + (f"; SUSPECT: {state.suspect}" if state.suspect else "")


def _watts(value: Any) -> str:
    return "-" if value is None else f"{value:.0f} W"


class CudaGraphs(TypedDict, total=False):
    """A compiled step's `cuda_graphs` extra, as the torch backend stores it."""

    captured: bool
    expected: bool
    graphs: int
    skipped_graphs: int
    graph_breaks: dict[str, int]  # reason -> how often
    skips: list[str]  # why the compiler skipped CUDA graphs


def graphs_text(graphs: CudaGraphs) -> str:
    """Whether a compiled step's CUDA graphs were captured, and if not, the compiler's reasons."""
    breaks = graphs.get("graph_breaks") or {}
    skips = graphs.get("skips") or []
    head = ("CUDA graphs captured" if graphs.get("captured") else "CUDA graphs NOT captured")
    text = f"{head} ({graphs.get('graphs', '?')} compiled graphs, {sum(breaks.values())} " \
           "graph breaks)"
    if skips:
        text += "; the compiler skipped CUDA graphs: " + "; ".join(skips[:3])
    if breaks:
        text += "; graph breaks: " + "; ".join(f"{reason} (x{count})" for reason, count in
                                              list(breaks.items())[:3])
    return text


def energy_console_lines(document: RunDocument) -> list[str]:
    """For the CLI after its table: one line per cell with a measured energy, its sizes
    together ('energy, torch cuda:0: 24.2 / 25.5 / 36.3 mJ per step at batch 8 / 64 / 512;
    1.39x more / 1.34x less / 4.65x less than cpu'), then each counter that measured nothing
    once; none where the run has no energy record.

    How each figure was measured (counter, window, idle power) is not repeated per size here:
    summary.md says it per case, and energy_method_lines (--details) once per run where every cell
    shares it.
    """
    cells = _cells(energy_table([document]))
    lines = [cell_energy_line(rows, cells, document.sweep) for rows in cells.values()
             if any(joules(row) is not None for row in rows)]
    if not lines and not any(_cpu_of(key, cells) is not None for key in cells):
        return []  # e.g. a CPU-only run on a machine without RAPL: nothing to compare
    return lines + [f"energy: {kind} {status}: {reason}"
                    for kind, status, reason in _unmeasured_reasons(cells)]


def _cells(rows: list[CaseRow]) -> dict[CaseKey, list[CaseRow]]:
    """The rows per cell (their key without a size), in the run's order."""
    return _grouped(rows, lambda row: row.key.without("size_label"))


def _cpu_of(key: CaseKey, cells: dict[CaseKey, list[CaseRow]]) -> list[CaseRow] | None:
    """The CPU cell a GPU cell is compared with: same machine, framework and variant."""
    if device_kind(key.device) != "gpu":
        return None
    return next((rows for cell, rows in cells.items() if device_kind(cell.device) == "cpu"
                 and cell.without("device") == key.without("device")), None)


def cell_energy_line(rows: list[CaseRow], cells: dict[CaseKey, list[CaseRow]],
                     sweep: str) -> str:
    """'energy, torch cuda:0: 24.2 / 25.5 / 36.3 mJ per step at batch 8 / 64 / 512; 1.39x
    more / 1.34x less / 4.65x less than cpu' (the GPU's board against the CPU's packages)."""
    key = rows[0].key.without("size_label")
    several = len({cell.variant for cell in cells}) > 1
    name = f"{key.framework} {key.device}" + (f" {key.variant}" if several else "")
    text = (f"energy, {name}: {series([format_joules(joules(row)) for row in rows])} "
            f"per step{_at_sizes(rows, sweep)}")
    cpu = _cpu_of(key, cells)
    if cpu is not None:
        by_size = {row.key.size_label: joules(row) for row in cpu}
        ratios = [_energy_ratio(joules(row), by_size.get(row.key.size_label)) for row in rows]
        if any(ratio != "-" for ratio in ratios):
            text += f"; {' / '.join(ratios)} than {cpu[0].device}"
    return text


def _at_sizes(rows: list[CaseRow], sweep: str) -> str:
    """' at batch 8 / 64 / 512', or '' for a workload without a sweep."""
    sizes = [row.key.size_label for row in rows]
    return f" at {sweep} {' / '.join(sizes)}" if sweep and any(sizes) else ""


def _energy_ratio(gpu_joules: float | None, cpu_joules: float | None) -> str:
    """'1.34x less' (the GPU drew less per step), '1.39x more', or '-' where either is
    missing."""
    if gpu_joules is None or cpu_joules is None or gpu_joules <= 0 or cpu_joules <= 0:
        return "-"
    ratio = cpu_joules / gpu_joules
    return (f"{format_ratio(ratio)} less" if ratio >= 1 else f"{format_ratio(1 / ratio)} more")


def energy_method_lines(document: RunDocument) -> list[str]:
    """How each energy figure of the run was measured, for --details: what every measured cell
    shares said once ('energy, every cell: idle included; from the timed samples'), then each
    cell's own (its counter, windows, mean power, idle power, the host's packages)."""
    cells = _cells([row for row in energy_table([document]) if measured_record(row) is not None])
    several = len({key.variant for key in cells}) > 1
    clauses = {f"{key.framework} {key.device}" + (f" {key.variant}" if several else ""):
               _method_clauses(rows, document.sweep) for key, rows in cells.items()}
    shared, own = said_once(clauses)
    lines = [f"energy, every cell: {'; '.join(shared)}"] if shared else []
    return lines + [f"energy, {name}: {'; '.join(parts)}" for name, parts in own.items()
                    if parts]


def _method_clauses(rows: list[CaseRow], sweep: str) -> list[str]:
    """The clauses of one cell's measured rows, per size where they differ."""
    def per_size(texts: list[str]) -> str:
        if len(set(texts)) == 1:
            return texts[0]
        return series(texts) + _at_sizes(rows, sweep)

    records = [primary(row) for row in rows]
    idle = [f"{record.idle_watts:.0f} W" for record in records if record.idle_watts is not None]
    remembered = {remembered_from(record) for record in records if remembered_from(record)}
    clauses = [per_size([str(record.counter or "") for record in records]), "idle included",
               per_size([source_phrase(record.source) for record in records]),
               f"windows {per_size([f'{digits(r.window_s or 0.0, 2)} s' for r in records])}",
               f"{per_size([f'{r.watts_mean or 0.0:.0f} W' for r in records])} mean"]
    if idle:
        above = series([format_joules(r.joules_per_step_above_idle) for r in records])
        clauses.append(f"{above} per step above the {per_size(idle)} idle"
                       + (f" (remembered from {', '.join(sorted(remembered))})"
                          if remembered else ""))
    if any(host_joules(row) is not None for row in rows):
        host = series([format_joules(host_joules(row)) for row in rows])
        clauses.append(f"host CPU packages {host} per step")
    return clauses


def _unmeasured_reasons(cells: dict[CaseKey, list[CaseRow]]) -> list[tuple[str, str, str]]:
    """(GPU or CPU, status, reason) of each counter that measured nothing, once each."""
    reasons = [(device_kind(row.device).upper(), primary(row).status, primary(row).reason)
               for rows in cells.values() for row in rows if joules(row) is None]
    return list(dict.fromkeys(reasons))

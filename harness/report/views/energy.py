"""Energy per step beside time per step, the GPU's state per case, and CUDA-graph capture.

Driven by run.json only: each case's extra['energy'] (harness.measure.energy: NVML's board
counter on GPU cells, RAPL packages on CPU cells, each with its status and reason) and
extra['gpu_state'] (harness.measure.gpustate), read as the typed records of
harness.data.records (CaseResult.energy, CaseResult.gpu_state). The figure reported is the
total the counter
saw, idle included, per step; the share above the idle power measured before the cell is
shown beside it. A verdict compares a GPU cell with the CPU cell of the same framework,
variant and size: "GPU 3.9x faster and 2.1x less energy per step" - the GPU's board against
the CPU's packages, which is what each device itself drew (the host under a GPU cell is not
in the GPU's figure; it is shown apart where RAPL was readable).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from harness.analysis.noise import CaseNoise, judge_gap
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
from harness.data.casekey import keys_of
from harness.data.records import (
    CaseEnergy,
    EnergyRecord,
    GpuProcesses,
    GpuReadings,
    GpuState,
    WhileTimed,
)
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.report.figure import Figure, Line, carried, versus
from harness.report.views import REPORT, View
from harness.spec import Status

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
        return energy_table(context.documents)

    def markdown(self, table: pd.DataFrame, context: Any, figures: list[Path],
                 out_dir: Path) -> list[str]:
        measured = table["j_per_step"].notna()
        return [EXPLANATION, "",
                *[carried(f"- {line}", line) for line in gpu_vs_cpu_sentences(table)],
                *[carried(f"- {line}", line) for _, row in table[measured].iterrows()
                  for line in [case_line(row)]],
                *[f"- {line}" for line in unmeasured_lines(table[~measured])]]


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


class EnergyRow(TypedDict):
    """One case of a run with its time and energy per step (a row of energy_table)."""

    run_id: str
    machine: str
    workload: str
    framework: str
    device: str
    variant: str
    size: str
    status: str
    step_s: float | None
    window_step_s: float | None
    rounds: int
    noise: CaseNoise | None
    energy_status: str
    energy_reason: str
    j_per_step: float | None
    j_per_step_above_idle: float | None
    idle_watts: float | None
    idle_remembered_from: str  # HH:MM where the idle power was read back from the machine's
    watts_mean: float | None
    window_s: float | None
    counter: str
    source: str
    host_j_per_step: float | None
    suspect: str


COLUMNS = list(EnergyRow.__annotations__)  # the energy table's, in EnergyRow's order


def energy_rows(document: RunDocument, machine: str) -> list[EnergyRow]:
    """One row per case of one run document."""
    return [_case_row(document, machine, result, case)
            for result in document.cells for case in result.cases]


def _case_row(document: RunDocument, machine: str, result: CellResult,
              case: CaseResult) -> EnergyRow:
    device = result.device
    energy = case.energy or CaseEnergy()
    primary = energy.primary(device_kind(device))
    host = energy.host or EnergyRecord()
    state = case.gpu_state
    steps = case.extra.get("steps_per_call") or 1
    median = case.stats.median
    ok = primary.ok
    timed = median is not None and case.status == Status.OK
    return {
        "run_id": document.run_id, "machine": machine,
        "workload": result.workload, "framework": result.framework,
        "device": device, "variant": result.variant,
        "size": size_label(case.case.get(document.sweep)),
        "status": case.status.value,
        "step_s": median / steps if timed and median is not None else None,
        # The time of the energy window itself (J = W x s over the same calls): the figure to
        # print beside its joules; the pooled median above may come from other rounds.
        "window_step_s": _window_step_s(primary) if ok else None,
        "rounds": case.round_count,
        "noise": CaseNoise.of(case.samples_by_round()) if timed else None,
        "energy_status": primary.status,
        "energy_reason": primary.reason,
        "j_per_step": primary.joules_per_step if ok else None,
        "j_per_step_above_idle": primary.joules_per_step_above_idle if ok else None,
        "idle_watts": primary.idle_watts if ok else None,
        "idle_remembered_from": str(primary.extra_fields.get("idle_remembered_from") or "")
        if ok else "",
        "watts_mean": primary.watts_mean if ok else None,
        "window_s": primary.window_s if ok else None,
        "counter": primary.counter or "", "source": primary.source or "",
        "host_j_per_step": (host.joules_per_step if device_kind(device) == "gpu" and host.ok
                            else None),
        "suspect": state.suspect if state is not None else "",
    }


def _window_step_s(record: EnergyRecord) -> float | None:
    """Seconds per step over the energy window: window / calls / steps per call."""
    if not record.window_s or not record.calls:
        return None
    return record.window_s / record.calls / (record.steps_per_call or 1)


def energy_table(documents: Sequence[RunDocument]) -> pd.DataFrame:
    """Every case of these runs with its time and energy per step (latest run wins)."""
    rows = []
    for document in documents:
        rows += energy_rows(document, document.machine)
    table = pd.DataFrame(rows, columns=COLUMNS)
    if table.empty:
        return table
    keys = pd.Series(keys_of(table.to_dict("records")), index=table.index)
    table = table[~keys.duplicated(keep="last")]
    recorded = table["energy_status"] != "not recorded"
    return table[recorded].reset_index(drop=True) if recorded.any() else table.iloc[0:0]


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


def energy_subject(row: pd.Series) -> dict[str, str]:
    """A case of one run (a row made by hand may name no run: its records name none)."""
    return {"run": str(row.get("run_id", "")), "machine": str(row.get("machine", "")),
            "framework": str(row["framework"]), "device": str(row["device"]),
            "variant": str(row["variant"]), "size": str(row["size"])}


def energy_figure(name: str, value: float, unit: str, text: str,
                  subject: dict[str, str]) -> Figure:
    return Figure(ENERGY_FAMILY, name, float(value), unit, text, subject)


def verdict(gpu: pd.Series, cpu: pd.Series) -> str:
    """'GPU 3.9x faster (beyond the noise, ...); 2.1x less energy per step (...)', or why the
    energy half is missing. The speed is judged by the one noise rule (IQRs and rounds)."""
    if not (pd.notna(gpu["step_s"]) and pd.notna(cpu["step_s"])):
        return ""
    pair = {**energy_subject(gpu), **versus(run=str(cpu["run_id"]), device=str(cpu["device"]))}
    speed = cpu["step_s"] / gpu["step_s"]
    way = "faster" if speed >= 1 else "slower"
    shown = [energy_figure(SPEED, speed if speed >= 1 else 1 / speed, "x",
                           format_ratio(speed if speed >= 1 else 1 / speed), {**pair, WAY: way})]
    text = SPEED_PHRASE.format(ratio=shown[0].text, way=way)
    gpu_noise, cpu_noise = _noise(gpu), _noise(cpu)
    if gpu_noise is not None and cpu_noise is not None:
        text += f" ({judge_gap(gpu_noise, cpu_noise).phrase()})"
    if pd.notna(gpu["j_per_step"]) and pd.notna(cpu["j_per_step"]) and gpu["j_per_step"] > 0:
        ratio = cpu["j_per_step"] / gpu["j_per_step"]
        less = "less" if ratio >= 1 else "more"
        shown += [energy_figure(ENERGY_RATIO, ratio if ratio >= 1 else 1 / ratio, "x",
                                format_ratio(ratio if ratio >= 1 else 1 / ratio),
                                {**pair, WAY: less}),
                  energy_figure(JOULES, gpu["j_per_step"], "J",
                                format_joules(gpu["j_per_step"]), energy_subject(gpu)),
                  energy_figure(JOULES, cpu["j_per_step"], "J",
                                format_joules(cpu["j_per_step"]), energy_subject(cpu))]
        text += ENERGY_PHRASE.format(ratio=shown[1].text, way=less, gpu=shown[2].text,
                                     cpu=shown[3].text)
        return Line(text, shown)
    missing = [f"{kind} energy {row['energy_status']}: {row['energy_reason']}"
               for kind, row in (("GPU", gpu), ("CPU", cpu)) if pd.isna(row["j_per_step"])]
    return Line(text + "; " + "; ".join(missing), shown)


def _noise(row: pd.Series) -> CaseNoise | None:
    value = row.get("noise")
    return value if isinstance(value, CaseNoise) else None


def gpu_vs_cpu_sentences(table: pd.DataFrame) -> list[str]:
    """One verdict per (machine, workload, framework, variant, size) with a GPU and a CPU cell."""
    lines = []
    kinds = table.assign(kind=table["device"].map(device_kind))
    devices_of = [key.without("device") for key in keys_of(table.to_dict("records"))]
    for key, group in kinds.groupby(pd.Series(devices_of, index=table.index, dtype=object),
                                    sort=False):
        gpus, cpus = group[group["kind"] == "gpu"], group[group["kind"] == "cpu"]
        if gpus.empty or cpus.empty:
            continue
        for _, gpu in gpus.iterrows():
            text = verdict(gpu, cpus.iloc[0])
            if text:
                lines.append(carried(f"{key.experiment} {key.framework} {key.variant}, size "
                                     f"{key.size_label} ({key.machine}): "
                                     f"{gpu['device']} vs {cpus.iloc[0]['device']}: {text}",
                                     text))
    return lines


def case_line(row: pd.Series) -> str:
    """'<framework> cuda:0 <variant>, size 32: 0.41 ms and 62 mJ per step (...)'."""
    where = f"{row['workload']} {row['framework']} {row['device']} {row['variant']}, " \
            f"size {row['size']}"
    if pd.isna(row["j_per_step"]):
        return (f"{where}: {format_seconds(row['step_s'])} per step; energy "
                f"{row['energy_status']}: {row['energy_reason']}")
    # Joules, power and the time they imply come from one window, printed together; the
    # pooled median (all rounds' samples) is named as such where it is shown too.
    figures = case_figures(row)
    shown = {name: figure.text for name, figure in figures.items()}
    text = CASE_SENTENCE.format(where=where, joules=shown[JOULES], watts=shown[POWER],
                                window_step=shown.get(WINDOW_STEP, "-"), window=shown[WINDOW],
                                source=source_phrase(row["source"]), counter=row["counter"])
    if ABOVE_IDLE in shown:
        text += ABOVE_IDLE_PHRASE.format(above=shown[ABOVE_IDLE], idle=shown[IDLE])
        if row.get("idle_remembered_from"):
            text += f", remembered from {row['idle_remembered_from']}"
    pooled = ("median of all rounds' samples" if pd.notna(row["rounds"]) and row["rounds"] > 1
              else "median of the timed samples")
    text += TIMED_PHRASE.format(timed=shown.get(TIMED, "-"), pooled=pooled)
    if HOST_JOULES in shown:
        text += HOST_PHRASE.format(host=shown[HOST_JOULES])
    return Line(text + (f"; SUSPECT: {row['suspect']}" if row["suspect"] else ""),
                figures.values())


def case_figures(row: pd.Series) -> dict[str, Figure]:
    """The records of one measured case's energy line, by name."""
    subject = energy_subject(row)
    window = row["window_step_s"] if pd.notna(row["window_step_s"]) else row["step_s"]
    printed = [(JOULES, row["j_per_step"], "J", format_joules(row["j_per_step"])),
               (POWER, row["watts_mean"], "W", f"{row['watts_mean']:.0f}"),
               (WINDOW_STEP, window, "s", format_seconds(window)),
               (WINDOW, row["window_s"], "s", digits(row["window_s"], 2)),
               (TIMED, row["step_s"], "s", format_seconds(row["step_s"]))]
    if pd.notna(row["j_per_step_above_idle"]):
        printed += [(ABOVE_IDLE, row["j_per_step_above_idle"], "J",
                     format_joules(row["j_per_step_above_idle"])),
                    (IDLE, row["idle_watts"], "W", f"{row['idle_watts']:.0f}")]
    if pd.notna(row["host_j_per_step"]):
        printed.append((HOST_JOULES, row["host_j_per_step"], "J",
                        format_joules(row["host_j_per_step"])))
    return {name: energy_figure(name, value, unit, text, subject)
            for name, value, unit, text in printed if pd.notna(value)}


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


def unmeasured_lines(table: pd.DataFrame) -> list[str]:
    """One line per reason energy was not measured, naming its cells (not one per case)."""
    lines = []
    for (status, reason), group in table.groupby(["energy_status", "energy_reason"],
                                                  sort=False):
        cells = sorted({f"{row['workload']} {row['framework']} {row['device']} "
                        f"{row['variant']}" for _, row in group.iterrows()})
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


def console_lines(document: RunDocument) -> list[str]:
    """For the CLI after its table: one line per cell with a measured energy, its sizes
    together ('energy, torch cuda:0: 24.2 / 25.5 / 36.3 mJ per step at batch 8 / 64 / 512;
    1.39x more / 1.34x less / 4.65x less than cpu'), then each counter that measured nothing
    once; none where the run has no energy record.

    How each figure was measured (counter, window, idle power) is not repeated per size here:
    summary.md says it per case, and method_lines (--details) once per run where every cell
    shares it.
    """
    table = energy_table([document])
    if table.empty:
        return []
    cells = _cells(table)
    lines = [cell_energy_line(cell, cells, document.sweep) for cell in cells.values()
             if cell["j_per_step"].notna().any()]
    if not lines and not _has_pairs(cells):
        return []  # e.g. a CPU-only run on a machine without RAPL: nothing to compare
    return lines + [f"energy: {kind} {status}: {reason}"
                    for kind, status, reason in _unmeasured_reasons(table)]


CellKey = tuple[str, str, str, str]  # machine, framework, variant, device


def _cells(table: pd.DataFrame) -> dict[CellKey, pd.DataFrame]:
    """The table's rows per cell, in the run's order."""
    return {key: group for key, group in table.groupby(
        ["machine", "framework", "variant", "device"], sort=False)}


def _cpu_of(key: CellKey, cells: dict[CellKey, pd.DataFrame]) -> pd.DataFrame | None:
    """The CPU cell a GPU cell is compared with: same machine, framework and variant."""
    if device_kind(key[3]) != "gpu":
        return None
    return next((rows for (machine, framework, variant, device), rows in cells.items()
                 if (machine, framework, variant) == key[:3] and device_kind(device) == "cpu"),
                None)


def _has_pairs(cells: dict[CellKey, pd.DataFrame]) -> bool:
    return any(_cpu_of(key, cells) is not None for key in cells)


def cell_energy_line(rows: pd.DataFrame, cells: dict[CellKey, pd.DataFrame],
                     sweep: str) -> str:
    """'energy, torch cuda:0: 24.2 / 25.5 / 36.3 mJ per step at batch 8 / 64 / 512; 1.39x
    more / 1.34x less / 4.65x less than cpu' (the GPU's board against the CPU's packages)."""
    first = rows.iloc[0]
    key: CellKey = (first["machine"], first["framework"], first["variant"], first["device"])
    several = len({variant for _, _, variant, _ in cells}) > 1
    name = f"{first['framework']} {first['device']}" + (f" {first['variant']}" if several
                                                        else "")
    text = (f"energy, {name}: {series([format_joules(v) for v in rows['j_per_step']])} "
            f"per step{_at_sizes(rows, sweep)}")
    cpu = _cpu_of(key, cells)
    if cpu is not None:
        by_size = dict(zip(cpu["size"], cpu["j_per_step"]))
        ratios = [_energy_ratio(gpu_j, by_size.get(size))
                  for size, gpu_j in zip(rows["size"], rows["j_per_step"])]
        if any(ratio != "-" for ratio in ratios):
            text += f"; {' / '.join(ratios)} than {cpu.iloc[0]['device']}"
    return text


def _at_sizes(rows: pd.DataFrame, sweep: str) -> str:
    """' at batch 8 / 64 / 512', or '' for a workload without a sweep."""
    sizes = [str(size) for size in rows["size"]]
    return f" at {sweep} {' / '.join(sizes)}" if sweep and any(sizes) else ""


def _energy_ratio(gpu_joules: Any, cpu_joules: Any) -> str:
    """'1.34x less' (the GPU drew less per step), '1.39x more', or '-' where either is
    missing."""
    if not (pd.notna(gpu_joules) and pd.notna(cpu_joules)) or gpu_joules <= 0 or cpu_joules <= 0:
        return "-"
    ratio = cpu_joules / gpu_joules
    return (f"{format_ratio(ratio)} less" if ratio >= 1 else f"{format_ratio(1 / ratio)} more")


def method_lines(document: RunDocument) -> list[str]:
    """How each energy figure of the run was measured, for --details: what every measured cell
    shares said once ('energy, every cell: idle included; from the timed samples'), then each
    cell's own (its counter, windows, mean power, idle power, the host's packages)."""
    table = energy_table([document])
    if table.empty:
        return []
    measured = table[table["j_per_step"].notna()]
    clauses = {f"{key[1]} {key[3]}" + (f" {key[2]}" if measured["variant"].nunique() > 1
                                        else ""): _method_clauses(rows, document.sweep)
               for key, rows in _cells(measured).items()}
    shared, own = said_once(clauses)
    lines = [f"energy, every cell: {'; '.join(shared)}"] if shared else []
    return lines + [f"energy, {name}: {'; '.join(parts)}" for name, parts in own.items()
                    if parts]


def _method_clauses(rows: pd.DataFrame, sweep: str) -> list[str]:
    """The clauses of one cell's measured rows, per size where they differ."""
    def per_size(texts: list[str]) -> str:
        if len(set(texts)) == 1:
            return texts[0]
        return series(texts) + _at_sizes(rows, sweep)

    idle = [f"{row['idle_watts']:.0f} W" for _, row in rows.iterrows()
            if pd.notna(row["idle_watts"])]
    remembered = {str(row["idle_remembered_from"]) for _, row in rows.iterrows()
                  if row["idle_remembered_from"]}
    clauses = [per_size([str(counter) for counter in rows["counter"]]), "idle included",
               per_size([source_phrase(source) for source in rows["source"]]),
               f"windows {per_size([f'{digits(seconds, 2)} s' for seconds in rows['window_s']])}",
               f"{per_size([f'{watts:.0f} W' for watts in rows['watts_mean']])} mean"]
    if idle:
        above = series([format_joules(value) for value in rows["j_per_step_above_idle"]])
        clauses.append(f"{above} per step above the {per_size(idle)} idle"
                       + (f" (remembered from {', '.join(sorted(remembered))})"
                          if remembered else ""))
    if rows["host_j_per_step"].notna().any():
        host = series([format_joules(value) for value in rows["host_j_per_step"]])
        clauses.append(f"host CPU packages {host} per step")
    return clauses


def _unmeasured_reasons(table: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(GPU or CPU, status, reason) of each counter that measured nothing, once each."""
    reasons: list[tuple[str, str, str]] = []
    for _, row in table[table["j_per_step"].isna()].iterrows():
        item = (device_kind(row["device"]).upper(), str(row["energy_status"]),
                str(row["energy_reason"]))
        if item not in reasons:
            reasons.append(item)
    return reasons

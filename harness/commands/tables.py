"""The results tables a run prints (compact, and full with --details) and its cases' long texts.

The compact table keeps one line per case; what does not fit it goes to the warnings
(case_warnings) and to the full table.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from harness.analysis.casetable import CaseRow
from harness.analysis.plausibility import device_entry, flop_limits, precision_of
from harness.analysis.stats import check_text, implausibility
from harness.core.units import format_seconds, three_digits
from harness.data import fields
from harness.data.ceilings import Ceilings, DeviceCeiling
from harness.measure.memory import memory_text
from harness.spec import WorkloadSpec
from harness.terminal import fitted_table


def peak_share_text(gflops: float, entry: DeviceCeiling | None, precision: str) -> str:
    """' (12% of peak)': an achieved FLOP rate against the device's measured matmul peak."""
    peak = flop_limits(entry, precision)[0]
    return f" ({gflops / peak:.0%} of peak)" if peak else ""


def flop_rate_text(row: CaseRow, entry: DeviceCeiling | None, precision: str) -> str:
    """'43 GFLOP/s (22% of peak)'; from a count with gaps a lower bound and no share of the
    peak: '>= 0.01 GFLOP/s (partial: aten._cudnn_rnn x2 not counted)'; from a count its second
    opinion disputes, no share of the peak either: '4.3 GFLOP/s (count disputed: ...)'."""
    if row.gflops is None:
        return ""
    bound = ">= " if row.flops_gaps else ""
    notes = [f"partial: {row.flops_gaps}"] if row.flops_gaps else []
    if row.flops_disputed:
        notes.append(f"count disputed: {row.flops_disputed}")
    if notes:
        return f"{bound}{three_digits(row.gflops)} GFLOP/s ({'; '.join(notes)})"
    return f"{three_digits(row.gflops)} GFLOP/s" + peak_share_text(row.gflops, entry, precision)


def results_table(spec: WorkloadSpec, summaries: list[CaseRow],
                  ceilings: Ceilings | None = None) -> Table:
    table = Table(title=f"{spec.name}: median per call (IQR), cold first call apart")
    # Declared per-case values (harness.data.fields) get a column where any row has one.
    extras = [item for item in fields.cli_fields()
              if any(row.extras.get(item.name) is not None for row in summaries)]
    for column in ("variant", "framework", "device", spec.sweep, "status", "median", "IQR",
                   "cold", "rate", "peak mem", *(item.cli for item in extras),
                   "check / reason"):
        table.add_column(column, overflow="fold")
    for row in summaries:
        rates = [flop_rate_text(row, device_entry(ceilings, row.device),
                                precision_of(row.variant, dict(spec.report.variant_precision))),
                 f"{three_digits(row.gbps)} GB/s" if row.gbps is not None else ""]
        rate = ", ".join(filter(None, rates)) or "-"
        spread = format_seconds(row.call_iqr_s) + (" noisy" if row.noisy else "")
        check = check_text(row.check)
        note = check if row.status == "ok" else (check + " " + row.reason).strip()
        flag = implausibility(row, device_entry(ceilings, row.device),
                              spec.report.bandwidth_ceiling, dict(spec.report.variant_precision))
        # The failure reason or check first, the suspicion last: both must stay readable.
        note = "; ".join(filter(None, [flag, note,
                                       f"SUSPECT: {row.suspect}" if row.suspect else ""]))
        table.add_row(row.variant, row.framework, row.device,
                      "" if row.size is None else str(row.size), row.status,
                      format_seconds(row.call_median_s), spread,
                      format_seconds(row.cold_call_s), rate,
                      memory_text(row.peak_host_bytes, row.peak_device_bytes),
                      *(item.text(row.extras.get(item.name)) for item in extras),
                      escape(note[:320]))  # reasons hold brackets: 'harness[torch]'
    return table


def per_step(summaries: list[CaseRow]) -> bool:
    """Whether the workload's calls are several steps each (MNIST's blocks, a model's
    epochs): then the compact table gives the time per step, the verdicts' unit."""
    return any((row.steps_per_call or 1) > 1 for row in summaries)


def median_text(row: CaseRow, step: bool = False) -> str:
    """'2.42 ms ±156 us' per call (per STEP), or '-' for a case without samples."""
    if not row.samples:
        return "-"
    if step:
        return f"{format_seconds(row.median_s)} ±{format_seconds(row.q3_s - row.q1_s)}"
    return f"{format_seconds(row.call_median_s)} ±{format_seconds(row.call_iqr_s)}"


def steps_text(summaries: list[CaseRow]) -> str:
    """'a timed call = 625 steps' (or '= 39-625 steps'): how a call of --details relates to
    the compact table's step."""
    steps = sorted({int(row.steps_per_call) for row in summaries
                    if row.samples and row.steps_per_call})
    if not steps:
        return ""
    span = f"{steps[0]:,}" if len(steps) == 1 else f"{steps[0]:,}-{steps[-1]:,}"
    return f"a timed call = {span} steps"


def short_check(row: CaseRow) -> str:
    """'pass', 'FAIL', 'not compared' or '-': the figure itself is in --details."""
    check = check_text(row.check)
    if not check:
        return "-"
    return check if check == "not compared" else check.split()[0]


def short_rate(row: CaseRow) -> str:
    """'43.2 GFLOP/s', '>= 0.01 GFLOP/s' (a partial count), '4.3 GFLOP/s disputed' (a count
    its second opinion disputes), '12 GB/s', or '-'."""
    rates = []
    if row.gflops is not None:
        rates.append((">= " if row.flops_gaps else "") + f"{three_digits(row.gflops)} GFLOP/s"
                     + (" disputed" if row.flops_disputed else ""))
    if row.gbps is not None:
        rates.append(f"{three_digits(row.gbps)} GB/s")
    return ", ".join(rates) or "-"


def compact_table(spec: WorkloadSpec, summaries: list[CaseRow],
                  width: int | None = None) -> list[str]:
    """One case per row: who, where, status, median ± IQR, rate, check; within the width
    (harness.terminal.fitted_table): names wrap over two lines where they must, figures never,
    and no cell is cut. Piped without $COLUMNS, as wide as its cells. Where a call is several
    steps, the time is per step, the verdicts' unit, and the title says what a call is."""
    step = per_step(summaries)
    unit = "step" if step else "call"
    notes = [steps_text(summaries) if step else "", "--details: every column"
             + (", per call" if step else "")]
    title = f"{spec.name}: median per {unit} ± IQR ({'; '.join(filter(None, notes))})"
    columns = ("variant", "framework", "device", spec.sweep, "status", f"median/{unit} ± IQR",
               "rate", "check")
    rows = [(row.variant, row.framework, row.device,
             "" if row.size is None else str(row.size), row.status, median_text(row, step),
             short_rate(row), short_check(row)) for row in summaries]
    return fitted_table(title, columns, rows, width, whole={3, 5})


# A case's disputed FLOP count in the warnings (the report words its own line otherwise).
DISPUTED_TEXT = "FLOP count DISPUTED (no share of the peak is made from it): "


def case_warnings(spec: WorkloadSpec, summaries: list[CaseRow],
                  ceilings: Ceilings | None) -> dict[str, list[str]]:
    """The long texts of the full table's last column, each with the cases it concerns."""
    texts: dict[str, list[str]] = {}
    for row in summaries:
        where = f"{row.variant} {row.framework} {row.device}" + (
            "" if row.size is None else f", {spec.sweep} {row.size}")
        flag = implausibility(row, device_entry(ceilings, row.device),
                              spec.report.bandwidth_ceiling, dict(spec.report.variant_precision))
        gaps = f"FLOP count partial: {row.flops_gaps}" if row.flops_gaps else ""
        disputed = DISPUTED_TEXT + row.flops_disputed if row.flops_disputed else ""
        check = check_text(row.check)
        check = check if check.startswith("FAIL") else ""
        for text in (row.reason if row.status != "ok" else "", check, flag, gaps, disputed,
                     f"SUSPECT: {row.suspect}" if row.suspect else ""):
            # A dispute names parts and both figures of each: room for three of them.
            text = " ".join(text.split())[:640 if text == disputed else 320]
            if text:
                texts.setdefault(text, []).append(where)
    return texts

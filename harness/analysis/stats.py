"""The CLI's derived figures: work per call, the rows of its final table (rows of the case
table, harness.analysis.casetable), the faster-than-physics flag, and the run's own lines
(overhead, rounds, ceilings, --quick). Raw samples stay raw."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.analysis.casetable import CaseRow, run_rows
from harness.analysis.plausibility import judge_case
from harness.core import registry
from harness.data.ceilings import MEMORY, Ceilings, DeviceCeiling
from harness.data.results import CellResult, HarnessCost, RunDocument
from harness.spec import BadInput, CaseParams, WorkloadSpec


def work_of(spec: WorkloadSpec, case: CaseParams,
            extra: Mapping[str, object] | None = None) -> dict[str, float]:
    """FLOPs and bytes of one timed call (None: does not apply).

    The call's own count comes first: the worker recorded `flops_per_call` from the case it
    ran (the workload's declared count, or the framework's counter), so a case whose rounds
    shared out the plan's work is never given the plan's FLOPs. The spec's formulas on `case`
    are the fallback for results that kept no count.
    """
    work: dict[str, float] = {}
    counted = (extra or {}).get("flops_per_call")
    if counted and isinstance(counted, (int, float, str)):  # a number, as the worker wrote it
        work["flops"] = float(counted)
    for key, count_of in (("flops", spec.flops), ("bytes", spec.bytes_moved)):
        count = count_of(case) if count_of is not None and key not in work else None
        if count is not None:  # e.g. a bare copy has no FLOPs: show no FLOP rate, not 0
            work[key] = float(count)
    return work


# A check's metric when nothing could be compared (harness.run.caserun.NOT_COMPARED).
NOT_COMPARED = "not_compared"


def check_text(check: Mapping[str, object] | None) -> str:
    """'pass max_rel_err=3e-07', 'FAIL ...', or 'not compared' for a check that compared
    nothing (a pass with a value of 0 would read as a perfect match)."""
    if not check:
        return ""
    if check.get("metric") == NOT_COMPARED:
        return "not compared"
    verdict = "pass" if check["passed"] else "FAIL"
    return f"{verdict} {check['metric']}={check['value']:.2g}"


def cli_rows(spec: WorkloadSpec, document: RunDocument) -> list[CaseRow]:
    """The rows of the CLI's final table: every case of the run, a row of its case table
    with the workload's work (work_of), and a status row after each cell that stopped short
    (it timed out, crashed, stopped)."""
    return run_rows(document, lambda case: work_of(spec, case.case, case.extra),
                    stopped_rows=True)


def implausibility(row: CaseRow, ceilings: DeviceCeiling | None,
                   bandwidth_key: str = MEMORY,
                   precisions: dict[str, str] | None = None) -> str:
    """The CLI's flag for a case: IMPLAUSIBLE above physics, a note when the probe was low.
    A FLOP rate whose count is disputed is judged against nothing (as in the report): which
    count to believe is the open question, and the warnings ask it."""
    device_ceilings = Ceilings({row.device: ceilings}) if ceilings else None
    gflops = None if row.flops_disputed else row.gflops
    verdicts = judge_case(gflops, row.gbps, row.variant, row.device,
                          device_ceilings, bandwidth_key, precisions)
    return "; ".join(text for text in (verdict.text() for verdict in verdicts) if text)


def harness_cost(cells: list[CellResult]) -> HarnessCost:
    """The run's own cost: every cell's, summed (cells from before costs were kept: none)."""
    total = HarnessCost()
    for cell in cells:
        if cell.cost is not None:
            total = total.add(cell.cost)
    return total


@dataclass(frozen=True)
class RunOverhead:
    """The run's own cost as its overhead line prints it: the run's wall time (its start to
    its end, or its workers' sum where that is longer), the part inside the timed calls, the
    worker processes, and where the rest went (name -> seconds)."""

    wall_s: float
    timed_s: float
    workers: int
    phases: dict[str, float]


def run_overhead(document: RunDocument) -> RunOverhead | None:
    """The run's overhead figures; None when its cells kept no cost (runs from before the
    costs were recorded)."""
    cost = harness_cost(document.cells)
    if not cost.workers:
        return None
    run_wall = ((document.finished - document.started)
                if document.finished is not None and document.started is not None else 0.0)
    wall = max(run_wall, cost.wall_s)
    phases = dict(cost.phases)
    waited = document.warm_processes.get("prestart_s")
    warm_s = float(waited) if isinstance(waited, (int, float)) else 0.0
    if warm_s > 0:
        phases[WARM_START] = warm_s
    if wall > cost.wall_s + warm_s + 0.05:  # before and between the workers
        outside = "outside the workers (ceilings, shared weights, saving)"
        phases[outside] = wall - cost.wall_s - warm_s
    return RunOverhead(wall, cost.timed_s, cost.workers, phases)


def overhead_line(document: RunDocument, largest: int = 3) -> str:
    """'harness overhead: 41 s of 63 s (...)': the run's wall time outside the timed calls
    (ceilings, shared weights, worker starts and imports, warm-up, checks, profiles); '' when
    its cells kept no cost (runs from before the costs were recorded)."""
    overhead = run_overhead(document)
    if overhead is None:
        return ""
    top = sorted(overhead.phases.items(), key=lambda item: -item[1])[:largest]
    parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in top if seconds >= 0.05)
    wall, timed, workers = overhead.wall_s, overhead.timed_s, overhead.workers
    return (f"harness overhead: {wall - timed:.1f} s of {wall:.1f} s ("
            f"{timed:.1f} s inside the timed calls, {workers} worker process"
            f"{'es' if workers != 1 else ''}; {RUN_SCOPE})"
            + (f"; largest: {parts}" if parts else ""))


# The warm processes' start, waited for before the first worker (run.json warm_processes).
WARM_START = "warm processes' start (framework imports, side by side)"

# What the overhead line's wall time leaves out, on the line itself: the run's document holds
# only its own start and end, so the command around it is the CLI's to time (command_line).
RUN_SCOPE = ("the run alone: not the command's start and planning, the report or "
             "harness check")


def quick_line(document: RunDocument) -> str:
    """What --quick left out or changed for speed, so no reader takes it for a full run; ''
    for a full run."""
    if not document.quick:
        return ""
    parts = ["one round" if document.rounds <= 1 else f"{document.rounds} rounds",
             "short timing", "no energy pass"]
    settings = quick_environment({str(cell.get("framework")) for cell in document.planned_cells})
    if settings:
        parts.append("torch.compile trusting the CPU's vector ISA without a test build "
                     f"({settings}, unless set): a compiled CPU cell's cold call "
                     "is not a default setup's")
    return "--quick: " + "; ".join(parts)


def ceilings_line(document: RunDocument) -> str:
    """Where the run's ceilings came from: this machine's remembered probe (and its date), or a
    probe now and why, so a reader knows whether the bar was measured today; '' where the run
    has no probed ceilings (--no-ceilings, no rate to judge, cells run elsewhere)."""
    from harness.measure.ceilings import REMEMBER_FOR_DAYS

    entries = document.ceilings.measured()
    remembered = {device: entry.remembered for device, entry in entries.items()
                  if entry.remembered}
    reasons = [entry.probed_because for entry in entries.values() if entry.probed_because]
    parts = []
    if remembered:
        dates = sorted({known.probed for known in remembered.values()})
        which = "" if len(remembered) == len(entries) else f" for {', '.join(sorted(remembered))}"
        parts.append(f"ceilings remembered from {', '.join(dates)}{which} (this machine's probe; "
                     "--probe-ceilings measures again)")
    if reasons:
        parts.append(f"ceilings probed now ({'; '.join(reasons)}), remembered on this machine "
                     f"for {REMEMBER_FOR_DAYS} days")
    deferred = sorted(device for device, entry in entries.items() if entry.deferred)
    if deferred:
        parts.append(f"ceilings not probed for {', '.join(deferred)} (this machine's first run "
                     "of a model file): rates checked against the theoretical peak only, "
                     "IMPLAUSIBLE above it, no % of peak; the next run probes them, "
                     "--probe-ceilings now")
    return "; ".join(parts)


def quick_environment(frameworks: set[str]) -> str:
    """'NAME=VALUE, ...': what the frameworks' FrameworkSpecs set for --quick cells."""
    settings: dict[str, str] = {}
    for name in sorted(frameworks):
        try:
            settings.update(registry.load_framework(name).quick_environment_defaults)
        except BadInput:  # unknown here: its cells said why
            continue
    return ", ".join(f"{key}={value}" for key, value in sorted(settings.items()))


def rounds_line(document: RunDocument) -> str:
    """How the run was interleaved, or that run-to-run drift was not measured."""
    if document.rounds <= 1:
        return ("rounds: 1 (run-to-run drift not measured; --rounds N judges every verdict "
                "against the spread between N worker processes per cell)")
    return (f"rounds: {document.rounds}, cells in a new random order each round (seed "
            f"{document.seed}); beyond the noise = beyond the IQRs and the round medians")

"""run.json's derived fields against its raw samples (the kept attempt, declared FLOPs, energy
records) and its round orders against the plan."""

from __future__ import annotations

from collections.abc import Callable

from harness.audit import parity
from harness.audit.ledger import (
    Ledger,
)
from harness.audit.measured import (
    DERIVED_TOLERANCE,
    ENERGY_TOLERANCE,
    Measured,
    median_or_none,
    steps_per_call,
)
from harness.core.units import (
    format_seconds,
)
from harness.data.casekey import CaseKey
from harness.data.records import CaseEnergy, EnergyRecord
from harness.data.results import CellResult, RunDocument
from harness.spec import Status, WorkloadSpec

# A round order checker: (cells that ran, rounds, seed) -> the orders the seeded shuffle gives.
# The shuffle lives in the layer above (harness.run.rounds); the CLI passes it in.
Shuffle = Callable[[int, int, int], list[list[int]]]


def check_derived(ledger: Ledger, document: RunDocument, spec: WorkloadSpec | None,
                  spec_why: str = "") -> None:
    if spec is None and any(case.measured for cell in document.cells for case in cell.cases):
        ledger.cannot("", "the spec's FLOP and byte counts of each case", "run.json", spec_why)
    for cell in document.cells:
        for case in cell.cases:
            measured = Measured(document, cell, case)
            check_rounds_of_case(ledger, measured)
            check_rounds_held(ledger, measured)
            check_attempts(ledger, measured)
            check_declared_flops(ledger, measured, spec)
            _check_energy(ledger, measured)
            parity.recheck(ledger, measured.subject, case.check, case.extra,
                                case.status.value)


def check_rounds_of_case(ledger: Ledger, measured: Measured) -> None:
    """Each round's block steps are one per warm sample of that round."""
    for record in measured.case.rounds:
        if record.sample_steps:
            ledger.verdict(measured.subject, f"round {record.round + 1} sample_steps length",
                           "run.json", len(record.sample_steps) == len(record.samples),
                           str(len(record.sample_steps)),
                           f"{len(record.samples)} (one per sample)")


def check_rounds_held(ledger: Ledger, measured: Measured) -> None:
    """A measured case of a run that ended holds every round the run states, unless its row
    says why not: its cell or case did not end ok (a timeout is not retried, a crash ended a
    round), or `harness advise` chose to run fewer (its budget line says so). Why: a resume
    that ran cells, not rounds, left cases at 2 of 3 rounds under a header saying 3."""
    document, cell, case = measured.document, measured.cell, measured.case
    stated = document.rounds
    if stated <= 1 or document.finished is None or document.interrupted \
            or document.advise is not None or not case.measured \
            or cell.status != Status.OK or case.status != Status.OK:
        return
    held = sorted({record.round for record in case.rounds})
    ledger.verdict(measured.subject, "rounds held", "run.json", held == list(range(stated)),
                   f"rounds {[index + 1 for index in held]}",
                   f"rounds 1 to {stated} (run.json rounds: {stated})")


def check_attempts(ledger: Ledger, measured: Measured) -> None:
    """The kept attempt's median and count are those of the samples of its round."""
    for record in measured.case.rounds:
        for attempt in record.attempts:
            if not attempt.kept:
                continue
            figure = f"kept attempt {attempt.number} (round {record.round + 1})"
            ledger.number(measured.subject, f"{figure} median", "run.json", attempt.median_s,
                          median_or_none([float(seconds) for seconds in record.samples]),
                          DERIVED_TOLERANCE, format_seconds)
            ledger.verdict(measured.subject, f"{figure} samples", "run.json",
                           attempt.samples == len(record.samples), str(attempt.samples),
                           str(len(record.samples)))


def check_declared_flops(ledger: Ledger, measured: Measured, spec: WorkloadSpec | None) -> None:
    """The spec's count of what one call did equals the call's own stored count."""
    if spec is None or spec.flops is None or not measured.case.measured:
        return
    declared = spec.flops(measured.case.case)
    if declared is None:
        return
    counted = measured.case.extra.get("flops_per_call")
    if counted is None:
        # Nothing printed to recompute: a run from before the worker kept its own count
        # prints its FLOPs in measurements.csv alone, checked there against the formula.
        return
    ledger.number(measured.subject, "flops_per_call vs the spec's count of the case",
                  "run.json", counted, float(declared), DERIVED_TOLERANCE, lambda v: f"{v:.4g}")


def _check_energy(ledger: Ledger, measured: Measured) -> None:
    energy = CaseEnergy.read(measured.case.extra.get("energy"))
    if energy is None:
        return
    for name, record in (("device", energy.device), ("host", energy.host)):
        if record is not None and record.ok:
            check_energy_record(ledger, measured, name, record)


def check_energy_record(ledger: Ledger, measured: Measured, name: str,
                        record: EnergyRecord) -> None:
    """Joules against watts x seconds / calls, per call, per step and above idle (1%)."""
    subject, where = f"{measured.subject} {name} energy", "run.json"
    window, calls, watts = record.window_s, record.calls, record.watts_mean
    if not (window and calls and watts is not None):
        ledger.cannot(subject, "energy per call", where, "window, calls or power not stored")
        return
    per_call = watts * window / calls
    checks: list[tuple[str, float | None, float | None]] = [
        ("joules per call (= W x window / calls)", record.joules_per_call, per_call),
              ("joules total (= W x window)", record.joules_total, watts * window)]
    steps = record.steps_per_call or 1.0
    checks.append(("joules per step (= per call / steps)", record.joules_per_step,
                   None if record.joules_per_call is None else record.joules_per_call / steps))
    checks.append(("steps per call of the energy record", record.steps_per_call,
                   steps_per_call(measured.case)))
    if record.idle_watts is not None and record.joules_total is not None:
        above = (record.joules_total - record.idle_watts * window) / calls
        checks += [("joules per call above idle", record.joules_per_call_above_idle, above),
                   ("joules per step above idle", record.joules_per_step_above_idle,
                    above / steps)]
    for figure, stored, recomputed in checks:
        if stored is None:
            ledger.cannot(subject, figure, where, "not stored")
            continue
        ledger.number(subject, figure, where, stored, recomputed, ENERGY_TOLERANCE,
                      lambda v: f"{v:.4g}")


# --- round orders ---------------------------------------------------------------------------

def _had_worker(result: CellResult) -> bool:
    """Whether a cell ran in a worker: its cost counts the workers; a run from before costs
    were kept tells by its status (refused without a worker: unavailable with no cases). The
    cost decides where present, since a worker may itself answer unavailable (no such device)."""
    if result.cost is not None:
        return result.cost.workers > 0
    return not (result.status == Status.UNAVAILABLE and not result.cases)


def _worker_cells(document: RunDocument, unreached: bool = False) -> list[int]:
    """Plan indices of the cells that ran in a worker (not refused without one); `unreached`:
    also those a stopped run never reached (no result), which its rounds had shuffled too."""
    results = {CaseKey.of_cell(cell): cell for cell in document.cells}
    found = []
    for index, planned in enumerate(document.planned_cells):
        result = results.get(CaseKey.from_row(planned).without("machine", "size_label"))
        if (result is not None and _had_worker(result)) or (result is None and unreached):
            found.append(index)
    return found


def _timed_out_cells(document: RunDocument) -> set[int]:
    """Plan indices of the cells that ended `timeout`: a later round runs them no more."""
    results = {CaseKey.of_cell(cell): cell for cell in document.cells}
    found = set()
    for index, planned in enumerate(document.planned_cells):
        result = results.get(CaseKey.from_row(planned).without("machine", "size_label"))
        if result is not None and result.status == Status.TIMEOUT:
            found.add(index)
    return found


def _order_fits(order: list[int], shuffled: list[int], earlier: list[list[int]],
                not_retried: set[int], cut: bool) -> bool:
    """Whether a recorded round ORDER is its SHUFFLED order, less the cells that timed out in
    an EARLIER round (not run again), and, for the round a stop CUT short, less those it
    never reached."""
    skipped = set(shuffled) - set(order)
    ran_before = {index for round_order in earlier for index in round_order}
    return order == [index for index in shuffled if index in order] and (
        cut or skipped <= not_retried & ran_before)


def check_round_orders(ledger: Ledger, document: RunDocument, shuffle: Shuffle | None) -> None:
    orders, where = document.round_orders, "run.json round_orders"
    if not orders:
        if document.rounds > 1:
            ledger.cannot("", "round orders", "run.json", "not stored")
        return
    planned = len(document.planned_cells)
    for number, order in enumerate(orders, start=1):
        ledger.verdict("", f"round {number} order: distinct indices", where,
                       len(set(order)) == len(order), str(order), "each index once")
        ledger.verdict("", f"round {number} order: indices into planned_cells", where,
                       all(0 <= index < planned for index in order), str(order),
                       f"0 to {planned - 1}")
    workers = _worker_cells(document)
    ran = sorted({index for order in orders for index in order})
    # A run killed outright (no end time: a SIGKILL, a full disk) recorded its last round's
    # order when the round began: it may name cells that never came back.
    killed = document.finished is None
    reached = set(_worker_cells(document, unreached=True)) if killed else set(workers)
    ledger.verdict("", "cells in the round orders", where,
                   set(workers) <= set(ran) <= reached, str(ran),
                   f"{workers} (the cells that have workers"
                   + (", and those the killed run had not reached)" if killed else ")"))
    if shuffle is None or document.seed is None or document.resumed:
        return
    shuffled = _worker_cells(document, unreached=document.interrupted or killed)
    expected = [[shuffled[position] for position in order]
                for order in shuffle(len(shuffled), document.rounds, document.seed)]
    ran_rounds = len(orders)
    # A run stopped within a round ran that round's shuffled order only up to where it
    # stopped: the last recorded order is then the shuffle's cells that ran, in its order.
    last_cut = bool(document.interrupted and ran_rounds
                    and orders[-1] != expected[ran_rounds - 1])
    not_retried = _timed_out_cells(document)
    matches = ran_rounds <= len(expected) and all(
        _order_fits(order, expected[number], orders[:number], not_retried,
                    cut=last_cut and number == ran_rounds - 1)
        for number, order in enumerate(orders))
    ledger.verdict("", "round orders vs the seeded shuffle", where, matches, str(orders),
                   str(expected[:ran_rounds]) + (" (the last round stopped: the cells of its "
                                                 "order that ran)" if last_cut else ""))


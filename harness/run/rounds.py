"""Rounds: every cell runs as N worker processes, the matrix round by round, interleaved.

Why: the largest noise on a real machine is between processes and between minutes (another
job starts, the clock boosts, a cache is cold), not between the samples of one process. So
each cell is measured by `rounds` workers, each with its share of the samples (or of the
epochs), and each round runs the whole matrix in a new random order (seeded, recorded in
run.json), so a slow minute falls on different cells in different rounds (as Google
Benchmark's random interleaving and pyperf's worker processes do). The verdicts then hold the
gap between two cells against the spread of their round medians too
(harness.analysis.noise).

This module only orders the rounds and merges a cell's round results into one CellResult;
where the workers run is the executor's business.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from harness.data.results import CaseResult, CellResult, HarnessCost
from harness.spec import Cell, CellKey, FrozenParams, Status, WorkloadSpec, worst_status

# The default number of rounds, chosen from measurements (docs/findings.md, 2-core VM under
# load, 3 quick matmul runs each): 1 round gave 10 contradicting verdicts of 54 pairwise
# judgements (A beyond B in one run, B beyond A in another), 3 and 5 rounds none; verdicts
# that flipped between "beyond" and "within" fell from 18 (1 round) to 14 (3) and 6 (5), at
# 1.0x, 1.65x and 2.3x the wall time. 5 also gives `harness diff` a between-round test that
# can reach p < 0.05 (3 rounds a side cannot go below p = 0.1).
DEFAULT_ROUNDS = 5


def round_orders(count: int, rounds: int, seed: int) -> list[list[int]]:
    """Per round, the order of the plan's `count` cells (indices): a new shuffle each round.

    One round keeps the plan's order (a run without rounds runs as it always did).
    """
    if rounds <= 1:
        return [list(range(count))]
    generator = random.Random(seed)
    orders = []
    for _ in range(rounds):
        order = list(range(count))
        generator.shuffle(order)
        orders.append(order)
    return orders


def share(total: int, rounds: int, index: int, least: int = 1) -> int:
    """Round `index`'s share of `total` units of work: as even as whole units allow, and at
    least `least`."""
    return max(least, total // rounds + (1 if index < total % rounds else 0))


def least_calls(spec: WorkloadSpec, params: dict[str, Any]) -> int:
    """The fewest calls (epochs) a round needs for a warm sample: 1 when a call is cut in
    blocks of steps (its later blocks are warm), else 2 (the first call is the cold one)."""
    blocks = spec.run.call_blocks(params) if spec.run.call_blocks is not None else 1
    return 1 if isinstance(blocks, int) and blocks > 1 else 2


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def round_cell(spec: WorkloadSpec, cell: Cell, index: int, rounds: int) -> Cell:
    """The worker's cell for round `index`: its share of the work the spec splits.

    The first name in `spec.run.round_split` (MNIST: epochs) is shared out while every round still
    gets the fewest calls it needs for a warm sample. Where there are too few of them (the
    demo's one epoch over 5 rounds), each round keeps that fewest and the next name (MNIST:
    samples per epoch) is cut instead, so the rounds together still do the planned work, not
    `rounds` times it.
    """
    params = dict(cell.params)
    least = least_calls(spec, cell.params)
    names = list(spec.run.round_split)
    first = _count(params.get(names[0])) if names else None
    if first is None:
        return replace(cell, params=params, rounds=rounds, round=index)
    if first >= rounds * least or len(names) == 1:
        params[names[0]] = share(first, rounds, index, least)
    else:
        params[names[0]] = least
        for name in names[1:]:
            per_call = _count(params.get(name))
            if per_call is not None:  # the planned calls' work, in `least`-call rounds
                params[name] = even_share(per_call * first // least, rounds)
    return replace(cell, params=params, rounds=rounds, round=index)


def even_share(total: int, rounds: int) -> int:
    """Every round's share of work that sizes a call (MNIST: samples per epoch): the same in
    every round, so the samples pooled over the rounds all time the same work per call (the
    rounds together may do up to `rounds - 1` units less than planned, never more)."""
    return max(1, total // rounds)


# The round index of an entry that is a stored cell's rounds so far, already merged (what a
# --resume keeps of a cell with rounds left: harness.run.resume): its records keep their own
# round numbers, and it comes before the rounds run now.
KEPT = -1


def merge_cases(planned: Cell, rounds: list[tuple[int, CaseResult]],
                split: tuple[str, ...]) -> CaseResult:
    """One case measured in several rounds: its per-round records together, each numbered
    with its round (pyperf's Benchmark.add_run: a list of the workers' records).

    The merged case's parameters are what one worker's calls did (the first round's: the
    rounds share out calls, never change what one call does), so every per-call figure (FLOPs,
    samples, accuracy) describes the timed call; the plan's values of the shared-out
    parameters are kept apart in `planned` where they differ.
    """
    rounds = sorted(rounds, key=lambda item: item[0])
    case = dict(rounds[0][1].case)
    planned_values = {name: planned.params[name] for name in split
                      if name in case and name in planned.params
                      and case[name] != planned.params[name]}
    status = worst_status([result.status for _, result in rounds])
    merged = CaseResult(case=case, status=status, planned=planned_values,
                        reason=next((r.reason for _, r in rounds if r.status == status
                                     and r.reason), ""))
    measured = [(index, result) for index, result in rounds if result.measured]
    if not measured:
        return merged
    head = measured[0][1]
    return replace(
        merged, timer_overhead_s=head.timer_overhead_s, predicted_call_s=head.predicted_call_s,
        rounds=sorted((record if index == KEPT else replace(record, round=index)
                       for index, result in measured for record in result.rounds),
                      key=lambda record: record.round),
        calls_per_sample_reused=next((r.calls_per_sample_reused for _, r in measured
                                      if r.calls_per_sample_reused is not None), None),
        device_profile=next((r.device_profile for _, r in measured
                             if r.device_profile and "reason" not in r.device_profile),
                            head.device_profile),
        check=next((r.check for _, r in measured if r.check and not r.check["passed"]),
                   measured[-1][1].check),
        extra=dict(head.extra),  # the first round's: it measured the idle power
        suspect="; ".join(r.suspect if index == KEPT else f"round {index + 1}: {r.suspect}"
                          for index, r in measured if r.suspect),
        peak_device_allocated_bytes=_largest(r.peak_device_allocated_bytes for _, r in measured),
        peak_device_reserved_bytes=_largest(r.peak_device_reserved_bytes for _, r in measured))


def _largest(values: Iterable[int | None]) -> int | None:
    return max((value for value in values if value is not None), default=None)


def merge_cells(planned: Cell, rounds: list[tuple[int, CellResult]],
                split: tuple[str, ...] = ()) -> CellResult:
    """A cell's round results (round index, result) as one result, cases matched by position;
    an entry of index KEPT is a stored cell's rounds so far (a --resume's), merged already."""
    rounds = sorted(rounds, key=lambda item: item[0])
    results = [result for _, result in rounds]
    first = results[0]
    status = worst_status([result.status for result in results])
    merged = CellResult(
        cell=planned, status=status,
        reason=next((r.reason for r in results if r.status == status and r.reason), ""),
        framework_version=first.framework_version, device_name=first.device_name,
        threads=first.threads,
        started=min((r.started for r in results if r.started is not None), default=None),
        finished=max((r.finished for r in results if r.finished is not None), default=None),
        device_init_seconds=first.device_init_seconds, host=first.host, slurm=first.slurm,
        peak_host_memory_source=first.peak_host_memory_source)
    merged.peak_host_memory_bytes = _largest(r.peak_host_memory_bytes for r in results)
    merged.peak_host_memory_bytes_worker = _largest(r.peak_host_memory_bytes_worker
                                                    for r in results)
    costs = [r.cost for r in results if r.cost is not None]
    if costs:
        total = HarnessCost()
        for cost in costs:
            total = total.add(cost)
        merged.cost = total
    merged.rounds_ended = sorted({ended for index, result in rounds for ended in (
        result.rounds_ended if index == KEPT
        else [index] if result.status != Status.INTERRUPTED else [])})
    placed = [(index, by_position(result)) for index, result in rounds]
    for position in range(max((max(cases, default=-1) for _, cases in placed), default=-1) + 1):
        found = [(index, cases[position]) for index, cases in placed if position in cases]
        if not found:  # no round reached this case: nor any after it
            break
        merged.cases.append(merge_cases(planned, found, split))
    return merged


def by_position(result: CellResult) -> dict[int, CaseResult]:
    """A round's cases by their position in the workload's cases: a resumed round's worker
    ran only its cell's `positions` (in order), every other worker all of them."""
    positions = result.cell.positions or range(len(result.cases))
    return dict(zip(positions, result.cases, strict=False))


@dataclass
class RoundMerger:
    """Collects each cell's round results as they arrive; gives the merged result so far."""

    spec: WorkloadSpec
    rounds: int
    planned: dict[CellKey, Cell]  # the cells as planned, by their key
    seen: dict[CellKey, list[tuple[int, CellResult]]] = field(default_factory=dict)
    # A resumed run's cells with rounds left: their stored rounds so far (harness.run.resume),
    # merged with the rounds run now.
    kept: dict[CellKey, CellResult] = field(default_factory=dict)

    @classmethod
    def of(cls, spec: WorkloadSpec, cells: list[Cell], rounds: int) -> RoundMerger:
        return cls(spec, rounds, {cell.key: replace(cell, rounds=rounds, round=0)
                                  for cell in cells})

    def add(self, cell: Cell, result: CellResult) -> CellResult:
        """Record round `cell.round` of a cell; the cell's result over its rounds so far."""
        key = cell.key
        self.seen.setdefault(key, []).append((cell.round, result))
        return self.merged(key, replace(cell, round=0, positions=()))

    def merged(self, key: CellKey, fallback: Cell) -> CellResult:
        """The cell's result over its rounds so far (its kept ones, then those run now)."""
        kept = [(KEPT, self.kept[key])] if key in self.kept else []
        return merge_cells(self.planned.get(key) or fallback, kept + self.seen.get(key, []),
                           self.spec.run.round_split)

    def first_round(self, cell: Cell) -> CellResult | None:
        """The cell's first round's result (None: none yet): as its worker gave it, or, for a
        cell a resume kept rounds of, its merged rounds' round-0 records."""
        if cell.key not in self.kept:
            return next((result for index, result in self.seen.get(cell.key, [])
                         if index == 0), None)
        whole = self.merged(cell.key, replace(cell, round=0, positions=()))
        cases = [replace(case, rounds=[record for record in case.rounds if record.round == 0])
                 for case in whole.cases]
        return replace(whole, cases=cases) if any(case.rounds for case in cases) else None

    def calibrated(self, cell: Cell) -> Cell:
        """A later round's cell carrying the calls per sample its first round found, per case
        (first_round_calibration), and the FLOPs it counted (first_round_flops); the first
        round's, or one whose first round has no result, as it is."""
        first = self.first_round(cell)
        if cell.round == 0 or first is None:
            return cell
        kept = [(KEPT, self.kept[cell.key])] if cell.key in self.kept else []
        counted = replace(cell, flops=first_round_flops(first),
                          busy=contended_throughout(kept + self.seen.get(cell.key, [])))
        if self.spec.run.timing == "per_call":
            return counted
        return replace(counted, calibration=first_round_calibration(first),
                       levels=first_round_levels(first))


# What a later round takes of its first round's FLOP record (harness.run.casepasses flops_record).
FLOPS_KEYS = ("flops_per_call", "flops_counted_by", "flops_coverage", "flops_second_opinion")


def first_round_flops(first: CellResult) -> tuple[FrozenParams | None, ...]:
    """Per case (by position), the FLOP record the first round counted; None where it has
    none to give (not measured, or its counter failed). Why: a call's FLOPs are fixed by the
    case, and the counter (torch's FlopCounterMode pass, a JAX/Keras cost analysis) runs an
    extra traced call in every later round's worker for the same number."""
    return tuple(FrozenParams({key: case.extra[key] for key in FLOPS_KEYS if key in case.extra})
                 if case.measured and case.extra.get("flops_per_call") is not None else None
                 for case in first.cases)


def contended_throughout(rounds: list[tuple[int, CellResult]]) -> str:
    """Why a later round's worker should time each case once: an earlier round of the cell
    had a case contended in every attempt ('' if none). Why: the retries' pauses found the
    same load each time (a hypervisor stealing a core of the H100 host throughout: 2-6 s of
    pauses per run of a small model), and every later round paid them again."""
    for index, result in rounds:
        if any(len(case.attempts) > 1 and all(attempt.contended for attempt in case.attempts)
               for case in result.cases):
            which = "an earlier session's round" if index == KEPT else f"round {index + 1}"
            return f"{which} of this cell had a case contended in every attempt"
    return ""


def first_round_levels(first: CellResult) -> tuple[float | None, ...]:
    """Per case (by position), the seconds per call the first round's samples sat at (their
    median); None for a case it did not measure. Why: a later round's warm-up ends once its
    calls are back there (harness.measure.timing at_level) instead of waiting for five of
    them to agree again."""
    return tuple(statistics.median(case.samples) if case.measured and case.samples else None
                 for case in first.cases)


def first_round_calibration(first: CellResult) -> tuple[int | None, ...]:
    """Per case (by position, as merge_cells matches them), the calls per sample the first
    round used; None for a case it did not measure. Why: every later round's worker would
    otherwise grow the same count again from 1 call."""
    return tuple(case.calls_per_sample if case.measured and case.samples else None
                 for case in first.cases)

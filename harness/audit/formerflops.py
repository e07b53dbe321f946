"""FLOP formulas a built-in workload printed with before its runs kept their own count.

Why: a run made before the worker stored `flops_per_call` (f283e59, 2026-11-24) printed its
FLOPs (measurements.csv's flops column, summary.md's GFLOP/s) from the workload's formula of
that day. Where today's formula differs, `harness check` cannot recompute those figures from
today's code alone; with the formula of the run's day, fixed here as history (it must not
follow later edits of the workload), it can. One formula per workload and period, chosen by
the run's start time, never by trying formulas until one fits a printed figure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FormerFormula:
    """A FLOP formula one workload used for runs started before `replaced` (epoch seconds)."""

    workload: str
    replaced: float
    replaced_by: str  # the commit that replaced it, named in the figure that used it
    count: Callable[[Mapping[str, Any]], float | None]

    @property
    def label(self) -> str:
        return f"the workload's formula before {self.replaced_by}"


# f283e59 (2026-11-24 08:15:58 UTC) replaced MNIST's "6 FLOPs per weight per sample" with the
# executed matmul count; the docs' example runs of 2026-11-22 were printed with the former.
MATMUL_COUNT_LANDED = 1795508158.0
MATMUL_COUNT_COMMIT = "f283e59"

# Weights plus biases of the two nets as the workload declared them then (its summary lines:
# 101,770 and 1,796,010 parameters), so a later change of the nets leaves this history alone.
SIX_PER_WEIGHT_PARAMETERS = {"mnist-small": 101_770, "mnist-wide": 1_796_010}


def six_per_weight(parameters: int) -> Callable[[Mapping[str, Any]], float | None]:
    """One epoch's FLOPs by the rule of thumb: 6 per weight per training sample."""
    def count(case: Mapping[str, Any]) -> float | None:
        samples = case.get("train_samples")
        if not isinstance(samples, int) or isinstance(samples, bool):
            return None
        return 6.0 * parameters * samples
    return count


FORMER_FORMULAS = tuple(
    FormerFormula(workload, MATMUL_COUNT_LANDED, MATMUL_COUNT_COMMIT, six_per_weight(parameters))
    for workload, parameters in SIX_PER_WEIGHT_PARAMETERS.items())


@dataclass(frozen=True)
class FormerCount:
    """One call's FLOPs by the formula in force when its run started."""

    flops: float
    label: str


def count_of_its_day(workload: str, case: Mapping[str, Any],
                     started: float | None) -> FormerCount | None:
    """The FLOPs of one call by the formula of the day its run started, where a formula
    other than today's was in force then (None: today's formula, or the start not stored)."""
    if started is None:
        return None
    formulas = sorted((formula for formula in FORMER_FORMULAS
                       if formula.workload == workload and started < formula.replaced),
                      key=lambda formula: formula.replaced)
    if not formulas:
        return None
    flops = formulas[0].count(case)  # the earliest replacement after the start was in force
    return None if flops is None else FormerCount(flops, formulas[0].label)

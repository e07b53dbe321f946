"""A stored case's figures recomputed from its raw samples: the second computation of its
statistics (numpy, not the report's pandas: free functions of the CaseResult, never the
report's CaseRow) and of the work one call did; Measured only locates a case in its run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.core import registry
from harness.core.units import (
    device_kind,
    format_size,
)
from harness.data.casekey import CaseKey
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.spec import Status, WorkloadSpec

DERIVED_TOLERANCE = 1e-9
ENERGY_TOLERANCE = 0.01  # joules vs watts x seconds: the records round far below 1%
NOISY_FRACTION = 0.10  # IQR / median above which the report calls a case noisy

def median_or_none(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def quartiles(values: list[float]) -> tuple[float, float] | None:
    """(q1, q3) by linear interpolation between the sorted values (numpy's default)."""
    if not values:
        return None
    low, high = np.percentile(np.asarray(values, dtype=float), [25.0, 75.0])
    return float(low), float(high)


# --- a stored case's figures, recomputed from its raw samples ---------------------------------

def steps_per_call(case: CaseResult) -> float:
    """Steps in one call (1 where the workload counts none): per step = per call / steps."""
    steps = case.extra.get("steps_per_call")
    return float(steps) if isinstance(steps, (int, float)) and steps > 0 else 1.0


def is_valid(case: CaseResult) -> bool:
    return case.status == Status.OK and bool(case.samples)


def _per_step(case: CaseResult) -> list[float]:
    return [float(seconds) / steps_per_call(case) for seconds in case.samples]


def median_step(case: CaseResult) -> float | None:
    return median_or_none(_per_step(case))


def iqr_step(case: CaseResult) -> float | None:
    found = quartiles(_per_step(case))
    return None if found is None else found[1] - found[0]


def median_call(case: CaseResult) -> float | None:
    return median_or_none([float(seconds) for seconds in case.samples])


def noise_fraction(case: CaseResult) -> float | None:
    """IQR / median of the time per step, as the report's noise rule reads it."""
    middle, iqr = median_step(case), iqr_step(case)
    return iqr / middle if middle and iqr is not None else None


# --- where a stored case lies, and how the report names it --------------------------------------

@dataclass(frozen=True)
class Measured:
    """A stored case in its cell and run: no figure of its own (the functions above recompute
    each from the case's raw samples), only its key and the names the report gives it."""

    document: RunDocument
    cell: CellResult
    case: CaseResult

    @property
    def key(self) -> CaseKey:
        return CaseKey.in_run(self.document, self.cell, self.case)

    @property
    def size_text(self) -> str:
        """The size as the report prints it ('' for a case outside the sweep)."""
        label = self.key.size_label
        return format_size(label, self.document.sweep) if label else ""

    @property
    def size_value(self) -> float | None:
        """The size as a number; a case outside the sweep counts as size 0 (as the report's)."""
        label = self.key.size_label
        if not label:
            return 0.0
        try:
            return float(label)
        except ValueError:
            return None

    @property
    def size_number(self) -> float | None:
        """The size as a number, None outside the sweep (sorts last, as pandas' NaN does)."""
        return self.size_value if self.key.size_label else None

    @property
    def cell_name(self) -> str:
        return f"{self.cell.framework} {self.cell.device} {self.cell.variant}"

    @property
    def subject(self) -> str:
        label = self.key.size_label
        return self.cell_name + (f" {self.document.sweep}={label}" if label else "")

    @property
    def kind(self) -> str:
        return device_kind(self.cell.device)


def expected_work(spec: WorkloadSpec | None, case: CaseResult) -> dict[str, float | None]:
    """FLOPs and bytes of one timed call from the raw fields: the worker's own count first,
    then the spec's formulas on what one call did (None: does not apply or cannot say)."""
    counted = case.extra.get("flops_per_call")
    flops = float(counted) if counted else None
    bytes_moved = None
    if spec is not None:
        if flops is None and spec.flops is not None:
            formula = spec.flops(case.case)
            flops = None if formula is None else float(formula)
        if spec.bytes_moved is not None:
            moved = spec.bytes_moved(case.case)
            bytes_moved = None if moved is None else float(moved)
    return {"flops": flops, "bytes": bytes_moved}


def load_spec(workload: str) -> tuple[WorkloadSpec | None, str]:
    """The workload's spec, or None and why (a plugin not installed here)."""
    try:
        return registry.load_workload(workload), ""
    except Exception as exc:  # noqa: BLE001 - an unknown workload makes figures unverifiable
        return None, f"workload {workload!r} cannot be loaded here ({exc})"


def _param_text(value: Any) -> str:
    """A parameter as harness.data.store writes it into a param_* column."""
    if isinstance(value, (list, tuple)):
        return "x".join(str(part) for part in value)
    return "" if value is None else str(value)


# A CSV row belongs to a case of run.json when the case's key and every parameter it names

"""The model's one fitted constant and its check leaving each model out (issue 51, part 5),
and the one measured constant (model.RECORDED_OP_DISPATCHES) derived again from the rows.

The constant is model.STEP_OVERHEAD_DISPATCHES: the fixed host work of one training step on
a GPU (the backward handed to the device's autograd thread and back, the optimizer's
foreach set-up), counted in the profile's tiny in-place dispatches. The CPU run cannot
measure it (a CPU's backward runs on the calling thread, its optimizers loop per tensor)
and no profile row holds it, so it is fitted to the validation's measured GPU steps. How,
said once:

- a cell's predicted step as a function of the constant K is read off its stored
  prediction's terms: max(host queue without the fixed work + K x unit, device queue) +
  the copy that blocks + the syncs, where unit = optimizer steps x one dispatch x the
  host's ops scale (model.torch_host_terms);
- **fitted**: the K whose predictions are median-unbiased over the cells (the median of
  log(predicted / measured) is 0), found by bisection (that median never falls as K grows);
  cells without an optimizer step do not move with K and are left out of the fit;
- **left out**: for each model, K fitted on every other model's cells (of every rows file
  given: both GPUs), then used for that model's cells. The validation's table shows the
  model with the shipped K (in-sample) and with each model's left-out K, side by side.

RECORDED_OP_DISPATCHES (model 4: host 'profiled' prices the step's host work per op) is no
fit to a GPU step: per validated cell, the tiny op of the GPU host's own CPU run (its
features' tiny_op_s_here, model.host_here) over its profile's tiny in-place dispatch; the
median over every cell of every lending (`recorded_op_dispatches`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.predict.features import StepFeatures
from harness.predict.model import STEP_OVERHEAD_DISPATCHES, host_here
from harness.predict.profile import Profile
from harness.predict.rates import dispatch_in_place

HIGHEST = 10_000.0  # dispatches: far above any step's fixed host work (~0.6 ms at 6 us)
BISECTIONS = 60


@dataclass(frozen=True)
class FitCell:
    """One validated cell as the fit sees it: the measured step and the prediction's terms."""

    model: str
    measured_s: float
    host_without_s: float  # the host queue without the step's fixed host work
    unit_s: float  # host seconds one dispatch of the constant adds to this cell
    device_s: float
    tail_s: float  # the blocking copy and the sync points: on top of both queues

    def seconds(self, dispatches: float) -> float:
        return max(self.host_without_s + dispatches * self.unit_s, self.device_s) + self.tail_s


def fit_cell(model: str, measured_s: float, prediction: Mapping[str, Any]) -> FitCell:
    """A FitCell from a stored prediction record (model version 2's terms)."""
    terms = prediction["terms"]
    unit = (terms.get("optimizer_steps", 0.0) * terms.get("step_overhead_s", 0.0)
            / STEP_OVERHEAD_DISPATCHES * terms.get("ops_scale", 1.0))
    if not terms.get("host_step_s"):
        unit = 0.0  # a CUDA graph replays no Python: the constant does not apply
    host = terms["host_python_s"] + terms["host_ops_s"]
    return FitCell(model=model, measured_s=measured_s, host_without_s=host, unit_s=unit,
                   device_s=terms["device_kernels_s"] + terms["device_copy_s"],
                   tail_s=terms["copy_blocking_s"] + terms["sync_s"])


def median_log_ratio(cells: Iterable[FitCell], dispatches: float) -> float:
    return statistics.median(math.log(cell.seconds(dispatches) / cell.measured_s)
                             for cell in cells)


def fitted_dispatches(cells: Iterable[FitCell]) -> float | None:
    """The median-unbiased constant over CELLS (module docstring); None without a cell
    that moves with it."""
    moving = [cell for cell in cells if cell.unit_s > 0]
    if not moving:
        return None
    low, high = 0.0, HIGHEST
    if median_log_ratio(moving, low) >= 0:
        return 0.0  # already reads high with no fixed work: the constant cannot be negative
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        if median_log_ratio(moving, middle) < 0:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def left_out_constants(cells: Iterable[FitCell]) -> dict[str, float]:
    """{model: the constant fitted on every other model's cells} (module docstring)."""
    found = list(cells)
    constants = {}
    for model in sorted({cell.model for cell in found}):
        fitted = fitted_dispatches(cell for cell in found if cell.model != model)
        if fitted is not None:
            constants[model] = fitted
    return constants


def recorded_op_ratio(features: StepFeatures, profile: Profile) -> float | None:
    """A GPU host's recorded tiny op (FEATURES from its own CPU run) in PROFILE's tiny
    in-place dispatches; None where the step has no op that does work."""
    tiny_s = host_here(features)["tiny_op_s_here"]
    return tiny_s / dispatch_in_place(profile) if tiny_s > 0 else None


def recorded_op_dispatches(ratios: Iterable[float]) -> float:
    """model.RECORDED_OP_DISPATCHES from the cells' recorded_op_ratio: their median."""
    return statistics.median(ratios)

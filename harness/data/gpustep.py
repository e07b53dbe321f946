"""A predicted GPU step as run.json stores it: one record per CPU case, profile and host.

Why here, beneath the predictor (harness/predict/model.py makes them, jaxmodel.py too): the
run document (harness.data.results CaseResult.gpu_predictions) holds them as typed records,
and the data layer imports nothing above it. The record is JSON-able and self-contained: the
answer, both queues, what it stood on and every term, so a check can recompute it
(harness/audit/predictions.py) and `recombined` can rebuild the step from its terms alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from harness.data.serial import IF_SET, JsonRecord, JsonValue

# The torch model's version, named by each record it makes:
# 2: the training step's fixed host work (host_step_s), one CPU model not rescaled, a
# recurrent layer the CPU decomposed into time steps "unknown".
# 3: a profiler range counts as an optimizer step only where it updates a tensor in place
# (a DataLoader's range was counted: kernels.optimizer_steps).
# 4: host 'profiled' prices the step's host work per op at the profiled host's cost
# (op_host_s), not this CPU's time rescaled by the host.python loops.
MODEL_VERSION = 4
PREDICTED, UNKNOWN = "predicted", "unknown"


@dataclass(frozen=True)
class Prediction(JsonRecord):
    """One predicted GPU step, JSON-able: the answer, both queues, what it stood on (profile
    identity, host choice, variant) and every term, so a check can recompute it."""

    model_version: int = MODEL_VERSION
    # The framework whose step this is (torch, keras-torch, jax, keras-jax, tensorflow, ...):
    # which model made it (harness/predict/jaxmodel.py predict_any) and which CPU step it
    # sets against.
    framework: str = "torch"
    status: str = UNKNOWN
    reason: str = ""
    seconds: float | None = None
    host_s: float | None = None
    device_s: float | None = None
    regime: str = ""
    mapped_share: float | None = None
    unmapped: dict[str, int] = field(default_factory=dict)
    profile: dict[str, JsonValue] = field(default_factory=dict)
    host_choice: str = "profiled"
    this_host: dict[str, float | str] = field(default_factory=dict)  # HostSpeed.record()
    variant: str = "as-written"
    terms: dict[str, float] = field(default_factory=dict)
    device_by_entry: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The variant of the CPU cell it was made from, where stored with a run's case ('' for a
    # prediction made outside a run: not written); `framework` names that cell's framework.
    cell_variant: str = field(default="", metadata=IF_SET)
    WRITE_UNMARKED: ClassVar[str] = "always"

    def recombined(self) -> float | None:
        """The step's seconds from the stored terms alone (combine)."""
        return combine(self.terms) if self.status == PREDICTED else None


# profile name -> host ('profiled', 'this') -> the prediction: one CPU case's.
CasePredictions = dict[str, dict[str, Prediction]]


def combine(terms: dict[str, float]) -> float:
    """seconds = max(host, device) + the parts that overlap neither (harness/predict/model.py's
    docstring)."""
    device = terms["device_kernels_s"] + terms["device_copy_s"]
    return max(host_seconds(terms), device) + terms["copy_blocking_s"] + terms["sync_s"]


def host_seconds(terms: dict[str, float]) -> float:
    """The host queue: this CPU's host work, launches and allocations, and the training
    step's fixed host work (absent from a model-1 record: 0 there)."""
    return terms["host_python_s"] + terms["host_ops_s"] + terms.get("host_step_s", 0.0)

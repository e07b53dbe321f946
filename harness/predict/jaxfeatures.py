"""The features of a jitted JAX step (jax, keras-jax), and which features a stored record is.

A jitted step is one executable: one dispatch from the host per step, whatever it holds. Its
work is the compiled program's: `cost_analysis()`'s FLOPs and bytes accessed (XLA's own
count, totals), and the kernels of its optimized HLO (harness/predict/hlo.py: one per
fusion, dot or other op of the entry computation that runs something, with the FLOPs of its
dots and convolutions and the bytes it moves). Recorded on a CPU by backends/jax/features.py.

Host time here, three measured parts (each the median of a few calls on this CPU):
- `dispatch_here_s`: one call of a jitted stand-in that takes the step's arguments (zeros of
  their shapes, the state donated) and returns its state as it is: the host's cost of
  flattening the step's arguments, checking them and running an executable, with no work
  in it (`call_here_s`, the real step's call until it returns, is kept for reading: XLA's
  CPU runtime may run part of a small program before the call returns);
- `tiny_dispatch_here_s`: the same for a jitted `x + 1` of a scalar (what any dispatch costs
  here), so `dispatch_here_s - tiny_dispatch_here_s` is what this step's arguments add;
- `loop_host_here_s`: the user's loop around the call, per step (gathering a batch, placing
  it, Keras' fit loop and callbacks), timed with the executable replaced by a stub that
  returns its state at once: host work with no arithmetic in it.

A TensorFlow step (tensorflow, keras-tensorflow) stores a `NoProfileFeatures` record: no
profile of the lent GPUs can price it (they have no TensorFlow), so its prediction is
"unknown" with how to make one; its record names the framework so the check can see why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from harness.data.noprofile import NoProfileFeatures
from harness.data.serial import JsonRecord, JsonValue
from harness.predict.features import StepFeatures
from harness.predict.hlo import HloKernel

JAX_FRAMEWORKS = ("jax", "keras-jax")
JAX_FEATURES_VERSION = 1


class _Record(JsonRecord):
    WRITE_UNMARKED: ClassVar[str] = "always"


@dataclass(frozen=True)
class KernelRecord(_Record):
    """One kernel of the program (hlo.HloKernel, stored)."""

    op: str
    kind: str
    dtype: str = "?"
    flops: float = 0.0
    bytes: float = 0.0
    highest: bool = False

    @classmethod
    def of(cls, kernel: HloKernel) -> KernelRecord:
        return cls(op=kernel.op, kind=kernel.kind, dtype=kernel.dtype, flops=kernel.flops,
                   bytes=kernel.bytes, highest=kernel.highest)


@dataclass(frozen=True)
class JaxFeatures(_Record):
    """The features of one jitted step (module docstring); totals derived by `summarized`."""

    jax_features_version: int = JAX_FEATURES_VERSION
    framework: str = "jax"
    how: str = ""
    platform: str = ""  # the backend whose HLO was read ("cpu": the approximation in hlo.py)
    dispatches: int = 1  # executables dispatched per step
    kernels: list[KernelRecord] = field(default_factory=list)
    entry_opcodes: dict[str, int] = field(default_factory=dict)
    loops: int = 0  # while / conditional in the entry: a trip count the text does not give
    cost_flops: float | None = None  # compiled.cost_analysis()["flops"]
    cost_bytes: float | None = None  # compiled.cost_analysis()["bytes accessed"]
    dispatch_here_s: float | None = None
    tiny_dispatch_here_s: float | None = None
    call_here_s: float | None = None
    loop_host_here_s: float | None = None
    step_s: float | None = None  # the step's wall time here (the case's median per step)
    h2d_bytes: int | None = None
    h2d_how: str = ""
    notes: list[str] = field(default_factory=list)
    # Derived from the kernels (summarized); stored so a reader needs no code.
    kernel_count: int = 0
    kernels_by_kind: dict[str, int] = field(default_factory=dict)
    matmul_flops: float = 0.0
    kernel_bytes: float = 0.0
    largest_matmul_flops: float = 0.0

    def recomputed(self) -> JaxFeatures:
        return summarized(self)

    def record(self) -> dict[str, JsonValue]:
        return self.to_dict()


def summarized(features: JaxFeatures) -> JaxFeatures:
    """FEATURES with its totals computed from its kernels."""
    kernels = features.kernels
    matmuls = [kernel.flops for kernel in kernels if kernel.kind in ("matmul", "conv")]
    return replace(features, kernel_count=len(kernels),
                   kernels_by_kind=dict(sorted(Counter(k.kind for k in kernels).items())),
                   matmul_flops=float(sum(matmuls)),
                   kernel_bytes=float(sum(kernel.bytes for kernel in kernels)),
                   largest_matmul_flops=float(max(matmuls, default=0.0)))


Features = StepFeatures | JaxFeatures | NoProfileFeatures


def load_features(record: Mapping[str, Any]) -> Features:
    """The features a stored record holds: a jitted JAX step's, a TensorFlow step's stand-in,
    else torch's (a record of features version 1 or 2 names no other framework)."""
    framework = str(record.get("framework") or "")
    if "jax_features_version" in record:
        return JaxFeatures.from_dict(record)
    if "no_profile" in record:
        return NoProfileFeatures.from_dict(record)
    if framework in JAX_FRAMEWORKS:
        raise TypeError(f"a {framework} features record without jax_features_version")
    return StepFeatures.from_dict(record)

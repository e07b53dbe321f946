"""The device-independent features of one step, from a run on any CPU (framework-free form).

What a GPU prediction needs to know about a step that does not depend on the device it ran
on: the ops in the order they ran, each with its shapes, dtypes, FLOPs (the harness's own
formulas: backends/torch/flops.py) and bytes; how many there are and how long the serial chain
through them is; the host time each took on this CPU (on a CPU the op's arithmetic is in it
too); the bytes a step copies to the device; the points where the host waits for the device
(sync points); the precision. A backend collects the ops (backends/torch/features.py, from a
TorchDispatchMode); `summarize_ops` derives every total here, so a stored record can be checked
by recomputing them (`StepFeatures.recomputed`).

Conventions, said once:
- bytes of an op: the sizes of its tensor inputs plus its outputs (numel x element size, an
  expanded or strided view counted at its full numel); views and metadata ops move nothing: 0.
- FLOPs: torch's FlopCounterMode formulas plus the harness's; cheap ops (elementwise,
  reductions, views, copies) count 0 by that convention; a heavy op without a formula has
  flops None and is listed in `unknown_ops` by name (the total is then a lower bound).
- serial chain: the longest path through the ops' dependency graph, where an op depends on the
  ops that made, or last wrote in place, a tensor it reads (tracked per tensor object, so a
  write through another view of the same storage is missed: an approximation). `chain`
  counts the ops on that path that do work (views weigh 0; they launch no kernel), and
  OpRecord.depth is each op's place on it. On one stream every kernel runs in order anyway;
  `kernel_ops / chain` says how much several streams could overlap at most.
- host time: each op's own seconds, timed around the op's call inside the dispatch mode (the
  mode's bookkeeping outside the clock), from the fastest of a few recording passes (by the
  sum of its ops' seconds; `pass_host_s` keeps each pass's sum; version 1: one pass);
  `step_s` is the median of plain calls of the step without the mode, and `python_s` what
  the step spent outside aten ops (the user's Python, autograd's engine): step_s -
  host_s_ops, floored at 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from harness.data.serial import JsonRecord, JsonValue

# 2: host times from the fastest of several passes (pass_host_s). 3: outside_ops_s from the
# gaps between the mode's return and its next entry, each the least over the passes.
FEATURES_VERSION = 3
# Kinds of op (OpRecord.kind). Views and metadata launch no kernel; the others do on a GPU.
VIEW, MARKER = "view", "marker"  # a marker: a profiler range's enter/exit, host work only
NO_KERNEL = frozenset({VIEW, MARKER})


class _Record(JsonRecord):
    WRITE_UNMARKED: ClassVar[str] = "always"


@dataclass(frozen=True)
class OpRecord(_Record):
    """One aten op of the step: name, kind, [shape, dtype] of its tensor inputs and outputs,
    FLOPs (None: a heavy op no formula covers), bytes, its depth in the serial chain, seconds."""

    op: str
    kind: str
    # [shape, dtype] pairs; plain `list`: the serializer copies it as it is
    inputs: list = field(default_factory=list)  # type: ignore[type-arg]
    outputs: list = field(default_factory=list)  # type: ignore[type-arg]
    flops: int | None = 0
    bytes: int = 0
    depth: int = 0
    host_s: float = 0.0

    @property
    def kernel(self) -> bool:
        """Whether the op does work (launches a kernel on a GPU); a view or metadata op not."""
        return self.kind not in NO_KERNEL


@dataclass(frozen=True)
class SyncPoint(_Record):
    """A place where the host reads a device value (on a GPU it waits there): what, where
    (file:line of the code outside torch that asked, else torch's own frame), whether that
    is the user's code, and how many times per step. A read inside torch may not wait on a
    GPU (Adam's step counter lives on the host); one in the user's code does."""

    what: str
    where: str
    user_code: bool = True
    count: int = 1


@dataclass(frozen=True)
class StepFeatures(_Record):
    """The features of one step (module docstring); totals derived by `summarize_ops`."""

    features_version: int = FEATURES_VERSION
    framework: str = ""
    how: str = ""
    ops: list[OpRecord] = field(default_factory=list)
    sync_points: list[SyncPoint] = field(default_factory=list)
    # Given by the caller: the step's plain wall time here, and what it copies to a device.
    step_s: float | None = None
    h2d_bytes: int | None = None
    h2d_how: str = ""
    ops_inside_host_reads: int = 0  # ops a print/repr ran, left out of `ops`
    pass_host_s: list[float] = field(default_factory=list)  # each recorded pass's host seconds
    flop_coverage: dict[str, Any] = field(default_factory=dict)  # flops.CoverageRecord
    # Seconds between the step's ops outside the recorder, each gap the least over the passes
    # that ran the same ops, less entering the recorder's mode (backends/torch/features.py
    # Recording.outside_ops_seconds): the Python around the ops (None: recorded before it
    # was kept; version 2 counted the recorder's own bookkeeping and one pass's gaps).
    outside_ops_s: float | None = None
    # Derived from the above (summarize_ops); stored so a reader needs no code, checked on reload.
    op_count: int = 0
    kernel_ops: int = 0
    flops: int = 0
    bytes: int = 0
    unknown_ops: dict[str, int] = field(default_factory=dict)
    ops_by_kind: dict[str, int] = field(default_factory=dict)
    ops_by_name: dict[str, int] = field(default_factory=dict)
    chain: int = 0
    host_s_ops: float = 0.0
    host_s_per_op: float | None = None
    python_s: float | None = None
    sync_count: int = 0
    user_sync_count: int = 0
    precision: dict[str, JsonValue] = field(default_factory=dict)

    def recomputed(self) -> StepFeatures:
        """The same record with every derived field computed again from its ops."""
        return summarize_ops(self)

    def record(self) -> dict[str, JsonValue]:
        """The JSON-able record stored with a case."""
        return self.to_dict()


def dtypes_of(pairs: Iterable[JsonValue]) -> list[str]:
    return [str(pair[1]) for pair in pairs if isinstance(pair, list) and len(pair) == 2]


def _precision_of(ops: list[OpRecord]) -> dict[str, JsonValue]:
    """Which dtypes the step computed in: ops per dtype seen (any input or output), and the
    FLOPs per dtype of the ops that have FLOPs (their first input's dtype)."""
    seen: Counter[str] = Counter()
    flops_by: Counter[str] = Counter()
    for op in ops:
        for dtype in set(dtypes_of(op.inputs) + dtypes_of(op.outputs)):
            seen[dtype] += 1
        if op.flops:
            first = dtypes_of(op.inputs)[:1] or ["?"]
            flops_by[first[0]] += op.flops
    floating = sorted(name for name in seen if "float" in name or "bfloat" in name)
    return {"ops_by_dtype": dict(sorted(seen.items())),
            "flops_by_dtype": dict(sorted(flops_by.items())),
            "floating": list(floating)}


def summarize_ops(features: StepFeatures) -> StepFeatures:
    """FEATURES with every derived total computed from its ops and sync points."""
    ops = features.ops
    unknown = Counter(op.op for op in ops if op.flops is None)
    host_s_ops = sum(op.host_s for op in ops)
    step_s = features.step_s
    python_s = None if step_s is None else max(0.0, step_s - host_s_ops)
    return replace(
        features,
        op_count=len(ops),
        kernel_ops=sum(op.kernel for op in ops),
        flops=sum(op.flops or 0 for op in ops),
        bytes=sum(op.bytes for op in ops),
        unknown_ops=dict(sorted(unknown.items())),
        ops_by_kind=dict(sorted(Counter(op.kind for op in ops).items())),
        ops_by_name=dict(sorted(Counter(op.op for op in ops).items())),
        chain=max((op.depth for op in ops), default=0),
        host_s_ops=host_s_ops,
        host_s_per_op=(step_s / len(ops)) if step_s is not None and ops else None,
        python_s=python_s,
        sync_count=sum(point.count for point in features.sync_points),
        user_sync_count=sum(point.count for point in features.sync_points if point.user_code),
        precision=_precision_of(ops),
    )

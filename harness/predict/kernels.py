"""The kernels a GPU would launch for a step recorded on a CPU, per variant (the model's plan).

A CPU run's op list (harness/predict/features.py) is turned into the GPU's launches here;
harness/predict/model.py then prices them. What is assumed, op by op:

- An op that does work (not a view, profiler mark or host read) launches one kernel, priced
  by its kind: matmul, attention, rnn and other contractions at the matmul rate of their
  dtype, convolutions at the conv rate (float32 at TF32: cuDNN's default in torch), the rest
  by their bytes at elementwise.add's bandwidth (reductions, norms and losses at
  reduction.sum's). float32 matmuls stay float32 (torch's default leaves TF32 off there).
- A forward convolution launches the extra kernels the profile counted for `conv2d fwd`
  (ops.kernels minus ops.aten's kernel ops); they cost the device a kernel floor each and the
  host nothing (they are launched inside the same op's call). No other op is corrected: the
  profile's `linear fwd+bwd` row does not say which op its two extra kernels belong to.
- An optimizer's step: the ops between a profiler range's enter and exit (torch's optimizers
  wrap `step` and `zero_grad` in one; a step opens no other range unless the user adds one).
  On a CPU torch runs Adam one parameter at a time; on a GPU its default foreach path runs
  each update op once for all parameters. A region that is torch's single-tensor Adam (it
  holds `aten.lerp_` and `aten.addcdiv_`; one addcdiv_ per parameter) is replaced by the
  profile's `adam step (4 tensors)` kernel count per FOREACH_TENSORS parameters, its bytes
  shared evenly among them. Other optimizers' regions are kept op for op (noted).
- Variants: `compiled` fuses each run of consecutive bandwidth-bound kernels outside an
  optimizer region (no matmul, conv or host read between them) into one kernel moving the
  run's summed bytes (an upper bound: Inductor keeps intermediates in registers); matmuls
  and convolutions stay library calls. `bf16` / `fp16` (autocast) run float32 matmul-class
  ops at that dtype's rate, add one cast kernel per float32 input of each (numel x 6 bytes),
  and halve the bytes of elementwise ops outside optimizer regions (activations flow at 2
  bytes); norms, losses and reductions stay float32 as autocast runs them.
- An op with no FLOP formula (kind `unknown`) or a matmul-class op of a dtype the profile has
  no rate for (float64, integers) is unmapped: charged one launch and a kernel floor, and
  named; the model says "unknown" when too many are.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from harness.core import registry
from harness.predict.features import NO_KERNEL, OpRecord, StepFeatures
from harness.predict.profile import Profile

# torch's multi_tensor_apply takes at most 36 tensors per list in a launch for the 4-list
# ops Adam uses (depth_to_max_tensors in ATen's MultiTensorApply.cuh); more parameters take
# another launch per op. Size-driven chunking (320 blocks of 64 Ki elements) is not modelled.
FOREACH_TENSORS = 36
ADAM_ROW, CONV_ROW = "adam step (4 tensors)", "conv2d fwd"
FLOP_ENTRY = {"matmul": "matmul", "attention": "matmul", "rnn": "matmul",
              "contraction": "matmul", "conv": "conv"}
REDUCING = frozenset({"reduction", "norm", "loss"})
DTYPE_LABEL = {"matmul": {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"},
               # conv float32 runs at TF32 (cuDNN's default); no fp16 conv row: bf16's
               "conv": {"float32": "tf32", "bfloat16": "bf16", "float16": "bf16"}}
ENTER, EXIT = "profiler._record_function_enter", "profiler._record_function_exit"
HALF_BYTES = {"bf16": 2, "fp16": 2}
CELL_SPLIT, CELL_GATE = "aten.unsafe_split", "aten.sigmoid_"  # decomposed_cells' signature


@dataclass(frozen=True)
class Variant:
    """What the harness's variant changes, parsed from 'as-written' or names joined by '+'
    ('cuda-graph+resident'): graph replay, fusion, no input copy, pinned copies, autocast."""

    name: str = "as-written"
    graph: bool = False
    compiled: bool = False
    resident: bool = False
    pinned: bool = False
    autocast: str = ""  # "", "bf16" or "fp16"

    @classmethod
    def parse(cls, name: str) -> Variant:
        known = predicted_variants()
        parts = [part for part in name.split("+") if part and part != "as-written"]
        unknown = [part for part in parts if part not in known]
        if unknown:
            raise ValueError(f"unknown variant {unknown[0]!r} (known: {', '.join(known)})")
        casts = [part for part in parts if part in HALF_BYTES]
        if len(casts) > 1:
            raise ValueError(f"one autocast dtype at most, not {' and '.join(casts)}")
        return cls(name=name or "as-written", graph="cuda-graph" in parts,
                   compiled="compiled" in parts, resident="resident" in parts,
                   pinned="pinned" in parts, autocast=casts[0] if casts else "")


def predicted_variants() -> tuple[str, ...]:
    """The variants this plan models: the entries of the one variant catalogue (the model
    file's, harness.core.registry.fix_catalogue) that say `predicted`."""
    return registry.fix_catalogue().predicted_variants


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel of the plan: what it came from, the profile entry whose rate prices it,
    its work (FLOPs or bytes, the entry's unit), and what the host pays to launch it."""

    op: str
    entry: str
    work: float
    launches: int = 1  # host launch calls (0: launched inside another op's call)
    allocates: bool = False  # the host allocates its output (an out-of-place op)


@dataclass
class Plan:
    """The step's GPU kernels, the host seconds of its ops that launch nothing (measured
    here), and what could not be mapped."""

    kernels: list[Kernel] = field(default_factory=list)
    host_other_s: float = 0.0
    kernel_ops: int = 0
    unmapped: Counter[str] = field(default_factory=Counter)
    unmapped_host_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def first_dtype(op: OpRecord) -> str:
    for pair in op.inputs:
        if isinstance(pair, list) and len(pair) == 2:
            return str(pair[1])
    return "?"


def numel(shape: object) -> int:
    return math.prod(int(size) for size in shape) if isinstance(shape, list) else 0


def entry_of(op: OpRecord, autocast: str) -> str | None:
    """The profile entry that prices OP's kernel; None where no row can (unmapped)."""
    if op.kind == "unknown" or op.flops is None:
        return None
    family = FLOP_ENTRY.get(op.kind)
    if family is None:
        return "reduction.sum" if op.kind in REDUCING else "elementwise.add"
    dtype = first_dtype(op)
    if autocast and dtype == "float32":
        dtype = {"bf16": "bfloat16", "fp16": "float16"}[autocast]
    label = DTYPE_LABEL[family].get(dtype)
    return f"{family}.{label}" if label else None


def op_kernels(op: OpRecord, variant: Variant, conv_extra: int) -> list[Kernel]:
    """The kernels of one mapped op outside an optimizer region (casts first)."""
    entry = entry_of(op, variant.autocast)
    assert entry is not None  # unmapped ops are handled by the caller
    kernels: list[Kernel] = []
    flop_op = op.kind in FLOP_ENTRY
    if flop_op and variant.autocast:
        kernels += [Kernel(op=f"{op.op} (autocast cast)", entry="elementwise.add",
                           work=float(numel(pair[0]) * 6), allocates=True)
                    for pair in op.inputs if isinstance(pair, list) and len(pair) == 2
                    and pair[1] == "float32" and numel(pair[0]) > 1]
    work = float(op.flops or 0) if flop_op else float(op.bytes)
    if variant.autocast and not flop_op and op.kind not in REDUCING:
        work /= 2
    kernels.append(Kernel(op=op.op, entry=entry, work=work, allocates=bool(op.outputs)))
    if op.kind == "conv" and op.op == "aten.convolution":
        kernels += [Kernel(op=f"{op.op} (extra)", entry="elementwise.add", work=0.0,
                           launches=0)] * conv_extra
    return kernels


def counts_row(profile: Profile, entry: str, name: str) -> dict[str, float] | None:
    """The counts of ENTRY's row for op NAME, None where the profile lacks it."""
    found = profile.entries.get(entry)
    if found is None or found.absent:
        return None
    try:
        return found.row(op=name).counts
    except KeyError:
        return None


def conv_extra_kernels(profile: Profile) -> int:
    kernels = counts_row(profile, "ops.kernels", CONV_ROW)
    aten = counts_row(profile, "ops.aten", CONV_ROW)
    if not kernels or not aten:
        return 0
    return max(0, round(kernels.get("kernels", 0) - aten.get("kernel_ops", 0)))


def optimizer_kernels(region: list[OpRecord], profile: Profile, plan: Plan) -> list[Kernel]:
    """An optimizer region's GPU kernels (module docstring): foreach Adam where it is torch's
    single-tensor Adam and the profile counted Adam's kernels, else op for op."""
    working = [op for op in region if op.kind not in NO_KERNEL and op.kind != "host_read"]
    names = Counter(op.op for op in working)
    row = counts_row(profile, "ops.kernels", ADAM_ROW)
    if not working:
        return []
    if names["aten.lerp_"] and names["aten.addcdiv_"] and row and row.get("kernels"):
        per_group = round(row["kernels"])
        launches = per_group * math.ceil(names["aten.addcdiv_"] / FOREACH_TENSORS)
        moved = sum(op.bytes for op in working) / launches
        plan.notes.append(f"optimizer: {len(working)} single-tensor Adam ops on the CPU -> "
                          f"{launches} foreach kernels ({per_group} per {FOREACH_TENSORS} "
                          "parameters, the profile's ops.kernels)")
        return [Kernel(op="adam foreach", entry="elementwise.add", work=moved)] * launches
    plan.notes.append(f"optimizer region of {len(working)} ops kept op for op (the profile "
                      "counts Adam's kernels only)")
    for op in working:
        if entry_of(op, "") is None:
            plan.unmapped[op.op] += 1
            plan.unmapped_host_s += op.host_s
    return [Kernel(op=op.op, entry=entry_of(op, "") or "elementwise.add", work=float(op.bytes),
                   allocates=bool(op.outputs)) for op in working]


def regions(ops: list[OpRecord]) -> list[tuple[bool, list[OpRecord]]]:
    """The ops cut into runs outside (False) and inside (True) profiler ranges, in order."""
    runs: list[tuple[bool, list[OpRecord]]] = []
    depth = 0
    for op in ops:
        if op.op.startswith(ENTER):
            depth += 1
        elif op.op.startswith(EXIT):
            depth = max(0, depth - 1)
        inside = depth > 0
        if not runs or runs[-1][0] != inside:
            runs.append((inside, []))
        runs[-1][1].append(op)
    return runs


def optimizer_steps(ops: list[OpRecord]) -> int:
    """How many optimizer steps the op list holds: profiler ranges that update a tensor in
    place (torch's optimizers wrap `step` in one and update every parameter in place;
    `zero_grad(set_to_none=True)` opens one that dispatches nothing, and a DataLoader's
    `__next__` one that only builds new tensors: neither is counted). Why the in-place
    test: the MNIST workload's DataLoader range was counted as a step, 9 "optimizer steps"
    in 4 training steps, and its GPU step read 1.75x high on the H100."""
    return sum(inside and any(op.kind not in NO_KERNEL and op.kind != "host_read"
                              and in_place(op) for op in run)
               for inside, run in regions(ops))


def in_place(op: OpRecord) -> bool:
    """Whether the aten op writes its first input ('aten.add_', 'aten.lerp_'; by ATen's
    trailing-underscore naming)."""
    return op.op.split(".")[-1].endswith("_") and not op.op.split(".")[-1].startswith("_")


def decomposed_cells(ops: list[OpRecord]) -> int:
    """Time steps of a recurrent layer the CPU ran as ATen's cell decomposition (nn.GRU on a
    CPU; an LSTM where oneDNN does not take it): each step splits its gates with
    `unsafe_chunk` (aten.unsafe_split) and applies the gate activations in place
    (aten.sigmoid_). 0 where the step has no in-place sigmoid: the signature is both."""
    names = [op.op for op in ops]
    return names.count(CELL_SPLIT) if CELL_GATE in names else 0


def fused_recurrent_ops(ops: list[OpRecord]) -> list[str]:
    """The fused recurrent layer ops of the step (kind 'rnn': aten.mkldnn_rnn_layer on a
    CPU, aten._cudnn_rnn on a GPU; an nn.LSTM oneDNN takes), each name once, in step
    order. A GPU runs them as cuDNN's RNN call, which no profile row prices."""
    return list(dict.fromkeys(op.op for op in ops if op.kind == "rnn"))


def fused(kernels: list[Kernel]) -> list[Kernel]:
    """`compiled`: each run of consecutive bandwidth-bound kernels becomes one."""
    out: list[Kernel] = []
    run: list[Kernel] = []

    def close() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            out.append(Kernel(op=f"fused {len(run)} ops", entry="elementwise.add",
                              work=sum(kernel.work for kernel in run), allocates=True))
        run.clear()
    for kernel in kernels:
        if kernel.entry in ("elementwise.add", "reduction.sum") and kernel.launches:
            run.append(kernel)
        else:
            close()
            out.append(kernel)
    close()
    return out


def plan_kernels(features: StepFeatures, profile: Profile, variant: Variant) -> Plan:
    """The GPU kernels of FEATURES' step under VARIANT (module docstring)."""
    plan = Plan(kernel_ops=features.kernel_ops)
    conv_extra = conv_extra_kernels(profile)
    for inside, run in regions(features.ops):
        kernels: list[Kernel] = []
        for op in run:
            if op.kind in NO_KERNEL or op.kind == "host_read":
                plan.host_other_s += op.host_s
            elif inside:
                continue  # priced with its region below
            elif entry_of(op, variant.autocast) is None:
                plan.unmapped[op.op] += 1
                plan.unmapped_host_s += op.host_s
                kernels.append(Kernel(op=op.op, entry="elementwise.add", work=0.0))
            else:
                kernels += op_kernels(op, variant, conv_extra)
        if inside:
            kernels = optimizer_kernels(run, profile, plan)
        elif variant.compiled:
            kernels = fused(kernels)
        plan.kernels += kernels
    return plan

"""The kernels of a compiled XLA program, read from its optimized HLO text (framework-free).

A jitted JAX step is one executable; XLA's optimized HLO (`compiled.as_text()`) lists what
it runs in its ENTRY computation: fusions, dots and other ops, each a kernel on a GPU (or a
cuBLAS / cuDNN call), and instructions that run nothing (parameters, constants, tuples,
bitcasts). This module turns that text into one `HloKernel` per instruction that would be a
kernel, with the work a rate can be read for: a matmul's or convolution's FLOPs (from the
shapes of the dot or convolution, inside its fusion where XLA fused it) and every kernel's
bytes (its operands plus its result, numel x element size).

The approximation, said once: the text is the CPU's program when the features are recorded on
a CPU, and XLA's CPU and GPU compilers fuse differently. The GPU's fuses at least as much
(multi-output and horizontal fusion of independent small ops, such as an optimizer's
per-parameter updates, and a dot's bias and activation into cuBLAS's epilogue), so the count
here is an upper bound on the GPU's kernels, priced each at the profile's per-kernel floor. A
dot XLA's CPU compiler handed to a library (a `__ynn_fusion`, a oneDNN custom call) is one
matmul kernel as cuBLAS's gemm is on a GPU. A short fixed loop of elementwise work (a `while`
of a known trip count holding no dot, as XLA's CPU compiles JAX's threefry random bits; a
`call`) is one elementwise kernel: a GPU unrolls and fuses it. Other control flow (a loop
of unknown trip count or holding a matmul, a conditional) runs its body a number of times
the text does not say: counted apart (`loops`), and the model refuses such a step.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

# Instructions that launch nothing: data plumbing, aliases and markers.
NO_KERNEL = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
    "opt-barrier", "add-dependency", "partition-id", "replica-id", "copy-done",
    "domain", "get-dimension-size", "set-dimension-size"})
LOOPS = frozenset({"while", "conditional", "call"})
MATMUL, CONV, REDUCTION, ELEMENTWISE, COPY, OTHER = (
    "matmul", "conv", "reduction", "elementwise", "copy", "other")
# Opcodes of a kernel that moves data rather than computing on it.
COPY_OPS = frozenset({"copy", "copy-start", "transpose", "gather", "scatter", "concatenate",
                      "slice", "dynamic-slice", "dynamic-update-slice", "pad", "broadcast",
                      "reverse", "sort"})
REDUCE_OPS = frozenset({"reduce", "reduce-window", "select-and-scatter", "reduce-precision"})
# Custom-call targets that are a matrix product (cuBLAS on a GPU, oneDNN / Eigen on a CPU).
GEMM_TARGETS = ("gemm", "matmul", "cublas", "dot")
ELEMENT_BYTES = {"pred": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2,
                 "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8,
                 "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e5m2fnuz": 1,
                 "f8e4m3fnuz": 1, "f8e4m3b11fnuz": 1, "token": 0}
SHAPE = re.compile(r"\b(" + "|".join(sorted(ELEMENT_BYTES, key=len, reverse=True))
                   + r")\[([0-9,]*)\]")
HEAD = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*->.*\{\s*$")
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s([a-z][\w\-]*)\((.*)$")
CALLS = re.compile(r"\b(?:calls|to_apply|body|condition)=%?([\w.\-]+)")


@dataclass(frozen=True)
class Shape:
    """One array type: element type and dimensions."""

    dtype: str
    dims: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.numel * ELEMENT_BYTES.get(self.dtype, 4)


@dataclass(frozen=True)
class Instruction:
    """One HLO instruction: name, opcode, result shapes, operand names, attribute text."""

    name: str
    opcode: str
    results: tuple[Shape, ...]
    operands: tuple[str, ...]
    attributes: str

    def called(self) -> list[str]:
        return CALLS.findall(self.attributes)


@dataclass(frozen=True)
class HloKernel:
    """One instruction of the entry computation that would be a kernel: its opcode, kind
    (matmul, conv, reduction, copy, elementwise, other), the dtype of its result, FLOPs (of
    its dots and convolutions; 0 elsewhere), bytes (operands + result), and for a matmul
    whether it asked for full float32 precision (else a GPU may run it as TF32)."""

    op: str
    kind: str
    dtype: str
    flops: float = 0.0
    bytes: float = 0.0
    highest: bool = False


@dataclass
class Program:
    """The computations of one HLO module, by name, and which one is the entry."""

    computations: dict[str, list[Instruction]] = field(default_factory=dict)
    entry: str = ""


def shapes_in(text: str) -> tuple[Shape, ...]:
    return tuple(Shape(dtype, tuple(int(dim) for dim in dims.split(",") if dim))
                 for dtype, dims in SHAPE.findall(text))


def split_call(rest: str) -> tuple[str, str]:
    """(the operand list, the attributes after it) of the text after an opcode's '('."""
    depth = 1
    for index, char in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return rest[:index], rest[index + 1:]
    return rest, ""


def operand_names(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"%([\w.\-]+)", text))


def parse(text: str) -> Program:
    """Every computation of an HLO module's text (`compiled.as_text()`)."""
    program = Program()
    current: list[Instruction] | None = None
    for line in text.splitlines():
        head = HEAD.match(line)
        if head:
            current = program.computations.setdefault(head.group(2), [])
            if head.group(1):
                program.entry = head.group(2)
            continue
        found = INSTRUCTION.match(line) if current is not None else None
        if found and current is not None:
            operands, attributes = split_call(found.group(4))
            current.append(Instruction(found.group(1), found.group(3), shapes_in(found.group(2)),
                                       operand_names(operands), attributes))
    return program


def contracting(attributes: str, side: str) -> list[int]:
    found = re.search(side + r"_contracting_dims=\{([0-9,]*)\}", attributes)
    return [int(dim) for dim in found.group(1).split(",") if dim] if found else []


def dot_flops(instruction: Instruction, shapes: dict[str, Shape]) -> float:
    """2 x result elements x the contracted size (read from the left operand's shape)."""
    lhs = shapes.get(instruction.operands[0]) if instruction.operands else None
    if lhs is None or not instruction.results:
        return 0.0
    size = math.prod(lhs.dims[dim] for dim in contracting(instruction.attributes, "lhs")
                     if dim < len(lhs.dims))
    return 2.0 * instruction.results[0].numel * size


def conv_flops(instruction: Instruction, shapes: dict[str, Shape]) -> float:
    """2 x output elements x the kernel's size per output feature (every kernel dimension but
    the output features, read from dim_labels' right-hand side)."""
    rhs = shapes.get(instruction.operands[1]) if len(instruction.operands) > 1 else None
    labels = re.search(r"dim_labels=\w+_(\w+)->", instruction.attributes)
    if rhs is None or labels is None or not instruction.results:
        return 0.0
    per_output = math.prod(size for label, size in zip(labels.group(1), rhs.dims, strict=False)
                           if label != "o")
    return 2.0 * instruction.results[0].numel * per_output


def shape_table(instructions: list[Instruction]) -> dict[str, Shape]:
    return {item.name: item.results[0] for item in instructions if len(item.results) == 1}


@dataclass
class Inside:
    """What a kernel's body holds: FLOPs of its dots and convolutions, whether it reduces."""

    flops: float = 0.0
    kind: str = ""
    highest: bool = False
    opcodes: set[str] = field(default_factory=set)


def inside(program: Program, names: list[str], seen: set[str] | None = None) -> Inside:
    """The dots, convolutions and reductions of the computations NAMES call, recursively."""
    found, seen = Inside(), seen if seen is not None else set()
    for name in names:
        if name in seen or name not in program.computations:
            continue
        seen.add(name)
        body = program.computations[name]
        shapes = shape_table(body)
        for item in body:
            found.opcodes.add(item.opcode)
            if item.opcode == "dot":
                found.flops += dot_flops(item, shapes)
                found.kind = MATMUL
                found.highest = found.highest or "operand_precision={highest" in item.attributes
            elif item.opcode == "convolution":
                found.flops += conv_flops(item, shapes)
                found.kind = found.kind or CONV
            nested = inside(program, item.called(), seen)
            found.flops += nested.flops
            found.kind = found.kind or nested.kind
            found.highest = found.highest or nested.highest
            found.opcodes |= nested.opcodes
    return found


def kind_of(item: Instruction, body: Inside) -> str:
    """What rate a kernel runs at (module docstring)."""
    if item.opcode == "dot" or body.kind == MATMUL:
        return MATMUL
    if item.opcode == "convolution" or body.kind == CONV:
        return CONV
    if item.opcode == "custom-call":
        target = re.search(r'custom_call_target="([^"]+)"', item.attributes)
        if target and any(word in target.group(1).lower() for word in GEMM_TARGETS):
            return MATMUL
        return OTHER
    if item.opcode in REDUCE_OPS or body.opcodes & REDUCE_OPS:
        return REDUCTION
    if item.opcode in COPY_OPS:
        return COPY
    return ELEMENTWISE


def kernel_of(item: Instruction, program: Program, shapes: dict[str, Shape]) -> HloKernel:
    """The kernel one instruction of a computation would be (module docstring)."""
    called = inside(program, item.called())
    kind = ELEMENTWISE if item.opcode in LOOPS else kind_of(item, called)
    flops = dot_flops(item, shapes) if item.opcode == "dot" else (
        conv_flops(item, shapes) if item.opcode == "convolution" else called.flops)
    moved = sum(result.nbytes for result in item.results) + sum(
        shapes[name].nbytes for name in item.operands if name in shapes)
    highest = "operand_precision={highest" in item.attributes or called.highest
    return HloKernel(op=item.opcode, kind=kind,
                     dtype=item.results[0].dtype if item.results else "?",
                     flops=float(flops), bytes=float(moved), highest=highest)


def fused_loop(item: Instruction, program: Program) -> bool:
    """A `while` of a known trip count, or a `call`, holding no dot or convolution: a short
    fixed loop of elementwise work (XLA's CPU runs JAX's threefry random bits as one) that a
    GPU unrolls and fuses: one elementwise kernel."""
    if inside(program, item.called()).kind in (MATMUL, CONV):
        return False
    return item.opcode == "call" or '"known_trip_count"' in item.attributes


def entry_kernels(program: Program) -> tuple[list[HloKernel], dict[str, int], int]:
    """(the kernels of the entry computation, the count of every entry opcode, the control
    flow whose work the text cannot count: a loop of unknown trip count or holding a matmul,
    a conditional)."""
    body = program.computations.get(program.entry, [])
    shapes = shape_table(body)
    counts: dict[str, int] = {}
    kernels, loops = [], 0
    for item in body:
        counts[item.opcode] = counts.get(item.opcode, 0) + 1
        if item.opcode in NO_KERNEL:
            continue
        if item.opcode in LOOPS and not fused_loop(item, program):
            loops += 1
            continue
        kernels.append(kernel_of(item, program, shapes))
    return kernels, dict(sorted(counts.items())), loops

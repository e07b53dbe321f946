"""The second opinion on XLA's FLOP count of a JAX step: the step's jaxpr, its contractions
counted from their shapes, beside what `cost_analysis()` says of the compiled step.

XLA's count (backends/jax/usermodel.py count_flops) is what XLA's HloCostAnalysis says of the
optimized module: its contractions (2 FLOPs per multiply-add) plus 1 FLOP per element of
every elementwise or reduction op it kept (transcendental ones apart). The jaxpr, traced
before XLA rewrites anything, gives the same contractions from their shapes
(dot_general: output elements x contracted size; conv_general_dilated: as HloCostAnalysis
counts a convolution, only the kernel taps that land on the input, not on padding or on the
holes of an input dilation) and, at most, 1 FLOP per element of every other op's output and
reduction's input (XLA fuses or simplifies some away, never adds work of its own kind).

So XLA's count should lie between the contractions alone and the contractions plus that
elementwise bound. Where it does not, the two disagree on what the step computes: on the CPU,
XLA rewrites the weight gradient of a depthwise convolution (a batch-grouped convolution in
the jaxpr) into a dense one over all channel pairs and counts that (measured: 141,082,048
FLOPs for a 3x3 depthwise layer's gradient, batch 8, 64 channels, 16x16, whose shapes say
4.3 million); it counts a `lax.scan`'s body once whatever its length; a wrong formula on
either side shows the same way.

Loops: a scan's body counts `length` times; a while loop's trip count is not in the shapes,
so a step with one gets no second opinion; a cond counts its cheapest branch at least and its
dearest at most.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.data import secondopinion

BY = ("the jaxpr's shapes: dot_general and conv_general_dilated multiply-adds as XLA's "
      "HloCostAnalysis counts them, plus at most 1 FLOP per element of every other op "
      "(backends/jax/jaxprflops.py)")
SECOND = "the jaxpr's shapes"
WHOLE_STEP = "the whole step"
XLA = "XLA cost analysis"
# Ops that move or make data without arithmetic (HloCostAnalysis counts 0 for them). Every
# other op counts 1 per output element in the bound (a select or a dtype conversion too: the
# bound errs high, never low).
DATA_MOVEMENT = frozenset({
    "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "slice",
    "dynamic_slice", "dynamic_update_slice", "concatenate", "pad", "gather", "rev", "iota",
    "copy", "copy_p", "device_put", "bitcast_convert_type", "stop_gradient", "split",
    "sharding_constraint",
})


class NoSecondOpinion(Exception):
    """The jaxpr holds something whose count its shapes cannot give (a while loop)."""


@dataclass
class JaxprCount:
    """Contractions by primitive (exact), and the elementwise bound (at most)."""

    contractions: Counter[str] = field(default_factory=Counter)
    elementwise: int = 0

    def add(self, other: JaxprCount, times: int = 1) -> None:
        for name, flops in other.contractions.items():
            self.contractions[name] += flops * times
        self.elementwise += other.elementwise * times

    @property
    def low(self) -> int:
        return sum(self.contractions.values())

    @property
    def high(self) -> int:
        return self.low + self.elementwise


def _elements(var: Any) -> int:
    shape = getattr(getattr(var, "aval", None), "shape", None)
    return math.prod(shape) if shape is not None else 0


def dot_general_flops(eqn: Any) -> int:
    """2 x output elements x the product of the contracted dimensions."""
    (contracting, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    return 2 * _elements(eqn.outvars[0]) * math.prod(lhs[axis] for axis in contracting)


def valid_taps(output: int, kernel: int, size: int, stride: int, low: int,
               rhs_dilation: int, lhs_dilation: int) -> int:
    """(output position, kernel tap) pairs whose input index is a real input element: for
    tap t, the positions o with o x stride - low + t x rhs_dilation a multiple of the input
    dilation, between 0 and (size - 1) x input dilation. Counted in closed form per tap (a
    1-D audio layer has millions of positions): those o form an arithmetic progression."""
    count = 0
    divisor = math.gcd(stride, lhs_dilation)
    period = lhs_dilation // divisor
    for tap in range(kernel):
        offset = tap * rhs_dilation - low
        if offset % divisor:
            continue  # o x stride + offset never lands on an input element
        # the first o >= 0 with (o x stride + offset) % lhs_dilation == 0
        first = (-offset // divisor) * pow(stride // divisor, -1, period) % period \
            if period > 1 else 0
        lowest = max(0, -(offset // stride))  # o x stride + offset >= 0
        highest = min(output - 1, ((size - 1) * lhs_dilation - offset) // stride)
        start = lowest + (first - lowest) % period
        if start <= highest:
            count += (highest - start) // period + 1
    return count


def conv_flops(eqn: Any) -> int:
    """2 x (input features / feature groups) x output features x (batch / batch groups) x the
    valid (output position, tap) pairs of every spatial dimension."""
    params = eqn.params
    numbers = params["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = numbers.lhs_spec, numbers.rhs_spec, numbers.out_spec
    lhs, rhs = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
    out = eqn.outvars[0].aval.shape
    taps = 1
    for index in range(len(lhs_spec) - 2):
        taps *= valid_taps(out[out_spec[index + 2]], rhs[rhs_spec[index + 2]],
                           lhs[lhs_spec[index + 2]], params["window_strides"][index],
                           params["padding"][index][0], params["rhs_dilation"][index],
                           params["lhs_dilation"][index])
    per_group = lhs[lhs_spec[1]] // params["feature_group_count"]
    batch = lhs[lhs_spec[0]] // params["batch_group_count"]
    return 2 * per_group * out[out_spec[1]] * batch * taps


CONTRACTIONS: dict[str, Callable[[Any], int]] = {"dot_general": dot_general_flops,
                                                 "conv_general_dilated": conv_flops}


def _sub_jaxprs(value: Any) -> list[Any]:
    """The jaxprs an eqn's parameter holds (a ClosedJaxpr, a Jaxpr, or a tuple of them)."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    found = []
    for item in items:
        inner = getattr(item, "jaxpr", item)
        if hasattr(inner, "eqns"):
            found.append(inner)
    return found


def count_jaxpr(jaxpr: Any) -> JaxprCount:
    """The contractions and the elementwise bound of a jaxpr, nested jaxprs included."""
    total = JaxprCount()
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        name = eqn.primitive.name
        if name in CONTRACTIONS:
            total.contractions[name] += CONTRACTIONS[name](eqn)
            continue
        inner = [sub for value in eqn.params.values() for sub in _sub_jaxprs(value)]
        if name == "while":
            raise NoSecondOpinion("a while loop, whose trip count the shapes do not give")
        if name == "cond":
            total.add(_branches(inner))
        elif inner:
            for sub in inner:
                total.add(count_jaxpr(sub), int(eqn.params.get("length", 1)))
        elif name not in DATA_MOVEMENT:
            total.elementwise += sum(_elements(var) for var in eqn.outvars)
            if name.startswith(("reduce_", "argmax", "argmin", "cum")):
                total.elementwise += sum(_elements(var) for var in eqn.invars)
    return total


def _branches(branches: list[Any]) -> JaxprCount:
    """A cond: the cheapest branch's contractions at least, the dearest's everything at most
    (the elementwise bound takes up the difference)."""
    counts = [count_jaxpr(branch) for branch in branches]
    cheapest = min(counts, key=lambda count: count.low)
    result = JaxprCount(Counter(cheapest.contractions))
    result.elementwise = max(count.high for count in counts) - cheapest.low
    return result


def second_opinion(jaxpr: Any, xla_flops: float) -> dict[str, object]:
    """The stored record (harness.data.secondopinion): one part, the whole step, XLA's count
    against the jaxpr's range; `not_compared` says why where the jaxpr cannot be counted."""
    try:
        counted = count_jaxpr(jaxpr)
    except NoSecondOpinion as exc:
        return secondopinion.record(BY, SECOND, [], [f"{WHOLE_STEP}: {exc}"])
    except Exception as exc:  # noqa: BLE001 - a jaxpr of another JAX never costs XLA's count
        return secondopinion.record(BY, SECOND, [], [
            f"{WHOLE_STEP}: the jaxpr could not be counted ({type(exc).__name__}: {exc})"])
    ops = {XLA: int(xla_flops)}
    # Named by the contractions the two counts share (the elementwise bound is a bound).
    name = f"{WHOLE_STEP} ({', '.join(sorted(counted.contractions)) or 'no contractions'})"
    part = secondopinion.Part(name, int(xla_flops), counted.low, counted.high, ops)
    record = secondopinion.record(BY, SECOND, [part], [])
    # What the jaxpr's range is made of, for a reader of the record.
    record["jaxpr"] = {**dict(counted.contractions), "elementwise (at most)":
                       counted.elementwise}
    return record

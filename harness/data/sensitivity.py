"""A reduced-precision verdict judged by the model's own sensitivity: the sentence every line
states it in, and its recomputation for `harness check`.

A bf16 (fp16, tf32) cell of a user's model passes when its result is no further from the fp32
reference than MULTIPLE x the largest move of the fp32 step under that format's rounding of
its inputs and weights, never less than a floor, and fails where that bound reaches a ceiling
(the format keeps no digit of the result; harness/workloads/usermodel/precision.py makes the
verdict; docs/methodology.md says why). The check keeps the figures (check["sensitivity"]:
precision, spread, multiple, floor, ceiling) beside the deviation (check["value"]) and the
case keeps the draws they came from (extra["rounding_sensitivity"]), so the bound, the verdict,
the sentence and the case's status are recomputed here from the stored numbers alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

FLOAT32 = "fp32"  # a float32 variant judged by its own device's float32 sensitivity
RECORD_KEY = "rounding_sensitivity"  # the case's extra: the draws the spread came from


def percent(fraction: float) -> str:
    """0.0025 -> '0.25%': two significant digits, never exponent notation (the audit reads a
    figure in exponent notation followed by a unit as a formatting error)."""
    if not math.isfinite(fraction):
        return f"{fraction}%"
    text = np.format_float_positional(fraction * 100, precision=2, unique=False,
                                      fractional=False, trim="-")
    return f"{text}%"


def sentence(precision: str, compared: str, value: float, spread: float, bound: float,
             multiple: float, ceiling: float) -> str:
    """'bf16: loss 0.25% from fp32; rounding the inputs and weights to bf16 moves the fp32
    loss by up to 0.17%: within 4x that (0.68%)' (or 'beyond ...', or '... the floor 0.39%',
    or, where the bound reaches the ceiling, that the format keeps no digit to compare)."""
    source = "the CPU's fp32" if precision == FLOAT32 else "fp32"
    moved = (f"{percent(value)} from {source}" if math.isfinite(value)
             else "not finite or of another shape")
    if precision == FLOAT32:  # a float32 variant's second look: its own device's rounding
        said = (f"fp32 here: {compared} {moved}; moving the inputs and weights by float32's "
                f"epsilon moves this device's fp32 {compared} by up to {percent(spread)}")
    else:
        said = (f"{precision}: {compared} {moved}; rounding the inputs and weights to "
                f"{precision} moves the fp32 {compared} by up to {percent(spread)}")
    if bound >= ceiling:
        return (f"{said}: {precision} keeps no digit of it to compare ({multiple:g}x that is "
                f"{percent(bound)}, not under {percent(ceiling)})")
    where = "within" if value <= bound else "beyond"
    allowed = (f"{multiple:g}x that ({percent(bound)})" if multiple * spread >= bound
               else f"the floor {percent(bound)}")
    return f"{said}: {where} {allowed}"


def figures_sentence(check: Mapping[str, Any]) -> str | None:
    """The sentence of a stored check judged by sensitivity; None for any other check."""
    figures = check.get("sensitivity")
    value, bound = check.get("value"), check.get("bound")
    if not isinstance(figures, Mapping) or not isinstance(value, (int, float)) or \
            not isinstance(bound, (int, float)):
        return None
    return sentence(str(figures.get("precision")), str(figures.get("compared", "result")),
                    float(value), float(figures["spread"]), float(bound),
                    float(figures["multiple"]), float(figures.get("ceiling", math.inf)))

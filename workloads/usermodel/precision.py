"""How far a reduced-precision variant (bf16, fp16, tf32) may move the fp32 answer: as far as
the model itself moves under that precision's rounding, measured, not a tolerance fixed for
every model.

A reduced-precision step cannot avoid rounding its inputs and weights to the format (relative
error up to the unit roundoff u). How much that moves the result is the model's own condition:
a shallow MLP's loss moves by a fraction of u, a deep BatchNorm net after a large SGD step by
percents. So the fp32 step is run again on the variant's device with its inputs and weights
perturbed by random relative errors of bf16's (fp16's, tf32's) size (sensitivity.py), and the
variant passes when its deviation from the fp32 reference is within MULTIPLE x the largest move
those perturbations made, never less than the floor (one unit roundoff of the format, or the
float32 bound where that is wider). Why these numbers: docs/methodology.md, "Reduced precision:
judged by the model's own sensitivity". Where the sensitivity was not measured (too long a
step, a random step that cannot be compared, a perturbed run that failed) the fixed tolerance
of PRECISION_TOLERANCE holds instead, and the check says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from harness.data.sensitivity import FLOAT32, RECORD_KEY, percent, sentence
from harness.spec import Check
from harness.variants import variant_parts as split_parts

# A float32 variant whose result misses the CPU's float32-vs-float64 bound (a deep BatchNorm
# net after a large SGD step: the GPU's own reduction order moved the loss 8x further than the
# CPU's float32 did) gets one more look: how far float32-sized moves of its inputs and weights
# move this device's own float32 result. Its "unit" is float32's machine epsilon 2^-23, not the
# unit roundoff 2^-24: a relative move of at most 2^-24 rounds most float32 numbers back to
# themselves, and the measurement would then see no move at all (FLOAT32's entry below).
#
# Unit roundoff (round to nearest: half the gap between 1 and the next number) of each format:
# bfloat16 keeps 8 significant bits (7 stored), float16 and TF32 11 (10 stored). Measured on
# torch 2.13: the largest relative rounding error of float32 -> bfloat16 over 1e6 numbers is
# 0.996 x 2^-8, of -> float16 0.999 x 2^-11.
UNIT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11, "tf32": 2.0**-11, FLOAT32: 2.0**-23}
ROUNDOFF_TEXT = {"bf16": "2^-8", "fp16": "2^-11", "tf32": "2^-11", FLOAT32: "2^-23"}
# The random perturbations of one sensitivity measurement, and the multiple of their largest
# move the variant may deviate by (docs/methodology.md says why 4 and 4).
DRAWS = 4
MULTIPLE = 4.0
# Where the bound would allow a deviation as large as the result itself, the format keeps no
# digit of the result to compare: rounding alone could explain any answer, a wrong one too.
# Such a variant fails, saying so (MULTIPLE x spread >= CEILING, relative to max |reference|).
CEILING = 1.0

# The fallback where no sensitivity was measured, relative to max |reference| like every bound
# of this check. Each matmul or convolution rounds both operands once to the variant's format
# (accumulation stays float32), and errors of independent roundings partly cancel in a loss that
# averages many outputs. bf16 (u = 2^-8 ~ 4e-3): a few layers deep that is ~1e-2, so 3e-2
# leaves 3x room. fp16 (u = 2^-11 ~ 5e-4) stores activations in float16 too: 1e-2. TF32 rounds
# only the matmul/convolution operands and keeps float32 storage: 5e-3. A deep net after a
# large step moves further than these by its own sensitivity: hence the measured bound.
PRECISION_TOLERANCE = {"bf16": 3e-2, "fp16": 1e-2, "tf32": 5e-3}
# The case's extra key of the measurement (sensitivity.py writes it, the check reads it).
SENSITIVITY_KEY = RECORD_KEY


def reduced_precision(variant: str) -> str | None:
    """The least precise of a variant's arithmetic formats other than float32, or None."""
    parts = set(split_parts(variant))
    return max((name for name in PRECISION_TOLERANCE if name in parts),
               key=PRECISION_TOLERANCE.__getitem__, default=None)


def judged_precision(variant: str, record: Mapping[str, Any] | None) -> str | None:
    """The format a variant is judged by: its reduced precision, or float32 where its
    float32 sensitivity was measured (a float32 variant that missed the float64 bound)."""
    reduced = reduced_precision(variant)
    if reduced is not None:
        return reduced
    measured = record is not None and record.get("precision") == FLOAT32
    return FLOAT32 if measured and measured_spread(record) is not None else None


def short(value: float) -> str:
    """3e-2, not 3e-02: how a tolerance is written in a sentence."""
    return f"{value:.0e}".replace("e-0", "e-").replace("e+0", "e")


def measured_spread(record: Mapping[str, Any] | None) -> float | None:
    """The largest relative move of the perturbed fp32 runs, where the record has one."""
    if not record or not isinstance(record.get("spread"), (int, float)):
        return None
    spread = float(record["spread"])
    return spread if math.isfinite(spread) else None


def sensitivity_bound(precision: str, spread: float, fp32_bound: float,
                      fp32_formula: str) -> tuple[float, str, float]:
    """(bound, its formula, floor) of a variant whose sensitivity was measured."""
    unit = UNIT_ROUNDOFF[precision]
    floor = max(unit, fp32_bound)
    floor_text = (f"{precision}'s unit roundoff {ROUNDOFF_TEXT[precision]}" if unit >= fp32_bound
                  else f"the float32 bound {fp32_formula}")
    if MULTIPLE * spread >= floor:
        return (MULTIPLE * spread, f"{MULTIPLE:g} x the fp32 result's largest move under "
                f"{precision}-sized rounding ({percent(spread)})", floor)
    return floor, f"the floor, {floor_text}", floor


def precision_bound(precision: str | None, bound: float, formula: str,
                    record: Mapping[str, Any] | None = None) -> tuple[float, str]:
    """The bound a variant of `precision` is held to, and its formula: float32's unchanged; a
    measured sensitivity's where the record has one; else the fixed tolerance (or the float32
    bound where that is wider)."""
    if precision is None:
        return bound, formula
    spread = measured_spread(record)
    if spread is not None:
        found, text, _ = sensitivity_bound(precision, spread, bound, formula)
        return found, text
    tolerance = PRECISION_TOLERANCE[precision]
    if bound > tolerance:  # the file's own tolerance (or a float32 bound) is wider already
        return bound, f"{formula} (wider than the {precision} tolerance {short(tolerance)})"
    return tolerance, f"rtol {short(tolerance)} ({precision} tolerance)"


def sensitivity_figures(precision: str | None, bound: float, formula: str,
                        record: Mapping[str, Any] | None,
                        compared: str) -> dict[str, float | str] | None:
    """What `harness check` recomputes the verdict from (the check's 'sensitivity'): the
    spread, the multiple and the floor; None where no sensitivity was measured."""
    spread = measured_spread(record)
    if precision is None or spread is None:
        return None
    _, _, floor = sensitivity_bound(precision, spread, bound, formula)
    return {"precision": precision, "compared": compared, "spread": spread,
            "multiple": MULTIPLE, "floor": floor, "ceiling": CEILING,
            "unit_roundoff": UNIT_ROUNDOFF[precision]}


def precision_text(passed: bool, value: float, bound: float, precision: str | None,
                   compared: str, record: Mapping[str, Any] | None = None) -> str:
    """The verdict's sentence, ending in '; ' (or '' for a float32 variant):
    'bf16: loss 0.25% from fp32; rounding the inputs and weights to bf16 moves the fp32 loss by
    up to 0.17%: within 4x that (0.68%); ', or the fixed tolerance's with why no sensitivity."""
    if precision is None:
        return ""
    spread = measured_spread(record)
    if spread is not None:
        return sentence(precision, compared, value, spread, bound, MULTIPLE, CEILING) + "; "
    where = "within" if passed else "beyond"
    why = str((record or {}).get("not_measured") or "")
    unmeasured = f" (its sensitivity not measured: {why})" if why else ""
    return (f"{compared} {where} rtol {short(bound)} of the fp32 reference "
            f"({precision} tolerance){unmeasured}; ")


def parity(result: np.ndarray, reference: np.ndarray, scale: float, bound: float,
           formula: str) -> Check:
    """max |result - reference| / scale against the bound; a shape change or NaN fails."""
    if result.shape != reference.shape:
        return Check(False, "max_rel_diff", math.inf, bound,
                     f"result has {result.size} numbers, the CPU reference {reference.size}")
    if not np.all(np.isfinite(result)):
        return Check(False, "max_rel_diff", math.inf, bound, "non-finite numbers in the result")
    difference = float(np.max(np.abs(result - reference))) if result.size else 0.0
    value = difference / scale if scale > 0 else (0.0 if difference == 0 else math.inf)
    detail = (f"vs the CPU reference: largest difference {difference:.3g} "
              f"({value:.2g} of max |reference| {scale:.3g}), bound {bound:.2g} = {formula}")
    return Check(value <= bound, "max_rel_diff", value, bound, detail)


def judged(result: np.ndarray, reference: np.ndarray, scale: float, fp32_bound: float,
           fp32_formula: str, precision: str | None, measured: Mapping[str, Any] | None,
           compared: str) -> Check:
    """parity against the bound the variant's precision is held to, with the sensitivity
    figures the verdict was made from (None for a float32 variant or an unmeasured one)."""
    bound, formula = precision_bound(precision, fp32_bound, fp32_formula, measured)
    verdict = parity(result, reference, scale, bound, formula)
    figures = sensitivity_figures(precision, fp32_bound, fp32_formula, measured, compared)
    if figures is None:
        return verdict
    undetermined = bound >= CEILING  # no digit left to compare: nothing can pass
    return replace(verdict, passed=verdict.passed and not undetermined, sensitivity=figures)

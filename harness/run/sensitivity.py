"""A case's check made again with the implementation's numerics pass, where it has one.

A reduced-precision variant of a user's model (and a float32 one whose result missed the
CPU's float32-vs-float64 bound) is judged against how far its own fp32 step
moves under that precision's rounding (harness/workloads/usermodel/sensitivity.py): runs of the
fp32 step on the cell's device, made after the timed calls, the memory readings and the device
profile, so that none of them counts as the case's time or memory. The implementation says
whether it has such a pass (`rounding_sensitivity`); the worker knows no precision.
"""

from __future__ import annotations

from typing import Any

from harness.spec import Check, ParamValue, WorkloadSpec

PHASE = "rounding sensitivity"


def checked_with_sensitivity(spec: WorkloadSpec, module: Any, case: dict[str, ParamValue],
                             variant: str, framework: str, device: Any, inputs: dict[str, Any],
                             output: dict[str, Any], check: Check) -> Check:
    """The check of the kept attempt, made again where the implementation's pass measured
    something for this variant (its figures go to the case's extra); else `check` as it was."""
    measure = getattr(module, "rounding_sensitivity", None)
    if measure is None or spec.check is None:
        return check
    found = measure(case, variant, device, inputs, framework=framework,
                    seconds_per_call=output.get("seconds_per_call"), check_passed=check.passed)
    if not found:
        return check
    output.setdefault("extra", {}).update(found)
    return spec.check(case, variant, inputs, output)

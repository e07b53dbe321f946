"""An fp16 cell's loss scaler in its check: the kept losses compared over the updates the
scaler applied, and what it skipped said as skipped, never as a wrong result.

torch's GradScaler starts at a scale of 2^16 and skips each optimizer update whose gradients
overflow at its scale, halving it. The cell finds the scale before its kept calls
(backends/torch/usermodel.py, ScaledUpdate.settle: probes that update the scale only, the
weights put back), so the kept calls are normally all applied. A kept update it skips anyway
(the second step's gradients can overflow where the first's did not) is recorded by call
number; the i-th kept loss was then computed after fewer updates than fp32's i-th, so it is
set beside fp32's loss after as many applied updates. The same rule as bf16's (its own
rounding sensitivity, 4x) then judges each loss; an update that was never applied is named
as not checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# The case's extra keys (ScaledUpdate.record writes them).
SKIPPED_CALLS = "skipped_update_calls"
SKIPPED_COUNT = "skipped_updates"
LOSS_SCALE = "loss_scale"


def skipped_calls(extra: Mapping[str, Any]) -> list[int]:
    """The kept calls (numbered from 1) whose update the scaler skipped; [] for none or for
    a record that keeps no numbers."""
    calls = extra.get(SKIPPED_CALLS)
    if not isinstance(calls, list):
        return []
    return sorted({int(call) for call in calls if isinstance(call, (int, float))})


def applied_before(calls: int, skipped: Sequence[int]) -> list[int]:
    """For each of `calls` kept calls, the updates applied before its loss was computed."""
    applied, found = 0, []
    for call in range(1, calls + 1):
        found.append(applied)
        if call not in skipped:
            applied += 1
    return found


def over_applied_updates(results: Sequence[Any], reference: np.ndarray,
                         extra: Mapping[str, Any]) -> tuple[np.ndarray, str]:
    """(the reference each kept result is set beside, what was done in words): unchanged with
    '' where no kept update was skipped; else fp32's result after as many applied updates as
    each kept one had, and a note ending with the updates left unchecked. The reference holds
    one equal-sized piece per kept call (the CPU's kept losses); one that does not is kept as
    it is, with a note saying so."""
    skipped = skipped_calls(extra)
    if not skipped:
        return reference, ""
    calls = ", ".join(str(call) for call in skipped)
    said = (f"; the loss scaler skipped the optimizer update of kept call {calls} "
            "(inf/NaN gradients at its scale), reported as skipped")
    if not results or reference.size % len(results):
        return reference, said + " (the reference could not be split by call: compared as is)"
    pieces = np.split(reference, len(results))
    before = applied_before(len(results), skipped)
    mapped = np.concatenate([pieces[count] for count in before])
    unchecked = sorted(set(range(1, len(results))) - set(before))
    left = (f"; no kept loss followed update {', '.join(str(n) for n in unchecked)}: not "
            "checked" if unchecked else "")
    return mapped, (f"{said}: each kept loss is set beside fp32's after as many applied "
                    f"updates ({', '.join(str(count) for count in before)}){left}")


def settled_text(extra: Mapping[str, Any]) -> str:
    """'; the loss scale was found before the kept calls: 65,536 -> 8,192 (3 probes
    overflowed; no update made)', or '' where no probe overflowed (or none was made)."""
    record = extra.get(LOSS_SCALE)
    if not isinstance(record, Mapping) or not record.get("overflowed_probes"):
        return ""
    start, scale = float(record.get("start", 0.0)), float(record.get("scale", 0.0))
    probes = int(record["overflowed_probes"])
    ended = "" if record.get("settled") else ", and it never stopped overflowing"
    return (f"; the loss scale was found before the kept calls: {start:,.6g} -> {scale:,.6g} "
            f"({probes} probe{'s' if probes > 1 else ''} overflowed{ended}; no update made)")

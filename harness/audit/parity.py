"""`harness check` on a reduced-precision verdict judged by the model's own sensitivity: the
bound, the verdict, the sentence and the case's status recomputed from the figures the check
stored (harness.data.sensitivity says the rule and writes the sentence)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from harness.audit.ledger import Ledger
from harness.data.sensitivity import RECORD_KEY, figures_sentence

WHERE = "run.json"
TOLERANCE = 1e-9


def recheck(ledger: Ledger, subject: str, check: Mapping[str, Any] | None,
            extra: Mapping[str, Any], status: str) -> None:
    """A sensitivity verdict against its stored figures: spread = the largest draw, bound =
    max(multiple x spread, floor), passed = deviation <= bound < ceiling, the status and the
    sentence."""
    figures = (check or {}).get("sensitivity")
    if not isinstance(figures, Mapping) or check is None:
        return
    record = extra.get(RECORD_KEY)
    draws = record.get("draws") if isinstance(record, Mapping) else None
    spread = float(figures["spread"])
    if isinstance(draws, list) and draws:
        ledger.number(subject, "rounding sensitivity: spread (largest draw)", WHERE, spread,
                      max(float(draw) for draw in draws), TOLERANCE)
    else:
        ledger.cannot(subject, "rounding sensitivity: spread", WHERE,
                      "the case keeps no draws (extra.rounding_sensitivity)")
    bound = max(float(figures["multiple"]) * spread, float(figures["floor"]))
    ledger.number(subject, "parity bound (multiple x spread, floor)", WHERE, check.get("bound"),
                  bound, TOLERANCE)
    value = float(check.get("value", math.inf))
    passed = value <= bound < float(figures.get("ceiling", math.inf))
    ledger.verdict(subject, "parity verdict", WHERE, bool(check.get("passed")) == passed,
                   str(check.get("passed")), str(passed))
    ledger.verdict(subject, "status of the parity verdict", WHERE,
                   (status != "invalid") == passed or status not in ("ok", "invalid"),
                   status, "ok" if passed else "invalid")
    said = figures_sentence({**check, "bound": bound})
    ledger.verdict(subject, "parity sentence", WHERE,
                   said is not None and str(check.get("detail", "")).find(said) >= 0,
                   str(check.get("detail", ""))[:160], str(said))

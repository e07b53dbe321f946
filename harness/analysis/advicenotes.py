"""The notes of an advice run beside its ranking: the rounds it ran and the fixes its budget
measured, read from the record `harness advise` keeps in run.json (RUN_KEY).

Apart from harness.analysis.advice, which ranks the fixes, so that module stays readable.
"""

from __future__ import annotations

from typing import Any

from harness.data.results import RunDocument

# Where run.json keeps what `harness advise` planned (run.extra_fields): the user's batch and
# the combination measured in the second phase, per framework x device.
RUN_KEY = "advise"


def advise_rounds_line(document: RunDocument) -> str | None:
    """The rounds line of an advice run (None for any other run: harness.analysis.stats
    .rounds_line's): its orders are `harness advise`'s, not the plain seeded shuffle."""
    record = document.extra_fields.get(RUN_KEY) or {}
    if "rounds_run" not in record:
        return None
    ran = record["rounds_run"]
    if ran <= 1:
        return ("rounds: 1, the as-written cells first (run-to-run drift not measured; "
                "--rounds N judges every verdict against the spread between N worker "
                "processes per cell)")
    return (f"rounds: {ran}, the as-written cells first in round 1 (their diagnosis chose the "
            f"fixes), then every cell in a new random order each round (advise seed "
            f"{record.get('order_seed')}); beyond the noise = beyond the IQRs and the round "
            "medians")


def budget_notes(record: dict[str, Any]) -> list[str]:
    """The budget's lines of an advice: rounds cut for a slow step, fixes measured of the
    candidates ('' where the run had no budget record)."""
    budget = record.get("budget_s")
    if "rounds_run" not in record:
        return []
    tried, candidates = record.get("tried", 0), record.get("candidate_count", 0)
    limit = f"a budget of {float(budget):.0f} s" if budget else "no time budget"
    lines = [f"measured {tried} of {candidates} candidate fixes ({limit}; the as-written "
             "cells' first round chose them: docs/advise.md)"]
    planned, ran = record.get("rounds_planned"), record.get("rounds_run")
    if isinstance(planned, int) and isinstance(ran, int) and ran < planned:
        lines.append(f"{ran} round{'s' if ran != 1 else ''} of {planned}: "
                     f"{record.get('rounds_why') or 'the budget'}")
    return lines

"""The notes of an advice run beside its ranking: the rounds it ran and the fixes its budget
measured, read from the record `harness advise` keeps in run.json (adviserecord.RUN_KEY).

Apart from harness.analysis.advice, which ranks the fixes, so that module stays readable.
"""

from __future__ import annotations

from harness.data.adviserecord import AdviseRecord
from harness.data.results import RunDocument


def advise_rounds_line(document: RunDocument) -> str | None:
    """The rounds line of an advice run (None for any other run: harness.analysis.stats
    .rounds_line's): its orders are `harness advise`'s, not the plain seeded shuffle."""
    record = document.advise
    if record is None or record.rounds_run is None:
        return None
    ran = record.rounds_run
    if ran <= 1:
        return ("rounds: 1, the as-written cells first (run-to-run drift not measured; "
                "--rounds N judges every verdict against the spread between N worker "
                "processes per cell)")
    return (f"rounds: {ran}, the as-written cells first in round 1 (their diagnosis chose the "
            f"fixes), then every cell in a new random order each round (advise seed "
            f"{record.order_seed}); beyond the noise = beyond the IQRs and the round "
            "medians")


def budget_notes(record: AdviseRecord) -> list[str]:
    """The budget's lines of an advice: rounds cut for a slow step, fixes measured of the
    candidates (none where the run had no budget record)."""
    if record.rounds_run is None:
        return []
    limit = f"a budget of {record.budget_s:.0f} s" if record.budget_s else "no time budget"
    lines = [f"measured {record.tried} of {record.candidate_count} candidate fixes ({limit}; "
             "the as-written cells' first round chose them: docs/advise.md)"]
    lines += record.no_measurement  # the as-written cells the budget could not measure
    planned, ran = record.rounds_planned, record.rounds_run
    if planned is not None and ran < planned and not record.no_measurement:
        # (where the budget held no as-written measurement, no round ran: its line says why)
        lines.append(f"{ran} round{'s' if ran != 1 else ''} of {planned}: "
                     f"{record.rounds_why or 'the budget'}")
    return lines

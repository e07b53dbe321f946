"""The whole command's own cost as run.json records it (harness.analysis.commandcost): its parts
add up to its wall time within ADDS_UP_S, the run's part is run.json's own start to end, the
part inside the timed calls is the cells' own, and the own cost is the whole less that part.

Written by the command after its answer, so the check inside a run cannot see it; every later
`harness check` of the folder does."""

from __future__ import annotations

from collections.abc import Mapping

from harness.analysis.commandcost import ADDS_UP_S, RUN
from harness.analysis.stats import harness_cost
from harness.audit.ledger import Ledger
from harness.data.results import RunDocument

WHERE = "run.json command_cost"
# Stored rounded to the millisecond; the sums of rounded parts may differ by that much.
ROUNDED_S = 0.005


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def check_command_cost(ledger: Ledger, document: RunDocument) -> None:
    """Each figure of run.json's command_cost recomputed; nothing where the run has none (a
    run made by the library, not the CLI, or from before the record)."""
    record = document.command_cost
    if not record:
        return
    subject = "the whole command"
    begun, ended = _seconds(record.get("process_started")), _seconds(record.get("ended"))
    whole, timed = _seconds(record.get("whole_s")), _seconds(record.get("timed_s"))
    parts = record.get("parts")
    if begun is None or ended is None or whole is None or timed is None \
            or not isinstance(parts, Mapping):
        ledger.cannot(subject, "own cost", WHERE, "its start, end, whole or parts not stored")
        return
    seconds = {str(name): _seconds(value) for name, value in parts.items()}
    _close(ledger, "wall time (= ended - process_started)", whole, ended - begun)
    if any(value is None for value in seconds.values()):
        ledger.cannot(subject, "the sum of its parts", WHERE, "a part is not a number")
    else:
        total = sum(value for value in seconds.values() if value is not None)
        ledger.verdict(subject, f"the sum of its parts (within {ADDS_UP_S:g} s of the wall "
                       "time)", WHERE, abs(total - whole) <= ADDS_UP_S, _shown(total),
                       _shown(whole))
    started, finished = document.started, document.finished
    if started is not None and finished is not None:
        _close(ledger, f"part '{RUN}' (= run.json finished - started)", seconds.get(RUN),
               finished - max(started, begun))
        inside = min(harness_cost(document.cells).timed_s, finished - max(started, begun))
        if document.resumed:  # the cells hold earlier commands' timed calls too: a bound
            ledger.verdict(subject, "inside the timed calls (at most the cells' timed_s)",
                           WHERE, timed <= inside + ADDS_UP_S, _shown(timed), _shown(inside))
        else:
            _close(ledger, "inside the timed calls (the cells' timed_s)", timed, inside)
    _close(ledger, "own cost (= wall time - inside the timed calls)",
           _seconds(record.get("own_s")), whole - timed)


def _close(ledger: Ledger, figure: str, stored: float | None, recomputed: float) -> None:
    same = stored is not None and abs(stored - recomputed) <= ROUNDED_S
    ledger.verdict("the whole command", figure, WHERE, same,
                   "nothing" if stored is None else _shown(stored), _shown(recomputed))


def _shown(seconds: float) -> str:
    return f"{seconds:.3f} s"

"""A run's own cost as its overhead line prints it (harness.report.summary OVERHEAD_FAMILY): the
run's wall time, the part inside the timed calls, the rest, and the worker processes, summed
here from the cells' stored costs and the run's start and end."""

from __future__ import annotations

from harness.audit.ledger import Ledger
from harness.audit.pool import Pool
from harness.audit.printed import fixed, printed_fixed
from harness.report.figure import Figure
from harness.report.summary import OVERHEAD, RUN_WALL, TIMED, WORKERS


def check_overhead(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    run_id = figure.subject.get("run", "")
    document = next((d for d in pool.documents if d.run_id == run_id), None)
    if document is None:
        ledger.cannot(run_id, figure.name, where, "the run is not among those checked")
        return
    costs = [cell.cost for cell in document.cells if cell.cost is not None]
    if figure.name == WORKERS:
        workers, printed = sum(cost.workers for cost in costs), figure.text.split(" ")[0]
        ledger.verdict(run_id, WORKERS, where, printed == str(workers),
                       printed, str(workers))
        return
    timed = sum(cost.timed_s for cost in costs)
    elapsed = ((document.finished - document.started)
               if document.finished is not None and document.started is not None else 0.0)
    wall = max(elapsed, sum(cost.wall_s for cost in costs))
    value = {RUN_WALL: wall, TIMED: timed, OVERHEAD: wall - timed}.get(figure.name)
    if value is None:
        ledger.cannot(run_id, figure.name, where, "no such figure of the overhead line")
        return
    ledger.printed(run_id, figure.name, where, printed_fixed(figure.text.removesuffix(" s"), 1),
                   value, fixed(1))

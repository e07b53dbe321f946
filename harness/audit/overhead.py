"""A run's own cost as its overhead line prints it (harness.report.summary OVERHEAD_FAMILY): the
run's wall time, the part inside the timed calls, the rest, and the worker processes, summed
here from the cells' stored costs and the run's start and end."""

from __future__ import annotations

from harness.audit.ledger import FigureCheck
from harness.audit.pool import Pool
from harness.audit.printed import fixed, printed_fixed
from harness.report.summary import OVERHEAD, RUN_WALL, TIMED, WORKERS


def check_overhead(check: FigureCheck, pool: Pool) -> None:
    run_id = check.figure.subject.get("run", "")
    check = check.about(run_id)
    document = pool.document(run_id)
    if document is None:
        check.cannot("the run is not among those checked")
        return
    costs = [cell.cost for cell in document.cells if cell.cost is not None]
    if check.figure.name == WORKERS:
        workers, printed = sum(cost.workers for cost in costs), check.figure.text.split(" ")[0]
        check.verdict(printed == str(workers), printed, str(workers))
        return
    timed = sum(cost.timed_s for cost in costs)
    elapsed = ((document.finished - document.started)
               if document.finished is not None and document.started is not None else 0.0)
    wall = max(elapsed, sum(cost.wall_s for cost in costs))
    value = {RUN_WALL: wall, TIMED: timed, OVERHEAD: wall - timed}.get(check.figure.name)
    if value is None:
        check.cannot("no such figure of the overhead line")
        return
    check.reads((lambda text: printed_fixed(text.removesuffix(" s"), 1), fixed(1)), value)

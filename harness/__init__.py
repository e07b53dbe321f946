"""harness: the same workloads in several frameworks, on CPU and GPU, timed honestly.

`compare` and `load` (harness.api's module docstring shows them) are imported lazily: worker
processes import harness.* modules and must stay light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compare", "load"]


def compare(workload: str | None = None, *, report: bool = True, **options: Any) -> Any:
    """See harness.api.compare; then, with report=True, the run's report drawn into its folder
    (harness.reporting: a failure to draw is printed, the run is returned all the same)."""
    from harness import api

    result = api.compare(workload, **options)
    if report and result.stopped_by is None:
        from harness.reporting import draw_run_report

        draw_run_report(result.path)
    return result


def load(paths: Any) -> Any:
    """See harness.api.load."""
    from harness import api

    return api.load(paths)

"""harness: the same workloads in several frameworks, on CPU and GPU, timed honestly.

Python API (the CLI calls the same functions):
    harness.compare(workload, frameworks=..., devices=..., variants=..., sizes=...,
                    params=..., quick=..., out=...) -> harness.api.RunResult (.frame, .path)
    harness.compare(model="mymodel.py", sizes=[32, 256]): your own model file instead
    harness.load(path_or_paths) -> pandas.DataFrame of stored runs

Imported lazily: worker processes import harness.* modules and must stay light.
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

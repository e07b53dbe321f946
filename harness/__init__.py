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


def compare(workload: str | None = None, **options: Any) -> Any:
    """See harness.api.compare."""
    from harness import api

    return api.compare(workload, **options)


def load(paths: Any) -> Any:
    """See harness.api.load."""
    from harness import api

    return api.load(paths)

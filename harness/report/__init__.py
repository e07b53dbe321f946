"""Reports: compute tables from stored measurements, then draw them with seaborn."""

from __future__ import annotations

from pathlib import Path


def render_report(run_dirs: list[Path], out_dir: Path, tensorboard_dir: Path | None = None) -> list[Path]:
    """Placeholder until the report package lands."""
    return []

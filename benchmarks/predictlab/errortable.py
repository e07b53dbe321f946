"""The shipped error table (harness/predict/validated/errors.json, read by
harness/predict/interval.py) derived again from the validation's rows files: per profile, host
and regime, the 10th and 90th percentiles of predicted / measured over the pooled cells."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.predict.interval import HIGH_SHARE, LOW_SHARE, MIN_BAND_CELLS

from .validation import cells_of, percentile, read_rows, repredicted


def error_table(rows: Sequence[dict[str, Any]], profile: str, identity: str,
                sources: Sequence[str]) -> dict[str, Any]:
    """{host: {regime: band record}} of one profile from the rows of the validation rows
    files SOURCES, pooled (validation.read_rows), and the profile's identity
    it was validated on. A regime under MIN_BAND_CELLS keeps its count alone."""
    by_host: dict[str, dict[str, Any]] = {}
    for host in ("profiled", "this"):
        by_regime: dict[str, list[float]] = {}
        for cell in cells_of(rows, profile, host):
            by_regime.setdefault(cell.model_regime, []).append(
                cell.predicted["model"] / cell.gpu_s)
        by_host[host] = {regime: {"cells": len(ratios)} if len(ratios) < MIN_BAND_CELLS else
                         {"cells": len(ratios), "ratio_low": percentile(ratios, LOW_SHARE),
                          "ratio_high": percentile(ratios, HIGH_SHARE)}
                         for regime, ratios in sorted(by_regime.items())}
    return {"identity": identity, "sources": list(sources), "by_host": by_host}


def derived_table(profile: str, identity: str, sources: Sequence[str],
                  root: Path) -> dict[str, Any]:
    """error_table of PROFILE over the rows files SOURCES (paths under ROOT), each predicted
    again from its stored features by the model as it is now."""
    rows: list[dict[str, Any]] = []
    for source in sources:
        meta, found = read_rows(root / source)
        rows += repredicted(meta, found, profile)
    return error_table(rows, profile, identity, sources)

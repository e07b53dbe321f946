"""GPU to GPU (issue 51): one GPU run's measured steps set against another run's, offline.

Two validation rows files (benchmarks/predictlab/validation.py), each measured on one lent GPU,
hold the same zoo's cells. For the cells both measured, the target run's measured GPU step
is compared with what could have been said of it from the source run alone:

- **same time as the source GPU**: the source's measured step, unchanged;
- **source GPU x bandwidth ratio**: scaled by the two profiles' elementwise bandwidth;
- **model**: the CPU-to-GPU model's prediction for the target's profile, from the source
  run's stored CPU features (the target run's where the source did not predict it);
- **source x the other models' ratio (LOMO)**: the source's step times the median
  target / source ratio of the *other* models' cells, each model left out of its own fit.
  It learns the pair's systematic gap, from the target's own measurements: no user without
  the target GPU has them, so it is an optimistic bound on any per-host scale correction,
  never an answer line.

Where both files measured the same GPU kind (two lendings of one machine type), "the same
time as the source GPU" is the **noise floor**: how far apart the same step reads on two
lent hosts of the same kind. No model predicting one lending's step from another can be
expected to do better than about that, whichever GPU it is for.

Errors are (predicted - measured) / measured of the target's step; median and p90 of |error|
as validation.py counts them, the share within 25% and within 10% (issue 51's GPU-to-GPU
goal is a median of 10%). Regime: the *target's* busy share under or over 50%.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .validation import (
    BUSY_SPLIT,
    MEASURED_KEYS,
    MODEL,
    ErrorStats,
    Row,
    percentile,
    prediction_of,
    primary_profile,
    relative_error,
    stats_columns,
)

SAME_AS_SOURCE = "same time as the source GPU"
BANDWIDTH_RATIO = "source GPU x bandwidth ratio"
SCALED_LEFT_OUT = "source x the other models' ratio (LOMO)"
CLOSE = 0.10  # issue 51's GPU-to-GPU goal: a median |error| of 10%

Loaded = tuple[Mapping[str, Any], Sequence[Row]]


@dataclass(frozen=True)
class GpuPair:
    """One cell measured on two GPUs: the source's step, the target's, the predictions."""

    model: str
    batch: int
    source_s: float
    target_s: float
    target_busy_share: float | None
    predicted: dict[str, float]

    def regime(self) -> str:
        if self.target_busy_share is None:
            return "no busy share"
        return (f"busy < {BUSY_SPLIT:.0%}" if self.target_busy_share < BUSY_SPLIT
                else f"busy >= {BUSY_SPLIT:.0%}")


def measured_rows(rows: Iterable[Row], key: str) -> dict[tuple[Any, Any], Row]:
    """{(model, batch): row} of the rows whose GPU step KEY was measured."""
    return {(row.get("model"), row.get("batch")): row for row in rows
            if row.get("status") == "ok" and (row.get("gpu") or {}).get(key)}


def gpu_pairs(source_rows: Sequence[Row], target_rows: Sequence[Row], target_profile: str,
              bandwidth_ratio: float | None, host: str = "profiled",
              measured: str = "synced") -> list[GpuPair]:
    """Every cell both runs measured, with the baselines from the source's measured step and,
    where predicted, the model's step for the target GPU (module docstring)."""
    key = MEASURED_KEYS[measured]
    source = measured_rows(source_rows, key)
    pairs = []
    for cell, row in measured_rows(target_rows, key).items():
        found = source.get(cell)
        if found is None:
            continue
        # The source run's own prediction for the target GPU (one GPU run answers for the
        # others), else the target run's.
        prediction = (prediction_of(found, target_profile, host)
                      or prediction_of(row, target_profile, host))
        source_s = float(found["gpu"][key])
        predicted = {SAME_AS_SOURCE: source_s}
        if prediction is not None:
            predicted[MODEL] = float(prediction["seconds"])
        if bandwidth_ratio:
            predicted[BANDWIDTH_RATIO] = source_s * bandwidth_ratio
        pairs.append(GpuPair(str(row["model"]), int(row["batch"]), source_s,
                             float(row["gpu"][key]), row["gpu"].get("busy_share"), predicted))
    return pairs


def left_out_ratios(pairs: Sequence[GpuPair]) -> dict[str, float]:
    """{model: the median target / source ratio over the other models' cells}: what a scale
    fitted on this pair of runs says of a model it never saw (nothing where it is alone)."""
    found = {}
    for model in sorted({pair.model for pair in pairs}):
        others = [pair.target_s / pair.source_s for pair in pairs if pair.model != model]
        if others:
            found[model] = statistics.median(others)
    return found


def with_left_out_scale(pairs: Sequence[GpuPair]) -> list[GpuPair]:
    """PAIRS with SCALED_LEFT_OUT added: each cell's source step times its model's left-out
    ratio (left_out_ratios)."""
    ratios = left_out_ratios(pairs)
    return [replace(pair, predicted={**pair.predicted,
                                     SCALED_LEFT_OUT: pair.source_s * ratios[pair.model]})
            if pair.model in ratios else pair for pair in pairs]


def pair_errors(pairs: Iterable[GpuPair], predictor: str) -> list[float]:
    return [relative_error(pair.predicted[predictor], pair.target_s) for pair in pairs
            if predictor in pair.predicted]


def share_close(errors: Sequence[float]) -> str:
    """The share of ERRORS within CLOSE, as a column."""
    if not errors:
        return f"{'-':>8}"
    return f"{sum(abs(error) <= CLOSE for error in errors) / len(errors):>8.0%}"


def ratio_text(pairs: Sequence[GpuPair]) -> str:
    """The pair's systematic gap: the median target / source ratio and its 10th-90th
    percentile span, over the cells given."""
    ratios = [pair.target_s / pair.source_s for pair in pairs]
    return (f"target / source step: median {percentile(ratios, 0.5):.2f}, "
            f"10th-90th percentile {percentile(ratios, 0.1):.2f}-{percentile(ratios, 0.9):.2f}")


PAIR_HEADER = (f"  {'predictor':<44}  {'regime':<14}  cells  median|e|  p90|e|    within25  "
               "within10")


def table_lines(pairs: Sequence[GpuPair], predictors: Sequence[str]) -> list[str]:
    """One line per (predictor, regime), all cells first, each predictor on the same cells."""
    groups: dict[str, list[GpuPair]] = {"all": list(pairs)}
    for pair in sorted(pairs, key=GpuPair.regime):
        groups.setdefault(pair.regime(), []).append(pair)
    lines = [PAIR_HEADER]
    for predictor in predictors:
        for regime, found in groups.items():
            errors = pair_errors(found, predictor)
            lines.append(f"  {predictor:<44}  {regime:<14}  "
                         f"{stats_columns(ErrorStats.of(errors))}  {share_close(errors)}")
    return lines


def run_name(meta: Mapping[str, Any]) -> str:
    """A run's GPU and when it was measured: two lendings of one GPU kind tell apart."""
    created = str(meta.get("created") or "")[:16].replace("T", " ")
    device = str(meta.get("device_description") or meta.get("device") or "?")
    return f"{device} ({created})" if created else device


def same_kind(source_meta: Mapping[str, Any], target_meta: Mapping[str, Any]) -> bool:
    described = source_meta.get("device_description")
    return bool(described) and described == target_meta.get("device_description")


def gpu_to_gpu_lines(source: Loaded, target: Loaded,
                     bandwidth_ratio: Callable[[str, str], float | None],
                     host: str = "profiled", measured: str = "synced") -> list[str]:
    """The target run's measured steps against what the source run says of them (module
    docstring); for one GPU kind on two lendings, the noise floor."""
    (source_meta, source_rows), (target_meta, target_rows) = source, target
    target_profile = primary_profile(target_meta, target_rows)
    floor = same_kind(source_meta, target_meta)
    ratio = None if floor else bandwidth_ratio(primary_profile(source_meta, source_rows),
                                               target_profile)
    pairs = gpu_pairs(source_rows, target_rows, target_profile, ratio, host, measured)
    title = "noise floor (one GPU kind, two lendings)" if floor else "GPU to GPU"
    lines = [f"{title}: {run_name(source_meta)} -> {run_name(target_meta)}, {len(pairs)} "
             f"cells both measured ({measured} step)"]
    if not pairs:
        return lines
    lines.append(f"  every cell both measured: {ratio_text(pairs)}")
    lines += table_lines(pairs, [SAME_AS_SOURCE])
    with_model = with_left_out_scale([pair for pair in pairs if MODEL in pair.predicted])
    if not with_model:
        return lines
    lines.append(f"  the {len(with_model)} cells the model predicted: {ratio_text(with_model)}")
    predictors = [SAME_AS_SOURCE, MODEL] + ([BANDWIDTH_RATIO] if ratio else []) \
        + [SCALED_LEFT_OUT]
    return lines + table_lines(with_model, predictors)

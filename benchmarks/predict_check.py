"""How good is the predicted crossover? Predict from the smaller half of a sweep, compare with
the crossover the whole sweep measured, and report each device's held-out error.

    python benchmarks/predict_check.py RUN_DIR [RUN_DIR ...] [--markdown]

For every (experiment, machine, variant, framework) with cells on a CPU and a GPU, it prints:
the measured crossover (the smallest size from which the GPU stays faster), the prediction fitted
on all sizes, the prediction fitted on the smaller half only, whether that half-sweep prediction
lands within one measured size step of the measured crossover, and the error of predicting the
largest size from the others (harness.analysis.costmodel.held_out_error), per device. Reads the
stored run folders only; it runs nothing.
"""

from __future__ import annotations

import argparse
import bisect
from pathlib import Path

import pandas as pd

from harness.analysis.crossover import (
    find_crossover,
    predict_curves,
    sweep_points,
    with_gpu_launches,
)
from harness.analysis.costmodel import CrossoverPrediction, held_out_error
from harness.report.context import build_context
from harness.report.load import load_runs
from harness.report.summary import markdown_table


def smaller_half(points: list) -> list:
    sizes = sorted({point.size for point in points})
    keep = set(sizes[: max(2, (len(sizes) + 1) // 2)])
    return [point for point in points if point.size in keep]


def step_distance(sizes: list[float], measured: float | None,
                  predicted: float | None) -> int | None:
    """How many measured sizes apart: the first size >= the predicted crossover vs the measured
    one (0 = the same size). None when either is missing."""
    if measured is None or predicted is None:
        return None
    at_or_above = bisect.bisect_left(sizes, predicted)
    return abs(at_or_above - sizes.index(measured))


def _pct(error: float | None) -> str:
    return "-" if error is None else f"{100 * error:+.0f}%"


def _size(prediction: CrossoverPrediction) -> str:
    if prediction.kind == "crossover" and prediction.size is not None:
        return f"{prediction.size:,.3g}" + (" (extrapolated)" if prediction.extrapolated else "")
    return prediction.kind


def rows_of(run_dirs: list[Path]) -> list[dict[str, object]]:
    context = build_context(load_runs(run_dirs), {})
    found = []
    for experiment in context.experiments:
        stats = experiment.stats
        for (machine, variant, framework), group in stats.groupby(
                ["machine", "variant", "framework"], sort=False):
            cpu = sweep_points(group[group["device_kind"] == "cpu"])
            gpu = sweep_points(group[group["device_kind"] == "gpu"])
            if len(cpu) < 2 or len(gpu) < 2:
                continue
            both = sorted({p.size for p in cpu} & {p.size for p in gpu})
            curves = pd.DataFrame({"size": both,
                                   "cpu_s": [next(p.seconds for p in cpu if p.size == s)
                                             for s in both],
                                   "gpu_s": [next(p.seconds for p in gpu if p.size == s)
                                             for s in both]})
            measured = find_crossover(curves)
            whole = predict_curves(cpu, gpu)
            half = predict_curves(smaller_half(cpu), smaller_half(gpu))
            measured_size = measured.size if measured.kind == "crossover" else None
            found.append({
                "experiment": experiment.name, "machine": machine, "variant": variant,
                "framework": framework, "sizes": f"{both[0]:g}..{both[-1]:g} ({len(both)})",
                "measured": (f"{measured_size:g}" if measured_size is not None
                             else measured.kind),
                "predicted (all sizes)": _size(whole),
                "predicted (smaller half)": _size(half),
                "steps off": step_distance(both, measured_size,
                                           half.size if half.kind == "crossover" else None),
                "held-out error cpu": _pct(held_out_error("cpu", with_gpu_launches(cpu, gpu))),
                "held-out error gpu": _pct(held_out_error("gpu", gpu)),
            })
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args()
    table = pd.DataFrame(rows_of(args.run_dirs))
    if table.empty:
        print("no (framework, variant) with CPU and GPU cells at two sizes or more")
        return
    if args.markdown:
        print("\n".join(markdown_table(list(table.columns), table.astype(str).values.tolist())))
    else:
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()

"""The GPU-vs-CPU figures (harness.report.views.crossover GPU_FAMILY): a pair's verdict, its
crossover size, and the speedup at the largest size compared on both devices, recomputed from
the fastest per-step medians of each device at each size (numpy, not the report's pandas)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from harness.audit.ledger import FigureCheck
from harness.audit.measured import Measured, median_step
from harness.audit.pool import Pool
from harness.audit.printed import RATIO
from harness.core.units import format_size
from harness.report.views.crossover import (
    CROSSOVER_SIZE,
    EVERY_VARIANT,
    GPU_SPEEDUP,
    GPU_VERDICT,
    LARGEST_SIZE,
)

Curves = list[tuple[float, float | None, float | None]]


def check_gpu_vs_cpu(check: FigureCheck, pool: Pool) -> None:
    """One record of a pair: the curves of its subject recomputed, then the figure it names."""
    figure, subject = check.figure, check.figure.subject
    check = check.about(f"{subject.get('framework') or 'best'} GPU vs CPU, "
                        f"{subject.get('machine')}, variant {subject.get('variant')}")
    curves = _curves(pool, subject)
    if curves is None:
        check.cannot("no GPU and CPU cases of it in run.json")
        return
    kind, size = crossover(curves)
    both = [(size, cpu, gpu) for size, cpu, gpu in curves if cpu and gpu]
    sweep = next((m.document.sweep for m in pool.select(subject.get("experiment", ""))), "")
    if figure.name == GPU_VERDICT:
        stated = subject.get("verdict", "")
        check.verdict(stated == kind, stated, kind)
        check.verdict(int(figure.value) == len(both), f"{figure.value:.0f}", str(len(both)),
                      "sizes compared on both devices")
    elif figure.name == CROSSOVER_SIZE:
        check.text_is(format_size(size, sweep) if kind == "crossover" else "none")
    elif not both:
        check.cannot("no size on both")
    elif figure.name == GPU_SPEEDUP:
        _largest, cpu_s, gpu_s = both[-1]
        check.reads(RATIO, (cpu_s or math.nan) / (gpu_s or math.nan))
    elif figure.name == LARGEST_SIZE:
        shown = format_size(both[-1][0], sweep) if both[-1][0] else ""
        check.text_is(shown, shown=shown or "none")
    else:
        check.cannot("no recomputation for this figure")


def _curves(pool: Pool, subject: Mapping[str, str]) -> Curves | None:
    """(size, fastest CPU median, fastest GPU median) per size, valid cases only.

    The CPU side is the variant's own CPU cells, or every variant's where the record says so
    or the variant has no CPU case on the machine (a GPU-only precision). What the record says
    decides, not today's hints: a hint that changed since the report was drawn must not turn
    its figure into a mismatch."""
    experiment, machine = subject.get("experiment", ""), subject.get("machine", "")
    variant, framework = subject.get("variant", ""), subject.get("framework", "")
    own_cpu = [m for m in pool.select(experiment, machine, variant) if m.kind == "cpu"]
    any_variant = subject.get("cpu") == EVERY_VARIANT or not own_cpu
    gpu = pool.select(experiment, machine, variant, framework, valid=True)
    cpu = pool.select(experiment, machine, "" if any_variant else variant, framework,
                      valid=True)
    gpu_best = _fastest_by_size([m for m in gpu if m.kind == "gpu"])
    cpu_best = _fastest_by_size([m for m in cpu if m.kind == "cpu"])
    if not gpu_best or not cpu_best:
        return None
    sizes = sorted(set(gpu_best) | set(cpu_best))
    return [(size, cpu_best.get(size), gpu_best.get(size)) for size in sizes]


def _fastest_by_size(cases: list[Measured]) -> dict[float, float]:
    best: dict[float, float] = {}
    for item in cases:
        value, middle = item.size_value, median_step(item.case)
        if value is None or middle is None:
            continue
        best[value] = min(middle, best.get(value, math.inf))
    return best


def crossover(curves: Curves) -> tuple[str, float | None]:
    """(kind, size) over the sizes both devices measured, smallest first: the smallest size
    from which the GPU is faster at every larger size."""
    both = [(size, cpu, gpu) for size, cpu, gpu in curves if cpu is not None and gpu is not None]
    if not both:
        return "no-overlap", None
    gpu_faster = [gpu < cpu for _, cpu, gpu in both]
    if all(gpu_faster):
        return "gpu-always", both[0][0]
    if not any(gpu_faster):
        return "cpu-always", None
    if not gpu_faster[-1]:
        return "mixed", None
    last_slower = max(index for index, faster in enumerate(gpu_faster) if not faster)
    return "crossover", both[last_slower + 1][0]

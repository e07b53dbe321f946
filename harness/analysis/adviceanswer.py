"""The answer of an advice: does the GPU, each device's best configuration that passed, now
win at the user's batch, and else from which batch (the crossover refitted on those
configurations' own sweeps), and does that batch fit (harness.analysis.memoryfit).

Apart from harness.analysis.advice, which ranks the fixes per device (DeviceAdvice), so that
module stays readable; pure computation over a stored run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.analysis.casetable import CaseRow
from harness.analysis.costmodel import CrossoverPrediction, size_of
from harness.analysis.crossover import predict_curves
from harness.analysis.fixresult import DeviceAdvice
from harness.analysis.memoryfit import largest_batch_that_fits
from harness.analysis.noise import CaseNoise, judge_gap
from harness.core.units import format_ratio, format_size
from harness.data.results import RunDocument

# --- the answer: does the GPU now win at the user's batch? ------------------------------------

@dataclass(frozen=True)
class GpuCpuAnswer:
    """GPU (best configuration) against CPU (best configuration) at the user's batch."""

    framework: str
    text: str
    gpu_wins: bool | None  # None: no GPU or no CPU result to compare
    prediction: CrossoverPrediction | None = None


def _sweep_points(cases: list[CaseRow], framework: str, device: str,
                 variant: str) -> list[CaseRow]:
    """One configuration's timed sizes as the crossover predictor reads them, by size."""
    points = [case for case in cases
              if (case.framework, case.device, case.variant) == (framework, device, variant)
              and case.timed and case.size_value is not None]
    return sorted(points, key=size_of)


def answer(cpu: DeviceAdvice | None, gpu: DeviceAdvice | None, cases: list[CaseRow],
           sweep: str, size: Any, document: RunDocument | None = None) -> GpuCpuAnswer | None:
    """The user's question, answered with each device's best configuration that passed."""
    if gpu is None or cpu is None:
        return None
    framework = gpu.framework
    gpu_s, cpu_s = gpu.best_median_s, cpu.best_median_s
    at = f"{sweep} {format_size(size, sweep)}"
    setup = f"GPU {gpu.best_variant} vs CPU {cpu.best_variant}"
    if gpu_s is None or cpu_s is None:
        return GpuCpuAnswer(framework, f"{framework}: no answer at {at}: a device has no valid "
                                 "result", None)
    verdict = judge_gap(_noise_of(cpu), _noise_of(gpu))
    ratio = cpu_s / gpu_s
    if gpu_s < cpu_s and verdict.significant:
        return GpuCpuAnswer(framework, f"{framework}: yes, the GPU now wins at {at}: {setup}, "
                                 f"{format_ratio(ratio)} faster ({verdict.phrase()})", True)
    prediction = refit(cases, gpu, cpu)
    lead = ("no, within the noise at" if gpu_s < cpu_s else "no, the GPU still loses at")
    text = f"{framework}: {lead} {at}: {setup}, GPU/CPU speedup {format_ratio(ratio)} " \
           f"({verdict.phrase()}); {_from_which(prediction, sweep)}" \
           f"{larger_batch(document, gpu, prediction, size)}"
    return GpuCpuAnswer(framework, text, False, prediction)


def _noise_of(advice: DeviceAdvice) -> CaseNoise:
    """The samples of a device's best configuration, as the noise rule reads them (a
    recommended fix was timed; a baseline without samples reads as none: NaN, 0 samples)."""
    best = advice.best
    return best.noise if best is not None and best.noise is not None else advice.baseline.noise


def refit(cases: list[CaseRow], gpu: DeviceAdvice,
          cpu: DeviceAdvice) -> CrossoverPrediction | None:
    """The predicted crossover refitted on the best configurations' own sweeps (the fixed
    step's costs: its launches, busy time and FLOPs per call), where each has two sizes."""
    gpu_points = _sweep_points(cases, gpu.framework, gpu.device, gpu.best_variant)
    cpu_points = _sweep_points(cases, cpu.framework, cpu.device, cpu.best_variant)
    if len(gpu_points) < 2 or len(cpu_points) < 2:
        return None
    return predict_curves(cpu_points, gpu_points)


def larger_batch(document: RunDocument | None, gpu: DeviceAdvice,
                 prediction: CrossoverPrediction | None, size: Any) -> str:
    """'; a larger batch: ...': advised only where the predicted crossover's batch is
    predicted to fit on the GPU (harness.analysis.memoryfit, peak memory fitted over the
    sweep); otherwise why not. '' where there is no crossover to reach."""
    if document is None or prediction is None or prediction.kind != "crossover" \
            or prediction.size is None:
        return ""
    fit = largest_batch_that_fits(document, gpu.framework, gpu.device, gpu.best_variant)
    wanted = math.ceil(prediction.size)
    if fit is None or fit.largest_batch is None:
        why = fit.reason if fit is not None else "no memory fit for this sweep"
        return f"; whether batch {wanted:,} fits is not known ({why})"
    if isinstance(size, (int, float)) and wanted <= size:
        return ""
    if wanted <= fit.largest_batch:
        return (f"; a larger batch: {wanted:,} is predicted to fit on {gpu.device} (up to "
                f"~{fit.largest_batch:,} fits by the memory fit)")
    return (f"; batch {wanted:,} is not predicted to fit on {gpu.device} (up to "
            f"~{fit.largest_batch:,} fits by the memory fit): keep the CPU at this size")


def _from_which(prediction: CrossoverPrediction | None, sweep: str) -> str:
    if prediction is None:
        return (f"from which {sweep} it would win: not predicted (the best configurations "
                f"ran at one {sweep}; give two sizes)")
    return f"refitted with the fixed step's costs, {prediction.text(sweep)}"

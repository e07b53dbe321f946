"""The GPU run's own check of the prediction (issue 51, part 4): a predicted GPU step beside
the same case measured on that GPU, where one run holds both.

A run on a GPU machine has a CPU cell whose features pass recorded its step (torch,
keras-torch, jax, keras-jax), predicted after the run on every profile (harness/predict/
answer.py), and a GPU cell of the same framework, workload and variant measured on a GPU that
one of those profiles describes (the cell's
`device_name` is the profile's device description, e.g. "NVIDIA H100 80GB HBM3"). For every
size both cells measured, it pairs:

- the predicted step of host 'this' (this machine's CPU driving that GPU: exactly the setup
  the GPU cell measured), per step (the prediction is of the features' recorded steps,
  extra `step_features_steps`), with its interval (harness/predict/interval.py, held to the
  CPU case's own spread, as the CPU-only line's);
- the measured GPU step: the GPU case's median call over its steps per call, the quantity
  the CPU-only line sets against this CPU;
- predicted / measured, whether the measured step lies inside the interval, and whether the
  predicted GPU-vs-CPU verdict (the predicted GPU step against the measured CPU step) is the
  measured one (the measured GPU step against the same CPU step). A measured gap within the
  noise is a tie, judged neither right nor wrong, by the validation's rule
  (benchmarks/predictlab/validation.py: within max(5%, the two cases' spreads added)).

Computed from run.json alone (a RunDocument), never from the report; the report's view
(harness/report/views/predicted.py) lays it out and harness/audit/predictedgpu.py
recomputes every printed figure.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.units import device_kind, three_digits
from harness.data.gpustep import Prediction
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.predict.answer import (
    STEPS_KEY,
    case_noise,
    cpu_step_seconds,
    short_device,
    size_order,
)
from harness.predict.interval import Interval, band_for, interval_of, why_no_band
from harness.spec import Status

HOST = "this"  # this machine's CPU drives the GPU: what the GPU cell measured
FAMILY = "predicted vs measured GPU step"  # the audit's family (harness/audit/predictedgpu.py)
# The frameworks whose CPU cells are predicted (harness/predict/jaxmodel.py predict_any):
# each GPU cell of one is paired with its CPU cell, one tally per profile and framework.
FRAMEWORKS = ("torch", "keras-torch", "jax", "keras-jax")
# Three terminal lines at 100 columns at most once folded under the verdict (the CLI folds
# it: harness/commands/predicted.py): the longest wording that fits, the figures whole.
LINE_LIMIT = 240
RIGHT, WRONG, TIE = "right", "wrong", "tie"
# A measured gap under 5% is a tie whatever the samples' spread (the validation's rule too:
# benchmarks/predictlab/validation.py).
NOISE_FLOOR = 0.05


def same_gpu(profile_device: Any, device_name: Any) -> bool:
    """Whether a profile's device description names the GPU a cell ran on (case and spaces
    aside: the profile and the cell both read it from torch.cuda.get_device_name)."""
    def plain(name: Any) -> str:
        return " ".join(str(name or "").split()).casefold()
    return bool(plain(profile_device)) and plain(profile_device) == plain(device_name)


def tie(cpu_s: float, gpu_s: float, cpu_noise: float, gpu_noise: float) -> bool:
    """A measured GPU-vs-CPU gap within the noise (the validation's rule)."""
    gap = abs(cpu_s - gpu_s) / min(cpu_s, gpu_s)
    return gap <= max(NOISE_FLOOR, cpu_noise + gpu_noise)


@dataclass(frozen=True)
class Pair:
    """One case predicted from the CPU cell's features and measured on the GPU cell."""

    run_id: str
    framework: str
    variant: str
    cpu_device: str
    gpu_device: str
    device_name: str  # the GPU's, as the cell recorded it
    profile: str  # the profile's name as stored (a shipped name or a file's path)
    size: Any  # the sweep's value
    prediction: Prediction
    steps: int  # steps the features recorded: the prediction is of that many
    measured_s: float  # the GPU case's median per step
    cpu_s: float  # the CPU case's median per step
    cpu_noise: float
    gpu_noise: float
    interval: Interval | None
    no_interval: str  # why there is no interval ('' where there is one)

    @property
    def predicted_s(self) -> float | None:
        seconds = self.prediction.seconds
        return seconds / self.steps if seconds is not None else None

    @property
    def ratio(self) -> float | None:
        """predicted / measured."""
        return self.predicted_s / self.measured_s if self.predicted_s is not None else None

    @property
    def inside(self) -> bool | None:
        """Whether the measured step lies in the interval (None: no interval)."""
        if self.interval is None:
            return None
        return self.interval.low_s <= self.measured_s <= self.interval.high_s

    @property
    def verdict(self) -> str:
        """RIGHT, WRONG or TIE: the predicted GPU-vs-CPU verdict against the measured one."""
        if tie(self.cpu_s, self.measured_s, self.cpu_noise, self.gpu_noise):
            return TIE
        predicted = self.predicted_s
        if predicted is None:
            return WRONG
        return RIGHT if (predicted < self.cpu_s) == (self.measured_s < self.cpu_s) else WRONG


def ok_cases(cell: CellResult, sweep: str) -> dict[str, CaseResult]:
    """The cell's measured cases by their sweep value's text: the one accessor of samples
    this module uses (CaseResult.stats through cpu_step_seconds, case_noise)."""
    return {str(case.case.get(sweep)): case for case in cell.cases
            if case.status == Status.OK and case.samples}


def gpu_cells(document: RunDocument) -> list[CellResult]:
    return [cell for cell in document.cells if device_kind(cell.device) == "gpu"
            and cell.framework in FRAMEWORKS and cell.device_name]


def cpu_partner(document: RunDocument, gpu: CellResult) -> CellResult | None:
    """The CPU cell of the GPU cell's workload, framework and variant that holds predictions."""
    for cell in document.cells:
        if (device_kind(cell.device) == "cpu" and cell.framework == gpu.framework
                and cell.workload == gpu.workload and cell.variant == gpu.variant
                and any(case.gpu_predictions for case in cell.cases)):
            return cell
    return None


def band_of(name: str, prediction: Prediction, predicted_s: float | None,
            noise: float) -> tuple[Interval | None, str]:
    """The printed interval of a predicted step, or why there is none."""
    if predicted_s is None:
        return None, prediction.reason or "not predicted"
    identity = str(prediction.profile.get("identity"))
    band = band_for(name, identity, HOST, prediction.regime, prediction.framework)
    if band is None:
        return None, why_no_band(name, identity, HOST, prediction.regime, prediction.framework)
    return interval_of(predicted_s, band, noise), ""


def case_pairs(document: RunDocument, cpu: CellResult, gpu: CellResult,
               cpu_case: CaseResult, gpu_case: CaseResult) -> list[Pair]:
    """The pairs of one size: one per stored profile that describes the GPU cell's device."""
    found: list[Pair] = []
    cpu_s, gpu_s = cpu_step_seconds(cpu_case), cpu_step_seconds(gpu_case)
    if not cpu_s or not gpu_s:
        return found
    for name, by_host in cpu_case.gpu_predictions.items():
        prediction = by_host.get(HOST)
        if prediction is None:
            continue
        if not same_gpu(prediction.profile.get("device"), gpu.device_name):
            continue
        steps = int(cpu_case.extra.get(STEPS_KEY) or 1)
        predicted_s = prediction.seconds / steps if prediction.seconds is not None else None
        cpu_noise = case_noise(cpu_case)
        interval, why = band_of(name, prediction, predicted_s, cpu_noise)
        found.append(Pair(document.run_id, gpu.framework, gpu.variant, cpu.device, gpu.device,
                          str(gpu.device_name), name, cpu_case.case.get(document.sweep),
                          prediction, steps, gpu_s, cpu_s, cpu_noise, case_noise(gpu_case),
                          interval, why))
    return found


def pairs_of(document: RunDocument) -> list[Pair]:
    """Every (size, profile) of DOCUMENT predicted on its CPU cell and measured on its GPU
    cell, in cell order, then sweep order; [] where the run has no such pair."""
    found: list[Pair] = []
    for gpu in gpu_cells(document):
        cpu = cpu_partner(document, gpu)
        if cpu is None:
            continue
        cpu_cases, gpu_cases = ok_cases(cpu, document.sweep), ok_cases(gpu, document.sweep)
        for size in sorted(set(cpu_cases) & set(gpu_cases),
                           key=lambda text: size_order(cpu_cases[text].case.get(
                               document.sweep))):
            found += case_pairs(document, cpu, gpu, cpu_cases[size], gpu_cases[size])
    return found


# --- what a run's pairs add up to ------------------------------------------------------------

@dataclass(frozen=True)
class Tally:
    """One profile's pairs in one run, summed up: the sentence the terminal prints."""

    run_id: str
    profile: str
    device_name: str
    pairs: tuple[Pair, ...]

    @property
    def predicted(self) -> list[Pair]:
        return [pair for pair in self.pairs if pair.predicted_s is not None]

    @property
    def with_interval(self) -> list[Pair]:
        return [pair for pair in self.pairs if pair.interval is not None]

    @property
    def inside(self) -> int:
        return sum(bool(pair.inside) for pair in self.with_interval)

    @property
    def median_ratio(self) -> float | None:
        ratios = [pair.ratio for pair in self.predicted if pair.ratio is not None]
        return statistics.median(ratios) if ratios else None

    @property
    def judged(self) -> list[Pair]:
        """The predicted pairs whose measured verdict is not a tie."""
        return [pair for pair in self.predicted if pair.verdict != TIE]

    @property
    def verdicts_right(self) -> int:
        return sum(pair.verdict == RIGHT for pair in self.judged)

    def within_text(self) -> str:
        return f"{self.inside} of {len(self.with_interval)}"

    def ratio_text(self) -> str:
        return ratio_text(self.median_ratio)

    def verdict_text(self) -> str:
        return f"{self.verdicts_right} of {len(self.judged)}"

    def ties(self) -> int:
        return len(self.predicted) - len(self.judged)

    def about(self) -> str:
        """What the pairs are of: 'torch as-written' (the variants joined where several)."""
        frameworks = dict.fromkeys(pair.framework for pair in self.pairs)
        variants = dict.fromkeys(pair.variant for pair in self.pairs)
        return f"{'/'.join(frameworks)} {'/'.join(variants)}".strip()


def ratio_text(ratio: float | None) -> str:
    return f"{three_digits(ratio)}x" if ratio is not None else "-"


def tallies(document: RunDocument) -> list[Tally]:
    """One tally per profile that describes a GPU of DOCUMENT and framework, in the order
    first paired."""
    by_profile: dict[tuple[str, str], list[Pair]] = {}
    for pair in pairs_of(document):
        by_profile.setdefault((pair.profile, pair.framework), []).append(pair)
    return [Tally(document.run_id, name, found[0].device_name, tuple(found))
            for (name, _framework), found in by_profile.items()]


def tally_line(tally: Tally, others: int = 0) -> str:
    """The terminal's line: how the prediction for this GPU did against its measurement, in
    the longest wording that fits LINE_LIMIT (the figures the same in every wording)."""
    device = short_device(tally.device_name)
    if not tally.predicted:
        reason = tally.pairs[0].prediction.reason if tally.pairs else ""
        return _clipped(f"prediction for this GPU ({device}), {tally.about()}: unknown in all "
                       f"{len(tally.pairs)} cases: {reason}")
    inside = (f"within its interval in {tally.within_text()} cases" if tally.with_interval
              else f"no interval ({tally.pairs[0].no_interval})")
    ties = f", {tally.ties()} {'tie' if tally.ties() == 1 else 'ties'}" if tally.ties() else ""
    more = (f"; {others} more {'profile' if others == 1 else 'profiles'} in summary.md"
            if others else "")
    for host in (", this CPU driving it", ""):
        line = (f"prediction for this GPU ({device}{host}), {tally.about()}: {inside} "
                f"(median predicted/"
                f"measured {tally.ratio_text()}); GPU-vs-CPU verdict right in "
                f"{tally.verdict_text()}{ties}{more}")
        if len(line) <= LINE_LIMIT:
            return line
    return _clipped(line)


def _clipped(text: str) -> str:
    return text if len(text) <= LINE_LIMIT else text[:LINE_LIMIT - 3] + "..."


def check_line(documents: Sequence[RunDocument]) -> str:
    """The one terminal line of the first profile paired in DOCUMENTS ('' where none)."""
    found = [tally for document in documents for tally in tallies(document)]
    if not found:
        return ""
    chosen = next((tally for tally in found if tally.with_interval), found[0])
    return tally_line(chosen, len(found) - 1)

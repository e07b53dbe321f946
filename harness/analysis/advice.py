"""What to change, measured: the advice `harness advise` prints, computed from a run's results.

Pure computation over a stored run (harness.data.results.RunDocument); no framework, no clock,
no file. Per framework x device, at the user's batch:

- the diagnosis of the as-written cell from what the run measured: on a GPU the device-busy
  pass (harness.measure.devicetime: busy share, kernels per call, copy share) names it
  launch-, transfer-, compute-, memory- or device-bound; a CPU cell is host-bound (the CPU
  side does all the work);
- each fix (a variant of the cell, harness.workloads.usermodel.spec FIXES, or any variant of
  a built-in workload) ranked by its speedup over as-written (ratio of medians per step), the
  one noise rule of harness.analysis.noise (IQRs and round medians apart), its parity check
  (status and tolerance) and one line of why it helps here. Only a fix that is faster beyond
  the noise and passed its check is recommended; a slower or within-noise one "did not help";
  one that failed its check "fails parity"; neither is ever recommended;
- the best combination of the recommended fixes (compose_variant, conflicts dropped), which
  `harness advise` measures as one more cell;
- before anything is measured, the order in which `harness advise` tries the candidates
  (rank_candidates: those the diagnosis points at, then those it does not speak of, then those
  it argues against) and, from its run.json record, the ones it did not try, with why
  (NotTried: the diagnosis's reason, the budget that would have run them);
- the answer to the user's question: with the best of each device, does the GPU beat the CPU
  at their batch, and if not, from which batch (harness.analysis.predict refitted on the best
  configurations' sweeps).

Where the fix catalogue lives (the user-model workload plugin) is reached only through
harness.core.registry.model_plugin, as the rest of the core does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.analysis.advicenotes import RUN_KEY, budget_notes
from harness.analysis.confidence import UNCONFIRMED, doubt, nothing_recommended, unconfirmed_line
from harness.analysis.crossover import predict_curves
from harness.analysis.memoryfit import largest_batch_that_fits
from harness.analysis.noise import CaseNoise, GapVerdict, judge_gap
from harness.analysis.plausibility import bandwidth_limits, device_entry, flop_limits
from harness.analysis.predict import Prediction, SweepPoint
from harness.analysis.sensitivity import figures_sentence
from harness.core import registry
from harness.core.units import device_kind, format_ratio, format_seconds, format_size, three_digits
from harness.data.ceilings import MEMORY, Ceilings
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.measure.devicetime import Diagnosis, attribute, diagnose
from harness.spec import BadInput, Status
from harness.spec import variant_parts as split_variant

AS_WRITTEN = "as-written"
HOST_BOUND = "host-bound"
NO_ANSWER = "no answer: the run has no as-written cell on both a CPU and a GPU"
UNPROFILED = "not profiled"

# A fix's standing in the ranking.
RECOMMENDED = "recommended"
DID_NOT_HELP = "did not help"
FAILS_PARITY = "fails parity"
FAILED = "failed"
NOT_MEASURED = "not measured"


# --- the fix catalogue (workloads/usermodel/spec.py), reached through the registry ------------

def _plugin() -> Any | None:
    """The user-model plugin's spec module, where FIXES live; None where it cannot load."""
    try:
        return registry.model_plugin("spec")
    except Exception:  # noqa: BLE001 - no catalogue: the advice still ranks what was measured
        return None


def variant_parts(variant: str) -> list[str]:
    """The fixes a variant name applies at once ('resident+compiled' -> two)."""
    return [part for part in split_variant(variant) if part]


def fix_of(name: str) -> Any | None:
    """The catalogue's Fix for one fix name ('threads-2' finds a 'threads-N' entry)."""
    fixes = getattr(_plugin(), "FIXES", None) or {}
    found = fixes if isinstance(fixes, dict) else {getattr(fix, "name", ""): fix
                                                      for fix in fixes}
    if name in found:
        return found[name]
    family = re.sub(r"-\d+$", "-N", name)
    return found.get(family)


def helps_when(name: str) -> tuple[str, ...]:
    """The diagnoses under which the catalogue expects a fix to help (empty: not said)."""
    kinds = getattr(fix_of(name), "helps_when", ()) or ()
    return (kinds,) if isinstance(kinds, str) else tuple(kinds)


def conflict(parts: Sequence[str]) -> str:
    """Why these fixes cannot run together ('' when they can), from the catalogue."""
    check = getattr(_plugin(), "conflict", None)
    try:
        return str(check(list(parts)) or "") if callable(check) else ""
    except BadInput as exc:  # a part the catalogue does not know: not composable
        return str(exc)


def compose_variant(parts: Sequence[str]) -> str:
    """One variant name applying every part at once (the catalogue's own spelling)."""
    compose = getattr(_plugin(), "compose_variant", None)
    try:
        return str(compose(list(parts))) if callable(compose) else "+".join(parts)
    except BadInput:  # a built-in workload's variant: joined in the order given
        return "+".join(parts)


# Diagnoses under other names: the issue says copy-bound where devicetime says transfer-bound.
KIND_ALIASES = {"transfer-bound": ("transfer-bound", "copy-bound"),
                "copy-bound": ("transfer-bound", "copy-bound")}


def plausible(name: str, kind: str) -> bool | None:
    """Whether the diagnosis makes the fix plausible (None: the catalogue does not say)."""
    wanted = helps_when(name)
    if not wanted:
        return None
    names = KIND_ALIASES.get(kind, (kind,))
    return any(part in names for part in wanted)


# --- choosing what to measure: the diagnosis ranks the candidates -----------------------------

# How the as-written cell's diagnosis stands to a candidate fix (harness advise runs them in
# this order, as far as its time budget goes).
AIMED = "aimed"  # the diagnosis points at it (the catalogue's helps_when)
UNSAID = "unsaid"  # the catalogue does not say, or the diagnosis cannot tell
ARGUED_AGAINST = "argued against"  # the catalogue expects it to help under other diagnoses
FIT_ORDER = {AIMED: 0, UNSAID: 1, ARGUED_AGAINST: 2}
# What a fix would have to do under each diagnosis: the words of a not-tried line.
KIND_NEEDS = {"launch-bound": "shorten launches", "transfer-bound": "remove host-device copies",
              "copy-bound": "remove host-device copies",
              "compute-bound": "speed up the arithmetic", "memory-bound": "move fewer bytes",
              "device-bound": "shorten the device's own work",
              HOST_BOUND: "cut the host's work per step"}


def candidate_fit(name: str, device: str, kind: str) -> str:
    """AIMED, UNSAID or ARGUED_AGAINST: how the diagnosis KIND of the as-written cell on DEVICE
    stands to the fix NAME (every part of a composed one).

    Only a GPU's split argues against a fix: a CPU cell is host-bound as a whole (the CPU does
    all the work), which ranks the fixes aimed at the host first but rules out nothing (bf16
    sped the small CNN's CPU step up 1.28x, a fix aimed at compute-bound steps:
    docs/findings.md); an unprofiled GPU cell says nothing either way.
    """
    fits = [plausible(part, kind) for part in variant_parts(name)]
    if any(fits):
        return AIMED
    if device_kind(device) == "cpu" or kind == UNPROFILED or all(fit is None for fit in fits):
        return UNSAID
    return ARGUED_AGAINST


def rank_candidates(names: Sequence[str], device: str, kind: str) -> list[str]:
    """The candidate fixes in the order worth measuring: those the diagnosis points at, then
    those it says nothing of, then those it argues against; the catalogue's order within."""
    return sorted(names, key=lambda name: FIT_ORDER[candidate_fit(name, device, kind)])


def argued_against(name: str, kind: str) -> str:
    """'launch-bound, bf16 cannot shorten launches (it helps when compute-, memory- or
    device-bound)': why the diagnosis argues against a fix, from the catalogue."""
    helps = sorted({wanted for part in variant_parts(name) for wanted in helps_when(part)})
    when = ", ".join(helps) if helps else "other diagnoses"
    need = KIND_NEEDS.get(kind, f"help a {kind} step")
    return f"{kind}, {name} cannot {need} (it helps when {when})"


@dataclass(frozen=True)
class NotTried:
    """A candidate fix `harness advise` did not measure, and why (its run.json record)."""

    variant: str
    fit: str  # AIMED, UNSAID or ARGUED_AGAINST
    kind: str  # the as-written cell's diagnosis when the choice was made
    budget_s: float | None  # the run's budget (None: no limit)
    needed_s: float | None  # a budget that would have run it (None: not estimated)

    @classmethod
    def of(cls, record: dict[str, Any]) -> NotTried:
        needed = record.get("needed_s")
        budget = record.get("budget_s")
        return cls(str(record.get("variant")), str(record.get("fit") or UNSAID),
                   str(record.get("diagnosis") or ""),
                   float(budget) if isinstance(budget, (int, float)) else None,
                   float(needed) if isinstance(needed, (int, float)) else None)

    def line(self) -> str:
        """'bf16: not tried: launch-bound, bf16 cannot shorten launches (...); --budget 260
        would run it' or 'compiled: not tried: left out by the budget of 180 s; ...'."""
        why = (argued_against(self.variant, self.kind) if self.fit == ARGUED_AGAINST
               else f"left out by the budget of {self.budget_s:.0f} s" if self.budget_s
               else "left out")
        more = f"; --budget {self.needed_s:.0f} would run it" if self.needed_s else ""
        return f"{self.variant}: not tried: {why}{more}"


# --- one measured case, as the advice reads it -------------------------------------------------

@dataclass(frozen=True)
class Measured:
    """One case of one cell at one batch: its time per step, noise, check and device figures."""

    variant: str
    framework: str
    device: str
    size: Any
    status: str
    reason: str
    noise: CaseNoise | None  # per step; None without warm samples
    steps: float
    check: dict[str, Any] | None
    profile: dict[str, Any] | None  # the device-busy pass per call (or {"reason": ...})
    flops: float | None  # per call
    cold_s: float | None
    # The cell's status: a worker stopped from outside (the budget's deadline, --timeout, a
    # stop signal) leaves a timeout or interrupted cell whose finished cases read ok.
    cell_status: str = ""
    suspect: str = ""  # why the worker's timing guard doubts this time ('' when it does not)

    @property
    def median_s(self) -> float | None:
        return self.noise.median if self.noise is not None and self.noise.samples else None

    @property
    def call_median_s(self) -> float | None:
        median = self.median_s
        return None if median is None else median * self.steps

    @property
    def passed(self) -> bool | None:
        """The check's verdict (None: no check ran, or it compared nothing)."""
        if not self.check or self.check.get("metric") == "not_compared":
            return None
        return bool(self.check.get("passed"))

    @property
    def valid(self) -> bool:
        return self.median_s is not None and self.status in (Status.OK.value,
                                                              Status.INVALID.value)


def measured_case(cell: CellResult, case: CaseResult, sweep: str) -> Measured:
    """The advice's view of one stored case: samples per step (a Keras call is many steps)."""
    steps = float(case.extra.get("steps_per_call") or 1.0) or 1.0
    per_step = [seconds / steps for seconds in case.samples]
    noise = CaseNoise.of(per_step, case.sample_rounds) if per_step else None
    flops = case.extra.get("flops_per_call")
    return Measured(cell.variant, cell.framework, cell.device, case.case.get(sweep),
                    case.status.value, case.reason or cell.reason, noise, steps, case.check,
                    case.device_profile, float(flops) if flops else None, case.cold_seconds,
                    cell.status.value, case.suspect)


def measured_cases(document: RunDocument) -> list[Measured]:
    """Every case of every cell of a run; a cell that stopped before its cases, one row."""
    found = []
    for cell in document.cells:
        cases = [measured_case(cell, case, document.sweep) for case in cell.cases]
        if not cases:
            cases = [Measured(cell.variant, cell.framework, cell.device, None,
                              cell.status.value, cell.reason, None, 1.0, None, None, None,
                              None, cell.status.value)]
        found += cases
    return found


# --- the diagnosis of the as-written cell -------------------------------------------------------

def profiled(case: Measured) -> bool:
    return (case.profile or {}).get("busy_seconds") is not None and bool(case.call_median_s)


def diagnosis_at(case: Measured, cases: Sequence[Measured],
                 ceilings: Ceilings | None = None) -> Diagnosis:
    """diagnosis_of CASE, or where its GPU profile is missing (left out: a call of seconds,
    harness.run.casepasses pass_too_long) that of the same cell at another batch, which says so:
    what bounds a step (launches, copies, compute) rarely changes between two batches of one
    sweep, and an unprofiled diagnosis argues for no fix and against none."""
    if device_kind(case.device) == "cpu" or profiled(case):
        return diagnosis_of(case, ceilings)
    others = [other for other in cases if other is not case and profiled(other)
              and (other.framework, other.device, other.variant)
              == (case.framework, case.device, case.variant)]
    if not others:
        return diagnosis_of(case, ceilings)
    stand_in = min(others, key=lambda other: other.call_median_s or 0.0)  # the cheapest
    found = diagnosis_of(stand_in, ceilings)
    why = (case.profile or {}).get("reason") or "no device-busy pass"
    return Diagnosis(found.kind, f"{found.text} (at batch {stand_in.size}; at {case.size} "
                                 f"{why})")


def diagnosis_of(case: Measured, ceilings: Ceilings | None = None) -> Diagnosis:
    """What bounds the as-written case: the device profile's split on a GPU, host on a CPU."""
    median = case.median_s
    if device_kind(case.device) == "cpu":
        timed = f" ({format_seconds(median)} per step)" if median is not None else ""
        return Diagnosis(HOST_BOUND, f"{HOST_BOUND}: the CPU side does all the work{timed}")
    profile = case.profile or {}
    busy = profile.get("busy_seconds")
    wall = case.call_median_s
    if busy is None or not wall:
        why = profile.get("reason") or "no device-busy pass in this run"
        return Diagnosis(UNPROFILED, f"{UNPROFILED}: {why}")
    parts = attribute(wall, float(busy), float(profile.get("copy_seconds") or 0.0),
                      case.cold_s)
    entry = device_entry(ceilings or Ceilings(), case.device)
    peak, _ = flop_limits(entry, "fp32")
    bandwidth, _ = bandwidth_limits(entry, MEMORY)
    return diagnose(parts, profile.get("kernels_per_call"), case.flops, None, peak, bandwidth)


def why_line(fix: str, diagnosis: Diagnosis, baseline: Measured) -> str:
    """One line of why the fix helps (or was tried) here, with the measured figures."""
    profile = baseline.profile or {}
    kernels = profile.get("kernels_per_call")
    copies = profile.get("copies_per_call")
    kind = diagnosis.kind
    reasons = [_part_reason(part, kind, kernels, copies) for part in variant_parts(fix)]
    text = "; ".join(dict.fromkeys(reason for reason in reasons if reason))
    fits = [plausible(part, kind) for part in variant_parts(fix)]
    aimed = "" if any(fits) or all(fit is None for fit in fits) else \
        " (tried although the diagnosis does not point at it)"
    return f"{kind}: {text or 'measured beside the as-written cell'}{aimed}"


def _part_reason(part: str, kind: str, kernels: float | None, copies: float | None) -> str:
    """Why one fix can help under a diagnosis, in words with the measured counts."""
    many = f"{three_digits(kernels)} kernels" if kernels else "the step's kernels"
    if part == "cuda-graph":
        return f"the graph replays {many} in one launch"
    if part.startswith("compile"):
        return (f"compiling fuses {many} into fewer launches" if kind == "launch-bound"
                else "compiling fuses the step's ops and drops the Python dispatch")
    if part == "resident":
        moved = (f"{three_digits(copies)} host->device copies" if copies
                 else "the host->device copies")
        return f"inputs stay on the device: {moved} per call are gone"
    if part in ("bf16", "fp16"):
        return f"{part} halves the bytes moved and runs matmuls on tensor cores"
    if part == "tf32":
        return "TF32 matmuls run on tensor cores at fp32 range"
    if part == "channels-last":
        return "convolutions in the layout cuDNN's fastest kernels read"
    if part == "cudnn-benchmark":
        return "cuDNN times its convolution algorithms once and keeps the fastest"
    if part == "steps-per-execution":
        return "one execution runs several steps: fewer host round trips"
    if part.startswith("threads-"):
        return f"the CPU's thread count set to {part.removeprefix('threads-')}"
    return str(getattr(fix_of(part), "why", "") or "")


# --- ranking -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FixResult:
    """One fix of one framework x device: its speedup, noise verdict, parity and standing."""

    variant: str
    framework: str
    device: str
    standing: str  # RECOMMENDED, DID_NOT_HELP, FAILS_PARITY, FAILED, NOT_MEASURED
    speedup: float | None  # as-written median / fix median, per step
    verdict: GapVerdict | None
    parity: str
    why: str
    median_s: float | None
    reason: str = ""
    noise: CaseNoise | None = None  # per step: what the answer's own noise verdict reads

    @property
    def recommended(self) -> bool:
        return self.standing == RECOMMENDED

    def line(self) -> str:
        """'cuda-graph: 3.1x faster, beyond the noise, ...; parity pass ...; why' and the
        did-not-help and failing forms ('compile-reduce-overhead: 0.93x, slower here')."""
        ratio = format_ratio(self.speedup)
        noise = self.verdict.phrase() if self.verdict is not None else "not judged"
        if self.standing == RECOMMENDED:
            return f"{self.variant}: {ratio} faster ({noise}); parity {self.parity}; {self.why}"
        if self.standing == UNCONFIRMED:  # faster, on timings or a gap not to trust
            return unconfirmed_line(self.variant, ratio, noise, self.reason)
        if self.standing == FAILS_PARITY:
            return (f"{self.variant}: {ratio}, fails parity ({self.parity}); not recommended")
        if self.standing in (FAILED, NOT_MEASURED):
            return f"{self.variant}: {self.standing} ({self.reason or 'no result'})"
        if self.speedup is not None and self.speedup < 1:
            return f"{self.variant}: {ratio}, slower here ({noise})"
        return f"{self.variant}: {ratio}, within the noise here ({noise})"


def parity_text(case: Measured) -> str:
    """'pass (max_rel_diff 3e-07 <= the fp32 bound 1e-05)', 'FAIL (...)', 'not compared', 'no
    check'; a reduced precision judged by its sensitivity: 'pass (bf16: loss 0.25% from fp32;
    rounding the inputs and weights to bf16 moves the fp32 loss by up to 0.17%: within ...)'."""
    check = case.check
    if not check:
        return "no check"
    if check.get("metric") == "not_compared":
        return "not compared"
    verdict = "pass" if check.get("passed") else "FAIL"
    judged = figures_sentence(check)  # a reduced precision judged by the model's sensitivity
    if judged is not None:
        return f"{verdict} ({judged})"
    value, bound = check.get("value"), check.get("bound")
    compared = "<=" if check.get("passed") else ">"
    precision = PRECISION_TOLERANCE.search(str(check.get("detail") or ""))
    whose = f"the {precision.group(1)} tolerance" if precision else "the fp32 bound"
    figures = (f"{check.get('metric')} {_number(value)} {compared} {whose} {_number(bound)}"
               if isinstance(value, (int, float)) and isinstance(bound, (int, float))
               else str(check.get("metric") or ""))
    return f"{verdict} ({figures})"


# How a lower-precision variant's check names its tolerance ('... (bf16 tolerance)').
PRECISION_TOLERANCE = re.compile(r"\((\w+) tolerance")


def _number(value: float) -> str:
    return f"{value:.2g}"


# A cell whose worker was stopped from outside: not a fix that failed, one not measured.
STOPPED = frozenset({Status.TIMEOUT.value, Status.INTERRUPTED.value})


def judge_fix(baseline: Measured, fix: Measured, diagnosis: Diagnosis) -> FixResult:
    """One fix against the as-written case of the same framework and device."""
    judged = FixResult(fix.variant, fix.framework, fix.device, NOT_MEASURED, None, None,
                       parity_text(fix), why_line(fix.variant, diagnosis, baseline),
                       fix.median_s, fix.reason, fix.noise)
    if not fix.valid or baseline.median_s is None or fix.noise is None or \
            baseline.noise is None:
        if fix.status in STOPPED:
            return replace(judged, reason=f"stopped before it finished a case: {fix.reason}")
        return judged if fix.status == Status.OK.value else replace(judged, standing=FAILED)
    speedup = baseline.median_s / fix.median_s if fix.median_s else None
    verdict = judge_gap(baseline.noise, fix.noise)
    why_not = ""  # why a fix faster beyond the noise rule is still not confirmed
    if fix.passed is False or fix.status == Status.INVALID.value:
        standing = FAILS_PARITY
    elif speedup is not None and speedup > 1 and verdict.significant:
        why_not = doubt(baseline, fix)
        standing = UNCONFIRMED if why_not else RECOMMENDED
    else:
        standing = DID_NOT_HELP
    return replace(judged, standing=standing, speedup=speedup, verdict=verdict, reason=why_not)


STANDING_ORDER = {RECOMMENDED: 0, UNCONFIRMED: 1, DID_NOT_HELP: 2, FAILS_PARITY: 3, FAILED: 4,
                  NOT_MEASURED: 5}


def stopped_fix(baseline: Measured, finished: Sequence[Measured], diagnosis: Diagnosis,
                sweep: str) -> FixResult:
    """A fix whose worker was stopped after FINISHED, its cases at other sizes than the
    user's (BASELINE's): not measured at the user's, saying what it finished."""
    first = finished[0]
    sizes = ", ".join(format_size(case.size, sweep) for case in finished)
    return FixResult(first.variant, first.framework, first.device, NOT_MEASURED, None, None,
                     "no check", why_line(first.variant, diagnosis, baseline), None,
                     f"stopped after {sweep} {sizes}, before {sweep} "
                     f"{format_size(baseline.size, sweep)}: {first.reason}")


def ranked(results: Iterable[FixResult]) -> list[FixResult]:
    """Recommended first, fastest first; then did not help, failing parity, failed."""
    return sorted(results, key=lambda item: (STANDING_ORDER[item.standing],
                                             -(item.speedup or 0.0), item.variant))


def best_combination(results: Sequence[FixResult],
                     conflicts: Callable[[Sequence[str]], str] = conflict) -> list[str]:
    """The recommended fixes that can run together, greedily from the fastest: each fix
    (every part of a composed one) joins unless it conflicts with those already chosen."""
    chosen: list[str] = []
    for item in ranked(results):
        if not item.recommended:
            continue
        parts = [part for part in variant_parts(item.variant) if part not in chosen]
        if parts and not conflicts([*chosen, *parts]):
            chosen += parts
    return chosen


# --- per framework x device ----------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceAdvice:
    """The advice of one framework on one device at the user's batch."""

    framework: str
    device: str
    baseline: Measured
    diagnosis: Diagnosis
    fixes: list[FixResult]  # ranked
    combination: list[str]  # the recommended fixes that run together
    combined: FixResult | None  # the combination measured as one cell, where it was
    not_tried: list[NotTried] = field(default_factory=list)  # candidates never measured
    combination_note: str = ""  # why the combination was not measured, where it was not

    @property
    def combination_name(self) -> str:
        return compose_variant(self.combination) if self.combination else ""

    @property
    def best(self) -> FixResult | None:
        """The best configuration that passed: the measured combination if it helped,
        else the fastest recommended fix; None when nothing helped."""
        candidates = [item for item in [self.combined, *self.fixes]
                      if item is not None and item.recommended]
        return max(candidates, key=lambda item: item.speedup or 0.0, default=None)

    @property
    def best_variant(self) -> str:
        best = self.best
        return best.variant if best is not None else AS_WRITTEN

    @property
    def best_median_s(self) -> float | None:
        best = self.best
        return best.median_s if best is not None else self.baseline.median_s

    def head(self) -> str:
        """'torch on cuda:0: as-written 1.2 ms per step; launch-bound: ...'."""
        return (f"{self.framework} on {self.device}: as-written "
                f"{format_seconds(self.baseline.median_s)} per step; {self.diagnosis.text}")

    def ranked_lines(self) -> list[str]:
        """The recommended fixes, fastest first, numbered, then the combination."""
        helped = [item for item in self.fixes if item.recommended]
        lines = [f"{number}. {item.line()}" for number, item in enumerate(helped, start=1)]
        if not helped:  # named: the same words under two devices would read as one line
            lines.append(nothing_recommended(
                f"{self.framework} on {self.device}", [item.variant for item in self.fixes
                                                       if item.standing == UNCONFIRMED],
                self.baseline.suspect))
        return lines + self._combination_lines()

    def other_lines(self) -> list[str]:
        """What was not confirmed, did not help, failed parity or failed: never recommended."""
        return [item.line() for item in self.fixes
                if item.standing not in (RECOMMENDED, NOT_MEASURED)]

    def unmeasured_lines(self) -> list[str]:
        """The fixes that got a worker but no result at this size (one stopped by the budget,
        one without samples): never recommended, and never 'did not help' either."""
        return [item.line() for item in self.fixes if item.standing == NOT_MEASURED]

    def not_tried_lines(self) -> list[str]:
        """The candidates never measured, each with why (the diagnosis, the budget)."""
        return [item.line() for item in self.not_tried]

    def _combination_lines(self) -> list[str]:
        if len(self.combination) < 2:
            return []
        name = self.combination_name
        if self.combined is None:
            note = f" ({self.combination_note})" if self.combination_note else ""
            return [f"combination {name}: not measured{note}"]
        item = self.combined
        if item.recommended:
            return [f"combination {name}: {format_ratio(item.speedup)} faster, measured as "
                    f"one cell ({item.verdict.phrase() if item.verdict else 'not judged'}); "
                    f"parity {item.parity}"]
        return [f"combination {name}: {item.line().split(': ', 1)[1]}"]


def _at_size(cases: list[Measured], size: Any) -> list[Measured]:
    return [case for case in cases if case.size == size or case.size is None]


def _stopped_elsewhere(baseline: Measured, everywhere: list[Measured], own: list[Measured],
                       diagnosis: Diagnosis, sweep: str,
                       skipped: tuple[str, ...]) -> list[FixResult]:
    """The stopped fixes that finished other sizes only (the user's is missing from OWN)."""
    present = {case.variant for case in own}
    stopped: dict[str, list[Measured]] = {}
    for case in everywhere:
        if case.cell_status in STOPPED and case.variant not in present | set(skipped):
            stopped.setdefault(case.variant, []).append(case)
    return [stopped_fix(baseline, finished, diagnosis, sweep) for finished in stopped.values()]


def device_advice(cases: list[Measured], framework: str, device: str, size: Any,
                  combination: str = "", baseline_variant: str = AS_WRITTEN,
                  ceilings: Ceilings | None = None, sweep: str = "size") -> DeviceAdvice | None:
    """The advice of one framework x device at one size; None without an as-written case."""
    everywhere = [case for case in cases if case.framework == framework
                  and case.device == device]
    own = _at_size(everywhere, size)
    baseline = next((case for case in own if case.variant == baseline_variant), None)
    if baseline is None:
        return None
    diagnosis = diagnosis_at(baseline, cases, ceilings)
    judged = [judge_fix(baseline, case, diagnosis) for case in own
              if case.variant not in (baseline_variant, combination)]
    fixes = ranked(judged + _stopped_elsewhere(baseline, everywhere, own, diagnosis, sweep,
                                               (baseline_variant, combination)))
    combined_case = next((case for case in own if combination and case.variant == combination),
                         None)
    combined = None if combined_case is None else judge_fix(baseline, combined_case, diagnosis)
    chosen = best_combination(fixes)
    return DeviceAdvice(framework, device, baseline, diagnosis, fixes, chosen, combined)


# --- the answer: does the GPU now win at the user's batch? ------------------------------------

@dataclass(frozen=True)
class Answer:
    """GPU (best configuration) against CPU (best configuration) at the user's batch."""

    framework: str
    text: str
    gpu_wins: bool | None  # None: no GPU or no CPU result to compare
    prediction: Prediction | None = None


def sweep_points(cases: list[Measured], framework: str, device: str,
                 variant: str) -> list[SweepPoint]:
    """One configuration's measured sizes as the crossover predictor reads them, per call."""
    points = []
    for case in cases:
        if (case.framework, case.device, case.variant) != (framework, device, variant) \
                or not case.valid or not isinstance(case.size, (int, float)):
            continue
        profile = case.profile or {}
        points.append(SweepPoint(size=float(case.size), seconds=float(case.call_median_s or 0),
                                 flops=case.flops, launches=_positive(
                                     profile.get("launches_per_call")),
                                 busy_seconds=_positive(profile.get("busy_seconds")),
                                 steps=case.steps))
    return sorted(points, key=lambda point: point.size)


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def answer(cpu: DeviceAdvice | None, gpu: DeviceAdvice | None, cases: list[Measured],
           sweep: str, size: Any, document: RunDocument | None = None) -> Answer | None:
    """The user's question, answered with each device's best configuration that passed."""
    if gpu is None or cpu is None:
        return None
    framework = gpu.framework
    gpu_s, cpu_s = gpu.best_median_s, cpu.best_median_s
    at = f"{sweep} {format_size(size, sweep)}"
    setup = f"GPU {gpu.best_variant} vs CPU {cpu.best_variant}"
    if gpu_s is None or cpu_s is None:
        return Answer(framework, f"{framework}: no answer at {at}: a device has no valid "
                                 "result", None)
    verdict = judge_gap(_noise_of(cpu), _noise_of(gpu))
    ratio = cpu_s / gpu_s
    if gpu_s < cpu_s and verdict.significant:
        return Answer(framework, f"{framework}: yes, the GPU now wins at {at}: {setup}, "
                                 f"{format_ratio(ratio)} faster ({verdict.phrase()})", True)
    prediction = refit(cases, gpu, cpu)
    lead = ("no, within the noise at" if gpu_s < cpu_s else "no, the GPU still loses at")
    text = f"{framework}: {lead} {at}: {setup}, GPU/CPU speedup {format_ratio(ratio)} " \
           f"({verdict.phrase()}); {_from_which(prediction, sweep)}" \
           f"{larger_batch(document, gpu, prediction, size)}"
    return Answer(framework, text, False, prediction)


def _noise_of(advice: DeviceAdvice) -> CaseNoise:
    """The samples of a device's best configuration, as the noise rule reads them."""
    best = advice.best
    noise = best.noise if best is not None else advice.baseline.noise
    return noise if noise is not None else CaseNoise(float("nan"), float("nan"),
                                                     float("nan"), 0)


def refit(cases: list[Measured], gpu: DeviceAdvice, cpu: DeviceAdvice) -> Prediction | None:
    """The predicted crossover refitted on the best configurations' own sweeps (the fixed
    step's costs: its launches, busy time and FLOPs per call), where each has two sizes."""
    gpu_points = sweep_points(cases, gpu.framework, gpu.device, gpu.best_variant)
    cpu_points = sweep_points(cases, cpu.framework, cpu.device, cpu.best_variant)
    if len(gpu_points) < 2 or len(cpu_points) < 2:
        return None
    return predict_curves(cpu_points, gpu_points)


def larger_batch(document: RunDocument | None, gpu: DeviceAdvice,
                 prediction: Prediction | None, size: Any) -> str:
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


def _from_which(prediction: Prediction | None, sweep: str) -> str:
    if prediction is None:
        return (f"from which {sweep} it would win: not predicted (the best configurations "
                f"ran at one {sweep}; give two sizes)")
    return f"refitted with the fixed step's costs, {prediction.text(sweep)}"


# --- the whole run ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RunAdvice:
    """The advice of one run: per framework its devices' advice and the answer."""

    workload: str
    sweep: str
    size: Any
    devices: list[DeviceAdvice]
    answers: list[Answer] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # the budget's: rounds, fixes measured

    def lines(self) -> list[str]:
        """The answer first, then the budget's notes, per device the ranked fixes, what did
        not help, and the candidates not tried."""
        at = f"{self.sweep} {format_size(self.size, self.sweep)}" if self.size is not None \
            else "the measured size"
        lines = [f"answer ({self.workload} at {at}):"]
        lines += [f"  {item.text}" for item in self.answers] or [f"  {NO_ANSWER}"]
        lines += self.notes
        lines += self.ranked_lines()
        for title, lines_of in (("did not help or not confirmed (never recommended):"
                                 if any(fix.standing == UNCONFIRMED for device in self.devices
                                        for fix in device.fixes)
                                 else "did not help (never recommended):",
                                 DeviceAdvice.other_lines),
                                ("not measured (never recommended):",
                                 DeviceAdvice.unmeasured_lines),
                                ("not tried (never measured):", DeviceAdvice.not_tried_lines)):
            found = [(advice, lines_of(advice)) for advice in self.devices]
            if any(lines_ for _, lines_ in found):
                lines.append(title)
                lines += [f"  {advice.framework} on {advice.device}: {line}"
                          for advice, lines_ in found for line in lines_]
        return lines

    def ranked_lines(self, others: bool = False) -> list[str]:
        """Per device: its diagnosis, then the ranked fixes; `others`: then what did not help
        (compare --variant all prints each device's whole ranking this way)."""
        lines = []
        for advice in self.devices:
            lines.append(advice.head())
            lines += [f"  {line}" for line in advice.ranked_lines()]
            # Named as in lines(): two devices' "0.99x, slower here" would read as one line
            # said twice (a flaky sentence-once test on the 2-core VM caught it).
            lines += [f"  {advice.framework} on {advice.device}: {line}"
                      for line in (advice.other_lines() + advice.unmeasured_lines()
                                   if others else [])]
        return lines


def user_size(document: RunDocument, cases: list[Measured], baseline: str) -> Any:
    """The user's batch: what `harness advise` stored, else the first planned size that the
    most variants measured (compare --variant all)."""
    stored = (document.extra_fields.get(RUN_KEY) or {}).get("size")
    if stored is not None:
        return stored
    counts: dict[Any, set[str]] = {}
    for case in cases:
        if case.valid and case.size is not None:
            counts.setdefault(case.size, set()).add(case.variant)
    if not counts:
        return None
    planned = document.params.get(document.sweep)
    order = planned if isinstance(planned, list) else sorted(counts, key=str)
    best = max(len(variants) for variants in counts.values())
    return next((size for size in order if len(counts.get(size, ())) == best),
                next(iter(counts)))


def baseline_variant(document: RunDocument) -> str:
    """as-written where the run has it, else the first planned variant (the workload's own)."""
    variants = list(dict.fromkeys(str(cell.get("variant")) for cell in document.planned_cells)) \
        or list(dict.fromkeys(cell.variant for cell in document.cells))
    return AS_WRITTEN if AS_WRITTEN in variants or not variants else variants[0]


def advise_run(document: RunDocument, size: Any | None = None) -> RunAdvice:
    """The whole advice of a stored run at the user's batch (`size`, else user_size)."""
    cases = measured_cases(document)
    baseline = baseline_variant(document)
    size = user_size(document, cases, baseline) if size is None else size
    record = document.extra_fields.get(RUN_KEY) or {}
    combined = dict(((item.get("framework"), item.get("device")), item.get("variant"))
                    for item in record.get("combined", []))
    devices = []
    for framework, device in dict.fromkeys((case.framework, case.device) for case in cases):
        advice = device_advice(cases, framework, device, size,
                               combined.get((framework, device), ""), baseline,
                               document.ceilings, document.sweep)
        if advice is not None:
            devices.append(with_choice(advice, record))
    answers = []
    for framework in dict.fromkeys(advice.framework for advice in devices):
        own = [advice for advice in devices if advice.framework == framework]
        cpu = next((advice for advice in own if device_kind(advice.device) == "cpu"), None)
        for gpu in (advice for advice in own if device_kind(advice.device) == "gpu"):
            found = answer(cpu, gpu, cases, document.sweep, size, document)
            if found is not None:
                answers.append(found)
    return RunAdvice(document.workload, document.sweep, size, devices, answers,
                     budget_notes(record))


def _own(items: Any, advice: DeviceAdvice) -> list[dict[str, Any]]:
    return [item for item in items or [] if isinstance(item, dict)
            and (item.get("framework"), item.get("device")) == (advice.framework, advice.device)]


def with_choice(advice: DeviceAdvice, record: dict[str, Any]) -> DeviceAdvice:
    """A device's advice with what `harness advise` chose not to measure (run.json's advise
    record: `not_tried`, and `combination_left_out` for a combination the budget left out),
    and, for a trial that was not measured, the budget that would run it in full."""
    not_tried = [NotTried.of(item) for item in _own(record.get("not_tried"), advice)]
    trials = {item.get("variant"): item for item in _own(record.get("chosen"), advice)
              if item.get("trial")}
    fixes = [_as_trial(fix, trials.get(fix.variant)) for fix in advice.fixes]
    left_out = next(iter(_own(record.get("combination_left_out"), advice)), None)
    note = ""
    if left_out is not None:
        needed = left_out.get("needed_s")
        note = f"left out by the budget of {float(left_out.get('budget_s') or 0):.0f} s" + (
            f"; --budget {float(needed):.0f} would run it" if needed else "")
    return replace(advice, fixes=fixes, not_tried=not_tried, combination_note=note)


def _as_trial(fix: FixResult, trial: dict[str, Any] | None) -> FixResult:
    """A trial not measured says it was one (too dear at its estimate, tried in the time the
    budget left) and what budget would run it in full."""
    if trial is None or fix.standing != NOT_MEASURED:
        return fix
    needed = trial.get("needed_s")
    more = f", --budget {float(needed):.0f} would run it" if \
        isinstance(needed, (int, float)) else ""
    return replace(fix, reason=f"{fix.reason or 'no result'}; tried in the time left{more}")

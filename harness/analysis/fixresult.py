"""The standing of one measured fix and the advice of one framework on one device: the
records harness.analysis.advice ranks and harness.analysis.adviceanswer reads (apart from
both, so the answer reads them without importing the module that ranks them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from harness.analysis.casetable import CaseRow
from harness.analysis.confidence import (
    UNCONFIRMED,
    beyond_suspicion,
    doubt,
    nothing_recommended,
    unconfirmed_line,
)
from harness.analysis.fixchoice import NotTried, compose_variant, conflict, fix_parts, why_line
from harness.analysis.noise import CaseNoise, GapVerdict, judge_gap
from harness.core.units import format_ratio, format_seconds, format_size
from harness.data.sensitivity import figures_sentence
from harness.measure.devicetime import Diagnosis
from harness.spec import Status

AS_WRITTEN = "as-written"

# A fix's standing in the ranking.
RECOMMENDED = "recommended"
DID_NOT_HELP = "did not help"
FAILS_PARITY = "fails parity"
FAILED = "failed"
NOT_MEASURED = "not measured"


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
    # An effect measured on SUSPECT timings beyond what their reasons can explain, said on
    # its line ('measured on SUSPECT timings (...), which explain up to 4x, not 3271x').
    suspect_note: str = ""

    @property
    def recommended(self) -> bool:
        return self.standing == RECOMMENDED

    def line(self) -> str:
        """'cuda-graph: 3.1x faster, beyond the noise, ...; parity pass ...; why' and the
        did-not-help and failing forms ('compile-reduce-overhead: 0.93x, slower here')."""
        ratio = format_ratio(self.speedup)
        noise = self.verdict.phrase() if self.verdict is not None else "not judged"
        if self.suspect_note:
            noise = f"{noise}; {self.suspect_note}"
        if self.standing == RECOMMENDED:
            return f"{self.variant}: {ratio} faster ({noise}); parity {self.parity}; {self.why}"
        if self.standing == UNCONFIRMED:  # on timings or a gap not to trust, either way
            return unconfirmed_line(self.variant, ratio, noise, self.reason,
                                    slower=self.speedup is not None and self.speedup < 1)
        if self.standing == FAILS_PARITY:
            return (f"{self.variant}: {ratio}, fails parity ({self.parity}); not recommended")
        if self.standing in (FAILED, NOT_MEASURED):
            return f"{self.variant}: {self.standing} ({self.reason or 'no result'})"
        if self.speedup is not None and self.speedup < 1:
            return f"{self.variant}: {ratio}, slower here ({noise})"
        return f"{self.variant}: {ratio}, within the noise here ({noise})"


def parity_text(case: CaseRow) -> str:
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


def judge_fix(baseline: CaseRow, fix: CaseRow, diagnosis: Diagnosis) -> FixResult:
    """One fix against the as-written case of the same framework and device."""
    judged = FixResult(fix.variant, fix.framework, fix.device, NOT_MEASURED, None, None,
                       parity_text(fix), why_line(fix.variant, diagnosis.kind, baseline.profile),
                       fix.median_s if fix.samples else None, fix.reason,
                       fix.noise if fix.samples else None)
    if not fix.timed or not baseline.samples:
        if fix.status in STOPPED:
            return replace(judged, reason=f"stopped before it finished a case: {fix.reason}")
        return judged if fix.status == Status.OK.value else replace(judged, standing=FAILED)
    speedup = baseline.median_s / fix.median_s if fix.median_s else None
    verdict = judge_gap(baseline.noise, fix.noise)
    why_not = ""  # why a gain or loss beyond the noise rule is still not confirmed
    if failed_check(fix) or fix.status == Status.INVALID.value:
        standing = FAILS_PARITY
    elif speedup is not None and speedup > 1 and verdict.significant:
        why_not = doubt(baseline, fix, speedup)
        standing = UNCONFIRMED if why_not else RECOMMENDED
    elif speedup is not None and speedup < 1 and verdict.significant and \
            (baseline.suspect or fix.suspect):
        # Slower on SUSPECT timings: said as measured only beyond what they can explain.
        why_not = doubt(baseline, fix, speedup)
        standing = UNCONFIRMED if why_not else DID_NOT_HELP
    else:
        standing = DID_NOT_HELP
    note = beyond_suspicion(baseline, fix, speedup) if speedup and standing in (
        RECOMMENDED, DID_NOT_HELP) and verdict.significant else ""
    return replace(judged, standing=standing, speedup=speedup, verdict=verdict, reason=why_not,
                   suspect_note=note)


def failed_check(case: CaseRow) -> bool:
    """Whether the case's check compared its outputs and failed."""
    check = case.check or {}
    return bool(check) and check.get("metric") != "not_compared" and not check.get("passed")


STANDING_ORDER = {RECOMMENDED: 0, UNCONFIRMED: 1, DID_NOT_HELP: 2, FAILS_PARITY: 3, FAILED: 4,
                  NOT_MEASURED: 5}


def stopped_fix(baseline: CaseRow, finished: Sequence[CaseRow], diagnosis: Diagnosis,
                sweep: str) -> FixResult:
    """A fix whose worker was stopped after FINISHED, its cases at other sizes than the
    user's (BASELINE's): not measured at the user's, saying what it finished."""
    first = finished[0]
    sizes = ", ".join(format_size(case.size, sweep) for case in finished)
    return FixResult(first.variant, first.framework, first.device, NOT_MEASURED, None, None,
                     "no check", why_line(first.variant, diagnosis.kind, baseline.profile), None,
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
        parts = [part for part in fix_parts(item.variant) if part not in chosen]
        if parts and not conflicts([*chosen, *parts]):
            chosen += parts
    return chosen


# --- per framework x device ----------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceAdvice:
    """The advice of one framework on one device at the user's batch."""

    framework: str
    device: str
    baseline: CaseRow
    diagnosis: Diagnosis
    fixes: list[FixResult]  # ranked
    combination: list[str]  # the recommended fixes that run together
    combined: FixResult | None  # the combination measured as one cell, where it was
    not_tried: list[NotTried] = field(default_factory=list)  # candidates never measured
    combination_note: str = ""  # why the combination was not measured, where it was not

    @property
    def measured(self) -> int:
        """The fixes judged at the user's batch (not those stopped before it, nor not tried)."""
        return sum(1 for item in self.fixes if item.standing != NOT_MEASURED)

    @property
    def candidates(self) -> int:
        return len(self.fixes) + len(self.not_tried)

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
        if best is not None:
            return best.median_s
        return self.baseline.median_s if self.baseline.samples else None

    def head(self) -> str:
        """'torch on cuda:0: as-written 1.2 ms per step; launch-bound: ...'; 'torch on cpu:
        as-written not measured (...)' where its cell has no samples at this batch."""
        if not self.baseline.samples:  # no diagnosis either: nothing was timed
            return (f"{self.framework} on {self.device}: as-written not measured at this "
                    "batch (the warnings say why)")
        return (f"{self.framework} on {self.device}: as-written "
                f"{format_seconds(self.baseline.median_s)} per step; {self.diagnosis.text}")

    def ranked_lines(self) -> list[str]:
        """The recommended fixes, fastest first, numbered, then the combination."""
        helped = [item for item in self.fixes if item.recommended]
        lines = [f"{number}. {item.line()}" for number, item in enumerate(helped, start=1)]
        if not helped:  # named: the same words under two devices would read as one line
            lines.append(nothing_recommended(
                f"{self.framework} on {self.device}", [item.variant for item in self.fixes
                                                       if item.standing == UNCONFIRMED
                                                       and (item.speedup or 0) > 1],
                self.baseline.suspect, self.measured,
                first_fix_line(self.not_tried, self.fixes) if self.candidates else
                "no candidate fix applies here"))
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


def first_fix_line(not_tried: Sequence[NotTried], fixes: Sequence[FixResult]) -> str:
    """'--budget 430 would measure the first candidate fix, jacobian-forward': the smallest
    budget the record names for a candidate not measured (not tried, or a trial stopped
    before it finished); '' where it names none."""
    named = [(item.needed_s, item.variant) for item in not_tried if item.needed_s]
    named += [(float(match.group(1)), fix.variant) for fix in fixes
              if fix.standing == NOT_MEASURED
              and (match := BUDGET_WOULD.search(fix.reason)) is not None]
    if not named:
        return ""
    # The smallest budget; among equal ones the first in the record's order (the ranking's,
    # else the catalogue's), not the first by name.
    needed, variant = min(named, key=lambda item: item[0])
    return f"--budget {needed:.0f} would measure the first candidate fix, {variant}"


# How a line names the budget that would run a fix ('--budget 400 would run it').
BUDGET_WOULD = re.compile(r"--budget (\d+) would run it")

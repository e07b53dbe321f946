"""Whether a fix measured faster may be recommended: timings to trust, a gap beyond their spread.

The noise rule (harness.analysis.noise) asks that two cases' IQRs and round medians do not
overlap. On a busy machine that is not enough: on issue 49's 2-core VM, with other processes
busy, `harness advise` printed "threads-1: 3.82x faster (beyond the noise ...)" from cells the
workers had marked SUSPECT (contended) and noisy up to 142%; idle, the same command measured
1.13x, within the noise. So a fix that beat the rule is recommended only where

- neither its timing nor its baseline's is SUSPECT (the worker's timing guard: other processes
  on the cores, bimodal calls, a median far from calibration, a throttled GPU): such a time is
  not what the step costs the user, so neither is the ratio of two of them; and
- the gap it claims (the difference of the two medians per step) is larger than the spread of
  either case: its interquartile range and, over rounds, the range of its round medians. Two
  quartile ranges that merely do not touch leave a gap smaller than either spread, which one
  more round can close.

Otherwise the fix is UNCONFIRMED: never recommended, never in the combination, not drawn as
recommended in the report, and its line says why and what to do.

A SUSPECT timing is judged against the effect it shows (issue 64): on the 2-core VM with one
core busy beside it, seed 000's Jacobian measured jacobian-forward 3,271x faster, and it was
"not confirmed", although one busy core of two cannot make a step 3,000x slower. So the
slowdown the recorded contention can explain is bounded (`explainable`: the cores it left,
CORES / (CORES - OTHER), times CONTENTION_MARGIN; a calibration drift or a bimodal split by
its own factor; any other SUSPECT reason by none), and an effect beyond either side's bound
is reported as measured, with the contention stated (`beyond_suspicion`); a smaller one, a
gain or a loss, is not confirmed. Pure computation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Protocol

from harness.analysis.noise import CaseNoise
from harness.core.units import format_ratio

UNCONFIRMED = "not confirmed"
IDLE = "re-run on an idle machine"
MORE_ROUNDS = "re-run with more rounds (--rounds 5) on an idle machine"


class Timed(Protocol):
    """What the judgement reads of a measured case (harness.analysis.casetable.CaseRow)."""

    @property
    def variant(self) -> str: ...

    @property
    def suspect(self) -> str: ...

    @property
    def noise(self) -> CaseNoise | None: ...

    @property
    def other_cores(self) -> float | None: ...

    @property
    def cores(self) -> int | None: ...


def spread_s(noise: CaseNoise) -> float:
    """The wider of a case's IQR and the range of its round medians, in seconds per step."""
    rounds = list(noise.rounds.values())
    between = max(rounds) - min(rounds) if len(rounds) >= 2 else 0.0
    return max(noise.q3 - noise.q1, between)


def first_reason(suspect: str) -> str:
    """The first reason of a SUSPECT text, without its round and the processes it names:
    'other processes used 1.7 of 2 cores' (the whole text is in the warnings)."""
    first = suspect.split("; ")[0]
    if first.startswith("round ") and ": " in first:
        first = first.split(": ", 1)[1]
    return first.split(" (")[0]


# What contention can do to a timing beyond taking cores: a thread pool as wide as the machine
# waits at every parallel region for its descheduled thread (hostload's docstring), so a step
# can lose more than the share of cores taken. 2x that share: one busy core of two explains
# up to 4x, 1.6 of 2 up to 10x (issue 49's 3.82x stays not confirmed there).
CONTENTION_MARGIN = 2.0
# The fewest cores counted as left to the timed step: other processes' average is measured
# beside it, and the step ran too, so it never had none.
LEAST_CORES_LEFT = 0.25
# The SUSPECT reasons the worker's guard writes (harness.measure.timing.suspect_reason,
# harness.run.caserun): contention (bounded by the cores figure), a median that drifted from
# calibration by a factor, two clusters of calls a factor apart.
CONTENDED_TEXTS = ("other processes used", "contended in all", "not timed again: the cores")
USED_CORES = re.compile(r"other processes used (\d+(?:\.\d+)?) of (\d+) cores")
DRIFT = re.compile(r"median per call is (\d+(?:\.\d+)?(?:e[+-]?\d+)?)x what calibration")
BIMODAL = re.compile(r"near (\d+(?:\.\d+)?) (s|ms|us|ns), \d+% near (\d+(?:\.\d+)?) (s|ms|us|ns)")
UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def contention_factor(other_cores: float, cores: int) -> float:
    """The most a timing can be slowed by other processes using OTHER_CORES of CORES cores:
    the cores left to it (CORES / (CORES - OTHER_CORES); 1 busy core of 2: 2x) times
    CONTENTION_MARGIN."""
    left = max(cores - other_cores, LEAST_CORES_LEFT)
    return CONTENTION_MARGIN * max(1.0, cores / left)


def explainable(case: Timed) -> float:
    """The largest factor by which the case's SUSPECT reasons can misstate its step (1.0 where
    it is not SUSPECT; math.inf for a reason with no figure to bound it: a throttled GPU)."""
    factor = 1.0
    for reason in (part for part in case.suspect.split("; ") if part):
        if any(text in reason for text in CONTENDED_TEXTS):
            continue  # bounded below, once, by the most cores any of them names
        drift, split = DRIFT.search(reason), BIMODAL.search(reason)
        if drift is not None:
            factor *= float(drift.group(1))
        elif split is not None:
            low = float(split.group(1)) * UNIT_S[split.group(2)]
            high = float(split.group(3)) * UNIT_S[split.group(4)]
            factor *= max(1.0, high / low) if low > 0 else math.inf
        else:
            return math.inf
    contended = contention_of(case)
    return factor * contended[0] if contended is not None else factor


def contention_of(case: Timed) -> tuple[float, str] | None:
    """(the contention bound, 'other processes used 1.0 of 2 cores') of a SUSPECT case whose
    reasons include contention, from the most cores its text or its record names; None where
    they do not."""
    if not any(text in case.suspect for text in CONTENDED_TEXTS):
        return None
    used = [(float(found.group(1)), int(found.group(2)))
            for found in USED_CORES.finditer(case.suspect)]
    cores = case.cores or max((total for _, total in used), default=0)
    other = max([value for value, _ in used] + [case.other_cores or 0.0])
    if cores < 1:
        return math.inf, "other processes on the cores (how many not recorded)"
    return contention_factor(other, cores), f"other processes used {other:.1f} of {cores} cores"


def beyond_suspicion(baseline: Timed, fix: Timed, speedup: float) -> str:
    """Where either case is SUSPECT and the effect (SPEEDUP or its inverse) is beyond what
    either side's SUSPECT reasons can explain: 'measured on SUSPECT timings (...), which
    explain up to 4x, not 3271x'; '' otherwise (not suspect, or not beyond).

    The larger side's bound, not their product: every reason the guard writes reads a timing
    slower than the step (contention, a median drifted above calibration, a slow cluster of
    calls), so one side's reasons move the ratio one way only, by at most their factor."""
    suspect = [case for case in (baseline, fix) if case.suspect]
    if not suspect or speedup <= 0:
        return ""
    bound = max(explainable(case) for case in suspect)
    effect = max(speedup, 1 / speedup)
    if not effect > bound:
        return ""
    said = []
    for case in suspect:
        contended = contention_of(case)
        said.append(f"{case.variant}: {contended[1] if contended else first_reason(case.suspect)}")
    return (f"measured on SUSPECT timings ({'; '.join(said)}), which explain up to "
            f"{format_ratio(bound)}, not {format_ratio(effect)}")


def doubt(baseline: Timed, fix: Timed, speedup: float | None = None) -> str:
    """Why a fix faster beyond the noise rule is still not to be recommended ('' when it may
    be): a SUSPECT timing on either side whose reasons can explain the SPEEDUP (beyond them,
    `beyond_suspicion`, the timing is trusted), else a spread wider than the gap it claims."""
    suspect = [f"{case.variant}: {first_reason(case.suspect)}" for case in (baseline, fix)
               if case.suspect]
    if suspect and not (speedup and beyond_suspicion(baseline, fix, speedup)):
        bound = max(explainable(case) for case in (baseline, fix) if case.suspect)
        limit = (f": that can explain up to {format_ratio(bound)}" + (
            f", and it measured {format_ratio(max(speedup, 1 / speedup))}" if speedup else "")
            if math.isfinite(bound) else "")
        return f"its timing is SUSPECT ({'; '.join(suspect)}; see the warnings){limit}; {IDLE}"
    if baseline.noise is None or fix.noise is None or not baseline.noise.median:
        return ""
    gap = abs(baseline.noise.median - fix.noise.median)  # a loss claims a gap too
    widest = max((baseline, fix), key=lambda case: spread_s(case.noise) if case.noise else 0.0)
    spread = spread_s(widest.noise) if widest.noise is not None else 0.0
    if spread < gap:
        return ""
    scale = baseline.noise.median
    return (f"noisier than the gap it claims: {widest.variant}'s timings spread over "
            f"{_percent(spread / scale)} of the {baseline.variant} step, the gap is "
            f"{_percent(gap / scale)}; {MORE_ROUNDS}")


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.0f}%"


def unconfirmed_line(variant: str, ratio: str, noise: str, reason: str,
                     slower: bool = False) -> str:
    """'threads-1: 3.82x faster (beyond the noise ...), not confirmed: its timing is SUSPECT
    (...); re-run on an idle machine'; SLOWER: 'compiled: 0.5x, slower here (...), not
    confirmed: ...'."""
    if slower:
        return f"{variant}: {ratio}, slower here ({noise}), not confirmed: {reason}"
    return f"{variant}: {ratio} faster ({noise}), not confirmed: {reason}"


def nothing_recommended(where: str, unconfirmed: Sequence[str], baseline_suspect: str,
                        measured: int = 1, budget_line: str = "") -> str:
    """The line of a device where no fix is recommended: kept as written where MEASURED fixes
    (some) were judged; where none was, that nothing was (BUDGET_LINE: what would measure
    one); where a fix was faster but not confirmed or the as-written timing is SUSPECT, why no
    answer yet."""
    if not measured:
        return (f"no fix measured for {where}: nothing recommended or ruled out"
                + (f"; {budget_line}" if budget_line else ""))
    if unconfirmed:
        return (f"no fix recommended for {where}: {', '.join(unconfirmed)} measured faster "
                f"but not confirmed (below); {MORE_ROUNDS} before changing anything")
    if baseline_suspect:
        return (f"no fix helped {where} beyond the noise with a passing check, but the "
                f"as-written timing is SUSPECT ({first_reason(baseline_suspect)}); {IDLE} "
                "before keeping it as written")
    return (f"no fix helped {where} beyond the noise with a passing check: keep it as "
            "written")

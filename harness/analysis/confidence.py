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
recommended in the report, and its line says why and what to do. Pure computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from harness.analysis.noise import CaseNoise

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


def doubt(baseline: Timed, fix: Timed) -> str:
    """Why a fix faster beyond the noise rule is still not to be recommended ('' when it may
    be): a SUSPECT timing on either side, else a spread wider than the gap it claims."""
    suspect = [f"{case.variant}: {first_reason(case.suspect)}" for case in (baseline, fix)
               if case.suspect]
    if suspect:
        return f"its timing is SUSPECT ({'; '.join(suspect)}; see the warnings); {IDLE}"
    if baseline.noise is None or fix.noise is None or not baseline.noise.median:
        return ""
    gap = baseline.noise.median - fix.noise.median
    widest = max((baseline, fix), key=lambda case: spread_s(case.noise) if case.noise else 0.0)
    spread = spread_s(widest.noise) if widest.noise is not None else 0.0
    if spread < gap:
        return ""
    scale = baseline.noise.median
    return (f"noisier than the gap it claims: {widest.variant}'s timings spread over "
            f"{percent(spread / scale)} of the {baseline.variant} step, the gap is "
            f"{percent(gap / scale)}; {MORE_ROUNDS}")


def percent(fraction: float) -> str:
    return f"{100 * fraction:.0f}%"


def unconfirmed_line(variant: str, ratio: str, noise: str, reason: str) -> str:
    """'threads-1: 3.82x faster (beyond the noise ...), not confirmed: its timing is SUSPECT
    (...); re-run on an idle machine'."""
    return f"{variant}: {ratio} faster ({noise}), not confirmed: {reason}"


def nothing_recommended(where: str, unconfirmed: Sequence[str], baseline_suspect: str) -> str:
    """The line of a device where no fix is recommended: kept as written, or, where a fix was
    faster but not confirmed or the as-written timing is SUSPECT, why no answer yet."""
    if unconfirmed:
        return (f"no fix recommended for {where}: {', '.join(unconfirmed)} measured faster "
                f"but not confirmed (below); {MORE_ROUNDS} before changing anything")
    if baseline_suspect:
        return (f"no fix helped {where} beyond the noise with a passing check, but the "
                f"as-written timing is SUSPECT ({first_reason(baseline_suspect)}); {IDLE} "
                "before keeping it as written")
    return (f"no fix helped {where} beyond the noise with a passing check: keep it as "
            "written")

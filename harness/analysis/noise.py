"""The one rule every verdict goes through: is a gap between two cases beyond the noise?

Two noises, and the gap must beat both:

- within a round: the samples of one worker process. The two cases' interquartile ranges
  (of all their samples) must not overlap, from at least MIN_SAMPLES samples each.
- between rounds: each round is its own worker process, at its own minute (harness.run.rounds).
  The ranges of the two cases' round medians must not overlap either: the slowest round of
  the faster case must still beat the fastest round of the slower one. A drift between rounds
  larger than the gap makes the verdict "within the noise", however tight each round was.

With one round the second noise was not measured, and the verdict says so. `held` counts the
rounds in which the faster case was faster (rounds paired by number: both ran in that round).
The ranking, the fastest cell, the GPU-vs-CPU answer and `harness diff` all call judge_gap.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

MIN_SAMPLES = 3  # below this an IQR says nothing (one sample has an IQR of 0)
# What a verdict of a one-round run adds (the terminal says it once, in its rounds line).
ONE_ROUND = "one round: run-to-run drift not measured"


@dataclass(frozen=True)
class CaseNoise:
    """What the rule needs of one case: median, quartiles, sample count, round medians."""

    median: float
    q1: float
    q3: float
    samples: int
    rounds: Mapping[int, float] = field(default_factory=dict)  # round number -> its median

    @classmethod
    def of(cls, by_round: Mapping[int, Sequence[float]]) -> CaseNoise:
        """From raw samples by round (round number -> that round's samples; one round: {0: all})."""
        values = [float(value) for part in by_round.values() for value in part]
        if len(values) >= 2:
            q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        else:
            q1 = q3 = values[0] if values else float("nan")
        median = statistics.median(values) if values else float("nan")
        return cls(median, q1, q3, len(values),
                   {number: statistics.median(part) for number, part in by_round.items()
                    if part})


@dataclass(frozen=True)
class GapVerdict:
    """Whether B's lead over A (or A's over B) is beyond the noise, and in how many rounds."""

    judged: bool  # enough samples on both sides to say anything
    significant: bool  # beyond both noises (or the within-round one, with one round)
    within_apart: bool  # the IQRs do not overlap
    between_apart: bool | None  # the round-median ranges do not overlap (None: one round)
    held: int  # rounds in which the faster case was faster
    rounds: int  # rounds both cases ran in
    drift: float | None  # the larger spread of round medians, as a fraction of its median

    def phrase(self) -> str:
        """'beyond the noise, held in 3 of 3 rounds', 'within the noise (...)', ..."""
        if not self.judged:
            return f"not judged, < {MIN_SAMPLES} samples"
        if self.rounds < 2:
            verdict = "beyond the noise" if self.significant else "within the noise"
            return f"{verdict} ({ONE_ROUND})"
        held = f"held in {self.held} of {self.rounds} rounds"
        if self.significant:
            return f"beyond the noise, {held}"
        if self.within_apart and not self.between_apart:
            drift = f" of {100 * self.drift:.0f}%" if self.drift is not None else ""
            return f"within the noise: the drift between rounds{drift} covers the gap; {held}"
        return f"within the noise, {held}"

    def short(self) -> str:
        """For a table cell: yes / no / not judged, with the rounds held."""
        if not self.judged:
            return f"not judged (< {MIN_SAMPLES} samples)"
        answer = "yes" if self.significant else "no"
        return answer if self.rounds < 2 else f"{answer} ({self.held}/{self.rounds} rounds)"


def _overlap(low_a: float, high_a: float, low_b: float, high_b: float) -> bool:
    return not (high_a < low_b or high_b < low_a)


def _drift(rounds: Mapping[int, float]) -> float | None:
    values = list(rounds.values())
    if len(values) < 2:
        return None
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else None


def judge_gap(first: CaseNoise, second: CaseNoise) -> GapVerdict:
    """The rule: the gap between two cases must beat the IQRs and the round-median spread."""
    judged = min(first.samples, second.samples) >= MIN_SAMPLES
    within = judged and not _overlap(first.q1, first.q3, second.q1, second.q3)
    shared = sorted(set(first.rounds) & set(second.rounds))
    faster_first = first.median <= second.median
    held = sum((first.rounds[n] < second.rounds[n]) == faster_first for n in shared)
    between: bool | None = None
    if len(shared) >= 2:
        a = [first.rounds[n] for n in shared]
        b = [second.rounds[n] for n in shared]
        between = not _overlap(min(a), max(a), min(b), max(b))
    drifts = [d for d in (_drift(first.rounds), _drift(second.rounds)) if d is not None]
    significant = within and between is not False
    return GapVerdict(judged, bool(significant), bool(within), between, held,
                      max(1, len(shared)), max(drifts) if drifts else None)

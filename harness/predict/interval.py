"""The interval printed beside a predicted GPU step: the validation's measured error (issue 51,
part 6), never tighter than the run's own noise.

Where it comes from: benchmarks/predict_validation.py measured, on a GPU machine, the GPU step
the model predicted from a CPU run against the GPU step measured there (docs/predict.md,
"Validating the model"). Per profile, host choice and regime (the model's: a user's CPU run
has no busy share), the 10th and 90th percentiles of predicted / measured over those cells
give the interval: the measured step lay in [predicted / p90, predicted / p10] in 80% of the
validated cells. The table is derived once from the stored rows of every lending that
validated the profile, pooled (a user rents some host of that kind, and two lendings of one
kind read the same step 14-20% apart), by benchmarks/predictlab/errortable.py, and shipped as
ERRORS_FILE, so a run needs neither the rows nor numpy; a test derives it again from the rows
and holds the two equal. A regime with fewer than MIN_BAND_CELLS validated cells gets no band:
its 10th and 90th percentiles would be two of a handful of cells.

Never tighter than the noise: the CPU step the prediction rests on (its features' host time)
moved between the run's own rounds by the case's round spread (max - min of the round
medians over their median; one round: IQR / median), so the interval is widened to at least
predicted / (1 + spread / 2) .. predicted x (1 + spread / 2) where that is wider. The band is
multiplicative (symmetric in log space), so its low end stays above zero however wide the
spread: a busy VM's spread of 30 (3,000%) once printed "~2.27 ms per step (-36.2-40.7 ms)"
when the band was predicted x (1 -/+ spread / 2).

Too wide to help: where high / low passes WIDE_RATIO (10x), the line says so plainly
(`too_wide`) instead of printing a range that spans an order of magnitude.

None where the table has no cells for that profile (a profile it was not validated on: its
identity must match), host or regime: the line then says the error was not measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

# Beside the profiles, not among them (profiles/*.json are all profiles).
# The validation's zoo trains torch models: its error bands are torch's steps' alone.
VALIDATED_FRAMEWORK = "torch"
ERRORS_FILE = Path(__file__).resolve().parent / "validated" / "errors.json"
ERRORS_KIND = "harness-prediction-errors"
ERRORS_VERSION = 2  # 2: a profile's band pooled over several rows files (sources)
LOW_SHARE, HIGH_SHARE = 0.1, 0.9
MIN_BAND_CELLS = 10
# An interval whose high end is more than this many times its low end says nothing a user can
# act on (a 0.2-20 ms range): the line says it is too wide instead of printing it.
WIDE_RATIO = 10.0


@dataclass(frozen=True)
class ErrorBand:
    """predicted / measured over the validated cells of one profile, host and regime."""

    cells: int
    ratio_low: float  # the 10th percentile of predicted / measured
    ratio_high: float  # the 90th
    source: str  # the rows files it came from


@dataclass(frozen=True)
class Interval:
    """Where the measured step is expected: [low_s, high_s], from the band's [band_low_s,
    band_high_s] held to the case's own spread (noise)."""

    low_s: float
    high_s: float
    band: ErrorBand
    noise: float
    band_low_s: float
    band_high_s: float

    @property
    def widened(self) -> bool:
        """Whether the run's own noise, not the validation, set a bound."""
        return self.low_s < self.band_low_s or self.high_s > self.band_high_s

    @property
    def too_wide(self) -> bool:
        """Whether the range spans more than WIDE_RATIO (or lost its low end): printed as
        too wide to help, never as a range."""
        return not self.low_s > 0 or self.high_s / self.low_s > WIDE_RATIO


@cache
def shipped_errors(path: Path = ERRORS_FILE) -> dict[str, Any]:
    """The shipped table ({} where missing or of a newer version)."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if document.get("kind") != ERRORS_KIND or int(document.get("version", 0)) > ERRORS_VERSION:
        return {}
    return dict(document.get("profiles") or {})


def band_for(profile_name: str, identity: str, host: str, regime: str,
             framework: str = VALIDATED_FRAMEWORK) -> ErrorBand | None:
    """The validated band of PROFILE_NAME (its identity as validated), HOST and REGIME; none
    for another FRAMEWORK's steps than the validation's (torch's)."""
    if framework != VALIDATED_FRAMEWORK:
        return None
    found = shipped_errors().get(profile_name)
    if not found or found.get("identity") != identity:
        return None
    band = (found.get("by_host") or {}).get(host, {}).get(regime)
    if not band or "ratio_low" not in band:
        return None
    return ErrorBand(int(band["cells"]), float(band["ratio_low"]), float(band["ratio_high"]),
                     ", ".join(found.get("sources") or []))


def interval_of(seconds: float, band: ErrorBand, noise: float) -> Interval:
    """The interval of a predicted SECONDS (module docstring)."""
    low_band, high_band = seconds / band.ratio_high, seconds / band.ratio_low
    widening = 1 + max(0.0, noise) / 2  # a factor: the low end divides, never goes below 0
    return Interval(min(low_band, seconds / widening), max(high_band, seconds * widening),
                    band, noise, low_band, high_band)


def why_no_band(profile_name: str, identity: str, host: str, regime: str,
                framework: str = VALIDATED_FRAMEWORK) -> str:
    """Why band_for found none, in a few words for the printed line."""
    if framework != VALIDATED_FRAMEWORK:
        return f"error not measured for {framework} steps"
    found = shipped_errors().get(profile_name)
    if not found:
        return "error not measured for this profile"
    if found.get("identity") != identity:
        return "error measured on another version of this profile"
    cells = int(((found.get("by_host") or {}).get(host, {}).get(regime) or {}).get("cells", 0))
    if cells:
        return f"error measured on {cells} {regime} steps only (a band needs {MIN_BAND_CELLS})"
    return f"error not measured for {regime} steps"

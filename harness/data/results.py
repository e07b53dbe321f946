"""Typed results: one CaseResult per case, one CellResult per cell, statistics in one place.

The worker writes a cell's result as JSON (the only thing that crosses the process boundary);
everything that reads it back (the CLI table, the store's tidy rows, the report) goes through
these classes, so a median, a quartile, an IQR or a noise flag is computed by one function:
`sample_stats`. Unknown keys in the JSON are kept in `extra_fields` so a newer worker's fields
survive a round trip through an older reader.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from harness.spec import Status, worst_status

NOISY_IQR_FRACTION = 0.10


@dataclass(frozen=True)
class SampleStats:
    """Median, quartiles, IQR, min and the noise flag of one list of samples."""

    count: int
    median: float | None
    q1: float | None
    q3: float | None
    minimum: float | None

    @property
    def iqr(self) -> float | None:
        return None if self.q1 is None or self.q3 is None else self.q3 - self.q1

    @property
    def noise(self) -> float | None:
        """IQR / median: the spread as a fraction of the value."""
        if self.iqr is None or not self.median:
            return None
        return self.iqr / self.median

    @property
    def noisy(self) -> bool:
        """IQR/median above 10%, the threshold torch.utils.benchmark warns at."""
        return self.count >= 2 and (self.noise or 0.0) > NOISY_IQR_FRACTION


def sample_stats(samples: list[float]) -> SampleStats:
    """The one place statistics of samples are computed (quartiles: linear interpolation,
    the 'inclusive' method, so 2-3 samples still give a number; pandas' default matches)."""
    values = [float(value) for value in samples if value == value]  # NaN is no sample
    if not values:
        return SampleStats(0, None, None, None, None)
    if len(values) == 1:
        return SampleStats(1, values[0], values[0], values[0], values[0])
    quartiles = statistics.quantiles(values, n=4, method="inclusive")
    return SampleStats(len(values), statistics.median(values), quartiles[0], quartiles[2],
                       min(values))


_CASE_FIELDS = ("case", "status", "reason", "cold_seconds", "samples", "calls_per_sample",
                "check", "suspect", "extra")


@dataclass
class CaseResult:
    """One case of a cell: its parameters, status, raw samples (seconds per call) and check."""

    case: dict[str, Any]
    status: Status = Status.OK
    reason: str = ""
    cold_seconds: float | None = None
    samples: list[float] = field(default_factory=list)
    calls_per_sample: int = 1
    check: dict[str, Any] | None = None
    suspect: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    extra_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def stats(self) -> SampleStats:
        return sample_stats(self.samples)

    @property
    def measured(self) -> bool:
        return self.cold_seconds is not None

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> CaseResult:
        known = {key: document[key] for key in _CASE_FIELDS if key in document}
        known["status"] = Status(known.get("status", Status.OK.value))
        known["reason"] = known.get("reason") or ""
        known["suspect"] = known.get("suspect") or ""
        known["extra"] = known.get("extra") or {}
        known["samples"] = list(known.get("samples") or [])
        rest = {key: value for key, value in document.items() if key not in _CASE_FIELDS}
        return cls(**known, extra_fields=rest)

    def to_dict(self) -> dict[str, Any]:
        document = {"case": self.case, "status": self.status.value, "reason": self.reason}
        if self.measured:
            document.update(cold_seconds=self.cold_seconds, samples=self.samples,
                            calls_per_sample=self.calls_per_sample, check=self.check,
                            suspect=self.suspect, extra=self.extra)
        return {**document, **self.extra_fields}


_CELL_FIELDS = ("cell", "status", "reason", "framework_version", "device_name", "cases")


@dataclass
class CellResult:
    """One (workload, variant, framework, device) cell: status, reason, environment, cases."""

    cell: dict[str, Any]
    status: Status = Status.OK
    reason: str = ""
    framework_version: str | None = None
    device_name: str | None = None
    cases: list[CaseResult] = field(default_factory=list)
    extra_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def workload(self) -> str:
        return str(self.cell.get("workload", ""))

    @property
    def variant(self) -> str:
        return str(self.cell.get("variant", ""))

    @property
    def framework(self) -> str:
        return str(self.cell.get("framework", ""))

    @property
    def device(self) -> str:
        return str(self.cell.get("device", ""))

    @property
    def stopped_short(self) -> bool:
        """The cell's status says more than its cases do (it timed out, crashed, stopped)."""
        return self.status not in {case.status for case in self.cases}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> CellResult:
        return cls(
            cell=dict(document.get("cell") or {}),
            status=Status(document.get("status", Status.OK.value)),
            reason=document.get("reason") or "",
            framework_version=document.get("framework_version"),
            device_name=document.get("device_name"),
            cases=[CaseResult.from_dict(case) for case in document.get("cases") or []],
            extra_fields={key: value for key, value in document.items()
                          if key not in _CELL_FIELDS},
        )

    def to_dict(self) -> dict[str, Any]:
        return {"cell": self.cell, "status": self.status.value, "reason": self.reason,
                "framework_version": self.framework_version, "device_name": self.device_name,
                "cases": [case.to_dict() for case in self.cases], **self.extra_fields}

    def finished_status(self) -> Status:
        """The worst status among the cases (ok when there are none)."""
        return worst_status([case.status for case in self.cases])

"""Derived numbers of one case: median, IQR, min, noise flag, throughput. Raw samples stay raw."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from harness.plausibility import judge_case
from harness.spec import WorkloadSpec
from harness.timing import iqr, is_noisy


@dataclass(frozen=True)
class CaseSummary:
    """One row of the CLI's final table."""

    variant: str
    framework: str
    device: str
    size: Any
    status: str
    reason: str
    cold_s: float | None
    median_s: float | None
    iqr_s: float | None
    min_s: float | None
    samples: int
    noisy: bool
    gflops: float | None
    gbps: float | None
    check: str
    suspect: str = ""
    # Peak host RSS of the cell's worker (whole cell) and device memory of this case.
    peak_host_bytes: int | None = None
    peak_device_bytes: int | None = None


def work_of(spec: WorkloadSpec, case: dict[str, Any]) -> dict[str, float]:
    """FLOPs and bytes one call of this case must do, per the spec (None: does not apply)."""
    work: dict[str, float] = {}
    for key, count_of in (("flops", spec.flops), ("bytes", spec.bytes_moved)):
        count = count_of(case) if count_of is not None else None
        if count is not None:  # e.g. a bare copy has no FLOPs: show no FLOP rate, not 0
            work[key] = float(count)
    return work


def _check_text(check: dict[str, Any] | None) -> str:
    if not check:
        return ""
    verdict = "pass" if check["passed"] else "FAIL"
    return f"{verdict} {check['metric']}={check['value']:.2g}"


def summarize_case(spec: WorkloadSpec, result: dict[str, Any], case: dict[str, Any]) -> CaseSummary:
    cell = result["cell"]
    samples = case.get("samples") or []
    median = statistics.median(samples) if samples else None
    work = work_of(spec, case["case"]) if median else {}
    return CaseSummary(
        variant=cell["variant"], framework=cell["framework"], device=cell["device"],
        size=case["case"].get(spec.sweep), status=case["status"], reason=case["reason"],
        cold_s=case.get("cold_seconds"), median_s=median,
        iqr_s=iqr(samples) if samples else None, min_s=min(samples) if samples else None,
        samples=len(samples), noisy=is_noisy(samples),
        gflops=work["flops"] / median / 1e9 if "flops" in work else None,
        gbps=work["bytes"] / median / 1e9 if "bytes" in work else None,
        check=_check_text(case.get("check")),
        suspect=case.get("suspect") or "",
        peak_host_bytes=result.get("peak_host_memory_bytes"),
        peak_device_bytes=case.get("peak_device_reserved_bytes")
        or case.get("peak_device_allocated_bytes"),
    )


def summarize_result(spec: WorkloadSpec, result: dict[str, Any]) -> list[CaseSummary]:
    """One summary per case, plus a status-only row when the cell stopped short."""
    summaries = [summarize_case(spec, result, case) for case in result.get("cases") or []]
    if result["status"] not in {s.status for s in summaries}:
        cell = result["cell"]
        summaries.append(CaseSummary(
            cell["variant"], cell["framework"], cell["device"], None, result["status"],
            result["reason"], None, None, None, None, 0, False, None, None, "",
        ))
    return summaries


def implausibility(summary: CaseSummary, ceilings: dict[str, Any] | None,
                   bandwidth_key: str = "bandwidth_gbps") -> str:
    """The CLI's flag for a case: IMPLAUSIBLE above physics, a note when the probe was low."""
    device_ceilings = {summary.device: ceilings} if ceilings else None
    verdicts = judge_case(summary.gflops, summary.gbps, summary.variant, summary.device,
                          device_ceilings, bandwidth_key)
    return "; ".join(text for text in (verdict.text() for verdict in verdicts) if text)

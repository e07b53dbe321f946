"""One place that decides whether a rate is plausible, for the CLI table and the report alike.

Two limits per rate, read from the run's ceilings record (harness.data.ceilings; see
harness/measure/ceilings.py for how each is measured):
- the probe: the best this machine's own matmul/copy reached. A result above it by more than
  PROBE_MARGIN means the probe was low (a probe is a sample, not a law): the result becomes the
  ceiling and the report says so;
- the physical bound: cores x SIMD x clock on a CPU, the best probe with a margin on a GPU.
  Above it a result is IMPLAUSIBLE: the data stayed in cache, a compiler folded the work so the
  counted FLOPs or bytes never happened, or the clock missed the work.
Older run folders have probes only; then the probe with PROBE_MARGIN is the bound, as before.
Without a probe (`--no-ceilings`), the bound is the machine's own (harness.measure.bounds: a
CPU's cores x clock x FLOP/cycle, a GPU's datasheet, a remembered probe): a rate above it is
IMPLAUSIBLE and the verdict names that bound; a rate under it is "unknown", since a bound
nobody measured is no ceiling to be a share of.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.data.ceilings import MEMORY, Bound, Ceilings, DeviceCeiling
from harness.measure.bounds import HostFacts, physical_bound

# A simple kernel's best case (one large matmul, a 1:1 copy) can be edged past by a few percent
# by other kernels (3 reads per write beat a copy).
PROBE_MARGIN = 1.10
REDUCED_PRECISION_MARKERS = ("tf32", "bf16", "fp16", "half", "int8", "fp8")


@dataclass(frozen=True)
class RateVerdict:
    """A rate judged against its device's probe and physical bound."""

    metric: str  # "GFLOP/s" or "GB/s"
    rate: float
    probe: float | None
    bound: float | None
    kind: str  # "ok", "probe-low", "implausible" or "unknown" (no probe to be a share of)
    how: str = ""  # the bound's own sentence ("this CPU's theoretical peak ..."), if it has one

    @property
    def implausible(self) -> bool:
        return self.kind == "implausible"

    def text(self) -> str:
        if self.kind == "implausible" and self.probe is None:
            bound = self.how or f"the physical bound {self.bound:,.3g} {self.metric}"
            return f"IMPLAUSIBLE: {self.rate:,.3g} {self.metric} above {bound}; no probe ran"
        if self.kind == "implausible":
            return (f"IMPLAUSIBLE: {self.rate:,.3g} {self.metric} > physical bound "
                    f"{self.bound:,.3g} (measured probe {self.probe:,.3g})")
        if self.kind == "probe-low":
            return (f"above the probe ({self.probe:,.3g} {self.metric}): the probe was low, "
                    "this result is the ceiling")
        return ""


def precision_of(variant: str, declared: Mapping[str, str] | None = None) -> str:
    """A variant's arithmetic precision: as its workload declared it (the variant_precision
    hint), else what its name implies (fp32 unless it names another)."""
    if declared and variant in declared:
        return declared[variant]
    name = str(variant).lower()
    return next((marker for marker in REDUCED_PRECISION_MARKERS if marker in name), "fp32")


def device_entry(ceilings: Ceilings | None, device: str) -> DeviceCeiling | None:
    """A device's ceilings ('cuda:0' falls back to 'cuda', then 'gpu'); None when none."""
    return ceilings.for_device(device) if ceilings else None


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


def _with_margin(probe: float | None, bound: float | None) -> tuple[float | None, float | None]:
    """(probe, bound); runs from before bounds: the probe with PROBE_MARGIN is the bound."""
    return probe, bound or (probe * PROBE_MARGIN if probe else None)


def flop_limits(entry: DeviceCeiling | None, precision: str
                ) -> tuple[float | None, float | None]:
    """(probe, bound) for a FLOP rate at a precision; a precision without a probe has none."""
    if entry is None:
        return None, None
    bound = entry.physical.gflops.get(precision) if entry.physical else None
    return _with_margin(_positive(entry.gflops(precision)), _positive(bound))


def bandwidth_limits(entry: DeviceCeiling | None, link: str
                     ) -> tuple[float | None, float | None]:
    """(probe, bound) for a byte rate held to the ceiling of `link` (MEMORY, HOST_LINK)."""
    if entry is None:
        return None, None
    bound = entry.physical.gbps.get(link) if entry.physical else None
    return _with_margin(_positive(entry.gbps(link)), _positive(bound))


def judge(rate: float, metric: str, probe: float | None, bound: float | None,
          how: str = "") -> RateVerdict:
    if probe is None and bound is None:
        return RateVerdict(metric, rate, probe, bound, "unknown", how)
    if bound is not None and rate > bound:
        return RateVerdict(metric, rate, probe, bound, "implausible", how)
    if probe is None:  # under a bound nobody measured: nothing to call it a share of
        return RateVerdict(metric, rate, probe, bound, "unknown", how)
    if rate > probe * PROBE_MARGIN:
        return RateVerdict(metric, rate, probe, bound, "probe-low", how)
    return RateVerdict(metric, rate, probe, bound, "ok", how)


def bound_how(entry: DeviceCeiling | None, key: str) -> str:
    """The sentence an entry's physical bound for `key` (a precision, a link) came with."""
    return entry.physical.how.get(key, "") if entry and entry.physical else ""


def limits_with_fallback(limits: tuple[float | None, float | None], how: str, key: str,
                         fallback: Bound | None) -> tuple[float | None, float | None, str]:
    """(probe, bound, how): the ceilings' own, else the machine's bound for `key` (a precision
    or a ceiling key) where the ceilings have neither a probe nor a bound for it."""
    if limits != (None, None) or fallback is None:
        return (*limits, how)
    rate = fallback.rate(key)
    return None, rate, fallback.how.get(key, "") if rate is not None else ""


def judge_case(gflops: float | None, gbps: float | None, variant: str, device: str,
               ceilings: Ceilings | None, bandwidth_key: str = MEMORY,
               precisions: Mapping[str, str] | None = None,
               host_facts: HostFacts | None = None) -> list[RateVerdict]:
    """Every rate a case has, judged; the report and the CLI both call this.

    host_facts: the machine that ran the case. Where the ceilings hold nothing for a rate
    (`--no-ceilings`), its bound (harness.measure.bounds.physical_bound) judges it. Never
    taken from the machine this runs on by default: a report may be drawn on another one.
    """
    entry = device_entry(ceilings, device)
    fallback = physical_bound(device, host_facts) if host_facts is not None else None
    verdicts = []
    if gflops is not None and gflops == gflops:  # NaN is no rate
        precision = precision_of(variant, precisions)
        verdicts.append(judge(gflops, "GFLOP/s", *limits_with_fallback(
            flop_limits(entry, precision), bound_how(entry, precision), precision, fallback)))
    if gbps is not None and gbps == gbps:
        verdicts.append(judge(gbps, "GB/s", *limits_with_fallback(
            bandwidth_limits(entry, bandwidth_key), bound_how(entry, bandwidth_key),
            bandwidth_key, fallback)))
    return verdicts

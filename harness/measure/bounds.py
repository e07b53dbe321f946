"""Physical bounds without a probe: rates no honest result can pass, from the machine itself.

Why: with the ceilings skipped (`--no-ceilings`, as the default demo runs) nothing judged the
rates, and a GFLOP/s 3x too high went unflagged. A bound needs no measurement:
- CPU: usable cores x clock x fp32 FLOP/cycle per core from the SIMD flags. A theoretical
  peak, taken generously (two FMA units per core, the highest clock any source reports);
- GPU: the vendor datasheet's peak for the name nvidia-smi reports (dense tensor figures, the
  boost clock); a GPU not in the table gets no bound;
- and, where this machine remembers an earlier probe (harness.measure.ceilings), its bound.
Such a bound only ever flags IMPLAUSIBLE: it is not a measured ceiling, and no "% of peak" is
computed from it (harness.analysis.plausibility judges a rate under it as "unknown").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.core.units import device_kind
from harness.data.ceilings import HOST_LINK, MEMORY, Bound, Ceilings, DeviceCeiling
from harness.measure import ceilings, envinfo

CPUINFO = Path("/proc/cpuinfo")
CPUFREQ_MAX = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
# A VM reports its base clock only, and acpi-cpufreq a non-boost maximum, so a real all-core
# turbo can exceed every figure read here: the clock is at least this (as envinfo's bound).
ASSUMED_MAX_GHZ = envinfo.ASSUMED_MAX_GHZ
# Two FMA (or add + multiply) units per core: the most any x86 or Arm core has, so it errs high.
SIMD_UNITS = 2
# Neoverse V1/V2 and Apple cores issue four 128-bit NEON FMAs per cycle.
NEON_UNITS = 4
# bf16/fp16 on a CPU: at most twice the fp32 lanes (AVX512-BF16, AVX512-FP16, Arm BF16 dot
# products); Intel AMX tiles multiply it by 16 over AVX-512's fp32 rate (1024 bf16 FMAs/cycle).
HALF_FACTOR = 2
AMX_FACTOR = 32


@dataclass(frozen=True)
class HostFacts:
    """What a bound is made of, read once from a machine (or built by a test)."""

    cores: int
    cpu_flags: frozenset[str] = frozenset()
    clocks_ghz: Mapping[str, float] = field(default_factory=dict)  # source -> GHz
    gpus: tuple[str, ...] = ()  # names as nvidia-smi reports them, in CUDA index order
    remembered: Mapping[str, DeviceCeiling] = field(default_factory=dict)  # device -> probe

    @classmethod
    def from_machine(cls, cpuinfo: Path = CPUINFO, cpufreq_max: Path = CPUFREQ_MAX,
                     with_remembered: bool = True, cache: Path | None = None) -> HostFacts:
        """This machine: /proc/cpuinfo, cpufreq's maximum, the usable cores, the visible GPUs
        and (with_remembered) each device's best earlier probe from the ceilings cache (in
        the run's cache folder CACHE; None: ceilings.cache_dir())."""
        text = _read(cpuinfo)
        clocks = {**cpuinfo_clocks(text), **cpufreq_clock(cpufreq_max)}
        gpus = tuple(envinfo.visible_gpus())
        devices = ["cpu", *(f"cuda:{index}" for index in range(len(gpus)))]
        known = {device: ceilings.recall(device, folder=cache).figures for device in devices} \
            if with_remembered else {}
        return cls(cores=envinfo.usable_cores(), cpu_flags=cpu_flags(text), clocks_ghz=clocks,
                   gpus=gpus,
                   remembered={device: figures for device, figures in known.items()
                               if figures is not None})


def physical_bound(device: str, host_facts: HostFacts) -> Bound | None:
    """The bound for `device` ("cpu", "cuda:1") on the machine the facts describe; None when
    neither a theoretical figure nor a remembered probe exists for it."""
    kind = device_kind(device)
    if kind == "cpu":
        theoretical = cpu_bound(host_facts)
    elif kind == "gpu":
        name = gpu_name(device, host_facts.gpus)
        theoretical = gpu_bound(name) if name else None
    else:
        theoretical = None
    earlier = host_facts.remembered.get(device)
    remembered = remembered_bound(device, earlier) if earlier else None
    return merged(theoretical, remembered)


def unprobed_ceilings(devices: list[str], host_facts: HostFacts | None = None,
                      cache: Path | None = None) -> Ceilings:
    """Ceilings entries holding only the bound, for a run whose ceilings were not measured
    (`--no-ceilings`), so every reader of the ceilings (CLI table, report) judges against it
    and none takes it for a measurement; a device without a bound has no entry. Computed where
    the cells run. CACHE: the run's cache folder, where the machine's remembered probes are."""
    facts = host_facts or HostFacts.from_machine(cache=cache)
    found = {device: physical_bound(device, facts) for device in devices}
    return Ceilings({device: DeviceCeiling(device, physical=bound, theoretical_only=True)
                     for device, bound in found.items() if bound})


# --- CPU: cores x clock x FLOP/cycle -------------------------------------------------------------

def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def cpu_flags(cpuinfo_text: str) -> frozenset[str]:
    """The first processor's feature flags: x86 "flags", Arm "Features"."""
    for line in cpuinfo_text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpuinfo_clocks(cpuinfo_text: str) -> dict[str, float]:
    """The fastest "cpu MHz" /proc/cpuinfo reports, in GHz ({} when it reports none: Arm)."""
    mhz = [float(match) for match in
           re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", cpuinfo_text, flags=re.MULTILINE)]
    return {"/proc/cpuinfo cpu MHz": max(mhz) / 1000} if mhz else {}


def cpufreq_clock(path: Path = CPUFREQ_MAX) -> dict[str, float]:
    """cpufreq's cpuinfo_max_freq (kHz) in GHz; {} where the kernel exposes none (most VMs)."""
    text = _read(path).strip()
    return {"cpufreq max": int(text) / 1e6} if text.isdigit() and int(text) > 0 else {}


def fp32_flops_per_cycle(flags: frozenset[str]) -> tuple[int, str] | None:
    """(fp32 FLOPs one core can retire per cycle, the instruction set that sets it).

    x86: lanes (AVX-512 16, AVX 8, SSE 4) x 2 for a fused multiply-add x SIMD_UNITS:
    AVX-512 64, AVX2+FMA 32, AVX 16, SSE 8. Arm: SVE as 2 x 512-bit units (64), NEON as four
    128-bit units (32). Upper bounds: the widest units any core of that family has. None for
    a matrix unit whose rate no flag tells (Arm SME).
    """
    if "sme" in flags:
        return None
    if "sve" in flags or "sve2" in flags:
        return 2 * 16 * 2, "sve"
    if "asimd" in flags:
        return NEON_UNITS * 4 * 2, "neon"
    fused = "avx512f" in flags or "fma" in flags
    lanes, isa = next(((count, name) for name, count in
                       (("avx512f", 16), ("avx2", 8), ("avx", 8), ("sse", 4)) if name in flags),
                      (1, "scalar"))
    label = isa + ("+fma" if fused and isa != "avx512f" else "")
    return lanes * (2 if fused else 1) * SIMD_UNITS, label


def clock_ghz(facts: HostFacts) -> tuple[float, str]:
    """The highest clock any source reports, at least ASSUMED_MAX_GHZ; and the readings."""
    readings = {**facts.clocks_ghz, "assumed all-core turbo": ASSUMED_MAX_GHZ}
    said = ", ".join(f"{name} {ghz:.3g} GHz" for name, ghz in readings.items())
    return max(readings.values()), f"the highest of {said}"


def cpu_bound(facts: HostFacts) -> Bound | None:
    """This CPU's theoretical peak as a bound (fp32, tf32 = fp32 on a CPU, bf16/fp16 scaled).

    None without the CPU's flags (no /proc/cpuinfo: macOS, whose BLAS runs on a matrix unit
    no flag names): a guessed width could flag an honest result.
    """
    found = fp32_flops_per_cycle(facts.cpu_flags) if facts.cpu_flags else None
    if facts.cores < 1 or found is None:
        return None
    per_cycle, isa = found
    ghz, clock_source = clock_ghz(facts)
    fp32 = facts.cores * ghz * per_cycle
    half = AMX_FACTOR if "amx_bf16" in facts.cpu_flags else HALF_FACTOR
    sentence = (f"this CPU's theoretical peak {facts.cores} cores x {ghz:.3g} GHz x "
                f"{per_cycle} FLOP/cycle ({isa}) = {fp32:,.0f} GFLOP/s (clock: {clock_source})")
    half_sentence = sentence.replace(" GFLOP/s (", f" GFLOP/s fp32, x {half} for 16-bit (")
    return Bound(gflops={"fp32": fp32, "tf32": fp32, "bf16": fp32 * half,
                                "fp16": fp32 * half, "half": fp32 * half},
                 how={"fp32": sentence, "tf32": sentence + "; tf32 runs as fp32 on a CPU",
                      "bf16": half_sentence, "fp16": half_sentence, "half": half_sentence})


# --- GPU: the datasheet --------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuSheet:
    """Vendor datasheet peaks, dense (no sparsity), at the boost clock: TFLOP/s and GB/s."""

    name: str
    fp32: float
    tf32: float  # = fp32 where the GPU has no TF32 tensor cores (fp32 math then)
    bf16: float  # bf16 with fp32 accumulate; the fp16 tensor figure where bf16 is emulated
    fp16: float  # fp16 tensor, fp16 accumulate where that is faster (GeForce)
    memory_gbps: float
    host_link_gbps: float  # the host link, one direction (PCIe gen x lanes, NVLink-C2C)


PCIE3, PCIE4, PCIE5 = 15.75, 31.5, 63.0  # x16, one direction, GB/s
# Matched in order, first hit wins: each entry's tokens must all be in the reported name
# (lowercase, split at spaces and dashes), so "h100 pcie" is tried before plain "h100".
GPU_SHEETS: tuple[tuple[tuple[str, ...], GpuSheet], ...] = (
    (("gh200",), GpuSheet("NVIDIA GH200", 67.0, 494.7, 989.4, 989.4, 4900.0, 450.0)),
    (("h200", "nvl"), GpuSheet("NVIDIA H200 NVL", 60.0, 417.5, 835.5, 835.5, 4800.0, PCIE5)),
    (("h200",), GpuSheet("NVIDIA H200 SXM", 67.0, 494.7, 989.4, 989.4, 4800.0, PCIE5)),
    (("h100", "nvl"), GpuSheet("NVIDIA H100 NVL", 60.0, 417.5, 835.5, 835.5, 3900.0, PCIE5)),
    (("h100", "pcie"), GpuSheet("NVIDIA H100 PCIe", 51.2, 378.0, 756.0, 756.0, 2000.0, PCIE5)),
    (("h100",), GpuSheet("NVIDIA H100 SXM", 67.0, 494.7, 989.4, 989.4, 3350.0, PCIE5)),
    (("a100", "80gb", "pcie"),
     GpuSheet("NVIDIA A100 80GB PCIe", 19.5, 156.0, 312.0, 312.0, 1935.0, PCIE4)),
    (("a100", "80gb"), GpuSheet("NVIDIA A100 80GB SXM", 19.5, 156.0, 312.0, 312.0, 2039.0,
                                PCIE4)),
    (("a100",), GpuSheet("NVIDIA A100 40GB", 19.5, 156.0, 312.0, 312.0, 1555.0, PCIE4)),
    (("v100s",), GpuSheet("NVIDIA V100S PCIe", 16.4, 16.4, 130.0, 130.0, 1134.0, PCIE3)),
    (("v100", "pcie"), GpuSheet("NVIDIA V100 PCIe", 14.0, 14.0, 112.0, 112.0, 900.0, PCIE3)),
    (("v100",), GpuSheet("NVIDIA V100 SXM2", 15.7, 15.7, 125.0, 125.0, 900.0, PCIE3)),
    (("t4",), GpuSheet("NVIDIA T4", 8.1, 8.1, 65.0, 65.0, 320.0, PCIE3)),
    (("l40s",), GpuSheet("NVIDIA L40S", 91.6, 183.0, 362.05, 362.05, 864.0, PCIE4)),
    (("l40",), GpuSheet("NVIDIA L40", 90.5, 90.5, 181.05, 181.05, 864.0, PCIE4)),
    (("l4",), GpuSheet("NVIDIA L4", 30.3, 60.0, 121.0, 121.0, 300.0, PCIE4)),
    # The A10G's tensor rate is below the A10's: held to the A10's, which errs high.
    (("a10g",), GpuSheet("NVIDIA A10G", 31.2, 62.5, 125.0, 125.0, 600.0, PCIE4)),
    (("a10",), GpuSheet("NVIDIA A10", 31.2, 62.5, 125.0, 125.0, 600.0, PCIE4)),
    (("rtx", "4090"), GpuSheet("NVIDIA GeForce RTX 4090", 82.6, 82.6, 165.2, 330.3, 1008.0,
                               PCIE4)),
    (("rtx", "4080"), GpuSheet("NVIDIA GeForce RTX 4080", 48.7, 48.7, 97.5, 194.9, 716.8,
                               PCIE4)),
    (("rtx", "4060"), GpuSheet("NVIDIA GeForce RTX 4060", 15.1, 15.1, 30.2, 60.5, 272.0,
                               PCIE4 / 2)),  # x8 link
    (("rtx", "3090"), GpuSheet("NVIDIA GeForce RTX 3090", 35.6, 35.6, 71.0, 142.0, 936.0,
                               PCIE4)),
)


def gpu_sheet(name: str) -> GpuSheet | None:
    """The datasheet row for a name as nvidia-smi reports it ("NVIDIA H100 PCIe"); None if
    the GPU is not in the table."""
    tokens = set(re.split(r"[\s\-_/]+", name.lower()))
    return next((sheet for needed, sheet in GPU_SHEETS if set(needed) <= tokens), None)


def gpu_name(device: str, gpus: tuple[str, ...]) -> str | None:
    """The reported name of a GPU device ("cuda:1" is the second visible GPU; "cuda" the first)."""
    index_text = device.partition(":")[2] or "0"
    index = int(index_text) if index_text.isdigit() else -1
    return gpus[index] if 0 <= index < len(gpus) else None


def gpu_bound(name: str) -> Bound | None:
    """The datasheet peaks of the named GPU as a bound; None for a GPU not in the table."""
    sheet = gpu_sheet(name)
    if sheet is None:
        return None
    where = f"the {sheet.name} datasheet's theoretical peak"
    gflops = {precision: getattr(sheet, precision) * 1000
              for precision in ("fp32", "tf32", "bf16", "fp16")}
    gflops["half"] = gflops["fp16"]
    # Both directions of the link: an overlapped copy moves bytes in and out at once.
    link = 2 * sheet.host_link_gbps
    how = {precision: f"{where} {precision} {rate:,.0f} GFLOP/s (dense)"
           for precision, rate in gflops.items()}
    how[MEMORY] = f"{where} memory bandwidth {sheet.memory_gbps:,.0f} GB/s"
    how[HOST_LINK] = (f"{where} host link {sheet.host_link_gbps:,.4g} GB/s each way, "
                      f"{link:,.4g} GB/s both ways")
    return Bound(gflops=gflops, gbps={MEMORY: sheet.memory_gbps, HOST_LINK: link}, how=how)


# --- remembered probes, and the larger of two bounds ---------------------------------------------

def remembered_bound(device: str, figures: DeviceCeiling) -> Bound | None:
    """The bound harness.measure.ceilings sets from this machine's best earlier probe."""
    physical = ceilings.with_bounds(replace(figures, device=device)).physical or Bound()
    said = {key: f"this machine's remembered probe bound {rate:,.0f} "
                 f"{'GFLOP/s' if key in physical.gflops else 'GB/s'} "
                 f"({physical.how.get(key, 'best probe')})"
            for key, rate in {**physical.gflops, **physical.gbps}.items()}
    return Bound(physical.gflops, physical.gbps, said) if physical else None


def merged(first: Bound | None, second: Bound | None) -> Bound | None:
    """Per figure the larger bound, with its own sentence: a bound must never flag an honest
    result, and the larger of two upper bounds is still one."""
    if first is None or second is None:
        return first or second
    gflops, gbps, how = dict(first.gflops), dict(first.gbps), dict(first.how)
    for mine, theirs in ((gflops, second.gflops), (gbps, second.gbps)):
        for key, rate in theirs.items():
            if rate > mine.get(key, 0.0):
                mine[key], how[key] = rate, second.how.get(key, "")
    return Bound(gflops, gbps, how)


def this_machine_text() -> str:
    """One line per device of this machine's bounds, for `python -m harness.measure.bounds`."""
    facts = HostFacts.from_machine()
    devices = ["cpu", *(f"cuda:{index}" for index in range(len(facts.gpus)))]
    lines = []
    for device in devices:
        bound = physical_bound(device, facts)
        lines.append(f"{device}: " + (bound.how.get("fp32", "no fp32 bound") if bound
                                      else "no bound"))
    return "\n".join(lines)


if __name__ == "__main__":
    print(this_machine_text())

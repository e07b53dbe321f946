"""Plausibility without a probe: a bound from the machine itself (harness.measure.bounds).

Why: with the ceilings skipped (`--no-ceilings`, the default demo) nothing judged the rates,
and a GFLOP/s 3x too high went unflagged. The bound is a CPU's theoretical peak (cores x clock
x FLOP/cycle from its flags), a GPU's datasheet, or the machine's remembered probe; it only
flags IMPLAUSIBLE, and says which bound it used.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.plausibility import judge, judge_case
from harness.analysis.stats import implausibility
from harness.data.ceilings import MEMORY, Ceilings, DeviceCeiling, Peaks
from harness.measure import bounds, envinfo
from harness.measure.bounds import HostFacts, physical_bound
from tests.synthetic_runs import rated_row

EPYC_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
cpu MHz\t\t: 2450.000
flags\t\t: fpu vme de pse tsc msr sse sse2 ht syscall nx pni ssse3 fma cx16 sse4_1 sse4_2 \
avx f16c avx2 bmi2 sha_ni

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
cpu MHz\t\t: 3012.345
flags\t\t: fpu vme de pse tsc msr sse sse2 ht syscall nx pni ssse3 fma cx16 sse4_1 sse4_2 \
avx f16c avx2 bmi2 sha_ni
"""

ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm \
lrcpc dcpop sha3 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp \
sve2 bf16 i8mm
CPU implementer\t: 0x41
"""


def facts(flags: str = "sse sse2 avx avx2 fma", cores: int = 2,
          clocks: dict[str, float] | None = None, gpus: tuple[str, ...] = (),
          remembered: dict[str, DeviceCeiling] | None = None) -> HostFacts:
    return HostFacts(cores=cores, cpu_flags=frozenset(flags.split()),
                     clocks_ghz=clocks or {}, gpus=gpus, remembered=remembered or {})


# --- reading the machine ----------------------------------------------------------------------

def test_flags_and_clocks_from_a_sample_cpuinfo() -> None:
    flags = bounds.cpu_flags(EPYC_CPUINFO)
    assert {"avx2", "fma", "sse2"} <= flags and "avx512f" not in flags
    # The fastest core's reported clock, in GHz.
    assert bounds.cpuinfo_clocks(EPYC_CPUINFO) == {"/proc/cpuinfo cpu MHz": 3.012345}
    arm = bounds.cpu_flags(ARM_CPUINFO)
    assert {"asimd", "sve", "bf16"} <= arm
    assert bounds.cpuinfo_clocks(ARM_CPUINFO) == {}  # Arm reports no "cpu MHz"


def test_cpufreq_maximum_is_read_in_khz(tmp_path: Path) -> None:
    path = tmp_path / "cpuinfo_max_freq"
    path.write_text("3500000\n")
    assert bounds.cpufreq_clock(path) == {"cpufreq max": 3.5}
    assert bounds.cpufreq_clock(tmp_path / "absent") == {}


def test_host_facts_from_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cpuinfo, cpufreq = tmp_path / "cpuinfo", tmp_path / "cpuinfo_max_freq"
    cpuinfo.write_text(EPYC_CPUINFO)
    cpufreq.write_text("4100000\n")
    monkeypatch.setattr(envinfo, "usable_cores", lambda: 3)
    monkeypatch.setattr(envinfo, "visible_gpus", lambda: ["NVIDIA L4"])
    found = HostFacts.from_machine(cpuinfo, cpufreq, with_remembered=False)
    assert found.cores == 3 and "avx2" in found.cpu_flags and found.gpus == ("NVIDIA L4",)
    assert found.clocks_ghz == {"/proc/cpuinfo cpu MHz": 3.012345, "cpufreq max": 4.1}


@pytest.mark.parametrize("flags, per_cycle, isa", [
    ("sse sse2 avx avx2 fma avx512f avx512dq", 64, "avx512f"),
    ("sse sse2 avx avx2 fma", 32, "avx2+fma"),
    ("sse sse2 avx avx2", 16, "avx2"),  # a VM that hides FMA
    ("sse sse2 avx", 16, "avx"),
    ("sse sse2", 8, "sse"),
    ("fpu", 2, "scalar"),
    ("fp asimd", 32, "neon"),
    ("fp asimd sve", 64, "sve"),
])
def test_flops_per_cycle_from_the_flags(flags: str, per_cycle: int, isa: str) -> None:
    assert bounds.fp32_flops_per_cycle(frozenset(flags.split())) == (per_cycle, isa)


def test_a_matrix_unit_no_flag_measures_gets_no_cpu_bound() -> None:
    assert bounds.fp32_flops_per_cycle(frozenset({"asimd", "sve", "sme"})) is None
    assert physical_bound("cpu", facts("fp asimd sve sme")) is None


def test_no_flags_no_cpu_bound() -> None:
    """Without /proc/cpuinfo (macOS) a guessed SIMD width could flag an honest result."""
    assert physical_bound("cpu", facts("")) is None


# --- the CPU bound's arithmetic ---------------------------------------------------------------

def test_cores_times_clock_times_flops_per_cycle() -> None:
    bound = physical_bound("cpu", facts(clocks={"cpufreq max": 4.5, "/proc/cpuinfo cpu MHz": 2.4}))
    assert bound is not None
    assert bound.gflops["fp32"] == pytest.approx(2 * 4.5 * 32)  # 288
    assert bound.how["fp32"].startswith(
        "this CPU's theoretical peak 2 cores x 4.5 GHz x 32 FLOP/cycle (avx2+fma) = 288 GFLOP/s")
    assert "cpufreq max 4.5 GHz" in bound.how["fp32"]
    assert bound.gflops["tf32"] == bound.gflops["fp32"]  # tf32 is fp32 math on a CPU
    assert bound.gflops["bf16"] == pytest.approx(2 * bound.gflops["fp32"])


def test_a_reported_clock_below_the_assumed_turbo_is_raised_to_it() -> None:
    """A VM reports its base clock; a real all-core turbo must not make an honest result
    IMPLAUSIBLE, so the clock is at least envinfo's assumed 4 GHz."""
    bound = physical_bound("cpu", facts(clocks={"/proc/cpuinfo cpu MHz": 2.45}))
    assert bound is not None
    assert bound.gflops["fp32"] == pytest.approx(2 * bounds.ASSUMED_MAX_GHZ * 32)
    assert "/proc/cpuinfo cpu MHz 2.45 GHz, assumed all-core turbo 4 GHz" in bound.how["fp32"]


def test_amx_raises_the_16_bit_bound_only() -> None:
    plain = physical_bound("cpu", facts("sse avx avx2 fma avx512f"))
    amx = physical_bound("cpu", facts("sse avx avx2 fma avx512f amx_bf16 amx_tile"))
    assert plain and amx and plain.gflops["fp32"] == amx.gflops["fp32"]
    assert amx.gflops["bf16"] == pytest.approx(16 * plain.gflops["bf16"])


def test_the_bound_scales_with_the_usable_cores() -> None:
    one, sixteen = physical_bound("cpu", facts(cores=1)), physical_bound("cpu", facts(cores=16))
    assert one and sixteen and sixteen.gflops["fp32"] == pytest.approx(16 * one.gflops["fp32"])


# --- judged: above the bound flagged (saying which bound), below it not ------------------------

def test_a_cpu_rate_above_the_theoretical_peak_is_implausible() -> None:
    # 3 GHz read, under the assumed 4 GHz turbo: 2 cores x 4 GHz x 32 = 256 GFLOP/s.
    host = facts(clocks={"cpufreq max": 3.0})
    [verdict] = judge_case(600.0, None, "fp32", "cpu", None, host_facts=host)
    assert verdict.implausible and verdict.bound == pytest.approx(256.0)
    assert verdict.text().startswith(
        "IMPLAUSIBLE: 600 GFLOP/s above this CPU's theoretical peak 2 cores x 4 GHz x 32 "
        "FLOP/cycle (avx2+fma) = 256 GFLOP/s (clock: the highest of cpufreq max 3 GHz")
    assert verdict.text().endswith("; no probe ran")


def test_a_cpu_rate_below_the_bound_is_not_flagged_nor_a_share_of_it() -> None:
    [verdict] = judge_case(100.0, None, "fp32", "cpu", None, host_facts=facts())
    assert not verdict.implausible and verdict.text() == ""
    # "unknown": a bound nobody measured is no ceiling, so no "% of peak" is made from it.
    assert verdict.kind == "unknown" and verdict.probe is None


def test_without_facts_or_bound_nothing_is_judged() -> None:
    [verdict] = judge_case(1e9, None, "fp32", "cpu", None)
    assert verdict.kind == "unknown" and verdict.text() == ""


def test_measured_ceilings_win_over_the_fallback() -> None:
    ceilings = Ceilings.from_json({"cpu": {"peak_gflops_by_precision": {"fp32": 100.0},
                                           "physical": {"gflops_by_precision": {"fp32": 400.0}}}})
    [verdict] = judge_case(300.0, None, "fp32", "cpu", ceilings, host_facts=facts())
    assert verdict.kind == "probe-low" and verdict.bound == 400.0


def test_a_precision_the_probe_skipped_falls_back_to_the_bound() -> None:
    ceilings = Ceilings.from_json({"cpu": {"peak_gflops_by_precision": {"fp32": 100.0}}})
    [verdict] = judge_case(1e6, None, "bf16", "cpu", ceilings, host_facts=facts())
    assert verdict.implausible and "16-bit" in verdict.text()


def test_an_implausible_verdict_without_probe_or_sentence_still_reads() -> None:
    assert judge(300.0, "GB/s", None, 200.0).text() == (
        "IMPLAUSIBLE: 300 GB/s above the physical bound 200 GB/s; no probe ran")


# --- GPUs: the datasheet by the name nvidia-smi reports ----------------------------------------

@pytest.mark.parametrize("reported, sheet", [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
    ("NVIDIA H200", "NVIDIA H200 SXM"),
    ("NVIDIA GH200 480GB", "NVIDIA GH200"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
    ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 40GB"),
    ("Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2"),
    ("Tesla V100S-PCIE-32GB", "NVIDIA V100S PCIe"),
    ("Tesla T4", "NVIDIA T4"),
    ("NVIDIA L4", "NVIDIA L4"),
    ("NVIDIA L40S", "NVIDIA L40S"),
    ("NVIDIA A10", "NVIDIA A10"),
    ("NVIDIA A10G", "NVIDIA A10G"),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("NVIDIA GeForce RTX 4060", "NVIDIA GeForce RTX 4060"),
    ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090"),
])
def test_the_datasheet_row_for_each_reported_name(reported: str, sheet: str) -> None:
    found = bounds.gpu_sheet(reported)
    assert found is not None and found.name == sheet


def test_h100_pcie_figures_and_the_device_index() -> None:
    host = facts(gpus=("NVIDIA L4", "NVIDIA H100 PCIe"))
    bound = physical_bound("cuda:1", host)
    assert bound is not None
    assert bound.gflops["fp32"] == pytest.approx(51_200.0)
    assert bound.gflops["tf32"] == pytest.approx(378_000.0)
    assert bound.gflops["bf16"] == pytest.approx(756_000.0)
    assert bound.gbps["bandwidth_gbps"] == pytest.approx(2000.0)
    assert bound.gbps["h2d_pinned_gbps"] == pytest.approx(2 * bounds.PCIE5)  # both directions
    first = physical_bound("cuda:0", host)
    assert first is not None and first.gflops["fp32"] == pytest.approx(30_300.0)  # the L4
    assert physical_bound("cuda:5", host) is None  # no such GPU


def test_a_gpu_rate_above_its_datasheet_is_implausible_and_says_so() -> None:
    host = facts(gpus=("NVIDIA H100 PCIe",))
    [flops, bytes_] = judge_case(600_000.0, 2500.0, "tf32", "cuda:0", None, host_facts=host)
    assert flops.implausible and bytes_.implausible
    assert "the NVIDIA H100 PCIe datasheet's theoretical peak tf32 378,000 GFLOP/s" \
        in flops.text()
    assert "memory bandwidth 2,000 GB/s" in bytes_.text()
    [fine] = judge_case(50_000.0, None, "fp32", "cuda:0", None, host_facts=host)
    assert not fine.implausible


@pytest.mark.parametrize("name", ["NVIDIA B300 SXM6 AC", "AMD Instinct MI300X", "Fake GPU"])
def test_an_unknown_gpu_gets_no_bound(name: str) -> None:
    assert bounds.gpu_sheet(name) is None
    assert physical_bound("cuda:0", facts(gpus=(name,))) is None
    [verdict] = judge_case(1e12, None, "fp32", "cuda:0", None, host_facts=facts(gpus=(name,)))
    assert verdict.kind == "unknown"


# --- remembered probes -------------------------------------------------------------------------

def remembered_gpu(fp32: float) -> DeviceCeiling:
    return DeviceCeiling("cuda:0", Peaks({"fp32": fp32}, {MEMORY: 1000.0}))


def test_an_unknown_gpu_with_a_remembered_probe_is_held_to_that() -> None:
    host = facts(gpus=("NVIDIA B300 SXM6 AC",), remembered={"cuda:0": remembered_gpu(50_000.0)})
    bound = physical_bound("cuda:0", host)
    assert bound is not None
    assert bound.gflops["fp32"] == pytest.approx(50_000.0 * 1.25)
    assert bound.gbps["bandwidth_gbps"] == pytest.approx(1000.0 * 1.10)
    assert "remembered probe" in bound.how["fp32"]


def test_the_larger_of_datasheet_and_remembered_bound_is_kept() -> None:
    # A probe x 1.25 above the L4's datasheet fp32 (30.3 TFLOP/s): the larger bound stays.
    host = facts(gpus=("NVIDIA L4",), remembered={"cuda:0": remembered_gpu(28_000.0)})
    bound = physical_bound("cuda:0", host)
    assert bound is not None
    assert bound.gflops["fp32"] == pytest.approx(35_000.0) and "remembered" in bound.how["fp32"]
    assert bound.gflops["bf16"] == pytest.approx(121_000.0) and "datasheet" in bound.how["bf16"]


# --- stored as ceilings entries: every reader of run.json's ceilings judges with it ------------

def test_unprobed_ceilings_reach_the_cli_flag_and_judge_case() -> None:
    host = facts(clocks={"cpufreq max": 3.0}, gpus=("Fake GPU",))
    entries = bounds.unprobed_ceilings(["cpu", "cuda:0"], host)
    assert list(entries.devices) == ["cpu"]  # the unknown GPU has no bound, so no entry
    assert entries.devices["cpu"].theoretical_only and not entries.devices["cpu"].probe
    [verdict] = judge_case(900.0, None, "fp32", "cpu", entries)
    assert verdict.implausible and "this CPU's theoretical peak" in verdict.text()
    assert implausibility(rated_row("fp32", "cpu", 900.0), entries.devices["cpu"]).startswith(
        "IMPLAUSIBLE: 900 GFLOP/s above this CPU's theoretical peak")
    [under] = judge_case(90.0, None, "fp32", "cpu", entries)
    assert under.kind == "unknown"


# --- this machine --------------------------------------------------------------------------------

def test_this_machines_cpu_bound_names_its_arithmetic() -> None:
    if not bounds.CPUINFO.exists():
        pytest.skip("no /proc/cpuinfo here")
    bound = physical_bound("cpu", HostFacts.from_machine(with_remembered=False))
    if bound is None:
        pytest.skip("this CPU's flags give no bound (a matrix unit)")
    assert f"{envinfo.usable_cores()} cores x" in bound.how["fp32"]
    assert bound.gflops["fp32"] >= envinfo.usable_cores() * bounds.ASSUMED_MAX_GHZ * 2

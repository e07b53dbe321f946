"""A workload whose variants fail on purpose at the second size: crash, hang, OOM, wrong answer."""

from __future__ import annotations

from dataclasses import replace

from harness.spec import Check, Param, WorkloadSpec

FAULTS = ("ok", "error", "segfault", "sigkill", "hang", "child-hang", "oom", "invalid", "slow",
          "bimodal", "throttled-once", "throttled-always", "grow", "huge")
HUGE_BYTES = 1e18  # what the `huge` variant's second size says it needs: more than any machine


def host_bytes(case: dict, variant: str) -> float:
    """The memory guard's estimate: `huge` at size 2 cannot fit; everything else is small."""
    return HUGE_BYTES if variant == "huge" and case["size"] >= 2 else 1e3


def make_inputs(case: dict, variant: str) -> dict:
    return {"values": list(range(case["size"] * 10))}


def check(case: dict, variant: str, inputs: dict, output: dict) -> Check:
    expected = sum(inputs["values"])
    return Check(passed=output["total"] == expected, metric="abs_error",
                 value=abs(output["total"] - expected), bound=0, detail="sum of values")


SPEC = WorkloadSpec(
    name="fault",
    kind="fault",
    summary="fault injection for the test suite: variant FAULT strikes at size 2",
    sweep="size",
    params={
        "size": Param([1, 2], [1, 2], "case sizes; the fault strikes at size 2"),
        "pid_file": Param("", "", "where child-hang writes its child's pid, hang its own", kind=str,
                          minimum=None),
    },
    variants=FAULTS,
    implementations={"fake": "tests.fakes.backend.fault"},
    make_inputs=make_inputs,
    check=check,
    host_bytes=host_bytes,
)

# The same faults with a FLOP count, so a run measures the machine's ceilings first (the fault
# workload itself counts nothing, and a run skips a probe nothing could be judged against).
RATED = replace(SPEC, name="fault-rated", flops=lambda case: 1e3 * case["size"])

# Two small `harness advise` runs (tests/test_advise.py), each a working as-written variant
# and a fix, or the other way round: the fix `invalid` fails its check at size 2 (a finding,
# exit 0); the as-written `error` raises at size 2 (a failed as-written cell, exit 1).
ADVISE_FIX_FAILS = replace(SPEC, name="fault-advise", variants=("ok", "invalid"),
                           default_variants=("ok",))
ADVISE_BASELINE_FAILS = replace(SPEC, name="fault-advise-broken", variants=("error", "ok"),
                                default_variants=("error",))

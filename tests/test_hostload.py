"""The host-load check counts the worker's short-lived children as its own (issue 24, item 3)."""

from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness.measure import hostload

WORKER, CHILD, STRANGER = 100, 101, 200


TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def taken(wall_s: float, busy: int, irq: int,
          processes: dict[int, tuple[int, ...]]) -> hostload.LoadSnapshot:
    """A snapshot of made-up counters in clock ticks, as the kernel counts them: all cores' busy
    and irq time, and per pid (group, own, children[, parent])."""
    cpu = SimpleNamespace(user=busy * TICK_S, nice=0.0, system=0.0, irq=irq * TICK_S,
                          softirq=0.0, steal=0.0)
    times = {pid: hostload.ProcessTimes(f"proc {pid}", group, own * TICK_S, children * TICK_S,
                                        parent[0] if parent else 1)
             for pid, (group, own, children, *parent) in processes.items()}
    return hostload.LoadSnapshot.of(wall_s, cpu, times, WORKER)


def test_a_child_that_came_and_went_is_the_workers_own() -> None:
    """The child ran 40 ticks between the snapshots, then exited and was reaped by the worker.

    Its time is in the machine's busy total and, once reaped, in the worker's cutime; the old
    check (group members' utime + stime only) called those 40 ticks "other processes".
    """
    before = taken(0.0, busy=1000, irq=0,
                   processes={WORKER: (WORKER, 50, 0), CHILD: (WORKER, 10, 0)})
    # The worker ran 30 more ticks; the child 40 more, then it was reaped (10 + 40 = 50).
    after = taken(70 * TICK_S, busy=1070, irq=0, processes={WORKER: (WORKER, 80, 50)})
    load = hostload.other_load(before, after)
    assert load is not None and load.other_cores == pytest.approx(0.0)
    assert not load.contended
    without_children = dataclasses.replace(after, group_s=80 * TICK_S)  # the pre-fix sum
    assert hostload.other_load(before, without_children).other_cores > 0.5


def test_a_stranger_is_still_other_and_named() -> None:
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    before = taken(0.0, busy=1000, irq=0,
                   processes={WORKER: (WORKER, 50, 0), STRANGER: (STRANGER, 0, 0)})
    after = taken(1.0, busy=1000 + 2 * ticks_per_s, irq=ticks_per_s // 2,
                  processes={WORKER: (WORKER, 50 + ticks_per_s, 0),
                             STRANGER: (STRANGER, ticks_per_s, 0)})
    load = hostload.other_load(before, after)
    assert load.other_cores == pytest.approx(1.0)
    assert load.interrupt_cores == pytest.approx(0.5, abs=0.02)  # apart, not "other"
    assert load.top_others == ((f"proc {STRANGER} ({STRANGER})", pytest.approx(1.0)),)
    assert load.contended and f"proc {STRANGER} ({STRANGER}) 1.0" in load.reason()


SIBLING, SIBLING_CHILD, SPINNER = 102, 300, 400


def test_a_stranger_reaped_by_the_group_does_not_hide_a_spinner() -> None:
    """The fresh-clone failure: under pytest -n 2 the sibling xdist process (our group) reaped
    its worker (own session) during the window, and the worker's whole lifetime (500 ticks, 450
    of them before the window) joined our cutime; busy minus group then read 0.49 cores while
    the spinner itself used 0.98. Both readings agree once the carried ticks are taken out."""
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    before = taken(0.0, busy=10_000, irq=0, processes={
        WORKER: (WORKER, 50, 0), SIBLING: (WORKER, 20, 0),
        SIBLING_CHILD: (SIBLING_CHILD, 450, 0, SIBLING), SPINNER: (SPINNER, 0, 0)})
    # One second: the sibling's worker ran 50 more ticks and was reaped; the spinner ran 1 s.
    after = taken(1.0, busy=10_000 + 50 + ticks_per_s, irq=0, processes={
        WORKER: (WORKER, 50, 0), SIBLING: (WORKER, 20, 500), SPINNER: (SPINNER, ticks_per_s, 0)})
    load = hostload.other_load(before, after)
    assert load is not None
    assert load.other_cores >= load.top_others[0][1] == pytest.approx(1.0)
    assert load.contended


def test_other_cores_are_never_fewer_than_the_strangers_seen() -> None:
    """Whatever the group's counters say, the busiest stranger's own time is a floor."""
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    before = taken(0.0, busy=1000, irq=0,
                   processes={WORKER: (WORKER, 0, 0), SPINNER: (SPINNER, 0, 0)})
    # A reaped child of the group's that /proc never showed: cutime jumps by 2 s of old work.
    after = taken(1.0, busy=1000 + ticks_per_s, irq=0, processes={
        WORKER: (WORKER, 0, 2 * ticks_per_s), SPINNER: (SPINNER, ticks_per_s, 0)})
    load = hostload.other_load(before, after)
    assert load is not None and load.other_cores == pytest.approx(1.0)


def test_a_real_short_cpu_burning_child_counts_as_ours() -> None:
    """A child in our group burns CPU and exits between the snapshots: its time is ours."""
    if hostload.snapshot() is None:
        pytest.skip("no /proc here: contention is not measured on this OS")
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = hostload.snapshot()
    burner = ("import time\nend = time.process_time() + 0.3\n"
              "while time.process_time() < end: pass\n")
    subprocess.run([sys.executable, "-c", burner], check=True)  # same process group, reaped
    after = hostload.snapshot()
    usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_s = (usage_after.ru_utime + usage_after.ru_stime
               - usage_before.ru_utime - usage_before.ru_stime)
    assert child_s >= 0.25
    # Tick rounding: at most a couple of ticks short of what the kernel charged the child.
    assert after.group_s - before.group_s >= child_s - 3 * TICK_S


def test_a_child_spawned_during_the_timed_samples_is_counted_as_ours() -> None:
    """Through the timing core: one timed call runs a short CPU-burning compiler-like child."""
    from harness.measure.timing import TimingPolicy, autorange

    if hostload.snapshot() is None:
        pytest.skip("no /proc here: contention is not measured on this OS")
    snapshots: dict[str, hostload.LoadSnapshot | None] = {}
    usage: dict[str, float] = {}
    burner = ("import time\nend = time.process_time() + 0.3\n"
              "while time.process_time() < end: pass\n")
    timed = {"on": False, "spawned": False}

    def children_cpu_s() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    class Window:
        def begin(self) -> None:
            usage["begin"], snapshots["begin"] = children_cpu_s(), hostload.snapshot()
            timed["on"] = True

        def end(self, calls: int) -> None:
            timed["on"] = False
            snapshots["end"], usage["end"] = hostload.snapshot(), children_cpu_s()

    def step() -> None:
        if timed["on"] and not timed["spawned"]:
            timed["spawned"] = True
            subprocess.run([sys.executable, "-c", burner], check=True)

    policy = TimingPolicy(min_samples=3, min_time_s=0.0, warmup_s=0.0, target_sample_s=0.0)
    autorange(step, lambda: None, policy, Window())
    assert timed["spawned"]
    child_s = usage["end"] - usage["begin"]
    assert child_s >= 0.25
    own = snapshots["end"].group_s - snapshots["begin"].group_s
    assert own >= child_s - 3 * TICK_S  # the child's whole CPU time is the worker's own


def test_a_contention_reason_over_a_long_case_prints_plain_seconds() -> None:
    """A case timed for minutes on a loaded machine printed '1.2e+02 s' in its reason, which
    harness check refuses in summary.md (exponent notation): two digits, plain."""
    from harness.core.units import digits

    load = hostload.OtherLoad(other_cores=1.5, steal_cores=0.0, seconds=123.4)
    assert load.reason().endswith("during the 120 s this case was timed")
    assert [digits(value, 2) for value in (123.4, 0.0123, 5.55, 99.96)] == [
        "120", "0.012", "5.5", "100"]

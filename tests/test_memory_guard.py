"""Issue 65: the memory guard. A case whose workload says it needs more memory than the machine
has available is an error case "out of memory: ... not run", refused before its inputs are
made, while the cell's other sizes run; a worker that grows past the guard's share of what was
available when it started is killed and its cell says "out of memory" at the size it was at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import api
from harness.data import store
from harness.run import memoryguard
from harness.spec import Status
from harness.workloads.matmul import SPEC as MATMUL
from tests.fakes.workload import host_bytes


def fault_run(out_dir: Path, variant: str) -> store.RunDocument:
    run = api.plan("fault", frameworks="fake", devices="cpu", variants=variant, sizes=[1, 2],
                   quick=True, out=out_dir, timeout_s=60)
    return store.load_run(api.execute(run, ceilings=False, progress=False).path)


def test_a_case_larger_than_the_memory_available_is_refused_and_the_others_run(
        out_dir: Path) -> None:
    [cell] = fault_run(out_dir, "huge").cells
    small, large = cell.cases
    assert small.status == Status.OK and small.measured
    assert large.status == Status.ERROR and not large.measured
    assert large.reason.startswith("out of memory: needs at least") \
        and large.reason.endswith("available; not run"), large.reason
    assert cell.status == Status.ERROR


def test_the_estimate_is_held_against_what_is_available() -> None:
    # numpy matmul at n = 45000 on the 24 GB VM (~22 GB available): three float32 matrices.
    refusal = memoryguard.case_refusal(MATMUL.host_bytes, {"n": 45000}, "fp32", 22 * 10**9)
    assert refusal == ("out of memory: needs at least 22.6 GiB (the workload's estimate), "
                       "20.5 GiB available; not run")
    assert memoryguard.case_refusal(MATMUL.host_bytes, {"n": 4096}, "fp32", 22 * 10**9) == ""
    assert memoryguard.case_refusal(None, {"n": 45000}, "fp32", 1) == ""  # no estimate
    assert memoryguard.case_refusal(host_bytes, {"size": 2}, "huge", None) == ""  # no /proc


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the guard reads /proc")
def test_a_worker_that_grows_without_bound_is_stopped_as_out_of_memory(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 256 << 20  # the fake worker grows in 16 MB steps up to 768 MB
    monkeypatch.setattr(memoryguard, "child_limit", lambda: limit)
    [cell] = fault_run(out_dir, "grow").cells
    assert cell.status == Status.ERROR
    assert cell.reason.startswith("out of memory at size 2: its processes held"), cell.reason
    assert cell.reason.endswith("worker killed")
    assert [case.status for case in cell.cases] == [Status.OK]  # size 1 measured and kept
    assert cell.peak_host_memory_bytes is not None and cell.peak_host_memory_bytes > limit


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the guard reads /proc")
def test_held_bytes_reads_this_process_and_available_bytes_the_machine() -> None:
    rss_kib = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text()
                   .splitlines() if line.startswith("VmRSS:"))
    assert memoryguard.held_bytes(os.getpid()) >= rss_kib * 1024 * 0.9
    available = memoryguard.available_bytes()
    assert available is not None and available > 0


def test_the_ceilings_probe_skips_a_run_size_that_cannot_fit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.run.runceilings import largest_square_matmul
    from harness.spec import Cell

    cells = [Cell("matmul", "fp32", "numpy", "cpu", {"n": [64, 45000]})]
    monkeypatch.setattr(memoryguard, "child_limit", lambda: 22 * 10**9)
    assert largest_square_matmul(MATMUL, cells) is None  # 24.3 GB of matrices
    monkeypatch.setattr(memoryguard, "child_limit", lambda: 30 * 10**9)
    assert largest_square_matmul(MATMUL, cells) == 45000

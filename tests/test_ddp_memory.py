"""mnist-ddp's device memory is measured in the ranks, not in the worker (issue 24, item 2)."""

from __future__ import annotations

from harness.data.upgrade import as_run_document
from harness.run.caserun import reported_device_memory
from harness.workloads.mnist_ddp import device_memory_summary

GIB = 1 << 30


def test_the_cell_reports_the_largest_rank_and_the_sum() -> None:
    summary = device_memory_summary([{"rank": 0, "allocated": 3 * GIB, "reserved": 4 * GIB},
                                     {"rank": 1, "allocated": 2 * GIB, "reserved": 5 * GIB}])
    assert summary["allocated"] == 3 * GIB and summary["reserved"] == 5 * GIB
    assert summary["allocated_sum"] == 5 * GIB and summary["reserved_sum"] == 9 * GIB
    assert [rank["rank"] for rank in summary["per_rank"]] == [0, 1]


def test_cpu_ranks_have_no_device_memory() -> None:
    summary = device_memory_summary([{"rank": 0, "allocated": None, "reserved": None}])
    assert summary["allocated"] is None and summary["allocated_sum"] is None


def test_the_worker_prefers_what_the_ranks_measured() -> None:
    """The worker's own peak (a few MiB of its context) is replaced by the ranks' figures."""
    output = {"extra": {}, "device_memory": device_memory_summary(
        [{"rank": 0, "allocated": 3 * GIB, "reserved": 4 * GIB}])}
    assert reported_device_memory(output) == {"peak_device_allocated_bytes": 3 * GIB,
                                              "peak_device_reserved_bytes": 4 * GIB}
    assert reported_device_memory({"extra": {}}) == {}


# --- scaling efficiency above 100% (issue 24, item 1) ------------------------------------------

def _ddp_document(one_busy: float | None, two_epoch_s: float,
                  device: str = "cuda:0") -> dict:
    def case(processes: int, epoch_s: float, busy: float | None) -> dict:
        extra = {"samples_per_call": 60000, "steps_per_call": 118 // processes,
                 "allreduce_share": 0.1, "accuracy": 0.95, "communication": "nccl",
                 "device_busy_share": busy}
        return {"case": {"processes": processes, "net": "small", "batch_size": 512},
                "status": "ok", "samples": [epoch_s] * 3, "extra": extra}

    from harness.workloads import mnist_ddp

    cell = {"workload": "mnist-ddp", "framework": "torch", "device": device,
            "variant": "preloaded"}
    return {"run_id": "r", "host": {"machine_label": "h200"},
            "hints": mnist_ddp.SPEC.report.as_dict(),
            "cells": [{"cell": cell, "cases": [case(1, 0.203, one_busy),
                                               case(2, two_epoch_s, None)]}]}


def _two_process_line(document: dict) -> str:
    from harness.report.views.scaling import scaling_lines, scaling_table

    return scaling_lines(scaling_table([as_run_document(document)]))[1]


def test_above_ideal_with_a_host_bound_step_is_explained() -> None:
    # 1.72 -> 1.47 ms per step at 118 and 59 steps: efficiency ~117%.
    line = _two_process_line(_ddp_document(one_busy=0.2, two_epoch_s=0.0867))
    assert "efficiency 117%" in line
    assert "a host effect" in line and "busy 20% of the time" in line


def test_above_ideal_without_a_busy_share_is_flagged() -> None:
    line = _two_process_line(_ddp_document(one_busy=None, two_epoch_s=0.0867))
    assert "FLAGGED: above 100%" in line and "not measured" in line


def test_ordinary_efficiency_gets_no_note_and_far_below_does() -> None:
    assert "(" not in _two_process_line(
        _ddp_document(one_busy=0.9, two_epoch_s=0.12)).split("efficiency")[1].split(",")[0]
    low = _two_process_line(_ddp_document(one_busy=0.9, two_epoch_s=0.4))
    assert "FLAGGED: this far below 100%" in low

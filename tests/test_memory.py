"""Peak memory: measured from outside the worker, stored per cell, shown in table and report."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.data.results import CellResult
from harness.measure.memory import (
    format_bytes,
    memory_text,
    wait_with_peak_rss,
    with_peak_host_memory,
)
from harness.spec import Cell

ALLOCATE_MIB = 200


def test_wait4_sees_the_child_peak_even_after_it_freed_the_memory() -> None:
    script = (f"b = bytearray({ALLOCATE_MIB} * 2**20)\n"
              "for i in range(0, len(b), 4096): b[i] = 1\n"  # touch every page: resident
              "del b\n")
    process = subprocess.Popen([sys.executable, "-c", script])
    returncode, peak = wait_with_peak_rss(process, timeout_s=60)
    assert returncode == 0 and process.returncode == 0
    assert peak is not None and peak > ALLOCATE_MIB * 2**20
    assert process.wait() == 0  # Popen knows the child is reaped: no second wait on its pid


def test_wait4_reports_a_timeout_like_popen_wait() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_with_peak_rss(process, timeout_s=0.2)
    finally:
        process.kill()
        process.wait()


def test_signal_deaths_keep_popen_returncode_convention() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"])
    returncode, _ = wait_with_peak_rss(process, timeout_s=60)
    assert returncode == -9


def test_outside_figure_wins_and_the_worker_figure_is_the_fallback() -> None:
    cell = Cell("fault", "ok", "fake", "cpu")
    outside = with_peak_host_memory(CellResult(cell, peak_host_memory_bytes=100), 300)
    assert outside.peak_host_memory_bytes == 300
    assert outside.peak_host_memory_bytes_worker == 100
    assert (outside.peak_host_memory_source or "").startswith("wait4")
    fallback = with_peak_host_memory(CellResult(cell, peak_host_memory_bytes=100), None)
    assert fallback.peak_host_memory_bytes == 100
    assert (fallback.peak_host_memory_source or "").startswith("worker")


def test_memory_text_is_compact() -> None:
    assert format_bytes(None) == "-" and format_bytes(512) == "512 B"
    assert format_bytes(1.5 * 2**30) == "1.5 GiB"
    assert memory_text(300 * 2**20, None) == "300 MiB"
    assert memory_text(300 * 2**20, 2**30) == "300 MiB / dev 1 GiB"

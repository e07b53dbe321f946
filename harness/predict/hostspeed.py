"""The host CPU's single-thread speed: two fixed loops, timed the same way on every machine.

Why: a profile's host costs (dispatch per op, a sync's round trip) were measured on the
profiled machine's CPU. Predicting that GPU driven by another CPU (this laptop's, a cloud
VM's) rescales them by how fast each CPU runs the same single-threaded work: the interpreter
(`python_loop`: integer arithmetic, a dict, a list, a sort) and the per-call overhead of a C
extension (`numpy_loop`: many numpy ops on 16-element arrays). Framework-free, so the same
figure is measured on a CPU-only machine without importing the framework the profile used.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.data.serial import JsonValue
from harness.measure.timing import TimingPolicy
from harness.predict.profile import Entry, spec_of
from harness.predict.timed import no_sync, policy, timed_row

PYTHON_ITERATIONS = 20_000
NUMPY_OPS = 2_000
NUMPY_ELEMENTS = 16


def python_loop(iterations: int = PYTHON_ITERATIONS) -> int:
    """A fixed mix of interpreter work; returns a value so nothing is optimised away."""
    total = 0
    table: dict[int, int] = {}
    items: list[int] = []
    for index in range(iterations):
        total += (index * 7) % 13
        table[index & 255] = total
        items.append(index ^ total)
    items.sort()
    return total + len(table) + items[-1]


def numpy_loop(left: np.ndarray, right: np.ndarray, out: np.ndarray,
               ops: int = NUMPY_OPS) -> None:
    """OPS small numpy adds into a preallocated array: the cost is the call, not the sum."""
    for _ in range(ops):
        np.add(left, right, out=out)


def measure(chosen: TimingPolicy) -> dict[str, Entry]:
    """host.python and host.numpy, each one row of seconds per loop."""
    left = np.ones(NUMPY_ELEMENTS, dtype=np.float32)
    right, out = left.copy(), left.copy()
    python = timed_row(python_loop, no_sync, chosen,
                       {"loop": "python_loop", "iterations": PYTHON_ITERATIONS})
    numpy = timed_row(lambda: numpy_loop(left, right, out), no_sync, chosen,
                      {"loop": "numpy_loop", "ops": NUMPY_OPS, "elements": NUMPY_ELEMENTS})
    return {"host.python": Entry(what=spec_of("host.python").what, rows=[python]),
            "host.numpy": Entry(what=spec_of("host.numpy").what, rows=[numpy])}


def fastest(passes: list[dict[str, Entry]]) -> dict[str, Entry]:
    """Per loop, the row of PASSES (several `measure` results) with the least median, its
    params listing every pass's median in order. Why: the lent GPU hosts run these loops at
    one of two speeds, switching within a process (3.0-3.2 or 5.0-5.8 ms the Python loop),
    and the profile's dispatch rows moved far less (6.4 against 7.0 us an add); the fastest
    pass is the CPU's own speed, the figure another CPU is scaled against."""
    kept: dict[str, Entry] = {}
    for name in passes[0]:
        rows = [measured[name].rows[0] for measured in passes]
        best = min(rows, key=lambda row: row.median_s or float("inf"))
        medians: list[JsonValue] = [row.median_s for row in rows]
        kept[name] = replace(passes[0][name], rows=[
            replace(best, params={**best.params, "passes": len(rows), "pass_medians_s": medians})])
    return kept


def speed_record() -> dict[str, float]:
    """This CPU's single-thread speed as a features pass stores it (the two loops, quick
    policy: ~0.2 s): a prediction for host 'this' rescales the profile's launch costs by it.
    Framework-free: torch's, JAX's and Keras' features passes all store it."""
    rows = measure(policy(quick=True))
    return {"python_loop_s": float(rows["host.python"].rows[0].median_s or 0.0),
            "numpy_loop_s": float(rows["host.numpy"].rows[0].median_s or 0.0)}

"""Per-cell overhead of going through SLURM: submission to result, against the same cell locally.

    sudo env PYTHONPATH=$PWD .venv/bin/python benchmarks/slurm_overhead.py [--repeats 5]

Starts a one-node cluster for this host (tests/slurm_cluster.py: needs root, slurm-wlm, munge),
then runs one small cell (numpy matmul n=256, --quick) REPEATS times through the local executor
and REPEATS times as a one-task SLURM job, each timed from the executor's start to the result in
hand; prints the medians, the difference, and where the SLURM time went (queue and start-up
before the worker, the worker itself, the wait after it). Nothing here is a timed assert.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import api  # noqa: E402
from harness.run.executors import LocalExecutor  # noqa: E402
from harness.run.executors.slurm import SlurmExecutor  # noqa: E402
from harness.run.runner import RunOptions  # noqa: E402
from harness.spec import Cell  # noqa: E402
from tests import slurm_cluster  # noqa: E402

CELL = api.plan("matmul", frameworks="numpy", devices="cpu", sizes=[256], quick=True,
                out=tempfile.gettempdir()).cells[0]


def time_one(executor: Any, run_dir: Path) -> tuple[float, dict[str, Any]]:
    """Seconds from the executor's start to the cell's result, and the result."""
    got: dict[str, Any] = {}
    start = time.time()

    def on_result(cell: Cell, result: dict[str, Any]) -> None:
        got.update(result, handed_on=time.time())

    executor.run([CELL], RunOptions(timeout_s=300), run_dir, on_result)
    return got["handed_on"] - start, {**got, "submitted": start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--poll", type=float, default=1.0, help="the executor's poll_s")
    args = parser.parse_args()
    with slurm_cluster.running() as cluster, tempfile.TemporaryDirectory() as scratch:
        import os

        os.environ.update(cluster.environment)
        totals: dict[str, list[float]] = {"local": [], "slurm": []}
        phases: dict[str, list[tuple[float, float, float]]] = {"local": [], "slurm": []}
        for repeat in range(args.repeats):
            for name, executor in (("local", LocalExecutor()),
                                   ("slurm", SlurmExecutor(poll_s=args.poll))):
                seconds, result = time_one(executor, Path(scratch) / f"{name}{repeat}")
                assert result["status"] == "ok", result["reason"]
                totals[name].append(seconds)
                phases[name].append((result["started"] - result["submitted"],
                                     result["finished"] - result["started"],
                                     result["handed_on"] - result["finished"]))
            print(f"repeat {repeat}: local {totals['local'][-1]:.2f} s, "
                  f"slurm {totals['slurm'][-1]:.2f} s")
        print(f"cell: {CELL.label} n=256 --quick; {args.repeats} repeats, medians; "
              f"poll {args.poll:g} s; node {cluster.node}")
        for name in ("local", "slurm"):
            before, worker, after = (statistics.median(values) for values in zip(*phases[name]))
            print(f"{name} executor: {statistics.median(totals[name]):.2f} s (start to worker "
                  f"start {before:.2f} s, worker {worker:.2f} s, worker end to result "
                  f"{after:.2f} s)")
        overhead = statistics.median(totals["slurm"]) - statistics.median(totals["local"])
        print(f"overhead per cell: {overhead:.2f} s")


if __name__ == "__main__":
    main()

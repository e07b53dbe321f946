"""A small CPU call timed three ways: a plain loop, the harness's autorange, a lone call.

    python benchmarks/cpu_small_call.py [--n 200] [--threads 0,1,4] [--load 0,2] [--out FILE]

Why: a torch CPU 200x200 matmul once read 8 ms per call in a harness run while a plain loop of
the same call took 28 us. This script separates what the call costs from what its environment
adds: it repeats the measurement for several intra-op thread counts (0 = torch's default, all
cores) and with N busy-looping competitor processes, so oversubscription shows as a number.
A benchmark, not a test: it needs torch.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from harness.measure.timing import TimingPolicy, autorange  # noqa: E402


def _spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def plain_loop_us(step, calls: int = 2000) -> dict[str, float]:
    """A back-to-back loop: total time / calls (what a user's timing loop reads), and the
    median and 99th percentile of the calls timed one by one."""
    for _ in range(200):
        step()
    start = time.perf_counter()
    for _ in range(calls):
        step()
    loop_total_s = time.perf_counter() - start
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    ordered = sorted(seconds)
    return {"loop_median_us": statistics.median(seconds) * 1e6,
            "loop_p99_us": ordered[int(0.99 * len(ordered))] * 1e6,
            "loop_mean_us": loop_total_s / calls * 1e6}


def lone_call_us(step, idle_s: float = 0.01, repeats: int = 50) -> float:
    """Median of single calls each after idle_s of sleep (thread pools have gone to sleep)."""
    seconds = []
    for _ in range(repeats):
        time.sleep(idle_s)
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds) * 1e6


DEFAULT_THREADS = torch.get_num_threads()


def measure(n: int, threads: int, load: int) -> dict[str, float]:
    torch.set_num_threads(threads or DEFAULT_THREADS)
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.random((n, n), dtype=np.float32))
    b = torch.from_numpy(rng.random((n, n), dtype=np.float32))

    def step() -> None:
        torch.matmul(a, b)

    competitors = [multiprocessing.Process(target=_spin, args=(time.time() + 60,))
                   for _ in range(load)]
    for process in competitors:
        process.start()
    try:
        row = {"n": n, "threads": torch.get_num_threads(), "competing_processes": load,
               **plain_loop_us(step)}
        measurement = autorange(step, lambda: None, TimingPolicy())
        row.update(harness_median_us=measurement.median * 1e6,
                   harness_calls_per_sample=measurement.calls_per_sample,
                   harness_samples_us=[round(s * 1e6, 1) for s in measurement.samples],
                   lone_call_us=lone_call_us(step))
    finally:
        for process in competitors:
            process.terminate()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--threads", default="0,1,4")
    parser.add_argument("--load", default="0,2")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    print(f"cores: {os.cpu_count()}, torch {torch.__version__}, default threads "
          f"{torch.get_num_threads()}")
    for load in (int(v) for v in args.load.split(",")):
        for threads in (int(v) for v in args.threads.split(",")):
            row = measure(args.n, threads, load)
            rows.append(row)
            print(f"threads={row['threads']:>3} competitors={load}: loop median "
                  f"{row['loop_median_us']:.1f} us (mean {row['loop_mean_us']:.1f}, p99 "
                  f"{row['loop_p99_us']:.0f}), harness "
                  f"{row['harness_median_us']:.1f} us x{row['harness_calls_per_sample']}, "
                  f"lone call {row['lone_call_us']:.0f} us", flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()

"""Check the harness's clock against reference timers, in one process, on the same tensors.

    python benchmarks/validate_timing.py [--out DIR] [--gpu-sizes 1024,2048,4096,8192]
                                         [--cpu-sizes 256,512,1024,2048]

For float32 matmul it compares the harness's median (harness.measure.timing.autorange with the torch
backend's synchronize) with torch.utils.benchmark.Timer.blocked_autorange (median) and, on a
GPU, triton.testing.do_bench (median, CUDA events). Goal: GPU ratios within 3%, CPU within 10%.
It also shows what seed experiment 5's unsynchronised timer would have printed.
This is a benchmark, not a test: it needs torch (and a GPU for the GPU half).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.utils.benchmark as torch_benchmark  # noqa: E402

from harness.backends.torch.device import open_device  # noqa: E402
from harness.measure.timing import TimingPolicy, autorange  # noqa: E402

POLICY = TimingPolicy(min_samples=10, min_time_s=1.0, max_time_s=10.0, warmup_s=0.25)


def unsynchronised_seconds(a: torch.Tensor, b: torch.Tensor, repeats: int = 5) -> float:
    """The seed experiment's timer: time.time() around one matmul, no synchronize (median)."""
    readings = []
    for _ in range(repeats):
        torch.cuda.synchronize() if a.is_cuda else None  # start from an idle device
        start = time.time()
        torch.matmul(a, b)
        readings.append(time.time() - start)
    if a.is_cuda:
        torch.cuda.synchronize()
    return statistics.median(readings)


def compare_size(device_name: str, n: int) -> dict:
    device = open_device(device_name)
    a = torch.rand(n, n, device=device.handle)
    b = torch.rand(n, n, device=device.handle)
    harness_s = autorange(lambda: torch.matmul(a, b), device.synchronize, POLICY).median
    # Timer defaults to num_threads=1; give it the same thread count the harness's call uses,
    # or the CPU comparison measures one core against all of them (seen: ratio 0.10-0.19).
    timer = torch_benchmark.Timer(stmt="torch.matmul(a, b)", globals={"torch": torch, "a": a,
                                                                     "b": b},
                                  num_threads=torch.get_num_threads())
    torch_s = timer.blocked_autorange(min_run_time=1.0).median
    row = {"device": device_name, "device_name": device.description, "n": n,
           "harness_s": harness_s, "torch_benchmark_s": torch_s,
           "ratio_torch_benchmark": harness_s / torch_s,
           "unsynced_s": unsynchronised_seconds(a, b)}
    if device.is_gpu:
        import triton.testing

        do_bench_ms = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=100, rep=500,
                                              return_mode="median")
        row.update(do_bench_s=do_bench_ms / 1e3, ratio_do_bench=harness_s / (do_bench_ms / 1e3))
    row["gflops"] = 2 * n**3 / harness_s / 1e9
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--gpu-sizes", default="1024,2048,4096,8192")
    parser.add_argument("--cpu-sizes", default="256,512,1024,2048")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    plan = [("cpu", int(n)) for n in args.cpu_sizes.split(",")]
    if torch.cuda.is_available():
        plan = [("cuda:0", int(n)) for n in args.gpu_sizes.split(",")] + plan
    rows = [compare_size(device, n) for device, n in plan]
    header = f"{'device':7} {'n':>5} {'harness':>10} {'t.u.bench':>10} {'ratio':>6} " \
             f"{'do_bench':>10} {'ratio':>6} {'unsynced':>10} {'GFLOP/s':>9}"
    print(header)
    for row in rows:
        do_bench = f"{row['do_bench_s'] * 1e3:9.3f}m {row['ratio_do_bench']:6.3f}" \
            if "do_bench_s" in row else f"{'-':>10} {'-':>6}"
        print(f"{row['device']:7} {row['n']:5d} {row['harness_s'] * 1e3:9.3f}m "
              f"{row['torch_benchmark_s'] * 1e3:9.3f}m {row['ratio_torch_benchmark']:6.3f} "
              f"{do_bench} {row['unsynced_s'] * 1e3:9.3f}m {row['gflops']:9.1f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "timing-validation.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

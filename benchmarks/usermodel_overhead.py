"""A user's torch model: per-step time in the harness vs a plain hand-written loop.

    python benchmarks/usermodel_overhead.py [--model examples/models/small_cnn.py]
        [--batch 32] [--device cpu|cuda] [--rounds 3]

The same training step (Adam, mean squared error against fixed targets, data already where
the model runs) timed two ways, alternately, `rounds` times each: `harness compare --model`
(its worker, autorange, everything) and a loop written the way a user would, in a process of
its own. Prints each round, the medians and the ratio harness / loop. On the CPU the harness
cell is `as-written` (a CPU tensor from numpy is no copy); on a GPU `resident`, as the loop.
A benchmark, not a test: it needs torch; the parent process imports nothing heavy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PLAIN_LOOP = r'''
import importlib.util, json, statistics, sys, time
import numpy as np, torch
path, batch, device, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
spec = importlib.util.spec_from_file_location("user_model", path)
user = importlib.util.module_from_spec(spec); spec.loader.exec_module(user)
torch.manual_seed(seed)
net = user.model().to(device)
x = torch.from_numpy(user.inputs(batch, np.random.default_rng([seed, batch]))).to(device)
with torch.no_grad():
    target = torch.randn_like(net(x))
optimizer = torch.optim.Adam(net.parameters())
sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

def step():
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(net(x), target)
    loss.backward()
    optimizer.step()

for _ in range(20):
    step()
sync()
started = time.perf_counter(); step(); sync(); single = time.perf_counter() - started
calls = max(1, int(0.02 / max(single, 1e-6)))  # about 20 ms per sample, as the harness aims
samples = []
deadline = time.perf_counter() + 2.0
while len(samples) < 30 or time.perf_counter() < deadline:
    started = time.perf_counter()
    for _ in range(calls):
        step()
    sync()
    samples.append((time.perf_counter() - started) / calls)
    if len(samples) >= 200:
        break
print(json.dumps({"median_s": statistics.median(samples), "samples": len(samples),
                  "calls_per_sample": calls}))
'''


def plain_loop_seconds(model: str, batch: int, device: str) -> float:
    ran = subprocess.run([sys.executable, "-c", PLAIN_LOOP, model, str(batch), device, "0"],
                         capture_output=True, text=True, check=True)
    return json.loads(ran.stdout.strip().splitlines()[-1])["median_s"]


def harness_seconds(model: str, batch: int, device: str, out: Path) -> float:
    import harness

    variant = "as-written" if device == "cpu" else "resident"
    result = harness.compare(model=model, frameworks="torch", devices=device, variants=variant,
                             sizes=[batch], out=out, ceilings=False, report=False,
                             progress=False)
    case = result.cells[0].cases[0]
    if case.status.value != "ok":
        raise SystemExit(f"harness cell {case.status.value}: {case.reason}")
    return case.stats.median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "examples/models/small_cnn.py"))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    device = "cuda:0" if args.device == "cuda" else args.device
    loop, timed = [], []
    with tempfile.TemporaryDirectory(prefix="usermodel-overhead-") as scratch:
        for round_index in range(args.rounds):
            loop.append(plain_loop_seconds(args.model, args.batch, device))
            timed.append(harness_seconds(args.model, args.batch, device, Path(scratch)))
            print(f"round {round_index + 1}: plain loop {loop[-1] * 1e3:.3f} ms/step, "
                  f"harness {timed[-1] * 1e3:.3f} ms/step", flush=True)
    plain, measured = statistics.median(loop), statistics.median(timed)
    ratio = measured / plain
    # Neighbouring rounds share the machine's state: their ratio cancels slow drifts in load.
    paired = statistics.median(t / p for t, p in zip(timed, loop))
    print(f"model {Path(args.model).name}, batch {args.batch}, {device}, "
          f"threads {os.environ.get('OMP_NUM_THREADS', 'default')}: plain loop median "
          f"{plain * 1e3:.3f} ms/step, harness median {measured * 1e3:.3f} ms/step, "
          f"ratio harness/loop {ratio:.3f} ({'within' if abs(ratio - 1) <= 0.05 else 'outside'}"
          f" 5%), median of per-round ratios {paired:.3f}, spread of the loop's rounds "
          f"{min(loop) * 1e3:.3f}-{max(loop) * 1e3:.3f} ms, at "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Seed 002's compiled Keras model: per-step time in the harness vs a plain train_on_batch loop.

    python benchmarks/keras_step_overhead.py [--model examples/models/keras_mnist.py]
        [--framework keras-jax|keras-torch|keras-tensorflow] [--batch 32]
        [--device cpu|cuda] [--rounds 3]

The same step (the file's own compile(): Adam, sparse categorical cross-entropy, accuracy, with
Dropout, on its integer labels), timed two ways, interleaved, `rounds` times each:
`harness.compare(model=...)` (its worker, autorange, the deterministic-mode check, everything)
and a loop written the way a Keras user would, `model.train_on_batch(x, y)` on the compiled
model, in a process of its own with the same KERAS_BACKEND. Prints each round, the medians and
the ratio harness / loop. A benchmark, not a test; the parent process imports no framework.
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
import numpy as np
import keras
path, batch, device = sys.argv[1], int(sys.argv[2]), sys.argv[3]
spec = importlib.util.spec_from_file_location("user_model", path)
user = importlib.util.module_from_spec(spec); spec.loader.exec_module(user)
x = user.inputs(batch, np.random.default_rng([0, batch]))
y = user.targets(batch, np.random.default_rng([0, batch, 1]))
with keras.device(device):
    model = user.model()          # compiled by the file, as its author wrote it
    def step():
        return model.train_on_batch(x, y)
    for _ in range(20):
        step()
    started = time.perf_counter(); step(); single = time.perf_counter() - started
    calls = max(1, int(0.005 / max(single, 1e-6)))  # about 5 ms per sample, as the harness
    samples = []
    deadline = time.perf_counter() + 2.0
    while len(samples) < 30 or time.perf_counter() < deadline:
        started = time.perf_counter()
        for _ in range(calls):
            result = step()       # train_on_batch returns host numbers: the step has finished
        samples.append((time.perf_counter() - started) / calls)
        if len(samples) >= 300:
            break
print(json.dumps({"median_s": statistics.median(samples), "samples": len(samples),
                  "calls_per_sample": calls}))
'''


def plain_loop_seconds(model: str, framework: str, batch: int, device: str) -> float:
    env = dict(os.environ, KERAS_BACKEND=framework.split("-", 1)[1])
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    keras_device = "cpu" if device == "cpu" else "gpu:" + device.split(":", 1)[1]
    ran = subprocess.run([sys.executable, "-c", PLAIN_LOOP, model, str(batch), keras_device],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(ran.stdout.strip().splitlines()[-1])["median_s"]


def harness_seconds(model: str, framework: str, batch: int, device: str, out: Path) -> float:
    import harness

    result = harness.compare(model=model, frameworks=framework, devices=device,
                             variants="as-written", sizes=[batch], out=out, ceilings=False,
                             report=False, progress=False)
    case = result.cells[0].cases[0]
    if case.status.value != "ok":
        raise SystemExit(f"harness cell {case.status.value}: {case.reason}")
    return case.stats.median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "examples/models/keras_mnist.py"))
    parser.add_argument("--framework", default="keras-jax")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    device = "cuda:0" if args.device == "cuda" else args.device
    loop, timed = [], []
    with tempfile.TemporaryDirectory(prefix="keras-overhead-") as scratch:
        for round_index in range(args.rounds):  # interleaved: load drifts hit both alike
            loop.append(plain_loop_seconds(args.model, args.framework, args.batch, device))
            timed.append(harness_seconds(args.model, args.framework, args.batch, device,
                                         Path(scratch)))
            print(f"round {round_index + 1}: train_on_batch loop {loop[-1] * 1e3:.3f} ms/step, "
                  f"harness {timed[-1] * 1e3:.3f} ms/step", flush=True)
    plain, measured = statistics.median(loop), statistics.median(timed)
    paired = statistics.median(t / p for t, p in zip(timed, loop))
    print(f"model {Path(args.model).name}, {args.framework}, batch {args.batch}, {device}, "
          f"threads {os.environ.get('OMP_NUM_THREADS', 'default')}: train_on_batch loop median "
          f"{plain * 1e3:.3f} ms/step, harness median {measured * 1e3:.3f} ms/step, ratio "
          f"harness/loop {measured / plain:.3f}, median of per-round ratios {paired:.3f}, "
          f"loop rounds {min(loop) * 1e3:.3f}-{max(loop) * 1e3:.3f} ms, at "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

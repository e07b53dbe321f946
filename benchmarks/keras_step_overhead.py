"""Seed 002's compiled Keras model: per-step time in the harness vs a plain fit() epoch.

    python benchmarks/keras_step_overhead.py [--model examples/models/keras_mnist.py]
        [--framework keras-jax|keras-torch|keras-tensorflow] [--batch 32]
        [--device cpu|cuda] [--rounds 3] [--epoch-samples 60000]

The same training (the file's own compile(): Adam, sparse categorical cross-entropy, accuracy,
with Dropout, on its integer labels), timed two ways, interleaved, `rounds` times each:
`harness.compare(model=...)` (its worker, autorange, the deterministic-mode check, everything;
its per step = its median per call / the case's steps_per_call) and the way the model's author
trains it, `model.fit(x, y, batch_size=batch, epochs=1, verbose=0)` on the compiled model over
an epoch of `epoch-samples` (MNIST's 60,000 by default; Keras' default shuffle), per step =
the epoch's time / its steps, in a process of its own with the same KERAS_BACKEND. Prints each
round, the medians and the ratio harness / fit. A benchmark, not a test; the parent process
imports no framework.
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

PLAIN_FIT = r'''
import importlib.util, json, statistics, sys, time
import numpy as np
import keras
path, batch, device, samples = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
spec = importlib.util.spec_from_file_location("user_model", path)
user = importlib.util.module_from_spec(spec); spec.loader.exec_module(user)
x = user.inputs(samples, np.random.default_rng([0, samples]))
y = user.targets(samples, np.random.default_rng([0, samples, 1]))
steps = -(-samples // batch)
with keras.device(device):
    model = user.model()          # compiled by the file, as its author wrote it
    def epoch():
        started = time.perf_counter()
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0)  # fit returns when done
        return time.perf_counter() - started
    epoch()                        # the first epoch compiles the step: not a steady one
    epochs = []
    deadline = time.perf_counter() + 3.0
    while len(epochs) < 3 or (time.perf_counter() < deadline and len(epochs) < 20):
        epochs.append(epoch())
print(json.dumps({"median_s": statistics.median(epochs) / steps, "epochs": len(epochs),
                  "steps_per_epoch": steps}))
'''


def plain_fit_seconds(model: str, framework: str, batch: int, device: str,
                      samples: int) -> float:
    """Seconds per step of a plain fit() epoch, in a process of its own."""
    env = dict(os.environ, KERAS_BACKEND=framework.split("-", 1)[1])
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    keras_device = "cpu" if device == "cpu" else "gpu:" + device.split(":", 1)[1]
    ran = subprocess.run([sys.executable, "-c", PLAIN_FIT, model, str(batch), keras_device,
                          str(samples)], capture_output=True, text=True, check=True, env=env)
    return json.loads(ran.stdout.strip().splitlines()[-1])["median_s"]


def harness_seconds(model: str, framework: str, batch: int, device: str,
                    out: Path) -> tuple[float, int]:
    """The harness's seconds per step (its median per call / steps per call) and the steps."""
    import harness

    result = harness.compare(model=model, frameworks=framework, devices=device,
                             variants="as-written", sizes=[batch], out=out, ceilings=False,
                             report=False, progress=False)
    case = result.cells[0].cases[0]
    if case.status.value != "ok":
        raise SystemExit(f"harness cell {case.status.value}: {case.reason}")
    steps = int(case.extra.get("steps_per_call") or 1)
    return case.stats.median / steps, steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "examples/models/keras_mnist.py"))
    parser.add_argument("--framework", default="keras-jax")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epoch-samples", type=int, default=60000)
    args = parser.parse_args()
    device = "cuda:0" if args.device == "cuda" else args.device
    fit, timed, steps = [], [], 0
    with tempfile.TemporaryDirectory(prefix="keras-overhead-") as scratch:
        for round_index in range(args.rounds):  # interleaved: load drifts hit both alike
            fit.append(plain_fit_seconds(args.model, args.framework, args.batch, device,
                                         args.epoch_samples))
            seconds, steps = harness_seconds(args.model, args.framework, args.batch, device,
                                             Path(scratch))
            timed.append(seconds)
            print(f"round {round_index + 1}: plain fit {fit[-1] * 1e3:.3f} ms/step, harness "
                  f"{timed[-1] * 1e3:.3f} ms/step ({steps} steps per call), ratio "
                  f"{timed[-1] / fit[-1]:.3f}", flush=True)
    plain, measured = statistics.median(fit), statistics.median(timed)
    paired = statistics.median(t / p for t, p in zip(timed, fit))
    print(f"model {Path(args.model).name}, {args.framework}, batch {args.batch}, {device}, "
          f"threads {os.environ.get('OMP_NUM_THREADS', 'default')}: plain fit median "
          f"{plain * 1e3:.3f} ms/step ({-(-args.epoch_samples // args.batch)} steps an epoch), "
          f"harness median {measured * 1e3:.3f} ms/step ({steps} steps per call), ratio "
          f"harness/fit {measured / plain:.3f}, median of per-round ratios {paired:.3f}, "
          f"fit rounds {min(fit) * 1e3:.3f}-{max(fit) * 1e3:.3f} ms, at "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The largest batch the harness predicts will fit on a GPU, against the batch that runs out.

    python benchmarks/memory_fit_check.py RUN_DIR [--framework torch] [--device cuda:0]
        [--variant as-written] [--out check.json]

RUN_DIR is a `harness compare --model FILE --sizes ...` run on the GPU (its cells' memory
fitted over the sweep: harness/analysis/memoryfit.py). This script reads both predictions from
the run: the one from the memory each step must hold (weights, gradients, optimizer state,
saved activations, the largest transient; a torch run of today records it), and the one from
the allocator's measured peak (a floor). Then it finds the batch at which the same training
step (the harness's: Adam, mean squared error against targets of the output's shape, inputs
from the file's inputs()) really runs out of device memory: each try in a process of its own
(an out-of-memory error leaves the allocator fragmented), doubling from half the smaller
prediction until a try fails, then bisecting to within 2%. Prints each prediction, the
measured limit and their ratios. A benchmark, not a test: it needs torch and a GPU; the parent
process imports no framework.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ONE_TRY = r'''
import importlib.util, sys
import numpy as np, torch
path, batch, device = sys.argv[1], int(sys.argv[2]), sys.argv[3]
spec = importlib.util.spec_from_file_location("user_model", path)
user = importlib.util.module_from_spec(spec); spec.loader.exec_module(user)
net = user.model().to(device)
optimizer = torch.optim.Adam(net.parameters())
try:
    # the inputs built on the host, as the as-written cell does, then copied once
    x = torch.from_numpy(user.inputs(batch, np.random.default_rng(0))).to(device)
    with torch.no_grad():
        target = torch.zeros_like(net(x[:1])).expand(batch, *net(x[:1]).shape[1:]).clone()
    for _ in range(2):  # the second step holds Adam's state too
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(net(x), target)
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    print("fits", torch.cuda.max_memory_allocated())
except torch.OutOfMemoryError:
    print("out-of-memory")
except (MemoryError, RuntimeError) as error:  # the host ran out building the inputs
    print("host-failed", str(error).splitlines()[0][:200])
'''


def fits(model: str, batch: int, device: str) -> bool | None:
    """True/False: the two steps ran / ran out of device memory; None: the host failed."""
    done = subprocess.run([sys.executable, "-c", ONE_TRY, model, str(batch), device],
                          capture_output=True, text=True, timeout=600)
    words = (done.stdout.strip().splitlines() or ["crashed"])[-1].split()
    print(f"  batch {batch:>12,}: {' '.join(words) or done.stderr[-200:]}", flush=True)
    if words[0] == "fits":
        return True
    return False if words[0] == "out-of-memory" else None


def first_failing_batch(model: str, device: str, start: int) -> tuple[int, int] | None:
    """(largest batch that fit, smallest that ran out), 2% apart; None if the host fails."""
    low, high = 0, max(start, 1)
    while (outcome := fits(model, high, device)) is True:
        low, high = high, high * 2
    if outcome is None:
        return None
    if low == 0:
        low = 1
    while (high - low) > max(1, low // 50):
        middle = (low + high) // 2
        outcome = fits(model, middle, device)
        if outcome is None:
            return None
        low, high = (middle, high) if outcome else (low, middle)
    return low, high


# How the printout names what a prediction was fitted to (MemoryFit.basis).
BASIS_WORDS = {"required": "memory the step must hold",
               "peak": "measured peak (the floor)"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--framework", default="torch")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--variant", default="as-written")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from harness.analysis.memoryfit import largest_batch_that_fits
    from harness.data.store import load_run

    document = load_run(args.run_dir)
    fit = largest_batch_that_fits(document, args.framework, args.device, args.variant)
    if fit is None or fit.largest_batch is None:
        print(f"no prediction in {args.run_dir}: {fit}")
        return 1
    model = str(document.params["model"])
    predictions = {fit.basis: fit.largest_batch}
    if fit.peak_batch is not None:
        predictions["peak"] = fit.peak_batch
    print(f"predicted: {fit}")
    for basis, batch in predictions.items():
        print(f"  from the {BASIS_WORDS[basis]}: {batch:,}")
    found = first_failing_batch(model, args.device, max(1, min(predictions.values()) // 2))
    if found is None:
        print("the host ran out of memory before the device: no device limit measured")
        return 1
    fitted, failed = found
    ratios = {basis: batch / fitted for basis, batch in predictions.items()}
    print(f"measured: batch {fitted:,} fits, {failed:,} runs out")
    for basis, ratio in ratios.items():
        print(f"  predicted from the {BASIS_WORDS[basis]} / measured: {ratio:.3f} "
              f"({(ratio - 1) * 100:+.1f}%)")
    if args.out:
        args.out.write_text(json.dumps({
            "model": model, "predicted": fit.largest_batch, "basis": fit.basis,
            "predicted_by_basis": predictions, "fits": fitted, "runs_out": failed,
            "ratio": ratios[fit.basis], "ratio_by_basis": ratios}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

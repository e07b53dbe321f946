"""The edge-aligned energy pass against today's 2 s pass and a long reference, on one GPU.

For each step (a torch matmul loop at n=1024 and n=4096, and a small MLP training step at
batch 32, host-bound), REPS times in turn: (a) the pass the harness ran before (two reads of
NVML's energy counter around EXTEND_TO_S of calls: two_reads below), (b) the edge-aligned pass
(edge_energy_pass: the power between two counter updates x the pass's own seconds per call; the
same pass's log also gives (b1), its span opened one update later, a guard against a counter
that reports late), (c) a long
reference (two reads around REFERENCE_S of calls: one 100 ms step is then 1%). Prints energy per
call, each against the median of the references, the pass's seconds, its seconds per call (a
poller that slowed the loop would show there) and the edge figures (span, updates, bracket,
counter period).

Only torch, pynvml and harness modules are imported. Run from the repository root:
    PYTHONPATH=$PWD python3 benchmarks/energy_edges_check.py [--reps 3] [--reference-s 10]
(about 2.5 minutes with the defaults on an H100: 148 s, 2026-11-24).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # after the path, so that `harness` resolves from a checkout

from harness.measure import counteredges, edgepass, energycounters, gpustate

Step = Callable[[], object]


def matmul_step(n: int) -> Step:
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    return lambda: a @ b


def mlp_step(batch: int) -> Step:
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(batch, 784, device="cuda")
    labels = torch.randint(0, 10, (batch,), device="cuda")

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    return step


def seconds_per_call(step: Step, seconds: float = 0.3) -> float:
    """Warm STEP up, then its seconds per call over about SECONDS (synchronized at the end)."""
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        step()
        calls += 1
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / calls


def two_reads(counter: energycounters.EnergyCounter, step: Step, per_call: float,
              target_s: float, max_chunks: int = 8) -> dict[str, float]:
    """Two reads of COUNTER around about TARGET_S of back-to-back calls (the pass the harness
    ran before the edge-aligned one; over a long window, the reference). The calls go in
    chunks sized from the rate seen so far, with a sync after each: PER_CALL is only an
    estimate, and a chunk count fixed from it once left windows of 0.38 s where 2 s were
    meant."""
    window = energycounters.EnergyWindow(counter)
    torch.cuda.synchronize()
    window.begin()
    started, calls = time.perf_counter(), 0
    chunk = max(1, math.ceil(target_s / max(per_call, 1e-9)))
    for _ in range(max_chunks):
        for _ in range(chunk):
            step()
        torch.cuda.synchronize()
        calls += chunk
        elapsed = time.perf_counter() - started
        if elapsed >= target_s:
            break
        rate = elapsed / calls if elapsed > 0 else per_call
        chunk = max(1, math.ceil((target_s - elapsed) / max(rate, 1e-9) * 1.1))
    window.end(calls)
    joules = window.joules
    if joules is None:
        raise SystemExit("the NVML energy counter gave no reading")
    return {"j_per_call": joules / window.calls, "watts": joules / window.seconds,
            "seconds": window.seconds,
            "s_per_call": window.seconds / window.calls}


def edges(counter: energycounters.EnergyCounter, step: Step,
          per_call: float) -> list[dict[str, float]]:
    """(b) and (b1) from one edge-aligned pass; an empty span falls back to its two reads."""
    found = edgepass.edge_energy_pass({"device": counter}, step, torch.cuda.synchronize,
                                      per_call)
    rows = []
    for settle in (counteredges.EDGE_SETTLE_UPDATES, counteredges.EDGE_SETTLE_UPDATES + 1):
        span = counteredges.edge_span(found.edges["device"], found.opened_s, found.closed_s, settle)
        row = {"seconds": found.seconds, "s_per_call": found.seconds / found.calls,
               "period": found.periods["device"] or float("nan")}
        if span is None:
            joules = found.windows["device"].joules or float("nan")
            row |= {"j_per_call": joules / found.calls, "watts": joules / found.seconds,
                    "span": float("nan")}
        else:
            row |= {"j_per_call": span.watts * found.seconds / found.calls, "watts": span.watts,
                    "span": span.seconds, "updates": span.updates,
                    "bracket_ms": span.resolution_s * 1e3, "bound": span.error_bound}
        rows.append(row)
    return rows


def measure(counter: energycounters.EnergyCounter, step: Step, reps: int,
            reference_s: float) -> dict[str, list[dict[str, float]]]:
    per_call = seconds_per_call(step)
    found: dict[str, list[dict[str, float]]] = {"a": [], "b": [], "b1": [], "c": []}
    for _ in range(reps):  # alternated, so that a drift in the board's power hits all three
        found["a"].append(two_reads(counter, step, per_call, edgepass.EXTEND_TO_S))
        edge_rows = edges(counter, step, per_call)
        found["b"].append(edge_rows[0])
        found["b1"].append(edge_rows[1])
        found["c"].append(two_reads(counter, step, per_call, reference_s))
    return found


MODES = {"a": "today's 2 s pass", "b": "edge pass", "b1": "edge, 1 update later",
         "c": "reference"}


def print_table(name: str, found: dict[str, list[dict[str, float]]]) -> None:
    reference = statistics.median(row["j_per_call"] for row in found["c"])
    print(f"\n{name}: reference {reference * 1e3:.4g} mJ per call (median of "
          f"{len(found['c'])}); W, pass s and us/call: medians")
    print(f"  {'mode':<18} {'mJ per call, each rep':<30} {'vs ref, each rep':<24} "
          f"{'W':>6} {'pass s':>7} {'us/call':>8}  edges")
    for mode, rows in found.items():
        joules = " ".join(f"{row['j_per_call'] * 1e3:9.4g}" for row in rows)
        errors = " ".join(f"{(row['j_per_call'] / reference - 1) * 100:+6.1f}%" for row in rows)
        seconds = statistics.median(row["seconds"] for row in rows)
        watts = statistics.median(row["watts"] for row in rows)
        per_call = statistics.median(row["s_per_call"] for row in rows) * 1e6
        extra = ""
        if mode.startswith("b"):
            extra = "; ".join(
                f"{row['span']:.2f} s/{row.get('updates', 0):.0f} upd/"
                f"{row.get('bracket_ms', float('nan')):.1f} ms/+-{row.get('bound', 0) * 100:.1f}%"
                for row in rows) + f"; period {rows[0]['period'] * 1e3:.1f} ms"
        print(f"  {MODES[mode]:<18} {joules:<30} {errors:<24} {watts:6.1f} {seconds:7.2f} "
              f"{per_call:8.1f}  {extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description="The edge-aligned energy pass against "
                                     "today's 2 s pass and a long reference, on one GPU.")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--reference-s", type=float, default=10.0)
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args()
    gpu = gpustate.open_gpu(args.device)
    if isinstance(gpu, str):
        raise SystemExit(gpu)
    torch.cuda.set_device(args.device)
    counter = energycounters.NvmlEnergy(gpu)
    print(f"{gpu.name}: edge pass settles {counteredges.EDGE_SETTLE_UPDATES} update(s), span >= "
          f"{edgepass.EDGE_MIN_UPDATES} periods and {edgepass.EDGE_MIN_SPAN_S} s, poll "
          f"{edgepass.POLL_S * 1e3:.0f} ms; edges column: span/updates/worse bracket/error bound")
    steps = {"matmul n=1024": lambda: matmul_step(1024),
             "matmul n=4096": lambda: matmul_step(4096),
             "MLP train step, batch 32": lambda: mlp_step(32)}
    for name, build in steps.items():
        print_table(name, measure(counter, build(), args.reps, args.reference_s))


if __name__ == "__main__":
    main()

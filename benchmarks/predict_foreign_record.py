"""Record the validation zoo's step features on this CPU, with no GPU: the foreign-CPU side of
the GPU prediction's validation (issue 61, part 1; docs/predict.md, "From a foreign CPU").

    PYTHONPATH=. python3 benchmarks/predict_foreign_record.py --out foreign.json --process 1 \
        [--models a,b] [--batches 1,4,16,64,256,1024]

The zoo's GPU steps are already stored (benchmarks/data/predict-validation-*.json.gz, each
measured with features recorded on the GPU host's own CPU). This records the same models'
features here, the way the validation does (predict_measure.measure_cpu: a warm-up call,
2-7 timed calls, then the fastest of three recorded passes), so
benchmarks/predict_foreign.py can predict the stored GPU steps again from another CPU's
features. Per cell it keeps what other processes used of the machine while it was recorded
(harness.measure.hostload: the contention every timed cell carries), and per process this
CPU's host-speed measures several times: the two loops of harness/predict/hostspeed.py and a
tiny eager op's dispatch (the profile's host.dispatch, measured the same way on this CPU).
One process is one repeat: run it several times (`--process N`) to see the spread between
processes; rows are appended to --out (rewritten atomically after each cell).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # predict_zoo, predict_measure

import predict_measure
import predict_zoo
import torch
from predictlab import foreign

from harness.backends.torch.device import open_device
from harness.backends.torch.gpuprofile import Bench, host_dispatch
from harness.data.store import write_json_atomic
from harness.measure import hostload
from harness.measure.envinfo import cpu_model
from harness.predict import hostspeed
from harness.predict.timed import policy

# The 4x sweep every stored lending measured (the doubling sweeps' 2, 8, ... are left out:
# 2 loaded cores, and the host-bound small batches are where a foreign CPU's error lives).
DEFAULT_BATCHES = (1, 4, 16, 64, 256, 1024)
CPU_CAP_S = 1.5  # as the validation: a CPU step longer than this ends the model's sweep


def speed_now() -> dict[str, Any]:
    """This CPU's host-speed measures now: the two loops and a tiny eager op's dispatch."""
    loops = hostspeed.measure(policy(quick=True))
    dispatch = host_dispatch(Bench(open_device("cpu"), quick=True))["host.dispatch"].rows
    return {"python_loop_s": loops["host.python"].rows[0].median_s,
            "numpy_loop_s": loops["host.numpy"].rows[0].median_s,
            "dispatch_add_s": dispatch[0].median_s, "dispatch_add__s": dispatch[1].median_s,
            "load_1min": foreign.load_average()}


def recorded_cell(entry: predict_zoo.ZooModel, batch: int) -> dict[str, Any]:
    """One (model, batch): the CPU step, its features, and the contention while recorded."""
    start = hostload.snapshot()
    started = time.monotonic()
    timing, features = predict_measure.measure_cpu(entry, batch)
    other = hostload.other_load(start, hostload.snapshot())
    return {"model": entry.name, "batch": batch,
            "cpu_s": timing["median_s"], "cpu_samples_s": timing["samples_s"],
            "other_cores": None if other is None else round(other.other_cores, 3),
            "steal_cores": None if other is None else round(other.steal_cores, 3),
            "seconds": round(time.monotonic() - started, 2),
            "features": foreign.compact_features(features.record())}


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--process", type=int, required=True, help="this repeat's number")
    parser.add_argument("--models", default="", help="comma-separated zoo names (default all)")
    parser.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)))
    parser.add_argument("--threads", type=int, default=0, help="torch's CPU threads")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    predict_measure.float32_switches(True)
    models, skipped = predict_zoo.zoo()
    wanted = set(args.models.split(",")) if args.models else None
    batches = [int(text) for text in args.batches.split(",")]
    document = (json.loads(args.out.read_text()) if args.out.exists()
                else foreign.empty_document())
    process: dict[str, Any] = {
        "process": args.process, "created": datetime.now(timezone.utc).isoformat(
            timespec="seconds"), "host_cpu": cpu_model(), "torch": torch.__version__,
        "python": sys.version.split()[0], "cpu_threads": torch.get_num_threads(),
        "zoo_skipped": skipped, "speeds": [speed_now()]}
    document["processes"].append(process)
    for entry in models:
        if wanted is not None and entry.name not in wanted:
            continue
        for batch in [batch for batch in batches if batch in entry.batches]:
            row = {"process": args.process, **recorded_cell(entry, batch)}
            document["rows"].append(row)
            write_json_atomic(args.out, document)
            print(f"{entry.name:<20} b{batch:<5} cpu {row['cpu_s'] * 1e3:9.2f} ms  other "
                  f"{row['other_cores']} cores  [{row['seconds']} s]", flush=True)
            if row["cpu_s"] > CPU_CAP_S:
                break
        process["speeds"].append(speed_now())
        write_json_atomic(args.out, document)
    process["python_loop_median_s"] = statistics.median(
        speed["python_loop_s"] for speed in process["speeds"])
    write_json_atomic(args.out, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())

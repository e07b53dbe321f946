"""A user's first run of their own model on a machine: where the whole command's time goes.

    python benchmarks/firstrun.py [--model examples/models/lstm_tagger.py ...]
        [--sizes 16,64] [--device cpu] [--rounds 3] [--harness-root CHECKOUT] [--json OUT]

Each model's `harness compare --model FILE` runs once in a fresh cache folder (XDG_CACHE_HOME
a new empty folder, HARNESS_CACHE_DIR unset), as on a machine's first run: no remembered
ceilings, no remembered warm-up or FLOP counts. Prints one markdown row per model: the whole
command (the wall clock around it), the run (run.json's start to end), the part inside the
timed calls, the own cost (the whole less that part) and its largest parts (run.json's
command_cost parts outside the run, the run's own phases as the overhead line sums them), with
the machine's load average before and after, since a shared machine slows every part.
--harness-root: the checkout to run (PYTHONPATH), e.g. an older one for a before/after; one
without command_cost is measured around the command alone. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_MODELS = ("examples/models/lstm_tagger.py", "examples/models/small_cnn.py")


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def run_first(model: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One first run of MODEL in FOLDER (its own cache and results); its figures."""
    command = [sys.executable, "-m", "harness.cli", "compare", "--model",
               str(Path(model).resolve()),
               "--sizes", args.sizes, "--device", args.device, "--rounds", str(args.rounds),
               "--out", str(folder / "results")]
    env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache"),
           "PYTHONPATH": str(Path(args.harness_root).resolve())}
    env.pop("HARNESS_CACHE_DIR", None)
    load_before = load_average()
    started = time.time()
    # In the checkout: `python -m` puts the working folder before PYTHONPATH.
    done = subprocess.run(command, env=env, cwd=args.harness_root, capture_output=True,
                          text=True, check=False)
    wall = time.time() - started
    run_dirs = sorted((folder / "results").glob("*/run.json"))
    if done.returncode != 0 or not run_dirs:
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-2000:])
        raise SystemExit(f"{model}: exit {done.returncode}")
    document = json.loads(run_dirs[-1].read_text())
    shown = [*command[3:5], model, *command[6:-2]]  # the model as given, not resolved
    return {"model": model, "command": " ".join(["harness", *shown]),
            "wall_s": wall, "load_before": load_before, "load_after": load_average(),
            **figures(document, wall),
            "own_cost_line": next((line for line in done.stdout.splitlines()
                                   if line.startswith("own cost of the whole command")), "")}


def figures(document: dict[str, Any], wall: float) -> dict[str, Any]:
    """The run's and the command's figures from run.json (harness.analysis.stats reads the
    run's phases as the overhead line does)."""
    from harness.analysis.stats import run_overhead
    from harness.data.results import RunDocument

    typed = RunDocument.from_dict(document)
    overhead = run_overhead(typed)
    run_s = (typed.finished or 0.0) - (typed.started or 0.0)
    timed = overhead.timed_s if overhead else 0.0
    record = document.get("command_cost") or {}
    parts: dict[str, float] = dict(overhead.phases) if overhead else {}
    outside = {name: seconds for name, seconds in (record.get("parts") or {}).items()
               if name != "the run"}
    if not outside:  # a checkout without the record: the command around the run, as one
        outside = {"outside the run (start, inspection, report, check)": wall - run_s}
    parts.update(outside)
    whole = float(record.get("whole_s") or wall)
    return {"whole_s": whole, "run_s": run_s, "timed_s": timed, "own_s": whole - timed,
            "parts": parts, "ceilings": ceilings_said(document)}


def ceilings_said(document: dict[str, Any]) -> str:
    entries = document.get("ceilings") or {}
    states = {("deferred" if entry.get("deferred") else "theoretical" if
               entry.get("theoretical_only") else "probed") for entry in entries.values()}
    return ", ".join(sorted(states)) or "none"


def row(result: dict[str, Any], largest: int = 3) -> str:
    top = sorted(result["parts"].items(), key=lambda item: -item[1])[:largest]
    parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in top)
    share = result["own_s"] / result["whole_s"] if result["whole_s"] else 0.0
    return (f"| {Path(result['model']).name}, `{result['command']}` | {result['whole_s']:.1f} s "
            f"| {result['run_s']:.1f} s | {result['timed_s']:.1f} s | {result['own_s']:.1f} s "
            f"({share:.0%}): {parts} | {result['ceilings']} | {result['load_before']} -> "
            f"{result['load_after']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", help="model files (default: "
                        + ", ".join(DEFAULT_MODELS) + ")")
    parser.add_argument("--sizes", default="16,64")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--harness-root", default=str(ROOT))
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    results = []
    print("| model, command | whole command | run | inside the timed calls | own cost, "
          "largest parts | ceilings | load (1, 5, 15 min) before -> after |")
    print("|---|---|---|---|---|---|---|")
    for model in args.model or DEFAULT_MODELS:
        with tempfile.TemporaryDirectory(prefix="harness-firstrun-") as folder:
            result = run_first(model, args, Path(folder))
        results.append(result)
        print(row(result), flush=True)
    for result in results:
        if result["own_cost_line"]:
            print(f"{Path(result['model']).name}: {result['own_cost_line']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""The settled warm-up against the fixed one (issue 42): same medians, less time?

    python benchmarks/warmup_check.py --pairs 2 --json warmup.json

Runs each target (`harness compare` on the CPU: the example LSTM and small CNN, torch and
numpy matmul) as pairs of runs, fixed warm-up then settled warm-up (alternating, so a slow
minute falls on both), one round each. The rule is switched in the workers by a
`sitecustomize.py` this script writes into a scratch folder on PYTHONPATH: in "fixed" runs it
gives every warm-up settle_calls=0 (each runs to warmup_s, the rule before issue 42). The same
hook appends every warm-up's single-call times to a JSON-lines file, so the fixed runs' long
sequences also say, offline, where each (window, band) rule would have stopped and how far
its window's median lay from the warm level (the median of the fixed warm-up's last quarter).

Prints, per target and case: the median per call under each rule, the pooled IQR (the noise)
and whether the difference lies within it; the warm-up calls and seconds under each rule; then
the offline table of rules. Needs 2 free cores to mean much; on a shared machine compare the
warm-up seconds, not walls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.data.store import load_run  # noqa: E402 - after the path above
from harness.measure.timing import settled  # noqa: E402

HARNESS_MAIN = "import sys; from harness.cli import main; sys.argv[0] = 'harness'; sys.exit(main())"
COMMON = ["--device", "cpu", "--rounds", "1", "--no-ceilings", "--no-report"]
TARGETS: dict[str, list[str]] = {
    "lstm": ["--model", "examples/models/lstm_tagger.py", "--sizes", "8,32,128"],
    "small-cnn": ["--model", "examples/models/small_cnn.py", "--sizes", "8,32,128"],
    "matmul": ["--workload", "matmul", "--framework", "torch,numpy", "--sizes", "32,128,512"],
}
# Written into the scratch folder: runs in every Python process of the run (CLI, warm
# process, workers); only the workers reach the patched function.
SITECUSTOMIZE = '''
import json, os
from dataclasses import replace
try:
    from harness.measure import timing
except ImportError:  # the CLI before its path is set: it times nothing
    timing = None
if timing is not None and os.environ.get("WARMUP_CHECK_MODE"):
    original = timing.warm_up

    def warm_up(step, synchronize, policy):
        if os.environ["WARMUP_CHECK_MODE"] == "fixed":
            policy = replace(policy, settle_calls=0)
        singles, stopped = original(step, synchronize, policy)
        with open(os.environ["WARMUP_CHECK_DUMP"], "a") as dump:
            dump.write(json.dumps({"mode": os.environ["WARMUP_CHECK_MODE"],
                                   "singles": singles, "stopped": stopped}) + "\\n")
        return singles, stopped

    timing.warm_up = warm_up
'''


def run(target: str, mode: str, scratch: Path, dump: Path) -> Path:
    """One `harness compare` of TARGET under the warm-up MODE; its run folder."""
    out = scratch / f"{target}-{mode}"
    before = set(out.glob("*/run.json"))
    env = dict(os.environ, WARMUP_CHECK_MODE=mode, WARMUP_CHECK_DUMP=str(dump),
               PYTHONPATH=os.pathsep.join([str(scratch / "hook"), str(ROOT)]))
    command = [sys.executable, "-c", HARNESS_MAIN, "compare", *TARGETS[target], *COMMON,
               "--out", str(out)]
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    written = sorted(set(out.glob("*/run.json")) - before, key=lambda path: path.stat().st_mtime)
    if not written:
        raise SystemExit(f"{target} {mode}: no run folder:\n{completed.stderr[-2000:]}")
    return written[-1].parent


def case_figures(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per case ('torch size 32'): samples, warm-up calls and seconds, and 'warm-up and
    calibration' is read per cell (it is a phase of the worker, not of a case)."""
    document = load_run(run_dir)
    found: dict[str, dict[str, Any]] = {}
    for cell in document.cells:
        for case in cell.cases:
            if not case.samples:
                continue
            size = next(iter(case.case.values()), "")
            warmup = case.extra.get("warmup") or {}
            found[f"{cell.cell.framework} {cell.cell.variant} size {size}"] = {
                "samples": list(case.samples), "warmup_calls": warmup.get("calls"),
                "warmup_s": warmup.get("seconds")}
    return found


def compare(fixed: list[dict[str, dict[str, Any]]],
            settled_runs: list[dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per case: both rules' medians, the noise (the larger pooled IQR) and the warm-up cost."""
    rows = []
    for name in fixed[0]:
        pooled = {label: [value for run in runs if name in run for value in run[name]["samples"]]
                  for label, runs in (("fixed", fixed), ("settled", settled_runs))}
        if not all(pooled.values()):
            continue
        medians = {label: statistics.median(values) for label, values in pooled.items()}
        noise = max(quartile_range(values) for values in pooled.values())
        rows.append({
            "case": name, "fixed_median_s": medians["fixed"],
            "settled_median_s": medians["settled"],
            "difference": medians["settled"] / medians["fixed"] - 1,
            "noise": noise / medians["fixed"],
            "within_noise": abs(medians["settled"] - medians["fixed"]) <= noise,
            **{f"{label}_warmup_{what}": statistics.median(
                run[name][f"warmup_{what}"] for run in runs if name in run)
               for label, runs in (("fixed", fixed), ("settled", settled_runs))
               for what in ("calls", "s")}})
    return rows


def quartile_range(values: list[float]) -> float:
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [0.0, 0.0, 0.0]
    return quartiles[2] - quartiles[0]


def offline_rules(dump: Path, windows: tuple[int, ...] = (3, 5, 8),
                  bands: tuple[float, ...] = (0.02, 0.05, 0.10)) -> list[dict[str, Any]]:
    """Each (window, band) rule, with and without the level (two windows' medians and a flat
    trend: timing.settled's `level`), replayed on the fixed warm-ups' sequences: the calls it
    would have run, and how far its window's median lay from the warm level (worst and
    median)."""
    sequences = [entry["singles"] for line in dump.read_text().splitlines()
                 if (entry := json.loads(line))["mode"] == "fixed" and len(entry["singles"]) >= 20]
    rows = []
    for level in (False, True):
        for window in windows:
            for band in bands:
                errors, calls = [], []
                for singles in sequences:
                    warm = statistics.median(singles[-max(5, len(singles) // 4):])
                    stop = next((count for count in range(2, len(singles) + 1)
                                 if settled(singles[:count], window, band, level)),
                                len(singles))
                    calls.append(stop)
                    errors.append(abs(statistics.median(singles[max(0, stop - window):stop])
                                      / warm - 1))
                rows.append({"level": level, "window": window, "band": band,
                             "sequences": len(sequences),
                             "median_calls": statistics.median(calls), "max_calls": max(calls),
                             "median_error": statistics.median(errors),
                             "worst_error": max(errors)})
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2, help="fixed/settled pairs per target")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="harness-warmup-") as folder:
        scratch = Path(folder)
        (scratch / "hook").mkdir()
        (scratch / "hook" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        dump = scratch / "warmups.jsonl"
        rows: list[dict[str, Any]] = []
        for target in options.targets.split(","):
            runs: dict[str, list[dict[str, dict[str, Any]]]] = {"fixed": [], "settled": []}
            for _ in range(options.pairs):
                for mode in ("fixed", "settled"):
                    runs[mode].append(case_figures(run(target, mode, scratch, dump)))
            rows += [{"target": target, **row} for row in compare(runs["fixed"], runs["settled"])]
        rules = offline_rules(dump)
    print("| case | fixed median | settled median | difference | noise (IQR) | within | "
          "warm-up calls fixed / settled | warm-up s fixed / settled |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for row in rows:
        print(f"| {row['target']} {row['case']} | {row['fixed_median_s'] * 1e6:.1f} us | "
              f"{row['settled_median_s'] * 1e6:.1f} us | {row['difference']:+.1%} | "
              f"{row['noise']:.1%} | {'yes' if row['within_noise'] else 'NO'} | "
              f"{row['fixed_warmup_calls']:.0f} / {row['settled_warmup_calls']:.0f} | "
              f"{row['fixed_warmup_s']:.3f} / {row['settled_warmup_s']:.3f} |")
    saved = sum(row["fixed_warmup_s"] - row["settled_warmup_s"] for row in rows)
    print(f"warm-up seconds saved per run of all these cases (medians): {saved:.2f} s")
    print("\n| level | window | band | sequences | median calls | most calls | median error | "
          "worst |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for rule in rules:
        print(f"| {'yes' if rule['level'] else 'no'} | {rule['window']} | {rule['band']:.0%} | "
              f"{rule['sequences']} | "
              f"{rule['median_calls']:.0f} | {rule['max_calls']} | "
              f"{rule['median_error']:.1%} | {rule['worst_error']:.1%} |")
    if options.json:
        options.json.write_text(json.dumps({"cases": rows, "rules": rules}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

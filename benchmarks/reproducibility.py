"""Does a verdict survive a re-run? Run the same `harness compare` K times and count the
verdicts that contradict each other between runs.

    python benchmarks/reproducibility.py --runs 3 --out /tmp/repro -- \\
        --workload matmul --quick --device cpu --no-ceilings --rounds 3

Every pair of cells (same variant, device and size) is judged in every run by the report's
one noise rule (harness.analysis.noise via harness.report.tables.gap_verdict):
"A beyond B", "B beyond A" or "within the noise". Between two runs a pair

- contradicts when one run says A beyond B and another B beyond A (the worst failure: each
  run's verdict claimed to be beyond the noise);
- flips when one run says beyond and another within (the verdict did not survive);
- agrees otherwise.

The GPU-vs-CPU answer (harness.report.views.crossover) contradicts when the kinds differ
(GPU always faster vs CPU always faster, a crossover vs none) or two crossover sizes are not
adjacent in the sweep; an adjacent crossover size is agreement. It prints one JSON document
(also written to OUT/reproducibility.json) with the wall time of every run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run_compare(args: list[str], out: Path) -> tuple[Path, float]:
    """One `harness compare` into OUT; (its run folder, wall seconds)."""
    before = set(out.glob("*/run.json"))
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness.cli", "compare", *args, "--no-report",
                    "--out", str(out)], cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    new = sorted(set(out.glob("*/run.json")) - before)
    if not new:
        raise SystemExit("harness compare wrote no run folder")
    return new[-1].parent, wall


def run_verdicts(run_dir: Path) -> tuple[dict[tuple[str, ...], str], dict[tuple[str, ...],
                                                                           dict[str, Any]]]:
    """(pair -> 'A'|'B'|'within'|'not judged', (machine, variant, framework) -> crossover)."""
    from harness.analysis.crossover import crossovers
    from harness.report import tables as t
    from harness.report.load import load_runs

    run_set = load_runs([run_dir])
    runs = t.assign_experiments(run_set.runs)
    prepared, _ = t.prepare(run_set.measurements, runs)
    stats = t.case_stats(prepared)
    valid = stats[stats["valid"]]
    pairs: dict[tuple[str, ...], str] = {}
    for (variant, device, size), group in valid.groupby(["variant", "device", "size_label"]):
        rows = {row["framework"]: row for _, row in group.iterrows()}
        for first, second in itertools.combinations(sorted(rows), 2):
            verdict = t.gap_verdict(rows[first], rows[second])
            faster = first if rows[first]["median_s"] <= rows[second]["median_s"] else second
            answer = ("not judged" if not verdict.judged else
                      faster if verdict.significant else "within")
            pairs[(variant, device, str(size), first, second)] = answer
    answers: dict[tuple[str, ...], dict[str, Any]] = {}
    table = crossovers(stats)
    for _, row in table.iterrows():
        if row["kind"] != "no-overlap":
            answers[(row["variant"], row["framework"])] = {
                "kind": row["kind"], "size": row["size"],
                "sizes": sorted(stats["size_value"].dropna().unique().tolist())}
    return pairs, answers


def _adjacent(first: Any, second: Any, sizes: list[float]) -> bool:
    if first == second:
        return True
    if first in sizes and second in sizes:
        return abs(sizes.index(first) - sizes.index(second)) <= 1
    return False


def compare_runs(verdicts: list[dict[tuple[str, ...], str]],
                 gpu: list[dict[tuple[str, ...], dict[str, Any]]]) -> dict[str, Any]:
    """Counts of contradicting, flipped and agreeing judgements over every pair of runs."""
    counts = {"pair_comparisons": 0, "contradictions": 0, "flips": 0, "agreements": 0,
              "gpu_comparisons": 0, "gpu_contradictions": 0}
    examples: list[str] = []
    for one, other in itertools.combinations(range(len(verdicts)), 2):
        for key in set(verdicts[one]) & set(verdicts[other]):
            a, b = verdicts[one][key], verdicts[other][key]
            if "not judged" in (a, b):
                continue
            counts["pair_comparisons"] += 1
            if a == b:
                counts["agreements"] += 1
            elif "within" in (a, b):
                counts["flips"] += 1
            else:
                counts["contradictions"] += 1
                examples.append(f"{' '.join(key)}: run {one + 1} says {a}, run {other + 1} {b}")
        for key in set(gpu[one]) & set(gpu[other]):
            a, b = gpu[one][key], gpu[other][key]
            counts["gpu_comparisons"] += 1
            same = a["kind"] == b["kind"] and (a["kind"] != "crossover"
                                               or _adjacent(a["size"], b["size"], a["sizes"]))
            if not same:
                counts["gpu_contradictions"] += 1
                examples.append(f"GPU vs CPU {' '.join(key)}: {a['kind']} {a['size']} vs "
                                f"{b['kind']} {b['size']}")
    return {**counts, "examples": examples[:20]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("compare_args", nargs=argparse.REMAINDER,
                        help="after --: the arguments of harness compare")
    options = parser.parse_args()
    args = [arg for arg in options.compare_args if arg != "--"]
    options.out.mkdir(parents=True, exist_ok=True)
    folders, walls = [], []
    for number in range(options.runs):
        folder, wall = run_compare(args, options.out)
        folders.append(folder)
        walls.append(wall)
        print(f"run {number + 1}/{options.runs}: {folder.name} in {wall:.1f} s", file=sys.stderr)
    results = [run_verdicts(folder) for folder in folders]
    summary = {"compare_args": args, "runs": [str(folder) for folder in folders],
               "wall_s": [round(wall, 1) for wall in walls],
               **compare_runs([pairs for pairs, _ in results], [gpu for _, gpu in results]),
               "verdicts": [{" ".join(key): answer for key, answer in pairs.items()}
                            for pairs, _ in results]}
    text = json.dumps(summary, indent=2, default=str)
    (options.out / "reproducibility.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

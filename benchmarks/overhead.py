"""The harness's own cost: a `harness compare` command run N times, its wall time split into the
time inside the timed calls and everything else, with the parts the run itself recorded.

    python benchmarks/overhead.py --runs 3 -- harness compare --workload mnist-wide \\
        --param epochs=1 --no-ceilings --rounds 3
    python benchmarks/overhead.py --runs 1 --json overhead.json -- harness compare ...

Each run gets its own `--out` folder (in a scratch folder unless the command names one) and
its wall time is read here, around the whole command (Python's start, the report, the
saving): the figure a user waits for. The rest comes from the run's run.json: the seconds
inside the timed calls (cold calls and warm samples, every cell and round) and the cells'
named phases (worker starts and imports, warm-up and calibration, energy, checks, ...), as
the CLI's `harness overhead:` line sums them; "outside the workers" is the run's own wall
time that no worker accounts for (ceilings, shared weights, warm processes, saving), and
"outside the run" is the command's wall time before the run started and after it ended
(imports of the CLI, the report). Prints a table per run and its median, then the JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.analysis.stats import harness_cost  # noqa: E402 - after the path above
from harness.data.store import load_run  # noqa: E402

OUTSIDE_WORKERS = "outside the workers (ceilings, shared weights, warm processes, saving)"
OUTSIDE_RUN = "outside the run (CLI start, report)"
# `harness` run from ROOT (the current folder comes first on sys.path with -c), so that a copy
# of the tree measures its own code and workers (the runner puts the checkout on PYTHONPATH).
HARNESS_MAIN = "import sys; from harness.cli import main; sys.argv[0] = 'harness'; sys.exit(main())"


def run_once(command: list[str], out_dir: Path) -> dict[str, Any]:
    """Run the command once with its own --out; the figures of the run folder it wrote."""
    if "--out" not in command:
        command = [*command, "--out", str(out_dir)]
        out_dir.mkdir(parents=True, exist_ok=True)
    else:
        out_dir = Path(command[command.index("--out") + 1])
    before = {path.parent for path in out_dir.glob("*/run.json")}
    began = time.perf_counter()
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall_s = time.perf_counter() - began
    written = sorted({path.parent for path in out_dir.glob("*/run.json")} - before,
                     key=lambda folder: folder.stat().st_mtime)
    if not written:
        raise SystemExit(f"no run folder under {out_dir} (exit {completed.returncode}):\n"
                         f"{completed.stderr[-2000:]}")
    figures = run_figures(written[-1], wall_s)
    figures["exit_code"] = completed.returncode
    figures["overhead_line"] = next((line.strip() for line in completed.stdout.splitlines()
                                     if line.strip().startswith("harness overhead:")), "")
    return figures


def run_figures(run_dir: Path, wall_s: float) -> dict[str, Any]:
    """Wall, timed and own cost of one run folder, its parts by name (seconds)."""
    document = load_run(run_dir)
    cost = harness_cost(document.cells)
    run_wall_s = ((document.finished - document.started)
                  if document.finished is not None and document.started is not None else 0.0)
    recorded_s = max(run_wall_s, cost.wall_s)
    parts = dict(cost.phases)
    parts[OUTSIDE_WORKERS] = max(0.0, recorded_s - cost.wall_s)
    parts[OUTSIDE_RUN] = max(0.0, wall_s - recorded_s)
    own_s = max(0.0, wall_s - cost.timed_s)
    return {"run_dir": str(run_dir), "wall_s": wall_s, "run_wall_s": run_wall_s,
            "timed_s": cost.timed_s, "own_s": own_s, "own_share": own_s / wall_s,
            "workers": cost.workers,
            "parts": dict(sorted(parts.items(), key=lambda item: -item[1]))}


def median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs (parts a run lacks count as 0 s)."""
    names = {name for run in runs for name in run["parts"]}
    parts = {name: statistics.median(run["parts"].get(name, 0.0) for run in runs)
             for name in names}
    return {key: statistics.median(run[key] for run in runs)
            for key in ("wall_s", "run_wall_s", "timed_s", "own_s", "own_share", "workers")} | {
        "parts": dict(sorted(parts.items(), key=lambda item: -item[1]))}


def table(runs: list[dict[str, Any]], median: dict[str, Any]) -> str:
    """A markdown table: one column per run and the median, one row per figure and part."""
    columns = [*[f"run {number}" for number in range(1, len(runs) + 1)], "median"]
    rows = [("wall (s)", "wall_s"), ("inside the timed calls (s)", "timed_s"),
            ("the harness's own cost (s)", "own_s")]
    everyone = [*runs, median]
    lines = ["| figure | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for label, key in rows:
        lines.append(f"| {label} | " + " | ".join(f"{run[key]:.1f}" for run in everyone) + " |")
    lines.append("| own cost / wall | " + " | ".join(f"{run['own_share']:.0%}"
                                                     for run in everyone) + " |")
    for name in median["parts"]:
        lines.append(f"| - {name} | " + " | ".join(f"{run['parts'].get(name, 0.0):.1f}"
                                                   for run in everyone) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="times to run the command")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- harness compare ... (the command to measure)")
    options = parser.parse_args(argv)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("give the command after --")
    if command[0] == "harness":  # this checkout's harness (not whichever one is installed)
        command[:1] = [sys.executable, "-c", HARNESS_MAIN]
    with tempfile.TemporaryDirectory(prefix="harness-overhead-") as scratch:
        runs = [run_once(command, Path(scratch) / f"run-{number}")
                for number in range(1, options.runs + 1)]
    median = median_figures(runs)
    print(table(runs, median))
    document = {"command": command, "runs": runs, "median": median}
    print(json.dumps(document, indent=1))
    if options.json:
        options.json.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

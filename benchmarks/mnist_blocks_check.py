"""Do MNIST's block samples agree with whole epochs? One run gives both; this compares them.

    python benchmarks/mnist_blocks_check.py [--device cpu,cuda:0] [--epochs 3] [--framework ..]
                                            [--train-samples 60000] [--out results/blocks-check]
    python benchmarks/mnist_blocks_check.py --run results/RUN_DIR   # an existing run folder

Why: `harness compare` on the mnist-* workloads times blocks of steps inside each epoch and
scales each to seconds per epoch (harness.measure.blocks, docs/methodology.md).
A block omits what happens once per epoch outside its steps (a DataLoader's iterator, Keras'
fit set-up), and on a GPU each block boundary adds one synchronise. The same run also keeps
every whole epoch (`call_seconds` in run.json), so per cell this prints the median of the warm
block samples, the median of the warm whole epochs (epoch 2 onward) and their ratio: near 1
says the block samples estimate the epoch; well below 1 says per-epoch overheads the blocks
miss. Needs the frameworks installed; use at least 2 epochs (epoch 1 is cold).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness  # noqa: E402


def cell_rows(document: dict) -> list[dict]:
    """Per cell and case: block median, warm-epoch median, their ratio (None where missing)."""
    rows = []
    for cell in document.get("cells") or []:
        for case in cell.get("cases") or []:
            blocks = case.get("samples") or []
            epochs = (case.get("call_seconds") or [])[1:]
            block_median = statistics.median(blocks) if blocks else None
            epoch_median = statistics.median(epochs) if epochs else None
            rows.append({
                "framework": cell["cell"]["framework"], "device": cell["cell"]["device"],
                "variant": cell["cell"]["variant"], "status": case.get("status"),
                "block_samples": len(blocks), "warm_epochs": len(epochs),
                "block_median_s": block_median, "epoch_median_s": epoch_median,
                "blocks_over_epochs": (block_median / epoch_median
                                       if block_median and epoch_median else None)})
    return rows


def print_rows(rows: list[dict]) -> None:
    print(f"{'cell':40} {'blocks':>7} {'epochs':>7} {'block med':>10} {'epoch med':>10} "
          f"{'ratio':>6}")
    for row in rows:
        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        ratio = row["blocks_over_epochs"]
        print(f"{row['framework'] + ' ' + row['device'] + ' ' + row['variant']:40} "
              f"{row['block_samples']:>7} {row['warm_epochs']:>7} "
              f"{seconds(row['block_median_s']):>10} {seconds(row['epoch_median_s']):>10} "
              f"{'-' if ratio is None else f'{ratio:.3f}':>6}  {row['status']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="an existing mnist run folder to read")
    parser.add_argument("--device", default="cpu,cuda:0")
    parser.add_argument("--framework", default=None, help="default: every installed one")
    parser.add_argument("--variant", default="as-written")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train-samples", type=int, default=60000)
    parser.add_argument("--out", type=Path, default=Path("results/blocks-check"))
    args = parser.parse_args()
    if args.run is None:
        result = harness.compare(
            "mnist-wide", frameworks=args.framework, devices=args.device,
            variants=args.variant, params={"epochs": args.epochs,
                                           "train_samples": args.train_samples},
            out=args.out, ceilings=False, report=False)
        run_dir = result.path
    else:
        run_dir = args.run
    document = json.loads((run_dir / "run.json").read_text())
    rows = cell_rows(document)
    print(f"run folder: {run_dir}")
    print_rows(rows)
    (run_dir / "blocks-check.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Validate the GPU step predicted from a CPU run against the GPU measured on the same machine.

    python3 benchmarks/predict_validation.py --device cuda:0 --profile h200 --out rows.json
    python3 benchmarks/predict_validation.py --from rows.json [--repredict] [--host this]
    python3 benchmarks/predict_validation.py --from h100.json --from h200.json   # GPU to GPU
    python3 benchmarks/predict_validation.py --from h100a.json --from h100b.json # noise floor
    python3 benchmarks/predict_validation.py --device cpu --models mnist-small --out smoke.json
    python3 benchmarks/predict_validation.py --write-errors h100 [--from rows.json ...]

For each model of the zoo (benchmarks/predict_zoo.py) at each batch of its sweep, on the
machine it runs on: the CPU step (warm-up, then the median of 2-7 calls) and its features
(backends/torch/features.py, the path the harness's prediction uses), the GPU step predicted
from those features with every shipped profile and --profile (host 'profiled' and 'this'),
and the GPU step measured: warm-up, then each call timed alone with a synchronise before
both clock reads (the median of 5-30 calls), the same step pipelined (calls back to back,
synchronised at the ends), and the device's busy time per call (torch.profiler through the
harness's TorchDevice.profile) for the regime. One row per cell goes to --out as it is
measured (the whole file rewritten atomically), with the features packed, so `--from FILE
--repredict` validates a changed model again without a GPU. `--budget-s` stops before a
cell that would not fit and keeps every row made so far. `--device cpu` stands in for the
GPU (the "GPU" step is the CPU's, measured the same way): the smoke mode the test uses.
The summary (benchmarks/predictlab/validation.py says what it counts) ends every run.
`--write-errors NAME` derives NAME's entry of the shipped interval table
(harness/predict/validated/errors.json) again: `predictlab.errortable.derived_table` over
the --from rows files (default: the ones the entry names), each predicted again by the model
as it is with the shipped NAME profile, under that profile's identity now (after a changed
model or a profile made again).
"""

from __future__ import annotations

import time

STARTED = time.monotonic()  # before torch's import: the budget counts what the caller pays

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # predict_zoo, predict_measure

from predictlab import errortable, fitting, gpu2gpu, validation  # noqa: E402

from harness.predict import interval  # noqa: E402
from harness.data.gpustep import MODEL_VERSION  # noqa: E402
from harness.predict.model import STEP_OVERHEAD_DISPATCHES  # noqa: E402
from harness.predict.profile import load_profile  # noqa: E402
from harness.spec import BadInput  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GPU_COMMAND = ("PYTHONPATH=. python3 benchmarks/predict_validation.py --device cuda:0 "
               "--profile h200 --out $OUT/validation.json")


def bandwidth_ratio(source: str, target: str) -> float | None:
    """The source's elementwise bandwidth over the target's (largest rows), from the two
    shipped profiles; None where either cannot be loaded."""
    try:
        rates = [max(row.rate() or 0.0 for row in load_profile(name).entries[
            "elementwise.add"].rows) for name in (source, target)]
    except (BadInput, KeyError, ValueError):
        return None
    return rates[0] / rates[1] if all(rates) else None


def fit_cells(rows: list[validation.Row], profile: str, host: str = "profiled",
              measured: str = "synced") -> list[fitting.FitCell]:
    """The rows' predicted cells as the constant's fit sees them (benchmarks/predictlab/fitting.py)."""
    found = []
    for row in rows:
        gpu_s = (row.get("gpu") or {}).get(validation.MEASURED_KEYS[measured])
        prediction = validation.prediction_of(row, profile, host)
        if row.get("status") == "ok" and gpu_s and prediction and "terms" in prediction:
            found.append(fitting.fit_cell(str(row["model"]), float(gpu_s), prediction))
    return found

def left_out(loaded: list[tuple[dict[str, Any], list[validation.Row]]], profile: str,
             host: str, measured: str) -> dict[str, float]:
    """{model: the model's fitted constant with that model left out}, over the cells of
    every file (each predicted with its own profile): benchmarks/predictlab/fitting.py."""
    cells = [cell for meta, rows in loaded
             for cell in fit_cells(rows, profile or validation.primary_profile(
                 meta, rows), host, measured)]
    constants = fitting.left_out_constants(cells)
    print(f"fitted constant (training step's fixed host work, in dispatches): shipped "
          f"{STEP_OVERHEAD_DISPATCHES:g}; fitted on these {len(cells)} cells "
          f"{fitting.fitted_dispatches(cells) or 0:.1f}; leaving each model out "
          + ", ".join(f"{model} {value:.0f}" for model, value in constants.items()))
    return constants


def summarize(args: argparse.Namespace) -> int:
    """The summary of each --from file; GPU to GPU both ways between every two files (two
    lendings of one GPU kind: the noise floor between them)."""
    loaded = [validation.read_rows(Path(path)) for path in args.from_files]
    if args.repredict:
        loaded = [(meta, validation.repredicted(meta, rows, args.profile))
                  for meta, rows in loaded]
    constants = left_out(loaded, args.profile, args.host, args.measured)
    for meta, rows in loaded:
        print("\n".join(validation.summary_lines(meta, rows, profile=args.profile or "",
                                                 host=args.host, measured=args.measured,
                                                 left_out=constants)))
    for source, target in itertools.combinations(loaded, 2):
        for pair in ((source, target), (target, source)):
            print("\n".join(gpu2gpu.gpu_to_gpu_lines(*pair, bandwidth_ratio, host=args.host,
                                                     measured=args.measured)))
    return 0


def write_errors(name: str, from_files: list[str], path: Path) -> list[str]:
    """NAME's entry of the interval table at PATH derived again (module docstring), the
    file written back with the others' entries as they were; the lines saying its bands."""
    document = json.loads(path.read_text())
    table = dict(document.get("profiles") or {})
    outside = [found for found in from_files if not Path(found).resolve().is_relative_to(ROOT)]
    if outside:  # the table names its sources by their path in the repository
        raise BadInput(f"--write-errors: {outside[0]} is not under {ROOT} (benchmarks/data/)")
    sources = ([Path(found).resolve().relative_to(ROOT).as_posix() for found in from_files]
               or list((table.get(name) or {}).get("sources") or []))
    if not sources:
        raise BadInput(f"--write-errors {name}: no rows files (--from) and none stored")
    identity = load_profile(name).identity()
    table[name] = errortable.derived_table(name, identity, sources, ROOT)
    document.update(profiles=table, model_version=MODEL_VERSION)
    path.write_text(json.dumps(document, indent=1) + "\n")
    lines = [f"wrote {path}: {name}, {identity}, from {len(sources)} rows files"]
    for host, regimes in table[name]["by_host"].items():
        lines += [f"  host {host} {regime}: {band['cells']} cells" + (
            f", ratio {band['ratio_low']:.2f}-{band['ratio_high']:.2f}"
            if "ratio_low" in band else " (no band)") for regime, band in regimes.items()]
    return lines


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="cuda:0", help="cuda:N, or cpu (smoke mode)")
    parser.add_argument("--profile", default="", help="h200, h100 or a profile FILE "
                        "(measuring: default h200; --from: the run's own)")
    parser.add_argument("--out", type=Path, help="the rows file (JSON), written as it goes")
    parser.add_argument("--from", dest="from_files", action="append", default=[],
                        help="summarise a rows file (more than once: also GPU to GPU "
                        "between every two files); no GPU needed")
    parser.add_argument("--repredict", action="store_true",
                        help="with --from: predict again from the stored features")
    parser.add_argument("--host", choices=("profiled", "this"), default="profiled")
    parser.add_argument("--write-errors", metavar="NAME", default="",
                        help="derive the shipped profile NAME's interval band again from the "
                        "--from files (default: those it names) and write the table")
    parser.add_argument("--errors-file", type=Path, default=interval.ERRORS_FILE,
                        help=argparse.SUPPRESS)  # a test's copy of the table
    parser.add_argument("--measured", choices=tuple(validation.MEASURED_KEYS),
                        default="synced", help="which measured GPU step the summary reads")
    parser.add_argument("--budget-s", type=float, default=90.0,
                        help="stop cleanly before this many seconds (default 90)")
    parser.add_argument("--models", default="", help="comma-separated zoo names (default all)")
    parser.add_argument("--batches", default="", help="comma-separated batches for every model")
    parser.add_argument("--no-busy", action="store_true", help="skip the busy-share pass")
    parser.add_argument("--cudnn-tf32", choices=("on", "off"), default="on",
                        help="cuDNN's TF32 for float32 convolutions: on as torch defaults "
                        "(a user's script); off as the harness's user-model cells run")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch's CPU threads (default: torch's own choice)")
    args = parser.parse_args(argv)
    if not args.from_files and args.out is None and not args.write_errors:
        parser.error("--out FILE is needed to measure (or --from FILE to summarise)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    try:
        if args.write_errors:
            print("\n".join(write_errors(args.write_errors, args.from_files, args.errors_file)))
            return 0
        if args.from_files:
            return summarize(args)
        args.profile = args.profile or "h200"
        profiles = validation.profiles_named(args.profile)  # bad input before torch loads
        from predict_measure import measure  # noqa: PLC0415 - torch only when measuring

        print("\n".join(measure(args, STARTED, profiles)))
        print(f"on the GPU machine run: {GPU_COMMAND}")
        return 0
    except (BadInput, validation.RowsError) as why:
        print(f"predict_validation: {why}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The stored GPU steps predicted from a foreign CPU's features, by source CPU, regime and family.

    python3 benchmarks/predict_foreign.py                      # the stored rows, as docs/predict.md
    python3 benchmarks/predict_foreign.py --foreign vm.json.gz --gpu rows-h100.json.gz ...
    python3 benchmarks/predict_foreign.py --cells             # one line per cell as well
    python3 benchmarks/predict_foreign.py --pack OUT.json.gz p1.json p2.json p3.json
    python3 benchmarks/predict_foreign.py --pack-demo OUT.json.gz RUN_DIR [RUN_DIR ...]

Reads only stored rows: the zoo's GPU steps measured on lent GPUs with the features of the
GPU host's own CPU (benchmarks/data/predict-validation-*.json.gz), and the same zoo's features
recorded on another CPU (benchmarks/predict_foreign_record.py; stored in
benchmarks/data/predict-foreign-*.json.gz). Every GPU step is predicted again by the model as
it is now from each source's features (host 'profiled'), with the interval the answer line
prints (harness/predict/interval.py), and the table of docs/predict.md ("From a foreign CPU")
is printed: per source CPU and GPU, the median and p90 of |predicted - measured| / measured,
how often the printed interval holds the measured step, and the GPU-vs-CPU verdict against
the source CPU's own measured step (a gap within the noise is a tie, as in the validation).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

from predictlab import foreign, validation

DATA = Path(__file__).resolve().parent / "data"
DEMO_FILE = DATA / "predict-demo-vm-20261207.json.gz"
# The demo's torch GPU step as measured on lent GPUs (per step; mnist-wide, batch 32, 3
# rounds), quoted where it was measured: no rows of these runs are stored.
DEMO_MEASURED = {
    "h100": {"steps_s": [1.61e-3, 1.81e-3, 1.96e-3, 2.06e-3],
             "source": "H100 80GB: 1.81 ms the README's demo compare of 2026-11-27 "
                       "(docs/predict.md, 'Predicted vs measured on a GPU run'); 1.96-2.06 ms "
                       "two runs of the same compare (issue 61); 1.61 ms the same compare on "
                       "a lent H100 on 2026-12-07 (docs/findings.md)"},
    "h200": {"steps_s": [2.27e-3, 2.32e-3, 2.5e-3],
             "source": "H200: 2.32 ms the demo compare of 2026-11-27 (docs/predict.md, "
                       "'Predicted vs measured on a GPU run'); 2.27-2.5 ms torch's step in the "
                       "demo compares of 2026-11-28 (docs/predict.md, 'Where not to trust')"}}


def pack(out: Path, recorded: list[Path], machine: str) -> int:
    """The recordings of several processes (predict_foreign_record.py's --out files) as one
    packed, gzipped file: each cell's op list once (benchmarks.predictlab.foreign.packed_document)."""
    documents = [json.loads(path.read_text()) for path in recorded]
    merged: dict[str, Any] = {**foreign.empty_document(), "machine": machine,
                              "rows": [row for document in documents for row in document["rows"]],
                              "processes": [item for document in documents
                                            for item in document["processes"]]}
    packed = {**foreign.packed_document(merged), "machine": machine}
    out.write_bytes(gzip.compress(json.dumps(packed, separators=(",", ":")).encode(), 9))
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(merged['rows'])} rows)")
    return 0


def demo_run(process: int, run_dir: Path) -> dict[str, Any]:
    """One demo run's torch CPU case as the foreign demo file keeps it (features compacted)."""
    from harness.data.store import load_run  # noqa: PLC0415
    from harness.predict.answer import case_noise, cpu_step_seconds  # noqa: PLC0415

    document = load_run(run_dir)
    case = document.cells[0].cases[0]
    return {"process": process, "run_id": document.run_id, "suspect": case.suspect,
            "steps": case.extra["step_features_steps"], "cpu_step_s": cpu_step_seconds(case),
            "noise": case_noise(case), "host_speed": case.extra.get("host_speed"),
            "torch": document.cells[0].framework_version,
            "features": foreign.compact_features(case.extra["step_features"])}


def pack_demo(out: Path, run_dirs: list[Path], machine: str) -> int:
    runs = [demo_run(process, run_dir) for process, run_dir in enumerate(run_dirs, start=1)]
    document = {"kind": foreign.DEMO_KIND, "version": 1, "machine": machine,
                "command": "harness compare --workload mnist-wide --param epochs=1 "
                           "--no-ceilings --rounds 1 --framework torch --device cpu",
                "measured": DEMO_MEASURED, "runs": runs}
    out.write_bytes(gzip.compress(json.dumps(document, separators=(",", ":")).encode(), 9))
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(runs)} runs)")
    return 0


def demo_lines(path: Path) -> list[str]:
    document = json.loads(gzip.decompress(path.read_bytes()))
    cells = foreign.demo_cells(document, validation.profiles_named("h200"))
    return foreign.markdown([cell.row() for cell in cells], foreign.DEMO_HEADER)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--foreign", type=Path, action="append", default=[],
                        help="a foreign-features file (default: the stored ones)")
    parser.add_argument("--gpu", type=Path, action="append", default=[],
                        help="a validation rows file of GPU steps (default: the stored ones)")
    parser.add_argument("--cells", action="store_true", help="print every cell too")
    parser.add_argument("--pack", type=Path, help="pack the recordings given into this file")
    parser.add_argument("--pack-demo", type=Path, help="pack the demo run folders given")
    parser.add_argument("--machine", default="", help="with --pack: the CPU's description")
    parser.add_argument("recorded", type=Path, nargs="*", help="with --pack: recordings")
    args = parser.parse_args(argv)
    if args.pack:
        return pack(args.pack, args.recorded, args.machine)
    if args.pack_demo:
        return pack_demo(args.pack_demo, args.recorded, args.machine)
    try:
        cells = foreign.all_cells(args.gpu or foreign.stored_gpu_files(DATA),
                                  args.foreign or foreign.stored_foreign_files(DATA))
    except (validation.RowsError, foreign.ForeignError) as why:
        print(f"predict_foreign: {why}", file=sys.stderr)
        return 2
    if args.cells:
        print("\n".join(foreign.cell_line(cell) for cell in cells))
    print("\n".join(foreign.markdown(foreign.table_rows(cells))))
    if DEMO_FILE.exists() and not args.foreign:
        print("\n".join(demo_lines(DEMO_FILE)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

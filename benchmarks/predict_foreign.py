"""The stored GPU steps predicted from a foreign CPU's features, by source CPU, regime and family.

    python3 benchmarks/predict_foreign.py                      # the stored rows, as docs/predict.md
    python3 benchmarks/predict_foreign.py --foreign vm.json.gz --gpu rows-h100.json.gz ...
    python3 benchmarks/predict_foreign.py --cells             # one line per cell as well
    python3 benchmarks/predict_foreign.py --pack OUT.json.gz p1.json p2.json p3.json

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

from harness.predict import foreign, validation

DATA = Path(__file__).resolve().parent / "data"


def pack(out: Path, recorded: list[Path], machine: str) -> int:
    """The recordings of several processes (predict_foreign_record.py's --out files) as one
    packed, gzipped file: each cell's op list once (harness.predict.foreign.packed_document)."""
    documents = [json.loads(path.read_text()) for path in recorded]
    merged: dict[str, Any] = {**foreign.empty_document(), "machine": machine,
                              "rows": [row for document in documents for row in document["rows"]],
                              "processes": [item for document in documents
                                            for item in document["processes"]]}
    packed = {**foreign.packed_document(merged), "machine": machine}
    out.write_bytes(gzip.compress(json.dumps(packed, separators=(",", ":")).encode(), 9))
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(merged['rows'])} rows)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--foreign", type=Path, action="append", default=[],
                        help="a foreign-features file (default: the stored ones)")
    parser.add_argument("--gpu", type=Path, action="append", default=[],
                        help="a validation rows file of GPU steps (default: the stored ones)")
    parser.add_argument("--cells", action="store_true", help="print every cell too")
    parser.add_argument("--pack", type=Path, help="pack the recordings given into this file")
    parser.add_argument("--machine", default="", help="with --pack: the CPU's description")
    parser.add_argument("recorded", type=Path, nargs="*", help="with --pack: recordings")
    args = parser.parse_args(argv)
    if args.pack:
        return pack(args.pack, args.recorded, args.machine)
    try:
        cells = foreign.all_cells(args.gpu or foreign.stored_gpu_files(DATA),
                                  args.foreign or foreign.stored_foreign_files(DATA))
    except (validation.RowsError, foreign.ForeignError) as why:
        print(f"predict_foreign: {why}", file=sys.stderr)
        return 2
    if args.cells:
        print("\n".join(foreign.cell_line(cell) for cell in cells))
    print("\n".join(foreign.markdown(foreign.table_rows(cells))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

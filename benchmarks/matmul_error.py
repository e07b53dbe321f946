"""Rounding error of real float32 matmul libraries at large inner dimensions.

    python benchmarks/matmul_error.py [--sizes 1024,8192,16384] [--out FILE]

Why: the matmul check's bound must come from an error model in k and the unit roundoff, and
the model must be tested against what cuBLAS, OpenBLAS, MKL and oneDNN actually return. This
computes C = A @ B in float32 with every library present (torch on each device, numpy) for
uniform [0, 1) inputs, as the workload makes them, and reports two figures per result against
a float64 reference applied to probe vectors (Freivalds): the normwise ||Cx - ABx|| / ||ABx||
for a standard-normal x (the old metric, inflated by cancellation) and the componentwise
max_i |Cx - ABx|_i / (|A||B||x|)_i for a Rademacher x (no cancellation).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

UNIT_ROUNDOFF = {"fp32": 2.0**-24, "tf32": 2.0**-11, "bf16": 2.0**-8}


def metrics(c: np.ndarray, a: np.ndarray, b: np.ndarray, n: int) -> dict[str, float]:
    rng = np.random.default_rng(n)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    c64 = c.astype(np.float64)
    gaussian = rng.standard_normal(n)
    reference = a64 @ (b64 @ gaussian)
    normwise = float(np.linalg.norm(c64 @ gaussian - reference) / np.linalg.norm(reference))
    signs = rng.choice([-1.0, 1.0], size=n)
    error = np.abs(c64 @ signs - a64 @ (b64 @ signs))
    scale = np.abs(a64) @ (np.abs(b64) @ np.abs(signs))
    componentwise = float(np.max(error / scale))
    sqrt_k_u = np.sqrt(n) * UNIT_ROUNDOFF["fp32"]
    return {"normwise_gaussian": normwise, "componentwise_rademacher": componentwise,
            "componentwise_over_sqrt_k_u": componentwise / sqrt_k_u}


def libraries() -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = [("numpy " + np.__version__, lambda a, b: a @ b)]
    try:
        import torch
    except ImportError:
        return found
    torch.backends.cuda.matmul.allow_tf32 = False

    def torch_on(device: str):
        def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            ta, tb = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)
            return torch.matmul(ta, tb).cpu().numpy()
        return run

    found.append((f"torch {torch.__version__} cpu", torch_on("cpu")))
    if torch.cuda.is_available():
        found.append((f"torch cuda {torch.cuda.get_device_name(0)}", torch_on("cuda")))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,8192,16384")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        rng = np.random.default_rng(0)
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        for name, multiply in libraries():
            row = {"n": n, "library": name, **metrics(np.asarray(multiply(a, b)), a, b, n)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return None


if __name__ == "__main__":
    sys.exit(main())

"""Seed experiment 5 (and 4's compute part): square float32 matmul over a size sweep."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.core.fixes import Catalogue, one_each, variant
from harness.spec import CaseParams, Check, Param, ReportHints, WorkloadSpec, int_param
from harness.workloads.common import matmul_check, rng_for

# Each variant's arithmetic; a graph replays the fp32 call unchanged.
PRECISIONS = {"fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp32-graph": "fp32"}
DEFAULT_SIZES = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
QUICK_SIZES = [64, 128, 256]
GRAPH_IS_TORCH = ("fp32-graph replays a PyTorch CUDA graph; {framework} has no such call "
                  "({its_graphs})")
NUMPY_REFUSES = "numpy's only matmul is plain fp32 (no tf32, bf16 or graph)"
# The variants, declared once (harness.core.fixes), so the planner writes a refused cell
# without starting a worker (the backends keep their own checks as a safety net). tf32, bf16
# and fp32-graph need a GPU everywhere (device_only_variants); numpy runs on the cpu only (its
# FrameworkSpec).
CATALOGUE = Catalogue(
    (variant("tf32", "torch tensorflow jax", gpu_only=True, refused={"numpy": NUMPY_REFUSES}),
     variant("bf16", "torch tensorflow jax", gpu_only=True, refused={"numpy": NUMPY_REFUSES}),
     variant("fp32-graph", "torch", gpu_only=True, refused={
         "tensorflow": GRAPH_IS_TORCH.format(
             framework="TensorFlow", its_graphs="its graphs are tf.function and XLA"),
         "jax": GRAPH_IS_TORCH.format(
             framework="JAX", its_graphs="jax.jit already runs the call as one XLA executable"),
         "numpy": NUMPY_REFUSES})),
    one_each(("torch", "tensorflow", "jax", "numpy")), baseline="fp32")


def make_inputs(case: CaseParams, variant: str) -> dict[str, np.ndarray]:
    """Uniform [0, 1) like the seed's torch.rand, identical for every framework."""
    n = int_param(case, "n")
    rng = rng_for("matmul", n)
    return {"a": rng.random((n, n), dtype=np.float32), "b": rng.random((n, n), dtype=np.float32)}


def check(case: CaseParams, variant: str, inputs: dict[str, np.ndarray],
          output: Mapping[str, np.ndarray]) -> Check:
    """C against A and B through float64 probes, to the variant's error model (k = n).

    See harness.workloads.common.matmul_check: componentwise, so a large n no longer looks wrong
    (the old normwise C@x figure with Gaussian x was inflated by cancellation, since C ~
    (n/4) 11^T), and O(n^2) per probe, so n = 16384 is checked in seconds.
    """
    return matmul_check(inputs["a"], inputs["b"], output["c"], PRECISIONS[variant],
                        f"{variant} C")


SPEC = WorkloadSpec(
    name="matmul",
    kind="matmul",
    summary="n x n matmul sweep (seed 5); GFLOP/s = 2n^3/s; checked against float64 numpy",
    sweep="n",
    params={"n": Param(DEFAULT_SIZES, QUICK_SIZES, "matrix sizes (set with --sizes)", kind=int)},
    variants=CATALOGUE.variants,
    implementations={"torch": "harness.backends.torch.matmul",
                     "tensorflow": "harness.backends.tensorflow.matmul",
                     "numpy": "harness.backends.numpy.matmul",
                     "jax": "harness.backends.jax.matmul"},
    report=ReportHints(variant_precision=PRECISIONS),
    flops=lambda case: 2.0 * int_param(case, "n") ** 3,
    bytes_moved=None,
    # A, B and C as float32 (every framework's own copies come on top): n = 45000 is 24.3 GB.
    host_bytes=lambda case, variant: 3.0 * 4 * int_param(case, "n") ** 2,
    device_only_variants=CATALOGUE.device_only,
    capabilities=CATALOGUE.capabilities(),
    make_inputs=make_inputs,
    check=check,
    notes=("tf32 and bf16 are explicit, labelled precision changes, checked against their own "
           "error models (operand rounding on top of float32 accumulation). fp32-graph (torch, "
           "GPU): the fp32 matmul captured once in a CUDA graph and replayed per call, so a "
           "small call costs one graph launch instead of a dispatch. jax: jnp.matmul under "
           "jax.jit, Precision.HIGHEST for fp32, DEFAULT for tf32."),
)

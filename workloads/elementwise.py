"""Seed experiment 2: a memory-bound multiply-add loop, and the optimizer that folds it away.

The seed: `result = a * b; for i in range(k): result = result + a * b` on two randn float32
tensors of shape (100, 1000, 1000) with k = 1000. Here the sweep is the element count, so GB/s
can be drawn against size; tensors take the shape (elements / prod(trailing_shape),
*trailing_shape) when that divides, else 1-D, so `--sizes 100000000` is exactly the seed's
100x1000x1000. The default k is 100, not 1000: the seed's full size is ~3 min per call on a
2-core CPU and the timing core makes several calls.

The trap: TensorFlow's Grappler arithmetic optimizer rewrites the traced loop as `a * b * (k+1)`
(two multiplies, measured here: 0 of 100 additions left), so a graph time says nothing about
memory bandwidth. The graph variant runs with that optimizer off, and the check refuses a time
when the backend's evidence (additions in the executed graph) or the achieved GB/s says the
loop did not really run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.core.fixes import Catalogue, one_each, variant
from harness.spec import Check, Param, WorkloadSpec
from harness.workloads.common import UNIT_ROUNDOFF, gamma, rng_for, worst_ratio

FLOAT32_BYTES = 4
DEFAULT_ELEMENTS = [10**5, 10**6, 10**7, 10**8]
QUICK_ELEMENTS = [10**4, 10**5]
SEED_TRAILING_SHAPE = (1000, 1000)

# Physical ceilings for the plausibility guard, in GB/s, when --param max_plausible_gbps is 0.
# CPU: far above any socket's DRAM (a 12-channel DDR5 server is ~0.5 TB/s). GPU: above HBM peak
# (H100 3.35 TB/s, H200 4.8 TB/s) with room for L2-resident sizes.
DEFAULT_CEILING_GBPS = {"cpu": 1000.0, "gpu": 10000.0}
FOLDED_REASON = "faster than memory bandwidth allows: optimizer folded the loop?"
# Element chunk for the float64 reference: bounds the check's memory at 10^8 elements.
CHECK_CHUNK = 1 << 22


def tensor_shape(case: Mapping[str, Any]) -> tuple[int, ...]:
    """(elements / prod(trailing), *trailing) when it divides, else (elements,)."""
    elements = case["elements"]
    trailing = tuple(int(dim) for dim in case["trailing_shape"])
    per_row = math.prod(trailing)
    if elements % per_row == 0:
        return (elements // per_row, *trailing)
    return (elements,)


def bytes_moved(case: Mapping[str, Any]) -> float:
    """Bytes the loop as written moves with one memory pass per iteration.

    `result = a * b` reads a and b and writes result (3 arrays); each of the k iterations reads
    a, b and result and writes result (4 arrays, what addcmul_ does). Eager code moves more (the
    a*b temporary is written and read back: 6 arrays), so its real bandwidth is up to 1.5x the
    GB/s shown; a graph that computes a*b once (TorchScript hoists it) moves 3 arrays per
    iteration, so its GB/s reads up to 4/3 high. One yardstick for all, stated once.
    """
    return float(FLOAT32_BYTES * case["elements"] * (3 + 4 * case["iterations"]))


def minimum_bytes(case: Mapping[str, Any]) -> float:
    """Bytes no implementation can avoid, however much it fuses: read a and b, write result."""
    return float(FLOAT32_BYTES * case["elements"] * 3)


def flops(case: Mapping[str, Any]) -> float:
    """One multiply for the first product, then a multiply and an add per iteration."""
    return float(case["elements"] * (1 + 2 * case["iterations"]))


def make_inputs(case: Mapping[str, Any], variant: str) -> dict[str, np.ndarray]:
    """randn float32 a and b, like the seed's torch.randn, identical for every framework."""
    shape = tensor_shape(case)
    rng = rng_for("elementwise", case["elements"])
    return {"a": rng.standard_normal(shape, dtype=np.float32),
            "b": rng.standard_normal(shape, dtype=np.float32)}


def summation_bound(iterations: int) -> float:
    """Relative error bound of the float32 result, per element: gamma_{k+1} (Higham §3.1).

    The loop rounds a*b once (u) and then sums k+1 copies of it, k additions of same-signed
    terms: |error| <= gamma_k (k+1)|ab| for any order, FMA or not (Higham §4.2), and (1+u)
    (1+gamma_k) - 1 <= gamma_{k+1} (Lemma 3.3). A folded (k+1)*a*b errs by gamma_2 only.

    The probabilistic sqrt(k) law does not apply: the addend is the same every time, so within
    a binade of the running sum every addition rounds the same way and the errors add up
    coherently. Measured on randn data: max error 0.25 (k+1)u at k = 1000, 8 sqrt(k+1) u.
    The float64 reference's own error (two roundings of 2^-53) is negligible.
    """
    return gamma(iterations + 1, UNIT_ROUNDOFF["fp32"])


def relative_error_chunked(got: np.ndarray, a: np.ndarray, b: np.ndarray, factor: int) -> float:
    """max |got - factor*a*b| / |factor*a*b| per element, in float64, a chunk at a time.

    Componentwise, so one wrong element among 10^8 cannot hide in a norm; an element whose
    reference is 0 (a or b is 0) must be 0 exactly, since 0 * b and 0 + 0 are exact.
    """
    got_flat, a_flat, b_flat = (np.asarray(x).reshape(-1) for x in (got, a, b))
    if got_flat.shape != a_flat.shape:
        return math.inf
    worst = 0.0
    for start in range(0, a_flat.size, CHECK_CHUNK):
        window = slice(start, start + CHECK_CHUNK)
        reference = factor * (a_flat[window].astype(np.float64) * b_flat[window])
        residual = got_flat[window].astype(np.float64) - reference
        worst = max(worst, worst_ratio(residual, np.abs(reference)))
    return worst


def folding_evidence(case: Mapping[str, Any], extra: Mapping[str, Any]) -> str:
    """'' or why the executed graph cannot be the loop: fewer additions than iterations."""
    additions = extra.get("executed_additions")
    if additions is None:
        return ""
    if additions < case["iterations"]:
        source = extra.get("op_count_source", "executed graph")
        return (f"optimizer folded the loop: {source} holds {additions} additions for "
                f"{case['iterations']} iterations")
    return ""


def ceiling_gbps(case: Mapping[str, Any], device_kind: str) -> float:
    """The asked-for ceiling, else the device kind's default (unknown kinds get the GPU's)."""
    asked = float(case.get("max_plausible_gbps") or 0.0)
    if asked > 0:
        return asked
    return DEFAULT_CEILING_GBPS.get(device_kind, DEFAULT_CEILING_GBPS["gpu"])


def bandwidth_evidence(case: Mapping[str, Any], output: Mapping[str, Any]) -> str:
    """'' or why the time is physically impossible for the bytes the run must move.

    A run whose backend says it may fuse iterations (torch.compile, XLA, a TorchScript fusion
    group) is held only to the traffic no implementation avoids (a, b in, result out); every
    other run to the loop's own traffic.
    """
    seconds = output.get("seconds_per_call")
    if not seconds or seconds <= 0:
        return ""
    extra = output.get("extra", {})
    required = minimum_bytes(case) if extra.get("may_fuse_iterations") else bytes_moved(case)
    achieved = required / seconds / 1e9
    ceiling = ceiling_gbps(case, extra.get("device_kind", "gpu"))
    if achieved > ceiling:
        return f"{FOLDED_REASON} ({achieved:.0f} GB/s > ceiling {ceiling:.0f} GB/s)"
    return ""


def check(case: Mapping[str, Any], variant: str, inputs: dict[str, np.ndarray],
          output: dict[str, Any]) -> Check:
    """Result equals (k+1)*a*b in float64, and neither op counts nor GB/s say it was folded.

    A folded graph computes (k+1)*a*b too (more exactly, even), so the value alone cannot catch
    it; the backend's executed-op counts and the achieved bandwidth can.
    """
    iterations = case["iterations"]
    error = relative_error_chunked(output["result"], inputs["a"], inputs["b"], iterations + 1)
    bound = summation_bound(iterations)
    problems = [text for text in (folding_evidence(case, output.get("extra", {})),
                                  bandwidth_evidence(case, output)) if text]
    detail = (f"{variant} vs float64 (k+1)*a*b: max relative error per element {error:.2g}, "
              f"bound {bound:.2g} = gamma_(k+1), k={iterations}, u = 2^-24")
    if problems:
        detail = "; ".join(problems) + "; " + detail
    return Check(passed=error <= bound and not problems, metric="rel_error", value=error,
                 bound=bound, detail=detail)


# The variants, declared once (harness.core.fixes): what each implementation runs, for the
# planner (no worker starts for a refused cell).
NUMPY_REFUSES = "numpy has no compiled or graph mode: it runs each operation as called"
CATALOGUE = Catalogue(
    (variant("in-place", "torch tensorflow numpy", refused={
        "jax": "JAX arrays are immutable: no in-place update outside jit (see compiled)"}),
     variant("compiled", "torch tensorflow jax", refused={"numpy": NUMPY_REFUSES}),
     variant("graph", "torch tensorflow", refused={
         "numpy": NUMPY_REFUSES,
         "jax": "JAX's only graph mode is jax.jit: see the compiled variant"})),
    one_each(("torch", "tensorflow", "numpy", "jax")))
CAPABILITIES = CATALOGUE.capabilities()

SPEC = WorkloadSpec(
    name="elementwise",
    kind="elementwise",
    summary=("result = a*b; k times result = result + a*b, float32, over element counts "
             "(seed 2; --sizes 100000000 is its 100x1000x1000; default k=100, seed 1000); "
             "GB/s = 4 bytes x (3 + 4k) x elements / s"),
    sweep="elements",
    params={
        "elements": Param(DEFAULT_ELEMENTS, QUICK_ELEMENTS,
                          "element counts per tensor (set with --sizes)", kind=int),
        "iterations": Param(100, 10, "k, the loop's iterations (seed: 1000)", kind=int),
        "trailing_shape": Param(SEED_TRAILING_SHAPE, SEED_TRAILING_SHAPE,
                                "trailing dims; shape is (elements/prod, *dims), else 1-D",
                                kind=tuple),
        "grappler": Param("off", "off", "TF graph variant: 'on' leaves the arithmetic optimizer "
                          "on, to show the trap being caught (never a speed)",
                          kind=str, choices=("off", "on")),
        "max_plausible_gbps": Param(0.0, 0.0, "plausibility ceiling; 0 = 1000 on cpu, "
                                    "10000 on gpu", kind=float, minimum=0),
    },
    variants=CATALOGUE.variants,
    implementations={"torch": "harness.backends.torch.elementwise",
                     "tensorflow": "harness.backends.tensorflow.elementwise",
                     "numpy": "harness.backends.numpy.elementwise",
                     "jax": "harness.backends.jax.elementwise"},
    flops=flops,
    bytes_moved=bytes_moved,
    capabilities=CAPABILITIES,
    make_inputs=make_inputs,
    check=check,
    notes=("as-written: eager loop (torch under no_grad). in-place: torch addcmul_, TF "
           "Variable.assign_add, numpy out=. compiled: torch.compile / tf.function(jit_compile)"
           "; may fuse iterations, so its GB/s is an effective figure. graph: tf.function with "
           "Grappler's arithmetic optimizer off / torch.jit.script (which hoists the loop-"
           "invariant a*b out of the loop, and on GPU may fuse unrolled iterations). jax: "
           "as-written op by op, compiled = jax.jit; no in-place or graph form."),
)

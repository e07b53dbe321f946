"""Shared, framework-free helpers for workload specs: seeded inputs and rounding-error models.

The tolerances here are derived, not picked: each follows a standard rounding-error analysis
with the unit roundoff u of the precision and the length of the sums involved, so a bound grows
with the problem exactly as honest floating-point error does (and no faster).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.spec import Check

# Unit roundoff u = 2^-p for p significant bits (Higham, Accuracy and Stability, §2.1). tf32
# and bf16 are what the operands are rounded to; the arithmetic around them stays float32.
UNIT_ROUNDOFF = {"fp64": 2.0**-53, "fp32": 2.0**-24, "tf32": 2.0**-11, "bf16": 2.0**-8}
STORED_MANTISSA_BITS = {"fp32": 23, "tf32": 10, "bf16": 7}

# lambda of the probabilistic bound (Higham & Mary 2019, "A new approach to probabilistic
# rounding error analysis"): |error| <= lambda*sqrt(k)*u for a length-k inner product holds with
# probability >= 1 - 2k*exp(-lambda^2/2) under their model, 1 - 4e-10 at lambda = 8,
# k = 16384. Measured float32 matmuls stay 10x below it (tests/test_checks.py:
# sequential summation, the worst order, reaches 0.7*sqrt(k)*u per element at k = 32768).
PROBABILISTIC_LAMBDA = 8.0


@dataclass(frozen=True)
class ErrorBound:
    """A bound on |computed - exact| relative to a cancellation-free scale, and its formula."""

    value: float
    formula: str


def gamma(n: int, u: float) -> float:
    """Higham's gamma_n = nu/(1-nu): n roundings of relative size <= u, any order (Lemma 3.1)."""
    return n * u / (1.0 - n * u) if n * u < 1.0 else math.inf


def probabilistic_gamma(n: int, u: float, lam: float = PROBABILISTIC_LAMBDA) -> float:
    """Higham & Mary's gamma~_n(lambda) = exp(lambda sqrt(n) u + n u^2/(1-u)) - 1.

    That is about lambda sqrt(n) u.

    Holds when the rounding errors are mean-independent (round-to-nearest on data that is not
    specially structured); see accumulation_bound for the deterministic fallback.
    """
    return math.expm1(lam * math.sqrt(n) * u + n * u * u / (1.0 - u))


def accumulation_bound(k: int, u: float = UNIT_ROUNDOFF["fp32"]) -> ErrorBound:
    """Error of a length-k inner product relative to |a|.|b|: min(deterministic, probabilistic).

    Deterministic: |fl(a.b) - a.b| <= gamma_k |a|.|b| for any summation order, FMA or not
    (Higham §3.1, §3.5). Probabilistic: lambda sqrt(k) u (Higham & Mary 2019). The smaller one
    applies: gamma_k for k < lambda^2 = 64, the sqrt(k) law above.
    """
    deterministic, likely = gamma(k, u), probabilistic_gamma(k, u)
    if deterministic <= likely:
        return ErrorBound(deterministic, "gamma_k = ku/(1-ku)")
    return ErrorBound(likely, f"{PROBABILISTIC_LAMBDA:g}·sqrt(k)·u")


@dataclass(frozen=True)
class MatmulPrecision:
    """How a matmul variant rounds: operands, float32 accumulation, then stored results.

    operand_u: relative error of converting a float32 operand (0: used as is).
    stored_roundings, stored_u: roundings of partial or final results to a narrow format.
    """

    operand_u: float
    stored_roundings: int
    stored_u: float


# tf32: tensor cores may truncate the 13 dropped bits instead of rounding them, an error below
# one ulp, so 2u. bf16: the frameworks convert with round-to-nearest-even (u); the result is
# stored as bf16 (one rounding) and cuBLAS may keep split-K partial sums in bf16 (torch's
# allow_bf16_reduced_precision_reduction, on by default): allow one more rounding for that.
MATMUL_PRECISIONS = {
    "fp32": MatmulPrecision(0.0, 0, 0.0),
    "tf32": MatmulPrecision(2 * UNIT_ROUNDOFF["tf32"], 0, 0.0),
    "bf16": MatmulPrecision(UNIT_ROUNDOFF["bf16"], 2, UNIT_ROUNDOFF["bf16"]),
}


def matmul_error_bound(k: int, precision: str) -> ErrorBound:
    """Bound on |C^ - AB| / (|A||B|), componentwise, for inner dimension k.

    Model: C^ = fl32((A + dA)(B + dB)) then stored, with |dA| <= v|A|, |dB| <= v|B| (operand
    rounding, v = operand_u) and float32 accumulation (accumulation_bound). To first order in
    each factor: |C^ - AB| <= [(1+v)^2 (1+acc) (1+s)^r - 1] |A||B|, r stored roundings of size s.
    Operand terms stay deterministic: a chopped operand errs one way every time (no averaging),
    and how far rounded ones average out depends on the data's low bits, not on a law in k.
    """
    spec = MATMUL_PRECISIONS[precision]
    accumulation = accumulation_bound(k)
    value = ((1 + spec.operand_u) ** 2 * (1 + accumulation.value)
             * (1 + spec.stored_u) ** spec.stored_roundings - 1)
    terms = [accumulation.formula.replace("u", "u_fp32")]
    if spec.operand_u:
        ulps = spec.operand_u / UNIT_ROUNDOFF[precision]
        terms.insert(0, f"2 operands x {ulps:g}u_{precision}")
    if spec.stored_roundings:
        terms.append(f"{spec.stored_roundings}u_{precision} stored")
    return ErrorBound(value, " + ".join(terms))


def round_mantissa(values: np.ndarray, bits: int) -> np.ndarray:
    """float32 values rounded to `bits` stored mantissa bits, round-to-nearest-even.

    Works on the bit pattern: add half an ulp of the target format (minus one when the kept
    part is even, so ties go to even) and clear the dropped bits. Finite inputs only.
    """
    pattern = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    drop = np.uint32(23 - bits)
    if drop == 0:
        return pattern.view(np.float32).copy()
    kept_lsb = (pattern >> drop) & np.uint32(1)
    half = (np.uint32(1) << (drop - np.uint32(1))) - np.uint32(1)
    rounded = ((pattern + half + kept_lsb) >> drop) << drop
    return rounded.view(np.float32)


def rng_for(*key: Any) -> np.random.Generator:
    """A generator seeded by the case, so every framework gets the very same inputs."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


# --- the matmul check: probes instead of a float64 matmul ----------------------------------

# Probe columns: enough for a per-element check when m*k*p is small, else at least this many
# column blocks (each single element is then seen against a block of p/blocks columns).
MIN_PROBE_BLOCKS = 32
PROBE_WORK = 2**28  # multiply-adds per float64 product the check may spend
CHUNK_ELEMENTS = 2**23  # float64 rows converted at a time: 64 MB, even at n = 16384
# A float32 result whose deviation from AB fits TF32 (or bf16) operand rounding with this
# coefficient (1 = exactly that rounding), by this many standard errors, was computed from them.
SIGNATURE_COEFFICIENT = 0.5
SIGNATURE_SIGMAS = 8.0


def probe_blocks(m: int, k: int, p: int) -> int:
    """Column blocks for an (m x k)(k x p) check: p (every element alone) when cheap enough."""
    affordable = PROBE_WORK // max(1, m * k)
    return int(min(p, max(MIN_PROBE_BLOCKS, affordable)))


def probes(p: int, blocks: int, key: Any) -> tuple[np.ndarray, np.ndarray]:
    """X (p x blocks+1) and |X|: a Rademacher (+-1) vector on each column block, then all ones.

    Signs: a wrong element cannot cancel against another one it does not know the sign of.
    Blocks: an element is compared with its own block's scale, not the whole row's. Ones: a
    small error of one sign everywhere (a scaled or biased result) adds up instead of averaging.
    """
    signs = rng_for("matmul-probe", key, p, blocks).choice((-1.0, 1.0), size=p)
    x = np.zeros((p, blocks + 1))
    x[np.arange(p), np.arange(p) * blocks // p] = signs
    x[:, blocks] = 1.0
    return x, np.abs(x)


def product64(matrix: np.ndarray, right: np.ndarray, abs_right: np.ndarray | None = None,
              transform: Callable[[np.ndarray], np.ndarray] | None = None
              ) -> tuple[np.ndarray, np.ndarray | None]:
    """matrix @ right (and |matrix| @ abs_right) in float64, a block of rows at a time.

    Converting whole float32 matrices to float64 would take 2 GB each at n = 16384.
    """
    rows = matrix.shape[0]
    step = max(1, CHUNK_ELEMENTS // max(1, matrix.shape[1]))
    out = np.empty((rows, right.shape[1]))
    abs_out = None if abs_right is None else np.empty((rows, abs_right.shape[1]))
    for start in range(0, rows, step):
        block = matrix[start:start + step]
        block = (transform(block) if transform else block).astype(np.float64)
        out[start:start + step] = block @ right
        if abs_out is not None:
            np.abs(block, out=block)
            abs_out[start:start + step] = block @ abs_right
    return out, abs_out


def worst_ratio(residual: np.ndarray, scale: np.ndarray) -> float:
    """max |residual| / scale; a zero scale allows only a zero residual; non-finite is inf."""
    if not np.all(np.isfinite(residual)):
        return math.inf
    error = np.abs(residual)
    safe = np.where(scale > 0, scale, 1.0)
    ratios = np.where(scale > 0, error / safe, np.where(error > 0, math.inf, 0.0))
    return float(ratios.max()) if ratios.size else 0.0


@dataclass(frozen=True)
class ProbedProduct:
    """A(BX) and |A||B||X| in float64 for probes X: what a result C^ of A B is compared with."""

    a: np.ndarray
    b: np.ndarray
    x: np.ndarray
    reference: np.ndarray
    scale: np.ndarray

    @property
    def blocks(self) -> int:
        return self.x.shape[1] - 1


def probe_product(a: np.ndarray, b: np.ndarray, blocks: int | None = None) -> ProbedProduct:
    """The float64 side of the check, O((m + p) k) per probe; computed once per (A, B)."""
    m, k = a.shape
    x, abs_x = probes(b.shape[1], blocks or probe_blocks(m, k, b.shape[1]), (m, k))
    bx, abs_bx = product64(b, x, abs_x)
    reference, scale = product64(a, bx, abs_bx)
    assert scale is not None  # product64 returns |A||B||X| when given |BX|
    return ProbedProduct(a, b, x, reference, scale)


def signature_fit(probed: ProbedProduct, residual: np.ndarray,
                  precision: str) -> tuple[float, float] | None:
    """Least-squares c, and its standard error, in residual = c D + noise (None if D = 0)."""
    bits = STORED_MANTISSA_BITS[precision]

    def narrow(block: np.ndarray) -> np.ndarray:
        return round_mantissa(block, bits)

    rounded_bx, _ = product64(probed.b, probed.x, transform=narrow)
    rounded = product64(probed.a, rounded_bx, transform=narrow)[0]
    signature = (rounded - probed.reference).ravel()
    power = float(signature @ signature)
    if power == 0.0 or signature.size < 2:
        return None
    coefficient = float(residual.ravel() @ signature) / power
    noise = residual.ravel() - coefficient * signature
    return coefficient, math.sqrt(float(noise @ noise) / power / (signature.size - 1))


def rounding_signature(probed: ProbedProduct, residual: np.ndarray, precision: str) -> str:
    """'' or why the residual C^X - ABX is `precision`'s operand rounding (it was computed so).

    At large k a TF32 result is as close to AB as float32 sequential summation (the operand
    errors average out as 1/sqrt(k) while float32 accumulation grows as sqrt(k)), so no error
    bound can tell them apart. Its deviation is, however, predictable: D = A~(B~X) - A(BX) with
    A~, B~ rounded to the narrow format. Least squares residual = c D + noise gives c ~ 1 when
    the operands were rounded so, and c ~ 0 +- se for float32, whose accumulation errors do not
    depend on the operands' low bits.
    """
    fit = signature_fit(probed, residual, precision)
    if fit is None:
        return ""  # operands exact in that format: it would compute the same thing
    coefficient, standard_error = fit
    if coefficient > SIGNATURE_COEFFICIENT and coefficient > SIGNATURE_SIGMAS * standard_error:
        return (f"result deviates from AB like {precision} operand rounding (coefficient "
                f"{coefficient:.2f} +- {standard_error:.2f}): not a float32 matmul")
    return ""


def matmul_check(a: np.ndarray, b: np.ndarray, c: Any, precision: str, what: str,
                 blocks: int | None = None) -> Check:
    """C^ = A B to the precision's error model, checked in O((m+k) p) per probe, not O(mkp).

    value = max over rows i and probes x of |C^x - A(Bx)|_i / (|A||B||x|)_i, all in float64.
    The scale has no cancellation (it is the sum of |terms|), so it is the quantity
    matmul_error_bound bounds: |(C^ - AB)x| <= |C^ - AB||x| <= bound |A||B||x|.

    What it catches: NaN/inf anywhere (they reach every probe); a wrong shape; a transposed
    square result (C^T - C is O(sqrt(k)) per element, seen with its block's sqrt(w) sign-sum);
    a scaled or biased result (the all-ones probe); in fp32 cells, TF32 or bf16 operands
    (rounding_signature).
    What it cannot: a single element off by less than about bound x w of its value, where w
    = p/blocks is the probe block width, because the probe compares it with the sum of its
    block of w same-sized elements. At n = 8192 (w = 256, bound 4.3e-5) that is 1.1%, at
    n = 16384 (w = 512, bound 6.1e-5) 3.1%; zeroed or doubled elements are caught at every n,
    a 1% error at these sizes is not. Below about n = 640, w = 1: every element is checked.
    """
    return check_product(probe_product(a, b, blocks), c, precision, what)


def check_product(probed: ProbedProduct, c: Any, precision: str, what: str) -> Check:
    """matmul_check with the float64 side already computed (tests plant many faults)."""
    (m, k), p = probed.a.shape, probed.b.shape[1]
    c = np.asarray(c)
    bound = matmul_error_bound(k, precision)
    if c.shape != (m, p):
        return Check(False, "rel_error", math.inf, bound.value,
                     f"{what}: result has shape {c.shape}, expected {(m, p)}")
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf in C^ are reported, below
        residual = product64(c, probed.x)[0] - probed.reference
    value = worst_ratio(residual, probed.scale)
    width = math.ceil(p / probed.blocks)
    detail = (f"{what}: max |C^x-ABx|/(|A||B||x|) {value:.2g} over {probed.blocks + 1} probes, "
              f"bound {bound.value:.2g} = {bound.formula}, k={k}; a single element is caught "
              f"when off by more than ~{bound.value * width:.1g} of its value")
    if value == math.inf:
        detail = f"{what}: non-finite entries (NaN or inf) in the result; " + detail
    problem = ""
    if precision == "fp32" and value <= bound.value:  # float32 claimed: were operands narrowed?
        problem = next(filter(None, (rounding_signature(probed, residual, narrow)
                                     for narrow in ("tf32", "bf16"))), "")
    if problem:
        detail = f"{what}: {problem}; " + detail
    return Check(value <= bound.value and not problem, "rel_error", value, bound.value, detail)

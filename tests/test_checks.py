"""Correctness checks against their error models: honest results pass, planted faults fail.

Pure numpy, no frameworks. A full n = 16384 matmul is too slow here, so the matmul model is
tested where it matters, in the inner dimension k: (m x k)(k x p) products with small m, p and
float32 results from accumulation orders that stand in for the libraries (OpenBLAS's sgemm,
sequential, pairwise, split-K as cuBLAS does it, FMA), plus TF32 and bf16 operand rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from harness.workloads import elementwise, jacobian, matmul, mnist, transfer
from harness.workloads.common import (
    UNIT_ROUNDOFF,
    accumulation_bound,
    check_product,
    matmul_check,
    matmul_error_bound,
    probe_blocks,
    probe_product,
    rng_for,
    round_mantissa,
)

INNER_SIZES = (1024, 8192, 16384, 32768)
EDGE = 32  # m = p: every element is probed on its own
SPLIT = 256  # split-K slice, as a cuBLAS kernel's k-tile
HONEST_MARGIN = 3.0  # honest results must stay below bound / 3
Accumulator = Callable[[np.ndarray, np.ndarray], np.ndarray]


def inputs_for(m: int, k: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform [0, 1) float32 operands, as the matmul workload makes them."""
    rng = rng_for("test-checks", m, k, p)
    return rng.random((m, k), dtype=np.float32), rng.random((k, p), dtype=np.float32)


# --- float32 results in different accumulation orders --------------------------------------

def sgemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's float32 matmul: the BLAS it links (OpenBLAS here)."""
    return a @ b


def sequential(a: np.ndarray, b: np.ndarray, slice_k: int = 1024) -> np.ndarray:
    """Recursive summation, products rounded to float32: the worst order in practice.

    np.cumsum in float32 adds one term at a time; slices of k keep memory small.
    """
    total = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for start in range(0, a.shape[1], slice_k):
        products = a[:, start:start + slice_k].T[:, :, None] * b[start:start + slice_k, None, :]
        total = np.cumsum(np.concatenate([total[None], products]), axis=0, dtype=np.float32)[-1]
    return total


def fused(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sequential with FMA: exact product (float64 holds it), one rounding per step."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    total = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    product, wide = np.empty(total.shape), np.empty(total.shape)
    for index in range(a.shape[1]):
        np.multiply.outer(a64[:, index], b64[index], out=product)
        np.add(total, product, out=wide)
        total[...] = wide  # the one rounding to float32
    return total


def pairwise_sum(terms: np.ndarray) -> np.ndarray:
    """Sum over axis 0 (length a power of two) by halving: the pairwise tree, in float32."""
    while terms.shape[0] > 1:
        half = terms.shape[0] // 2
        terms = terms[:half] + terms[half:]
    return terms[0]


def pairwise(a: np.ndarray, b: np.ndarray, leaves: int = 1024) -> np.ndarray:
    """Pairwise summation; slices of `leaves` keep memory small and leave the tree unchanged."""
    partial = [pairwise_sum(a[:, s:s + leaves].T[:, :, None] * b[s:s + leaves, None, :])
               for s in range(0, a.shape[1], leaves)]
    return pairwise_sum(np.stack(partial))


def split_k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Blocked / split-K: float32 slices of k, their partial sums added in float32."""
    total = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for start in range(0, a.shape[1], SPLIT):
        total += a[:, start:start + SPLIT] @ b[start:start + SPLIT]
    return total


def narrowed(bits: int, chop: bool = False) -> Accumulator:
    """Operands rounded (or chopped) to `bits` mantissa bits, then float32 accumulation."""

    def narrow(values: np.ndarray) -> np.ndarray:
        if chop:  # what a tensor core may do: drop the low bits
            mask = np.uint32((0xFFFFFFFF << (23 - bits)) & 0xFFFFFFFF)
            return (values.view(np.uint32) & mask).view(np.float32)
        return round_mantissa(values, bits)

    return lambda a, b: narrow(a) @ narrow(b)


ORDERS: dict[str, Accumulator] = {"sgemm": sgemm, "sequential": sequential, "fma": fused,
                                  "pairwise": pairwise, "split-k": split_k}
NARROW: dict[str, tuple[str, Accumulator]] = {
    "tf32": ("tf32", narrowed(10)),
    "tf32-chopped": ("tf32", narrowed(10, chop=True)),
    "bf16": ("bf16", narrowed(7)),
}


@pytest.fixture(scope="module", params=INNER_SIZES, ids=lambda k: f"k{k}")
def operands(request: pytest.FixtureRequest) -> tuple[np.ndarray, np.ndarray]:
    return inputs_for(EDGE, request.param, EDGE)


# --- the error model ------------------------------------------------------------------------

def test_bound_is_gamma_for_short_sums_and_sqrt_k_for_long_ones() -> None:
    u = UNIT_ROUNDOFF["fp32"]
    assert accumulation_bound(16).value == pytest.approx(16 * u / (1 - 16 * u))
    assert accumulation_bound(8192).value == pytest.approx(8 * math.sqrt(8192) * u, rel=1e-3)
    assert "sqrt(k)" in matmul_error_bound(8192, "fp32").formula
    bounds = [matmul_error_bound(8192, precision).value for precision in ("fp32", "tf32", "bf16")]
    assert bounds == sorted(bounds) and bounds[1] > 4 * UNIT_ROUNDOFF["tf32"]
    assert matmul_error_bound(16384, "fp32").value > matmul_error_bound(8192, "fp32").value


def test_round_mantissa_is_round_to_nearest_even() -> None:
    one = np.float32(1.0)
    ties = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-20], np.float32)
    expected = np.array([one, 1 + 2.0**-9, 1 + 2.0**-10], np.float32)
    np.testing.assert_array_equal(round_mantissa(ties, 10), expected)
    values = rng_for("round").standard_normal(10000).astype(np.float32)
    for bits in (7, 10):
        step = 2.0 ** (np.floor(np.log2(np.abs(values.astype(np.float64)))) - bits)
        reference = np.round(values / step) * step  # np.round: half to even
        np.testing.assert_array_equal(round_mantissa(values, bits), reference)


# --- honest float32 results pass with margin, at every k and in every order ----------------

@pytest.mark.parametrize("order", ORDERS)
def test_every_accumulation_order_passes_with_margin(operands: tuple, order: str) -> None:
    a, b = operands
    verdict = matmul_check(a, b, ORDERS[order](a, b), "fp32", order)
    assert verdict.passed, verdict.detail
    assert verdict.value < verdict.bound / HONEST_MARGIN, verdict.detail


@pytest.mark.parametrize("variant", NARROW)
def test_narrow_operands_pass_their_bound_and_fail_the_float32_label(operands: tuple,
                                                                     variant: str) -> None:
    a, b = operands
    precision, compute = NARROW[variant]
    result = compute(a, b)
    verdict = matmul_check(a, b, result, precision, variant)
    # Chopping errs one way, so it does not average out: relative -u per operand on average
    # for uniform mantissas, 0.35 of the deterministic 2 x 2u, at every k.
    margin = 2.0 if variant.endswith("chopped") else HONEST_MARGIN
    assert verdict.passed and verdict.value < verdict.bound / margin, verdict.detail
    mislabelled = matmul_check(a, b, result, "fp32", variant)
    assert not mislabelled.passed, mislabelled.detail


# --- planted faults ---------------------------------------------------------------------------

def plant(result: np.ndarray, row: int, column: int, value: float) -> np.ndarray:
    faulty = result.copy()
    faulty[row, column] = value
    return faulty


@pytest.fixture(scope="module", params=(256, 1024, 2048), ids=lambda n: f"n{n}")
def square(request: pytest.FixtureRequest) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A full n x n case through the workload's own inputs and numpy's float32 matmul."""
    inputs = matmul.make_inputs({"n": request.param}, "fp32")
    return inputs["a"], inputs["b"], inputs["a"] @ inputs["b"]


def test_square_result_passes_and_planted_faults_fail(square: tuple) -> None:
    a, b, c = square
    n = a.shape[0]
    probed = probe_product(a, b)
    honest = check_product(probed, c, "fp32", "C")
    assert honest.passed and honest.value < honest.bound / HONEST_MARGIN, honest.detail
    row, column = n // 3, 2 * n // 3
    faults = {"zeroed": 0.0, "doubled": 2 * c[row, column], "1% off": 1.01 * c[row, column],
              "NaN": math.nan, "inf": math.inf}
    for name, value in faults.items():
        verdict = check_product(probed, plant(c, row, column, value), "fp32", name)
        assert not verdict.passed, f"{name}: {verdict.detail}"
    assert not check_product(probed, np.ascontiguousarray(c.T), "fp32", "C^T").passed
    assert not check_product(probed, c * np.float32(1 + 1e-4), "fp32", "scaled").passed
    assert not check_product(probed, c[:, :-1], "fp32", "short").passed


@pytest.mark.parametrize("n", (8192, 16384))
def test_single_element_resolution_at_large_n(n: int) -> None:
    """A row of the n x n case, probe block width as at that n: the check's documented limit.

    probe_blocks gives 32 blocks at n = 8192 and 16384, so each element is probed together with
    w = n/32 others; here p = 1024 columns in 1024/w blocks reproduce that per-row geometry.
    """
    assert probe_blocks(n, n, n) == 32
    width, p = n // 32, 1024
    a, b = inputs_for(2, n, p)
    c = a @ b
    probed = probe_product(a, b, blocks=p // width)
    assert check_product(probed, c, "fp32", "C").passed
    resolution = matmul_error_bound(n, "fp32").value * width  # what one element can hide
    assert 0.01 < resolution < 0.04
    for factor in (0.0, 2.0, 1 + 2 * resolution, 1 - 2 * resolution):
        faulty = plant(c, 1, p // 2, factor * c[1, p // 2])
        assert not check_product(probed, faulty, "fp32", f"x{factor}").passed
    for factor in (1 + resolution / 3, 1 - resolution / 3):  # too small to see
        faulty = plant(c, 1, p // 2, factor * c[1, p // 2])
        assert check_product(probed, faulty, "fp32", f"x{factor}").passed
    assert not check_product(probed, plant(c, 0, 7, math.nan), "fp32", "NaN").passed


@pytest.mark.parametrize("k", (8192, 16384))
def test_transposed_square_result_fails_at_large_k(k: int) -> None:
    a, b = inputs_for(64, k, 64)
    c = a @ b
    assert matmul_check(a, b, c, "fp32", "C").passed
    assert not matmul_check(a, b, np.ascontiguousarray(c.T), "fp32", "C^T").passed


def test_workload_checks_use_the_model() -> None:
    inputs = matmul.make_inputs({"n": 64}, "fp32")
    verdict = matmul.check({"n": 64}, "fp32", inputs, {"c": inputs["a"] @ inputs["b"]})
    assert verdict.passed and verdict.bound == matmul_error_bound(64, "fp32").value
    assert "k=64" in verdict.detail
    inputs = transfer.make_inputs({"n": 200}, "matmul-copy")
    good = inputs["a"] @ inputs["b"]
    verdict = transfer.check({"n": 200}, "matmul-copy", inputs, {"c": good})
    assert verdict.passed and verdict.bound == matmul_error_bound(200, "fp32").value
    wrong = plant(good, 5, 5, good[5, 5] * np.float32(1 + 1e-4))
    assert not transfer.check({"n": 200}, "matmul-copy", inputs, {"c": wrong}).passed


# --- the other workloads' checks --------------------------------------------------------------

def float32_jacobian(inputs: dict) -> np.ndarray:
    """The per-sample Jacobian evaluated in float32, as a framework would."""
    w = {name: value for name, value in inputs.items() if name != "t"}
    h1 = np.tanh(inputs["t"] @ w["w1"] + w["b1"])
    h2 = np.tanh(h1 @ w["w2"] + w["b2"])
    return jacobian.chain(w["w1"], w["w2"], w["w3"], 1 - h1 * h1, 1 - h2 * h2)


@pytest.mark.parametrize("batch", (2, 100, 1000))
def test_jacobian_bound_passes_float32_and_catches_one_wrong_entry(batch: int) -> None:
    case, inputs = {"batch": batch}, jacobian.make_inputs({"batch": batch}, "per-sample")
    got = float32_jacobian(inputs)
    assert got.dtype == np.float32
    honest = jacobian.check(case, "per-sample", inputs, {"per_sample": got})
    assert honest.passed and honest.value < honest.bound / 30, honest.detail
    assert 40 * UNIT_ROUNDOFF["fp32"] < honest.bound < 1e-4  # 2 gamma_20 and the tanh terms
    largest = np.unravel_index(np.abs(got).argmax(), got.shape)
    wrong = got.copy()
    wrong[largest] *= np.float32(1 + 1e-4)
    assert not jacobian.check(case, "per-sample", inputs, {"per_sample": wrong}).passed
    leak = {"per_sample": got, "off_diagonal_max": 1e-3 * float(np.abs(got).max())}
    assert not jacobian.check(case, "as-written", inputs, leak).passed
    exact_zeros = {"per_sample": got, "off_diagonal_max": 0.0}
    assert jacobian.check(case, "as-written", inputs, exact_zeros).passed


def float32_loop(inputs: dict, iterations: int) -> np.ndarray:
    result = inputs["a"] * inputs["b"]
    for _ in range(iterations):
        result = result + inputs["a"] * inputs["b"]
    return result


@pytest.mark.parametrize("iterations", (10, 100, 1000))
def test_elementwise_bound_is_gamma_k_and_the_sqrt_law_would_fail(iterations: int) -> None:
    case = {"elements": 20000, "iterations": iterations, "trailing_shape": (1000, 1000)}
    inputs = elementwise.make_inputs(case, "as-written")
    result = float32_loop(inputs, iterations)
    verdict = elementwise.check(case, "as-written", inputs, {"result": result})
    bound = elementwise.summation_bound(iterations)
    assert verdict.passed and verdict.bound == bound
    assert verdict.value < bound / 2, verdict.detail
    if iterations >= 1000:  # coherent errors outgrow the sqrt(k) law (lambda = 8 is ~met)
        assert verdict.value > 4 * math.sqrt(iterations + 1) * UNIT_ROUNDOFF["fp32"]
    wrong = result.copy()
    wrong[123] *= np.float32(1 + 2 * bound)
    assert not elementwise.check(case, "as-written", inputs, {"result": wrong}).passed
    wrong[123] = np.nan
    assert not elementwise.check(case, "as-written", inputs, {"result": wrong}).passed


def test_mnist_accuracy_is_judged_only_on_enough_steps_and_digits() -> None:
    case = {**mnist.SMALL.defaults(quick=True), "batch_size": 32}
    output = {"extra": {"params": mnist.dense_param_count(mnist.SMALL_HIDDEN), "accuracy": 0.2}}
    assert not mnist.SMALL.check(case, "as-written", {}, output).passed
    few_digits = {"y_test": np.zeros(mnist.min_test_samples() - 1)}
    assert mnist.SMALL.check(case, "as-written", few_digits, output).passed
    assert mnist.min_test_samples() < 1000  # the embedded subset's test digits
    short = {**case, "train_samples": 64}
    assert mnist.SMALL.check(short, "as-written", {}, output).passed

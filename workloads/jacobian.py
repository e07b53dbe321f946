"""Seed experiment 1: the Jacobian of a tiny tanh MLP, full (as written) vs per sample.

Net: Linear(1,20) -> tanh -> Linear(20,20) -> tanh -> Linear(20,400); input t of shape
(batch, 1), uniform [0, 1). The seed asked for the full (batch,400,batch,1) Jacobian, one
backward pass per output element; each sample's outputs depend on its own input only, so that
Jacobian is block-diagonal and the (batch,400,1) per-sample Jacobian holds all of its content.

Every framework loads the same weights, generated here from a seeded numpy generator and stored
in the (in, out) layout a matmul `x @ w` takes (torch's Linear keeps the transpose). The check
compares with the analytic Jacobian in float64: W3^T diag(1-h2^2) W2^T diag(1-h1^2) W1^T, to a
bound derived from float32's unit roundoff and the net's sizes (error_bound).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.core.fixes import Catalogue, one_each, variant
from harness.spec import Check, Param, WorkloadSpec
from harness.workloads.common import UNIT_ROUNDOFF, ErrorBound, gamma, rng_for

LAYER_SIZES = (1, 20, 20, 400)  # input, hidden, hidden, output
U = UNIT_ROUNDOFF["fp32"]
# Absolute error of a float32 tanh, whose values lie in (-1, 1): 8u is 4 ulp of a value in
# [0.5, 1). glibc and SLEEF are within 1 ulp, CUDA's tanhf 2 ulp, and Eigen's rational
# approximation (TensorFlow on CPU) is "accurate up to a couple of ulp".
TANH_ERROR = 8 * U


def make_weights() -> dict[str, np.ndarray]:
    """torch.nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), from a fixed seed.

    Independent of the batch so every case (and every framework) differentiates the same net.
    """
    rng = rng_for("jacobian-weights")
    weights: dict[str, np.ndarray] = {}
    for layer, (fan_in, fan_out) in enumerate(itertools.pairwise(LAYER_SIZES), start=1):
        limit = 1.0 / np.sqrt(fan_in)
        weights[f"w{layer}"] = rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)
        weights[f"b{layer}"] = rng.uniform(-limit, limit, fan_out).astype(np.float32)
    return weights


def make_inputs(case: Mapping[str, Any], variant: str) -> dict[str, np.ndarray]:
    """t ~ U[0, 1) of shape (batch, 1), like the seed's torch.rand, plus the shared weights."""
    batch = case["batch"]
    t = rng_for("jacobian-input", batch).random((batch, LAYER_SIZES[0]), dtype=np.float32)
    return {"t": t, **make_weights()}


def hidden_layers(inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """h1 and h2 of every sample, in float64."""
    w1, w2 = (inputs[f"w{i}"].astype(np.float64) for i in (1, 2))
    b1, b2 = (inputs[f"b{i}"].astype(np.float64) for i in (1, 2))
    h1 = np.tanh(inputs["t"].astype(np.float64) @ w1 + b1)
    return h1, np.tanh(h1 @ w2 + b2)


def chain(w1: np.ndarray, w2: np.ndarray, w3: np.ndarray, d1: np.ndarray,
          d2: np.ndarray) -> np.ndarray:
    """W3^T diag(d2) W2^T diag(d1) W1^T for every sample, (batch, 400, 1)."""
    # Chain rule with (in, out) matrices: dh1/dt[b] = diag(1-h1^2) W1^T, and so on outwards.
    d_h1 = d1[:, :, None] * w1.T[None, :, :]  # (batch, 20, 1)
    d_h2 = d2[:, :, None] * np.einsum("ij,bik->bjk", w2, d_h1)  # (batch, 20, 1)
    return np.einsum("ij,bik->bjk", w3, d_h2)  # (batch, 400, 1)


def per_sample_reference(inputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """d net(t_i) / d t_i for every sample, (batch, 400, 1), analytically in float64."""
    h1, h2 = hidden_layers(inputs)
    w1, w2, w3 = (inputs[f"w{i}"].astype(np.float64) for i in (1, 2, 3))
    return chain(w1, w2, w3, 1.0 - h1**2, 1.0 - h2**2)


def derivative_error(h: np.ndarray, z_error: np.ndarray) -> np.ndarray:
    """Relative error of a float32 1 - h^2 when z = atanh(h) is off by up to z_error.

    h = tanh(z) errs by (1 - h^2) z_error (tanh' <= 1) plus TANH_ERROR; 1 - h^2 then by 2|h|
    times that, plus its own two roundings (h*h, 1 - .), each below u (1 + h^2). Dividing by
    1 - h^2 is where saturated units (h near +-1) amplify the error.
    """
    h_error = (1.0 - h**2) * z_error + TANH_ERROR
    return (2.0 * np.abs(h) * h_error + gamma(2, U) * (1.0 + h**2)) / (1.0 - h**2)


def error_bound(inputs: Mapping[str, np.ndarray]) -> tuple[ErrorBound, np.ndarray]:
    """Bound on |J^ - J| / S, and the cancellation-free scale S = |W3^T| D2 |W2^T| D1 |W1^T|.

    First-order error model of any float32 evaluation, reverse or forward mode alike (each is
    a product of the same factors): the two length-20 inner products (W2 and W3) cost gamma_20
    each (Higham §3.1), the two multiplications by 1 - h^2 one u each, and each 1 - h^2 brings
    its own relative error (derivative_error), taken at its largest over samples and units.
    The forward pass feeds those: z1 = t w1 + b1 (gamma_2), z2 = h1 W2 + b2 (gamma_21), plus
    h1's error carried through |W2|. The batch size enters no sum, so the bound does not grow
    with it; it is data-dependent only through how saturated the tanh units are.
    """
    w1, w2, w3, b1, b2 = (np.abs(inputs[name].astype(np.float64))
                          for name in ("w1", "w2", "w3", "b1", "b2"))
    h1, h2 = hidden_layers(inputs)
    z1_error = gamma(2, U) * (np.abs(inputs["t"].astype(np.float64)) @ w1 + b1)
    h1_error = (1.0 - h1**2) * z1_error + TANH_ERROR
    z2_error = gamma(LAYER_SIZES[1] + 1, U) * (np.abs(h1) @ w2 + b2) + h1_error @ w2
    d1_error = float(derivative_error(h1, z1_error).max())
    d2_error = float(derivative_error(h2, z2_error).max())
    value = 2 * gamma(LAYER_SIZES[1], U) + 2 * U + d1_error + d2_error
    formula = (f"2gamma_20 + 2u + {d1_error / U:.0f}u + {d2_error / U:.0f}u from the two "
               f"1-h^2 (tanh to {TANH_ERROR / U:g}u), u = 2^-24")
    return ErrorBound(value, formula), chain(w1, w2, w3, 1.0 - h1**2, 1.0 - h2**2)


def fingerprint(per_sample: np.ndarray) -> dict[str, float]:
    """Two float64 figures of the per-sample Jacobian, stored in `extra` for parity checks."""
    values = np.asarray(per_sample, dtype=np.float64)
    return {"per_sample_sum": float(values.sum()), "per_sample_norm": float(np.linalg.norm(values))}


def check(case: Mapping[str, Any], variant: str, inputs: dict[str, np.ndarray],
          output: dict[str, Any]) -> Check:
    """Per-sample blocks against float64, componentwise; as-written must be zero off them.

    Backends hand back the per-sample blocks (the full Jacobian's diagonal blocks for
    as-written) and, for as-written, the largest |entry| outside them, so a 1.6 GB Jacobian at
    batch 1000 never leaves the device whole. Off-diagonal entries are exact zeros in any IEEE
    evaluation (every path into them is multiplied by a zero gradient); they get the allowance
    of the largest diagonal entry, bound x max S.
    """
    bound, scale = error_bound(inputs)
    got = np.asarray(output["per_sample"], dtype=np.float64)
    if got.shape != scale.shape or not np.all(np.isfinite(got)):
        return Check(False, "rel_error", math.inf, bound.value,
                     f"{variant}: per-sample Jacobian {got.shape} (want {scale.shape}) or "
                     "non-finite entries")
    value = float((np.abs(got - per_sample_reference(inputs)) / scale).max())
    detail = (f"{variant} per-sample Jacobian vs float64 analytic: max |J^-J|/S {value:.2g} "
              f"(S = |W3^T|D2|W2^T|D1|W1^T|), bound {bound.value:.2g} = {bound.formula}")
    if "off_diagonal_max" in output:
        off_diagonal = float(output["off_diagonal_max"]) / float(scale.max())
        value = max(value, off_diagonal)
        detail += (f"; off-diagonal blocks: max |J| {output['off_diagonal_max']:.2g} "
                   f"({off_diagonal:.1g} of max S)")
    return Check(passed=value <= bound.value, metric="rel_error", value=value,
                 bound=bound.value, detail=detail)


# The variants, declared once (harness.core.fixes), for the planner (no worker starts for a
# refused cell); per-sample-graph needs a GPU everywhere (device_only_variants) and is torch's
# alone.
CATALOGUE = Catalogue(
    (variant("per-sample", "torch tensorflow jax"),
     variant("per-sample-fwd", "torch tensorflow jax"),
     variant("per-sample-graph", "torch", gpu_only=True, refused={
         "tensorflow": ("per-sample-graph replays a PyTorch CUDA graph; TensorFlow's "
                        "per-sample form already runs as one tf.function graph"),
         "jax": ("per-sample-graph replays a PyTorch CUDA graph; JAX's per-sample forms "
                 "already run as one jitted XLA program")})),
    one_each(("torch", "tensorflow", "jax")))

SPEC = WorkloadSpec(
    name="jacobian",
    kind="jacobian",
    implementations={"torch": "harness.backends.torch.jacobian",
                     "tensorflow": "harness.backends.tensorflow.jacobian",
                     "jax": "harness.backends.jax.jacobian"},
    summary=("Jacobian of Linear(1,20)-tanh-Linear(20,20)-tanh-Linear(20,400) over batch sizes "
             "(seed 1): full (batch,400,batch,1) as written vs per-sample (batch,400,1)"),
    sweep="batch",
    params={"batch": Param([100], [8, 16], "batch sizes (set with --sizes; the seed also ran "
                           "1000)", kind=int)},
    variants=CATALOGUE.variants,
    device_only_variants=CATALOGUE.device_only,
    capabilities=CATALOGUE.capabilities(),
    make_inputs=make_inputs,
    check=check,
    notes=("as-written: torch.autograd.functional.jacobian (vectorize=False) / eager "
           "GradientTape.jacobian (TF's default experimental_use_pfor=True kept). per-sample: "
           "vmap(jacrev) / batch_jacobian in tf.function. per-sample-fwd: vmap(jacfwd) / "
           "ForwardAccumulator in tf.function. per-sample-graph (torch, GPU): vmap(jacrev) "
           "captured once in a CUDA graph and replayed per call. jax: jit(jacrev) of the batched "
           "net (full), jit(vmap(jacrev)) and jit(vmap(jacfwd)) per sample."),
)

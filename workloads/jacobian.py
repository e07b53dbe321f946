"""Seed experiment 1: the Jacobian of a tiny tanh MLP, full (as written) vs per sample.

Net: Linear(1,20) -> tanh -> Linear(20,20) -> tanh -> Linear(20,400); input t of shape
(batch, 1), uniform [0, 1). The seed asked for the full (batch,400,batch,1) Jacobian, one
backward pass per output element; each sample's outputs depend on its own input only, so that
Jacobian is block-diagonal and the (batch,400,1) per-sample Jacobian holds all of its content.

Every framework loads the same weights, generated here from a seeded numpy generator and stored
in the (in, out) layout a matmul `x @ w` takes (torch's Linear keeps the transpose). The check
compares with the analytic Jacobian in float64: W3^T diag(1-h2^2) W2^T diag(1-h1^2) W1^T.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.spec import Check, Param, WorkloadSpec
from workloads.common import relative_error, rng_for

LAYER_SIZES = (1, 20, 20, 400)  # input, hidden, hidden, output
FLOAT32_BOUND = 1e-5


def make_weights() -> dict[str, np.ndarray]:
    """torch.nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), from a fixed seed.

    Independent of the batch so every case (and every framework) differentiates the same net.
    """
    rng = rng_for("jacobian-weights")
    weights: dict[str, np.ndarray] = {}
    for layer, (fan_in, fan_out) in enumerate(zip(LAYER_SIZES, LAYER_SIZES[1:]), start=1):
        limit = 1.0 / np.sqrt(fan_in)
        weights[f"w{layer}"] = rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)
        weights[f"b{layer}"] = rng.uniform(-limit, limit, fan_out).astype(np.float32)
    return weights


def make_inputs(case: Mapping[str, Any], variant: str) -> dict[str, np.ndarray]:
    """t ~ U[0, 1) of shape (batch, 1), like the seed's torch.rand, plus the shared weights."""
    batch = case["batch"]
    t = rng_for("jacobian-input", batch).random((batch, LAYER_SIZES[0]), dtype=np.float32)
    return {"t": t, **make_weights()}


def per_sample_reference(inputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """d net(t_i) / d t_i for every sample, (batch, 400, 1), analytically in float64."""
    w1, w2, w3 = (inputs[f"w{i}"].astype(np.float64) for i in (1, 2, 3))
    b1, b2 = (inputs[f"b{i}"].astype(np.float64) for i in (1, 2))
    t = inputs["t"].astype(np.float64)
    h1 = np.tanh(t @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    # Chain rule with (in, out) matrices: dh1/dt[b] = diag(1-h1^2) W1^T, and so on outwards.
    d_h1 = (1.0 - h1**2)[:, :, None] * w1.T[None, :, :]  # (batch, 20, 1)
    d_h2 = (1.0 - h2**2)[:, :, None] * np.einsum("ij,bik->bjk", w2, d_h1)  # (batch, 20, 1)
    return np.einsum("ij,bik->bjk", w3, d_h2)  # (batch, 400, 1)


def fingerprint(per_sample: np.ndarray) -> dict[str, float]:
    """Two float64 figures of the per-sample Jacobian, stored in `extra` for parity checks."""
    values = np.asarray(per_sample, dtype=np.float64)
    return {"per_sample_sum": float(values.sum()), "per_sample_norm": float(np.linalg.norm(values))}


def check(case: Mapping[str, Any], variant: str, inputs: dict[str, np.ndarray],
          output: dict[str, Any]) -> Check:
    """Per-sample blocks against float64; as-written must also be zero off the diagonal.

    Backends hand back the per-sample blocks (the full Jacobian's diagonal blocks for
    as-written) and, for as-written, the largest |entry| outside them, so a 1.6 GB Jacobian at
    batch 1000 never leaves the device whole.
    """
    reference = per_sample_reference(inputs)
    error = relative_error(output["per_sample"], reference)
    detail = f"{variant} per-sample Jacobian vs float64 analytic: relative error {error:.2e}"
    value = error
    if "off_diagonal_max" in output:
        # Zero "to float32 precision": relative to the largest true entry, like the error.
        off_diagonal = float(output["off_diagonal_max"]) / float(np.abs(reference).max())
        value = max(error, off_diagonal)
        detail = (f"diagonal blocks: relative error {error:.2e}; off-diagonal blocks: max |J| "
                  f"{output['off_diagonal_max']:.2e} ({off_diagonal:.1e} of max |J|)")
    return Check(passed=value <= FLOAT32_BOUND, metric="rel_error", value=value,
                 bound=FLOAT32_BOUND, detail=detail)


SPEC = WorkloadSpec(
    name="jacobian",
    kind="jacobian",
    summary=("Jacobian of Linear(1,20)-tanh-Linear(20,20)-tanh-Linear(20,400) over batch sizes "
             "(seed 1): full (batch,400,batch,1) as written vs per-sample (batch,400,1)"),
    sweep="batch",
    params={"batch": Param([100], [8, 16], "batch sizes (set with --sizes; the seed also ran "
                           "1000)", kind=int)},
    variants=("as-written", "per-sample", "per-sample-fwd"),
    frameworks=("torch", "tensorflow", "jax"),
    make_inputs=make_inputs,
    check=check,
    notes=("as-written: torch.autograd.functional.jacobian (vectorize=False) / eager "
           "GradientTape.jacobian (TF's default experimental_use_pfor=True kept). per-sample: "
           "vmap(jacrev) / batch_jacobian in tf.function. per-sample-fwd: vmap(jacfwd) / "
           "ForwardAccumulator in tf.function. jax: jit(jacrev) of the batched net (full), "
           "jit(vmap(jacrev)) and jit(vmap(jacfwd)) per sample."),
)

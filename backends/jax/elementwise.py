"""The multiply-add loop in JAX: op-by-op (as written) and under jax.jit (compiled).

as-written: the seed's Python loop on jax arrays, each op dispatched eagerly (one small XLA
            computation per multiply and per add, as jnp code runs outside jit).
compiled:   the same function under jax.jit; the Python loop unrolls into 2k+1 ops that XLA
            fuses (may keep intermediate sums in registers), so it is held to the traffic no
            implementation avoids, and the optimised HLO's additions are counted as evidence
            that the loop was not folded away.
in-place and graph do not exist in JAX: arrays are immutable (x.at[].add returns a new array;
only jit with buffer donation reuses memory), and jit is JAX's only graph mode.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypedDict

import jax
import numpy as np

from harness.backend import VariantUnavailable
from harness.backends.jax.device import JaxDevice
from harness.workloads.elementwise import CAPABILITIES

# The declared reasons (the planner refuses these cells first; this is the safety net).
UNAVAILABLE = CAPABILITIES["jax"].refused

def loop_as_written(a: jax.Array, b: jax.Array, iterations: int) -> jax.Array:
    """The seed's loop, written the same way in every framework."""
    result = a * b
    for _ in range(iterations):
        result = result + a * b
    return result

def hlo_op_counts(hlo_text: str) -> dict[str, int]:
    """Additions and multiplies in XLA's optimised HLO (fused computations included)."""
    return {"additions": len(re.findall(r"\badd\(", hlo_text)),
            "multiplications": len(re.findall(r"\bmultiply\(", hlo_text))}

# What a loop task reports of what ran (op counts, fusion, the graph's settings): its extra.
Evidence = dict[str, int | bool | str]


class LoopOutput(TypedDict):
    """What the check reads: the result, and what ran beside it (extra)."""

    result: np.ndarray
    extra: Evidence


class LoopTask:
    """Runs `run(a, b)` on resident arrays; `evidence()` says what XLA really executes."""

    def __init__(self, run: Callable, a: jax.Array, b: jax.Array, device: JaxDevice,
                 evidence: Callable[[], Evidence] | None = None) -> None:
        self.run, self.a, self.b, self.device, self.evidence = run, a, b, device, evidence
        self.result: jax.Array | None = None

    def step(self) -> jax.Array:
        self.result = self.run(self.a, self.b)
        return self.result

    def output(self) -> LoopOutput:
        result = np.asarray(self.result)
        extra: Evidence = {"device_kind": "gpu" if self.device.is_gpu else "cpu",
                           "shape": "x".join(map(str, result.shape))}
        if self.evidence is not None:
            extra.update(self.evidence())
        return {"result": result, "extra": extra}

def compiled_task(a: jax.Array, b: jax.Array, iterations: int, device: JaxDevice) -> LoopTask:
    compiled = jax.jit(lambda x, y: loop_as_written(x, y, iterations))

    def evidence() -> Evidence:
        hlo = compiled.lower(a, b).compile().as_text()
        if hlo is None:  # a backend that cannot print its HLO: no count, no folding verdict
            return {"op_count_source": "unavailable: XLA gave no HLO text",
                    "may_fuse_iterations": True}
        counts = hlo_op_counts(hlo)
        return {"executed_additions": counts["additions"],
                "executed_multiplications": counts["multiplications"],
                "op_count_source": "XLA optimized HLO", "may_fuse_iterations": True}

    return LoopTask(compiled, a, b, device, evidence)

def make_task(case: dict, variant: str, device: JaxDevice,
              inputs: dict[str, np.ndarray]) -> LoopTask:
    if variant in UNAVAILABLE:
        raise VariantUnavailable(UNAVAILABLE[variant])
    iterations = case["iterations"]
    a, b = jax.block_until_ready([jax.device_put(inputs[k], device.handle) for k in ("a", "b")])
    if variant == "as-written":
        return LoopTask(lambda x, y: loop_as_written(x, y, iterations), a, b, device)
    if variant == "compiled":
        return compiled_task(a, b, iterations, device)
    raise ValueError(f"unknown elementwise variant {variant!r}")


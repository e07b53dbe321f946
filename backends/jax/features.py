"""The features of a jitted JAX step (harness/predict/jaxfeatures.py), recorded in a worker.

The program: `jitted.lower(*args).compile()`, its `cost_analysis()` (XLA's FLOPs and bytes
accessed: a dict in jax 0.10, a list of one dict in older releases) and the kernels of its
optimized HLO (`as_text()`, read by harness/predict/hlo.py). The host: three timings on this
CPU (jaxfeatures' docstring), each the median of a few calls with their inputs ready.

Used by the JAX MNIST workload (backends/jax/mnist.py: its jitted step per batch) and by
Keras on JAX (backends/keras/training.py: Keras' own jitted train_step, reached through the
model's train_function as fit calls it).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.backend import FEATURES_PART_STEPS
from harness.predict.hlo import entry_kernels, parse
from harness.predict.jaxfeatures import JaxFeatures, KernelRecord, summarized

HOW = ("the jitted step's compiled program (backends/jax/features.py): cost_analysis() for "
       "FLOPs and bytes, the optimized HLO's entry computation for its kernels; host times "
       "the median of a few calls here")
TIMED_CALLS = 5
LOOP_STEPS = 8  # stubbed steps whose loop is timed (loop_seconds)
FEATURES_KEY, STEPS_KEY, REASON_KEY, HOST_SPEED_KEY = (
    "step_features", "step_features_steps", "step_features_reason", "host_speed")
APPROXIMATION = ("kernels read from this CPU's optimized HLO: XLA's GPU compiler fuses at "
                 "least as much, so the count is an upper bound on the GPU's (hlo.py)")


def cost_totals(compiled: Any) -> tuple[float | None, float | None]:
    """(FLOPs, bytes accessed) of cost_analysis(); None where the backend gives none."""
    cost = compiled.cost_analysis()
    if isinstance(cost, Sequence) and not isinstance(cost, dict):
        cost = cost[0] if cost else None
    if not isinstance(cost, dict):
        return None, None
    flops, moved = cost.get("flops"), cost.get("bytes accessed")
    return (float(flops) if flops is not None else None,
            float(moved) if moved is not None else None)


def program(jitted: Any, args: Sequence[Any], kwargs: dict[str, Any] | None = None,
            ) -> dict[str, Any]:
    """The compiled program's kernels, entry opcodes, loops and cost totals."""
    compiled = jitted.lower(*args, **(kwargs or {})).compile()
    kernels, counts, loops = entry_kernels(parse(compiled.as_text()))
    flops, moved = cost_totals(compiled)
    return {"kernels": [KernelRecord.of(kernel) for kernel in kernels], "entry_opcodes": counts,
            "loops": loops, "cost_flops": flops, "cost_bytes": moved}


def call_seconds(call: Callable[[], Any], calls: int = TIMED_CALLS) -> float:
    """Median seconds until CALL returns (not until its work is done), its result waited for
    after each clock read so every call starts on an idle queue."""
    jax.block_until_ready(call())  # a warm call: compiled, cached
    found = []
    for _ in range(calls):
        started = time.perf_counter()
        result = call()
        found.append(time.perf_counter() - started)
        jax.block_until_ready(result)
    return statistics.median(found)


def tiny_dispatch_seconds(device: Any) -> float:
    """What any dispatch costs here: a jitted x + 1 of an 8-element array, as the profile's
    jax.dispatch row calls it."""
    tiny = jax.jit(lambda x: x + 1.0)
    value = jax.device_put(jnp.ones((8,), jnp.float32), device)
    return call_seconds(lambda: tiny(value), calls=3 * TIMED_CALLS)


def zeros_like(tree: Any, device: Any) -> Any:
    """TREE with each shape-and-dtype leaf (jax.ShapeDtypeStruct) made an array of zeros on
    DEVICE; other leaves (arrays, Python numbers) as they are."""
    def made(leaf: Any) -> Any:
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            return leaf
        try:
            return jax.device_put(np.zeros(leaf.shape, leaf.dtype), device)
        except TypeError:  # a dtype numpy has not (a typed PRNG key)
            return jax.device_put(jnp.zeros(leaf.shape, leaf.dtype), device)
    return jax.tree.map(made, tree)


def null_dispatch_seconds(first: Any, rest: Sequence[Any], device: Any) -> float:
    """The step's dispatch without its work, on this CPU: a jitted stand-in taking the step's
    arguments (the state as zeros of its shapes, donated and returned as it is; the others
    as given, or zeros where only their shapes are),
    called back to back. Why not the step itself: XLA's CPU runtime may run part of a small
    program on the calling thread before the call returns (the MNIST step's call took 0.44
    of its 0.65 ms on the 2-core VM), so the call's time is not its dispatch."""
    null = jax.jit(lambda head, *tail: head, donate_argnums=0)
    holder, others = [zeros_like(avals(first), device)], zeros_like(tuple(rest), device)

    def call() -> Any:
        holder[0] = null(holder[0], *others)
        return holder[0]
    return call_seconds(call, calls=3 * TIMED_CALLS)


class Stamped:
    """A stand-in for a jitted step: returns what RETURNS makes of its arguments at once (the
    state, as it came), and stamps the clock at each call, so the loop's own host work per
    step is the time from one call to the next."""

    def __init__(self, returns: Callable[..., Any]) -> None:
        self.returns = returns
        self.stamps: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.stamps.append(time.perf_counter())
        return self.returns(*args, **kwargs)


def loop_seconds(step: Any, stub: Stamped, runs: int = 3) -> float:
    """Seconds per step of the loop around a stubbed step (blocks.CallStep STEP whose jitted
    step is STUB): the median time from one stubbed call to the next over RUNS parts of
    1 + LOOP_STEPS steps. Between two calls lies what the loop does per step (gathering and
    placing a batch, Keras' iterator and callbacks), not the call's own set-up (Keras' fit
    building its epoch iterator), which a step shares with the whole epoch."""
    gaps: list[float] = []
    steps = min(1 + LOOP_STEPS, int(step.steps_per_call))
    for _ in range(runs):
        stub.stamps.clear()
        step.part(steps)()
        gaps += [later - earlier for earlier, later in itertools.pairwise(stub.stamps)]
    return statistics.median(gaps) if gaps else 0.0


def avals(tree: Any) -> Any:
    """Shapes and dtypes of a pytree of arrays (what lowering needs; a donated array
    keeps them after its buffer is gone)."""
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf), leaf.dtype)
                        if hasattr(leaf, "dtype") and hasattr(leaf, "shape") else leaf, tree)


def features(framework: str, found: dict[str, Any], *, dispatch_here_s: float | None,
             tiny_dispatch_here_s: float | None, loop_host_here_s: float | None,
             step_s: float | None, h2d: tuple[int, str], call_here_s: float | None = None,
             notes: Sequence[str] = ()) -> JaxFeatures:
    """The JaxFeatures record of one jitted step (FOUND: program()'s result)."""
    return summarized(JaxFeatures(
        framework=framework, how=HOW, platform=jax.default_backend(), dispatches=1,
        dispatch_here_s=dispatch_here_s, tiny_dispatch_here_s=tiny_dispatch_here_s,
        call_here_s=call_here_s,
        loop_host_here_s=loop_host_here_s, step_s=step_s, h2d_bytes=h2d[0], h2d_how=h2d[1],
        notes=[APPROXIMATION, *notes], **found))


def with_host_speed(record: JaxFeatures) -> dict[str, Any]:
    """The features pass's extra fields: the record, one step per record, this CPU's speed."""
    from harness.predict.hostspeed import speed_record  # noqa: PLC0415

    return {FEATURES_KEY: record.record(), STEPS_KEY: 1, HOST_SPEED_KEY: speed_record()}


def per_step(step: Any, seconds_per_call: float | None) -> float | None:
    return seconds_per_call / step.steps_per_call if seconds_per_call else None


def part_steps(step: Any) -> int:
    """Steps of a call a spy watches (Keras' train_function)."""
    return min(FEATURES_PART_STEPS, int(step.steps_per_call))

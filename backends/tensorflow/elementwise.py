"""The multiply-add loop in TensorFlow: eager, Variable.assign_add, XLA, and tf.function.

The graph variant is where the seed's trap lives: Grappler's arithmetic optimizer turns the
traced loop into `a * b * (k+1)`. Measured on TF 2.21 (k=100, 10^6 elements, 2-core CPU):
default options leave 2 Mul and 0 AddV2 in the executed graph (3.0 ms per call); with
`arithmetic_optimization` off, 101 Mul and 100 AddV2 (22.5 ms), the same as with the whole
meta-optimizer off. Constant folding and the loop optimizer changed nothing here: a and b are
function arguments, not constants, and the Python loop is unrolled, so there is no While op.
So only the arithmetic optimizer is switched off, and every other Grappler pass stays on.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any, TypedDict

import numpy as np
import tensorflow as tf

from harness.backend import VariantUnavailable
from harness.backends.tensorflow.device import TensorFlowDevice

# Options the graph variant runs with; "on" (a test/teaching switch) keeps TF's defaults.
GRAPPLER_WITHOUT_FOLDING = {"arithmetic_optimization": False}
ADD_OPS = ("Add", "AddV2")


def loop_as_written(a: tf.Tensor, b: tf.Tensor, iterations: int) -> tf.Tensor:
    """The seed's loop; under tf.function the Python loop unrolls into 2k+1 ops."""
    result = a * b
    for _ in range(iterations):
        result = result + a * b
    return result


def loop_of(iterations: int) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """The loop as a two-argument function, for tf.function to trace."""

    def loop(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return loop_as_written(a, b, iterations)

    return loop


def graph_op_counts(graph_def: Any) -> dict[str, int]:
    """Additions and multiplies a GraphDef holds (an AddN of n inputs counts n-1 additions)."""
    kinds = Counter(node.op for node in graph_def.node)
    add_n_additions = sum(len([i for i in node.input if not i.startswith("^")]) - 1
                          for node in graph_def.node if node.op == "AddN")
    # A remapper fusion such as _FusedMulAdd (not seen on CPU here) still does one of each.
    fused = sum(count for op, count in kinds.items() if "MulAdd" in op)
    return {"additions": sum(kinds[op] for op in ADD_OPS) + add_n_additions + fused,
            "multiplications": kinds["Mul"] + fused, "nodes": len(graph_def.node)}


def executed_graph_counts(call_fresh_function: Callable[[], Any]) -> dict[str, int]:
    """Op counts of the graph TF runs (after Grappler), from a fresh function's run metadata.

    Why run metadata: the traced graph (concrete_function.graph) is what Python built, before
    Grappler; only the post-optimisation graph shows whether the loop survived. Why a fresh
    function: TF records that graph when a function is instantiated, and the timed one was
    instantiated long before; a new one from the same code, inputs and options gets the same
    rewrite. Empty when TF recorded no graph of the loop (no evidence either way).
    """
    from tensorflow.python.eager import context  # private, but the only way to see it in TF2

    runtime = context.context()
    runtime.enable_run_metadata()
    try:
        call_fresh_function()
        metadata = runtime.export_run_metadata()
    finally:
        runtime.disable_run_metadata()
    # TF may record the same function more than once; graphs without a Mul are not the loop.
    # The fewest additions among the loop's graphs is the conservative answer.
    loop_graphs = [graph_op_counts(function_graph.post_optimization_graph)
                   for function_graph in metadata.function_graphs
                   if graph_op_counts(function_graph.pre_optimization_graph)["multiplications"]]
    return min(loop_graphs, key=lambda counts: counts["additions"], default={})


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
    """Runs `run() -> result` on the cell's device; `evidence()` says what really executed."""

    def __init__(self, run: Callable[[], Any], placement: str, device_kind: str,
                 evidence: Callable[[], Evidence] | None = None) -> None:
        self.run, self.placement, self.device_kind = run, placement, device_kind
        self.evidence = evidence
        self.result: Any = None

    def step(self) -> None:
        with tf.device(self.placement):
            self.result = self.run()

    def output(self) -> LoopOutput:
        result = tf.convert_to_tensor(self.result).numpy()
        extra: Evidence = {"device_kind": self.device_kind,
                           "shape": "x".join(map(str, result.shape))}
        if self.evidence is not None:
            with tf.device(self.placement):
                extra.update(self.evidence())
        return {"result": result, "extra": extra}


def in_place_runner(a: tf.Tensor, b: tf.Tensor, iterations: int) -> Callable[[], tf.Variable]:
    """TF tensors are immutable; a Variable's assign_add is the closest thing to addcmul_."""
    result = tf.Variable(tf.zeros_like(a))

    def run() -> tf.Variable:
        result.assign(a * b, read_value=False)
        for _ in range(iterations):
            result.assign_add(a * b, read_value=False)
        return result

    return run


def compiled_task(a: tf.Tensor, b: tf.Tensor, iterations: int, placement: str,
                  device_kind: str) -> LoopTask:
    """tf.function(jit_compile=True): XLA, which fuses the loop but keeps every addition."""
    compiled = tf.function(loop_of(iterations), jit_compile=True)
    state = {"compiled_once": False}

    def run() -> tf.Tensor:
        if state["compiled_once"]:
            return compiled(a, b)
        try:
            result = compiled(a, b)
        except (tf.errors.UnimplementedError, tf.errors.InvalidArgumentError,
                tf.errors.NotFoundError) as exc:
            raise VariantUnavailable(f"XLA (jit_compile) failed here: {exc.message[:300]}") from exc
        state["compiled_once"] = True
        return result

    def evidence() -> Evidence:
        hlo = compiled.experimental_get_compiler_ir(a, b)(stage="optimized_hlo")
        counts = hlo_op_counts(hlo)
        # XLA fuses the whole loop into one kernel (seen on CPU): held to a, b in, result out.
        return {"executed_additions": counts["additions"],
                "executed_multiplications": counts["multiplications"],
                "op_count_source": "XLA optimized HLO", "may_fuse_iterations": True}

    return LoopTask(run, placement, device_kind, evidence)


def graph_task(a: tf.Tensor, b: tf.Tensor, case: dict, placement: str,
               device_kind: str) -> LoopTask:
    """tf.function of the loop with Grappler on, minus the pass that folds it (unless asked)."""
    folding_allowed = case.get("grappler", "off") == "on"
    if not folding_allowed:
        # Global to this worker process, which runs this one cell only.
        tf.config.optimizer.set_experimental_options(GRAPPLER_WITHOUT_FOLDING)
    iterations = case["iterations"]
    timed_function = tf.function(loop_of(iterations))

    def evidence() -> Evidence:
        traced = timed_function.get_concrete_function(a, b).graph.as_graph_def()
        found: Evidence = {"traced_nodes": len(traced.node),
                           "arithmetic_optimizer": "on" if folding_allowed else "off"}
        executed = executed_graph_counts(lambda: tf.function(loop_of(iterations))(a, b))
        if not executed:
            return {**found, "op_count_source": "unavailable: TF recorded no function graph"}
        return {**found, "executed_additions": executed["additions"],
                "executed_multiplications": executed["multiplications"],
                "executed_nodes": executed["nodes"], "op_count_source": "post-Grappler graph"}

    return LoopTask(lambda: timed_function(a, b), placement, device_kind, evidence)


def make_task(case: dict, variant: str, device: TensorFlowDevice,
              inputs: dict[str, np.ndarray]) -> LoopTask:
    placement = device.handle
    device_kind = "gpu" if device.is_gpu else "cpu"
    iterations = case["iterations"]
    with tf.device(placement):
        # tf.identity under the scope makes the copy to the device happen here, not in step().
        a = tf.identity(tf.constant(inputs["a"]))
        b = tf.identity(tf.constant(inputs["b"]))
        if variant == "as-written":
            return LoopTask(lambda: loop_as_written(a, b, iterations), placement, device_kind)
        if variant == "in-place":
            return LoopTask(in_place_runner(a, b, iterations), placement, device_kind)
        if variant == "compiled":
            return compiled_task(a, b, iterations, placement, device_kind)
        if variant == "graph":
            return graph_task(a, b, case, placement, device_kind)
    raise ValueError(f"unknown elementwise variant {variant!r}")

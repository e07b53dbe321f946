"""The multiply-add loop in PyTorch: eager, in place, torch.compile and TorchScript."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypedDict

import numpy as np
import torch

from harness.backend import VariantUnavailable
from harness.backends.torch.device import TorchDevice


def loop_as_written(a: torch.Tensor, b: torch.Tensor, iterations: int) -> torch.Tensor:
    """The seed's loop verbatim: a fresh a*b temporary and a fresh result every iteration."""
    result = a * b
    for _ in range(iterations):
        result = result + a * b
    return result


# What a loop task reports of what ran (op counts, fusion, the graph's settings): its extra.
Evidence = dict[str, int | bool | str]


class LoopOutput(TypedDict):
    """What the check reads: the result, and what ran beside it (extra)."""

    result: np.ndarray
    extra: Evidence


class LoopTask:
    """Runs `run() -> result` under no_grad, as the seed did; `evidence()` adds what ran."""

    def __init__(self, run: Callable[[], torch.Tensor], device_kind: str,
                 evidence: Callable[[], Evidence] | None = None) -> None:
        self.run, self.device_kind, self.evidence = run, device_kind, evidence
        self.result: torch.Tensor | None = None

    def step(self) -> None:
        with torch.no_grad():
            self.result = self.run()

    def output(self) -> LoopOutput:
        assert self.result is not None  # output() follows the timed step() calls
        result = self.result.cpu().numpy()
        extra: Evidence = {"device_kind": self.device_kind,
                           "shape": "x".join(map(str, result.shape))}
        if self.evidence is not None:
            with torch.no_grad():
                extra.update(self.evidence())
        return {"result": result, "extra": extra}


def in_place_runner(a: torch.Tensor, b: torch.Tensor,
                    iterations: int) -> Callable[[], torch.Tensor]:
    """result = a*b into a buffer allocated once, then addcmul_: no temporaries at all."""
    result = torch.empty_like(a)

    def run() -> torch.Tensor:
        torch.mul(a, b, out=result)
        for _ in range(iterations):
            result.addcmul_(a, b)
        return result

    return run


def compiled_runner(a: torch.Tensor, b: torch.Tensor,
                    iterations: int) -> Callable[[], torch.Tensor]:
    """torch.compile of the loop; a compiler that fails on the first call makes it unavailable."""
    if not hasattr(torch, "compile"):
        raise VariantUnavailable(f"torch {torch.__version__} has no torch.compile")
    # Each case compiles afresh, as a new program would (no shape-generalised reuse).
    torch._dynamo.reset()
    compiled = torch.compile(loop_as_written)
    state = {"compiled_once": False}

    def run() -> torch.Tensor:
        if state["compiled_once"]:
            return compiled(a, b, iterations)
        try:
            result = compiled(a, b, iterations)
        except torch._dynamo.exc.BackendCompilerFailed as exc:
            reason = str(exc).strip().splitlines()[0][:300]
            raise VariantUnavailable(f"torch.compile failed here: {reason}") from exc
        state["compiled_once"] = True
        return result

    return run


def scripted_task(a: torch.Tensor, b: torch.Tensor, iterations: int,
                  device_kind: str) -> LoopTask:
    """torch.jit.script: torch's graph mode (deprecated, but what a 'graph' user reached for).

    Seen on CPU (torch 2.13): the optimised graph computes a*b once, before the loop (it is
    loop-invariant), and unrolls the loop by 8; no fusion group on CPU. On a GPU the TensorExpr
    fuser may fuse the unrolled additions, which the evidence reports.
    """
    script = getattr(torch.jit, "script", None)
    if script is None:
        raise VariantUnavailable(f"torch {torch.__version__} has no torch.jit.script")
    try:
        scripted = script(loop_as_written)
    except Exception as exc:  # noqa: BLE001 - any scripting failure means no graph mode here
        raise VariantUnavailable(f"torch.jit.script failed: {type(exc).__name__}: {exc}") from exc

    def evidence() -> Evidence:
        scripted(a, b, iterations)
        graph_text = str(torch.jit.last_executed_optimized_graph())
        fusion_groups = len(re.findall(r"prim::(?:TensorExprGroup|FusionGroup|CudaFusionGroup)",
                                       graph_text))
        return {"fusion_groups": fusion_groups, "may_fuse_iterations": fusion_groups > 0}

    return LoopTask(lambda: scripted(a, b, iterations), device_kind, evidence)


def make_task(case: dict, variant: str, device: TorchDevice,
              inputs: dict[str, np.ndarray]) -> LoopTask:
    a = torch.from_numpy(inputs["a"]).to(device.handle)
    b = torch.from_numpy(inputs["b"]).to(device.handle)
    iterations = case["iterations"]
    device_kind = "gpu" if device.is_gpu else "cpu"
    if variant == "as-written":
        return LoopTask(lambda: loop_as_written(a, b, iterations), device_kind)
    if variant == "in-place":
        return LoopTask(in_place_runner(a, b, iterations), device_kind)
    if variant == "compiled":
        # Inductor fuses pointwise chains: the check holds it to the unavoidable traffic only.
        return LoopTask(compiled_runner(a, b, iterations), device_kind,
                        lambda: {"may_fuse_iterations": True})
    if variant == "graph":
        return scripted_task(a, b, iterations, device_kind)
    raise ValueError(f"unknown elementwise variant {variant!r}")

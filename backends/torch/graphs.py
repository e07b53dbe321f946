"""CUDA graphs: captured by the first call, and whether torch.compile's were captured.

CapturedOnFirstCall captures a hand-made CUDA graph in its first call, not when the task is
built: the harness times a task's first step() as the cold call, so a capture in make_task
(its warm-up calls included) was in no timed figure at all (a graph cell read cold = 1.08x
warm). Captured on first use, whoever calls first pays for it, as a user's first call does.

mode="reduce-overhead" captures CUDA graphs only where Inductor allows it, and says why not
in a log line ("skipping cudagraphs due to mutated inputs", "... cpu device", ...) that is off
by default; dynamo counts graph breaks in torch._dynamo.utils.counters. CompileWatch collects
both while a compiled task runs, so the case's record can say "captured" or why not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch._dynamo.utils import counters

from harness.backends.torch.device import capture_cuda_graph

# Where torch logs a skipped capture: the "cudagraphs" artifact logger (torch >= 2.5) and,
# in older releases, the perf_hints one.
SKIP_LOGGERS = ("torch._inductor.cudagraph_utils.__cudagraphs",
                "torch._inductor.cudagraph_utils.__perf_hints",
                "torch._inductor.cudagraph_trees.__cudagraphs")
KEPT_REASONS = 5


class Replayable(Protocol):
    def replay(self) -> None: ...


# (graph, static output) of one captured call of fn: capture_cuda_graph, or a test's stand-in.
Capture = Callable[[], tuple[Replayable, Any]]


class CapturedOnFirstCall:
    """`fn` captured in a CUDA graph by the first call, then replayed; returns the static output.

    The capture (and the eager warm-up calls it runs first on a side stream) happens inside
    the first call, so it lands in the cold call's time by construction. `after_capture`
    runs right after it, still inside that call (e.g. putting back the weights that the
    warm-up calls trained). A capture torch refuses raises VariantUnavailable from that call.
    """

    def __init__(self, fn: Callable[[], Any], handle: torch.device | None = None,
                 warmup_calls: int = 3, after_capture: Callable[[], None] | None = None,
                 capture: Capture | None = None) -> None:
        self.capture_call: Capture = capture or (
            lambda: capture_cuda_graph(fn, handle or torch.device("cuda"), warmup_calls))
        self.after_capture = after_capture
        self.graph: Replayable | None = None
        self.output: Any = None

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def capture(self) -> None:
        """Capture now (once); the caller's first call, the cold one, is where this belongs."""
        if self.graph is not None:
            return
        graph, self.output = self.capture_call()
        if self.after_capture is not None:
            self.after_capture()
        self.graph = graph  # only once complete: a failed capture is not half-kept

    def __call__(self) -> Any:
        if self.graph is None:
            self.capture()
        assert self.graph is not None
        self.graph.replay()
        return self.output


class AdamState:
    """torch.optim.Adam's default update as foreach ops on plain tensors: traceable in one graph.

    The same rule as torch.optim.Adam (no weight decay, no amsgrad): m = lerp(m, g, 1 - b1),
    v = b2 v + (1 - b2) g^2, p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    The step count is a device tensor, so one captured graph serves every step.
    """

    def __init__(self, params: list[torch.Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False,
                 **launch_options: Any) -> None:
        # launch_options (foreach, fused, capturable, ...) choose how torch launches the same
        # update; here the compiler does. Options that change the rule are refused.
        if weight_decay or amsgrad or maximize:
            raise ValueError("AdamState implements Adam's default rule only "
                             f"(weight_decay={weight_decay}, amsgrad={amsgrad}, "
                             f"maximize={maximize})")
        self.lr, (self.beta1, self.beta2), self.eps = float(lr), betas, eps
        self.exp_avg = [torch.zeros_like(param) for param in params]
        self.exp_avg_sq = [torch.zeros_like(param) for param in params]
        self.step = torch.zeros((), dtype=torch.float32,
                                device=params[0].device if params else None)

    def tensors(self) -> list[torch.Tensor]:
        return [*self.exp_avg, *self.exp_avg_sq, self.step]

    def update(self, params: list[torch.Tensor], grads: list[torch.Tensor]) -> None:
        """One Adam step, in place on params and the moments."""
        self.step.add_(1)
        torch._foreach_lerp_(self.exp_avg, grads, 1 - self.beta1)
        torch._foreach_mul_(self.exp_avg_sq, self.beta2)
        torch._foreach_addcmul_(self.exp_avg_sq, grads, grads, 1 - self.beta2)
        correction1 = 1 - self.beta1 ** self.step
        root_correction2 = torch.sqrt(1 - self.beta2 ** self.step)
        denominators = torch._foreach_div(torch._foreach_sqrt(self.exp_avg_sq),
                                          root_correction2)
        torch._foreach_add_(denominators, self.eps)
        steps = torch._foreach_div(self.exp_avg, denominators)
        torch._foreach_mul_(steps, -self.lr / correction1)
        torch._foreach_add_(params, steps)


class _SkipLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage().strip()
        if "cudagraph" in message.lower() and message not in self.messages:
            self.messages.append(message[:300])


class CompileWatch:
    """Listens from construction on: skip messages, graph breaks, graphs compiled."""

    def __init__(self, cuda_graphs_expected: bool) -> None:
        self.expected = cuda_graphs_expected
        self.handler = _SkipLog()
        self.loggers = [logging.getLogger(name) for name in SKIP_LOGGERS]
        for logger in self.loggers:
            logger.addHandler(self.handler)
            if logger.getEffectiveLevel() > logging.WARNING:
                logger.setLevel(logging.WARNING)
        self.start = self._counts()

    @staticmethod
    def _counts() -> dict[str, Any]:
        return {"breaks": dict(counters["graph_break"]),
                "graphs": counters["stats"].get("unique_graphs", 0),
                "skips": counters["inductor"].get("cudagraph_skips", 0)}

    def record(self) -> dict[str, Any]:
        """{'captured', 'graphs', 'skips', 'graph_breaks'} since construction."""
        now = self._counts()
        breaks = {reason[:200]: count - self.start["breaks"].get(reason, 0)
                  for reason, count in now["breaks"].items()
                  if count > self.start["breaks"].get(reason, 0)}
        skipped = now["skips"] - self.start["skips"]
        graphs = now["graphs"] - self.start["graphs"]
        skips = self.handler.messages[:KEPT_REASONS]
        if skipped and not skips:
            skips = [f"{skipped} graph(s) skipped (torch logged no reason here)"]
        return {"captured": bool(self.expected and graphs and not skipped),
                "expected": self.expected, "graphs": graphs, "skipped_graphs": skipped,
                "skips": skips, "graph_breaks": dict(list(breaks.items())[:KEPT_REASONS])}

    def close(self) -> None:
        for logger in self.loggers:
            logger.removeHandler(self.handler)

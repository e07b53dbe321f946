"""Whether torch.compile's CUDA graphs were captured, and torch's own reasons where not.

mode="reduce-overhead" captures CUDA graphs only where Inductor allows it, and says why not
in a log line ("skipping cudagraphs due to mutated inputs", "... cpu device", ...) that is off
by default; dynamo counts graph breaks in torch._dynamo.utils.counters. CompileWatch collects
both while a compiled task runs, so the case's record can say "captured" or why not.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import torch
from torch._dynamo.utils import counters

# Where torch logs a skipped capture: the "cudagraphs" artifact logger (torch >= 2.5) and,
# in older releases, the perf_hints one.
SKIP_LOGGERS = ("torch._inductor.cudagraph_utils.__cudagraphs",
                "torch._inductor.cudagraph_utils.__perf_hints",
                "torch._inductor.cudagraph_trees.__cudagraphs")
KEPT_REASONS = 5
COMPILED_AUTOGRAD_ENV = "HARNESS_COMPILED_AUTOGRAD"


def compiled_autograd_wanted() -> bool:
    return os.environ.get(COMPILED_AUTOGRAD_ENV, "") == "1"


@contextlib.contextmanager
def autograd_setting(compiled_autograd: bool) -> Iterator[None]:
    """torch._dynamo.config.compiled_autograd set for the block (where this torch has it)."""
    if not compiled_autograd or not hasattr(torch._dynamo.config, "compiled_autograd"):
        yield
        return
    with torch._dynamo.config.patch(compiled_autograd=True):
        yield


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

"""How a failure reads: one line naming the cause, 'out of memory' when it was memory."""

from __future__ import annotations

# Lower-cased, spaces removed: torch says "CUDA out of memory", TF "ResourceExhaustedError: OOM".
OOM_MARKERS = ("outofmemory", "resourceexhausted", "oomwhenallocating", "memoryerror")


def looks_like_oom(text: str) -> bool:
    """Whether an exception text or a stderr tail reports running out of memory."""
    squashed = text.lower().replace(" ", "")
    return any(marker in squashed for marker in OOM_MARKERS)


def failure_reason(exc: BaseException) -> str:
    """One line: 'out of memory: ...' for OOMs, else the exception type and message."""
    text = f"{type(exc).__name__}: {exc}".strip()
    first_line = text.splitlines()[0][:400] if text else type(exc).__name__
    if looks_like_oom(text):
        return "out of memory: " + first_line
    return first_line

"""A FLOP count's second opinion: an independent count of the same call, compared part by part.

The op-level count (torch's formulas and the harness's, XLA's cost analysis) is checked
against a count made another way from the same call (the layers' shapes; the jaxpr's dot and
convolution shapes). A backend stores both, per part the two cover (a layer's forward, its
backward, a whole JAX step), in extra['flops_second_opinion']:

    {"by": "module shapes (nn.Conv*, ...)", "margin": 0.1,
     "parts": [{"name": "features.1 (Conv2d) backward", "counted": 153354240,
                "ops": {"aten.convolution_backward": 153354240}, "low": 4718592,
                "high": 4718592, "gradients": "engine: input yes, weights yes; could flow:
                input yes, weights yes"}, ...],
     "not_compared": ["rnn (LSTM) backward: aten._cudnn_rnn_backward has no formula"]}

A part is disputed when its op-level figure lies outside the second count's range widened by
the margin (low x (1 - margin) to high x (1 + margin)). A count with a disputed part is
printed as disputed, with both figures, and no share of a peak is made from it.

Why 10%: the formulas of both sides are exact for what they cover (a convolution or linear
layer agrees to the FLOP), and where the work depends on the kernel the second count is a
range (fused RNN, flash attention); the margin leaves room for what neither side counts
exactly (XLA's elementwise work, a layer calling a cheap extra op), while the errors worth
catching are factors: torch's grouped weight gradient (groups x), a formula counted twice (2x).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.core.units import format_ratio

RECORD_KEY = "flops_second_opinion"
MARGIN = 0.10
# Disputed parts named on one line; the rest are counted ("and 3 more parts").
NAMED_PARTS = 3


@dataclass(frozen=True)
class Part:
    """One part both counts cover: the op-level figure and the second count's range."""

    name: str
    counted: int
    low: int
    high: int
    ops: Mapping[str, int] = field(default_factory=dict)
    # How the second count was read where that is worth keeping: a backward's gradients (which
    # the engine said it computes, which could flow at all), so a dispute can be traced.
    gradients: str = ""

    def disputed(self, margin: float) -> bool:
        return self.counted < self.low * (1 - margin) or self.counted > self.high * (1 + margin)

    def ratio(self) -> float | None:
        """The op-level figure over the nearer end of the second count's range."""
        nearer = self.high if self.counted > self.high else self.low
        return self.counted / nearer if nearer else None

    def record(self) -> dict[str, object]:
        stored: dict[str, object] = {"name": self.name, "counted": self.counted,
                                     "ops": dict(self.ops), "low": self.low, "high": self.high}
        if self.gradients:
            stored["gradients"] = self.gradients
        return stored

    def text(self, second: str) -> str:
        """'features.1 (Conv2d) backward: 153,354,240 FLOPs by op (aten.convolution_backward)
        vs 4,718,592 by module shapes (32.5x)'."""
        ops = ", ".join(sorted(self.ops)) or "none"
        expected = f"{self.low:,}" if self.low == self.high else f"{self.low:,} to {self.high:,}"
        ratio = self.ratio()
        times = f" ({format_ratio(ratio)})" if ratio is not None else ""
        return f"{self.name}: {self.counted:,} FLOPs by op ({ops}) vs {expected} by {second}{times}"


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{value!r} is no count")
    return int(value)


def parts_of(record: Mapping[str, object]) -> list[Part]:
    """The compared parts of a stored record (a malformed one holds none)."""
    parts = record.get("parts")
    if not isinstance(parts, list):
        return []
    found = []
    for item in parts:
        if not isinstance(item, dict):
            continue
        try:
            ops = item.get("ops") or {}
            found.append(Part(str(item["name"]), _integer(item["counted"]),
                              _integer(item["low"]), _integer(item["high"]),
                              {str(k): _integer(v) for k, v in dict(ops).items()},
                              str(item.get("gradients") or "")))
        except (KeyError, TypeError, ValueError):
            continue
    return found


def margin_of(record: Mapping[str, object]) -> float:
    margin = record.get("margin")
    return float(margin) if isinstance(margin, (int, float)) else MARGIN


def disputed_parts(extra: Mapping[str, object]) -> list[Part]:
    """The parts of a case's second opinion whose two counts disagree beyond its margin."""
    record = extra.get(RECORD_KEY)
    if not isinstance(record, dict):
        return []
    margin = margin_of(record)
    return [part for part in parts_of(record) if part.disputed(margin)]


def disputed_text(extra: Mapping[str, object]) -> str:
    """'' for a count the second opinion agrees with (or that has none), else the disputed
    parts with both figures: 'features.1 (Conv2d) backward: 153,354,240 FLOPs by op
    (aten.convolution_backward) vs 4,718,592 by module shapes (32.5x)'."""
    disputed = disputed_parts(extra)
    if not disputed:
        return ""
    record = extra[RECORD_KEY]
    second = str(record.get("second") or "the second count") if isinstance(record, dict) \
        else "the second count"
    texts = [part.text(second) for part in disputed[:NAMED_PARTS]]
    rest = len(disputed) - NAMED_PARTS
    return "; ".join(texts) + (f"; and {rest} more part{'s' if rest > 1 else ''}"
                               if rest > 0 else "")


def record(by: str, second: str, parts: list[Part], not_compared: list[str],
           margin: float = MARGIN) -> dict[str, object]:
    """The stored form (extra['flops_second_opinion'])."""
    return {"by": by, "second": second, "margin": margin,
            "parts": [part.record() for part in parts], "not_compared": not_compared}

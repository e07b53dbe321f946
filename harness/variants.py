"""The variant vocabulary: how a variant's name is composed and declared, and what one
implementation runs (Capability). Nothing here imports a framework.

A workload's variants themselves are declared once, as entries of a catalogue
(harness.core.fixes.Catalogue); the names, capabilities and refusals below are derived from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# Composed variants: "resident+compiled+bf16" runs its parts at once (a workload that declares
# a variant_conflict rule); a numbered variant is declared as "threads-N" and named
# "threads-4" (N a positive integer).
COMPOSE = "+"
NUMBERED = "-N"


def variant_parts(name: str) -> tuple[str, ...]:
    """'resident+bf16' -> ('resident', 'bf16'); a single variant is its own one part."""
    return tuple(name.split(COMPOSE))


def declared_name(part: str) -> str:
    """The name a part is declared under: 'threads-4' -> 'threads-N'; any other, itself."""
    stem, dash, number = part.rpartition("-")
    return f"{stem}{NUMBERED}" if dash and stem and number.isdigit() else part


def is_declared(part: str, variants: Iterable[str]) -> bool:
    """Whether `part` is one of `variants`, or a positive number of a numbered one."""
    declared = tuple(variants)
    if part.endswith(NUMBERED):  # the pattern itself needs its number
        return False
    if part in declared:
        return True
    number = part.rpartition("-")[2]
    return declared_name(part) in declared and number.isdigit() and int(number) >= 1


def compose(parts: Iterable[str], variants: Sequence[str]) -> str:
    """The canonical name of a set of parts: in the order `variants` declares them."""
    order = {name: index for index, name in enumerate(variants)}
    return COMPOSE.join(sorted(parts, key=lambda part: (order.get(declared_name(part),
                                                                  len(order)), part)))


@dataclass(frozen=True)
class Capability:
    """What one implementation (a workload in one framework) runs, declared, not discovered.

    The planner reads it to write a cell `unavailable`, with the reason, without starting a
    worker (Keras' backend folders declare what they implement in the same spirit).
    variants: the workload's variants this implementation runs; empty means every one.
    refused: variant -> why this implementation cannot run it on any device.
    refused_on: device kind ("cpu", "gpu") -> variant -> why not on that kind of device.
    """

    variants: tuple[str, ...] = ()
    refused: Mapping[str, str] = field(default_factory=dict)
    refused_on: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def refusal(self, variant: str, kind: str) -> str | None:
        """Why `variant` cannot run on a device of `kind`; None when it can. A composed name is
        refused for its first refused part (that part's reason); a numbered name
        ('threads-4') is looked up under its declared one ('threads-N')."""
        parts = variant_parts(variant)
        if len(parts) > 1:
            return next((f"{part}: {reason}" for part in parts
                         if (reason := self.refusal(part, kind)) is not None), None)
        known = {*self.variants, *self.refused, *self.refused_on.get(kind, {})}
        variant = variant if variant in known else declared_name(variant)
        if variant in self.refused:
            return self.refused[variant]
        if variant in self.refused_on.get(kind, {}):
            return self.refused_on[kind][variant]
        if self.variants and variant not in self.variants:
            return f"not implemented (this implementation runs {', '.join(self.variants)})"
        return None

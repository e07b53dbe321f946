"""Which fix to try next: the as-written cell's diagnosis ranks the candidates, from the catalogue.

`harness advise` measures the candidates in this order as far as its budget goes (those the
diagnosis points at, then those it does not speak of, then those it argues against), and the
advice explains each fix it measured, or did not, in the catalogue's words with the measured
figures. The catalogue (harness.core.fixes.Catalogue, the user-model workload's fixes and any
plugin's) is reached through harness.core.registry.fix_catalogue, typed; a built-in
workload's variants are not in it and are ranked as the catalogue does not say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core import registry
from harness.core.diagnosis import DiagnosisKind
from harness.core.fixes import Catalogue, Fix
from harness.core.units import device_kind
from harness.data.adviserecord import AdvisedCell
from harness.spec import BadInput
from harness.variants import variant_parts as split_variant

HOST_BOUND = DiagnosisKind.HOST
UNPROFILED = DiagnosisKind.UNPROFILED


def catalogue() -> Catalogue | None:
    """The fix catalogue; None where it cannot load (the advice still ranks what was measured)."""
    try:
        return registry.fix_catalogue()
    except Exception:  # noqa: BLE001 - no catalogue: nothing is said of any fix
        return None


def fix_parts(variant: str) -> list[str]:
    """The fixes a variant name applies at once ('resident+compiled' -> two)."""
    return [part for part in split_variant(variant) if part]


def fix_of(name: str) -> Fix | None:
    """The catalogue's entry for one fix name ('threads-2' finds 'threads-N')."""
    found = catalogue()
    return found.fix_of(name) if found is not None else None


def helps_when(name: str) -> tuple[str, ...]:
    """The diagnoses under which the catalogue expects a fix to help (empty: not said)."""
    entry = fix_of(name)
    return tuple(sorted(entry.helps_when)) if entry is not None else ()


def conflict(parts: Sequence[str]) -> str:
    """Why these fixes cannot run together ('' when they can), from the catalogue."""
    found = catalogue()
    return (found.conflict(list(parts)) or "") if found is not None else ""


def compose_variant(parts: Sequence[str]) -> str:
    """One variant name applying every part at once (the catalogue's own spelling)."""
    found = catalogue()
    try:
        return found.compose(list(parts)) if found is not None else "+".join(parts)
    except BadInput:  # a built-in workload's variant: joined in the order given
        return "+".join(parts)


# Diagnoses under other names: the issue says copy-bound where devicetime says transfer-bound.
COPIES: tuple[str, ...] = (DiagnosisKind.TRANSFER, DiagnosisKind.COPY)
KIND_ALIASES: dict[str, tuple[str, ...]] = {DiagnosisKind.TRANSFER: COPIES,
                                            DiagnosisKind.COPY: COPIES}


def plausible(name: str, kind: str) -> bool | None:
    """Whether the diagnosis makes the fix plausible (None: the catalogue does not say)."""
    wanted = helps_when(name)
    if not wanted:
        return None
    names = KIND_ALIASES.get(kind, (kind,))
    return any(part in names for part in wanted)


# How the as-written cell's diagnosis stands to a candidate fix (harness advise runs them in
# this order, as far as its time budget goes).
AIMED = "aimed"  # the diagnosis points at it (the catalogue's helps_when)
UNSAID = "unsaid"  # the catalogue does not say, or the diagnosis cannot tell
ARGUED_AGAINST = "argued against"  # the catalogue expects it to help under other diagnoses
FIT_ORDER = {AIMED: 0, UNSAID: 1, ARGUED_AGAINST: 2}
# What a fix would have to do under each diagnosis: the words of a not-tried line.
KIND_NEEDS: dict[str, str] = {DiagnosisKind.LAUNCH: "shorten launches",
                              DiagnosisKind.TRANSFER: "remove host-device copies",
                              DiagnosisKind.COPY: "remove host-device copies",
                              DiagnosisKind.COMPUTE: "speed up the arithmetic",
                              DiagnosisKind.MEMORY: "move fewer bytes",
                              DiagnosisKind.DEVICE: "shorten the device's own work",
                              DiagnosisKind.HOST: "cut the host's work per step"}


def candidate_fit(name: str, device: str, kind: str) -> str:
    """AIMED, UNSAID or ARGUED_AGAINST: how the diagnosis KIND of the as-written cell on DEVICE
    stands to the fix NAME (every part of a composed one).

    Only a GPU's split argues against a fix: a CPU cell is host-bound as a whole (the CPU does
    all the work), which ranks the fixes aimed at the host first but rules out nothing (bf16
    sped the small CNN's CPU step up 1.28x, a fix aimed at compute-bound steps:
    docs/findings.md); an unprofiled GPU cell says nothing either way.
    """
    fits = [plausible(part, kind) for part in fix_parts(name)]
    if any(fits):
        return AIMED
    if device_kind(device) == "cpu" or kind == UNPROFILED or all(fit is None for fit in fits):
        return UNSAID
    return ARGUED_AGAINST


def rank_candidates(names: Sequence[str], device: str, kind: str) -> list[str]:
    """The candidate fixes in the order worth measuring: those the diagnosis points at, then
    those it says nothing of, then those it argues against; the catalogue's order within."""
    return sorted(names, key=lambda name: FIT_ORDER[candidate_fit(name, device, kind)])


def argued_against(name: str, kind: str) -> str:
    """'launch-bound, bf16 cannot shorten launches (it helps when compute-, memory- or
    device-bound)': why the diagnosis argues against a fix, from the catalogue."""
    helps = sorted({wanted for part in fix_parts(name) for wanted in helps_when(part)})
    when = ", ".join(helps) if helps else "other diagnoses"
    need = KIND_NEEDS.get(kind, f"help a {kind} step")
    return f"{kind}, {name} cannot {need} (it helps when {when})"


def why_line(fix: str, kind: str, profile: Mapping[str, Any] | None) -> str:
    """One line of why the fix helps (or was tried) under diagnosis KIND, with the as-written
    cell's measured figures (its device-busy PROFILE: kernels and copies per call)."""
    found = catalogue()
    profile = profile or {}
    kernels, copies = profile.get("kernels_per_call"), profile.get("copies_per_call")
    reasons = [found.explained(part, kind, kernels, copies) if found is not None else ""
               for part in fix_parts(fix)]
    text = "; ".join(dict.fromkeys(reason for reason in reasons if reason))
    fits = [plausible(part, kind) for part in fix_parts(fix)]
    aimed = "" if any(fits) or all(fit is None for fit in fits) else \
        " (tried although the diagnosis does not point at it)"
    return f"{kind}: {text or 'measured beside the as-written cell'}{aimed}"


@dataclass(frozen=True)
class NotTried:
    """A candidate fix `harness advise` did not measure, and why (its run.json record)."""

    variant: str
    fit: str  # AIMED, UNSAID or ARGUED_AGAINST
    kind: str  # the as-written cell's diagnosis when the choice was made
    budget_s: float | None  # the run's budget (None: no limit)
    needed_s: float | None  # a budget that would have run it (None: not estimated)

    @classmethod
    def of(cls, entry: AdvisedCell) -> NotTried:
        return cls(entry.variant, entry.fit or UNSAID, entry.diagnosis, entry.budget_s,
                   entry.needed_s)

    def line(self) -> str:
        """'bf16: not tried: launch-bound, bf16 cannot shorten launches (...); --budget 260
        would run it' or 'compiled: not tried: left out by the budget of 180 s; ...'."""
        why = (argued_against(self.variant, self.kind) if self.fit == ARGUED_AGAINST
               else f"left out by the budget of {self.budget_s:.0f} s" if self.budget_s
               else "left out")
        more = f"; --budget {self.needed_s:.0f} would run it" if self.needed_s else ""
        return f"{self.variant}: not tried: {why}{more}"

"""The variant catalogue's contract: one frozen entry per variant, every list about variants
derived from it.

Every workload declares its variants here, as one Catalogue: a built-in workload's variants
(`variant(...)`: the frameworks that run it, whether it needs a GPU, why the others refuse it),
and a user model's fixes, which say more. The spec's variant names, what each framework runs
(Capability) and the device-only variants are the catalogue's derived lists; the GPU step
prediction's variants (harness/predict/kernels.py) are the entries marked `predicted`.

A fix is a variant of a user's model that changes one thing of the as-written step (where the
inputs live, how the step runs, its arithmetic, a process-wide switch). `harness advise` tries
fixes, ranks them by the as-written cell's diagnosis, prices them and explains them; the
user-model workload declares what each framework runs (Capability) and which fixes run
together. All of that reads the one `Fix` entry of each fix here, so a new fix is one entry
(the catalogue: workloads/usermodel/fixes.py, or a plugin module's FIXES) plus the backend code
that applies it. The core reaches the catalogue through harness.core.registry.fix_catalogue,
typed, never by reading a plugin module's attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from harness.core.units import device_kind, three_digits
from harness.spec import BadInput
from harness.variants import Capability, compose, declared_name, is_declared
from harness.variants import variant_parts as split_parts

# Cost classes: what a fix's worker costs before it has run once (harness.run.advisebudget).
COST_STEP = "step"  # as the as-written worker: the fix changes the step, not the worker
COST_COMPILE = "compile"  # plus the compiler's first compilations, where that is torch.compile
# Compiles and autotunes in every worker process (a minute and more a round): compare runs it
# when asked (--variant), advise never tries it on its own.
COST_AUTOTUNE = "autotune"
COST_CLASSES = (COST_STEP, COST_COMPILE, COST_AUTOTUNE)
DEVICE_KINDS = frozenset({"cpu", "gpu"})
EMPTY: Mapping[str, str] = MappingProxyType({})


def nothing() -> Mapping[str, str]:
    """An entry's empty mapping (read-only, so one serves every entry)."""
    return EMPTY


def frozen(mapping: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """A read-only copy: an entry's mappings never change after it is declared."""
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Fix:
    """One fix: where it applies, what it changes, when it helps, what it costs, why.

    `measured_why` (and `measured_why_when`, per diagnosis) is the line advise prints beside a
    measured fix, a template whose fields come from the as-written cell's profile: {kernels}
    ('180 kernels' or "the step's kernels"), {copies} ('2 host->device copies' or 'the
    host->device copies'), {number} (the N of a numbered fix such as threads-N), {name}.
    `conflicts`: another fix's name or an exclusive group -> why they never run together
    ({other}: the part of the other side that was chosen).
    """

    name: str  # the variant's name ("threads-N" stands for every threads-<count>)
    families: frozenset[str]  # the framework families whose implementation runs it
    devices: frozenset[str]  # the device kinds where it applies ("cpu", "gpu")
    helps_when: frozenset[str]  # the diagnoses under which it is expected to help
    why: str  # how it helps, one sentence
    does: str  # what the variant changes, as the workload's notes say it
    measured_why: str = ""
    measured_why_when: Mapping[str, str] = field(default_factory=nothing, hash=False)
    changes_numerics: bool = False  # judged by the model's sensitivity to its rounding
    needs_gpu: bool = False  # a backend refuses it on a CPU (not merely pointless there)
    refused: Mapping[str, str] = field(default_factory=nothing, hash=False)  # framework or family
    refused_on: Mapping[str, str] = field(default_factory=nothing, hash=False)  # device kind -> why
    exclusive: str = ""  # a group of which one fix at a time runs ('' none)
    conflicts: Mapping[str, str] = field(default_factory=nothing, hash=False)
    cost: str = COST_STEP
    # A numbered fix's numbers worth a cell, given the CPU cores the run may use.
    counts: Callable[[int | None], Sequence[int]] | None = field(default=None, compare=False)
    # The GPU step prediction models what it changes (harness/predict/kernels.py Variant).
    predicted: bool = False

    def __post_init__(self) -> None:
        if self.cost not in COST_CLASSES:
            raise ValueError(f"fix {self.name}: cost class {self.cost!r}, not one of "
                             f"{', '.join(COST_CLASSES)}")
        if not self.devices or not self.devices <= DEVICE_KINDS:
            raise ValueError(f"fix {self.name}: devices {sorted(self.devices)}, not a subset "
                             f"of {sorted(DEVICE_KINDS)}")

    @property
    def advised(self) -> bool:
        """Whether advise tries it on its own (compare runs every fix when asked)."""
        return self.cost != COST_AUTOTUNE

    @property
    def compiles(self) -> bool:
        return self.cost in (COST_COMPILE, COST_AUTOTUNE)

    def explained(self, part: str, kind: str, kernels: float | None,
                  copies: float | None) -> str:
        """The measured-why line of PART (this fix, maybe numbered) under diagnosis KIND."""
        template = self.measured_why_when.get(kind, self.measured_why) or self.why
        return template.format(
            name=part, number=part.rpartition("-")[2],
            kernels=f"{three_digits(kernels)} kernels" if kernels else "the step's kernels",
            copies=(f"{three_digits(copies)} host->device copies" if copies
                    else "the host->device copies"))


def fix(name: str, families: str, devices: str, helps: Iterable[str], why: str, does: str, *,
        measured_why: str = "", measured_why_when: Mapping[str, str] | None = None,
        changes_numerics: bool = False, needs_gpu: bool = False,
        refused: Mapping[str, str] | None = None, refused_on: Mapping[str, str] | None = None,
        exclusive: str = "", conflicts: Mapping[str, str] | None = None,
        cost: str = COST_STEP,
        counts: Callable[[int | None], Sequence[int]] | None = None,
        predicted: bool = False) -> Fix:
    """A Fix from space-separated families and device kinds (the catalogue's spelling)."""
    return Fix(name, frozenset(families.split()), frozenset(devices.split()), frozenset(helps),
               why, does, measured_why, frozen(measured_why_when), changes_numerics, needs_gpu,
               frozen(refused), frozen(refused_on), exclusive, frozen(conflicts), cost,
               counts, predicted)


def variant(name: str, frameworks: str, *, gpu_only: bool = False,
            refused: Mapping[str, str] | None = None) -> Fix:
    """A built-in workload's variant: the (space-separated) frameworks whose implementation
    runs it, on a GPU only where GPU_ONLY (the spec's device-only variants), and why each other
    framework refuses it. No diagnosis ranks it: advise tries the fixes of a model file only."""
    return fix(name, frameworks, "gpu" if gpu_only else "cpu gpu", (), "", "",
               needs_gpu=gpu_only, refused=refused)


def one_each(frameworks: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Families of one framework each: a built-in workload names frameworks, not families."""
    return {framework: (framework,) for framework in frameworks}


@dataclass(frozen=True)
class Catalogue:
    """Every fix of one workload, in the canonical order of a composed name's parts, and the
    lists derived from them: the variants, each framework's Capability, the parts a backend
    refuses off a GPU, the conflicts, the fixes worth a cell."""

    fixes: tuple[Fix, ...]
    families: Mapping[str, tuple[str, ...]] = field(hash=False)  # family -> its frameworks
    # An exclusive group -> the phrase that says two of its fixes never run together.
    groups: Mapping[str, str] = field(default_factory=nothing, hash=False)
    # Why a framework does not run a fix that only one other family runs, by that family.
    family_only: Mapping[str, str] = field(default_factory=nothing, hash=False)
    baseline: str = "as-written"
    # Variants only the GPU step prediction models: no cell runs them (yet), so they are in
    # none of the lists a run reads (`variants`, the capabilities, `fixes_for`).
    modelled: tuple[Fix, ...] = ()

    @property
    def variants(self) -> tuple[str, ...]:
        return (self.baseline, *(item.name for item in self.fixes))

    @property
    def predicted_variants(self) -> tuple[str, ...]:
        """The variants the GPU step prediction models (harness/predict/kernels.py)."""
        return (self.baseline, *(item.name for item in (*self.fixes, *self.modelled)
                                 if item.predicted))

    @property
    def device_only(self) -> tuple[str, ...]:
        """The variants that need a GPU device (WorkloadSpec.device_only_variants)."""
        return tuple(self.gpu_only())

    def with_fixes(self, extra: Iterable[Fix]) -> Catalogue:
        """This catalogue and EXTRA after it (a plugin's fixes; one of a known name replaces
        it in place)."""
        added = {item.name: item for item in extra}
        kept = tuple(added.pop(item.name, item) for item in self.fixes)
        return replace(self, fixes=kept + tuple(added.values()))

    def fix_of(self, name: str) -> Fix | None:
        """The entry of one fix name ('threads-2' finds 'threads-N'); None for another."""
        found = {item.name: item for item in self.fixes}
        return found.get(name) or found.get(declared_name(name))

    def family_of(self, framework: str) -> str | None:
        return next((family for family, members in self.families.items()
                     if framework in members), None)

    def family_parts(self, family: str) -> tuple[str, ...]:
        """The fixes a family's implementation runs (on some device), in catalogue order."""
        return tuple(item.name for item in self.fixes if family in item.families)

    def gpu_only(self) -> dict[str, str]:
        """The fixes a backend refuses on a CPU, with why (their refusal there)."""
        return {item.name: item.refused_on.get("cpu", "a GPU fix") for item in self.fixes
                if item.needs_gpu}

    def _refusal(self, item: Fix, framework: str, family: str | None) -> str | None:
        if framework in item.refused:
            return item.refused[framework]
        if family in item.families:
            return None
        if family is not None and family in item.refused:
            return item.refused[family]
        owners = sorted(item.families)
        return self.family_only.get(owners[0], "") if len(owners) == 1 else \
            f"a {' / '.join(owners)} variant"

    def capability(self, framework: str) -> Capability:
        """What FRAMEWORK's implementation runs, and why not the rest, from the entries."""
        family = self.family_of(framework)
        runs, refused = [self.baseline], {}
        refused_on: dict[str, dict[str, str]] = {}
        for item in self.fixes:
            reason = self._refusal(item, framework, family)
            if reason is not None:
                refused[item.name] = reason
                continue
            runs.append(item.name)
            for kind in sorted(DEVICE_KINDS - item.devices):
                if kind in item.refused_on:
                    refused_on.setdefault(kind, {})[item.name] = item.refused_on[kind]
        return Capability(variants=tuple(runs), refused=refused, refused_on=refused_on)

    def capabilities(self) -> dict[str, Capability]:
        return {framework: self.capability(framework)
                for members in self.families.values() for framework in members}

    def parts(self, name: str) -> tuple[str, ...]:
        """The parts of a (maybe composed) variant name; BadInput for a part not declared."""
        parts = split_parts(name)
        for part in parts:
            if not is_declared(part, self.variants):
                raise BadInput(f"unknown variant {part!r} of a model file; valid: "
                               f"{', '.join(self.variants)} (a numbered one such as "
                               "threads-N: N a positive integer), joined with '+'")
        return parts

    def compose(self, parts: Iterable[str]) -> str:
        """The one name of a set of parts, in catalogue order: the same set, the same cell."""
        chosen = tuple(parts)
        for part in chosen:
            self.parts(part)
        return compose(chosen, self.variants)

    def conflict(self, parts: Iterable[str]) -> str | None:
        """Why these parts cannot run at once; None when they can."""
        declared = [declared_name(part) for part in parts]
        repeated = sorted({name for name in declared if declared.count(name) > 1})
        if repeated:
            return f"{repeated[0]} given twice: a cell runs one of each"
        if self.baseline in declared and len(declared) > 1:
            return f"{self.baseline} is the model unchanged: it joins no other variant"
        entries = [item for item in (self.fix_of(name) for name in declared) if item]
        for group, phrase in self.groups.items():
            members = [item.name for item in entries if item.exclusive == group]
            if len(members) > 1:
                return f"{' and '.join(members)} {phrase}"
        for item in entries:
            for other in entries:
                keys = [key for key in (other.name, other.exclusive)
                        if other is not item and key and key in item.conflicts]
                if keys:
                    return item.conflicts[keys[0]].format(other=other.name)
        return None

    def fixes_for(self, framework: str, device: str, cpu_cores: int | None = None) -> list[str]:
        """The single fixes worth a cell for FRAMEWORK on DEVICE, in catalogue order: its
        family's, for that kind of device, that its capability runs there. A numbered fix
        ('threads-N') is one name per number its `counts` gives for CPU_CORES."""
        family, kind = self.family_of(framework), device_kind(device)
        capability = self.capability(framework) if family is not None else None
        names: list[str] = []
        for item in self.fixes:
            if family not in item.families or kind not in item.devices:
                continue
            stem = item.name.removesuffix("-N")
            numbers = item.counts(cpu_cores) if item.counts is not None else ()
            candidates = [f"{stem}-{count}" for count in numbers] if stem != item.name \
                else [item.name]
            names += [name for name in candidates
                      if capability is None or capability.refusal(name, kind) is None]
        return names

    def explained(self, part: str, kind: str, kernels: float | None,
                  copies: float | None) -> str:
        """The measured-why line of one part ('' for a part the catalogue does not know)."""
        item = self.fix_of(part)
        return item.explained(part, kind, kernels, copies) if item is not None else ""

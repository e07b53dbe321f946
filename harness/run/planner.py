"""What a run knows before any worker starts: which cells cannot run, and why.

A cell whose framework is not installed, whose device its cpu-only framework cannot use, or
whose variant its implementation declares it does not run (WorkloadSpec.capabilities) becomes
an `unavailable` row with that reason, and no worker process starts for it: a worker costs
seconds of interpreter start and framework imports only to say the same thing (issue 21: 22 of
45 cells of `--variant all` on MNIST). Workers keep their own VariantUnavailable checks for
what only the machine can tell (a compiler, a GPU count, a library version) and as a safety
net under the declarations. Never imports a framework.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.core import registry
from harness.core.units import device_kind
from harness.data.results import CellResult
from harness.spec import BadInput, Cell, Status, WorkloadSpec

# One device per kind stands for every device of that kind in `harness list`'s matrix.
KIND_DEVICES = {"cpu": "cpu", "gpu": "cuda:0"}


def framework_refusal(framework: str, device: str) -> str | None:
    """Why `framework` cannot run on `device` at all, from its FrameworkSpec; None if it can."""
    try:
        spec = registry.load_framework(framework)
    except BadInput:  # unknown or broken: framework_installed gives the reason
        return None
    if spec.cpu_only and device_kind(device) != "cpu":
        return f"{framework} runs on the cpu only, not {device}"
    return None


def declared_refusal(spec: WorkloadSpec, framework: str, variant: str,
                     device: str) -> str | None:
    """Why the declarations say this cell cannot run; None when a worker may try it.

    A framework without a `capabilities` entry (a plugin written before declarations) is
    refused nothing here: its worker tries every variant, as before.
    """
    return (framework_refusal(framework, device)
            or spec.refusal(variant, framework, device))


def cell_refusal(spec: WorkloadSpec, cell: Cell) -> str | None:
    """Why `cell` cannot run, known without a worker: a missing framework first (its install
    hint, as the worker gave it), then the declarations."""
    installed, reason = registry.framework_installed(cell.framework)
    if not installed:
        return reason
    return declared_refusal(spec, cell.framework, cell.variant, cell.device)


def refused_result(cell: Cell, reason: str) -> CellResult:
    """The result of a cell no worker ran: unavailable, with the reason, no cases."""
    now = time.time()
    return CellResult(cell=cell, status=Status.UNAVAILABLE, reason=reason, started=now,
                      finished=now, worker_started=False)


def refuse_declared(spec: WorkloadSpec) -> Callable[[Cell], CellResult | None]:
    """For harness.api's run of the cells: a refused cell's result (recorded at once, no
    worker started), or None to start a worker."""

    def planned(cell: Cell) -> CellResult | None:
        reason = cell_refusal(spec, cell)
        return None if reason is None else refused_result(cell, reason)

    return planned


@dataclass(frozen=True)
class MatrixCell:
    """One workload x framework x variant entry of `harness list`: why not, per device kind."""

    framework: str
    variant: str
    refused: dict[str, str | None]  # device kind -> reason, None where it runs

    @property
    def runs_on(self) -> tuple[str, ...]:
        return tuple(kind for kind, reason in self.refused.items() if reason is None)


def matrix_frameworks(spec: WorkloadSpec) -> list[str]:
    """The workload's frameworks, then those that only declare (run on request, e.g. tensorflow
    on MNIST)."""
    return list(dict.fromkeys([*spec.frameworks, *spec.capabilities]))


def capability_matrix(spec: WorkloadSpec) -> list[MatrixCell]:
    """Every framework x variant of `spec` with where it runs and why not elsewhere."""
    return [MatrixCell(framework, variant,
                       {kind: declared_refusal(spec, framework, variant, device)
                        for kind, device in KIND_DEVICES.items()})
            for framework in matrix_frameworks(spec) for variant in spec.variants]


@dataclass(frozen=True)
class MatrixText:
    """`harness list`'s matrix as plain text: a header, one row per variant, footnotes."""

    header: list[str]
    rows: list[list[str]]
    footnotes: list[str]


def framework_label(spec: WorkloadSpec, framework: str) -> str:
    """The column name: the framework, and whether it runs by default and is installed here."""
    notes = [] if framework in spec.frameworks else ["on request"]
    if framework_refusal(framework, KIND_DEVICES["gpu"]) is not None:
        notes.append("cpu only")
    try:
        installed = registry.framework_installed(framework)[0]
    except BadInput:  # a name no registry knows: `harness list` must still print the rest
        installed = False
    if not installed:
        notes.append("not installed")
    return f"{framework} ({', '.join(notes)})" if notes else framework


def implementation_refusal(spec: WorkloadSpec, framework: str, variant: str,
                           kind: str) -> str | None:
    """The implementation's own declared reason, without the device-kind rules (a GPU-only
    variant, a cpu-only framework), which the matrix shows by the kinds it lists."""
    capability = spec.capabilities.get(framework)
    return None if capability is None else capability.refusal(variant, kind)


def matrix_text(spec: WorkloadSpec) -> MatrixText:
    """Each entry names the device kinds a variant runs on ('-' for none) and, in brackets,
    the footnotes with the implementation's reasons; equal reasons share one footnote."""
    frameworks = matrix_frameworks(spec)
    reasons: dict[str, int] = {}
    entries = {(entry.framework, entry.variant): entry for entry in capability_matrix(spec)}
    rows = []
    for variant in spec.variants:
        row = [variant]
        for framework in frameworks:
            why_not = [implementation_refusal(spec, framework, variant, kind)
                       for kind in KIND_DEVICES]
            marks = [reasons.setdefault(reason, len(reasons) + 1)
                     for reason in dict.fromkeys(why_not) if reason is not None]
            runs = " ".join(entries[(framework, variant)].runs_on) or "-"
            row.append(runs + (f" [{','.join(map(str, marks))}]" if marks else ""))
        rows.append(row)
    footnotes = [f"[{number}] {reason}" for reason, number in reasons.items()]
    return MatrixText(["variant", *(framework_label(spec, name) for name in frameworks)],
                      rows, footnotes)

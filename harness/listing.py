"""`harness list`'s text: each workload, its parameters and where each variant runs, fitted to
the terminal's width (harness.terminal)."""

from __future__ import annotations

from harness.core import registry
from harness.run.planner import matrix_text
from harness.spec import WorkloadSpec
from harness.terminal import column_lines, wrapped

# The matrix sits under its workload, its footnotes under it.
MATRIX_INDENT = 4


def workload_lines(spec: WorkloadSpec) -> list[str]:
    """One workload: its summary, frameworks and variants, sweep, parameters, and matrix."""
    lines = wrapped(f"{spec.name}: {spec.summary}")
    lines += wrapped(f"frameworks: {', '.join(spec.frameworks)}; variants: "
                     f"{', '.join(spec.variants)} (default: {', '.join(spec.variants_by_default)})",
                     indent=2)
    lines += wrapped(f"--sizes sets: {spec.sweep}", indent=2)
    for name, param in spec.params.items():
        lines += wrapped(f"--param {name}=  default {param.default!r}, quick {param.quick!r}: "
                         f"{param.help}", indent=2)
    return lines + capability_lines(spec)


def capability_lines(spec: WorkloadSpec) -> list[str]:
    """The variant x framework matrix: where each runs (cpu, gpu) and, numbered, why not."""
    matrix = matrix_text(spec)
    lines = ["  where each variant runs (cpu, gpu; -: nowhere) and why not [n]:"]
    lines += column_lines(matrix.header, matrix.rows, indent=MATRIX_INDENT)
    for footnote in matrix.footnotes:
        lines += wrapped(footnote, indent=MATRIX_INDENT, hang=4)
    return lines


def listing_lines() -> list[str]:
    """Every registered workload's lines; one that cannot load says why in one line."""
    lines = []
    for name in registry.workload_names():
        try:
            spec = registry.load_workload(name)
        except registry.PluginUnavailable as exc:
            lines += wrapped(f"{name}: unavailable ({exc})")
            continue
        lines += workload_lines(spec)
    return lines

"""summary.md's tables: fastest, GPU vs CPU, variants, measured device time, peak memory and
accuracy, each row recomputed."""

from __future__ import annotations

import re

from harness.audit.pool import _experiment_matches, _fastest_by_size, _largest
from harness.audit.printed import fixed, printed_bytes, printed_fixed, printed_general
from harness.audit.rates import Rates
from harness.core.units import (
    format_bytes,
    format_size,
)

KIND_OF_VERDICT = (("GPU faster from", "crossover"), ("GPU faster at every", "gpu-always"),
                   ("CPU faster at every", "cpu-always"), ("GPU leads only", "mixed"),
                   ("GPU faster at the one", "gpu-always"), ("CPU faster at the one", "cpu-always"),
                   ("no sizes measured", "no-overlap"))


class Tables(Rates):
    """summary.md's tables, row by row."""

    def gpu_row(self, row: dict[str, str], cells: list[str]) -> None:
        compared = row.get("compared", "")
        speedup = next((text for name, text in row.items()
                        if name.startswith("GPU speedup at the largest")), "-")
        framework = "" if compared.startswith("best GPU cell") else compared.split(" ")[0]
        self.gpu_verdict(row.get("machine", ""), row.get("variant", ""), framework,
                         "(CPU of the other variants)" in compared, row.get("verdict", ""),
                         speedup)

    def gpu_verdict(self, machine: str, variant: str, framework: str, any_variant: bool,
                    verdict: str, speedup: str) -> None:
        """A GPU-vs-CPU verdict and its speedup at the largest size, recomputed from the best
        (or the framework's) per-step medians of each device at each size."""
        subject = f"{framework or 'best'} GPU vs CPU, {machine}, variant {variant}"
        curves = self.curves(machine, variant, framework, any_variant)
        if curves is None:
            self.ledger.cannot(subject, "GPU vs CPU verdict", self.where,
                               "no GPU and CPU cases of it in run.json")
            return
        kind, size = crossover(curves)
        sweep = self.sweep()
        stated = next((name for phrase, name in KIND_OF_VERDICT if phrase in verdict), "")
        if stated:
            self.ledger.verdict(subject, "GPU vs CPU verdict", self.where, stated == kind,
                                stated, kind)
        found = re.search(r"GPU faster from [^=]+=(?P<size>.+?) up", verdict)
        if found and kind == "crossover" and size is not None:
            self.ledger.verdict(subject, "crossover size", self.where,
                                found["size"] == format_size(size, sweep), found["size"],
                                format_size(size, sweep))
        if speedup in ("", "-"):
            return
        both = [(size, cpu, gpu) for size, cpu, gpu in curves if cpu and gpu]
        if not both:
            self.ledger.cannot(subject, "GPU/CPU speedup", self.where, "no size on both")
            return
        largest, cpu_s, gpu_s = both[-1]
        ratio_text, _, at = speedup.partition(" at ")
        self.ratio(subject, "GPU/CPU speedup at the largest size", ratio_text, cpu_s / gpu_s)
        shown = format_size(largest, sweep) if largest else ""
        printed = at.partition("=")[2] if "=" in at else at
        self.ledger.verdict(subject, "largest size compared", self.where, printed == shown,
                            printed or "none", shown or "none")

    def sweep(self) -> str:
        """The swept parameter of the experiment in force."""
        return next((m.sweep for m in self.pool.select(self.place.experiment)), "")

    def curves(self, machine: str, variant: str, framework: str,
               any_variant: bool) -> list[tuple[float, float | None, float | None]] | None:
        """(size, fastest CPU median, fastest GPU median) per size, valid cases only.

        The CPU side is the variant's own CPU cells, or every variant's where the line says so
        or the variant has no CPU case on the machine (a GPU-only precision: older summaries
        did not say so at a glance). What the line says decides, not today's hints: a hint
        that changed since the report was drawn must not turn its figure into a mismatch."""
        own_cpu = [m for m in self.pool.select(self.place.experiment, machine, variant)
                   if m.kind == "cpu"]
        any_variant = any_variant or not own_cpu
        gpu = self.pool.select(self.place.experiment, machine, variant, framework, valid=True)
        cpu = self.pool.select(self.place.experiment, machine, "" if any_variant else variant,
                               framework, valid=True)
        gpu_best = _fastest_by_size([m for m in gpu if m.kind == "gpu"])
        cpu_best = _fastest_by_size([m for m in cpu if m.kind == "cpu"])
        if not gpu_best or not cpu_best:
            return None
        sizes = sorted(set(gpu_best) | set(cpu_best))
        return [(size, cpu_best.get(size), gpu_best.get(size)) for size in sizes]

    def devicetime_row(self, row: dict[str, str], cells: list[str]) -> None:
        if "CPU best" in row:
            self.best_per_device_row(row)
            return
        parts = row.get("cell", "").split(" ")
        wall = next((text for name, text in row.items() if name.startswith("wall / ")), "-")
        if len(parts) < 3 or wall == "-":
            return
        measured = self.case("wall per step", framework=parts[0], device=parts[1],
                             variant=parts[2], size=row.get("size", ""))
        if measured is None:
            return
        call = measured.median_call
        self.seconds(measured.subject, "wall per step", wall,
                     None if call is None else call / measured.steps)
        cold = row.get("cold / warm", "-")
        if cold != "-" and call and measured.case.cold_seconds is not None:
            self.ledger.printed(measured.subject, "cold / warm", self.where,
                                printed_general(cold, 3), measured.case.cold_seconds / call,
                                lambda value: f"{value:.3g}x")

    def best_per_device_row(self, row: dict[str, str]) -> None:
        """'| torch | 1024 | CPU as written | CPU best (variant) | GPU ... | GPU 3.1x faster |'."""
        framework, size = row.get("framework", ""), row.get("size", "")
        cases = [m for m in self.pool.select(self.place.experiment, framework=framework,
                                             size=size, valid=True) if m.median_step is not None]
        written = next(iter(dict.fromkeys(m.cell.variant for m in self.pool.select(
            self.place.experiment))), "")
        best: dict[str, float] = {}
        for kind in ("cpu", "gpu"):
            own = [m for m in cases if m.kind == kind]
            label = kind.upper()
            mine = [m.median_step or 0.0 for m in own if m.cell.variant == written]
            if mine and row.get(f"{label} as written", "-") != "-":
                self.seconds(f"{framework} {kind}", f"{label} as written", row[
                    f"{label} as written"], min(mine))
            text, _, variant = row.get(f"{label} best", "").partition(" (")
            named = [m.median_step or 0.0 for m in own if m.cell.variant == variant.rstrip(")")]
            if named:
                self.seconds(f"{framework} {kind}", f"{label} best", text, min(named))
                best[kind] = min(named)
                self.order(f"{framework} {kind} {variant.rstrip(')')}", f"best {label} variant",
                           min(named), min(m.median_step or 0.0 for m in own))
        verdict = re.match(r"(GPU|CPU) ([\d.,e+]+)x faster", row.get("verdict", ""))
        if verdict and len(best) == 2:
            speedup = best["cpu"] / best["gpu"]
            value = speedup if verdict[1] == "GPU" else 1 / speedup
            self.ledger.printed(f"{framework} size {size}", f"{verdict[1]} faster by",
                                self.where, printed_general(verdict[2], 3), value,
                                lambda number: f"{number:.3g}")

    def memory_row(self, row: dict[str, str], cells: list[str]) -> None:
        """Peak memory per cell: the worker's RSS, and the largest case's device peaks."""
        parts = row.get("cell", "").split(" ")
        if len(parts) < 3:
            return
        found = [cell for document in self.pool.documents
                 if _experiment_matches(row.get("experiment", ""), document)
                 and document.machine == row.get("machine") for cell in document.cells
                 if (cell.framework, cell.device, cell.variant) == tuple(parts[:3])]
        subject = " ".join(parts[:3])
        if len(found) != 1:
            self.ledger.cannot(subject, "peak memory", self.where,
                               f"{len(found)} cells in run.json match")
            return
        cell = found[0]
        figures = {"host peak RSS": cell.peak_host_memory_bytes,
                   "device peak allocated": _largest(c.peak_device_allocated_bytes
                                                     for c in cell.cases),
                   "device peak reserved": _largest(c.peak_device_reserved_bytes
                                                    for c in cell.cases)}
        for name, value in figures.items():
            text = row.get(name, "-")
            if text == "-" or value is None:
                self.ledger.verdict(subject, name, self.where, (text == "-") == (value is None),
                                    text, format_bytes(value))
                continue
            self.ledger.printed(subject, name, self.where, printed_bytes(text), float(value),
                                format_bytes)

    def accuracy_row(self, row: dict[str, str], cells: list[str]) -> None:
        measured = self.case("accuracy", machine=row.get("machine", ""),
                             variant=row.get("variant", ""), framework=row.get("framework", ""),
                             device=row.get("device", ""), size=cells[4])
        if measured is None:
            return
        stored = measured.case.extra.get("accuracy")
        check = measured.case.check or {}
        if stored is None and "accuracy" in str(check.get("metric", "")):
            stored = check.get("value")
        self.ledger.printed(measured.subject, "accuracy", self.where, printed_fixed(cells[5], 4),
                            None if stored is None else float(stored), fixed(4))

def crossover(curves: list[tuple[float, float | None, float | None]]) -> tuple[str, float | None]:
    """(kind, size) over the sizes both devices measured, smallest first: the smallest size
    from which the GPU is faster at every larger size."""
    both = [(size, cpu, gpu) for size, cpu, gpu in curves if cpu is not None and gpu is not None]
    if not both:
        return "no-overlap", None
    gpu_faster = [gpu < cpu for _, cpu, gpu in both]
    if all(gpu_faster):
        return "gpu-always", both[0][0]
    if not any(gpu_faster):
        return "cpu-always", None
    if not gpu_faster[-1]:
        return "mixed", None
    last_slower = max(index for index, faster in enumerate(gpu_faster) if not faster)
    return "crossover", both[last_slower + 1][0]


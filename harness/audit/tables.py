"""summary.md's tables: measured device time, peak memory and accuracy, each row recomputed."""

from __future__ import annotations

import re

from harness.audit.printed import printed_general
from harness.audit.summarybase import SummaryBase


class Tables(SummaryBase):
    """summary.md's tables, row by row."""

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

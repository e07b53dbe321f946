"""summary.md's energy lines: joules, power and window per step, and GPU vs CPU energy."""

from __future__ import annotations

import re

from harness.audit.ledger import (
    Printed,
)
from harness.audit.lines import Lines
from harness.audit.measured import ENERGY_TOLERANCE, Measured
from harness.audit.printed import (
    RATIO_TEXT,
    SECONDS_TEXT,
    fixed,
    printed_fixed,
    printed_general,
    printed_joules,
    printed_seconds,
)
from harness.core.units import (
    format_joules,
)
from harness.data.records import CaseEnergy

ENERGY_CASE = re.compile(
    r"^- (?P<workload>\S+) (?P<fw>\S+) (?P<dev>\S+) (?P<variant>\S+), size (?P<size>[^:]*): "
    r"(?P<joules>[\d.,]+ \w?J) per step over the energy window \((?P<watts>[\d,]+) W mean x "
    rf"(?P<window>{SECONDS_TEXT}) per step, (?P<total>[\d.e+-]+) s in all;.*\); "
    rf"(?P<timed>{SECONDS_TEXT}) per step timed \((?P<pooled>[^)]+)\)")
ENERGY_VERDICT = re.compile(
    r"^- (?P<workload>\S+) (?P<fw>\S+) (?P<variant>\S+), size (?P<size>.*?) \((?P<machine>.+?)"
    rf"\): (?P<gpu>\S+) vs (?P<cpu>\S+): GPU (?P<speed>{RATIO_TEXT}) (?P<way>faster|slower)"
    rf"(?:.*?; (?P<energy>{RATIO_TEXT}) (?P<less>less|more) energy per step"
    r"(?: \((?P<gj>[\d.,]+ \w?J) GPU board vs (?P<cj>[\d.,]+ \w?J) CPU packages\))?)?")

class EnergyLines(Lines):
    """summary.md's energy lines."""

    def energy(self, line: str) -> None:
        if self.place.table == "breakdown":
            self.breakdown(line)
            return
        case_line = ENERGY_CASE.match(line)
        if case_line is not None:
            self.energy_case(case_line)
            return
        verdict = ENERGY_VERDICT.match(line)
        if verdict is not None:
            self.energy_verdict(verdict)

    def energy_case(self, match: re.Match[str]) -> None:
        measured = self.case("energy per step", experiment=match["workload"],
                             variant=match["variant"],
                             framework=match["fw"], device=match["dev"], size=match["size"])
        if measured is None:
            return
        energy = CaseEnergy.read(measured.case.extra.get("energy"))
        record = None if energy is None else energy.primary(measured.kind)
        subject = measured.subject
        if record is None or not record.ok or not record.window_s or not record.calls:
            self.ledger.cannot(subject, "energy per step", self.where, "no energy record")
            return
        steps = record.steps_per_call or 1.0
        window_step = record.window_s / record.calls / steps
        self.ledger.printed(subject, "joules per step", self.where,
                            printed_joules(match["joules"]), record.joules_per_step,
                            format_joules)
        self.ledger.printed(subject, "mean power", self.where, printed_fixed(match["watts"], 0),
                            record.watts_mean, fixed(0))
        self.seconds(subject, "energy window per step", match["window"], window_step)
        printed = printed_joules(match["joules"])
        power = printed_fixed(match["watts"], 0)
        product = power.value * printed_seconds(match["window"]).value
        slack = Printed(printed.text, printed.value, printed.tolerance
                        + ENERGY_TOLERANCE * printed.value + power.tolerance * window_step)
        self.ledger.printed(subject, "joules = watts x seconds per step", self.where, slack,
                            product, format_joules)
        self.ledger.printed(subject, "energy window", self.where,
                            printed_general(match["total"], 2), record.window_s,
                            lambda value: f"{value:.2g}")
        above = re.search(r"; ([\d.,]+ \w?J) above the ([\d,]+) W idle", match.group(0))
        if above is not None:
            self.ledger.printed(subject, "joules per step above idle", self.where,
                                printed_joules(above[1]), record.joules_per_step_above_idle,
                                format_joules)
            self.ledger.printed(subject, "idle power", self.where, printed_fixed(above[2], 0),
                                record.idle_watts, fixed(0))
        self.seconds(subject, "pooled median per step", match["timed"], measured.median_step)
        pooled = ("median of all rounds' samples" if len(measured.case.round_medians) > 1
                  else "median of the timed samples")
        self.ledger.verdict(subject, "label of the pooled median", self.where,
                            match["pooled"] == pooled, match["pooled"], pooled)

    def energy_verdict(self, match: re.Match[str]) -> None:
        where = {"machine": match["machine"], "variant": match["variant"],
                 "framework": match["fw"], "size": match["size"]}
        gpu = self.case("GPU vs CPU speed", match["workload"], device=match["gpu"], **where)
        cpu = self.case("GPU vs CPU speed", match["workload"], device=match["cpu"], **where)
        if gpu is None or cpu is None or not gpu.median_step or not cpu.median_step:
            return
        speed = cpu.median_step / gpu.median_step
        shown = speed if match["way"] == "faster" else 1 / speed
        self.ratio(gpu.subject, f"GPU {match['way']} than {cpu.cell_name}", match["speed"],
                   shown)
        self.ledger.verdict(gpu.subject, "GPU faster or slower", self.where,
                            (speed >= 1) == (match["way"] == "faster"), match["way"],
                            "faster" if speed >= 1 else "slower")
        if match["energy"]:
            self.energy_ratio(match, gpu, cpu)

    def energy_ratio(self, match: re.Match[str], gpu: Measured, cpu: Measured) -> None:
        """'2.1x less energy per step (62 mJ GPU board vs 130 mJ CPU packages)'."""
        gpu_j, cpu_j = _joules_per_step(gpu), _joules_per_step(cpu)
        if not gpu_j or cpu_j is None:
            self.ledger.cannot(gpu.subject, "energy ratio", self.where, "no energy records")
            return
        ratio = cpu_j / gpu_j
        self.ratio(gpu.subject, f"{match['less']} energy per step than {cpu.cell_name}",
                   match["energy"], ratio if match["less"] == "less" else 1 / ratio)
        for name, text, value in (("GPU board", match["gj"], gpu_j),
                                  ("CPU packages", match["cj"], cpu_j)):
            if text:
                self.ledger.printed(gpu.subject, f"{name} joules per step", self.where,
                                    printed_joules(text), value, format_joules)

def _joules_per_step(measured: Measured) -> float | None:
    """The energy per step of the cell's own device (GPU board, or CPU packages)."""
    energy = CaseEnergy.read(measured.case.extra.get("energy"))
    record = None if energy is None else energy.primary(measured.kind)
    return record.joules_per_step if record is not None and record.ok else None



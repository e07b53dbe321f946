"""summary.md's rates: the ceilings table, IMPLAUSIBLE and low-probe lines, recomputed from the
work of one call and its median."""

from __future__ import annotations

import re
from collections.abc import Callable

from harness.analysis.plausibility import (
    bandwidth_limits,
    device_entry,
    flop_limits,
    precision_of,
)
from harness.audit import checkcounts, formerflops
from harness.audit.ledger import (
    Printed,
)
from harness.audit.measured import Measured, expected_work, load_spec
from harness.audit.pool import _experiment_matches
from harness.audit.printed import fixed, percent, printed_fixed
from harness.audit.summarybase import SummaryBase
from harness.data.ceilings import MEMORY

RATE = re.compile(r"^(?P<rate>[\d.,]+) (?P<metric>GFLOP/s|GB/s)$")
IMPLAUSIBLE = re.compile(r"^- IMPLAUSIBLE: (?P<machine>.+?), (?P<fw>\S+) (?P<dev>\S+) "
                         r"(?P<variant>\S+)(?: at [^=]+=(?P<size>.+?))? reaches (?P<rate>[\d,]+) "
                         r"(?P<metric>GFLOP/s|GB/s)")
PROBE_LOW = re.compile(r"^- The ceiling probe was low on (?P<machine>.+) (?P<dev>\S+): it "
                       r"measured (?P<probe>[\d,]+) (?P<metric>GFLOP/s|GB/s), but (?P<fw>\S+) "
                       r"(?P<variant>\S+)(?: at [^=]+=(?P<size>.+?))? reached (?P<rate>[\d,]+) ")

class Rates(SummaryBase):
    """The rates summary.md prints, against the work of one call over its median."""

    def ceiling_row(self, row: dict[str, str], cells: list[str]) -> None:
        """'| M | fw dev variant | size | 91.3 GFLOP/s | 260.8 | 35% |'."""
        parts = row.get("cell", "").split(" ")
        rate = RATE.match(row.get("best rate", ""))
        if len(parts) < 3 or rate is None:
            return
        measured = self.case(f"rate {rate['metric']}", machine=row.get("machine", ""),
                             framework=parts[0], device=parts[1], variant=parts[2],
                             size=cells[2])
        if measured is None or checkcounts.check_share(self.ledger, measured, self.where,
                                                       rate["metric"],
                                                       row.get("% of ceiling", "")):
            return
        recomputed = self.rate_figure(measured, "rate", rate["metric"],
                                      printed_fixed(rate["rate"], 1, unit=rate["metric"]),
                                      fixed(1, f" {rate['metric']}"))
        ceiling_text = row.get("ceiling", "").split(" (")[0]
        share = row.get("% of ceiling", "").split(" ")[0]
        if recomputed is None or not ceiling_text or not share.endswith("%"):
            return
        printed = printed_fixed(ceiling_text, 1)
        probes = self.probes(measured, rate["metric"])
        stored = next((probe for probe in probes if printed.matches(probe, fixed(1))), None)
        if "probe low" not in row.get("ceiling", ""):
            self.ledger.verdict(measured.subject, f"ceiling {rate['metric']}", self.where,
                                stored is not None, ceiling_text,
                                " or ".join(fixed(1)(probe) for probe in probes) or "none stored")
        # The share of a ceiling known only as printed carries that rounding too.
        ceiling = stored if stored is not None else printed.value
        spread = 0.0 if stored is not None else recomputed * printed.tolerance / ceiling ** 2
        share_printed = printed_fixed(share, 0, 0.01)
        self.ledger.printed(measured.subject, "% of ceiling", self.where,
                            Printed(share_printed.text, share_printed.value,
                                    share_printed.tolerance + spread),
                            recomputed / ceiling, percent)

    def probes(self, measured: Measured, metric: str) -> list[float]:
        """The machine's probes for this case stored by the runs of its experiment (a merged
        report shows the latest run's; any of them is a stored figure)."""
        found = []
        for document in self.pool.documents:
            if document.machine != measured.machine or not _experiment_matches(
                    self.place.experiment or measured.document.workload, document):
                continue
            entry = device_entry(document.ceilings, measured.cell.device)
            hints = document.hints
            if metric == "GFLOP/s":
                precisions = hints.get("variant_precision") or {}
                probe = flop_limits(entry, precision_of(measured.cell.variant, precisions))[0]
            else:
                probe = bandwidth_limits(entry, hints.get("bandwidth_ceiling")
                                         or MEMORY)[0]
            if probe is not None:
                found.append(float(probe))
        return found

    def rate(self, measured: Measured, metric: str) -> float | None:
        """FLOP/s or bytes/s of the case, in G, from the call's own work and its median."""
        spec, _ = load_spec(measured.document.workload)
        work = expected_work(spec, measured.case)
        amount = work["flops"] if metric == "GFLOP/s" else work["bytes"]
        call = measured.median_call
        return amount / call / 1e9 if amount is not None and call else None

    def rate_figure(self, measured: Measured, figure: str, metric: str, printed: Printed,
                    shown: Callable[[float], str]) -> float | None:
        """A printed rate against the recomputed one; None where it cannot be recomputed.

        A run that kept no FLOP count of its own is recomputed with today's formula, or with
        the formula of the day it started where that was another (formerflops); where neither
        agrees the figure is unverifiable (the formula may have changed since)."""
        recomputed = self.rate(measured, metric)
        own_count = metric != "GFLOP/s" or bool(measured.case.extra.get("flops_per_call"))
        if not own_count and recomputed is not None and not printed.matches(recomputed, shown):
            former = self.rate_of_its_day(measured)
            if former is not None and printed.matches(former[0], shown):
                self.ledger.printed(measured.subject, f"{figure} ({former[1]})", self.where,
                                    printed, former[0], shown)
                return former[0]
        if recomputed is None or own_count or printed.matches(recomputed, shown):
            same = self.ledger.printed(measured.subject, figure, self.where, printed,
                                       recomputed, shown)
            return recomputed if same or own_count else None
        self.ledger.cannot(measured.subject, figure, self.where,
                           f"printed {printed.text}, today's FLOP formula gives "
                           f"{shown(recomputed)} ({printed.value / recomputed:.3g}x); the run "
                           "kept no flops_per_call, so what it counted cannot be recomputed")
        return None

    def rate_of_its_day(self, measured: Measured) -> tuple[float, str] | None:
        """GFLOP/s by the FLOP formula of the day the run started, where it was not today's
        (harness.audit.formerflops), and that formula's label."""
        former = formerflops.count_of_its_day(measured.document.workload, measured.case.case,
                                              measured.document.started)
        call = measured.median_call
        return (former.flops / call / 1e9, former.label) if former is not None and call else None

    def implausible(self, line: str) -> None:
        match = IMPLAUSIBLE.match(line)
        if match is not None:
            self.printed_rate(match, "rate reached")

    def probe(self, line: str) -> None:
        """'The ceiling probe was low on M cpu: it measured 86 GFLOP/s, but numpy fp32 at
        n=256 reached 243': the probe stored in run.json, and the case's rate."""
        match = PROBE_LOW.match(line)
        if match is None:
            return
        self.printed_rate(match, "rate reached")
        measured = self.pool.one(experiment=self.place.experiment, machine=match["machine"],
                                 variant=match["variant"], framework=match["fw"],
                                 device=match["dev"], size=match["size"] or "")
        if isinstance(measured, Measured):
            printed = printed_fixed(match["probe"], 0)
            probes = self.probes(measured, match["metric"])
            self.ledger.verdict(measured.subject, f"probe {match['metric']}", self.where,
                                any(printed.matches(probe, fixed(0)) for probe in probes),
                                match["probe"], " or ".join(map(fixed(0), probes)) or "none")

    def printed_rate(self, match: re.Match[str], figure: str) -> None:
        measured = self.case(figure, machine=match["machine"], variant=match["variant"],
                             framework=match["fw"], device=match["dev"],
                             size=match["size"] or "")
        if measured is not None:
            self.rate_figure(measured, f"{figure} ({match['metric']})", match["metric"],
                             printed_fixed(match["rate"], 0), fixed(0))

"""What to change, measured: the advice `harness advise` prints, computed from a run's results.

Pure computation over a stored run (harness.data.results.RunDocument); no framework, no clock,
no file. Per framework x device, at the user's batch: the as-written cell's diagnosis; each fix
ranked by its speedup over as-written beyond the noise (harness.analysis.noise) and its parity
check (only a faster, passing fix is recommended); the best combination of the recommended
fixes (compose_variant); the fixes not tried and why; and whether the best GPU configuration
beats the best CPU one at the user's batch, else from which batch (harness.analysis.costmodel).
docs/advise.md ("How to read the advice") says what each line means.

The cases are rows of the run's case table (harness.analysis.casetable.run_rows), the diagnosis
harness.analysis.advicecase's; which fix to try next, and the
catalogue's words for each, harness.analysis.fixchoice's (the catalogue reached through
harness.core.registry.fix_catalogue, typed).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from harness.analysis.adviceanswer import GpuCpuAnswer, answer
from harness.analysis.advicecase import diagnosis_at
from harness.analysis.advicenotes import budget_notes
from harness.analysis.casetable import CaseRow, run_rows
from harness.analysis.confidence import (
    UNCONFIRMED,
)
from harness.analysis.fixchoice import NotTried
from harness.analysis.fixresult import (
    AS_WRITTEN,
    NOT_MEASURED,
    STOPPED,
    DeviceAdvice,
    FixResult,
    best_combination,
    first_fix_line,
    judge_fix,
    ranked,
    stopped_fix,
)
from harness.core.units import device_kind, format_size
from harness.data.adviserecord import AdvisedCell, AdviseRecord
from harness.data.ceilings import Ceilings
from harness.data.results import RunDocument
from harness.measure.devicetime import Diagnosis

NO_ANSWER = "no answer: the run has no as-written cell on both a CPU and a GPU"
# A run without any GPU cell (a laptop, a CPU server): what it does answer, and the next step.
NO_GPU_ANSWER = ("no GPU in this run, so no GPU-vs-CPU answer: the fixes below are the CPU's "
                 "own; advise on a machine with an NVIDIA GPU measures both")


def no_answer(devices: list[str]) -> str:
    """The answer line of a run that has none, by the devices its cells ran on."""
    return NO_ANSWER if any(device != "cpu" for device in devices) else NO_GPU_ANSWER

def _at_size(cases: list[CaseRow], size: Any) -> list[CaseRow]:
    return [case for case in cases if case.size == size or case.size is None]


def _stopped_elsewhere(baseline: CaseRow, everywhere: list[CaseRow], own: list[CaseRow],
                       diagnosis: Diagnosis, sweep: str,
                       skipped: tuple[str, ...]) -> list[FixResult]:
    """The stopped fixes that finished other sizes only (the user's is missing from OWN)."""
    present = {case.variant for case in own}
    stopped: dict[str, list[CaseRow]] = {}
    for case in everywhere:
        if case.cell_status in STOPPED and case.variant not in present | set(skipped):
            stopped.setdefault(case.variant, []).append(case)
    return [stopped_fix(baseline, finished, diagnosis, sweep) for finished in stopped.values()]


def device_advice(cases: list[CaseRow], framework: str, device: str, size: Any,
                  combination: str = "", baseline_variant: str = AS_WRITTEN,
                  ceilings: Ceilings | None = None, sweep: str = "size") -> DeviceAdvice | None:
    """The advice of one framework x device at one size; None without an as-written case."""
    everywhere = [case for case in cases if case.framework == framework
                  and case.device == device]
    own = _at_size(everywhere, size)
    baseline = next((case for case in own if case.variant == baseline_variant), None)
    if baseline is None:
        return None
    diagnosis = diagnosis_at(baseline, cases, ceilings)
    judged = [judge_fix(baseline, case, diagnosis) for case in own
              if case.variant not in (baseline_variant, combination)]
    fixes = ranked(judged + _stopped_elsewhere(baseline, everywhere, own, diagnosis, sweep,
                                               (baseline_variant, combination)))
    combined_case = next((case for case in own if combination and case.variant == combination),
                         None)
    combined = None if combined_case is None else judge_fix(baseline, combined_case, diagnosis)
    chosen = best_combination(fixes)
    return DeviceAdvice(framework, device, baseline, diagnosis, fixes, chosen, combined)


# --- the whole run ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RunAdvice:
    """The advice of one run: per framework its devices' advice and the answer."""

    workload: str
    sweep: str
    size: Any
    devices: list[DeviceAdvice]
    answers: list[GpuCpuAnswer] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # the budget's: rounds, fixes measured
    # The candidates of as-written cells not measured at the user's batch (no DeviceAdvice
    # holds them), as the record keeps them, with the budget that would measure each.
    unmeasured: list[tuple[str, NotTried]] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        """Whether the advice rests on a measurement: some as-written cell measured at the
        user's batch, and some fix judged there where any was a candidate. Otherwise the
        exit code says "no answer" (harness.api.EXIT_NO_ANSWER)."""
        if not any(device.baseline.samples for device in self.devices):
            return False
        return any(device.measured for device in self.devices) or not (
            self.unmeasured or any(device.candidates for device in self.devices))

    def no_answer_line(self) -> str:
        """The answer of a run that measured no fix: that it did, and what budget would."""
        what = "no fix was measured" if any(device.baseline.samples
                                            for device in self.devices) \
            else "nothing was measured"
        first = first_fix_line([item for _, item in self.unmeasured] + [
            item for device in self.devices for item in device.not_tried],
            [fix for device in self.devices for fix in device.fixes])
        # Where nothing prices a fix (no step finished, none known from a preparation), the
        # one budget sure to measure them: none.
        return (f"no answer: {what}, so nothing is recommended or ruled out; "
                + (first or "--budget 0 (no limit) would measure every candidate fix"))

    def lines(self) -> list[str]:
        """The answer first, then the budget's notes, per device the ranked fixes, what did
        not help, and the candidates not tried."""
        at = f"{self.sweep} {format_size(self.size, self.sweep)}" if self.size is not None \
            else "the measured size"
        lines = [f"answer ({self.workload} at {at}):"]
        if not self.answered:
            lines.append(f"  {self.no_answer_line()}")
        lines += [f"  {item.text}" for item in self.answers] or ([
            f"  {no_answer([device.device for device in self.devices])}"]
            if self.answered else [])
        lines += self.notes
        lines += self.ranked_lines()
        for title, lines_of in (("did not help or not confirmed (never recommended):"
                                 if any(fix.standing == UNCONFIRMED for device in self.devices
                                        for fix in device.fixes)
                                 else "did not help (never recommended):",
                                 DeviceAdvice.other_lines),
                                ("not measured (never recommended):",
                                 DeviceAdvice.unmeasured_lines),
                                ("not tried (never measured):", DeviceAdvice.not_tried_lines)):
            found = [(f"{advice.framework} on {advice.device}", lines_of(advice))
                     for advice in self.devices]
            if lines_of is DeviceAdvice.not_tried_lines:
                found += [(where, [item.line()]) for where, item in self.unmeasured]
            if any(lines_ for _, lines_ in found):
                lines.append(title)
                lines += [f"  {where}: {line}" for where, lines_ in found for line in lines_]
        return lines

    def ranked_lines(self, others: bool = False) -> list[str]:
        """Per device: its diagnosis, then the ranked fixes; `others`: then what did not help
        (compare --variant all prints each device's whole ranking this way)."""
        lines = []
        for advice in self.devices:
            lines.append(advice.head())
            lines += [f"  {line}" for line in advice.ranked_lines()]
            # Named as in lines(): two devices' "0.99x, slower here" would read as one line
            # said twice (a flaky sentence-once test on the 2-core VM caught it).
            lines += [f"  {advice.framework} on {advice.device}: {line}"
                      for line in (advice.other_lines() + advice.unmeasured_lines()
                                   if others else [])]
        return lines


def user_size(document: RunDocument, cases: list[CaseRow]) -> Any:
    """The user's batch: what `harness advise` stored, else the first planned size that the
    most variants measured (compare --variant all)."""
    stored = document.advise.size if document.advise is not None else None
    if stored is not None:
        return stored
    counts: dict[Any, set[str]] = {}
    for case in cases:
        if case.timed and case.size is not None:
            counts.setdefault(case.size, set()).add(case.variant)
    if not counts:
        return None
    planned = document.params.get(document.sweep)
    order = planned if isinstance(planned, list) else sorted(counts, key=str)
    best = max(len(variants) for variants in counts.values())
    return next((size for size in order if len(counts.get(size, ())) == best),
                next(iter(counts)))


def baseline_variant(document: RunDocument) -> str:
    """as-written where the run has it, else the first planned variant (the workload's own)."""
    variants = list(dict.fromkeys(str(cell.get("variant")) for cell in document.planned_cells)) \
        or list(dict.fromkeys(cell.variant for cell in document.cells))
    return AS_WRITTEN if AS_WRITTEN in variants or not variants else variants[0]


def advise_run(document: RunDocument, size: Any | None = None) -> RunAdvice:
    """The whole advice of a stored run at the user's batch (`size`, else user_size)."""
    cases = run_rows(document)
    baseline = baseline_variant(document)
    size = user_size(document, cases) if size is None else size
    record = document.advise or AdviseRecord()
    combined = {item.device_key: item.variant for item in record.combined}
    devices = []
    for framework, device in dict.fromkeys((case.framework, case.device) for case in cases):
        advice = device_advice(cases, framework, device, size,
                               combined.get((framework, device), ""), baseline,
                               document.ceilings, document.sweep)
        if advice is not None:
            devices.append(with_choice(advice, record))
    answers = []
    for framework in dict.fromkeys(advice.framework for advice in devices):
        own = [advice for advice in devices if advice.framework == framework]
        cpu = next((advice for advice in own if device_kind(advice.device) == "cpu"), None)
        for gpu in (advice for advice in own if device_kind(advice.device) == "gpu"):
            found = answer(cpu, gpu, cases, document.sweep, size, document)
            if found is not None:
                answers.append(found)
    advised = {(advice.framework, advice.device) for advice in devices}
    unmeasured = [(f"{item.framework} on {item.device}", NotTried.of(item))
                  for item in record.not_tried if item.device_key not in advised]
    return RunAdvice(document.workload, document.sweep, size, devices, answers,
                     budget_notes(record), unmeasured)




def with_choice(advice: DeviceAdvice, record: AdviseRecord) -> DeviceAdvice:
    """A device's advice with what `harness advise` chose not to measure (run.json's advise
    record: `not_tried`, and `combination_left_out` for a combination the budget left out),
    and, for a trial that was not measured, the budget that would run it in full."""
    where = (advice.framework, advice.device)
    not_tried = [NotTried.of(item) for item in record.own(record.not_tried, *where)]
    trials = {item.variant: item for item in record.own(record.chosen, *where) if item.trial}
    fixes = [_as_trial(fix, trials.get(fix.variant)) for fix in advice.fixes]
    left_out = next(iter(record.own(record.combination_left_out, *where)), None)
    note = ""
    if left_out is not None:
        needed = left_out.needed_s
        note = f"left out by the budget of {float(left_out.budget_s or 0):.0f} s" + (
            f"; --budget {float(needed):.0f} would run it" if needed else "")
    return replace(advice, fixes=fixes, not_tried=not_tried, combination_note=note)


def _as_trial(fix: FixResult, trial: AdvisedCell | None) -> FixResult:
    """A trial not measured says it was one (too dear at its estimate, tried in the time the
    budget left) and what budget would run it in full."""
    if trial is None or fix.standing != NOT_MEASURED:
        return fix
    more = f", --budget {trial.needed_s:.0f} would run it" if trial.needed_s is not None \
        else ""
    return replace(fix, reason=f"{fix.reason or 'no result'}; tried in the time left{more}")

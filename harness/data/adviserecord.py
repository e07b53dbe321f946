"""What `harness advise` decided, as run.json keeps it under `advise` (RunDocument.advise).

Written by harness.run.advise as the run goes (the user's batch and the candidates when it
starts, the chooser's choice after the as-written cells' first round, the rounds that ran, the
combinations of phase 2), read by harness.analysis.advice (what was not tried and why, the
budget's notes) and the CLI. The key and its layout are those advise always wrote, so a run
folder from before the record was typed loads as it is; unknown keys are kept and written back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.data.serial import IF_SET, JsonObject, JsonRecord

# run.json's key of the record.
RUN_KEY = "advise"


@dataclass
class AdvisedCell(JsonRecord):
    """One framework x device x variant the record names: a candidate chosen (with its
    estimate; a trial with its floor and the budget that would run it at its estimate), one not
    tried (with the diagnosis and budget), a combination measured or left out by the budget."""

    framework: str = ""
    device: str = ""
    variant: str = ""
    fit: str = field(default="", metadata=IF_SET)  # fixchoice.AIMED, UNSAID, ARGUED_AGAINST
    diagnosis: str = field(default="", metadata=IF_SET)
    estimate_s: float | None = field(default=None, metadata=IF_SET)
    trial: bool = field(default=False, metadata=IF_SET)
    floor_s: float | None = field(default=None, metadata=IF_SET)
    budget_s: float | None = field(default=None, metadata=IF_SET)
    needed_s: float | None = field(default=None, metadata=IF_SET)
    extra_fields: JsonObject = field(default_factory=dict)

    @property
    def device_key(self) -> tuple[str, str]:
        return (self.framework, self.device)


@dataclass
class AfterRun(JsonRecord):
    """What the budget kept back for after the last worker: the seconds per cell remembered on
    this machine (None: none), its margin, and the reserve without a remembered figure."""

    per_cell_s: float | None = None
    margin: float | None = None
    without_memory_s: float | None = None
    extra_fields: JsonObject = field(default_factory=dict)


@dataclass
class AdviseRecord(JsonRecord):
    """The advise record of one run (see the module docstring)."""

    size: Any = None  # the user's batch
    baseline: str = ""  # the variant every fix is judged against
    candidates: list[str] = field(default_factory=list, metadata=IF_SET)
    order_seed: int | None = field(default=None, metadata=IF_SET)
    budget_s: float | None = field(default=None, metadata=IF_SET)
    after_run: AfterRun | None = field(default=None, metadata=IF_SET)
    rounds_planned: int | None = field(default=None, metadata=IF_SET)
    rounds_run: int | None = field(default=None, metadata=IF_SET)  # None: the choice not made
    rounds_why: str = field(default="", metadata=IF_SET)  # why fewer rounds than planned
    candidate_count: int = field(default=0, metadata=IF_SET)
    diagnoses: dict[str, str] = field(default_factory=dict, metadata=IF_SET)
    chosen: list[AdvisedCell] = field(default_factory=list, metadata=IF_SET)
    not_tried: list[AdvisedCell] = field(default_factory=list, metadata=IF_SET)
    tried: int = field(default=0, metadata=IF_SET)  # candidates that got a worker
    combined: list[AdvisedCell] = field(default_factory=list, metadata=IF_SET)
    combination_left_out: list[AdvisedCell] = field(default_factory=list, metadata=IF_SET)
    # Per as-written cell not started because the budget could not hold one measurement of
    # it: the line said before any worker (harness.run.adviseupfront).
    no_measurement: list[str] = field(default_factory=list, metadata=IF_SET)
    extra_fields: JsonObject = field(default_factory=dict)

    def own(self, cells: list[AdvisedCell], framework: str, device: str) -> list[AdvisedCell]:
        """The entries of CELLS (one of this record's lists) for one framework x device."""
        return [item for item in cells if item.device_key == (framework, device)]

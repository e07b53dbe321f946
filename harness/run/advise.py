"""`harness advise`: the as-written cells first, then the fixes their diagnosis points at, in a
time budget, then the best combination.

Two phases, one run folder, so every advice cell is a row of the run (tidy data, run.json,
`harness check`) like any compare's; docs/advise.md ("How it runs", "The budget") says how
each goes and why:

1. one RunSession, in rounds, driven stage by stage by `Chooser` (harness.run.chooser): the
   as-written cells' round 0 first, then the candidate fixes their diagnosis ranks
   (fixchoice.rank_candidates), as many as the budget holds (`fit_budget`), every later round
   shuffled across both;
2. per framework x device, the recommended fixes that run together (harness.analysis.advice
   `best_combination`) measured as one more cell where the budget left holds it: the same
   folder reopened, as `--resume` does, so only they run.

run.json keeps what the advice needs under `advise` (RunDocument.advise,
harness.data.adviserecord); the advice itself is computed from the stored run
(harness.analysis.advice.advise_run), by the CLI and the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.analysis import fixchoice
from harness.analysis.advice import advise_run
from harness.core import registry
from harness.core.settings import cache_folder
from harness.data import store
from harness.data.adviserecord import AdvisedCell, AdviseRecord, AfterRun
from harness.data.results import CellResult, RunDocument
from harness.measure import envinfo
from harness.run import chooser as choosing
from harness.run.advisebudget import DeviceKey, round_up, worker_costs
from harness.run.chooser import Chooser
from harness.run.context import RunContext
from harness.run.executors import Executor
from harness.run.forkserver import ForkServers
from harness.run.plan import RunPlan, plan
from harness.run.planner import declared_refusal
from harness.run.progress import console as progress_console
from harness.run.runner import ChildRunner
from harness.run.session import RunSession
from harness.spec import BadInput, Cell, CellKey, ParamValue, Status, WorkloadSpec

REFIT_FACTOR = 4
# Rounds when --rounds is not given: each cell's worker processes, as make demo runs compare
# (3 rounds gave no contradicted verdict there), to keep an advice run to minutes.
ADVISE_ROUNDS = 3
USER_MODEL_KIND = "usermodel"
# The whole advice run's time budget when --budget is not given (issue 41: an advice in 3
# minutes); 0 or None: no limit, every candidate in every round.
DEFAULT_BUDGET_S = 180.0
# The budget is the whole command's, as the user waits for it: what follows the last worker
# (storing the predictions, the report, `harness check`, the answer) is kept out of what the
# workers may spend. 20-26 s on the H100 host for the small CNN and seed 002's Keras file
# (command wall minus the run's: 192 - 162 s and 159 - 133 s, CLI start and inspection
# included): the reserve of a machine that has not run advise before.
AFTER_RUN_S = 25.0
# It grows with the cells (the report draws each, `harness check` recomputes each): on the
# H100 host 17.5 s after a 16-cell run (the small CNN; its report 14.8 s) and 8.3 s after a
# 6-cell one (seed 000's Jacobian; 5.6 s), 1.1-1.4 s a cell. So each advise remembers its own
# seconds per cell for this machine (AFTER_RUN_FILE in the cache folder, by the fingerprint of
# the CPU, the GPUs and the report's libraries) and the next one keeps back that figure x
# AFTER_RUN_MARGIN for each cell run so far and the next (at least AFTER_RUN_FLOOR_S), so a
# slow step's short run does not lose 15 s of fixes to a reserve sized for a long one.
AFTER_RUN_FILE = "advise-after-run.json"
AFTER_RUN_MARGIN = 1.5
AFTER_RUN_FLOOR_S = 5.0
REPORT_LIBRARIES = ("matplotlib", "pandas", "seaborn")
# The most seconds a FLOP count or memory pass may take in an advice run's workers (compare:
# 10 s): the budget is for the fixes. A small model's passes take milliseconds either way; seed
# 000's Jacobian spent 20 s of its 180 on the CPU's two passes at batch 25 (0.8 s a call).
ADVISE_PASS_LIMIT_S = 2.0

def candidate_variants(spec: WorkloadSpec, framework: str, device: str,
                       baseline: str) -> list[str]:
    """The fixes worth a cell for one framework x device, those the declarations refuse left
    out: a user model's from the fix catalogue (those its entries say advise tries), a
    built-in workload's other variants."""
    catalogue = fixchoice.catalogue() if spec.kind == USER_MODEL_KIND else None
    if catalogue is not None:
        names = [name for name in catalogue.fixes_for(framework, device, envinfo.usable_cores())
                 if (entry := catalogue.fix_of(name)) is not None and entry.advised]
    else:
        names = [variant for variant in spec.variants if variant != baseline]
    return [name for name in dict.fromkeys(names) if name != baseline
            and declared_refusal(spec, framework, name, device) is None]



def advice_sizes(sizes: Sequence[int] | None) -> list[int] | None:
    """The sizes to plan: the user's batch first; one batch gets a second, REFIT_FACTOR x."""
    if sizes is None:
        return None
    chosen = [int(size) for size in sizes]
    if len(chosen) == 1:
        first = chosen[0]
        chosen.append(first // REFIT_FACTOR if first >= REFIT_FACTOR else first * REFIT_FACTOR)
    return chosen


def plan_advice(workload: str | None = None, *, model: Path | str | None = None,
                sizes: Sequence[int] | None = None, **options: Any) -> tuple[RunPlan, Any]:
    """Phase 1's plan, the as-written cells only (every input checked before anything runs),
    and the user's batch; the candidates of each are `candidates_of(plan)`.

    `options` are harness.run.plan.plan's (frameworks, devices, rounds, quick, out, ...).
    BadInput for bad arguments, as plan raises it.
    """
    if options.get("variants") is not None:
        raise BadInput("advise chooses the variants itself (the fixes); drop --variant")
    if options.get("rounds") is None and not options.get("quick"):
        options["rounds"] = ADVISE_ROUNDS
    base = plan(workload, model=model, sizes=advice_sizes(sizes), **options)
    base = replace(base, settings=replace(base.settings, energy=False,
                                          pass_limit_s=ADVISE_PASS_LIMIT_S))
    baseline = base.spec.variants_by_default[0]
    swept = base.params.get(base.spec.sweep)
    size = swept[0] if isinstance(swept, list) and swept else swept
    return replace(base, cells=[cell for cell in base.cells if cell.variant == baseline]), size


def candidates_of(run: RunPlan) -> dict[DeviceKey, list[str]]:
    """Per framework x device of the plan, its candidate fixes in the catalogue's order."""
    baseline = run.spec.variants_by_default[0]
    return {(cell.framework, cell.device): candidate_variants(run.spec, cell.framework,
                                                              cell.device, baseline)
            for cell in run.cells}


# --- what follows the last worker, remembered per machine ------------------------------------

def after_run_key() -> str:
    """This machine's entry in AFTER_RUN_FILE: a hash of its fingerprint (envinfo's)."""
    return envinfo.fingerprint_key(envinfo.machine_fingerprint(REPORT_LIBRARIES))


def remembered_per_cell(folder: Path) -> float | None:
    """The seconds per cell the last advise on this machine took after its last worker, as
    the cache FOLDER remembers it; None where none is (or the file cannot be read)."""
    entry = store.read_json_object(folder / AFTER_RUN_FILE).get(after_run_key())
    value = entry.get("per_cell_s") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def remember_after_run(seconds: float, cells: int, folder: Path) -> None:
    """Keep SECONDS after the last worker of a run of CELLS cells, per cell, for this machine,
    in the cache FOLDER (a failure to write is no failure of the run)."""
    if cells < 1 or seconds <= 0:
        return
    path = folder / AFTER_RUN_FILE
    known = store.read_json_object(path)
    known[after_run_key()] = {"per_cell_s": round(seconds / cells, 3), "cells": cells,
                              "seconds": round(seconds, 1),
                              "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        store.write_json_atomic(path, known)
    except OSError:
        return


def after_run_reserve(cells: int, per_cell_s: float | None) -> float:
    """Seconds kept back for what follows the last worker of a run of CELLS cells: the
    remembered seconds per cell x AFTER_RUN_MARGIN (at least AFTER_RUN_FLOOR_S), or AFTER_RUN_S
    where this machine has none remembered."""
    if per_cell_s is None:
        return AFTER_RUN_S
    return max(AFTER_RUN_FLOOR_S, per_cell_s * max(1, cells) * AFTER_RUN_MARGIN)



PrepareStep = Callable[[Path, dict[str, ParamValue], RunContext], dict[str, ParamValue]]


def budgeted_prepare(run: RunPlan, ends: float) -> PrepareStep:
    """RUN's preparation of a user model (its weights and the CPU references: several calls of
    the step at each batch) stopped where the budget ENDS (a choosing.clock() time) at the
    latest: seed 000's Jacobian spent 132 s of a 180 s budget there on a busy 2-core CPU. The
    calls it finished are kept (REFERENCE_CALLS_FILE); the chooser then starts no worker the
    budget cannot hold (harness.run.adviseupfront)."""
    usermodel_plan = registry.model_plugin("plan")

    def prepare(run_dir: Path, params: dict[str, ParamValue],
                context: RunContext) -> dict[str, ParamValue]:
        left = max(1.0, ends - choosing.clock())
        added: dict[str, ParamValue] = usermodel_plan.prepare_run(
            run_dir, run.spec, params, min(run.timeout_s, left), ChildRunner(context))
        return added
    return prepare


# --- the whole advice run ---------------------------------------------------------------------

@dataclass
class AdviseRun:
    """An advice run's two phases, each an opened session the caller runs to its end
    (harness.api.advise: it stores the predictions as every run's end does).

    `start` plans phase 1 and opens its session with the Chooser as its pick; `second`, after
    it ended, saves the record of what ran and opens phase 2 (the best combinations) where
    phase 1 ended without a stop signal, some framework x device has two or more recommended
    fixes that run together, and the budget left holds them; None otherwise.
    """

    run: RunPlan
    size: Any
    session: RunSession
    chooser: Chooser
    executor: str | Executor | None = None
    command: list[str] | None = None
    progress: bool = True
    # The caller's warm processes, shared by both phases (None: each phase opens its own).
    servers: ForkServers | None = None

    @classmethod
    def start(cls, workload: str | None = None, *, executor: str | Executor | None = None,
              progress: bool = True, command: list[str] | None = None, ceilings: bool = True,
              budget_s: float | None = DEFAULT_BUDGET_S, spent_s: float = 0.0,
              servers: ForkServers | None = None, **options: Any) -> AdviseRun:
        """Phase 1 opened. BUDGET_S: seconds for the whole run from now, less SPENT_S already
        spent by the command (the CLI's start and imports); 0 or None: no limit. SERVERS: the
        caller's warm processes (harness.run.context)."""
        started = choosing.clock() - max(0.0, spent_s)
        if budget_s is not None and budget_s < 0:
            raise BadInput(f"--budget {budget_s:g}: must be >= 0 seconds (0: no limit)")
        budget = float(budget_s) if budget_s else None
        run, size = plan_advice(workload, servers=servers, **options)
        per_cell = remembered_per_cell(cache_folder(run.settings))
        if budget is not None and run.prepare is not None and \
                run.spec.kind == USER_MODEL_KIND:
            run = replace(run, prepare=budgeted_prepare(
                run, started + budget - after_run_reserve(1, per_cell)))
        candidates = candidates_of(run)
        session = RunSession.start(run, executor, command=command, progress=progress,
                                   ceilings=ceilings, servers=servers)
        record = AdviseRecord(
            size=size, baseline=run.spec.variants_by_default[0],
            candidates=sorted({name for names in candidates.values() for name in names}),
            order_seed=run.seed, budget_s=budget,
            after_run=AfterRun(per_cell, AFTER_RUN_MARGIN, AFTER_RUN_S))
        session.document.advise = record
        session.document.seed = None  # the Chooser's orders, not the seeded shuffle
        session.recorder.save()
        chooser = Chooser(session, candidates, size, budget, started, run.seed, run.rounds,
                          session.executor.runs_cells_here, record,
                          after_run=lambda cells: after_run_reserve(cells, per_cell))
        session.pick = chooser
        return cls(run, size, session, chooser, executor, command, progress, servers)

    def second(self, stopped: bool) -> RunSession | None:
        """Phase 2's session (see the class docstring), once phase 1's ended; STOPPED: by a
        stop signal. Phase 1's record is saved either way."""
        document = self.session.document  # the finished session's: the CLI prints its advice
        finish_record(self.session.run_dir, document)
        if stopped:
            return None
        added = add_combinations(self.session.run_dir, self.run.spec, self.chooser, document)
        if not added:
            return None
        progress_console.print(f"advise: measuring the best combination as one cell: "
                               f"{', '.join(sorted({cell.variant for cell in added}))}")
        reopened = RunSession.reopen(self.session.run_dir, self.executor, command=self.command,
                                     progress=self.progress, servers=self.servers)
        first = self.chooser
        reopened.pick = Chooser(reopened, {}, self.size, first.budget_s, first.started,
                                first.order_seed, first.rounds,
                                reopened.executor.runs_cells_here, decided=True,
                                after_run=first.after_run)
        return reopened


def finish_record(run_dir: Path, document: RunDocument) -> None:
    """The advise record of phase 1's DOCUMENT as it ran, saved: the candidate fixes that got
    a worker (the advice's 'measured N of M'), the rounds that ran and, where fewer than
    planned (the budget ran out before a round, a stop), why."""
    record = document.advise if document.advise is not None else AdviseRecord()
    record.tried = sum(1 for cell in document.cells if cell.variant != record.baseline
                       and cell.status != Status.UNAVAILABLE
                       and measured_at(cell, document.sweep, record.size))
    ran = max(1, len(document.round_orders))
    if record.rounds_run is not None and ran < record.rounds_run:  # decided, cut by the budget
        budget = record.budget_s
        record.rounds_why = (f"the budget of {budget:.0f} s ran out after round {ran}"
                             if budget else f"stopped after round {ran}")
    record.rounds_run = ran
    if record.rounds_planned is None:
        record.rounds_planned = document.rounds
    document.advise = record
    store.write_run(run_dir, document)


def measured_at(cell: CellResult, sweep: str, size: Any) -> bool:
    """Whether CELL's worker finished (its cost is known), or, stopped (the budget's deadline
    keeps no cost), it finished the user's batch SIZE."""
    if cell.cost is not None and cell.cost.workers > 0:
        return True
    return any(case.case.get(sweep) == size for case in cell.cases)


def add_combinations(run_dir: Path, spec: WorkloadSpec, chooser: Chooser | None = None,
                     document: RunDocument | None = None) -> list[Cell]:
    """The cells of phase 2, added to the stored run's plan (and named in its `advise` record):
    per framework x device the recommended fixes that run together, where there are two or
    more (one fix alone was measured in phase 1), and where CHOOSER's budget left holds them
    (the others are recorded as left out, with the budget that would run them). DOCUMENT:
    the run's, in memory (default: read from RUN_DIR); saved either way."""
    document = document if document is not None else store.load_run(run_dir)
    record = document.advise if document.advise is not None else AdviseRecord()
    found = advise_run(document, record.size)
    planned = [Cell.from_dict(fields) for fields in document.planned_cells]
    known = {cell.key for cell in planned}
    results = {result.cell.key: result for result in document.cells}
    added: list[Cell] = []
    spent = 0.0
    for device in found.devices:
        name = device.combination_name
        baseline = next((cell for cell in planned if (cell.framework, cell.device, cell.variant)
                         == (device.framework, device.device, device.baseline.variant)), None)
        if len(device.combination) < 2 or baseline is None:
            continue
        cell = replace(baseline, variant=name)
        if cell.key in known or declared_refusal(spec, cell.framework, name, cell.device):
            continue
        cost = combination_cost(results, baseline, device.combination,
                                chooser.rounds if chooser else 1)
        if chooser is not None and chooser.budget_s and \
                chooser.elapsed() + spent + cost > chooser.budget_s:
            record.combination_left_out.append(AdvisedCell(
                cell.framework, cell.device, name, budget_s=chooser.budget_s,
                needed_s=round_up(chooser.elapsed() + spent + cost)))
            continue
        spent += cost
        added.append(cell)
        known.add(cell.key)
    if added:
        document.planned_cells += [cell.as_dict() for cell in added]
        record.combined = [AdvisedCell(cell.framework, cell.device, cell.variant)
                           for cell in added]
    document.advise = record
    store.write_run(run_dir, document)
    return added


def combination_cost(results: dict[CellKey, CellResult], baseline: Cell, parts: list[str],
                     rounds: int) -> float:
    """A combination's estimated workers over ROUNDS: its dearest part's measured worker
    (each part ran as a cell in phase 1; the as-written worker where one did not)."""
    measured = [worker_costs(results.get(replace(baseline, variant=part).key))
                for part in [baseline.variant, *parts]]
    known = [costs for costs in measured if costs is not None]
    if not known:
        return 0.0
    return max(costs.total(rounds) for costs in known)

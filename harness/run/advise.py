"""`harness advise`: the as-written cell beside its candidate fixes, then the best combination.

Two phases, one run folder, so every advice cell is a row of the run (tidy data, run.json,
`harness check`) like any compare's:

1. the as-written cell of every framework x device and each candidate fix as its own cell
   (a variant: harness.workloads.usermodel.spec `fixes_for`; a built-in workload's own
   variants), all planned by harness.run.plan and run by one RunSession, interleaved in
   rounds like any compare;
2. per framework x device, the recommended fixes that run together (harness.analysis.advice
   `best_combination`) measured as one more cell: the planned cells of the stored run grow by
   those cells and the same folder is reopened, as `--resume` does, so only they run.

Where the user's batch is one size, a second one (4x) is planned too: the best
configurations' sweeps are what the predicted crossover is refitted on. run.json keeps what
the advice needs under `advise` (harness.analysis.advice.RUN_KEY): the user's batch, the
candidates and the combinations measured. The advice itself is computed from the stored run
(harness.analysis.advice.advise_run), by the CLI and the report alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from harness.analysis import advice as advice_module
from harness.core import registry
from harness.data import store
from harness.measure import envinfo
from harness.run.executors import Executor
from harness.run.plan import RunPlan, plan
from harness.run.planner import declared_refusal
from harness.run.progress import console as progress_console
from harness.run.session import RunSession
from harness.spec import BadInput, Cell, WorkloadSpec

# The second batch planned beside a single one, so the fixed step's costs can be refitted: a
# quarter of it (a step's cost grows with the batch, for some models much faster than
# linearly: seed 000's Jacobian is quadratic), or 4x a batch under 4.
REFIT_FACTOR = 4
# Rounds when --rounds is not given: each cell's worker processes, as make demo runs compare
# (3 rounds gave no contradicted verdict there), to keep an advice run to minutes.
ADVISE_ROUNDS = 3
USER_MODEL_KIND = "usermodel"

# Fixes compare can run (--variant) that advise does not try on its own: max-autotune's
# autotuning costs a minute or more in every worker process, so in every round (the small
# CNN: 46 s on the H100 host's CPU, 73 s on the H100, against ~3 s for any other fix).
NOT_ADVISED = frozenset({"compile-max-autotune"})

Result = TypeVar("Result")


def candidate_variants(spec: WorkloadSpec, framework: str, device: str,
                       baseline: str) -> list[str]:
    """The fixes worth a cell for one framework x device, those the declarations refuse left
    out: a user model's from the catalogue's fixes_for, a built-in workload's other variants."""
    names: list[str]
    fixes_for = getattr(_catalogue(), "fixes_for", None)
    if spec.kind == USER_MODEL_KIND and callable(fixes_for):
        found = fixes_for(framework, device, cpu_cores=envinfo.usable_cores())
        names = [str(getattr(fix, "name", fix)) for fix in found]
    else:
        names = [variant for variant in spec.variants if variant != baseline]
    return [name for name in dict.fromkeys(names) if name != baseline
            and name not in NOT_ADVISED
            and declared_refusal(spec, framework, name, device) is None]


def _catalogue() -> Any | None:
    try:
        return registry.model_plugin("spec")
    except Exception:  # noqa: BLE001 - without it a user model has no fixes to try
        return None


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
    """Phase 1's plan (every cell checked before anything runs) and the user's batch.

    `options` are harness.run.plan.plan's (frameworks, devices, rounds, quick, out, ...).
    BadInput for bad arguments, as plan raises it.
    """
    if options.get("variants") is not None:
        raise BadInput("advise chooses the variants itself (the fixes); drop --variant")
    if options.get("rounds") is None and not options.get("quick"):
        options["rounds"] = ADVISE_ROUNDS
    base = plan(workload, model=model, sizes=advice_sizes(sizes), **options)
    base = replace(base, settings=replace(base.settings, energy=False))
    baseline = base.spec.variants_by_default[0]
    cells: list[Cell] = []
    for cell in base.cells:
        if cell.variant != baseline:
            continue
        cells.append(cell)
        cells += [replace(cell, variant=name) for name in
                  candidate_variants(base.spec, cell.framework, cell.device, baseline)]
    swept = base.params.get(base.spec.sweep)
    size = swept[0] if isinstance(swept, list) and swept else swept
    return replace(base, cells=cells), size


def advise(workload: str | None = None, *,
           finish: Callable[[RunSession], Result], executor: str | Executor | None = None,
           progress: bool = True, command: list[str] | None = None,
           ceilings: bool = True, **options: Any) -> Result:
    """Both phases; `finish` runs an opened session to its end (harness.api's, which stores
    the predictions) and its result of the last phase is returned.

    Phase 2 runs only where phase 1 ended without a stop signal and some framework x device
    has two or more recommended fixes that run together.
    """
    run, size = plan_advice(workload, **options)
    session = RunSession.start(run, executor, command=command, progress=progress,
                               ceilings=ceilings)
    session.document.extra_fields[advice_module.RUN_KEY] = {
        "size": size, "baseline": run.spec.variants_by_default[0],
        "candidates": sorted({cell.variant for cell in run.cells})}
    result = finish(session)
    if getattr(result, "stopped_by", None) is not None:
        return result
    added = add_combinations(session.run_dir, run.spec)
    if not added:
        return result
    progress_console.print(f"advise: measuring the best combination as one cell: "
                           f"{', '.join(sorted({cell.variant for cell in added}))}")
    return finish(RunSession.reopen(session.run_dir, executor, command=command,
                                    progress=progress))


def add_combinations(run_dir: Path, spec: WorkloadSpec) -> list[Cell]:
    """The cells of phase 2, added to the stored run's plan (and named in its `advise` record):
    per framework x device the recommended fixes that run together, where there are two or
    more (one fix alone was measured in phase 1)."""
    document = store.load_run(run_dir)
    record = dict(document.extra_fields.get(advice_module.RUN_KEY) or {})
    found = advice_module.advise_run(document, record.get("size"))
    planned = [Cell(**fields) for fields in document.planned_cells]
    known = {cell.key for cell in planned}
    added: list[Cell] = []
    for device in found.devices:
        name = device.combination_name
        baseline = next((cell for cell in planned if (cell.framework, cell.device, cell.variant)
                         == (device.framework, device.device, device.baseline.variant)), None)
        if len(device.combination) < 2 or baseline is None:
            continue
        cell = replace(baseline, variant=name)
        if cell.key in known or declared_refusal(spec, cell.framework, name, cell.device):
            continue
        added.append(cell)
        known.add(cell.key)
    if not added:
        return []
    document.planned_cells += [cell.as_dict() for cell in added]
    record["combined"] = [{"framework": cell.framework, "device": cell.device,
                           "variant": cell.variant} for cell in added]
    document.extra_fields[advice_module.RUN_KEY] = record
    store.write_run(run_dir, document)
    return added

"""What is measured: workload specs, parameters, cells and statuses.

A spec says *what* to run; it never holds a measurement (compare torch.utils.benchmark's
TaskSpec vs Measurement). Nothing here imports a framework.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from harness.core.units import device_kind
from harness.variants import Capability, variant_parts  # Capability: plugins import it here


class Status(str, Enum):
    """Outcome of one cell or one case; failures are data, not exceptions."""

    OK = "ok"
    UNAVAILABLE = "unavailable"
    INVALID = "invalid"
    ERROR = "error"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value


# Worst first: the status of a cell is the worst status among its cases.
STATUS_SEVERITY = {
    Status.OK: 0,
    Status.UNAVAILABLE: 1,
    Status.INVALID: 2,
    Status.ERROR: 3,
    Status.TIMEOUT: 4,
    Status.INTERRUPTED: 5,
}


def worst_status(statuses: list[Status]) -> Status:
    """The most severe status of a list (ok when empty)."""
    return max(statuses, key=STATUS_SEVERITY.__getitem__, default=Status.OK)


def status_severity(name: str) -> int:
    """How bad a stored status name is; a name this harness does not know ranks as an error."""
    try:
        return STATUS_SEVERITY[Status(name)]
    except ValueError:
        return STATUS_SEVERITY[Status.ERROR]


def worst_status_name(names: Iterable[str], default: str = Status.OK.value) -> str:
    """The most severe of stored status names (run.json, CSV): the one rule for every reader."""
    return max(names, key=status_severity, default=default)


class BadInput(ValueError):
    """Raised for user input the harness refuses; the CLI prints it in one line, exit 2."""


# A workload parameter's value: a count, a size, a rate, a name, a flag, a shape (a tuple, a
# list once read back from JSON) or, before the sweep is expanded into cases, the sweep's list.
ParamValue = int | float | str | bool | tuple[int, ...] | list[int]
# One case's parameters by name (or a run's, before the sweep is expanded).
CaseParams = Mapping[str, ParamValue]


def int_param(params: CaseParams, name: str) -> int:
    """params[name], declared an int; TypeError where it is not one."""
    value = params[name]
    if not isinstance(value, int):
        raise TypeError(f"parameter {name}={value!r} is not an integer")
    return value


def str_param(params: CaseParams, name: str) -> str:
    value = params[name]
    if not isinstance(value, str):
        raise TypeError(f"parameter {name}={value!r} is not text")
    return value


@dataclass(frozen=True)
class Param:
    """One workload parameter: its type, default, CI-sized default and lower bound."""

    default: ParamValue
    quick: ParamValue
    help: str
    kind: type = int
    minimum: float | None = 1
    choices: tuple[str, ...] | None = None

    def parse(self, name: str, text: str) -> ParamValue:
        """Convert command-line text to the parameter's type, or raise BadInput."""
        if self.kind is tuple:  # a shape such as 100x1000x1000
            parts = text.lower().replace(",", "x").split("x")
            try:
                shape = tuple(int(part) for part in parts)
            except ValueError:
                raise BadInput(f"--param {name}={text!r}: expected a shape like 100x1000") from None
            if not shape or any(dim < 1 for dim in shape):
                raise BadInput(f"--param {name}={text!r}: every dimension must be >= 1")
            return shape
        try:
            value = self.kind(text)
        except ValueError:
            raise BadInput(
                f"--param {name}={text!r}: expected {self.kind.__name__}"
            ) from None
        self.validate(name, value)
        return value

    def validate(self, name: str, value: ParamValue) -> None:
        if self.choices is not None and value not in self.choices:
            raise BadInput(f"--param {name}={value!r}: valid values are {', '.join(self.choices)}")
        if self.minimum is not None and isinstance(value, (int, float)) and value < self.minimum:
            raise BadInput(f"--param {name}={value!r}: must be >= {self.minimum:g}")


@dataclass(frozen=True)
class Check:
    """Result of a correctness check: what was compared, the figure, and the bound."""

    passed: bool
    metric: str
    value: float
    bound: float
    detail: str = ""
    # What a bound measured from the model was made of (a reduced-precision variant judged by
    # its sensitivity: spread, multiple, floor), kept so `harness check` can recompute it.
    sensitivity: Mapping[str, float | str] | None = None

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "passed": self.passed,
            "metric": self.metric,
            "value": self.value,
            "bound": self.bound,
            "detail": self.detail,
        }
        if self.sensitivity is not None:
            found["sensitivity"] = dict(self.sensitivity)
        return found


@dataclass(frozen=True)
class CallPlan:
    """How a case's calls are timed and shared over the rounds of a run: what is run.

    `timing` is "autorange" (repeat a call until the spread is known), "per_call" (each call
    is one sample, e.g. one training epoch; the first call is the cold one; with `call_blocks`,
    blocks of the call's steps are the samples) or "measure": the backend module exposes
    `measure(case, variant, device, inputs, policy)` returning `(Measurement, output)` instead
    of `make_task`, for work that cannot be one in-process call (e.g. several processes); it
    must still time with harness.measure.timing.
    """

    timing: str = "autorange"
    # (case) -> number of calls for per_call timing (e.g. epochs).
    calls: Callable[[CaseParams], int] | None = None
    # (case) -> timed blocks of steps per call for per_call timing, where the task reports its
    # steps (harness.measure.blocks: each block after the first is a warm sample); None or 1:
    # one sample per call.
    call_blocks: Callable[[CaseParams], int] | None = None
    # Integer parameters that count measured work (MNIST: epochs), divided over the rounds of
    # a run with --rounds N (harness.run.rounds), each round keeping at least 1.
    round_split: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportHints:
    """How a workload's results are reported, stored in run.json ("hints") so that the report
    reads them from the data, never from the installed workload."""

    # Which measured ceiling bounds the byte rate ("bandwidth_gbps": device memory,
    # "h2d_pinned_gbps": the host<->device link).
    bandwidth_ceiling: str = "bandwidth_gbps"
    # Which variants ask "GPU this way vs the best CPU way of any variant" (seed 4: a GPU
    # matmul with copies vs numpy), rather than vs the same variant's CPU cell.
    cpu_baseline_any_variant: tuple[str, ...] = ()
    # Data-parallel workloads: which case parameter counts the processes and which case extras
    # hold the job's samples per call and the all-reduce share (harness/report/views/scaling.py).
    scaling: Mapping[str, Any] | None = None
    # (with the cost, without it, the cost's name): variant pairs whose time difference is one
    # identifiable cost, drawn as "where the time goes" (e.g. copies, the input pipeline).
    overhead_pairs: tuple[tuple[str, str, str], ...] = ()
    # variant -> arithmetic precision ("fp32", "tf32", "bf16"): which FLOP ceiling applies.
    variant_precision: Mapping[str, str] = field(default_factory=dict)
    # The parameter holding samples per epoch, when accuracy is measured on repeated data.
    epoch_samples_param: str = ""
    # Optional report views this workload asks for by name (harness/report/views/, e.g.
    # "epochs-accuracy", "scaling"), and per view the labels it uses (axis names, fields).
    views: tuple[str, ...] = ()
    view_labels: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The hints as plain data, in the shape run.json has always stored them."""
        hints: dict[str, Any] = {
            "bandwidth_ceiling": self.bandwidth_ceiling,
            "cpu_baseline_any_variant": list(self.cpu_baseline_any_variant),
            "overhead_pairs": [list(pair) for pair in self.overhead_pairs],
            "variant_precision": dict(self.variant_precision),
            "epoch_samples_param": self.epoch_samples_param,
        }
        if self.scaling is not None:
            hints["scaling"] = dict(self.scaling)
        hints["views"] = list(self.views)
        hints["view_labels"] = {view: dict(labels) for view, labels in self.view_labels.items()}
        return hints


@dataclass(frozen=True)
class WorkloadSpec:
    """A framework-free description of one workload: what is measured, how it is run (`run`,
    a CallPlan) and how it is reported (`report`, ReportHints).

    `kind` (optional, default: the name) names the module a backend folder provides for a
    framework without an entry in `implementations` (backends/<fw>/<kind>.py); a plugin that
    lists every framework's module in `implementations` never needs it.
    `sweep` names the parameter `--sizes` sets; each value becomes one case.
    """

    name: str
    summary: str
    sweep: str
    params: Mapping[str, Param]
    variants: tuple[str, ...]
    frameworks: tuple[str, ...] = ()
    # framework -> import string of the module with make_task (or measure); imported only in
    # that framework's worker. A framework listed in `frameworks` without an entry here uses
    # its own backend package's `<kind>` module (backends/<fw>/<kind>.py).
    implementations: Mapping[str, str] = field(default_factory=dict)
    run: CallPlan = field(default_factory=CallPlan)
    report: ReportHints = field(default_factory=ReportHints)
    # (case) -> work done by one call (None: does not apply to that case); for GFLOP/s and GB/s.
    flops: Callable[[CaseParams], float | None] | None = None
    bytes_moved: Callable[[CaseParams], float | None] | None = None
    # (case, variant) -> the host bytes a case's worker holds at least (its inputs and
    # output), None where unknown: a case needing more than the machine has available is an
    # error case "out of memory: ... not run", refused before its inputs are made
    # (harness.run.memoryguard).
    host_bytes: Callable[[CaseParams, str], float | None] | None = None
    # What `flops` counts, printed beside every rate made from it ("exact": every FLOP the
    # call's arithmetic executes, as for a matmul's 2n^3; otherwise which part it is).
    flops_covers: str = "exact"
    # Cells count their own FLOPs per call with the framework's counter (the implementation's
    # count_flops(task)), where `flops` above cannot say (a user's model).
    counts_flops: bool = False
    # Variants that are device-only (e.g. host<->device copies): skipped on cpu with a reason.
    device_only_variants: tuple[str, ...] = ()
    # Variants run when --variant is not given (default: the first, the as-written one).
    default_variants: tuple[str, ...] = ()
    # (case, variant) -> numpy inputs shared by every framework, generated from a fixed seed;
    # (case, variant, settings) where inputs_read_settings (the run's harness.core.settings:
    # the MNIST loader's download switch), the worker handing its settings on (`inputs`).
    make_inputs: Callable[..., dict[str, Any]] | None = None
    inputs_read_settings: bool = False
    # (case, variant, inputs, output) -> Check; a time is trusted only when it passes.
    check: Callable[..., Check] | None = None
    # (params, variant) -> cases, for workloads whose variants sweep different things.
    custom_cases: Callable[[CaseParams, str], list[dict[str, ParamValue]]] | None = None
    # (path) -> None or BadInput: validates a --data file before anything runs.
    validate_data: Callable[[Any], None] | None = None
    notes: str = ""
    # framework -> what its implementation runs (see Capability); a framework without an
    # entry runs every variant, as plugins written before declarations did.
    capabilities: Mapping[str, Capability] = field(default_factory=dict)
    # (parts) -> why these variants cannot run at once, or None: a workload that gives it
    # takes composed variant names ("resident+compiled"); None: its variants do not compose.
    variant_conflict: Callable[[tuple[str, ...]], str | None] | None = None
    kind: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", self.name)
        # One declaration suffices: frameworks default to the implementations' keys.
        if not self.frameworks and self.implementations:
            object.__setattr__(self, "frameworks", tuple(self.implementations))

    def implementation(self, framework: str, backend_package: str) -> str:
        """The import string of this workload's module for `framework`."""
        return self.implementations.get(framework) or f"{backend_package}.{self.kind}"

    def refusal(self, variant: str, framework: str, device: str) -> str | None:
        """Why this cell cannot run, from declarations alone; None when it may run."""
        kind = device_kind(device)
        parts = variant_parts(variant)
        if kind == "cpu" and (only := [part for part in parts
                                       if part in self.device_only_variants]):
            return f"variant {only[0]} needs a GPU device"
        capability = self.capabilities.get(framework)
        reason = capability.refusal(variant, kind) if capability is not None else None
        if reason is None and len(parts) > 1:
            reason = (self.variant_conflict(parts) if self.variant_conflict is not None
                      else f"{self.name}'s variants do not compose")
        return reason

    def inputs(self, case: CaseParams, variant: str, settings: Any) -> dict[str, Any]:
        """The case's inputs (make_inputs; {} where there is none), given the run's SETTINGS
        where the spec reads them (inputs_read_settings)."""
        if self.make_inputs is None:
            return {}
        if self.inputs_read_settings:
            return self.make_inputs(case, variant, settings)
        return self.make_inputs(case, variant)

    @property
    def variants_by_default(self) -> tuple[str, ...]:
        return self.default_variants or self.variants[:1]

    def defaults(self, quick: bool) -> dict[str, ParamValue]:
        return {name: (p.quick if quick else p.default) for name, p in self.params.items()}

    def resolve_params(
        self, overrides: Mapping[str, str], sizes: list[int] | None, quick: bool
    ) -> dict[str, ParamValue]:
        """Defaults, then --param overrides, then --sizes for the sweep parameter."""
        values = self.defaults(quick)
        for name, text in overrides.items():
            if name not in self.params:
                valid = ", ".join(sorted(self.params))
                raise BadInput(f"unknown --param {name!r} for {self.name}; valid: {valid}")
            values[name] = self.params[name].parse(name, text)
        if sizes is not None:
            values[self.sweep] = list(sizes)
        return values

    def cases(self, params: CaseParams) -> list[dict[str, ParamValue]]:
        """One dict per value of the sweep parameter (list-valued sweeps expand)."""
        swept = params[self.sweep]
        sweep_values: list[ParamValue] = list(swept) if isinstance(swept, list) else [swept]
        return [{**params, self.sweep: value} for value in sweep_values]

    def cases_for(self, params: CaseParams, variant: str) -> list[dict[str, ParamValue]]:
        if self.custom_cases is not None:
            return self.custom_cases(params, variant)
        return self.cases(params)


SYNC_STYLES = ("device", "output")


@dataclass(frozen=True)
class FrameworkSpec:
    """Everything the harness knows about one framework, as plain data (imports nothing).

    package: the backend package; its `device` module opens devices (version(), threads(),
    list_devices(), open_device(name)). environment: variables every cell of this framework
    gets (set over the user's); environment_defaults: set only where the user has not;
    quick_environment_defaults: the same, for --quick cells only (what makes a smoke test
    cheaper at the price of a cold call unlike a default setup's, which the run then says).
    sync: "device" (a device-wide synchronize, torch/TF) or "output" (block on the step's
    returned output, as JAX needs: the worker keeps the last output of step() and waits on it
    with device.block(output); harness.run.caserun.timed_pair). cpu_only: the framework has no
    accelerator devices. preload: modules a warm process imports once per run, so that this
    framework's workers are forked from it instead of each importing them anew
    (harness.run.forkserver; the runner adds the worker module itself); () for a framework
    whose import is not safe to fork after (one that starts thread pools or opens a device
    when imported). A preload name with a leading "!" is an optional module kept unimportable
    while the others import, and importable again after: an integration the library imports
    only where installed (its import guarded by `except ImportError`) and no step of the
    harness uses, whose import would lengthen every run's start (forkserver.OPTIONAL_PREFIX).
    compile_cache_variable:
    the variable naming a directory where the framework's compiler keeps what it compiled
    (with compile_cache_environment, what makes it keep everything); the runner gives each
    cell its own, new with every run, so round 0 compiles cold and the later rounds of that
    cell load round 0's programs instead of compiling them again (harness.run.runner
    `compile_cache_environment`).
    """

    name: str
    import_name: str
    package: str
    install_hint: str = ""
    color: str = "#7F7F7F"
    label: str = ""
    environment: Mapping[str, str] = field(default_factory=dict)
    environment_defaults: Mapping[str, str] = field(default_factory=dict)
    quick_environment_defaults: Mapping[str, str] = field(default_factory=dict)
    sync: str = "device"
    cpu_only: bool = False
    # Further packages the cell imports (Keras on JAX needs keras and jax); each missing one
    # makes the cell `unavailable` with the install hint, like a missing import_name.
    also_requires: tuple[str, ...] = ()
    preload: tuple[str, ...] = ()
    compile_cache_variable: str = ""
    compile_cache_environment: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.sync not in SYNC_STYLES:
            raise ValueError(f"framework {self.name}: sync must be one of {SYNC_STYLES}")

    def style(self) -> dict[str, str]:
        """What the report needs: stored in run.json, so old runs keep their colours."""
        return {"color": self.color, "label": self.label or self.name}


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a parameter value (lists, dicts and sets nested in it)."""
    if isinstance(value, dict):
        return frozenset((key, _frozen(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, set):
        return frozenset(_frozen(item) for item in value)
    return value


class FrozenParams(dict[str, Any]):
    """A cell's parameters: a dict to every reader (JSON, `**`, `dict(...)`), but read-only
    and hashable, so the Cell holding it is a key (torch.utils.benchmark's TaskSpec)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(_frozen(dict(self)))

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a cell's params are read-only: build a new Cell with replace()")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (SLURM, forked workers) as a dict
        return (FrozenParams, (dict(self),))


@dataclass(frozen=True)
class CellKey:
    """A cell's identity: (workload, variant, framework, device), the same in every round.

    Rounds, the recorder, resume, SLURM file names, diff and the report group by it.
    """

    workload: str
    variant: str
    framework: str
    device: str

    def __str__(self) -> str:
        return f"{self.workload}/{self.variant} {self.framework} on {self.device}"

    @property
    def slug(self) -> str:
        """'fp32-torch-cuda0': unique within a run (one workload), safe as a file name."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "", f"{self.variant}-{self.framework}-{self.device}")


# Keys a stored cell may hold that Cell no longer has (Cell.from_dict drops them).
LEGACY_CELL_FIELDS = ("quick",)


@dataclass(frozen=True)
class Cell:
    """One (workload, variant, framework, device) combination: one worker process.

    Frozen and hashable (its params are FrozenParams); `key` is its identity across rounds.
    """

    workload: str
    variant: str
    framework: str
    device: str
    params: dict[str, Any] = field(default_factory=dict)
    # Rounds (harness.run.rounds): the cell runs as `rounds` worker processes; this one is
    # round `round` (0-based) and measures its share of the cell's work.
    rounds: int = 1
    round: int = 0
    # A later round's calls per sample from the cell's first round, one per case by position
    # (None: calibrate anew): the worker starts its calibration there instead of at 1 call.
    calibration: tuple[int | None, ...] = ()
    # ...and the seconds per call each case settled at there (its samples' median; None:
    # unknown): the worker's warm-up ends once its calls are back at that level.
    levels: tuple[float | None, ...] = ()
    # A later round's FLOP records from the cell's first round, one per case by position
    # (flops_per_call, flops_counted_by, flops_coverage, flops_second_opinion; None: count
    # anew): a case's FLOPs per call are deterministic, so the worker takes them instead of
    # running the counter again.
    flops: tuple[FrozenParams | None, ...] = ()
    # A later round's note that a case of an earlier round of this cell was contended in every
    # attempt ('' if none): the worker times each case once, as it does after such a case of
    # its own (harness.run.caserun run_case), instead of pausing and retrying a load that
    # lasts (a VM whose hypervisor steals a core throughout).
    busy: str = ""
    # The positions (in the workload's cases) this worker runs, where a resumed round has some
    # of them already (harness.run.resume): () runs every case.
    positions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.positions, tuple):  # a list, read back from the cell's JSON
            object.__setattr__(self, "positions", tuple(self.positions))
        if not isinstance(self.params, FrozenParams):
            object.__setattr__(self, "params", FrozenParams(self.params))
        if not isinstance(self.calibration, tuple):  # a list, read back from the cell's JSON
            object.__setattr__(self, "calibration", tuple(self.calibration))
        if not isinstance(self.levels, tuple):
            object.__setattr__(self, "levels", tuple(self.levels))
        if not all(isinstance(record, FrozenParams | None) for record in self.flops) \
                or not isinstance(self.flops, tuple):  # dicts in a list, from the cell's JSON
            object.__setattr__(self, "flops", tuple(
                None if record is None else FrozenParams(record) for record in self.flops))

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> Cell:
        """Back from as_dict. A stored cell's `quick` (runs from before --quick lived on the
        settings alone: harness.core.settings) is dropped: its run.json keeps it."""
        return cls(**{name: value for name, value in document.items()
                      if name not in LEGACY_CELL_FIELDS})

    @property
    def key(self) -> CellKey:
        return CellKey(self.workload, self.variant, self.framework, self.device)

    @property
    def label(self) -> str:
        return str(self.key)

    def as_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "workload": self.workload,
            "variant": self.variant,
            "framework": self.framework,
            "device": self.device,
            "params": self.params,
        }
        if self.rounds > 1:  # a one-round cell keeps the layout it always had
            document.update(rounds=self.rounds, round=self.round)
        if self.calibration:  # only a later round's worker gets one
            document["calibration"] = list(self.calibration)
        if self.levels:
            document["levels"] = list(self.levels)
        if self.flops:  # only a later round's worker gets them
            document["flops"] = [None if record is None else dict(record)
                                 for record in self.flops]
        if self.busy:
            document["busy"] = self.busy
        if self.positions:  # only a resumed round's worker gets them
            document["positions"] = list(self.positions)
        return document


def expand_matrix(
    workload: str,
    variants: list[str],
    frameworks: list[str],
    devices: list[str],
    params: dict[str, Any],
) -> list[Cell]:
    """Every (variant, framework, device) cell of a run, in a stable order."""
    return [
        Cell(workload, variant, framework, device, params)
        for variant, framework, device in itertools.product(variants, frameworks, devices)
    ]

"""Planning a run: every input of `harness compare` resolved and checked before anything runs.

Why apart from the session (harness.run.session): a plan writes nothing and starts no worker,
so bad input (an unknown framework, sizes below 1, an --out that cannot be written) is one
`BadInput` line before the run folder exists. `plan` gives the `RunPlan` a session runs, with
the run's settings (harness.core.settings: --quick and the HARNESS_* variables, read once).
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from harness.backend import canonical_device, parse_cuda_index
from harness.core import registry
from harness.core.settings import Settings
from harness.measure import envinfo
from harness.run import rounds as rounds_module
from harness.run.context import RunContext
from harness.run.forkserver import ForkServers
from harness.run.runner import ChildRunner
from harness.spec import BadInput, Cell, ParamValue, WorkloadSpec, expand_matrix
from harness.variants import compose, is_declared, variant_parts


def split_names(values: Sequence[str] | str | None) -> list[str]:
    """`a`, `[a, "b,c"]` -> [a, b, c]."""
    if isinstance(values, str):
        values = [values]
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def given_names(option: str, values: Sequence[str] | str | None) -> list[str] | None:
    """The names an option was given; None when it was not given at all.

    Why refuse an empty value: `--device ""` (an unset shell variable, a stray `=`) would
    otherwise be an empty matrix or, worse, silently the default.
    """
    if values is None:
        return None
    names = split_names(values)
    if not names:
        raise BadInput(f"{option} is empty: give at least one name (see `harness list`)")
    return names


def resolve_devices(values: Sequence[str] | str | None) -> list[str]:
    """Canonical device names; default cpu plus every GPU nvidia-smi lists."""
    names = given_names("--device", values)
    if names is None:
        return ["cpu"] + [f"cuda:{index}" for index in range(len(envinfo.visible_gpus()))]
    devices = []
    for name in names:
        device = canonical_device(name)
        if device != "cpu" and parse_cuda_index(device) is None:
            raise BadInput(f"unknown device {name!r}; valid: cpu, cuda, cuda:N")
        if device not in devices:
            devices.append(device)
    return devices


def resolve_frameworks(spec: WorkloadSpec, values: Sequence[str] | str | None) -> list[str]:
    names = given_names("--framework", values) or list(spec.frameworks)
    for name in names:
        registry.check_framework_name(name)
    return list(dict.fromkeys(names))


def resolve_variants(spec: WorkloadSpec, value: Sequence[str] | str | None) -> list[str]:
    names = given_names("--variant", value)
    if names is None:
        return list(spec.variants_by_default)
    if names == ["all"]:  # a numbered variant ("threads-N") needs its number: not in all
        return [name for name in spec.variants if is_declared(name, spec.variants)]
    resolved = []
    for name in names:
        parts = variant_parts(name)
        if len(parts) > 1 and spec.variant_conflict is None:
            raise BadInput(f"variant {name!r}: the variants of {spec.name} do not compose "
                           "with '+'")
        for part in parts:
            if not is_declared(part, spec.variants):
                raise BadInput(f"unknown variant {part!r} for {spec.name}; valid: "
                               f"{', '.join(spec.variants)}, all"
                               + (", or several joined with '+'" if spec.variant_conflict
                                  else ""))
        # The same set of parts is always the same cell, whatever order it was given in.
        resolved.append(compose(parts, spec.variants) if len(parts) > 1 else name)
    return list(dict.fromkeys(resolved))


def check_writable(out: Path) -> None:
    """Refuse an --out that cannot hold a run folder, before any cell runs.

    Why try rather than ask: os.access says yes to root on a read-only mount and knows nothing
    of pseudo-filesystems such as /proc; creating the folders and a probe file is the honest
    test. Whatever the probe created is removed again when it fails.
    """
    try:
        missing = _missing_folders(out)
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot be checked ({exc.strerror or exc})") from None
    created: list[Path] = []
    try:
        for folder in missing:
            folder.mkdir()
            created.append(folder)
        handle, probe = tempfile.mkstemp(dir=out, prefix=".harness-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        for folder in reversed(created):
            with suppress(OSError):
                folder.rmdir()
        raise BadInput(f"--out {out}: not writable ({exc.strerror or exc})") from None


def _missing_folders(out: Path) -> list[Path]:
    """The folders that must be created for `out` to exist, outermost first."""
    missing = []
    existing = out
    while not existing.exists():
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        raise BadInput(f"--out {out}: {existing} is not a folder")
    return missing[::-1]


@dataclass(frozen=True)
class RunPlan:
    """A validated run: the spec, its cells and where the run folder goes."""

    spec: WorkloadSpec
    cells: list[Cell]
    devices: list[str]
    params: dict[str, ParamValue]
    out: Path
    timeout_s: float
    # (run folder, params, the run's context) -> parameters every cell gets, run once the
    # folder exists (a user model's shared weights and CPU references are made there before
    # any cell, in a child forked from the run's warm process).
    prepare: Callable[[Path, dict[str, ParamValue], RunContext],
                      dict[str, ParamValue]] | None = None
    # Worker processes per cell, the matrix run round by round in a seeded random order.
    rounds: int = 1
    seed: int = 0
    # Probe the ceilings even where this machine remembers them (--probe-ceilings).
    probe_ceilings: bool = False
    # A user's model file (--model): its first run on a machine defers the ceilings probe.
    own_model: bool = False
    # --quick and the HARNESS_* variables, read once (harness.core.settings): recorded in
    # run.json and passed to every worker. The one place a plan keeps --quick.
    settings: Settings = field(default_factory=Settings)
    # Lines said before the run starts (a model file's misspelled hooks, each with the default
    # the run uses instead), on stderr with the run folder's line.
    notices: tuple[str, ...] = ()


def default_rounds(settings: Settings) -> int:
    """--rounds when not given: the settings' rounds if set (HARNESS_ROUNDS: CI, the test
    suite), else the default; one under --quick, a smoke test that says its verdicts did not
    measure run-to-run drift (5 worker starts per cell, each a framework import and, for a
    compiled variant, a compile, are what a smoke test exists to skip)."""
    if settings.rounds is not None:
        return settings.rounds
    return 1 if settings.quick else rounds_module.DEFAULT_ROUNDS


def plan(workload: str | None = None, *, frameworks: Sequence[str] | str | None = None,
         devices: Sequence[str] | str | None = None,
         variants: Sequence[str] | str | None = None, sizes: Sequence[int] | None = None,
         params: Mapping[str, ParamValue] | None = None, data: Path | str | None = None,
         quick: bool = False, out: Path | str = "results",
         timeout_s: float = 900.0, model: Path | str | None = None,
         rounds: int | None = None, seed: int | None = None,
         probe_ceilings: bool = False, settings: Settings | None = None,
         servers: ForkServers | None = None) -> RunPlan:
    """Validate every input before anything runs; BadInput (one line) otherwise.

    `model`: a user's model file (workloads/usermodel/) instead of a registered workload.
    `rounds`: worker processes per cell (default: default_rounds(quick)), run round by round with
    the cells in a new random order each round, from `seed` (default: drawn, and recorded).
    `probe_ceilings`: measure the ceilings again although this machine remembers them.
    `settings`: --quick and the HARNESS_* variables (harness.core.settings; default: read from
    the environment now, a bad value being BadInput); `quick` true makes them quick. The plan
    is made under them (the registry's plugins, a model file's inspection child).
    `servers`: warm processes the caller shares with the run (the inspection child is forked
    from them); None: that child starts a new interpreter.
    """
    chosen = (Settings.from_environment(quick=quick) if settings is None
              else settings.with_quick(quick or settings.quick))
    registry.use_plugins(chosen.plugins)
    return _plan(workload, frameworks, devices, variants, sizes, params, data, out,
                 timeout_s, model, rounds, seed, probe_ceilings, RunContext(chosen, servers))


def _plan(workload: str | None, frameworks: Sequence[str] | str | None,
          devices: Sequence[str] | str | None, variants: Sequence[str] | str | None,
          sizes: Sequence[int] | None, params: Mapping[str, ParamValue] | None,
          data: Path | str | None, out: Path | str, timeout_s: float,
          model: Path | str | None, rounds: int | None, seed: int | None,
          probe_ceilings: bool, context: RunContext) -> RunPlan:
    """plan's work, under its context's settings."""
    settings = context.settings
    quick = settings.quick
    chosen_rounds = default_rounds(settings) if rounds is None else int(rounds)
    if chosen_rounds < 1:
        raise BadInput(f"--rounds {rounds}: must be >= 1")
    chosen_seed = random.SystemRandom().randrange(2**31) if seed is None else int(seed)
    prepare = None
    notices: tuple[str, ...] = ()
    if not timeout_s > 0:
        raise BadInput(f"--timeout {timeout_s:g}: must be > 0 seconds")
    if model is not None:
        if workload is not None:
            raise BadInput("give a workload or a model file (--model), not both")
        usermodel_plan = registry.model_plugin("plan")
        spec, model_info = usermodel_plan.model_spec(model, ChildRunner(context), timeout_s)
    else:
        if workload is not None and not workload.strip():
            raise BadInput("--workload is empty: name one of the workloads `harness list` shows")
        spec = registry.load_workload("matmul" if workload is None else workload)
    chosen_frameworks = resolve_frameworks(spec, frameworks)
    chosen_devices = resolve_devices(devices)
    chosen_variants = resolve_variants(spec, variants)
    if sizes is not None and (not list(sizes) or any(int(size) < 1 for size in sizes)):
        raise BadInput(f"sizes {list(sizes)!r}: sizes must be >= 1 (example: 64,256,1024)")
    overrides = {name: str(value) for name, value in (params or {}).items()}
    values = spec.resolve_params(overrides, None if sizes is None else
                                 [int(size) for size in sizes], quick)
    if data is not None:
        if spec.validate_data is None:
            raise BadInput(f"--data applies to the MNIST workloads, not {spec.name}")
        spec.validate_data(Path(data))
        values["data"] = str(Path(data).resolve())
    if model is not None:
        usermodel_plan.check_frameworks(model_info, chosen_frameworks)
        usermodel_plan.check_what(model_info, values["what"])
        notices = tuple(usermodel_plan.hook_notices(model_info))

        def prepare(run_dir: Path, params: dict[str, ParamValue],
                    run_context: RunContext) -> dict[str, ParamValue]:
            return usermodel_plan.prepare_run(run_dir, spec, params, timeout_s,
                                              ChildRunner(run_context))
    out = Path(out)
    check_writable(out)
    cells = expand_matrix(spec.name, chosen_variants, chosen_frameworks, chosen_devices, values)
    return RunPlan(spec, cells, chosen_devices, values, out, timeout_s, prepare,
                   chosen_rounds, chosen_seed, probe_ceilings, model is not None, settings,
                   notices)


"""The parent's side of a user model: inspect the file in a child, prepare the run folder.

Never imports the file or its framework: both steps are short child processes, as the
framework probe and the ceilings are. The engine hands in how to run them (Children: the run's
settings and warm processes, harness.run.runner.ChildRunner), so the plugin reaches the engine
only through what it is given.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from harness.core import registry
from harness.core.settings import Settings, cache_folder
from harness.data.serial import JsonObject
from harness.spec import BadInput, CaseParams, Cell, ParamValue, WorkloadSpec, int_param, str_param
from harness.workloads.usermodel import preparedcache
from harness.workloads.usermodel.libraries import model_libraries
from harness.workloads.usermodel.precheck import SourceProblem, precheck
from harness.workloads.usermodel.spec import (
    FAMILIES,
    NAME_PREFIX,
    PARTIAL_KEY,
    PREPARED_FILE,
    PREPARED_PARAM,
    autograd_functional_calls,
    spec_for_name,
)


class Children(Protocol):
    """What the plan needs of the run: its settings (the cache folder keeps prepared copies)
    and a short child run in a cell's environment, forked from the run's warm process where it
    holds one for that cell (harness.run.runner.ChildRunner is the engine's)."""

    @property
    def settings(self) -> Settings: ...

    def run_json_child(self, module: str, args: list[str], cell: Cell, timeout_s: float,
                       user_file: Path | None = None) -> tuple[JsonObject | None, str]: ...

    def share_imports(self, imported: Iterable[str], modules: Sequence[str]) -> None:
        """MODULES (of the file's IMPORTED names) imported once in the run's warm processes,
        where it holds any."""


# The inspection's bound: --timeout, but never more than this (a cell's --timeout defaults to
# 900 s; the inspection does far less than a cell: one forward pass at batch 2).
INSPECT_TIMEOUT_S = 300.0
# Keras' backends in the order the inspector and the preparer prefer (JAX imports fastest).
KERAS_ORDER = FAMILIES["keras"]


def installed(frameworks: tuple[str, ...]) -> list[str]:
    return [name for name in frameworks if registry.framework_installed(name)[0]]


def child_framework(family: str | None) -> str:
    """The framework whose environment a child runs in (KERAS_BACKEND for Keras files)."""
    if family in (None, "keras"):
        found = installed(KERAS_ORDER)
        if found:
            return found[0]
        return "torch" if family is None else KERAS_ORDER[0]
    return FAMILIES[family][0]


# The top-level packages whose import says which family a file is likely of (a guess from its
# text: it picks only the environment the inspector runs in, never the answer).
IMPORT_FAMILIES = {"torch": "torch", "torchvision": "torch", "keras": "keras",
                   "tensorflow": "keras", "jax": "jax", "flax": "jax", "optax": "jax"}


def guess_family(path: Path) -> str | None:
    """The one family the file's imports name, or None (none, several, or unreadable).

    Why: the inspector's child runs in one framework's environment and forks from that
    framework's warm process, which the run's workers then share. Without a guess a torch file
    was inspected in Keras-on-JAX's environment, importing JAX and Keras for nothing (1.5 s on
    the 2-core VM, a warm process of its own). The inspector still decides the family: a wrong
    guess costs time, not a wrong answer, since every family's file loads in any of them.
    """
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    names = {alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    families = {IMPORT_FAMILIES[name] for name in names if name in IMPORT_FAMILIES}
    return families.pop() if len(families) == 1 else None


def check_file(path: Path) -> Path:
    if not path.exists():
        raise BadInput(f"--model {path}: no such file")
    if not path.is_file() or path.suffix != ".py":
        raise BadInput(f"--model {path}: not a .py file")
    try:  # what the text shows is told here, before a child imports a framework for it
        precheck(path)
    except SourceProblem as exc:
        raise BadInput(f"--model {path}: {exc}") from None
    return path.resolve()


def inspect_model(model: Path | str, children: Children,
                  timeout_s: float = INSPECT_TIMEOUT_S) -> dict[str, Any]:
    """What the file is (family, builder, output...), or BadInput naming the file and why.
    CHILDREN: the run's, whose warm process the child shares (forkserver; under --quick, in a
    --quick cell's environment)."""
    path = check_file(Path(model))
    cell = Cell("inspect", "-", child_framework(guess_family(path)), "cpu")
    info, why_not = children.run_json_child("harness.workloads.usermodel.inspect", [str(path)],
                                            cell, timeout_s, path)
    if info is None:
        raise BadInput(f"--model {model}: inspecting it failed ({why_not or 'no report'})")
    if info.get("error"):
        raise BadInput(f"--model {model}: {info['error']}")
    family = str(info["family"])  # the inspector's JSON: a family name
    frameworks = FAMILIES[family]
    if family == "keras":  # every Keras backend that is installed
        frameworks = tuple(installed(frameworks)) or frameworks
    info["frameworks"] = list(frameworks)
    if family == "torch":  # which Jacobian fixes apply (spec.file_capability)
        info["autograd_functional"] = list(autograd_functional_calls(
            path.read_text(errors="replace")))
    against = "your targets()" if info["has_targets"] else "fixed random targets"
    times = {"step": "your step(net, *inputs)",
             "train": f"one training step against {against} "
                      f"({info.get('training', '')})"}[str(info["default_what"])]
    info["summary"] = (f"your {family} model {path.name} ({info['parameters']:,} parameters); "
                       f"one call: {times}")
    return info


def model_spec(model: Path | str, children: Children,
               timeout_s: float = INSPECT_TIMEOUT_S) -> tuple[WorkloadSpec, dict[str, Any]]:
    """The spec a run of this file plans with, and the inspector's report (CHILDREN: the
    run's). TIMEOUT_S: the run's --timeout, which bounds the inspection up to
    INSPECT_TIMEOUT_S."""
    # Before the inspection, the first child of the warm processes: the file's libraries
    # are imported once there and every later child forks with them.
    children.share_imports(*model_libraries(Path(model)))
    info = inspect_model(model, children, min(timeout_s, INSPECT_TIMEOUT_S))
    return spec_for_name(NAME_PREFIX + Path(info["path"]).stem, info), info


def check_frameworks(info: dict[str, Any], chosen: list[str]) -> None:
    """A model runs in its own family's frameworks only (a Keras file on any Keras backend)."""
    family_members = FAMILIES[info["family"]]
    wrong = [name for name in chosen if name not in family_members]
    if wrong:
        raise BadInput(f"--model {info['path']}: a {info['family']} model runs on "
                       f"{', '.join(family_members)}, not {', '.join(wrong)}")


def check_what(info: dict[str, Any], what: str) -> None:
    if what == "step" and not info["has_step"]:
        raise BadInput(f"--model {info['path']}: --param what=step needs a step(net, *inputs) "
                       "in the file")
    if what == "train" and info["output_shape"] is None:
        raise BadInput(f"--model {info['path']}: training needs a model whose output is one "
                       "array; give step(net, *inputs) or use --param what=inference")


def prepare_run(run_dir: Path, spec: WorkloadSpec, params: CaseParams,
                timeout_s: float, children: Children) -> dict[str, ParamValue]:
    """Weights, inputs and CPU references into RUN/model/; the parameters cells then carry.
    CHILDREN: the run's (its cache folder keeps prepared copies; its warm process the child).

    A failure is not raised: prepared.json says why and every cell becomes an error row with
    that reason, so the run folder still tells the story. A size whose preparation ran past
    TIMEOUT_S (the run's --timeout) fails alone: the sizes after it are prepared by a new
    child (_prepare_sizes).
    """
    folder = run_dir / "model"
    swept = params[spec.sweep]
    sizes = list(swept) if isinstance(swept, list) else [int_param(params, spec.sweep)]
    family = next(family for family, members in FAMILIES.items()
                  if spec.frameworks[0] in members)
    framework = child_framework(family)
    args = [str_param(params, "model"), str(folder), framework, str_param(params, "what"),
            str(params["seed"]),
            ",".join(str(size) for size in sizes)]
    model, root = Path(args[0]), cache_folder(children.settings) / "prepared"
    key = preparedcache.cache_key(model, framework, args[2:])
    reused = preparedcache.restore(root, key, folder)
    if reused is not None:  # the same file, sizes and seed were prepared on this machine
        _note_reuse(folder, reused)
        return {PREPARED_PARAM: str(folder)}
    if _prepare_sizes(args[:-1], sizes, folder, timeout_s, children):
        preparedcache.store(root, key, folder, model)
    return {PREPARED_PARAM: str(folder)}


def _prepare_sizes(args: list[str], sizes: list[int], folder: Path, timeout_s: float,
                   children: Children) -> bool:
    """Run the preparer (ARGS, then the sizes) until every size has its entry; whether it
    finished in one child with no size timed out (only then is it worth keeping).

    A child killed at its time limit leaves prepared.json with the sizes it finished and the
    one it was at (prepare.PARTIAL_KEY): that size gets the timeout as its error, and a new
    child goes on with the sizes left, from the same weights. Killed before its first size
    (the file's import, model(), the weights), every size fails with the same reason."""
    from harness.data.store import write_json_atomic

    left, model = sorted(sizes), Path(args[0])
    while True:
        summary, why_not = children.run_json_child(
            "harness.workloads.usermodel.prepare", [*args, ",".join(map(str, left))],
            Cell("prepare", "-", args[2], "cpu"), timeout_s, model)
        if summary is not None:
            return left == sorted(sizes)
        partial = _started_document(folder)
        if partial is None:
            _write_failure(folder, sizes,
                           f"preparing the weights and references failed: {why_not}")
            return False
        batch = int(partial[PARTIAL_KEY])
        partial["sizes"][str(batch)] = {"error": f"preparing batch {batch}: {why_not}"}
        left = [size for size in left if str(size) not in partial["sizes"]]
        if not left:
            del partial[PARTIAL_KEY]
        write_json_atomic(folder / PREPARED_FILE, partial)
        if not left:
            return False


def _started_document(folder: Path) -> dict[str, Any] | None:
    """prepared.json as a killed preparer left it at one of its sizes, or None."""
    import json

    try:
        document = json.loads((folder / PREPARED_FILE).read_text())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) and document.get(PARTIAL_KEY) else None


def _note_reuse(folder: Path, made: dict[str, str]) -> None:
    """Say in prepared.json where its weights and references came from (a new file, written
    atomically: the restored one is a hard link to the machine's kept copy)."""
    import json

    from harness.data.store import write_json_atomic
    from harness.workloads.usermodel.spec import PREPARED_FILE

    prepared = json.loads((folder / PREPARED_FILE).read_text())
    prepared["reused"] = (f"made by an earlier run at {made.get('prepared_at', '?')} from the "
                          "same file, sizes, seed and library versions on this machine")
    write_json_atomic(folder / PREPARED_FILE, prepared)


def _write_failure(folder: Path, sizes: list[int], reason: str) -> None:
    from harness.data.store import write_json_atomic
    from harness.workloads.usermodel.spec import PREPARED_FILE

    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / PREPARED_FILE, {
        "error": reason, "weight_names": [], "nondeterministic": "",
        "sizes": {str(size): {"error": reason} for size in sizes}})


# What a run uses where the file lacks a hook, by hook and then by the inspector's family ("":
# any); a training hook that a step() makes moot says so instead (hook_notices).
TRAINING_HOOKS = ("targets", "loss", "optimizer")
HOOK_DEFAULTS = {
    "targets": {"": "the default fixed random targets"},
    "loss": {"": "the default mean squared error", "keras": "your model's compiled loss"},
    "optimizer": {"torch": "the default Adam", "jax": "the default optax.adam(1e-3)",
                  "keras": "your model's compiled optimizer"},
    "step": {"": "the default: one training step per call"},
    "model": {"": "your init() and apply()"},
    "init": {"": "your model()"},
    "apply": {"": "your model()"},
}


def hook_notices(info: dict[str, Any]) -> list[str]:
    """One line per function of the file named close to a hook the file lacks, said before
    the run: 'optimiser() is not a hook: did you mean optimizer()? using the default Adam'.
    Why: `harness list --model` named them, but a run trained with the default in silence."""
    family = str(info.get("family") or "")
    lines = []
    for name, hook in info.get("misspelled") or []:
        if hook in TRAINING_HOOKS and info.get("has_step"):
            instead = "none: your step() is what is timed"
        else:
            defaults = HOOK_DEFAULTS.get(hook, {})
            instead = defaults.get(family) or defaults.get("") or "the harness's default"
        lines.append(f"{name}() is not a hook: did you mean {hook}()? using {instead}")
    return lines

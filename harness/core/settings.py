"""The run's settings: `--quick` and every HARNESS_* variable, read once and passed on.

Why one object: each variable used to be read by the module that used it, in whichever process
it ran, so a worker learnt its settings from the environment it happened to inherit. Now the
parent (the CLI, harness.api, harness.run.plan, a resumed RunSession) reads them once per run
with `Settings.from_environment` (the ONLY place a HARNESS_* variable is read; a bad value is
one `BadInput` line there, exit 2 from the CLI), records them in run.json (`--resume` uses the
recorded ones) and hands them down: on RunOptions to the runner and the executors, on the
worker's argument list (`python -m harness.run.worker CELL.json RESULT.json SETTINGS`), and
to the helper children of run_json_child through their entry point
(`python -m harness.core.child SETTINGS MODULE ARGS...`). The runner removes the variables
from every child's environment, so nothing below the parent can read them by accident.

Nothing holds them for a process: every reader is handed them as an argument (the runner's
RunOptions, the worker's CellContext, CaseWatch.open for the NVML and RAPL openers, the MNIST
loader through make_inputs, the caches' folders), and the registry is handed their plugins
(registry.use_plugins). A caller that has none (a library call, a test) reads its environment
with `Settings.from_environment`, where it starts.

The variables (name, type, default, what it does):
- HARNESS_ATTEMPTS (int >= 1, default 3): how many times a contended case is timed; the test
  suite sets 1 (its two pytest processes contend by design).
- HARNESS_ROUNDS (int >= 1, default unset): the default of --rounds (5, 1 with --quick).
- HARNESS_FORK_WORKERS (0/1, default 1): 0 starts a new interpreter per worker instead of
  forking it from a warm process per framework (harness.run.forkserver).
- HARNESS_CACHE_DIR (folder, default $XDG_CACHE_HOME/harness or ~/.cache/harness): the
  per-machine cache (remembered ceilings, the workers' bytecode).
- HARNESS_NVML_MODULE (module name, default pynvml): the NVML binding the GPU-state and
  energy records read (the test suite's fake: tests.fakes.nvml).
- HARNESS_POWERCAP_ROOT (folder, default /sys/class/powercap): where RAPL's counters are.
- HARNESS_PLUGINS (comma-separated module names or .py paths, default none): plugin modules
  with WORKLOADS / FRAMEWORKS (harness.core.registry).
- HARNESS_PASS_LIMIT_S (seconds >= 0, default 10): the most a FLOP count or memory pass after
  the samples may take by its estimate (longer: left out, saying why; advise keeps its 2 s).
  The test suite raises it where a test asserts a count, so a slow machine cannot drop it.
- HARNESS_MNIST_DOWNLOAD (0/1, default 0): 1 lets the MNIST loader download the full set
  through keras when no file is found (offline it hangs ~4 s and fails).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeAlias

from harness.spec import BadInput

DEFAULT_ATTEMPTS = 3
DEFAULT_PASS_LIMIT_S = 10.0
DEFAULT_NVML_MODULE = "pynvml"
DEFAULT_POWERCAP_ROOT = "/sys/class/powercap"
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# One value of Settings.to_dict (plain JSON: the plugins tuple becomes a list).
SettingValue: TypeAlias = bool | int | float | str | list[str] | None


def _positive_int(name: str, text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise BadInput(f"{name}={text!r}: must be a whole number >= 1")
    return int(text)


def _seconds(name: str, text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise BadInput(f"{name}={text!r}: must be a number of seconds >= 0")
    return seconds


def _switch(name: str, text: str) -> bool:
    if text.lower() in TRUE_WORDS:
        return True
    if text.lower() in FALSE_WORDS:
        return False
    raise BadInput(f"{name}={text!r}: must be 1 or 0")


def _names(name: str, text: str) -> tuple[str, ...]:  # (name, text): the parsers' signature
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _text(name: str, text: str) -> str:  # (name, text): the parsers' signature
    return text


def _variable(env: str, parse: Callable[[str, str], Any], default: Any) -> Any:
    """A field read from the environment variable ENV (unset or blank: the default)."""
    return field(default=default, metadata={"env": env, "parse": parse})


@dataclass(frozen=True)
class Settings:
    """Everything a run decides once: --quick and the HARNESS_* variables (module docstring)."""

    quick: bool = False
    # Decided by the command, not the environment, like quick: `harness advise` asks only how
    # fast each fix runs, so its workers read no idle power and run no separate energy pass.
    energy: bool = True
    # The most seconds a FLOP count or memory pass after the samples may take (each is left
    # out, saying why, where its estimate is longer). advise gives 2 s whatever the variable
    # says: its budget is for the fixes, and seed 000's Jacobian spent 20 of its 180 s on the
    # CPU's two passes at batch 25.
    pass_limit_s: float = _variable("HARNESS_PASS_LIMIT_S", _seconds, DEFAULT_PASS_LIMIT_S)
    attempts: int = _variable("HARNESS_ATTEMPTS", _positive_int, DEFAULT_ATTEMPTS)
    rounds: int | None = _variable("HARNESS_ROUNDS", _positive_int, None)
    fork_workers: bool = _variable("HARNESS_FORK_WORKERS", _switch, True)
    cache_dir: str | None = _variable("HARNESS_CACHE_DIR", _text, None)
    nvml_module: str = _variable("HARNESS_NVML_MODULE", _text, DEFAULT_NVML_MODULE)
    powercap_root: str = _variable("HARNESS_POWERCAP_ROOT", _text, DEFAULT_POWERCAP_ROOT)
    plugins: tuple[str, ...] = _variable("HARNESS_PLUGINS", _names, ())
    mnist_download: bool = _variable("HARNESS_MNIST_DOWNLOAD", _switch, False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ, *,
                         quick: bool = False) -> Settings:
        """The settings ENVIRON asks for; BadInput (one line) for a value that cannot be one."""
        found: dict[str, Any] = {}
        for item in fields(cls):
            name = item.metadata.get("env")
            text = environ.get(name, "").strip() if name else ""
            if text:
                found[item.name] = item.metadata["parse"](name, text)
        return cls(quick=quick, **found)

    def to_dict(self) -> dict[str, SettingValue]:
        """Plain JSON: run.json's `settings`, a worker's argument."""
        document = asdict(self)
        document["plugins"] = list(self.plugins)
        return document

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> Settings:
        """Back from to_dict; a key it lacks keeps its default, an unknown key is ignored (a
        later harness's setting), a value of the wrong type is BadInput."""
        known = {item.name: item for item in fields(cls)}
        values: dict[str, Any] = {}
        for name, value in document.items():
            if name in known and value is not None:
                values[name] = _typed(name, value, known[name].default)
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Settings:
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise BadInput(f"settings: not JSON ({exc})") from None
        if not isinstance(document, dict):
            raise BadInput("settings: not a JSON object")
        return cls.from_dict(document)

    def with_quick(self, quick: bool) -> Settings:
        return self if self.quick == quick else replace(self, quick=quick)


def _typed(name: str, value: Any, default: Any) -> Any:
    """A stored value checked against its field's kind (the default's type, or int/str)."""
    if name in ("quick", "energy", "fork_workers", "mnist_download"):
        ok = isinstance(value, bool)
    elif name in ("attempts", "rounds"):
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    elif name == "pass_limit_s":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    elif name == "plugins":
        ok = isinstance(value, (list, tuple)) and all(isinstance(part, str) for part in value)
        value = tuple(value) if ok else value
    else:
        ok = isinstance(value, str)
    if not ok:
        raise BadInput(f"settings: {name}={value!r} is not a valid value (default {default!r})")
    return value


def variable_names() -> tuple[str, ...]:
    """Every environment variable the settings read (the runner keeps them from children)."""
    return tuple(item.metadata["env"] for item in fields(Settings) if "env" in item.metadata)


def environment_plugins(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The plugin modules HARNESS_PLUGINS names, no other value read or checked: the registry
    lists plugins before a command has read, and judged, the rest (the CLI's --help). A child
    finds none here (the runner keeps the variables from it): its settings name them."""
    return _names("HARNESS_PLUGINS", environ.get("HARNESS_PLUGINS", ""))


def cache_folder(settings: Settings) -> Path:
    """The harness's per-machine cache: the settings' cache_dir, else XDG's, else ~/.cache."""
    return Path(settings.cache_dir or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "harness"))


# --- helper children: `python -m harness.core.child SETTINGS MODULE ARGS...` ------------------
# The entry point lives in harness.core.child: it merges the registry's plugins, and this module
# must not import the registry (which imports it).

CHILD_MODULE = "harness.core.child"


def child_arguments(settings: Settings, module: str, args: list[str]) -> list[str]:
    """The argument list that runs `python -m MODULE *ARGS` under SETTINGS (run_json_child)."""
    return [settings.to_json(), module, *args]

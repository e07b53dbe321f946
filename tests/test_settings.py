"""The run's settings (harness.core.settings): read once, validated there, passed to workers.

Also a helper child for the child-arguments test: `python -m tests.test_settings OUT.json`
writes the plugin modules that process's registry merged.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core import settings as settings_module
from harness.core.settings import Settings
from harness.spec import BadInput, Cell
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("harness", "backends", "workloads")
ALLOWED = PROJECT_ROOT / "harness" / "core" / "settings.py"
# The suite's own settings (conftest.py), with the fake NVML for the fake GPU backend.
FAKE_NVML = "tests.fakes.nvml"
THROTTLED = Cell("fault", "throttled-always", "fakegpu", "cuda:0", {"size": [1], "pid_file": ""})


# --- no module but settings.py reads a HARNESS_* variable -------------------------------------

def harness_constants(tree: ast.Module) -> set[str]:
    """Module-level names bound to a "HARNESS_..." string (NVML_MODULE_ENV = "HARNESS_...")."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and \
                str(node.value.value).startswith("HARNESS_"):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return names


def names_harness_variable(node: ast.AST, constants: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith("HARNESS_")
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Attribute):  # gpustate.NVML_MODULE_ENV
        return node.attr in constants
    return False


def is_environ(node: ast.AST) -> bool:
    """os.environ, environ, self.environ, env (a mapping of variables)."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in ("environ", "env", "environment")


def environment_reads(source: str, constants: set[str] = frozenset()) -> list[int]:
    """Lines where SOURCE reads a HARNESS_* variable: os.environ.get / os.getenv / environ[...]
    / `in environ`, with a literal or a constant bound to one."""
    tree = ast.parse(source)
    known = set(constants) | harness_constants(tree)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            function = node.func
            getter = isinstance(function, ast.Attribute) and (
                (function.attr in ("get", "pop", "setdefault") and is_environ(function.value))
                or function.attr == "getenv")
            getter = getter or (isinstance(function, ast.Name) and function.id == "getenv")
            if getter and names_harness_variable(node.args[0], known):
                lines.append(node.lineno)
        subscript = isinstance(node, ast.Subscript) and is_environ(node.value) and \
            names_harness_variable(node.slice, known)
        membership = isinstance(node, ast.Compare) and names_harness_variable(node.left, known) \
            and any(is_environ(item) for item in node.comparators)
        if subscript or membership:
            lines.append(node.lineno)
    return lines


def scanned_modules() -> list[Path]:
    """Every module of harness/, backends/, workloads/ (harness/backends and harness/workloads
    are links to the other two: read once)."""
    found = []
    for top in SCANNED:
        for path in sorted((PROJECT_ROOT / top).rglob("*.py")):
            if not any(part.is_symlink() for part in [path, *path.parents]
                       if PROJECT_ROOT in part.parents):
                found.append(path)
    return found


def all_constants(paths: list[Path]) -> set[str]:
    return set().union(*(harness_constants(ast.parse(path.read_text())) for path in paths))


def test_only_the_settings_module_reads_a_harness_variable() -> None:
    paths = scanned_modules()
    assert len(paths) > 100 and ALLOWED in paths
    constants = all_constants(paths)
    assert {"NVML_MODULE_ENV", "POWERCAP_ENV", "CACHE_ENV", "DOWNLOAD_ENV"} <= constants
    offenders = {str(path.relative_to(PROJECT_ROOT)): lines for path in paths
                 if path != ALLOWED and (lines := environment_reads(path.read_text(), constants))}
    assert offenders == {}
    assert environment_reads(ALLOWED.read_text(), constants)  # where they are read


@pytest.mark.parametrize("planted", [
    'import os\nrounds = os.environ.get("HARNESS_ROUNDS", "")\n',
    'import os\nFLAG = "HARNESS_FORK_WORKERS"\nfork = os.getenv(FLAG) != "0"\n',
    'from os import environ\nplugins = environ["HARNESS_PLUGINS"]\n',
    'import os\nquick = "HARNESS_QUICK" in os.environ\n',
    'import os\nfrom harness.measure import gpustate\n'
    'name = os.environ.get(gpustate.NVML_MODULE_ENV)\n',
])
def test_the_scan_finds_a_planted_module_that_reads_one(planted: str, tmp_path: Path) -> None:
    module = tmp_path / "planted.py"
    module.write_text(planted)
    assert environment_reads(module.read_text(), all_constants(scanned_modules()))
    assert not environment_reads('import os\nhome = os.environ.get("KERAS_HOME")\n')


# --- reading and checking -----------------------------------------------------------------------

def test_defaults_when_nothing_is_set() -> None:
    found = Settings.from_environment({})
    assert found == Settings()
    assert (found.quick, found.attempts, found.rounds, found.fork_workers) == (False, 3, None, True)
    assert (found.cache_dir, found.nvml_module, found.powercap_root) == (
        None, "pynvml", "/sys/class/powercap")
    assert (found.plugins, found.mnist_download) == ((), False)


def test_every_variable_is_parsed() -> None:
    environ = {"HARNESS_ATTEMPTS": "2", "HARNESS_ROUNDS": " 4 ", "HARNESS_FORK_WORKERS": "0",
               "HARNESS_CACHE_DIR": "/tmp/cache", "HARNESS_NVML_MODULE": FAKE_NVML,
               "HARNESS_POWERCAP_ROOT": "/tmp/powercap",
               "HARNESS_PLUGINS": "tests.fakes.plugin, my_plugin.py,",
               "HARNESS_MNIST_DOWNLOAD": "1", "HARNESS_PASS_LIMIT_S": "600",
               "HARNESS_KERAS_STEP": "train_on_batch"}  # a model file's name, not a setting
    found = Settings.from_environment(environ, quick=True)
    assert found == Settings(quick=True, attempts=2, rounds=4, fork_workers=False,
                             cache_dir="/tmp/cache", nvml_module=FAKE_NVML,
                             powercap_root="/tmp/powercap",
                             plugins=("tests.fakes.plugin", "my_plugin.py"), mnist_download=True,
                             pass_limit_s=600.0)
    assert set(settings_module.variable_names()) == set(environ) - {"HARNESS_KERAS_STEP"}
    assert Settings.from_environment({"HARNESS_FORK_WORKERS": "1", "HARNESS_ROUNDS": ""}) == \
        Settings()  # blank is unset


@pytest.mark.parametrize(("name", "value"), [
    ("HARNESS_ATTEMPTS", "x"), ("HARNESS_ATTEMPTS", "0"), ("HARNESS_ROUNDS", "0"),
    ("HARNESS_ROUNDS", "-2"), ("HARNESS_ROUNDS", "2.5"), ("HARNESS_FORK_WORKERS", "maybe"),
    ("HARNESS_MNIST_DOWNLOAD", "2"), ("HARNESS_PASS_LIMIT_S", "-1"),
    ("HARNESS_PASS_LIMIT_S", "soon"), ("HARNESS_PASS_LIMIT_S", "inf"),
])
def test_a_bad_value_is_one_line_of_bad_input(name: str, value: str) -> None:
    with pytest.raises(BadInput) as raised:
        Settings.from_environment({name: value})
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{name}={value!r}")


def test_settings_travel_as_plain_json_and_back() -> None:
    chosen = Settings(quick=True, attempts=2, rounds=3, fork_workers=False, cache_dir="/c",
                      plugins=("a", "b.py"), mnist_download=True)
    document = json.loads(chosen.to_json())
    assert document["plugins"] == ["a", "b.py"] and document["rounds"] == 3
    assert Settings.from_dict(document) == chosen == Settings.from_json(chosen.to_json())
    assert Settings.from_dict({"attempts": 2, "from_a_later_harness": 1}) == Settings(attempts=2)
    with pytest.raises(BadInput, match="attempts"):
        Settings.from_dict({"attempts": "3"})


def test_the_cli_exits_2_on_a_bad_harness_rounds(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli import app

    monkeypatch.setenv("HARNESS_ROUNDS", "0")
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["compare", "--workload", "fault", "--framework", "fake",
                                      "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "harness: error: HARNESS_ROUNDS='0': must be a whole number >= 1" in result.output
    assert not out.exists()  # found before anything was written


def test_the_plan_reads_them_once_and_takes_rounds_from_them(out_dir: Path) -> None:
    from harness.run.plan import plan

    chosen = replace(Settings.from_environment(), rounds=3, attempts=2)
    made = plan("fault", frameworks="fake", devices="cpu", out=out_dir, settings=chosen,
                quick=True)
    assert made.rounds == 3 and made.settings == chosen.with_quick(True) and made.settings.quick
    assert plan("fault", frameworks="fake", devices="cpu", out=out_dir,
                settings=replace(chosen, rounds=None)).rounds == 5


# --- children get them on their arguments -------------------------------------------------------

def test_a_childs_environment_holds_no_harness_variable() -> None:
    from harness.run.runner import cell_environment

    assert os.environ.get("HARNESS_PLUGINS")  # the suite sets it (conftest.py)
    env = cell_environment(Cell("fault", "ok", "fake", "cpu"))
    assert not set(settings_module.variable_names()) & set(env)


def throttled_case(result: dict) -> dict:
    assert result["status"] == "ok", result
    (case,) = result["cases"]
    assert case["extra"]["gpu_state"]["status"] == "ok", case["extra"]["gpu_state"]
    return case


@pytest.mark.slow
def test_a_worker_follows_its_passed_settings_not_its_environment(tmp_path: Path) -> None:
    """The environment says 3 attempts and an NVML module that does not exist; the passed
    settings say 2 and the fake: the throttled case is timed twice, its GPU state read."""
    passed = Settings(attempts=2, nvml_module=FAKE_NVML, plugins=("tests.fakes.plugin",),
                      quick=True)
    cell_path, result_path = tmp_path / "cell.json", tmp_path / "result.json"
    cell_path.write_text(json.dumps(THROTTLED.as_dict()))
    env = {**os.environ, "HARNESS_ATTEMPTS": "3", "HARNESS_NVML_MODULE": "no_such_nvml",
           "HARNESS_PLUGINS": "", "PYTHONPATH": str(PROJECT_ROOT)}
    subprocess.run([sys.executable, "-m", "harness.run.worker", str(cell_path),
                    str(result_path), passed.to_json()], env=env, cwd=PROJECT_ROOT,
                   check=True, timeout=120, capture_output=True)
    case = throttled_case(json.loads(result_path.read_text()))
    assert len(case["rounds"][0]["attempts"]) == 2
    assert "contended in all 2 attempts" in case["suspect"]


@pytest.mark.slow
def test_the_runner_hands_the_settings_to_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through run_worker: the options' settings, never this process's HARNESS_ATTEMPTS=3
    (nor its HARNESS_PLUGINS: the worker finds the fault workload by the passed plugins)."""
    from harness.run.runner import RunOptions, run_worker

    monkeypatch.setenv("HARNESS_ATTEMPTS", "3")
    passed = Settings(attempts=2, nvml_module=FAKE_NVML, plugins=("tests.fakes.plugin",),
                      quick=True, fork_workers=False)
    case = throttled_case(run_worker(THROTTLED, RunOptions(timeout_s=120, settings=passed))
                          .to_dict())
    assert len(case["rounds"][0]["attempts"]) == 2


@pytest.mark.parametrize("plugins", [("tests.fakes.plugin",), ()])
def test_a_helper_child_gets_the_settings_on_its_arguments(plugins: tuple[str, ...]) -> None:
    """The child's registry merges the plugins its passed settings name, and only those: its
    environment holds no HARNESS_PLUGINS (the runner keeps it from every child)."""
    from harness.run.context import RunContext
    from harness.run.runner import run_json_child

    passed = replace(Settings.from_environment(), plugins=plugins)
    document, why_not = run_json_child("tests.test_settings", [],
                                       Cell("probe", "-", "fake", "cpu"), 60, RunContext(passed))
    assert document == {"plugins": list(plugins)}, why_not


# --- a resumed run uses the settings it recorded ------------------------------------------------

def started_run(out_dir: Path, chosen: Settings) -> Path:
    """A run folder whose one cell (the throttled fake GPU case) has not run yet."""
    from harness.run.plan import plan
    from harness.run.session import RunSession

    made = plan("fault", frameworks="fakegpu", devices="cuda:0", variants="throttled-always",
                sizes=[1], out=out_dir, quick=True, settings=chosen)
    return RunSession.start(made, "local", progress=False, ceilings=False).run_dir


@pytest.mark.slow
def test_a_resumed_run_uses_its_recorded_settings(out_dir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import api
    from harness.data import store
    from harness.run.session import RunSession

    recorded = replace(Settings.from_environment(), attempts=2, nvml_module=FAKE_NVML,
                       fork_workers=False)
    run_dir = started_run(out_dir / "a", recorded)
    assert store.load_run(run_dir).settings == recorded.with_quick(True).to_dict()
    monkeypatch.setenv("HARNESS_ATTEMPTS", "1")  # this process's own: not the run's
    monkeypatch.delenv("HARNESS_NVML_MODULE", raising=False)
    resumed = api.resume_run(run_dir, progress=False)
    case = throttled_case(resumed.cells[0].to_dict())
    assert len(case["rounds"][0]["attempts"]) == 2
    # Overridden explicitly: those run, and are recorded in their place.
    other = started_run(out_dir / "b", recorded)
    override = replace(recorded, attempts=3)
    session = RunSession.reopen(other, "local", progress=False, settings=override)
    session.run()
    assert len(throttled_case(session.recorder.results[0].to_dict())["rounds"][0]["attempts"]) == 3
    assert store.load_run(other).settings["attempts"] == 3


if __name__ == "__main__":  # the helper child of run_json_child: OUT.json is the last argument
    from harness.core import registry

    registry.workload_names()  # a lookup: merges HARNESS_PLUGINS's too, were any inherited
    Path(sys.argv[-1]).write_text(json.dumps({"plugins": registry.PLUGINS_LOADED}))

"""The plugin contract: every declared implementation resolves and has what the worker calls.

Parametrized over every registered workload x framework (built-ins, entry points and the test
plugin alike). Each framework's modules are imported in a child process of their own, as in a
real run: TensorFlow and torch never share an interpreter, and this process imports neither.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from harness.core import registry

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PAIRS = [(workload, framework) for workload in registry.WORKLOADS
         for framework in registry.load_workload(workload).frameworks]
FRAMEWORKS = sorted({framework for _, framework in PAIRS} | set(registry.BUILTIN_FRAMEWORKS))

# Runs in the child: report, per workload, what its implementation module exposes.
CHILD = """
import importlib, json, sys
from harness.core import registry
framework = sys.argv[1]
report = {"installed": registry.framework_installed(framework)[0], "modules": {}}
if report["installed"]:
    device = registry.backend_module(framework, "device")
    report["device"] = [name for name in ("version", "threads", "list_devices", "open_device")
                        if callable(getattr(device, name, None))]
    for workload in registry.WORKLOADS:
        spec = registry.load_workload(workload)
        if framework not in spec.frameworks:
            continue
        name = registry.implementation_name(spec, framework)
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            report["modules"][workload] = {"module": name, "error": repr(exc)}
            continue
        entry = "measure" if spec.timing == "measure" else "make_task"
        report["modules"][workload] = {"module": name, "entry": entry,
                                       "callable": callable(getattr(module, entry, None))}
print(json.dumps(report))
"""


@cache
def child_report(framework: str) -> dict:
    completed = subprocess.run([sys.executable, "-c", CHILD, framework], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_framework_spec_loads_and_its_device_module_has_the_contract(
        framework: str) -> None:
    spec = registry.load_framework(framework)
    assert spec.name == framework and spec.package and spec.import_name
    report = child_report(framework)
    if not report["installed"]:
        pytest.skip(f"{framework} is not installed here")
    assert report["device"] == ["version", "threads", "list_devices", "open_device"]


@pytest.mark.parametrize("workload, framework", PAIRS)
def test_every_declared_implementation_resolves(workload: str, framework: str) -> None:
    report = child_report(framework)
    if not report["installed"]:
        pytest.skip(f"{framework} is not installed here")
    found = report["modules"][workload]
    assert "error" not in found, found
    assert found["callable"], f"{found['module']} has no {found['entry']}()"


@pytest.mark.parametrize("workload", list(registry.WORKLOADS))
def test_every_spec_is_complete(workload: str) -> None:
    spec = registry.load_workload(workload)
    assert spec.frameworks and spec.check is not None and spec.sweep in spec.params
    assert set(spec.variants_by_default) <= set(spec.variants)

"""Mirrored adapters: every workload kind exists in every backend that claims it."""

from __future__ import annotations

import importlib.util

import pytest

from harness import registry

WORKLOAD_NAMES = [name for name in registry.WORKLOADS if name != "fault"]


def _spec_or_skip(name: str):
    if importlib.util.find_spec(registry.WORKLOADS[name].split(":")[0]) is None:
        pytest.fail(f"workload module for {name} is missing")
    return registry.load_workload(name)


@pytest.mark.parametrize("framework", [*registry.MIRRORED_FRAMEWORKS, "numpy"])
def test_every_backend_has_a_device_module(framework: str) -> None:
    assert registry.backend_has_module(framework, "device")


@pytest.mark.parametrize("framework", registry.MIRRORED_FRAMEWORKS)
@pytest.mark.parametrize("workload", WORKLOAD_NAMES)
def test_mirrored_backends_implement_every_workload(framework: str, workload: str) -> None:
    spec = _spec_or_skip(workload)
    assert registry.backend_has_module(framework, spec.kind), (
        f"backends/{framework}/{spec.kind}.py is missing")


@pytest.mark.parametrize("workload", WORKLOAD_NAMES)
def test_spec_lists_only_frameworks_that_have_the_module(workload: str) -> None:
    spec = _spec_or_skip(workload)
    for framework in spec.frameworks:
        assert registry.backend_has_module(framework, spec.kind), (framework, spec.kind)
    assert spec.check is not None and spec.sweep in spec.params

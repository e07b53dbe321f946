"""The idle power measured while the warm processes import (harness.measure.idlechild): the
figure a GPU cell's worker then reads back instead of measuring, and when none is measured."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any

import pytest

from harness.backend import parse_cuda_index
from harness.core.settings import Settings
from harness.measure import casewatch, idlechild, idlepower
from harness.spec import Cell

FAKE_NVML = "tests.fakes.nvml"  # a board at a constant 250 W (tests/fakes/nvml.py)


class FakeDriver:
    """The CUDA driver calls the child makes, on one device named 'Fake H200'."""

    def __init__(self) -> None:
        self.retained = self.released = 0

    def cuDeviceGet(self, device: Any, index: int) -> int:  # noqa: N802 - the driver's names
        ctypes.cast(device, ctypes.POINTER(ctypes.c_int))[0] = index
        return 0 if index == 0 else 101  # CUDA_ERROR_INVALID_DEVICE

    def cuDeviceGetName(self, name: Any, length: int, device: Any) -> int:  # noqa: N802
        name.value = b"Fake H200"
        return 0

    def cuDevicePrimaryCtxRetain(self, context: Any, device: Any) -> int:  # noqa: N802
        self.retained += 1
        return 0

    def cuDevicePrimaryCtxRelease(self, device: Any) -> int:  # noqa: N802
        self.released += 1
        return 0


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    fake = FakeDriver()
    monkeypatch.setattr(idlechild, "load_driver", lambda: fake)
    # Short windows: the fake board's power is constant, so two of them agree at once.
    monkeypatch.setattr(idlepower, "measure_idle",
                        functools.partial(idlepower.measure_idle, seconds=0.05))
    return fake


def settings_in(tmp_path: Path, **changes: Any) -> Settings:
    fields = {"nvml_module": FAKE_NVML, "cache_dir": str(tmp_path / "cache"),
              "powercap_root": str(tmp_path / "no-powercap"), **changes}
    return Settings(**fields)


def test_the_worker_reads_back_the_idle_power_the_child_measured(
        tmp_path: Path, driver: FakeDriver) -> None:
    settings = settings_in(tmp_path)
    assert idlechild.measure_devices(["cuda:0", "cuda:1"], settings) == ["cuda:0"]
    assert driver.retained == driver.released == 1  # a context open while it measured
    # The worker's side: its CaseWatch on cuda:0, described as torch and JAX describe it.
    device = type("Device", (), {"is_gpu": True, "name": "cuda:0"})()
    watch = casewatch.CaseWatch.open(device, settings)
    watch.measure_idle(casewatch.idle_fingerprint("cuda:0", "Fake H200"))
    idle = watch.idle["device"]
    assert idle.remembered and idle.watts == pytest.approx(250.0, rel=0.05)
    # Measured once: a second run within the hour opens no context and measures nothing.
    assert idlechild.measure_devices(["cuda:0"], settings) == []
    assert driver.retained == 1


def test_nothing_is_measured_beside_a_readable_host_counter(
        tmp_path: Path, driver: FakeDriver) -> None:
    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    for name, text in {"name": "package-0", "energy_uj": "0", "max_energy_range_uj": "100"}.items():
        (zone / name).write_text(text + "\n")
    settings = settings_in(tmp_path, powercap_root=str(tmp_path / "powercap"))
    # The host's idle would read the warm processes' imports: the worker measures both.
    assert idlechild.measure_devices(["cuda:0"], settings) == []
    assert driver.retained == 0


def _cell(device: str, round_number: int = 0) -> Cell:
    return Cell(workload="mnist-wide", variant="default", framework="torch", device=device,
                round=round_number)


def test_only_the_gpus_a_first_round_measures_are_asked_for(tmp_path: Path) -> None:
    cells = [_cell("cpu"), _cell("cuda:0"), _cell("cuda:0"), _cell("cuda:1", 1), _cell("cuda")]
    assert idlechild.idle_devices(cells, settings_in(tmp_path)) == ["cuda", "cuda:0"]
    assert idlechild.idle_devices(cells, settings_in(tmp_path, quick=True)) == []
    assert idlechild.idle_devices(cells, settings_in(tmp_path, energy=False)) == []
    assert idlechild.start([_cell("cpu")], settings_in(tmp_path), {}) is None


def test_cuda_names_map_to_driver_indices() -> None:
    assert [parse_cuda_index(name) for name in ("cuda", "cuda:3", "cpu", "cuda:x")] == \
        [0, 3, None, None]

"""mnist-small / mnist-wide: data fallback order, --data validation, the check, and both
frameworks through the worker (parameter counts, accuracy parity on the quick params)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.run.runner import run_worker as worker_result
from harness.spec import BadInput, Cell
from harness.workloads import mnist, mnist_data
from tests.in_subprocess import installed, run_check
from tests.quick_options import quick_options

if TYPE_CHECKING:
    from harness.run.forkserver import ForkServers

SMALL_PARAMS, WIDE_PARAMS = 101_770, 1_796_010
WORKER_TIMEOUT_S = 300
PARITY_POINTS = 0.05  # torch and TF test accuracy on the quick params differ by ~0.01


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Empty KERAS_HOME (no cached mnist.npz), matplotlib cache in tmp, download off."""
    keras_home = tmp_path / "keras-home"
    keras_home.mkdir()
    monkeypatch.setenv("KERAS_HOME", str(keras_home))
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    monkeypatch.delenv(mnist_data.DOWNLOAD_ENV, raising=False)
    return keras_home


def write_fake_mnist(path: Path, train: int = 40, test: int = 20, fill: int = 7) -> Path:
    """A keras-style mnist.npz whose pixels are all `fill`, to tell it apart from real data."""
    path.parent.mkdir(parents=True, exist_ok=True)
    labels = np.arange(max(train, test)) % 10
    np.savez(path,
             x_train=np.full((train, 28, 28), fill, np.uint8),
             y_train=labels[:train].astype(np.uint8),
             x_test=np.full((test, 28, 28), fill, np.uint8), y_test=labels[:test].astype(np.uint8))
    return path


@pytest.fixture(scope="module")
def empty_keras_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One empty KERAS_HOME (no cached mnist.npz) and download off for every worker of the
    module: the same environment for each cell, so one warm process per framework serves them
    all (a home per test made a warm process per test, each importing its framework again)."""
    home = tmp_path_factory.mktemp("keras-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERAS_HOME", str(home))
        patch.delenv(mnist_data.DOWNLOAD_ENV, raising=False)
        yield home


def run_worker(servers: ForkServers, workload: str, framework: str,
               variant: str = "as-written", **params: Any) -> dict[str, Any]:
    """One cell through a worker forked from SERVERS, as a run's are; returns its only case."""
    spec = mnist.SMALL if workload == "mnist-small" else mnist.WIDE
    cell_params = {**spec.defaults(quick=True), **params}
    result = worker_result(Cell(workload, variant, framework, "cpu", cell_params),
                           quick_options(WORKER_TIMEOUT_S), servers).to_dict()
    assert len(result["cases"]) == 1, result
    return result["cases"][0]


# --- data: fallback order, repetition, validation (numpy only, no framework) ---------------

def test_embedded_subset_is_used_without_cache(isolated_home: Path) -> None:
    digits = mnist_data.load_mnist("")
    assert digits.source.startswith("embedded:")
    assert digits.x_train.shape == (4000, 28, 28) and digits.x_test.shape == (1000, 28, 28)
    assert digits.x_train.dtype == np.uint8 and digits.x_train.max() > 200  # real ink, 0-255
    assert np.array_equal(np.bincount(digits.y_train, minlength=10) > 300, [True] * 10)
    assert mnist_data.EMBEDDED_PATH.stat().st_size < 3 * 2**20


def test_keras_cache_is_picked_before_embedded(isolated_home: Path) -> None:
    write_fake_mnist(isolated_home / "datasets" / "mnist.npz", fill=7)
    digits = mnist_data.load_mnist("")
    assert digits.source.startswith("keras-cache:")
    assert digits.x_train.shape == (40, 28, 28) and np.all(digits.x_train == 7)


def test_data_path_wins_over_keras_cache(isolated_home: Path, tmp_path: Path) -> None:
    write_fake_mnist(isolated_home / "datasets" / "mnist.npz", fill=7)
    explicit = write_fake_mnist(tmp_path / "mine.npz", train=30, fill=9)
    digits = mnist_data.load_mnist(str(explicit))
    assert digits.source == f"file:{explicit}"
    assert digits.x_train.shape == (30, 28, 28) and np.all(digits.x_train == 9)


def test_make_inputs_repeats_subset_deterministically(isolated_home: Path) -> None:
    case = {**mnist.SMALL.defaults(quick=True), "batch_size": 32, "train_samples": 10_000,
            "epochs": 3}
    first, second = (mnist.SMALL.make_inputs(case, "as-written") for _ in range(2))
    assert first["samples_distinct"] == 4000 and first["data_source"].startswith("embedded:")
    assert first["x_train"].shape == (10_000, 28, 28) and first["x_train"].dtype == np.float32
    assert 0.99 < first["x_train"].max() <= 1.0  # scaled by 1/255
    assert np.array_equal(first["x_train"], second["x_train"])
    assert np.array_equal(first["orders"], second["orders"])
    # Each epoch is a permutation, and the epochs differ (a fresh shuffle per epoch).
    assert all(np.array_equal(np.sort(order), np.arange(10_000)) for order in first["orders"])
    assert not np.array_equal(first["orders"][0], first["orders"][1])
    # Repetition: 10000 from 4000 distinct means every digit 2 or 3 times.
    _, counts = np.unique(first["x_train"].reshape(10_000, -1), axis=0, return_counts=True)
    assert set(counts) <= {2, 3}


def test_validate_data_rejects_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        mnist.SMALL.validate_data(tmp_path / "nope.npz")


@pytest.mark.parametrize("kind", ["not-a-zip", "missing-keys", "wrong-shape", "bad-labels"])
def test_validate_data_rejects_malformed_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.npz"
    images, labels = np.zeros((4, 28, 28), np.uint8), np.arange(4)
    if kind == "not-a-zip":
        path.write_text("hello")
    elif kind == "missing-keys":
        np.savez(path, x_train=images, y_train=labels)
    elif kind == "wrong-shape":
        np.savez(path, x_train=np.zeros((4, 784), np.uint8), y_train=labels,
                 x_test=images, y_test=labels)
    else:
        np.savez(path, x_train=images, y_train=labels + 10, x_test=images, y_test=labels)
    with pytest.raises(BadInput) as raised:
        mnist.WIDE.validate_data(path)
    assert "\n" not in str(raised.value) and str(path) in str(raised.value)


def test_cli_refuses_bad_data_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["compare", "--workload", "mnist-small", "--quick",
                                      "--data", str(tmp_path / "absent.npz"),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert not (tmp_path / "out").exists()


# --- the check --------------------------------------------------------------------------

def fake_output(params: int, accuracy: float) -> dict[str, Any]:
    return {"extra": {"params": params, "accuracy": accuracy}}


def test_check_fails_on_wrong_parameter_count() -> None:
    case = {**mnist.SMALL.defaults(quick=True), "batch_size": 32}
    assert mnist.SMALL.check(case, "as-written", {}, fake_output(SMALL_PARAMS, 0.9)).passed
    wrong = mnist.SMALL.check(case, "as-written", {}, fake_output(SMALL_PARAMS + 10, 0.9))
    assert not wrong.passed and "101,770" in wrong.detail
    assert not mnist.WIDE.check(case, "as-written", {}, fake_output(SMALL_PARAMS, 0.9)).passed


def test_check_fails_on_chance_accuracy() -> None:
    case = {**mnist.WIDE.defaults(quick=True), "batch_size": 32}
    assert not mnist.WIDE.check(case, "as-written", {}, fake_output(WIDE_PARAMS, 0.11)).passed
    nan_output = fake_output(WIDE_PARAMS, float("nan"))
    assert not mnist.WIDE.check(case, "as-written", {}, nan_output).passed


# --- both frameworks through the worker ----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_wide_parameter_count_through_worker(empty_keras_home: Path, warm_servers: ForkServers,
                                             framework: str) -> None:
    case = run_worker(warm_servers, "mnist-wide", framework, epochs=1, train_samples=64,
                      test_samples=50)
    extra = case["extra"]
    assert extra["params"] == WIDE_PARAMS
    assert extra["steps_per_call"] == 2 and extra["samples_distinct"] == 64
    (record,) = case["rounds"]
    assert len(record["samples"]) == 0 and record["cold_seconds"] > 0  # one epoch: the cold one


@pytest.mark.slow
def test_small_accuracy_parity_through_worker(empty_keras_home: Path,
                                              warm_servers: ForkServers) -> None:
    cases = {framework: run_worker(warm_servers, "mnist-small", framework)
             for framework in ("torch", "tensorflow")}
    for framework, case in cases.items():
        assert case["status"] == "ok", (framework, case["reason"])
        extra = case["extra"]
        assert extra["params"] == SMALL_PARAMS
        assert extra["accuracy"] > mnist.ACCURACY_BOUND
        assert extra["steps_per_call"] == 2048 // 32
        assert extra["data_source"].startswith("embedded:")
        assert np.isfinite(extra["train_loss"]) and extra["train_loss"] < 2.0
        assert len(case["rounds"][0]["samples"]) == 1  # 2 epochs: cold + 1 warm
    accuracies = [case["extra"]["accuracy"] for case in cases.values()]
    assert abs(accuracies[0] - accuracies[1]) < PARITY_POINTS, accuracies


def test_jax_mnists_host_made_start_is_what_jax_would_make() -> None:
    """The jax MNIST state starts on the host (no program compiled before the first step):
    Adam's zero moments and count in optax's own structure, and PRNGKey's threefry key.
    Checked in a child forked from the warm jax process: the test process never imports jax
    (a multithreaded jax here made every later fork of the test process warn of deadlocks)."""
    if not (installed("jax") and installed("optax")):
        pytest.skip("jax or optax is not installed")
    run_check("tests.test_mnist", "check_jax_mnists_host_made_start()", framework="jax")


def check_jax_mnists_host_made_start() -> None:
    """Child process: the host-made state against the one jax makes."""
    import jax
    import optax

    from harness.backends.jax import mnist as jax_mnist

    optimizer = optax.adam(1e-3)
    state = jax_mnist.initial_state(optimizer, (16,))
    made_by_jax = jax.jit(optimizer.init)(state["params"])
    assert jax.tree.structure(state["opt_state"]) == jax.tree.structure(made_by_jax)
    for host, device in zip(jax.tree.leaves(state["opt_state"]), jax.tree.leaves(made_by_jax),
                            strict=True):
        assert host.dtype == device.dtype and np.array_equal(host, np.asarray(device))
    key = jax.random.PRNGKey(jax_mnist.SEED + 1)
    assert np.asarray(state["key"]).dtype == key.dtype
    assert np.array_equal(state["key"], np.asarray(key))

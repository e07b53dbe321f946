"""`harness report --tensorboard DIR`: the medians as TensorBoard scalars, read back with
TensorBoard's own reader; without the package, a note and no folder."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.report import tensorboard
from tests.synthetic_runs import (
    CPU_MACHINE,
    SIZES,
    cpu_seconds,
    make_case,
    make_result,
    write_fixture_run,
)


@pytest.fixture
def cpu_run(tmp_path: Path) -> Path:
    results = [make_result("matmul", framework, "cpu",
                           [make_case({"n": n}, cpu_seconds(n) * factor) for n in SIZES])
               for framework, factor in (("torch", 1.0), ("numpy", 2.0))]
    return write_fixture_run(tmp_path / "run", CPU_MACHINE, results)


def read_scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    """tag -> step -> value from every event file under log_dir.

    Event files are TFRecords (8-byte length, 4-byte CRC, the record, 4-byte CRC), each record
    a tensorboard Event proto; read here directly, without TensorFlow.
    """
    from tensorboard.compat.proto.event_pb2 import Event

    scalars: dict[str, dict[int, float]] = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            length = struct.unpack("<Q", data[offset:offset + 8])[0]
            event = Event.FromString(data[offset + 12:offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = value.simple_value
    return scalars


def test_cli_tensorboard_writes_each_median_as_a_scalar(cpu_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")  # in the test extra: `pip install -e '.[test]'`
    log_dir = tmp_path / "tb"
    result = CliRunner().invoke(app, ["report", str(cpu_run), "--out", str(tmp_path / "out"),
                                      "--tensorboard", str(log_dir)])
    assert result.exit_code == 0, result.output
    scalars = read_scalars(log_dir)
    torch_tag = f"matmul/fp32/median_seconds/torch cpu | {CPU_MACHINE}"
    numpy_tag = f"matmul/fp32/median_seconds/numpy cpu | {CPU_MACHINE}"
    assert set(scalars) == {torch_tag, numpy_tag}
    assert scalars[torch_tag] == pytest.approx({n: cpu_seconds(n) for n in SIZES}, rel=1e-6)
    assert scalars[numpy_tag] == pytest.approx({n: 2 * cpu_seconds(n) for n in SIZES}, rel=1e-6)
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert f"TensorBoard: {2 * len(SIZES)} scalars written to {log_dir}" in summary


def test_without_the_package_tensorboard_is_a_note(cpu_run: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensorboard, "tensorboard_available", lambda: False)
    result = CliRunner().invoke(app, ["report", str(cpu_run), "--out", str(tmp_path / "out"),
                                      "--tensorboard", str(tmp_path / "tb")])
    assert result.exit_code == 0, result.output
    assert "TensorBoard export skipped" in (tmp_path / "out" / "summary.md").read_text()
    assert not (tmp_path / "tb").exists()


def test_the_export_does_not_import_tensorflow(tmp_path: Path) -> None:
    """The report's process never imports a framework, tensorboard's writer included."""
    pytest.importorskip("tensorboard")
    code = ("import sys; from pathlib import Path; "
            "from harness.report.tensorboard import export_scalars; "
            f"print(export_scalars([('a/b', 1, 2.0)], Path({str(tmp_path / 'tb')!r}))); "
            "print('tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    note, imported = done.stdout.strip().splitlines()
    assert note.startswith("TensorBoard: 1 scalars written") and imported == "False"
    assert read_scalars(tmp_path / "tb") == {"a/b": {1: 2.0}}

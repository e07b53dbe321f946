"""One finishing step for every run (harness.api._finish): the CLI and harness.compare() store
the same run.json, predictions included, and a finished run's run.json is written once at
its end.

The run: the fault workload's `ok` variant on the fake CPU framework and the fake GPU one
(tests/fakes), sizes 1, 2 and 4, so its end predicts a crossover; its CPU cases carry a
planted features record (an MNIST step the H100 validation recorded, through the fake's
step_features: FAKE_STEP_FEATURES), so its end predicts their GPU step on every shipped
profile too. A few seconds a run.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

import harness
from harness.analysis.verdictline import Topic, VerdictLine
from harness.audit import audit_run
from harness.cli import app
from harness.commands.predicted import with_predictions
from harness.data import store
from harness.data.gpustep import Prediction
from harness.data.results import SCHEMA_VERSION
from harness.predict import answer, ranking
from harness.predict.profile import shipped_names
from harness.run.session import RunRecorder
from tests.fakes.backend.fault import PLANTED_FEATURES
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn

ROWS = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / \
    "predict-validation-h100-20261127.json.gz"
OPTIONS = {"frameworks": "fake,fakegpu", "devices": "cpu,cuda:0", "variants": "ok",
           "sizes": [1, 2, 4], "quick": True, "ceilings": False}
COMMAND = ["compare", "--workload", "fault", "--framework", "fake,fakegpu", "--device",
           "cpu,cuda:0", "--variant", "ok", "--sizes", "1,2,4", "--quick", "--no-ceilings"]

# What two runs of one command differ in, whoever started them: when and where they ran (ids,
# clocks, the command line, the warm processes' own record) and what the clock measured.
RUN_KEYS = {"run_id", "command", "started", "finished", "warm_processes", "resumed",
            "command_cost"}  # the CLI's whole command, timed after its answer
MEASURED_KEYS = {"samples", "cold_seconds", "other_load", "attempts", "calls_per_sample",
                 "timer_overhead_s", "predicted_call_s", "cost", "started", "finished",
                 "peak_host_memory_bytes", "peak_host_memory_bytes_worker",
                 "device_init_seconds", "device_profile", "suspect", "warmup", "energy",
                 "gpu_state", "load_average"}
# A crossover's figures and kind come from the measured medians: of each, its keys and what
# it is of are compared.
CROSSOVER_OF = {"experiment", "machine", "framework", "variant", "sweep"}


@pytest.fixture(scope="module")
def planted_features(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extra fields a torch CPU case's features pass records, of the validation's
    mnist-small step at batch 16 and its host's speed (the rows file, read as stored)."""
    document = json.loads(gzip.decompress(ROWS.read_bytes()))
    row = next(row for row in document["rows"]
               if row["model"] == "mnist-small" and row["batch"] == 16)
    features = json.loads(zlib.decompress(base64.b64decode(row["features_packed"])))
    path = tmp_path_factory.mktemp("features") / "features.json"
    path.write_text(json.dumps({answer.FEATURES_KEY: features, answer.STEPS_KEY: 1,
                                answer.HOST_SPEED_KEY: document["meta"]["this_host"]}))
    return path


@pytest.fixture()
def planted(planted_features: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(PLANTED_FEATURES, str(planted_features))
    return planted_features


def without_clock(value: Any) -> Any:
    """VALUE with what the clock or the moment decides (MEASURED_KEYS, at any depth) kept
    as keys only."""
    if isinstance(value, dict):
        return {name: "<measured>" if name in MEASURED_KEYS else without_clock(item)
                for name, item in value.items()}
    if isinstance(value, list):
        return [without_clock(item) for item in value]
    return value


def comparable(run_dir: Path) -> dict[str, Any]:
    document = json.loads((run_dir / store.RUN_FILE).read_text())
    crossovers = [{name: item if name in CROSSOVER_OF else "<measured>"
                   for name, item in record.items()} for record in document["predictions"]]
    return {**{name: without_clock(item) for name, item in document.items()
               if name not in RUN_KEYS and name != "predictions"}, "predictions": crossovers}


def only_run_dir(out: Path) -> Path:
    (found,) = [path for path in out.iterdir() if path.is_dir()]
    return found


def planted_cases(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The cases of the fake CPU framework's cell: those with the planted features."""
    return [case for cell in document["cells"]
            if (cell["cell"]["framework"], cell["cell"]["device"]) == ("fake", "cpu")
            for case in cell["cases"]]


@pytest.fixture(scope="module")
def api_run(planted_features: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run made through harness.compare() (its report not drawn)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PLANTED_FEATURES, str(planted_features))
        result = harness.compare("fault", **OPTIONS, out=tmp_path_factory.mktemp("api"),
                                 report=False, progress=False)
    assert result.exit_code == 0
    return result.path


def test_the_cli_and_python_store_the_same_run(planted: Path, api_run: Path,
                                               tmp_path: Path) -> None:
    """The same compare through the CLI and through harness.compare(): run.json the same,
    ids, times and measured values aside, the crossovers and the GPU predictions included."""
    given = CliRunner().invoke(app, [*COMMAND, "--no-report", "--out", str(tmp_path)])
    assert given.exit_code == 0, given.output
    from_cli, from_api = comparable(only_run_dir(tmp_path)), comparable(api_run)
    assert from_cli["predictions"] and from_cli["predictions"][0]["framework"] == "fakegpu"
    for case in [*planted_cases(from_cli), *planted_cases(from_api)]:
        assert set(case["gpu_predictions"]) == set(shipped_names())
    assert from_cli == from_api


def test_a_finished_run_writes_run_json_once_at_its_end(
        planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the last cell is recorded (each cell's save keeps the folder readable), the
    finishing step writes run.json once: stamped finished, the predictions already in it."""
    events: list[tuple[str, dict[str, Any]]] = []
    write_run, add = store.write_run_files, RunRecorder.add

    def counted_write(run_dir: Path, document: Any, *args: Any, **kwargs: Any) -> None:
        events.append(("write", document.to_dict()))
        write_run(run_dir, document, *args, **kwargs)

    def counted_add(recorder: RunRecorder, cell: Any) -> None:
        add(recorder, cell)
        events.append(("cell", {}))

    monkeypatch.setattr(store, "write_run_files", counted_write)
    monkeypatch.setattr(RunRecorder, "add", counted_add)
    result = harness.compare("fault", **OPTIONS, out=tmp_path, report=False, progress=False)
    last_cell = max(index for index, (kind, _) in enumerate(events) if kind == "cell")
    finishing = [document for kind, document in events[last_cell + 1:] if kind == "write"]
    assert len(finishing) == 1
    (written,) = finishing
    assert written["finished"] is not None and written["predictions"]
    assert all(case["gpu_predictions"] for case in planted_cases(written))
    assert written == json.loads((result.path / store.RUN_FILE).read_text())


def test_a_run_stored_before_typed_predictions_reads_and_checks_the_same(
        api_run: Path, tmp_path: Path) -> None:
    """Layout 4 kept a case's predictions in its `extra`: such a run.json loads them as the
    typed field (harness.data.upgrade), and `harness check` recomputes them as before."""
    copy = tmp_path / api_run.name
    copy.mkdir()
    for path in api_run.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    document = json.loads((copy / store.RUN_FILE).read_text())
    assert document["schema_version"] == SCHEMA_VERSION == 5
    document["schema_version"] = 4
    for case in planted_cases(document):
        case["extra"]["gpu_predictions"] = case.pop("gpu_predictions")
    (copy / store.RUN_FILE).write_text(json.dumps(document))
    old, new = store.load_run(copy), store.load_run(api_run)
    for was, now in zip(planted_cases(old.to_dict()), planted_cases(new.to_dict())):
        assert was == now and "gpu_predictions" not in was["extra"]
    (case, *_) = [case for cell in old.cells for case in cell.cases if case.gpu_predictions]
    assert isinstance(case.gpu_predictions["h100"]["profiled"], Prediction)
    audit = audit_run(copy)
    assert audit.mismatches == [] and not any(
        "prediction" in item.line() for item in audit.unverifiable)
    assert audit.summary_line() == audit_run(api_run).summary_line()


def test_the_predicted_lines_go_under_the_no_gpu_answer_by_its_topic(api_run: Path) -> None:
    """The verdict is assembled from typed lines: the predicted GPU lines replace the line
    whose topic says no GPU cell measured, however it is worded, and no other line, whatever
    words it holds."""
    document = store.load_run(api_run)
    document.cells = [cell for cell in document.cells if cell.device == "cpu"]  # CPU only
    predicted = [f"  {line}" for line in ranking.answer_lines(document)]
    why = ranking.not_predicted_line(document)
    assert predicted and why.startswith("GPU step not predicted: fakegpu")
    reworded = [VerdictLine("fault:", Topic.HEADING),
                VerdictLine("  GPU vs CPU: reworded", Topic.NO_GPU),
                VerdictLine("  a line that says no GPU cell measured")]
    found = with_predictions(SimpleNamespace(document=document),  # type: ignore[arg-type]
                             reworded)
    assert [line.text for line in found] == [
        "fault:", *predicted, f"  {why}", "  a line that says no GPU cell measured"]


def test_the_crossover_line_says_whether_a_gpu_cell_measured(api_run: Path) -> None:
    from harness.report import verdicts_without_drawing

    lines = verdicts_without_drawing([api_run])
    topics = [line.topic for line in lines if line.gpu_vs_cpu]
    assert topics and set(topics) == {Topic.GPU_VS_CPU}  # a GPU cell measured here
    assert lines[0].topic is Topic.HEADING

"""The GPU prediction where users look (issue 51, part 4): a CPU run's torch step recorded by
its worker, predicted on the shipped profiles, stored, printed under the verdict within two
terminal lines, and recomputed by harness check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.audit import audit_run
from harness.cli import app
from harness.data.store import load_run
from harness.predict import answer
from harness.predict.interval import band_for, interval_of, shipped_errors
from harness.predict.profile import PROFILES_DIR, load_profile, shipped_names
from tests.in_subprocess import installed, run_check
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn

COMPARE = ("compare", "--workload", "mnist-small", "--framework", "torch", "--device", "cpu",
           "--quick", "--no-ceilings", "--sizes", "16,64")


def only_run_dir(out_dir: Path) -> Path:
    (found,) = [path for path in out_dir.iterdir() if path.is_dir()]
    return found


@pytest.fixture(scope="module")
def predicted_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One quick CPU run of the MNIST torch step through the workers, its report drawn."""
    out = tmp_path_factory.mktemp("predicted") / "results"
    result = CliRunner().invoke(app, [*COMPARE, "--out", str(out)], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return only_run_dir(out), result.output


def test_the_worker_records_features_and_the_run_stores_predictions(
        predicted_run: tuple[Path, str]) -> None:
    run_dir, _ = predicted_run
    document = load_run(run_dir)
    (cell,) = document.cells
    for case in cell.cases:
        features = case.extra[answer.FEATURES_KEY]
        assert case.extra[answer.STEPS_KEY] == 4  # a few steps of the epoch, not the epoch
        assert features["kernel_ops"] > 0 and features["flops"] > 0
        assert features["h2d_bytes"] > 0  # as-written copies each batch
        stored = case.gpu_predictions
        assert set(stored) == set(shipped_names())
        for name in stored:
            assert set(stored[name]) == {"profiled", "this"}  # both hosts, the choice recorded
            assert stored[name]["this"].host_choice == "this"
            assert stored[name]["profiled"].profile["identity"] == \
                load_profile(name).identity()


def test_harness_check_reproduces_the_stored_predictions(
        predicted_run: tuple[Path, str]) -> None:
    run_dir, _ = predicted_run
    audit = audit_run(run_dir)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    assert not audit.unverifiable, [item.line() for item in audit.unverifiable]
    figures = json.loads((run_dir / "figures.json").read_text())["figures"]
    printed = [item for item in figures if item["family"] == answer.FAMILY]
    assert {item["name"] for item in printed} >= {"predicted GPU step", "GPU vs this CPU"}


def planted(run_dir: Path, tmp_path: Path, change: float) -> Path:
    """A copy of RUN_DIR whose first stored prediction reads CHANGE times its seconds."""
    copy = tmp_path / run_dir.name
    copy.mkdir()
    for path in run_dir.iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    document = json.loads((copy / "run.json").read_text())
    stored = document["cells"][0]["cases"][0]["gpu_predictions"]
    first = stored[next(iter(stored))]["profiled"]
    first["seconds"] *= change
    (copy / "run.json").write_text(json.dumps(document))
    return copy


def test_a_planted_wrong_prediction_fails_the_check(predicted_run: tuple[Path, str],
                                                    tmp_path: Path) -> None:
    run_dir, _ = predicted_run
    audit = audit_run(planted(run_dir, tmp_path, 1.3))
    wrong = [item for item in audit.mismatches if "predicted GPU step" in item.figure]
    assert wrong, [item.line() for item in audit.mismatches]


def folded_lines(lines: list[str], start: str) -> list[str]:
    """The lines starting with START, each with the hanging lines folded under it joined."""
    found: list[str] = []
    for line in lines:
        if line.startswith(start):
            found.append(line)
        elif found and line.startswith("    ") and not found[-1].endswith("\n"):
            found[-1] += " " + line.strip()
        elif found:
            found[-1] += "\n"
    return [line.rstrip("\n") for line in found]


def test_the_verdict_lines_fit_100_columns_and_name_their_cell(
        predicted_run: tuple[Path, str]) -> None:
    _, output = predicted_run
    lines = output.splitlines()
    start = lines.index("verdict:")
    mine = [line for line in lines[start:] if line.startswith(("  predicted on ", "    "))]
    assert mine and all(len(line) <= 100 for line in mine), mine
    predicted = folded_lines(lines[start:], "  predicted on ")
    assert len(predicted) == len(shipped_names())
    assert all(len(line) <= answer.LINE_LIMIT + 2 for line in predicted)
    assert not any("no GPU cell measured" in line for line in lines[start:])
    # When each was profiled: its date (the word "profiled" gives way on a long line).
    dates = {load_profile(name).created[:10] for name in shipped_names()}
    assert all("ms per step" in line and any(date in line for date in dates)
               for line in predicted)
    # What it is about: torch's as-written step, against torch's own CPU step.
    assert all(", torch as-written: ~" in line and "than torch on this CPU" in line
               for line in predicted)


def test_long_wordings_give_way_to_short_ones(predicted_run: tuple[Path, str]) -> None:
    run_dir, _ = predicted_run
    document = load_run(run_dir)
    found = answer.answers(document)[0]
    longest = answer.Answer(device="H100 80GB HBM3 PCIe with a long name", created="2026-11-27",
                            size_text="batch_size 1,048,576", point=found.point,
                            interval=found.interval, no_interval=found.no_interval,
                            win_clause="from batch_size ~1,048,576 it would win")
    text = longest.text()
    assert len(text) <= answer.LINE_LIMIT and f"~{answer.ms(found.point.gpu_step_s or 0)}" in text


@pytest.mark.parametrize("asked, said", [
    (["h999"], "shipped: " + ", ".join(shipped_names())),
    (["not-a-profile.json"], "not a device profile"),
    (["newer.json"], "newer than this harness reads"),
])
def test_bad_predict_for_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                asked: list[str], said: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "not-a-profile.json").write_text('{"kind": "something else"}')
    newer = json.loads((PROFILES_DIR / "h200.json").read_text())
    newer["schema_version"] = 99
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    out = tmp_path / "results"
    result = CliRunner().invoke(app, [*COMPARE, "--out", str(out), "--predict-for", *asked])
    assert result.exit_code == 2, result.output
    assert said in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()  # nothing written


def test_a_cell_whose_features_cannot_run_says_why() -> None:
    """In a child: the check imports the torch backends, which this process never does (a
    later module asserting torch was never imported here would fail after it)."""
    if not installed("torch"):
        pytest.skip("torch is not installed")
    run_check("tests.predict_checks", "features_pass_says_why_not()", framework="torch")


def test_the_interval_comes_from_the_validation_and_the_noise() -> None:
    identity = load_profile("h200").identity()
    band = band_for("h200", identity, "profiled", "launch-bound")
    assert band is not None and band.cells == 288  # 6 runs; the GRU and the LSTM are unknown
    quiet = interval_of(1e-3, band, 0.0)
    assert quiet.low_s == pytest.approx(1e-3 / band.ratio_high)
    assert quiet.high_s == pytest.approx(1e-3 / band.ratio_low)
    noisy = interval_of(1e-3, band, 3.0)  # a spread wider than the validation's error
    assert noisy.widened and noisy.high_s == pytest.approx(2.5e-3)
    assert band_for("h100", load_profile("h100").identity(), "profiled", "compute-bound") is None
    assert band_for("h200", "another build", "profiled", "launch-bound") is None


def test_the_shipped_error_table_is_the_validation_rows() -> None:
    """Each profile's band is its lendings' rows pooled (six H200 runs, three H100), predicted
    again by the model as it is now; a regime with too few cells keeps its count, no band."""
    from benchmarks.predictlab.errortable import derived_table
    from harness.predict.interval import MIN_BAND_CELLS, why_no_band

    root = Path(__file__).resolve().parents[1]
    table = shipped_errors()
    assert {"h100", "h200"} <= set(table)  # every shipped profile was validated
    assert (len(table["h200"]["sources"]), len(table["h100"]["sources"])) == (6, 3)
    for name, stored in table.items():  # predicted again by the model as it is now
        again = derived_table(name, stored["identity"], stored["sources"], root)
        assert again == stored, name
    identity = table["h200"]["identity"]
    assert band_for("h200", identity, "profiled", "compute-bound").cells == 14
    assert band_for("h200", identity, "profiled", "launch-bound").cells == 288
    # One run's rows alone: its 7 compute-bound cells keep their count and give no band.
    one = derived_table("h200", identity, [table["h200"]["sources"][4]], root)
    few = one["by_host"]["profiled"]["compute-bound"]
    assert few == {"cells": 7} and few["cells"] < MIN_BAND_CELLS
    assert band_for("h100", table["h100"]["identity"], "profiled", "compute-bound") is None
    assert why_no_band("h100", table["h100"]["identity"], "profiled", "compute-bound") == \
        "error not measured for compute-bound steps"


def test_the_line_names_the_gpu_short_and_flags_a_suspect_cpu_timing() -> None:
    """A new user's H100 line lost its advice to the 200-character cut ('NVIDIA H100 80GB
    HBM3'); and a ratio over a contended CPU timing read as a finding."""
    from harness.predict.answer import short_device

    assert short_device("NVIDIA H100 80GB HBM3") == "H100 80GB"
    assert short_device("NVIDIA H200") == "H200"
    assert short_device("NVIDIA A100-SXM4-40GB") == "A100-SXM4-40GB"


def test_a_profile_of_another_torch_is_said_on_the_line(predicted_run: tuple[Path, str]) -> None:
    """Predicted anyway, said: the profile's dispatch and launch costs are its torch's."""
    from importlib.metadata import version  # torch's version without importing torch here

    from harness.data.results import CellResult
    from harness.spec import Cell

    cell = CellResult(cell=Cell("mnist-small", "as-written", "torch", "cpu"),
                      framework_version="2.13.0+cpu")
    assert answer.version_note({"torch": "2.11.0+cu130"}, cell) == ("2.11", "2.13")
    assert answer.version_note({"torch": "2.13.1"}, cell) is None
    assert answer.version_note({}, cell) is None
    _, output = predicted_run
    here = ".".join(version("torch").split("+")[0].split(".")[:2])
    for name in shipped_names():
        profiled = str(load_profile(name).software.get("torch") or "")
        there = ".".join(profiled.split("+")[0].split(".")[:2])
        said = f"torch {there}, {here} here" if f"torch {there}, " in output else \
            f"torch {there} there, {here} here"
        assert (said in output) == (there != here), (name, said)
    assert "..." not in output  # every line fits whole: advice and wording give way first


def test_the_python_api_stores_the_predictions_as_the_cli_does(tmp_path: Path) -> None:
    """harness.compare() from Python ends its run as the CLI's does: the GPU predictions are
    in run.json without a report or the CLI (the run's own end stores them)."""
    import harness
    from harness.predict.profile import ProfileError

    out = tmp_path / "results"
    with pytest.raises(ProfileError):  # refused before anything runs or is written
        harness.compare("mnist-small", frameworks="torch", devices="cpu", quick=True,
                        out=out, predict_for=["h999"])
    assert not out.exists()
    result = harness.compare("mnist-small", frameworks="torch", devices="cpu", quick=True,
                             sizes=[16], ceilings=False, report=False, progress=False,
                             out=out, predict_for=["h200"])
    (case,) = load_run(result.path).cells[0].cases
    assert set(case.gpu_predictions) == set(shipped_names())
    assert case.gpu_predictions == result.document.cells[0].cases[0].gpu_predictions
    # the RunResult holds what run.json holds
    assert audit_run(result.path).mismatches == []

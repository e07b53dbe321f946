"""`harness check`: a run recomputes its own figures; every planted error is named.

Two real runs are made once (numpy matmul --quick through the CLI against this machine's
remembered ceilings, so summary.md prints GFLOP/s and its share of them; the fault workload on
a fake CPU and a fake GPU in two seeded rounds, so it prints the fastest table, the ranking,
GPU vs CPU and round medians). Each test plants one error in a copy of a folder and asserts
that `harness check` exits 1 naming that figure and where it is printed; the untouched folders
must check clean.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import harness
from harness.audit import Audit, audit_run, audit_summary
from harness.audit.gpucpu import crossover
from harness.audit.printed import printed_ratio, printed_seconds
from harness.audit.summary import exponent_figures
from harness.cli import app
from harness.core.units import format_ratio, format_seconds
from harness.data.ceilings import MEMORY, DeviceCeiling, Peaks
from harness.measure import ceilings
from harness.measure.bounds import HostFacts, cpu_bound
from harness.report.figure import FIGURES_FILE
from harness.report.views import devicetime as devicetime_view
from harness.report.views import energy as energy_view
from harness.report.views import memory as memory_view
from harness.report.views import peak_share
from harness.run.rounds import round_orders
from harness.run.runceilings import QUICK_PROBE_SIZES
from tests.lines_only import draw_no_figures

SECONDS = re.compile(r"[\d.,]+ (?:ns|us|ms|s)\b")


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def remembered_cpu() -> DeviceCeiling:
    """This machine's probe of its CPU as the ceilings cache keeps it, what every run after the
    first on a machine reads instead of probing: at the CPU's theoretical fp32 peak where
    /proc/cpuinfo gives one, so no honest rate passes it or the bound it sets on any machine.

    Seeded rather than probed: the probe (torch and numpy at 1,024 and 2,048) was 35-45 s of
    this module's time on the 2-core VM, and what these tests plant and check is the ceilings
    table a run prints from the figures it stores, wherever they came from (the probe itself:
    test_quick_cuts, test_ceilings_remembered)."""
    theoretical = cpu_bound(HostFacts.from_machine(with_remembered=False))
    fp32 = theoretical.gflops["fp32"] if theoretical else 1000.0
    return DeviceCeiling("cpu", Peaks({"fp32": fp32}, {MEMORY: 50.0}), description="this CPU",
                         measured_with=("numpy",), probe_sizes=tuple(QUICK_PROBE_SIZES))


@pytest.fixture(scope="module")
def matmul_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """numpy matmul --quick through the CLI against this machine's remembered ceilings: a rates
    table in summary.md."""
    out = tmp_path_factory.mktemp("matmul")
    cache = tmp_path_factory.mktemp("matmul-cache")
    ceilings.remember(remembered_cpu(), folder=cache)
    with pytest.MonkeyPatch.context() as patch:
        draw_no_figures(patch)  # the audit reads the run's lines and records, never a PNG
        patch.setenv(ceilings.CACHE_ENV, str(cache))
        result = invoke("compare", "--workload", "matmul", "--quick", "--framework", "numpy",
                        "--device", "cpu", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "ceilings remembered from " in result.output  # not probed: the seeded figures
    return next(path for path in out.iterdir() if path.is_dir())


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fault workload (counted FLOPs) on a fake CPU and a fake GPU, 2 seeded rounds."""
    out = tmp_path_factory.mktemp("fault")
    with pytest.MonkeyPatch.context() as patch:
        draw_no_figures(patch)
        result = harness.compare("fault-rated", frameworks="fake,fakegpu", devices="cpu,cuda:0",
                                 variants="ok", sizes=[1, 2], quick=True, out=out,
                                 ceilings=False, progress=False, rounds=2, seed=5)
    assert (result.path / "summary.md").is_file()
    return result.path


def copy_of(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / run.name
    shutil.copytree(run, target)
    return target


def checked(run: Path) -> tuple[int, str]:
    result = invoke("check", str(run))
    return result.exit_code, result.output


# --- planting one error ------------------------------------------------------------------------

def plant_csv(run: Path, phase: str, column: str, change: Callable[[str], str]) -> int:
    """Change COLUMN of the first PHASE row of measurements.csv; its row number (header 1)."""
    path = run / "measurements.csv"
    with path.open(newline="") as stream:
        reader = csv.DictReader(stream)
        rows = list(reader)
        names = list(reader.fieldnames or [])
    index = next(i for i, row in enumerate(rows) if row["phase"] == phase and row[column])
    rows[index][column] = change(rows[index][column])
    with path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=names)
        writer.writeheader()
        writer.writerows(rows)
    return index + 2


def plant_summary(run: Path, line_of: Callable[[str], bool],
                  change: Callable[[str], str]) -> int:
    """Change the first summary.md line LINE_OF picks; its line number."""
    path = run / "summary.md"
    lines = path.read_text().splitlines()
    number = next(n for n, line in enumerate(lines, start=1) if line_of(line))
    changed = change(lines[number - 1])
    assert changed != lines[number - 1]
    lines[number - 1] = changed
    path.write_text("\n".join(lines) + "\n")
    return number


def plant_record(run: Path, which: Callable[[dict[str, Any]], bool], text: str) -> int:
    """Print TEXT for the first figure record WHICH picks, in figures.json and on its line of
    summary.md alike (a report that printed a wrong number); its line number."""
    stored = json.loads((run / FIGURES_FILE).read_text())
    record = next(record for record in stored["figures"] if which(record))
    path = run / "summary.md"
    lines = path.read_text().splitlines()
    printed = lines[record["line"] - 1]
    lines[record["line"] - 1] = re.sub(rf"(?<![\d.,]){re.escape(record['text'])}(?![\d.,])",
                                       text, printed, count=1)
    assert lines[record["line"] - 1] != printed
    path.write_text("\n".join(lines) + "\n")
    record["text"] = text
    (run / FIGURES_FILE).write_text(json.dumps(stored))
    return int(record["line"])


def plant_run_json(run: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = run / "run.json"
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document, indent=2))


def tripled_seconds(text: str) -> str:
    """The first time printed in TEXT, three times as long (as the report would print it)."""
    found = SECONDS.search(text)
    assert found is not None
    value = printed_seconds(found.group(0)).value
    return text[:found.start()] + format_seconds(3 * value) + text[found.end():]


def first_measured_case(document: dict[str, Any], framework: str, device: str) -> dict[str, Any]:
    cell = next(cell for cell in document["cells"] if cell["cell"]["framework"] == framework
                and cell["cell"]["device"] == device)
    return cell["cases"][0]


# --- fresh runs check clean --------------------------------------------------------------------

def test_a_fresh_matmul_run_recomputes_to_the_same_figures(matmul_run: Path) -> None:
    audit = audit_run(matmul_run, round_orders)
    assert audit.mismatches == [], [m.line() for m in audit.mismatches]
    assert audit.unverifiable == [], [u.line() for u in audit.unverifiable]
    assert audit_run(matmul_run).mismatches == []
    assert audit.by_file["measurements.csv"] > 50 and audit.by_file["summary.md"] >= 5
    assert "GFLOP/s" in (matmul_run / "summary.md").read_text()  # a rate was there to check
    code, output = checked(matmul_run)
    assert code == 0, output
    assert re.search(r"checked \d+ figures in 1 run: 0 mismatches, 0 unverifiable$",
                     output.strip()), output


def test_a_fresh_run_in_rounds_on_cpu_and_gpu_recomputes_to_the_same_figures(
        fault_run: Path) -> None:
    audit = audit_run(fault_run, round_orders)
    assert audit.mismatches == [], [m.line() for m in audit.mismatches]
    assert audit.unverifiable == [], [u.line() for u in audit.unverifiable]
    # The fastest table, the ranking, GPU vs CPU, the round medians and orders were all read.
    assert audit.by_file["summary.md"] >= 40 and audit.by_file["run.json"] >= 10
    code, output = checked(fault_run)
    assert code == 0, output


# --- measurements.csv ---------------------------------------------------------------------------

def test_a_changed_sample_in_the_csv_is_named_with_its_row(matmul_run: Path,
                                                           tmp_path: Path) -> None:
    run = copy_of(matmul_run, tmp_path)
    row = plant_csv(run, "warm", "seconds", lambda text: repr(2 * float(text)))
    code, output = checked(run)
    assert code == 1, output
    assert "seconds of warm sample 1 stored" in output
    assert f"(measurements.csv row {row})" in output
    assert "1 mismatch," in output


def test_a_tripled_flop_count_in_the_csv_is_named_with_its_row(matmul_run: Path,
                                                               tmp_path: Path) -> None:
    run = copy_of(matmul_run, tmp_path)
    row = plant_csv(run, "warm", "flops", lambda text: repr(3 * float(text)))
    code, output = checked(run)
    assert code == 1, output
    assert re.search(rf"numpy cpu fp32 n=\d+: flops stored .* \(measurements.csv row {row}\)",
                     output), output


def test_a_row_with_no_case_and_a_case_with_no_rows_are_mismatches(matmul_run: Path,
                                                                    tmp_path: Path) -> None:
    run = copy_of(matmul_run, tmp_path)
    plant_csv(run, "warm", "param_n", lambda text: "999")  # that row now names no case
    code, output = checked(run)
    assert code == 1, output
    assert "row stored a row" in output and "no such case in run.json" in output
    assert "warm rows stored" in output  # its case is one warm row short


# --- run.json's derived fields ------------------------------------------------------------------

def test_a_changed_sample_of_a_later_round_is_named_with_its_pooled_number(
        fault_run: Path, tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)
    first_round = len(first_measured_case(
        json.loads((run / "run.json").read_text()), "fake", "cpu")["rounds"][0]["samples"])

    def change(document: dict[str, Any]) -> None:
        case = first_measured_case(document, "fake", "cpu")
        case["rounds"][1]["samples"][0] *= 3

    plant_run_json(run, change)
    code, output = checked(run)
    assert code == 1, output
    assert re.search(rf"fake cpu ok size=1: seconds of warm sample {first_round + 1} stored .*"
                     r"\(measurements\.csv row \d+\)", output), output


def test_the_plans_flop_count_given_to_a_share_of_it_is_named(fault_run: Path,
                                                              tmp_path: Path) -> None:
    # The audit's 3x rate: a case merged over rounds given the plan's FLOPs, not its call's.
    run = copy_of(fault_run, tmp_path)

    def change(document: dict[str, Any]) -> None:
        first_measured_case(document, "fakegpu", "cuda:0")["extra"]["flops_per_call"] *= 3

    plant_run_json(run, change)
    code, output = checked(run)
    assert code == 1, output
    assert "fakegpu cuda:0 ok size=1: flops_per_call vs the spec's count of the case" in output
    assert "fakegpu cuda:0 ok size=1: flops stored" in output  # the CSV no longer agrees


def test_an_incomplete_flop_count_unmarked_in_the_csv_is_named(fault_run: Path,
                                                                tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)
    plant_run_json(run, lambda document: first_measured_case(document, "fake", "cpu")[
        "extra"].update(flops_coverage={"complete": False, "uncounted_ops": {"aten.lstm": 1},
                                        "uncounted_param_share": 0.5}))
    code, output = checked(run)
    assert code == 1, output
    assert "fake cpu ok size=1: flops_gaps (the count is a lower bound) stored nothing" in output


def test_energy_that_disagrees_with_its_own_power_and_time_is_named(fault_run: Path,
                                                                    tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)
    record = {"status": "ok", "counter": "rapl", "window_s": 2.0, "calls": 100,
              "joules_total": 50.0, "watts_mean": 25.0, "joules_per_call": 0.5,
              "joules_per_step": 0.5, "steps_per_call": 1}

    def consistent(document: dict[str, Any]) -> None:
        first_measured_case(document, "fake", "cpu")["extra"]["energy"] = {"host": record}

    plant_run_json(run, consistent)
    assert checked(run)[0] == 0
    plant_run_json(run, lambda document: first_measured_case(document, "fake", "cpu")[
        "extra"]["energy"]["host"].update(joules_per_call=1.5))
    code, output = checked(run)
    assert code == 1, output
    assert "fake cpu ok size=1 host energy: joules per call (= W x window / calls) stored" in output


def test_round_orders_must_be_the_seeded_permutations_that_ran(fault_run: Path,
                                                              tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)
    plant_run_json(run, lambda document: document["round_orders"].reverse())
    code, output = checked(run)
    assert code == 1 and "round orders vs the seeded shuffle" in output, output
    plant_run_json(run, lambda document: document["round_orders"][0].append(
        document["round_orders"][0][0]))
    code, output = checked(run)
    assert code == 1 and "round 1 order: distinct indices" in output, output


# --- summary.md ---------------------------------------------------------------------------------

def test_a_changed_median_in_the_fastest_table_is_named_with_its_line(
        fault_run: Path, tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)
    in_table = False

    def fastest_row(line: str) -> bool:
        nonlocal in_table
        in_table = in_table or line.startswith("### Fastest framework x device")
        return in_table and line.startswith("| 2 |")

    number = plant_summary(run, fastest_row, lambda line: "|".join(
        [*line.split("|")[:3], " " + tripled_seconds(line.split("|")[3].strip()) + " ",
         *line.split("|")[4:]]))
    code, output = checked(run)
    assert code == 1, output
    # the table's text no longer prints the figure its record holds, on that line
    assert re.search(rf"fake\S* \S+ ok size 2: median per step printed .* \(summary\.md line "
                     rf"{number}\), recomputed", output), output


def test_a_changed_ratio_in_a_ranking_line_is_named_with_its_line(fault_run: Path,
                                                                  tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)

    def tripled_ratio(line: str) -> str:
        found = re.search(r"\(([\d.,]+x) the fastest", line)
        assert found is not None
        value = printed_ratio(found.group(1)).value
        return line.replace(found.group(1), format_ratio(3 * value), 1)

    number = plant_summary(run, lambda line: line.startswith("- **cpu**, variant ok"),
                           tripled_ratio)
    code, output = checked(run)
    assert code == 1, output
    assert "times the fastest printed" in output and f"(summary.md line {number})" in output


def test_a_changed_gpu_speedup_is_named(fault_run: Path, tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)

    def tripled(line: str) -> str:
        found = re.search(r"\| ([\d.,]+x)( at [^|]+)? \|", line)
        assert found is not None
        value = printed_ratio(found.group(1)).value
        return line.replace(found.group(1), format_ratio(3 * value), 1)

    number = plant_summary(run, lambda line: "| best GPU cell vs best CPU cell |" in line,
                           tripled)
    code, output = checked(run)
    assert code == 1, output
    assert "GPU/CPU speedup at the largest size printed" in output
    assert f"(summary.md line {number})" in output


def test_a_changed_rate_is_named_with_its_line(matmul_run: Path, tmp_path: Path) -> None:
    run = copy_of(matmul_run, tmp_path)
    rate = next(record for record in json.loads((run / FIGURES_FILE).read_text())["figures"]
                if record["name"] == peak_share.RATE and record["unit"] == "GFLOP/s")
    number = plant_record(run, lambda record: record == rate,
                          f"{3 * rate['value']:,.1f}")
    code, output = checked(run)
    assert code == 1, output
    assert re.search(rf"numpy cpu fp32 n=\d+: rate GFLOP/s printed [\d.,]+ GFLOP/s \(summary\.md "
                     rf"line {number}\), recomputed [\d.,]+ GFLOP/s", output), output


def test_a_reworded_ceilings_table_keeps_every_figure_verified(
        matmul_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = copy_of(matmul_run, tmp_path)
    monkeypatch.setattr(peak_share, "CEILINGS_HEADING", "### Rates against the probes")
    drawn = invoke("report", str(run))
    assert drawn.exit_code == 0, drawn.output
    assert "### Rates against the probes" in (run / "summary.md").read_text()
    records = [record for record in json.loads((run / FIGURES_FILE).read_text())["figures"]
               if record["family"] == peak_share.RATE_FAMILY]
    # A probe figure joins them only where a rate passed the probe (a warning): whether it
    # does depends on the load while this machine probed, not on the heading.
    assert {peak_share.RATE, peak_share.CEILING, peak_share.SHARE} <= \
        {record["name"] for record in records} <= \
        {peak_share.RATE, peak_share.CEILING, peak_share.SHARE, peak_share.PROBE}
    audit = audit_run(run)
    assert not audit.mismatches and not audit.unverifiable, [
        item.line() for item in [*audit.mismatches, *audit.unverifiable]]
    stored = json.loads((run / FIGURES_FILE).read_text())
    stored["figures"] = [r for r in stored["figures"] if r["family"] != peak_share.RATE_FAMILY]
    (run / FIGURES_FILE).write_text(json.dumps(stored))
    assert audit.checked - audit_run(run).checked == len(records)


def test_a_number_in_exponent_notation_is_named_with_its_line(fault_run: Path,
                                                             tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)

    def exponent(line: str) -> str:  # the same number, written as no table should write it
        found = re.search(r"\| ([\d.]+) MiB \|", line)
        assert found is not None
        return line.replace(found.group(0), f"| {float(found.group(1)):.2e} MiB |", 1)

    number = plant_summary(run, lambda line: line.startswith("| fault-rated |"), exponent)
    code, output = checked(run)
    assert code == 1, output
    assert "number in exponent notation printed" in output
    assert f"(summary.md line {number})" in output
    # and the record's own text is no longer printed on its line
    assert "host peak RSS printed" in output


def energy_record(watts: float) -> dict[str, Any]:
    """A consistent counter record: 2 s, 100 calls of one step, 5 W idle."""
    return {"status": "ok", "counter": "fake counter", "source": "timed samples",
            "window_s": 2.0, "calls": 100, "joules_total": 2.0 * watts, "watts_mean": watts,
            "joules_per_call": 0.02 * watts, "joules_per_step": 0.02 * watts,
            "steps_per_call": 1, "idle_watts": 5.0,
            "joules_per_call_above_idle": 0.02 * (watts - 5.0),
            "joules_per_step_above_idle": 0.02 * (watts - 5.0)}


def with_energy(document: dict[str, Any]) -> None:
    """Consistent energy records on every case (this machine has no energy counters)."""
    for cell in document["cells"]:
        gpu = cell["cell"]["device"] == "cuda:0"
        for case in cell["cases"]:
            case["extra"]["energy"] = ({"device": energy_record(25.0)} if gpu
                                       else {"host": energy_record(10.0)})


def test_the_energy_lines_the_report_prints_are_recomputed(fault_run: Path,
                                                           tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)
    plant_run_json(run, with_energy)
    drawn = invoke("report", str(run))
    assert drawn.exit_code == 0, drawn.output
    assert "per step over the energy window (25 W mean x 20 ms per step" in (
        run / "summary.md").read_text()
    code, output = checked(run)
    assert code == 0, output
    number = plant_record(run, lambda record: record["name"] == "mean power"
                          and record["text"] == "25", "75")
    code, output = checked(run)
    assert code == 1, output
    assert f"mean power printed 75 (summary.md line {number}), recomputed 25" in output


ENERGY_WORDS = {"CASE_SENTENCE": "{where} drew {joules}/step; window {window} s, {window_step}"
                                  " a step at {watts} W ({source}, {counter}",
                "ABOVE_IDLE_PHRASE": ", {above} over {idle} W at rest",
                "TIMED_PHRASE": ") and took {timed} a step ({pooled})",
                "SPEED_PHRASE": "the GPU runs {ratio} {way}",
                "ENERGY_PHRASE": " and spends {ratio} {way} ({gpu} vs {cpu})"}


def test_reworded_energy_lines_keep_every_figure_verified(fault_run: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    run = copy_of(fault_run, tmp_path)
    plant_run_json(run, with_energy)
    for name, words in ENERGY_WORDS.items():
        monkeypatch.setattr(energy_view, name, words)
    drawn = invoke("report", str(run))
    assert drawn.exit_code == 0, drawn.output
    text = (run / "summary.md").read_text()
    assert "energy window (" not in text and "W mean x" not in text and " drew " in text
    records = [record for record in json.loads((run / FIGURES_FILE).read_text())["figures"]
               if record["family"] == energy_view.ENERGY_FAMILY]
    pairs = sum(record["name"] in (energy_view.SPEED, energy_view.ENERGY_RATIO)
                for record in records)
    assert pairs >= 2 and len(records) > 4 * pairs
    audit = audit_run(run)
    assert not audit.mismatches and not audit.unverifiable, [
        item.line() for item in [*audit.mismatches, *audit.unverifiable]]
    stored = json.loads((run / FIGURES_FILE).read_text())
    stored["figures"] = [r for r in stored["figures"] if r["family"] != energy_view.ENERGY_FAMILY]
    (run / FIGURES_FILE).write_text(json.dumps(stored))
    assert audit.checked - audit_run(run).checked == len(records) + pairs  # each way too


def test_a_reworded_memory_table_keeps_every_figure_verified(
        fault_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = copy_of(fault_run, tmp_path)
    monkeypatch.setattr(memory_view.MemoryView, "heading", "Memory at its highest")
    drawn = invoke("report", str(run))
    assert drawn.exit_code == 0, drawn.output
    assert "## Memory at its highest" in (run / "summary.md").read_text()
    records = [record for record in json.loads((run / FIGURES_FILE).read_text())["figures"]
               if record["family"] == memory_view.MEMORY_FAMILY]
    assert len(records) == 3 * 4  # the three peaks of each of the 4 cells, "-" included
    audit = audit_run(run)
    assert not audit.mismatches and not audit.unverifiable, [
        item.line() for item in [*audit.mismatches, *audit.unverifiable]]
    stored = json.loads((run / FIGURES_FILE).read_text())
    stored["figures"] = [r for r in stored["figures"] if r["family"] != memory_view.MEMORY_FAMILY]
    (run / FIGURES_FILE).write_text(json.dumps(stored))
    assert audit.checked - audit_run(run).checked == len(records)


def test_a_reworded_device_time_section_keeps_every_figure_verified(
        fault_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = copy_of(fault_run, tmp_path)
    monkeypatch.setattr(devicetime_view, "DEVICETIME_HEADING", "### {name}, by the clock")
    monkeypatch.setattr(devicetime_view, "BEST_INTRO", "Each device's quickest variant:")
    drawn = invoke("report", str(run))
    assert drawn.exit_code == 0, drawn.output
    text = (run / "summary.md").read_text()
    assert ", by the clock" in text and "quickest variant:" in text
    assert ": where the time goes, measured\n" not in text

    def ours(record: dict[str, Any]) -> bool:
        return record["family"] == devicetime_view.BEST_FAMILY or record["name"] in (
            "wall per step", devicetime_view.COLD_IN_WARM)

    records = [r for r in json.loads((run / FIGURES_FILE).read_text())["figures"] if ours(r)]
    best = [r for r in records if r["name"].endswith(f" {devicetime_view.BEST}")]
    assert len(best) >= 2 and len(records) > len(best) * 2
    audit = audit_run(run)
    assert not audit.mismatches and not audit.unverifiable, [
        item.line() for item in [*audit.mismatches, *audit.unverifiable]]
    stored = json.loads((run / FIGURES_FILE).read_text())
    stored["figures"] = [r for r in stored["figures"] if not ours(r)]
    (run / FIGURES_FILE).write_text(json.dumps(stored))
    # each figure, and each best variant's claim that no variant of its kind is faster
    assert audit.checked - audit_run(run).checked == len(records) + len(best)


def test_a_figure_the_runs_cannot_place_is_unverifiable_not_a_mismatch(
        fault_run: Path, tmp_path: Path) -> None:
    run = copy_of(fault_run, tmp_path)
    stored = json.loads((run / FIGURES_FILE).read_text())
    record = next(record for record in stored["figures"]
                  if record["name"] == "ranked median per step"
                  and record["subject"]["device"] == "cuda:0")
    record["subject"]["framework"] = "ghost"  # a record of a cell no run measured
    (run / FIGURES_FILE).write_text(json.dumps(stored))
    number = record["line"]
    code, output = checked(run)
    assert code == 0, output
    assert "unverifiable: ghost cuda:0 ok" in output and f"summary.md line {number}" in output
    assert re.search(r"0 mismatches, 1 unverifiable$", output.strip()), output


# --- the command's edges and the rules' parts ---------------------------------------------------

def test_a_path_that_is_not_a_run_folder_is_bad_input(tmp_path: Path) -> None:
    result = invoke("check", str(tmp_path))
    assert result.exit_code == 2
    assert "not a harness run folder" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_printed_figures_are_compared_within_their_printed_precision() -> None:
    # At a rounding boundary a last-bit difference between two computations of one median
    # may round the other way: printed 2.31 or 2.32, neither is a mismatch...
    boundary = 2.315e-3
    assert printed_seconds("2.31 ms").matches(boundary * (1 + 1e-12), format_seconds)
    assert printed_seconds("2.32 ms").matches(boundary * (1 - 1e-12), format_seconds)
    # ...but a value past the boundary, or one digit off, is.
    assert not printed_seconds("2.31 ms").matches(2.316e-3, format_seconds)
    assert not printed_seconds("2.33 ms").matches(boundary, format_seconds)
    assert printed_ratio("3.48x").matches(3.4849, format_ratio)
    assert not printed_ratio("3.48x").matches(3.49, format_ratio)
    assert printed_ratio("5,397x").matches(5397.4, format_ratio)


def test_exponent_notation_is_found_where_a_reader_takes_it_for_a_figure() -> None:
    assert exponent_figures("| jax cpu | 1e+03 us | 1.02e+03 MiB |") == ["1e+03 us",
                                                                       "1.02e+03 MiB"]
    assert exponent_figures("| 9.2e+09 |") == ["9.2e+09"]
    # A command line in a code span and a check's error bound in prose are not figures.
    assert exponent_figures("command `harness compare --param lr=1e-3`") == []
    assert exponent_figures("max rel error 4.2e-07 over 65 probes") == []
    assert exponent_figures("run 20261124-081608-mnist-wide-de2e3f") == []


def test_the_crossover_is_the_size_from_which_the_gpu_stays_ahead() -> None:
    curve: list[tuple[float, float | None, float | None]] = [
        (16.0, 1.0, 2.0), (64.0, 2.0, 1.5), (256.0, 9.0, 3.0)]
    assert crossover(curve) == ("crossover", 64.0)
    assert crossover([(16.0, 1.0, 0.5), (64.0, 2.0, 3.0)]) == ("mixed", None)
    assert crossover([(16.0, 1.0, 0.5)]) == ("gpu-always", 16.0)
    assert crossover([(16.0, None, 0.5)]) == ("no-overlap", None)


def test_every_run_folder_stored_under_docs_checks_clean(tmp_path: Path) -> None:
    """docs/ quotes these runs: each tarball's run folders, and the example report drawn from
    them, recompute without a mismatch."""
    import tarfile

    docs = Path(__file__).resolve().parents[1] / "docs"
    tarballs = sorted(docs.rglob("*.tar.gz"))
    assert tarballs, "docs/ holds no stored runs to check"
    for tarball in tarballs:
        with tarfile.open(tarball) as archive:
            members = [member for member in archive.getmembers()
                       if member.isfile() or member.isdir()]  # no links out of tmp_path
            archive.extractall(tmp_path / tarball.stem, members=members)
    runs = sorted({path.parent for path in tmp_path.rglob("run.json")})
    assert runs
    audit = Audit()
    for run in runs:
        audit = audit.add(audit_run(run))
    summary = docs / "example" / "report" / "summary.md"
    if summary.is_file():
        audit = audit.add(audit_summary(summary, runs))
    assert audit.checked > 1000
    assert not audit.mismatches, [item.line() for item in audit.mismatches[:5]]

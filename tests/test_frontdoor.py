"""What a first run shows and what scripts can trust: the verdict at the end of `compare`, the
exit codes of a report that cannot be written and of a diff with nothing to compare, and help
texts that say what the code does. Fake frameworks only (tests/fakes): no framework imported.
"""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness.report
from harness import reporting
from harness.analysis.noise import ONE_ROUND
from harness.cli import app
from harness.core import registry
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn

# Two fake frameworks on cpu and cuda:0: fake has no GPU (an unavailable cell, a warning),
# fakegpu has one, so the run has a GPU/CPU verdict, a fastest cell and a ranking on cpu.
TWO_FRAMEWORKS = ["compare", "--workload", "fault", "--variant", "ok", "--quick",
                  "--framework", "fake,fakegpu", "--device", "cpu,cuda:0", "--no-ceilings"]


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": None})  # piped, unfolded


def only_run_dir(out_dir: Path) -> Path:
    (run_dir,) = [path for path in out_dir.iterdir() if path.is_dir()]
    return run_dir


def test_compare_ends_with_the_summary_verdict_and_the_report_path(out_dir: Path) -> None:
    result = invoke(*TWO_FRAMEWORKS, "--out", str(out_dir))
    assert result.exit_code == 0, result.output
    run_dir = only_run_dir(out_dir)
    lines = result.output.rstrip().splitlines()
    assert lines[-1] == f"report: {run_dir / 'report.html'}"
    assert (run_dir / "report.html").is_file()
    # The answer first: the verdicts up to the compact table, the warnings after it.
    start = lines.index("verdict:") + 1
    table = next(i for i, line in enumerate(lines) if line.startswith("fault: median per call"))
    verdict = lines[start:table] + [line for line in lines if line.startswith("  warning: ")]
    # One machine: named once, in the workload's heading, not in every line under it.
    machine = json.loads((run_dir / "run.json").read_text())["host"]["machine_label"]
    assert verdict[0] == f"fault on {machine}:"
    assert any(line.startswith("  GPU vs CPU: ") for line in verdict), verdict
    assert any(line.startswith("  fastest at ") for line in verdict), verdict
    (ranking,) = [line for line in verdict if line.startswith("  ranking on cpu at ")]
    assert same_ranking(ranking, summary_text(run_dir)), ranking
    warnings = [line for line in verdict if line.startswith("  warning: ")]
    assert any("unavailable" in line and "fake cuda:0" in line for line in warnings), verdict
    # summary.md's sentences less what the terminal says once: the machine and the clause
    # of a one-round run (its rounds line says it); every figure of them is in summary.md.
    summary = summary_text(run_dir)
    shortened = summary.replace(f" on {machine}", "").replace(f": {machine}, ", ": ").replace(
        f"; {ONE_ROUND}", "").replace(f" ({ONE_ROUND})", "")
    for line in verdict[1:]:
        if line.startswith("  ranking on "):
            continue  # its own form (same_ranking above)
        if line.startswith("  warning: SUSPECT timing ("):  # the short form's heading
            assert "- SUSPECT timing: " in summary  # each reason in full there
            continue
        if line.startswith("  warning: noisy ("):  # one line for every noisy cell
            for cell in line.split("): ", 1)[1].split("; "):
                assert f"noisy (IQR/median > 10%): {cell}" in shortened, cell
            continue
        sentence = line.strip().removeprefix("warning: ")
        # A SUSPECT cell (a loaded machine) is named only: its reason is in the warnings.
        sentence = sentence.removeprefix("GPU vs CPU: ").split("; SUSPECT timing: ")[0]
        assert sentence in shortened, line


def summary_text(run_dir: Path) -> str:
    return (run_dir / "summary.md").read_text().replace("**", "").replace("`", "")


# summary.md's ranked entry ('2. fake 187 us/call (1.01x the fastest; within the noise vs #1)')
# and the terminal's ('~ fake 187 us (1.01x)'; the first: 'fakegpu 186 us/call').
SUMMARY_ENTRY = re.compile(r"\d+\. (\S+) (\S+ \S+?)/\w+(?: \((\S+) the fastest; (\w+))?")
TERMINAL_ENTRY = re.compile(r"(?:([<~?]) )?(\S+) (\S+ \S+?)(?:/\w+| \((\S+)\))")


def same_ranking(terminal: str, summary: str) -> bool:
    """Whether the terminal's ranking line lists summary.md's cpu ranking: the frameworks in
    its order with its figures, each sign the gap's words ('<' beyond, '~' within the noise)."""
    (words,) = [line for line in summary.splitlines() if line.startswith("- cpu, ")]
    signs = {"beyond": "<", "within": "~"}
    expected = [(signs.get(gap, "?") if ratio else None, framework, median, ratio or None)
                for framework, median, ratio, gap in SUMMARY_ENTRY.findall(words)]
    listed = terminal.split(": ", 1)[1].split("; ")[0]
    found = [(sign or None, framework, median, ratio or None)
             for sign, framework, median, ratio in TERMINAL_ENTRY.findall(listed)]
    return len(expected) >= 2 and found == expected


def test_a_report_that_cannot_be_written_exits_3_with_one_line(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(*args: object, **kwargs: object) -> list[Path]:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(harness.report, "draw_report", disk_full)
    result = invoke(*TWO_FRAMEWORKS, "--out", str(out_dir))
    assert result.exit_code == reporting.EXIT_REPORT_FAILED == 3, result.output
    failures = [line for line in result.output.splitlines() if "report failed" in line]
    assert len(failures) == 1 and "No space left on device" in failures[0], result.output
    run_dir = only_run_dir(out_dir)
    assert str(run_dir) in failures[0]
    # The measurements were saved before the drawing failed, and the verdict still printed.
    assert len(json.loads((run_dir / "run.json").read_text())["cells"]) == 4
    assert (run_dir / "measurements.csv").is_file() and "verdict:" in result.output
    assert "report: " not in result.output


def test_diff_of_runs_without_a_shared_case_exits_2_and_says_what_each_holds(
        tmp_path: Path) -> None:
    runs = []
    for framework in ("fake", "fakegpu"):
        out = tmp_path / framework
        ran = invoke("compare", "--workload", "fault", "--variant", "ok", "--quick",
                     "--framework", framework, "--device", "cpu", "--no-ceilings",
                     "--no-report", "--out", str(out))
        assert ran.exit_code == 0, ran.output
        assert "verdict:" in ran.output and "report: " not in ran.output  # no report drawn
        runs.append(only_run_dir(out))
    for extra in ([], ["--json"]):
        result = invoke("diff", str(runs[0]), str(runs[1]), *extra)
        assert result.exit_code == 2, result.output
        (line,) = result.output.strip().splitlines()
        assert line.startswith("harness: error: the runs share no case")
        assert f"A {runs[0].name} holds fault (2 cases: variant ok; fake on cpu; size 1, 2)" \
            in line
        assert f"B {runs[1].name} holds fault (2 cases: variant ok; fakegpu on cpu" in line


def test_framework_help_lists_every_registered_framework() -> None:
    result = CliRunner().invoke(app, ["compare", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    words = " ".join(result.output.replace("│", " ").split())
    listed = ", ".join(registry.FRAMEWORKS)
    assert listed in words, words
    assert {"fakegpu", "keras-jax", "jax"} <= set(registry.FRAMEWORKS)  # plugins and builtins

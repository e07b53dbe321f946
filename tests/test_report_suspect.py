"""SUSPECT in the report: a case stored with a suspect reason (bimodal calls, drift from
calibration) is named in summary.md, in the warnings and beside the fastest cell it affects."""

from __future__ import annotations

from pathlib import Path

from harness.report import render_report, verdicts_without_drawing
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn
from tests.synthetic_runs import (
    CPU_MACHINE,
    SIZES,
    cpu_seconds,
    make_case,
    make_result,
    write_fixture_run,
)

BIMODAL = "bimodal single calls: 50% at 1.0 ms, 50% at 8.0 ms"


def test_a_suspect_case_is_named_in_the_summary(tmp_path: Path) -> None:
    torch_cases = [make_case({"n": n}, cpu_seconds(n), suspect=BIMODAL if n == 4096 else "")
                   for n in SIZES]
    results = [make_result("matmul", "torch", "cpu", torch_cases),
               make_result("matmul", "numpy", "cpu",
                           [make_case({"n": n}, cpu_seconds(n) * 2) for n in SIZES])]
    run = write_fixture_run(tmp_path / "suspect", CPU_MACHINE, results)
    render_report([run], tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    warnings = [line for line in summary.splitlines() if line.startswith("- SUSPECT timing:")]
    assert len(warnings) == 1, summary  # only the one case stored as suspect
    assert f"{CPU_MACHINE}, torch cpu fp32" in warnings[0] and BIMODAL in warnings[0]
    assert "4,096" in warnings[0] or "4096" in warnings[0]
    # The headline size's fastest cell is the suspect one: its verdict says so, by the cell's
    # name only (issue 64: the demo's glance was ~20 lines of SUSPECT reasons), the reason in
    # the warnings lower down.
    glance = summary.split("## At a glance")[1].split("\n## ")[0]
    assert "SUSPECT timing: torch cpu (see the warnings)" in glance
    assert BIMODAL not in glance
    # The terminal's verdict names the suspect cell and leaves its reason to the warnings,
    # where it is said in full once.
    terminal = [line.text for line in verdicts_without_drawing([run])]
    (fastest,) = [line for line in terminal if line.startswith("  fastest at ")]
    assert fastest.endswith("; SUSPECT timing: torch cpu (see the warnings)"), fastest
    (warning,) = [line for line in terminal if line.startswith("  warning: SUSPECT timing:")]
    assert BIMODAL in warning


def test_no_suspect_case_means_no_suspect_line(tmp_path: Path) -> None:
    results = [make_result("matmul", "torch", "cpu",
                           [make_case({"n": n}, cpu_seconds(n)) for n in SIZES])]
    run = write_fixture_run(tmp_path / "clean", CPU_MACHINE, results)
    render_report([run], tmp_path / "out")
    assert "SUSPECT" not in (tmp_path / "out" / "summary.md").read_text()

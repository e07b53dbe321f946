"""Issue 64, part 5: compare and advise within 100 columns, tables whole when piped, one unit
per workload, each repeated line said once, and charts that mark SUSPECT bars and say what
their colours and numbers are.

Two planted runs are answered the way `harness compare` ends (harness.commands.epilogue):
the demo's shape (mnist-wide, five frameworks on a CPU, a call of 39 steps, three cells SUSPECT
with a contention reason of ~890 characters, the GPU cells unavailable) and an own model's on
a GPU machine (three frameworks on cuda:0 and torch on the CPU, two batch sizes: a memory fit
but no prediction for every GPU cell). advise's width is read from its CLI run in
tests/test_advise_outcome.py.
"""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from rich.console import Console

from harness import api
from harness.commands import epilogue, output
from harness.commands.shortwarnings import LONGEST_TEXT, MORE, short_warnings, suspect_kinds
from harness.core import registry
from harness.data.store import load_run
from harness.report import render_report
from harness.terminal import fitted_table
from tests.lines_only import draw_no_figures
from tests.synthetic_runs import make_case, make_result, write_run
from tests.terminal_lines import too_wide, unfolded
from tests.test_report import private_matplotlib  # noqa: F401 - autouse: matplotlib's cache
from tests.test_terminal_answer import HOST as GPU_HOST
from tests.test_terminal_answer import model_case

WIDTH = 100
ELLIPSIS = "…"
PARAMS = {"batch_size": [32], "epochs": 1, "train_samples": 20000, "test_samples": 1000,
          "data": ""}
STEPS = 39  # per timed call: a block of the demo's steps
# What a busy 2-core VM stores for a contended case: seventeen processes named, the attempts,
# a round's bimodal calls (the warning was 893 characters).
CONTENDED = ("other processes used 1.7 of 2 cores ("
             + ", ".join(f"python ({1000 + index}) 0.1" for index in range(17))
             + ") during the 41.2 s this case was timed; contended in all 3 attempts; round 2: "
               "bimodal single calls: 71% near 9.1 ms, 29% near 14.2 ms")
DEMO_CELLS = (("torch", 0.0112, ""), ("jax", 0.0091, CONTENDED),
              ("keras-tensorflow", 0.0131, CONTENDED), ("keras-jax", 0.0102, CONTENDED),
              ("keras-torch", 0.0201, ""))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = []
    for framework, seconds, suspect in DEMO_CELLS:
        case = make_case({**PARAMS, "batch_size": 32}, seconds,
                         extra={"steps_per_call": STEPS, "accuracy": 0.95}, suspect=suspect)
        results += [make_result("mnist-wide", framework, "cpu", [case], variant="as-written",
                                params=PARAMS),
                    make_result("mnist-wide", framework, "cuda:0", [], variant="as-written",
                                status="unavailable", params=PARAMS,
                                reason=f"{framework} sees no CUDA device (a CPU-only build)")]
    return write_run(tmp_path_factory.mktemp("demo") / "run", results, None, PARAMS,
                     workload="mnist-wide", sweep="batch_size", work=lambda case: {"flops": 2e8})


MODEL_SIZES = [8, 64]


@pytest.fixture(scope="module")
def gpu_model_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch on cpu, torch / jax / keras-tensorflow on cuda:0, at two batch sizes."""
    params = {"batch": MODEL_SIZES, "what": "train"}
    results = [make_result("model-lstm", framework, device,
                           [model_case(device, batch) for batch in MODEL_SIZES],
                           variant="as-written", params=params)
               for framework, device in (("torch", "cpu"), ("torch", "cuda:0"),
                                         ("jax", "cuda:0"), ("keras-tensorflow", "cuda:0"))]
    return write_run(tmp_path_factory.mktemp("model") / "run", results, GPU_HOST, params,
                     workload="model-lstm", sweep="batch",
                     work=lambda case: {"flops": 1e6 * case["batch"]})


def answer(run_dir: Path, monkeypatch: pytest.MonkeyPatch, columns: int | None,
           details: bool = False) -> list[str]:
    """What `harness compare` prints after RUN_DIR's last cell, not to a terminal, with
    $COLUMNS at COLUMNS (None: unset, as a script's pipe); verdicts computed without drawing."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(columns))
    written = io.StringIO()
    stdout = Console(file=written, width=columns or 160, force_terminal=False)
    for module in (epilogue, output):
        monkeypatch.setattr(module, "console", stdout)
    document = load_run(run_dir)
    epilogue.print_run(registry.load_workload(document.workload),
                       api.RunResult(run_dir, document.cells, document), None, "", details)
    return written.getvalue().splitlines()


def verdict_block(lines: list[str]) -> list[str]:
    """From 'verdict:' to the compact table's title."""
    start = lines.index("verdict:")
    title = next(index for index, line in enumerate(lines) if ": median per " in line)
    return lines[start:title]


def table_rows(lines: list[str]) -> list[str]:
    """The compact table's lines between its second and third rule."""
    rules = [index for index, line in enumerate(lines) if line and set(line) == {"─"}]
    return lines[rules[1] + 1:rules[2]]


@pytest.mark.parametrize("run", ["demo_run", "gpu_model_run"])
def test_every_line_fits_100_columns(run: str, request: pytest.FixtureRequest,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    lines = answer(request.getfixturevalue(run), monkeypatch, WIDTH)
    assert not too_wide(lines, WIDTH), "\n".join(too_wide(lines, WIDTH))
    assert ELLIPSIS not in "\n".join(lines)


def test_the_demo_says_suspect_short_and_each_reason_once(
        demo_run: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lines = unfolded(answer(demo_run, monkeypatch, WIDTH), WIDTH)
    text = "\n".join(lines)
    # The contention's processes are in summary.md's warnings (and --details), not in the
    # terminal, nor in summary.md's glance.
    assert "python (1003)" not in text
    draw_no_figures(monkeypatch)
    render_report([demo_run], tmp_path / "report")
    summary = (tmp_path / "report" / "summary.md").read_text()
    glance, rest = summary.split("## At a glance")[1].split("\n## ", 1)
    assert "python (1003)" not in glance and "SUSPECT timing: jax cpu" in glance
    assert sum("python (1003)" in line for line in rest.splitlines()) == 3  # one per cell
    suspect = [line for line in lines if "SUSPECT timing (" in line]
    assert len(suspect) == 1 and "summary.md" in suspect[0]
    cases = lines[lines.index(suspect[0]) + 1]
    assert all(f"{name} cpu as-written" in cases for name in ("jax", "keras-tensorflow",
                                                              "keras-jax"))
    assert cases.endswith(": other processes used 1.7 of 2 cores; bimodal single calls")
    detailed = "\n".join(answer(demo_run, monkeypatch, WIDTH, details=True))
    assert "python (1003)" in detailed  # --details: every word


def test_the_demo_table_and_verdict_share_the_step(demo_run: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lines = unfolded(answer(demo_run, monkeypatch, WIDTH), WIDTH)
    title = next(line for line in lines if ": median per " in line)
    assert title.startswith("mnist-wide: median per step ± IQR")
    assert f"a timed call = {STEPS} steps" in title
    fastest = next(line for line in lines if line.startswith("  fastest at "))
    per_step = fastest.split("jax cpu (")[1].split(" per step")[0]
    (jax_row,) = [line for line in table_rows(lines) if line.split()[1:3] == ["jax", "cpu"]]
    assert f" {per_step} ±" in jax_row, (fastest, jax_row)


def test_piped_tables_keep_every_cell_whole(demo_run: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Without $COLUMNS (a log, CI): one line per case, names whole, nothing ellipsized."""
    lines = answer(demo_run, monkeypatch, None)
    rows = table_rows(lines)
    assert len(rows) == 2 * len(DEMO_CELLS)
    assert sum(row.split()[:2] == ["as-written", "keras-tensorflow"] for row in rows) == 2
    assert ELLIPSIS not in "\n".join(lines)


def test_a_narrow_table_wraps_names_and_never_cuts_them() -> None:
    rows = [("as-written", "keras-tensorflow", "cuda:0", "32", "unavailable", "-", "-", "-"),
            ("jacobian-forward", "torch", "cpu", "100", "ok", "27.7 s ±1.2 s", "3 GFLOP/s",
             "pass")]
    header = ("variant", "framework", "device", "batch", "status", "median ± IQR", "rate",
              "check")
    lines = fitted_table("title", header, rows, width=80, whole={3, 5})
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert lines[5].split() == ["as-", "keras-", "cuda:0", "32", "unavailable", "-", "-", "-"]
    text = "\n".join(lines)
    assert "keras-" in text and "tensorflow" in text and "27.7 s ±1.2 s" in text
    assert ELLIPSIS not in text


def test_the_gpu_model_says_memory_once_and_no_warnings_in_the_verdict(
        gpu_model_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = unfolded(answer(gpu_model_run, monkeypatch, WIDTH), WIDTH)
    verdict = verdict_block(lines)
    memory = [line for line in lines if "no prediction of the largest batch" in line]
    assert len(memory) == 1, memory
    # The CPU cell's host fit has the same reason: one line for the four cells.
    assert memory[0].startswith("  memory: cpu (torch), cuda:0 (torch, jax, keras-tensorflow): ")
    assert not any("warnings: none" in line for line in verdict)
    assert "warnings: none" in lines[lines.index(verdict[-1]):]  # after the table instead
    assert sum("cuda:0" in row for row in table_rows(lines)) == 3 * len(MODEL_SIZES)


# --- the short warnings ----------------------------------------------------------------------

def test_suspect_kinds_drop_figures_processes_and_retries() -> None:
    assert suspect_kinds(CONTENDED) == "other processes used 1.7 of 2 cores; bimodal single calls"
    assert suspect_kinds("median per call is 2.2x what calibration measured (120 us)") == (
        "median per call is 2.2x what calibration measured")


def test_a_long_warning_is_cut_with_where_the_rest_is() -> None:
    long = "  warning: error on box: torch cpu: " + "RuntimeError: " + "x " * 200
    (shown,) = short_warnings([long])
    assert len(shown) <= len("  ") + LONGEST_TEXT and shown.endswith(MORE)
    noisy = [f"  warning: noisy (IQR/median > 10%): {cell} at size=1 (worst 20%); gaps smaller "
             "than the spread there are not meaningful." for cell in ("a cpu ok", "b cpu ok")]
    (one,) = short_warnings(noisy)
    assert one.count("gaps smaller") == 1 and "a cpu ok" in one and "b cpu ok" in one


# --- the charts ------------------------------------------------------------------------------

def advice_rows() -> pd.DataFrame:
    """A GPU panel: one fix recommended, one not confirmed for a SUSPECT timing, one slower."""
    return pd.DataFrame([
        {"variant": "cuda-graph", "standing": "recommended", "speedup": 4.0, "doubt": ""},
        {"variant": "compiled", "standing": "not confirmed", "speedup": 2.1,
         "doubt": "its timing is SUSPECT (compiled: other processes used 1.7 of 2 cores)"},
        {"variant": "fp64", "standing": "did not help", "speedup": 0.5, "doubt": ""},
    ]).assign(device="cuda:0", cpu_best_s=5e-4, baseline_s=1e-3)


def test_the_advise_chart_labels_its_bars_and_explains_its_colours() -> None:
    import matplotlib.pyplot as plt

    from harness.report.views.advice import SUSPECT_KEY, _panel

    figure, axis = plt.subplots()
    try:
        _panel(axis, advice_rows(), "torch on cuda:0")
        (bars,) = axis.containers
        labels = [text.get_text() for text in axis.texts]
        assert labels == ["4x", "2.1x SUSPECT", "0.5x"], labels
        assert [patch.get_hatch() for patch in bars.patches] == [None, "xx", None] or \
            [bool(patch.get_hatch()) for patch in bars.patches] == [False, True, False]
        legend = axis.get_legend()
        assert legend is not None
        keys = [text.get_text() for text in legend.get_texts()]
        assert {"recommended", "not confirmed", "did not help", SUSPECT_KEY} <= set(keys)
    finally:
        plt.close(figure)


def test_the_overview_hatches_suspect_bars_with_a_legend(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.report import figures
    from harness.report.views.overview import FAILED_KEY, SUSPECT_KEY, OverviewView

    base = {"experiment": "e", "machine": "box", "variant": "as-written", "size_label": "32",
            "q1_s": 0.0009, "q3_s": 0.0011, "noisy": False, "status": "ok", "reason": ""}
    table = pd.DataFrame([
        {**base, "framework": "torch", "device": "cpu", "device_kind": "cpu", "shown": True,
         "median_s": 0.001, "suspect": ""},
        {**base, "framework": "jax", "device": "cpu", "device_kind": "cpu", "shown": True,
         "median_s": 0.001, "suspect": CONTENDED},
        {**base, "framework": "jax", "device": "cuda:0", "device_kind": "gpu", "shown": False,
         "median_s": float("nan"), "suspect": "", "status": "unavailable", "reason": "no GPU"},
    ])
    drawn: list[Any] = []
    monkeypatch.setattr(figures, "save", lambda figure, path: drawn.append(figure) or path)
    context = SimpleNamespace(name="e", stem="e", sweep="batch_size", unit="step",
                              framework_colors={})
    OverviewView().draw(table, context, tmp_path)
    (figure,) = drawn
    (axis,) = figure.axes
    texts = [text.get_text() for text in axis.texts]
    assert any(text.endswith("(SUSPECT)") for text in texts), texts
    assert sum(bool(patch.get_hatch()) for patch in axis.patches) == 2  # SUSPECT + unavailable
    (legend,) = figure.legends
    assert [text.get_text() for text in legend.get_texts()] == [SUSPECT_KEY, FAILED_KEY]

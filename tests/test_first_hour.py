"""Issue 48, item 4: a newcomer's first hour. A bad model file answered before any framework
import, and the commands a newcomer types first (env, diff, list) within $COLUMNS."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.run import runner
from harness.workloads.usermodel.precheck import (
    SourceProblem,
    bound_names,
    near_misses,
    parse_source,
    precheck,
)

FRAMEWORKS = ("torch", "tensorflow", "jax", "keras")


def test_a_syntax_error_is_told_once_without_a_child_or_a_framework(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "mymodel.py"
    model.write_text("import torch\n\n\ndef model(:\n    return torch.nn.Linear(4, 2)\n")

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("a child process was started for a file whose text is wrong")

    monkeypatch.setattr(runner, "run_json_child", no_child)
    # No process of any kind, not only the inspection child: the text is read and compiled,
    # nothing started (asserted, not timed: a loaded machine makes any time bound a guess).
    monkeypatch.setattr(subprocess, "Popen", no_child)
    imported = {name for name in FRAMEWORKS if name in sys.modules}
    for command in (["compare", "--device", "cpu", "--out", str(tmp_path / "out")], ["list"]):
        result = CliRunner().invoke(app, [*command, "--model", str(model)])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "mymodel.py:4: SyntaxError: " in lines[0], lines
        assert "line 4" not in lines[0] and "def model(:" in lines[0]  # the line named once
    assert {name for name in FRAMEWORKS if name in sys.modules} == imported
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, expected", [
    ("def model():\n\treturn 1\n        pass\n", "mymodel.py:3: TabError: "),
    ("return 3\n", "mymodel.py:1: SyntaxError: 'return' outside function"),
    ("import torch\ndef modle():\n    pass\ndef inputs(b, rng):\n    pass\n", "no builder"),
    ("def init(seed):\n    pass\ndef apply(p, x):\n    pass\n", "no inputs(batch, rng)"),
])
def test_what_the_text_shows_is_told_from_the_text(tmp_path: Path, text: str,
                                                    expected: str) -> None:
    model = tmp_path / "mymodel.py"
    model.write_text(text)
    with pytest.raises(SourceProblem, match="^" + re.escape(expected)):
        precheck(model)


@pytest.mark.parametrize("text", [
    "from mylib import *\n",  # could bind anything
    "from mylib import model, inputs\n",
    "import mylib\nmodel = mylib.build\ninputs = mylib.make\n",
    "try:\n    from a import model\nexcept ImportError:\n    def model(): pass\n"
    "def inputs(b, rng): pass\n",
    "def __getattr__(name): pass\n",
    "globals()['model'] = lambda: None\n",
    "def init(seed): pass\napply = None\ninputs = None\n",
])
def test_what_the_text_cannot_show_is_left_to_the_inspector(tmp_path: Path, text: str) -> None:
    model = tmp_path / "mymodel.py"
    model.write_text(text)
    precheck(model)  # no SourceProblem: the child inspector judges these


def test_names_bound_inside_functions_and_classes_do_not_count(tmp_path: Path) -> None:
    model = tmp_path / "mymodel.py"
    model.write_text("import numpy as np\nclass Net:\n    model = 1\n"
                     "def helper():\n    inputs = 2\n    return inputs\n")
    assert bound_names(parse_source(model)) == {"np", "Net", "helper"}
    with pytest.raises(SourceProblem, match=r"^no builder"):
        precheck(model)


# --- the commands a newcomer types first, within $COLUMNS ---------------------------------------

WIDTH = 100
# What the probes of a CPU-only machine answered (harness.measure.probe), the longest first.
PROBED = [
    {"framework": "keras-tensorflow", "installed": True,
     "version": "keras 3.15.1 on tensorflow 2.21.0",
     "devices": [{"name": "cpu", "description": "Intel(R) Xeon(R) Processor"}],
     "threads": {"intra_op": 0, "inter_op": 0, "TF_NUM_INTRAOP_THREADS": ""}},
    {"framework": "keras-jax", "installed": True, "version": "keras 3.15.1 on jax 0.10.2 "
     "(jaxlib 0.10.2)", "devices": [{"name": "cpu", "description": "Intel(R) Xeon(R)"}],
     "threads": {"cores": 2, "XLA_FLAGS": "", "preallocate": "false",
                 "matmul_precision": "highest"}},
    {"framework": "ghost", "installed": False,
     "reason": "needs a package this machine lacks: pip install 'crossframe-harness[ghost]' "
               "or the framework's own wheel for this platform and Python version"},
]


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


def test_env_fits_columns_and_says_the_host_before_any_probe_returns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import envreport

    said: list[str] = []
    answers = {info["framework"]: info for info in PROBED}
    monkeypatch.setattr(envreport.registry, "framework_names", lambda: list(answers))

    def probe(name: str) -> dict:
        assert any(line.startswith("host: ") for line in said)  # printed before the wait
        return answers[name]

    monkeypatch.setattr(envreport, "probe_framework", probe)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    envreport.print_env(said.append, as_json=False)
    text = "\n".join(said)
    assert not too_wide(text), too_wide(text)
    assert "  keras-tensorflow: keras 3.15.1 on tensorflow 2.21.0; devices: cpu" in text
    assert "ghost: not installed (needs a package" in text
    # In the order of the registry, whichever probe answered first.
    listed = said[next(i for i, line in enumerate(said) if line.startswith("frameworks")):]
    order = [line.split(":")[0].strip() for line in listed if line.startswith("  ")
             and not line.startswith("    ")]
    assert order == list(answers)
    result = CliRunner().invoke(app, ["env", "--json"])
    assert result.exit_code == 0 and '"keras-jax"' in result.output


def test_diff_fits_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.synthetic_runs import cell_result, write_run

    def samples(center: float, seed: int) -> list[float]:
        return [center * (1 + 0.01 * ((seed * 7 + index) % 5)) for index in range(12)]

    names = [("keras-tensorflow", "steps-per-execution"), ("torch", "compile-max-autotune")]
    run_a = write_run(tmp_path / "a", [
        cell_result(framework, {64: samples(1e-3, 1), 4096: samples(2.0, 2)}, variant=variant)
        for framework, variant in names])
    run_b = write_run(tmp_path / "b", [
        cell_result(framework, {64: samples(3e-3, 3), 4096: samples(2.0, 4)}, variant=variant)
        for framework, variant in names])
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    result = CliRunner().invoke(app, ["diff", str(run_a), str(run_b),
                                      "--fail-on-regression", "10"])
    assert result.exit_code == 1, result.output  # the 3x slower cases
    assert not too_wide(result.output), too_wide(result.output)
    assert "slower" in result.output and "REGRESSION" in result.output
    assert "+200.0%" in result.output  # figures are never cut


def test_list_fits_columns_and_keeps_its_matrix_readable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    result = CliRunner().invoke(app, ["list"])
    assert result.exit_code == 0
    assert not too_wide(result.output), too_wide(result.output)
    lines = result.output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("mnist-small:"))
    row = next(line for line in lines[start:] if line.strip().startswith("steps-per-execution"))
    # Headers over two lines where one would not fit; the rows keep one line each.
    header = lines[lines.index(row) - 10: lines.index(row)]
    assert any("(on request)" in line for line in header), header
    assert row.split()[:3] == ["steps-per-execution", "-", "[3]"], row


# --- a CPU-only run says what to run next for the GPU answer ------------------------------------

def test_a_cpu_only_run_ends_with_the_command_for_the_gpu_answer(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["compare", "--workload", "fault", "--framework", "fake", "--device", "cpu",
            "--variant", "ok", "--quick", "--no-ceilings", "--no-report", "--out", str(out_dir)]
    monkeypatch.setattr(sys, "argv", ["harness", *args])  # the command run.json records
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (run_dir,) = [path for path in out_dir.iterdir() if path.is_dir()]
    lines = result.output.rstrip().splitlines()
    assert lines[-1] == f"results: {run_dir}"
    first = next(i for i, line in enumerate(lines) if line.startswith("next, for the GPU"))
    assert first >= len(lines) - 4, lines  # among the last lines, before the run's path
    assert ("`harness compare --workload fault --framework fake --variant ok --quick "
            f"--no-ceilings --no-report --out {out_dir}` on a machine with an NVIDIA GPU") \
        in lines[first]  # the same command, its devices left to the GPU machine
    assert f"`harness report {run_dir} GPU_RUN --out merged --html`" in lines[first + 1]


def test_the_next_step_is_the_gpu_here_or_nothing_once_a_gpu_cell_ran() -> None:
    from harness.analysis.nextstep import next_step_lines
    from harness.data.results import CellResult, RunDocument
    from harness.spec import Cell

    def document(devices: list[str], gpus: list[str]) -> RunDocument:
        cells = [CellResult(cell=Cell("matmul", "fp32", "torch", device)) for device in devices]
        return RunDocument(command=["harness", "compare", "--device", "cpu"], cells=cells,
                           host={"gpus": gpus})

    here = next_step_lines(document(["cpu"], ["NVIDIA H100 80GB HBM3"]), "RUN")
    assert here == ["next, for the GPU answer: this machine has NVIDIA H100 80GB HBM3; run "
                    "again with --device cpu,cuda"]
    assert next_step_lines(document(["cpu", "cuda:0"], ["NVIDIA H100 80GB HBM3"]), "RUN") == []
    elsewhere = next_step_lines(document(["cpu"], []), "RUN")
    assert "run `harness compare` on a machine with an NVIDIA GPU" in elsewhere[0]


# --- figure titles and legends true of the run they describe ------------------------------------

def test_the_overview_says_lighter_bars_are_cpu_only_beside_gpu_bars() -> None:
    import pandas as pd

    from harness.report.views.overview import device_key

    assert device_key(pd.DataFrame({"device_kind": ["cpu", "cpu"]})) == "every cell on the CPU"
    assert device_key(pd.DataFrame({"device_kind": ["gpu"]})) == "every cell on a GPU"
    assert "lighter bars: CPU" in device_key(pd.DataFrame({"device_kind": ["cpu", "gpu"]}))


def test_a_first_call_faster_than_the_warm_median_is_explained_from_the_run() -> None:
    import pandas as pd

    from harness.report.views.breakdown import cold_faster_reason

    # Round 1 warm at 50 ms, later rounds slower: the pooled median (75 ms) is above the first
    # call (56 ms per step) because the later rounds ran slower.
    rounds = pd.Series({"median_s": 0.075, "medians_by_round": {0: 0.050, 1: 0.129, 2: 0.074},
                        "suspect": "", "steps_per_call": 125})
    said = cold_faster_reason(rounds, "step", "call")
    assert "round 1, whose warm median was 50 ms per step" in said
    assert "later ones ran slower (129 ms, 74 ms)" in said
    # One round: a whole call's mean against the median of its blocks.
    blocks = pd.Series({"median_s": 0.075, "medians_by_round": {0: 0.075},
                        "suspect": "other processes used 1.2 of 2 cores", "steps_per_call": 625})
    said = cold_faster_reason(blocks, "step", "call")
    assert "one whole call (its time / its 625 steps: a mean" in said
    assert "a warm sample is one block of steps" in said and "(SUSPECT)" in said
    loops = pd.Series({"median_s": 1e-3, "medians_by_round": {}, "suspect": "",
                       "steps_per_call": float("nan")})
    assert "a warm sample is a loop of calls" in cold_faster_reason(loops, "call", "call")


def test_one_variant_is_drawn_as_the_first_call_against_a_warm_one(tmp_path: Path) -> None:
    from harness.report import render_report
    from tests.synthetic_runs import CPU_MACHINE, make_case, make_result, write_fixture_run

    case = {"batch_size": 32}
    results = [make_result("mnist-small", framework, "cpu",
                           [make_case(case, median, cold=cold,
                                      extra={"steps_per_call": 64})], variant="as-written")
               for framework, median, cold in (("torch", 0.4, 0.3), ("jax", 0.2, 0.9))]
    run = write_fixture_run(tmp_path / "run", CPU_MACHINE, results, workload="mnist-small",
                            sweep="batch_size", params={"batch_size": [32]})
    out = tmp_path / "out"
    render_report([run], out)
    summary = (out / "summary.md").read_text()
    assert "![mnist-small: the first call against a warm one](mnist-small-breakdown.png)" \
        in summary
    assert "variant differences" not in summary


# --- docs/own-model.md: the file it opens with is the file that runs ---------------------------

ROOT = Path(__file__).resolve().parents[1]


def test_own_model_opens_with_the_torch_example_file_and_lists_every_example() -> None:
    doc = (ROOT / "docs" / "own-model.md").read_text()
    first = doc.index("```python\n") + len("```python\n")
    block = doc[first:doc.index("```", first)]
    header, code = block.split("\n", 1)
    assert header == "# examples/models/torch_classifier.py"
    assert code == (ROOT / "examples" / "models" / "torch_classifier.py").read_text()
    assert doc.index("## A torch file") < doc.index("## A Keras file") < doc.index("## A JAX file")
    for example in sorted((ROOT / "examples" / "models").glob("*.py")):
        assert f"| `{example.name}` |" in doc, example.name
    # The table names every function the inspector and the backends look up in a file.
    for name in ("model()", "init(seed)", "inputs(batch, rng)", "targets(batch, rng)",
                 "loss(output, target)", "optimizer(parameters)", "optimizer()",
                 "step(net, *inputs)", "tolerance", "HARNESS_KERAS_STEP"):
        assert f"| `{name}" in doc, name


def test_a_misspelled_hook_is_named_not_ignored(tmp_path: Path) -> None:
    """optimiser() for optimizer() used to run with the default without a word, and `list`
    said the training was 'from your file'; input() for inputs() is named in the error."""
    typo = tmp_path / "typo.py"
    typo.write_text("def model():\n    return None\n\ndef input(batch, rng):\n    return None\n")
    with pytest.raises(SourceProblem, match=r"defines input\(\), not inputs\(\)"):
        precheck(typo)
    assert near_misses({"optimiser", "helper"}, {"model", "inputs"}) == [
        "your file defines optimiser(), not optimizer(): the harness reads optimizer() only"]
    assert near_misses({"optimizer"}, {"model", "inputs", "optimizer"}) == []

"""Issue 48, item 4: a newcomer's first hour. A bad model file answered before any framework
import, and the commands a newcomer types first (env, diff, list) within $COLUMNS."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.workloads.usermodel import plan
from harness.workloads.usermodel.precheck import SourceProblem, bound_names, parse_source, precheck

FRAMEWORKS = ("torch", "tensorflow", "jax", "keras")


def test_a_syntax_error_is_told_once_without_a_child_or_a_framework(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "mymodel.py"
    model.write_text("import torch\n\n\ndef model(:\n    return torch.nn.Linear(4, 2)\n")

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("a child process was started for a file whose text is wrong")

    monkeypatch.setattr(plan, "run_json_child", no_child)
    imported = {name for name in FRAMEWORKS if name in sys.modules}
    start = time.perf_counter()
    for command in (["compare", "--device", "cpu", "--out", str(tmp_path / "out")], ["list"]):
        result = CliRunner().invoke(app, [*command, "--model", str(model)])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "mymodel.py:4: SyntaxError: " in lines[0], lines
        assert "line 4" not in lines[0] and "def model(:" in lines[0]  # the line named once
    # Generous for a loaded machine: the text is read and compiled, nothing started.
    assert time.perf_counter() - start < 2.0
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

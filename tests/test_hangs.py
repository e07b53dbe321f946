"""Hangs caught where they are: a helper child's timeout names the function of the user's file
that hung, a model file's inspection follows --timeout, a size whose preparation hangs fails
alone, a cell's timeout names its size, and a timed-out cell is not run again in later rounds.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from harness import api
from harness.run.context import RunContext
from harness.run.hangs import hung_in
from harness.run.runner import run_json_child
from harness.spec import Cell, Status
from tests.cli_in_process import run_cli_in_process

PROJECT_ROOT = Path(__file__).resolve().parent.parent
HELPER = PROJECT_ROOT / "tests" / "fakes" / "helper_child.py"

STACK = """Fatal Python error: x
Current thread 0x00007f (most recent call first):
  File "/m/model.py", line 9 in spin
  File "/m/model.py", line 12 in inputs
  File "/h/source.py", line 90 in call_user
  File "/h/inspect.py", line 56 in make_inputs
"""


def test_the_stack_names_the_users_function_and_the_line_it_was_at() -> None:
    assert hung_in(STACK, Path("/m/model.py")) == "inputs() (model.py:9)"
    assert hung_in(STACK, Path("/elsewhere.py")) == ""
    at_import = 'Current thread 0x1 (most recent call first):\n  File "/m/model.py", line 3 ' \
                'in <module>\n'
    assert hung_in(at_import, Path("/m/model.py")) == "importing model.py (line 3)"


def test_a_hung_helper_child_is_named_by_its_stack_before_it_is_killed() -> None:
    started = time.monotonic()
    got, why_not = run_json_child("tests.fakes.helper_child", ["hang"],
                                  Cell("fault", "hang", "fake", "cpu"), 2.0,
                                  RunContext.from_environment(), HELPER)
    # The helper runs as __main__: its outermost frame is the module's own.
    assert got is None and why_not.startswith("timed out after 2 s in importing helper_child.py")
    assert time.monotonic() - started < 60


TORCH_HANGS_AT = """
    import time
    import numpy as np
    import torch.nn as nn

    def model():
        return nn.Sequential(nn.Linear(3, 2))

    def inputs(batch, rng):
        while batch in {hanging}:
            {wait}
        return rng.standard_normal((batch, 3), dtype=np.float32)
"""
# How a hang waits: a busy loop holding the GIL (the hardest to interrupt), or asleep, which
# hangs just as well without taking a core from the rest of the suite for its whole timeout.
SPINNING, SLEEPING = "pass", "time.sleep(0.05)"


def model_file(folder: Path, hanging: tuple[int, ...], wait: str = SPINNING) -> Path:
    path = folder / "spinning.py"
    path.write_text(textwrap.dedent(TORCH_HANGS_AT).replace("{hanging}", repr(set(hanging)))
                    .replace("{wait}", wait))
    return path


@pytest.mark.slow  # a torch inspection child
def test_a_hung_inputs_in_the_inspection_follows_the_timeout_and_is_named(
        tmp_path: Path) -> None:
    model = model_file(tmp_path, (2,))  # the inspection calls inputs(2, rng) first
    started = time.monotonic()
    ran = run_cli_in_process("compare", "--model", str(model), "--device", "cpu", "--quick",
                             "--timeout", "10", "--out", str(tmp_path / "out"))
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "timed out after 10 s in inputs() (spinning.py:" in ran.stderr
    assert time.monotonic() - started < 200  # not the fixed 300 s of before


@pytest.mark.slow  # torch children and workers
def test_a_size_whose_preparation_hangs_fails_alone(tmp_path: Path) -> None:
    model = model_file(tmp_path, (5,), SLEEPING)
    out = tmp_path / "out"
    # The whole preparer's limit, waited out once; the children fork from warm torch
    # processes, so 15 s is several times what sizes 2 and 7 and their cell need loaded.
    ran = run_cli_in_process("compare", "--model", str(model), "--device", "cpu", "--quick",
                             "--no-ceilings", "--no-report", "--sizes", "2,5,7",
                             "--timeout", "15", "--out", str(out), env={"OMP_NUM_THREADS": "1"})
    [run_file] = out.glob("*/run.json")
    [cell] = json.loads(run_file.read_text())["cells"]
    by_batch = {case["case"]["batch"]: case for case in cell["cases"]}
    assert by_batch[2]["status"] == "ok" and by_batch[7]["status"] == "ok", ran.stderr
    assert by_batch[5]["status"] == "error"
    assert "preparing batch 5: timed out after 15 s in inputs() (spinning.py:" in \
        by_batch[5]["reason"]
    prepared = json.loads((run_file.parent / "model" / "prepared.json").read_text())
    assert "preparing" not in prepared and set(prepared["sizes"]) == {"2", "5", "7"}


def test_a_timed_out_cell_is_not_run_again_in_later_rounds(out_dir: Path) -> None:
    run = api.plan("fault", frameworks="fake", devices="cpu", variants="ok,hang", quick=True,
                   out=out_dir, rounds=3, seed=1, timeout_s=4.0)
    result = api.execute(run, ceilings=False, progress=False)
    cells = {cell.cell.variant: cell for cell in result.cells}
    hung, fine = cells["hang"], cells["ok"]
    assert hung.status == Status.TIMEOUT
    assert "at size 2" in hung.reason  # the size that hung (size 1 came first)
    assert hung.reason.endswith("timed out in round 1; not retried")
    assert fine.cost is not None and fine.cost.workers == 3
    orders = result.document.round_orders
    assert [len(order) for order in orders] == [2, 1, 1]

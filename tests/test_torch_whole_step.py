"""reduce-overhead compiles the whole training step (issue 24, item 4): it runs, and matches eager.

CUDA graphs exist on a GPU only, so on a CPU the same compiled step runs under mode="default".
The checks import torch, so each runs in a child process (tests/torch_checks.py): the test
process never imports a framework, as the harness's own parent never does.
"""

from __future__ import annotations

import shutil

import pytest

from tests.in_subprocess import installed, run_check

pytestmark = pytest.mark.skipif(not installed("torch"), reason="torch is not installed")


@pytest.mark.skipif(not any(shutil.which(name) for name in ("g++", "c++", "clang++")),
                    reason="torch.compile on CPU needs a C++ compiler")
def test_the_compiled_whole_step_is_one_graph_and_matches_eager() -> None:
    run_check("tests.torch_checks", "check_the_compiled_whole_step_matches_eager()",
              framework="torch")


def test_the_foreach_adam_is_torch_adam() -> None:
    run_check("tests.torch_checks", "check_the_foreach_adam_is_torch_adam()", framework="torch")


def test_cuda_graph_record_says_why_not() -> None:
    """A skip torch logs reaches the record with its reason; counters alone still count."""
    run_check("tests.torch_checks", "check_cuda_graph_record_says_why_not()", framework="torch")

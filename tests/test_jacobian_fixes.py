"""The Jacobian fixes of a torch model file (issue 41): torch.autograd.functional.jacobian /
hessian called vectorized or in forward mode around the step, the file unchanged.

What the planner reads from the file's text, what the switch changes and restores, the same
numbers as written, and cells through workers (`harness compare --model` on the CPU, batch 2 of
seed 000's Jacobian net, as tests/test_fix_variants.py runs its variants).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.workloads.usermodel.spec import (
    JACOBIAN_PARTS,
    NO_JACOBIAN,
    autograd_functional_calls,
    conflict,
    fixes_for,
    spec_for_name,
)
from tests.in_subprocess import installed
from tests.test_usermodel import (
    PROJECT_ROOT,
    TORCH_MLP,
    cases,
    compare,
    refused_variants,
    write_model,
)

torch_only = pytest.mark.skipif(not installed("torch"), reason="torch not installed")
JACOBIAN_NET = PROJECT_ROOT / "examples" / "models" / "jacobian_net.py"


@pytest.mark.parametrize(("source", "found"), [
    ("import torch\ntorch.autograd.functional.jacobian(f, x)", ["jacobian"]),
    ("from torch.autograd.functional import jacobian as jac\njac(f, x)", ["jacobian"]),
    ("import torch.autograd.functional as F\nF.hessian(f, x)", ["hessian"]),
    ("from torch.autograd import functional\nfunctional.jacobian(f, x)", ["jacobian"]),
    ("from torch.func import jacrev, vmap\nvmap(jacrev(f))(x)", []),  # not these functions
    ("def jacobian(f, x):\n    return f(x)", []),  # a name of the file's own
    ("this is not python(", []),
])
def test_the_planner_reads_which_functional_calls_a_file_makes(source: str,
                                                               found: list[str]) -> None:
    assert autograd_functional_calls(source) == found


def test_a_file_without_such_calls_has_the_jacobian_fixes_refused() -> None:
    info = {"family": "torch", "frameworks": ("torch",)}
    without = spec_for_name("model-mlp", {**info, "autograd_functional": []})
    with_calls = spec_for_name("model-jac", {**info, "autograd_functional": ["jacobian"]})
    for part in JACOBIAN_PARTS:
        assert without.refusal(part, "torch", "cpu") == NO_JACOBIAN
        assert with_calls.refusal(part, "torch", "cuda:0") is None
    assert "two Jacobian strategies" in str(conflict(("jacobian-forward",
                                                       "jacobian-vectorized")))
    assert conflict(("jacobian-forward", "compiled")) is None
    assert fixes_for("torch", "cpu", cpu_cores=2)[:2] == ["jacobian-forward",
                                                           "jacobian-vectorized"]
    assert "jacobian-forward" not in fixes_for("jax", "cpu")


# --- the switch itself, in this process (torch) -------------------------------------------------

USER_FILE = """
    import torch
    from torch.autograd.functional import jacobian as jac

    def step(f, x):
        # vectorize=False given positionally: the fix must still set it
        return jac(f, x, False, False, False)

    def second(f, x):
        return torch.autograd.functional.hessian(f, x)
"""


@torch_only
def test_the_switch_changes_the_calls_and_restores_the_functions(tmp_path: Path) -> None:
    import torch  # noqa: PLC0415 - torch only where installed

    from harness.backends.torch.jacobians import JacobianSwitch  # noqa: PLC0415
    from harness.workloads.usermodel.source import load_user_module  # noqa: PLC0415

    user = load_user_module(write_model(tmp_path, USER_FILE, "jacuser.py"))
    original = torch.autograd.functional.jacobian
    weights = torch.randn(4, 3, dtype=torch.float64)

    def net(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ weights)

    x = torch.randn(5, 4, dtype=torch.float64)
    as_written = user.step(net, x)
    for name, arguments in JACOBIAN_PARTS.items():
        switch = JacobianSwitch(arguments, user)
        changed = switch.around(lambda: user.step(net, x))()
        assert torch.allclose(changed, as_written, rtol=0, atol=1e-12), name
        assert switch.record()["changed_calls_per_step"] == 1.0
        assert user.jac is original and torch.autograd.functional.jacobian is original
    # hessian calls jacobian itself: only the outer call is changed (forward mode would refuse
    # the inner one's create_graph=True).
    switch = JacobianSwitch(JACOBIAN_PARTS["jacobian-forward"], user)
    cubic = switch.around(lambda: user.second(lambda v: (v ** 3).sum(), x[0]))()
    assert torch.allclose(cubic, torch.diag(6 * x[0]))
    assert switch.changed_calls == 1


@torch_only
def test_forward_mode_really_runs_forward_mode(tmp_path: Path) -> None:
    """A function forward-mode AD cannot differentiate fails under jacobian-forward: the
    argument reached torch (a switch that changed nothing would pass as written)."""
    import torch  # noqa: PLC0415

    from harness.backends.torch.jacobians import JacobianSwitch  # noqa: PLC0415
    from harness.workloads.usermodel.source import load_user_module  # noqa: PLC0415

    class BackwardOnly(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            return x * 2

        @staticmethod
        def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            return grad * 2

    user = load_user_module(write_model(tmp_path, USER_FILE, "jacuser2.py"))
    x = torch.randn(3, dtype=torch.float64)
    assert torch.equal(user.step(BackwardOnly.apply, x), 2 * torch.eye(3, dtype=torch.float64))
    switch = JacobianSwitch(JACOBIAN_PARTS["jacobian-forward"], user)
    with pytest.raises(Exception, match=r"(?i)forward"):
        switch.around(lambda: user.step(BackwardOnly.apply, x))()


# --- through workers ---------------------------------------------------------------------------

@torch_only
@pytest.mark.slow  # real framework workers
def test_the_jacobian_fixes_pass_parity_and_say_what_they_changed(tmp_path: Path) -> None:
    # Batch 2, not 3: as written, the Jacobian is one backward pass per output (400 a sample),
    # and a torch cell records every op of its step for its features (18,000 at batch 3, an
    # 18 MB run.json written and read again through the run and its audit): 50 s of this test
    # alone on the 2-core VM at batch 3, 24 s at 2. Two samples still give the Jacobian its
    # blocks between samples.
    ran, document = compare(JACOBIAN_NET, tmp_path / "out", "--sizes", "2", "--variant",
                            "as-written,jacobian-forward,jacobian-vectorized")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    found = cases(document)
    written = found[("torch", "as-written", 2)]
    assert written["status"] == "ok" and "changed_calls_per_step" not in written["extra"]
    for part in JACOBIAN_PARTS:
        case = found[("torch", part, 2)]
        assert case["status"] == "ok" and case["check"]["passed"], case
        assert case["check"]["bound"] == written["check"]["bound"]  # float32's, unchanged
        assert case["extra"]["changed_calls_per_step"] == 1.0
        assert case["extra"]["autograd_functional"]["jacobian"]["vectorize"] is True
    # Forward mode differentiates 2 inputs, not 800 outputs: its FLOP count is far smaller.
    forward = found[("torch", "jacobian-forward", 2)]["extra"]["flops_per_call"]
    assert 0 < forward < written["extra"]["flops_per_call"] / 10


@torch_only
@pytest.mark.slow  # real framework workers
def test_a_model_without_jacobian_calls_gets_the_fix_refused(tmp_path: Path) -> None:
    model = write_model(tmp_path, TORCH_MLP)
    ran, document = compare(model, tmp_path / "out", "--sizes", "2",
                            "--variant", "as-written,jacobian-forward")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert refused_variants(document) == {"jacobian-forward": NO_JACOBIAN}


def test_the_seed_file_is_what_the_worker_tests_run() -> None:
    source = JACOBIAN_NET.read_text()
    assert autograd_functional_calls(source) == ["jacobian"]
    assert "vectorize" not in textwrap.dedent(source)  # as the seed wrote it: the defaults


def test_channels_last_is_refused_at_planning_for_a_model_without_4d_inputs() -> None:
    info = {"family": "torch", "frameworks": ("torch",)}
    flat = spec_for_name("model-flat", {**info, "inputs": [{"shape": [4, 1],
                                                             "dtype": "float32"}]})
    images = spec_for_name("model-img", {**info, "inputs": [{"shape": [4, 3, 8, 8],
                                                             "dtype": "float32"}]})
    assert "inputs have none ((4, 1))" in str(flat.refusal("channels-last", "torch", "cpu"))
    assert images.refusal("channels-last", "torch", "cpu") is None

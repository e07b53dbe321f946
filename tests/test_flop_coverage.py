"""FLOP counts that state their coverage: backends/torch/flops.py counts the fused RNN,
attention and transformer fast-path ops torch's FlopCounterMode has no formula for, to the
hand counts written out here; an op with no formula at all comes out `complete: False`, named,
with the share of the parameters only it reached; the worker stores the record beside the
count (extra['flops_coverage']); JAX's cost analysis never turns "unknown" into a number.

The test process never imports a framework: one child process runs every torch count
(`counts()`, below, printed as JSON) and the hand counts are checked here; the JAX checks run
in a child too; the worker-level tests run `harness compare --model` as users do.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.in_subprocess import installed, run_check
from tests.test_usermodel import cases, compare, write_model

PROJECT_ROOT = Path(__file__).resolve().parent.parent

needs_torch = pytest.mark.skipif(not installed("torch"), reason="torch is not installed")

# Dimensions of the models counted below, shared by the child (which builds them) and the
# hand counts (which multiply them out).
BATCH, STEPS, FEATURES, HIDDEN, OUTPUTS = 3, 20, 8, 16, 4
TOKENS = BATCH * STEPS  # time steps x batch: every RNN layer runs its matmuls once per token
WIDTH, HEADS, LENGTH = 32, 4, 16  # attention: model width, heads, sequence length (batch 2)


# --- hand counts: 2 FLOPs per multiply-add; elementwise work (biases, gates, softmax) is 0 -----

def matmul(rows: int, inner: int, cols: int) -> int:
    return 2 * rows * inner * cols


def lstm_forward_by_hand() -> int:
    """nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True) over 3 x 20 tokens,
    then Linear(32, 4) on the last step. Per token, layer and direction: the input matmul
    (in x 4H: the 4 gates) and the hidden one (H x 4H); layer 1 reads both directions (2H)."""
    gates = 4 * HIDDEN
    layer0 = 2 * (matmul(TOKENS, FEATURES, gates) + matmul(TOKENS, HIDDEN, gates))
    layer1 = 2 * (matmul(TOKENS, 2 * HIDDEN, gates) + matmul(TOKENS, HIDDEN, gates))
    return layer0 + layer1 + matmul(BATCH, 2 * HIDDEN, OUTPUTS)


def lstm_training_step_by_hand() -> int:
    """One training step (forward, backward, Adam): oneDNN's fused backward computes the data
    gradients (the forward's matmuls against the transposed weights) and the weight gradients
    (the same FLOPs again) of every layer: 3x the LSTM's forward. The head: forward, its weight
    gradient and its input's gradient (the LSTM's output needs one). Adam is elementwise."""
    lstm = lstm_forward_by_hand() - matmul(BATCH, 2 * HIDDEN, OUTPUTS)
    return 3 * lstm + 3 * matmul(BATCH, 2 * HIDDEN, OUTPUTS)


def gru_forward_by_hand() -> int:
    """nn.GRU(8, 16, num_layers=2) over 20 x 3 tokens (3 gates), then Linear(16, 4)."""
    gates = 3 * HIDDEN
    layer0 = matmul(TOKENS, FEATURES, gates) + matmul(TOKENS, HIDDEN, gates)
    layer1 = matmul(TOKENS, HIDDEN, gates) + matmul(TOKENS, HIDDEN, gates)
    return layer0 + layer1 + matmul(BATCH, HIDDEN, OUTPUTS)


def gru_training_step_by_hand() -> int:
    """On the CPU torch runs the GRU as per-step matmuls, so autograd computes only the
    gradients something needs: every weight gradient (1x the forward), the data gradients
    (1x) except layer 0's input (the model's input needs none) and each layer's hidden state
    at step 0 (the zeros it starts from need none)."""
    gates = 3 * HIDDEN
    rnn = gru_forward_by_hand() - matmul(BATCH, HIDDEN, OUTPUTS)
    skipped = matmul(TOKENS, FEATURES, gates) + 2 * matmul(BATCH, HIDDEN, gates)
    return 3 * rnn - skipped + 3 * matmul(BATCH, HIDDEN, OUTPUTS)


def attention_forward_by_hand() -> int:
    """q, k, v and output projections (Linear(32, 32) over 2 x 16 tokens) and scaled dot-product
    attention over 4 heads of 8: Q.K^T (16 x 8 by 8 x 16) and P.V (16 x 16 by 16 x 8) per
    sequence and head."""
    tokens, head = 2 * LENGTH, WIDTH // HEADS
    projections = 4 * matmul(tokens, WIDTH, WIDTH)
    attention = 2 * HEADS * (matmul(LENGTH, head, LENGTH) + matmul(LENGTH, LENGTH, head))
    return projections + attention


def attention_training_step_by_hand() -> int:
    """Backward: q, k, v projections need weight gradients only (the input needs none), the
    output projection both; the flash backward recomputes Q.K^T, then dP = dO.V^T,
    dV = P^T.dO, dQ = dS.K, dK = dS^T.Q: five products of the forward's size."""
    tokens, head = 2 * LENGTH, WIDTH // HEADS
    projection = matmul(tokens, WIDTH, WIDTH)
    product = 2 * HEADS * matmul(LENGTH, head, LENGTH)  # one attention product, all heads
    return (attention_forward_by_hand() + 3 * projection + 2 * projection + 5 * product)


def cudnn_lstm_by_hand() -> int:
    """cuDNN's LSTM(8, 16, num_layers=2, proj_size=5, bidirectional=True, bias=False) over 60
    tokens: per layer and direction the input matmul (in x 4H), the hidden one (P x 4H: the
    projected state) and the projection (H x P); layer 1 reads 2P."""
    gates, projected = 4 * HIDDEN, 5
    per_direction = [matmul(TOKENS, width, gates) + matmul(TOKENS, projected, gates)
                     + matmul(TOKENS, HIDDEN, projected) for width in (FEATURES, 2 * projected)]
    return 2 * sum(per_direction)


# --- the child's side: build, run and count (imports torch) -----------------------------------

def counts() -> dict[str, Any]:
    """Every torch count the tests check, by scenario (runs in the child process)."""
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    found: dict[str, Any] = {}
    for scenario in (_lstm_counts, _gru_counts, _attention_counts, _fast_path_counts,
                     _formula_counts, _uncounted_counts, _rule_counts, _vector_counts):
        found.update(scenario())
    return found


def print_counts() -> None:
    print(json.dumps(counts()))


def _record(counted: Any) -> dict[str, Any]:
    from harness.data.secondopinion import disputed_text, parts_of

    second = counted.second_opinion or {}
    return {"flops": counted.flops, "coverage": counted.coverage,
            "second opinion": {"parts": len(parts_of(second)),
                               "not compared": len(second.get("not_compared", [])),
                               "disputed": disputed_text({"flops_second_opinion": second})}}


def _training_step(net: Any, *inputs: Any) -> Any:
    """One step as the torch usermodel trains by default: Adam on the mean squared error."""
    import torch

    optimizer = torch.optim.Adam(net.parameters())
    target = net(*inputs).detach()

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(net(*inputs), target + 1).backward()
        optimizer.step()
    return step


def _both(name: str, net: Any, *inputs: Any) -> dict[str, Any]:
    """The forward (no grad) and one training step of `net`, counted."""
    import torch

    from harness.backends.torch.flops import count

    with torch.no_grad():
        forward = count(lambda: net(*inputs))
    return {f"{name} forward": _record(forward),
            f"{name} train": _record(count(_training_step(net, *inputs)))}


def _without(names: tuple[str, ...], call: Any) -> dict[str, Any]:
    """A count with our formulas for `names` taken out, as torch alone would see the call."""
    from harness.backends.torch import flops

    kept = {name: flops.FORMULAS.pop(name) for name in names}
    try:
        return _record(flops.count(call))
    finally:
        flops.FORMULAS.update(kept)


def _lstm_counts() -> dict[str, Any]:
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.LSTM(FEATURES, HIDDEN, num_layers=2, bidirectional=True,
                               batch_first=True)
            self.head = nn.Linear(2 * HIDDEN, OUTPUTS)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.rnn(x)[0][:, -1])

    net, x = Net(), torch.randn(BATCH, STEPS, FEATURES)
    found = _both("lstm", net, x)
    found["lstm train, torch's formulas alone"] = _without(
        ("aten.mkldnn_rnn_layer", "aten.mkldnn_rnn_layer_backward"), _training_step(net, x))
    lstm = sum(p.numel() for p in net.rnn.parameters())
    found["lstm parameter share"] = lstm / sum(p.numel() for p in net.parameters())
    return found


def _gru_counts() -> dict[str, Any]:
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.GRU(FEATURES, HIDDEN, num_layers=2)
            self.head = nn.Linear(HIDDEN, OUTPUTS)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.rnn(x)[0][-1])

    return _both("gru", Net(), torch.randn(STEPS, BATCH, FEATURES))


def _attention_counts() -> dict[str, Any]:
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v, self.out = (nn.Linear(WIDTH, WIDTH) for _ in range(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            def heads(t: torch.Tensor) -> torch.Tensor:
                return t.view(2, LENGTH, HEADS, WIDTH // HEADS).transpose(1, 2)
            mixed = nn.functional.scaled_dot_product_attention(
                heads(self.q(x)), heads(self.k(x)), heads(self.v(x)))
            return self.out(mixed.transpose(1, 2).reshape(2, LENGTH, WIDTH))

    net, x = Net(), torch.randn(2, LENGTH, WIDTH)
    found = _both("attention", net, x)
    found["attention train, torch's formulas alone"] = _without(
        ("aten._scaled_dot_product_flash_attention_for_cpu",
         "aten._scaled_dot_product_flash_attention_for_cpu_backward"), _training_step(net, x))
    return found


def _fast_path_counts() -> dict[str, Any]:
    """nn.MultiheadAttention and nn.TransformerEncoderLayer in eval under no_grad take fused
    ops (ours), with grad enabled the composite path (torch's formulas): the same math."""
    import torch
    from torch import nn

    from harness.backends.torch.flops import count

    x = torch.randn(2, LENGTH, WIDTH)
    attention = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True).eval()
    layer = nn.TransformerEncoderLayer(WIDTH, HEADS, 2 * WIDTH, batch_first=True).eval()
    found = {"mha composite": _record(count(lambda: attention(x, x, x)))}
    found["encoder composite"] = _record(count(lambda: layer(x)))
    with torch.no_grad():
        found["mha fast"] = _record(count(lambda: attention(x, x, x)))
        found["encoder fast"] = _record(count(lambda: layer(x)))
    return found


def _formula_counts() -> dict[str, Any]:
    """cuDNN's fused RNN cannot run here: its formula, on shapes alone, against the hand count
    and against the same LSTM and GRU run as per-step matmuls on the CPU."""
    import torch
    from torch import nn

    from harness.backends.torch.flops import OpArguments, count, fused_rnn, fused_rnn_backward

    shape = torch.empty(STEPS, BATCH, FEATURES, device="meta")
    lstm = {"mode": 2, "input": shape, "hidden_size": HIDDEN, "proj_size": 5,
            "num_layers": 2, "bidirectional": True}
    gru = {**lstm, "mode": 3, "proj_size": 0, "bidirectional": False}
    x = torch.randn(STEPS, BATCH, FEATURES)
    with torch.no_grad():
        decomposed_lstm = count(lambda: nn.LSTM(FEATURES, HIDDEN, 2, bias=False, proj_size=5,
                                                bidirectional=True)(x)).flops
        decomposed_gru = count(lambda: nn.GRU(FEATURES, HIDDEN, 2)(x)).flops
    return {"cudnn lstm": fused_rnn(OpArguments(lstm), None), "cpu lstm": decomposed_lstm,
            "cudnn lstm backward, weights too": fused_rnn_backward(
                OpArguments({**lstm, "output_mask": [False, True, True, True]}), None),
            "cudnn lstm backward, data only": fused_rnn_backward(
                OpArguments({**lstm, "output_mask": [True, True, True, False]}), None),
            "cudnn gru": fused_rnn(OpArguments(gru), None), "cpu gru": decomposed_gru}


def _uncounted_counts() -> dict[str, Any]:
    """FFT and a linear solve on a parameter: ops with no formula anywhere."""
    import torch
    from torch import nn

    from harness.backends.torch.flops import count

    class Spectral(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mix = nn.Parameter(torch.eye(FEATURES) * 2 + 0.1)  # reaches the solve only
            self.head = nn.Linear(FEATURES // 2 + 1, OUTPUTS)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            solved = torch.linalg.solve(self.mix, x.T).T
            return self.head(torch.fft.rfft(solved, dim=-1).abs())

    net, x = Spectral(), torch.randn(BATCH, FEATURES)
    with torch.no_grad():
        forward = count(lambda: net(x))
    return {"spectral forward": _record(forward), "spectral parameters":
            {name: p.numel() for name, p in net.named_parameters()}}


def _rule_counts() -> dict[str, Any]:
    """Which ops the rule calls cheap (their 0 is the convention) and which heavy."""
    import torch

    from harness.backends.torch.flops import is_cheap

    aten = torch.ops.aten
    ops = {"add": aten.add.Tensor, "native_layer_norm": aten.native_layer_norm.default,
           "_softmax": aten._softmax.default, "embedding": aten.embedding.default,
           "_foreach_add_": aten._foreach_add_.List, "max_pool2d_with_indices":
           aten.max_pool2d_with_indices.default, "threshold_backward":
           aten.threshold_backward.default, "hardtanh_backward": aten.hardtanh_backward.default,
           "transpose": aten.transpose.int, "_fft_r2c": aten._fft_r2c.default,
           "_linalg_solve_ex": aten._linalg_solve_ex.default,
           "_cudnn_rnn": aten._cudnn_rnn.default, "cdist": aten._cdist_forward.default}
    return {"cheap": {name: is_cheap(op) for name, op in ops.items()}}


def _vector_counts() -> dict[str, Any]:
    """Matrix-vector and vector-vector products, which torch's registry has no formula for."""
    import torch

    from harness.backends.torch.flops import count

    weight = torch.nn.Parameter(torch.randn(OUTPUTS, FEATURES))
    vector = torch.randn(FEATURES)
    batches = torch.randn(2, OUTPUTS, FEATURES), torch.randn(2, FEATURES, 3)
    with torch.no_grad():
        return {"mv": _record(count(lambda: weight @ vector)),
                "dot": _record(count(lambda: vector @ vector)),
                "addbmm": _record(count(lambda: torch.addbmm(torch.zeros(OUTPUTS, 3),
                                                             *batches)))}


@pytest.fixture(scope="module")
def counted() -> dict[str, Any]:
    if not installed("torch"):
        pytest.skip("torch is not installed")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(PROJECT_ROOT))
    ran = subprocess.run([sys.executable, "-c",
                          "import tests.test_flop_coverage as t; t.print_counts()"],
                         cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return dict(json.loads(ran.stdout.splitlines()[-1]))


COMPLETE = {"complete": True, "uncounted_ops": {}, "uncounted_param_share": 0.0}


# --- the tests --------------------------------------------------------------------------------

@needs_torch
def test_an_lstm_counts_to_the_hand_count_forward_and_training(counted: dict) -> None:
    forward, train = counted["lstm forward"], counted["lstm train"]
    assert forward["flops"] == lstm_forward_by_hand() == 1_106_688
    assert train["flops"] == lstm_training_step_by_hand() == 3_320_064
    assert forward["coverage"] == train["coverage"] == COMPLETE


@needs_torch
def test_torch_alone_misses_the_lstm_and_the_coverage_says_so(counted: dict) -> None:
    """The audit's case: torch's formulas alone count the head only (2,304 of 3,320,064
    FLOPs, 1,441x low); now the record names oneDNN's fused ops and the share of the
    parameters (the LSTM's) that reached them alone."""
    alone = counted["lstm train, torch's formulas alone"]
    assert alone["flops"] == 3 * matmul(BATCH, 2 * HIDDEN, OUTPUTS)
    coverage = alone["coverage"]
    assert coverage["complete"] is False
    # one call per layer and direction, forward and backward
    assert coverage["uncounted_ops"] == {"aten.mkldnn_rnn_layer": 4,
                                         "aten.mkldnn_rnn_layer_backward": 4}
    assert coverage["uncounted_param_share"] == pytest.approx(
        counted["lstm parameter share"], abs=1e-6)
    assert coverage["uncounted_param_share"] > 0.95


@needs_torch
def test_a_gru_counts_to_the_hand_count_forward_and_training(counted: dict) -> None:
    forward, train = counted["gru forward"], counted["gru train"]
    assert forward["flops"] == gru_forward_by_hand() == 322_944
    assert train["flops"] == gru_training_step_by_hand() == 913_536
    assert forward["coverage"] == train["coverage"] == COMPLETE


@needs_torch
def test_cpu_attention_counts_to_the_hand_count_forward_and_training(counted: dict) -> None:
    forward, train = counted["attention forward"], counted["attention train"]
    assert forward["flops"] == attention_forward_by_hand() == 327_680
    assert train["flops"] == attention_training_step_by_hand() == 819_200
    assert forward["coverage"] == train["coverage"] == COMPLETE
    alone = counted["attention train, torch's formulas alone"]
    assert alone["coverage"]["uncounted_ops"] == {
        "aten._scaled_dot_product_flash_attention_for_cpu": 1,
        "aten._scaled_dot_product_flash_attention_for_cpu_backward": 1}
    product = 2 * HEADS * matmul(LENGTH, WIDTH // HEADS, LENGTH)  # one product, all heads
    assert alone["flops"] == train["flops"] - (2 + 5) * product  # the projections alone


@needs_torch
def test_the_transformer_fast_path_counts_as_its_composite_path(counted: dict) -> None:
    """Our formulas for the fused inference ops give what torch's give for the same math."""
    tokens = 2 * LENGTH
    mha = attention_forward_by_hand()  # the same projections and products
    assert counted["mha fast"]["flops"] == counted["mha composite"]["flops"] == mha
    ffn = 2 * matmul(tokens, WIDTH, 2 * WIDTH)
    assert counted["encoder fast"]["flops"] == counted["encoder composite"]["flops"] == mha + ffn
    for name in ("mha fast", "encoder fast"):
        assert counted[name]["coverage"] == COMPLETE


@needs_torch
def test_the_cudnn_rnn_formula_matches_the_hand_count_and_the_cpu_cells(counted: dict) -> None:
    assert counted["cudnn lstm"] == counted["cpu lstm"] == cudnn_lstm_by_hand() == 468_480
    assert counted["cudnn lstm backward, weights too"] == 2 * cudnn_lstm_by_hand()
    assert counted["cudnn lstm backward, data only"] == cudnn_lstm_by_hand()
    assert counted["cudnn gru"] == counted["cpu gru"] == gru_forward_by_hand() - matmul(
        BATCH, HIDDEN, OUTPUTS)


@needs_torch
def test_ops_without_a_formula_make_the_count_partial_and_are_named(counted: dict) -> None:
    spectral = counted["spectral forward"]
    coverage = spectral["coverage"]
    assert coverage["complete"] is False
    assert coverage["uncounted_ops"]["aten._linalg_solve_ex"] == 1
    assert coverage["uncounted_ops"]["aten._fft_r2c"] == 1
    sizes = counted["spectral parameters"]
    assert coverage["uncounted_param_share"] == pytest.approx(
        sizes["mix"] / sum(sizes.values()), abs=1e-6)
    assert spectral["flops"] == matmul(BATCH, FEATURES // 2 + 1, OUTPUTS)  # the head alone


@needs_torch
def test_the_layers_shapes_agree_with_every_count_here(counted: dict) -> None:
    """Issue 49's second opinion (backends/torch/secondcount.py) on the RNN, attention and
    fast-path counts: every layer's forward and backward is compared, none disputed (the fused
    and per-step RNN backwards, flash attention's recomputed scores are within its ranges);
    where torch's formulas alone miss the fused ops, those layers are not compared."""
    for name in ("lstm", "gru", "attention"):
        for phase in ("forward", "train"):
            second = counted[f"{name} {phase}"]["second opinion"]
            assert second["disputed"] == "" and second["not compared"] == 0, (name, phase)
            assert second["parts"] >= (1 if phase == "forward" else 2), (name, phase)
    for name in ("mha fast", "mha composite", "encoder fast", "encoder composite"):
        assert counted[name]["second opinion"]["disputed"] == "", name
    alone = counted["lstm train, torch's formulas alone"]["second opinion"]
    assert alone["disputed"] == "" and alone["not compared"] == 2  # the LSTM's two phases


@needs_torch
def test_the_cheap_rule(counted: dict) -> None:
    cheap = counted["cheap"]
    assert {name for name, is_cheap in cheap.items() if is_cheap} == {
        "add", "native_layer_norm", "_softmax", "embedding", "_foreach_add_",
        "max_pool2d_with_indices", "threshold_backward", "hardtanh_backward", "transpose"}


@needs_torch
def test_matrix_vector_products_are_counted(counted: dict) -> None:
    expected = {"mv": matmul(OUTPUTS, FEATURES, 1), "dot": matmul(1, FEATURES, 1),
                "addbmm": 2 * matmul(OUTPUTS, FEATURES, 3)}
    for name, flops in expected.items():
        assert (counted[name]["flops"], counted[name]["coverage"]) == (flops, COMPLETE), name


def test_the_worker_stores_coverage_beside_the_count_and_takes_old_counters() -> None:
    from types import SimpleNamespace

    from harness.run.casepasses import flops_record

    spec = SimpleNamespace(flops=None)

    def module(result: Any) -> Any:
        return SimpleNamespace(__name__="fake", count_flops=lambda task: result)

    partial = {"complete": False, "uncounted_ops": {"aten._cudnn_rnn": 3},
               "uncounted_param_share": 0.97}
    assert flops_record(spec, module((12.0, "by hand", partial)), {}, None) == {
        "flops_per_call": 12.0, "flops_counted_by": "by hand", "flops_coverage": partial}
    assert flops_record(spec, module((12.0, "old counter")), {}, None) == {
        "flops_per_call": 12.0, "flops_counted_by": "old counter"}
    assert flops_record(spec, module((7, "no record", None)), {}, None) == {
        "flops_per_call": 7.0, "flops_counted_by": "no record"}
    assert flops_record(spec, module((None, "XLA said -1", None)), {}, None) == {
        "flops_counted_by": "unavailable: XLA said -1"}


# --- JAX: what XLA cannot say is no number ------------------------------------------------------

class _Compiled:
    def __init__(self, analysis: Any) -> None:
        self.analysis = analysis

    def compile(self) -> _Compiled:
        return self

    def cost_analysis(self) -> Any:
        return self.analysis


def check_jax_counts() -> None:
    """Runs in a child (imports JAX): count_flops on tasks whose 'compiled step' answers what
    XLA answers on some backends."""
    from harness.backends.jax.usermodel import count_flops
    from harness.workloads.usermodel.common import ModelTask

    def counted(analysis: Any, parameters: int = 10) -> tuple[Any, str, Any, Any]:
        task = ModelTask(lambda: None, "m.py", 1, lambda v: v, lambda v: v,
                         extra={"parameters": parameters})
        task.lowered = lambda: _Compiled(analysis)
        return count_flops(task)

    for analysis in (-1, None, {"flops": -1.0}, {"flops": None}, {"bytes accessed": 8.0},
                     {"flops": math.nan}, [], [{"flops": 1.0}, {"flops": 2.0}], "flops"):
        count, why, coverage, second = counted(analysis)
        assert count is None and why and coverage is None and second is None, (analysis, count,
                                                                               why)
    count, why, *_ = counted({"flops": 0.0})
    assert count is None and "0 FLOPs for a model with 10 parameters" in why
    assert counted({"flops": 0.0}, parameters=0)[0] == 0.0
    assert counted({"flops": 1234.0})[0] == 1234.0
    assert counted([{"flops": 56.0}])[0] == 56.0  # older JAX: one dict per computation
    no_step = ModelTask(lambda: None, "m.py", 1, lambda v: v, lambda v: v)
    assert count_flops(no_step) == (None, "no step to lower", None, None)


@pytest.mark.skipif(not installed("jax"), reason="jax is not installed")
def test_jax_cost_analysis_that_cannot_say_is_unavailable_never_a_number() -> None:
    run_check("tests.test_flop_coverage", "check_jax_counts()")


# --- through the worker, as `harness compare --model` runs a file --------------------------------

TORCH_LSTM = """
    import numpy as np
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(4, 8, num_layers=2, bidirectional=True, batch_first=True)
            self.head = nn.Linear(16, 2)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    def model():
        return Net()

    def inputs(batch, rng):
        return rng.standard_normal((batch, 6, 4), dtype=np.float32)
"""
TORCH_SPECTRAL = """
    import numpy as np
    import torch
    import torch.nn as nn

    class Spectral(nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = nn.Parameter(torch.eye(8) * 2 + 0.1)
            self.head = nn.Linear(5, 2)

        def forward(self, x):
            solved = torch.linalg.solve(self.mix, x.T).T
            return self.head(torch.fft.rfft(solved, dim=-1).abs())

    def model():
        return Spectral()

    def inputs(batch, rng):
        return rng.standard_normal((batch, 8), dtype=np.float32)
"""


def worker_lstm_step_by_hand(batch: int) -> int:
    """TORCH_LSTM's training step (what one call is by default): 3x the LSTM's forward (oneDNN's
    fused backward: data and weight gradients) and 3x the head's matmul."""
    tokens, gates = batch * 6, 4 * 8
    layer0 = 2 * (matmul(tokens, 4, gates) + matmul(tokens, 8, gates))
    layer1 = 2 * (matmul(tokens, 16, gates) + matmul(tokens, 8, gates))
    return 3 * (layer0 + layer1) + 3 * matmul(batch, 16, 2)


@needs_torch
@pytest.mark.slow  # real framework workers
def test_a_worker_counts_an_lstm_training_step_completely(tmp_path: Path) -> None:
    model = write_model(tmp_path, TORCH_LSTM)
    ran, document = compare(model, tmp_path / "out", "--sizes", "3")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    extra = cases(document)[("torch", "as-written", 3)]["extra"]
    assert extra["what"] == "train"
    assert extra["flops_per_call"] == worker_lstm_step_by_hand(3) == 249_408
    assert "backends/torch/flops.py" in extra["flops_counted_by"]
    assert extra["flops_coverage"] == COMPLETE


@needs_torch
@pytest.mark.slow  # real framework workers
def test_a_worker_marks_a_count_with_unknown_ops_partial(tmp_path: Path) -> None:
    model = write_model(tmp_path, TORCH_SPECTRAL)
    ran, document = compare(model, tmp_path / "out", "--sizes", "3")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    extra = cases(document)[("torch", "as-written", 3)]["extra"]
    coverage = extra["flops_coverage"]
    assert coverage["complete"] is False
    assert {"aten._linalg_solve_ex", "aten._fft_r2c"} <= set(coverage["uncounted_ops"])
    assert coverage["uncounted_param_share"] == pytest.approx(64 / (64 + 12), abs=1e-6)
    assert extra["flops_per_call"] >= 3 * matmul(3, 5, 2)  # the head, forward and backward

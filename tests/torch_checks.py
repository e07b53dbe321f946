"""Checks run in a child process by tests/test_torch_whole_step.py: they import torch, which the
test process never does (one framework per interpreter, as in real use).

reduce-overhead compiles the whole training step (issue 24, item 4): it runs, and matches eager.

CUDA graphs exist on a GPU only, so on a CPU the same compiled step runs under mode="default";
what is checked here is that gather, forward, backward and Adam compile into
a step whose parameters and loss match the eager step's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.backends.torch import mnist as torch_mnist
from harness.backends.torch.device import open_device

SAMPLES, BATCH, HIDDEN = 256, 32, (16,)


def inputs() -> dict:
    generator = np.random.default_rng(0)
    return {"x_train": generator.random((SAMPLES, 28, 28), dtype=np.float32),
            "y_train": generator.integers(0, 10, SAMPLES).astype(np.int64),
            "x_test": generator.random((40, 28, 28), dtype=np.float32),
            "y_test": generator.integers(0, 10, 40).astype(np.int64),
            # The last batch is short (250 = 7 x 32 + 26): a second compiled shape.
            "orders": np.stack([generator.permutation(SAMPLES)[:250] for _ in range(2)]),
            "hidden_units": HIDDEN, "dropout": 0.0,  # no dropout: eager and compiled RNGs differ
            "data_source": "random", "samples_distinct": SAMPLES}


def trained(kind: type, **options) -> torch_mnist.MnistTraining:
    device = open_device("cpu")
    torch.manual_seed(0)
    data = inputs()
    model = torch_mnist.build_model(HIDDEN, 0.0)
    # capturable=True (the GPU variant's option) is CUDA-only in eager Adam: default here.
    training = kind(model, model, data, device, BATCH, {}, **options)
    for _ in range(2):
        training.step()
    return training


def check_the_compiled_whole_step_matches_eager() -> None:
    from torch._inductor import config as inductor_config

    eager = trained(torch_mnist.PreloadedTraining)
    # The CPU's vector ISA taken from /proc/cpuinfo, as a --quick cell's is
    # (harness.backends.torch.QUICK_COMPILE), not proven by building and loading a test library
    # per candidate ISA: that proof was 8 s of this check's 22 s with Inductor's cache warm and
    # 35 s of its 124 s cold, on the 2-core VM, and the step compiles to the same graphs either
    # way.
    with inductor_config.patch({"cpp.vec_isa_ok": True}):
        compiled = trained(torch_mnist.ReduceOverheadTraining, mode="default")
    for mine, theirs in zip(compiled.model.parameters(), eager.model.parameters()):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
    assert float(compiled.loss_sum) == pytest.approx(float(eager.loss_sum), rel=1e-4)
    assert compiled.samples_seen == eager.samples_seen == 250
    record = compiled.output()["extra"]["cuda_graphs"]
    # One graph per batch shape (32 and the short last batch of 26), and no break between
    # gather, forward, backward and Adam: what lets reduce-overhead capture one CUDA graph.
    assert record["graphs"] == 2 and record["graph_breaks"] == {}, record
    assert record["expected"] is False and record["form"].startswith("functional")
    assert record["captured"] is False  # mode="default" captures nothing, and says so


def check_the_foreach_adam_is_torch_adam() -> None:
    """AdamState's update, eagerly, against torch.optim.Adam on the same gradients."""
    from harness.backends.torch.graphs import AdamState

    torch.manual_seed(0)
    mine = [torch.randn(5, 3), torch.randn(3)]
    theirs = [param.clone().requires_grad_(True) for param in mine]
    optimizer = torch.optim.Adam(theirs, lr=0.01)
    state = AdamState(mine, **optimizer.defaults)
    for _ in range(4):
        grads = [torch.randn_like(param) for param in mine]
        for param, grad in zip(theirs, grads):
            param.grad = grad.clone()
        optimizer.step()
        state.update(mine, grads)
    for param, reference in zip(mine, theirs):
        torch.testing.assert_close(param, reference.detach(), rtol=1e-6, atol=1e-7)
    assert float(state.step) == 4
    with pytest.raises(ValueError, match="weight_decay"):
        AdamState(mine, weight_decay=0.1)


def check_cuda_graph_record_says_why_not() -> None:
    """A skip torch logs reaches the record with its reason; counters alone still count."""
    import logging

    from torch._dynamo.utils import counters

    from harness.backends.torch.graphs import SKIP_LOGGERS, CompileWatch

    watch = CompileWatch(cuda_graphs_expected=True)
    try:
        counters["stats"]["unique_graphs"] += 2
        counters["inductor"]["cudagraph_skips"] += 1
        logging.getLogger(SKIP_LOGGERS[0]).warning("skipping cudagraphs due to mutated inputs "
                                                   "(1 instances)")
        record = watch.record()
    finally:
        watch.close()
    assert record["captured"] is False and record["skipped_graphs"] == 1
    assert record["skips"] == ["skipping cudagraphs due to mutated inputs (1 instances)"]


def check_restore_after_a_capture_warm_up() -> None:
    """The CUDA-graph variant's warm-up calls train the model before the capture; restore()
    must put back the weights and Adam's state in place, so the first replayed step is the
    first step from the shared weights (checked here with eager calls on the CPU)."""
    import torch

    from harness.backends.torch.usermodel import restore, training_call

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    x, target = torch.randn(5, 3), torch.randn(5, 2)
    initial = {name: tensor.detach().clone() for name, tensor in net.state_dict().items()}
    optimizer = torch.optim.Adam(net.parameters(), capturable=False)
    call = training_call(net, optimizer, lambda: [x], target)
    first, second = float(call().detach()), float(call().detach())
    for _ in range(3):  # the warm-up a capture makes
        call()
    restore(net, initial, optimizer)
    assert [float(call().detach()), float(call().detach())] == [first, second]


def check_mnist_declared_flops_are_torchs_count_of_a_training_step() -> None:
    """harness.workloads.mnist declares the matmul FLOPs one training step executes: torch's own
    FlopCounterMode around a step of the harness's MNIST net (forward, loss, backward, Adam)
    counts the same, to the FLOP, for both nets."""
    from torch.utils.flop_counter import FlopCounterMode

    from harness.workloads import mnist

    for hidden in (mnist.SMALL_HIDDEN, mnist.WIDE_HIDDEN):
        net = torch_mnist.build_model(hidden, mnist.DROPOUT)
        optimizer = torch.optim.Adam(net.parameters())
        x, y = torch.rand(BATCH, 28, 28), torch.randint(0, 10, (BATCH,))
        with FlopCounterMode(display=False) as counter:
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            optimizer.step()
        declared = mnist.training_flops_for(hidden)({"train_samples": BATCH})
        assert counter.get_total_flops() == declared, (hidden, counter.get_total_flops(),
                                                       declared)

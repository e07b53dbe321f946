"""Checks run in a child process by tests/test_predict_model.py: they import torch, which the
test process never does. Real features of a tiny MLP's training step (backends/torch/
features.py) on the shipped H200 profile: what the model must hold whatever this CPU's speed
(counts, the regime of a step of tiny kernels, the record reproduced), never a time."""

from __future__ import annotations

import torch

from harness.backends.torch.features import features_of
from harness.data.gpustep import Prediction
from harness.predict.features import StepFeatures
from harness.predict.model import predict, recompute
from harness.predict.profile import load_profile

BATCH, IN, HIDDEN, OUT = 8, 16, 32, 4


def tiny_mlp_on_the_shipped_h200() -> None:
    """Adam's per-parameter CPU ops become the profile's foreach kernels; the step of ~20
    tiny kernels is launch-bound; its sync points are torch's own (none waits); a CUDA graph
    is predicted faster; the stored record recomputes to the same seconds."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
                              torch.nn.Linear(HIDDEN, OUT))
    optimizer = torch.optim.Adam(net.parameters())
    x, y = torch.randn(BATCH, IN), torch.randint(0, OUT, (BATCH,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        optimizer.step()
    features = features_of(step, timed_calls=3, h2d_bytes=BATCH * IN * 4)
    assert features.user_sync_count == 0, features.sync_points  # Adam's reads are torch's
    profile = load_profile("h200")
    found = predict(features, profile, profile_name="h200")
    assert found.status == "predicted", found.reason
    assert found.mapped_share == 1.0 and found.unmapped == {}
    assert found.regime == "launch-bound", (found.host_s, found.device_s)
    adam = features.ops_by_name["aten.addcdiv_"]
    assert adam == 4  # two weights, two biases: one single-tensor update each
    outside = sum(1 for op in features.ops if op.kernel and op.kind != "host_read") - 8 * adam
    assert found.terms["kernels"] == outside + 7, (found.terms, features.ops_by_name)
    assert any("7 foreach kernels" in note for note in found.notes), found.notes
    assert found.profile["device"] == "NVIDIA H200"
    graph = predict(features, profile, variant="cuda-graph")
    assert graph.seconds is not None and found.seconds is not None
    assert graph.seconds < found.seconds
    stored = Prediction.from_dict(found.to_dict())
    again = recompute(stored, StepFeatures.from_dict(features.record()), profile)
    assert again.seconds == found.seconds and stored.recombined() == found.seconds

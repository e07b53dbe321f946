"""Checks run in a child process by tests/test_predict_features.py: they import torch, which the
test process never does (one framework per interpreter, as in real use).

Each check builds a small step, records its features (backends/torch/features.py) and holds
them to numbers worked out by hand or by the harness's own FLOP counter (flops.count,
usermodel.count_flops): exact counts, never times.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import numpy as np
import torch

from harness.backends.torch import flops, usermodel
from harness.backends.torch.device import open_device
from harness.backends.torch.features import features_of, features_record, task_features
from harness.predict.features import StepFeatures

BATCH, IN, HIDDEN, OUT = 5, 8, 16, 4
PROJECT_ROOT = Path(__file__).resolve().parents[1]
SMALL_CNN = PROJECT_ROOT / "examples" / "models" / "small_cnn.py"


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, OUT))


def line_of(marker: str) -> int:
    """The line of this file holding MARKER (where a planted host read sits)."""
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()  # type: ignore[arg-type]
    return next(number for number, line in enumerate(lines, 1) if marker in line
                and "line_of(" not in line)


def mlp_inference() -> None:
    """Ops, FLOPs, bytes and chain of a two-layer MLP's forward, all exact."""
    net, x = mlp(), torch.randn(BATCH, IN)

    def step() -> torch.Tensor:
        with torch.no_grad():
            return net(x)
    features = features_of(step, timed_calls=0)
    assert features.ops_by_name == {"aten.addmm": 2, "aten.relu": 1, "aten.t": 2}, \
        features.ops_by_name
    assert (features.op_count, features.kernel_ops) == (5, 3)
    expected = 2 * BATCH * (IN * HIDDEN + HIDDEN * OUT)
    assert features.flops == expected == flops.count(step).flops, features.flops
    first = next(op for op in features.ops if op.op == "aten.addmm")
    # bias (16) + x (5x8) + weight^T (8x16) read, output (5x16) written, float32
    assert first.bytes == 4 * (HIDDEN + BATCH * IN + IN * HIDDEN + BATCH * HIDDEN), first.bytes
    assert first.inputs == [[[HIDDEN], "float32"], [[BATCH, IN], "float32"],
                            [[IN, HIDDEN], "float32"]], first.inputs
    assert first.outputs == [[[BATCH, HIDDEN], "float32"]]
    assert features.bytes == sum(op.bytes for op in features.ops)
    assert features.chain == 3  # addmm -> relu -> addmm; the transposes weigh 0
    assert features.unknown_ops == {} and features.sync_points == []
    assert features.precision["floating"] == ["float32"]
    assert features.step_s is None and features.h2d_bytes is None


def mlp_training_matches_the_harness_count() -> None:
    """A training step's FLOPs are the harness's own count; the record reloads unchanged."""
    net, x, y = mlp(), torch.randn(BATCH, IN), torch.randn(BATCH, OUT)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(net(x), y).backward()
        optimizer.step()
    record = features_record(step, timed_calls=2, h2d_bytes=BATCH * IN * 4)
    features = StepFeatures.from_dict(record)
    assert features.flops == flops.count(step).flops > 0
    # forward 2 addmm, backward: the weight gradients of both layers and the input gradient
    # of the second (x needs none): 3 mm
    assert features.ops_by_name["aten.addmm"] == 2 and features.ops_by_name["aten.mm"] == 3
    assert features.ops_by_kind["matmul"] == 5
    assert features.recomputed() == features  # every stored total is its ops' total
    assert features.h2d_bytes == BATCH * IN * 4 and features.step_s is not None
    assert features.host_s_per_op == features.step_s / features.op_count
    assert all(op.host_s >= 0 for op in features.ops)


def planted_host_reads() -> None:
    """A planted .item() and a print show as sync points at their lines; print's own ops are
    left out of the step's."""
    net, x = mlp(), torch.randn(BATCH, IN)

    def plain() -> torch.Tensor:
        with torch.no_grad():
            return net(x).sum()

    def with_reads() -> float:
        with torch.no_grad():
            total = net(x).sum()
        value = total.item()  # PLANTED-ITEM
        print(total)  # PLANTED-PRINT
        return value
    clean, planted = features_of(plain, timed_calls=0), features_of(with_reads, timed_calls=0)
    assert clean.sync_points == [] and clean.sync_count == 0
    found = {(point.what, point.where, point.user_code, point.count)
             for point in planted.sync_points}
    here = Path(__file__).name
    assert found == {
        ("scalar read (.item(), float(), bool(), an if on a tensor)",
         f"{here}:{line_of('PLANTED-ITEM')} (with_reads)", True, 1),
        ("print / repr of a tensor", f"{here}:{line_of('PLANTED-PRINT')} (with_reads)",
         True, 1)}, found
    assert planted.sync_count == planted.user_sync_count == 2
    # the .item() is one op of the step (a host read); the print's formatting is not
    assert planted.ops_by_name == {**clean.ops_by_name, "aten._local_scalar_dense": 1}
    assert planted.ops_by_kind["host_read"] == 1


def unmapped_op_is_unknown() -> None:
    """An op no FLOP formula covers (an FFT) is listed as unknown, by name."""
    net, x = mlp(), torch.randn(BATCH, IN)

    def step() -> torch.Tensor:
        with torch.no_grad():
            return torch.fft.rfft(net(x), dim=-1).abs()
    features = features_of(step, timed_calls=0)
    assert features.unknown_ops == {"aten._fft_r2c": 1}, features.unknown_ops
    fft = next(op for op in features.ops if op.op == "aten._fft_r2c")
    assert fft.flops is None and fft.kind == "unknown"
    assert features.flop_coverage["complete"] is False
    assert features.flops == 2 * BATCH * (IN * HIDDEN + HIDDEN * OUT)  # the rest still counts


def small_cnn_through_the_usermodel_task() -> None:
    """The example CNN's training step built as a harness cell builds it: FLOPs equal the
    cell's own count, the convolutions and the bytes it copies to the device are found."""
    batch, seed = 3, 0
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)
    net = usermodel.build(str(SMALL_CNN), seed)
    inputs = {"x": [x], "targets": rng.standard_normal((batch, 10), dtype=np.float32),
              "weights": usermodel.weight_arrays(net), "weight_names": list(net.state_dict()),
              "model": str(SMALL_CNN), "what": "train", "seed": seed, "size": {}}
    task = usermodel.make_task({"batch": batch}, "as-written", open_device("cpu"),
                               inputs)  # type: ignore[arg-type]  # a plain dict of the keys
    counted, *_ = usermodel.count_flops(task)  # (flops, how, coverage, second opinion)
    record = task_features(task, inputs, timed_calls=1)  # type: ignore[arg-type]
    features = StepFeatures.from_dict(record)
    assert features.flops == counted > 0, (features.flops, counted)
    assert features.ops_by_kind["conv"] == 4, features.ops_by_name  # 2 forward + 2 backward
    assert features.unknown_ops == {}
    assert features.h2d_bytes == batch * 3 * 32 * 32 * 4
    assert "copied from host each call" in features.h2d_how
    assert features.recomputed() == features


def fastest_pass_is_kept() -> None:
    """Of several recorded passes the one whose ops took least host time is kept, each pass's
    total listed in order; no pass starts once the budget has passed (times planted)."""
    from harness.backends.torch import features as module
    from harness.predict.features import OpRecord

    planted = iter([3e-3, 1e-3, 2e-3, 5e-3])
    made: list[object] = []

    def fake_record(step: object, warmup: int) -> object:
        recording = module.Recording()
        recording.ops = [OpRecord(op="aten.add", kind="elementwise", host_s=next(planted))]
        made.append((recording, warmup))
        return recording
    own = module.record_step
    module.record_step = fake_record  # type: ignore[assignment]
    try:
        kept, totals, passes = module.fastest_recording(lambda: None, warmup=1, passes=3,
                                                        budget_s=60)
        assert totals == [3e-3, 1e-3, 2e-3] and kept is made[1][0], (totals, made)
        assert passes == [recording for recording, _ in made]
        assert [warmup for _, warmup in made] == [1, 0, 0]  # only the first pass warms up
        kept, totals, _ = module.fastest_recording(lambda: None, warmup=0, passes=3, budget_s=0)
        assert totals == [5e-3] and kept is made[3][0]
    finally:
        module.record_step = own  # type: ignore[assignment]
    net, x = mlp(), torch.randn(BATCH, IN)
    features = features_of(lambda: net(x), timed_calls=0, passes=3)
    assert len(features.pass_host_s) == 3, features.pass_host_s
    assert features.host_s_ops == min(features.pass_host_s)


def python_between_ops_is_outside() -> None:
    """outside_ops_s: the time the step's own code spends between two ops, the recorder's
    bookkeeping left out (its clock reads bound the mode's entry and return), each gap the
    least over the passes that ran the same ops (planted gaps), and a real pause of the
    step's Python counted (a lower bound only: a loaded machine may add to it)."""
    import time

    from harness.backends.torch import features as module
    from harness.predict.features import OpRecord

    def planted(gaps: list[float], names: tuple[str, ...] = ("aten.add",) * 11) -> object:
        recording = module.Recording()
        recording.ops = [OpRecord(op=name, kind="elementwise") for name in names]
        recording.gaps = gaps
        return recording
    kept = planted([10e-6] * 9 + [500e-6])  # one gap stretched in the kept pass
    other = planted([12e-6] * 9 + [20e-6])
    unlike = planted([1e-6] * 10, ("aten.mul",) * 11)  # other ops: not the same step
    assert module.least_gaps(kept, [kept, other, unlike]) == [10e-6] * 9 + [20e-6]
    # the least gaps less their 10th percentile (entering the mode) once per gap
    assert abs(kept.outside_ops_seconds([other, unlike]) - 10e-6) < 1e-12
    assert abs(kept.outside_ops_seconds() - 490e-6) < 1e-12  # alone: its own gaps
    x = torch.ones(4)

    def paused() -> None:
        for _ in range(20):
            x.add_(1)
        time.sleep(0.05)  # the step's own Python between two ops
        x.add_(1)
    features = features_of(paused, timed_calls=0, passes=2)
    assert features.outside_ops_s is not None and features.outside_ops_s >= 0.045, features


def mlp_checks() -> None:
    """The MLP checks in one interpreter (one torch import for all of them)."""
    mlp_inference()
    fastest_pass_is_kept()
    python_between_ops_is_outside()
    mlp_training_matches_the_harness_count()
    planted_host_reads()
    unmapped_op_is_unknown()


def features_pass_says_why_not() -> None:
    """A cell whose features cannot run says why: a module with no step features, a step that
    is neither an MNIST nor an own-model one, a pass over its limit, a TensorFlow step."""
    from harness.backends.torch import matmul, mnist
    from harness.run.casepasses import FEATURES_REASON, features_pass

    class Cpu:
        is_gpu = False

    def plain_step() -> None:
        return None

    def why(module: object, *args: object, framework: str = "torch") -> str:
        return str(features_pass(module, framework, "as-written", Cpu(), 0, plain_step, {},
                                 *args).get(FEATURES_REASON, ""))

    assert "not this workload's jax step" in why(object(), 0.01, framework="jax")
    assert "the MNIST workloads and of own-model torch" in why(matmul, 0.01)  # no step_features
    # A TensorFlow step's record says why no profile prices it, nothing is run to record it.
    record = features_pass(mnist, "keras-tensorflow", "as-written", Cpu(), 0, plain_step, {},
                           0.01)["step_features"]
    assert str(record["no_profile"]).startswith("no TensorFlow profile")
    assert "neither" in why(mnist, 0.01)  # a torch module, but not an MNIST or own-model step
    assert why(mnist, 60.0, 10.0).startswith("the features pass was left out")
    assert features_pass(mnist, "torch", "as-written", Cpu(), 1, plain_step, {}, 0.01) == {}


def transfer_source_pages_are_written() -> None:
    """The profile's copy source is resident memory, not the zero page an untouched buffer
    maps (which a copy reads without touching memory): the process's resident set grows by
    the buffer's size when it is made, and every byte reads back as written."""
    from harness.backends.torch.gpuprofile import written_host_buffer

    def resident_bytes() -> int:
        fields = Path("/proc/self/statm").read_text().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    size = 64 << 20
    untouched_before = resident_bytes()
    untouched = torch.empty(size, dtype=torch.uint8)
    untouched_grew = resident_bytes() - untouched_before
    before = resident_bytes()
    buffer = written_host_buffer(size, pinned=False)
    grew = resident_bytes() - before
    assert grew >= 0.9 * size > 4 * untouched_grew, (grew, untouched_grew)
    assert int(buffer.min()) == int(buffer.max()) == 1 and untouched.numel() == size

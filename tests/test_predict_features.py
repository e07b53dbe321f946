"""Features of a step from a CPU run (issue 51, part 2): ops with shapes, dtypes, FLOPs and
bytes, op count and serial chain, host time, copies, sync points, precision, unknown ops.

The torch checks run in a child process (tests/predict_checks.py): this process never imports
a framework. Exact counts and the harness's own FLOP count, never a speed."""

from __future__ import annotations

import pytest

from harness.predict.features import OpRecord, StepFeatures, SyncPoint, summarize_ops
from tests.in_subprocess import installed, run_check


def op(name: str, kind: str, depth: int, flops: int | None = 0, moved: int = 0,
       seconds: float = 1e-6, dtype: str = "float32") -> OpRecord:
    return OpRecord(op=name, kind=kind, inputs=[[[2, 2], dtype]], outputs=[[[2, 2], dtype]],
                    flops=flops, bytes=moved, depth=depth, host_s=seconds)


def test_the_totals_come_from_the_ops_and_reload_unchanged() -> None:
    ops = [op("aten.t", "view", 0), op("aten.addmm", "matmul", 1, 16, 64),
           op("aten.relu", "elementwise", 2, 0, 32),
           op("aten._fft_r2c", "unknown", 3, None, 48, dtype="complex64"),
           op("aten.addmm", "matmul", 1, 16, 64, dtype="bfloat16")]
    syncs = [SyncPoint(what=".cpu()", where="model.py:3 (step)", count=2),
             SyncPoint(what="scalar read", where="torch/optim/adam.py:9 (x)", user_code=False)]
    features = summarize_ops(StepFeatures(framework="torch", ops=ops, sync_points=syncs,
                                      step_s=1e-4, h2d_bytes=128))
    assert (features.op_count, features.kernel_ops, features.chain) == (5, 4, 3)
    assert (features.flops, features.bytes) == (32, 208)
    assert features.unknown_ops == {"aten._fft_r2c": 1}
    assert features.ops_by_name == {"aten._fft_r2c": 1, "aten.addmm": 2, "aten.relu": 1,
                                    "aten.t": 1}
    assert (features.sync_count, features.user_sync_count) == (3, 2)
    assert features.host_s_ops == pytest.approx(5e-6)
    assert features.python_s == pytest.approx(1e-4 - 5e-6)
    assert features.host_s_per_op == pytest.approx(1e-4 / 5)
    assert features.precision["flops_by_dtype"] == {"bfloat16": 16, "float32": 16}
    assert features.precision["floating"] == ["bfloat16", "float32"]
    record = features.record()
    reloaded = StepFeatures.from_dict(record)
    assert reloaded == features and reloaded.recomputed() == features
    planted = StepFeatures.from_dict({**record, "flops": 33})
    assert planted.recomputed().flops == 32  # a stored total that is not its ops' is caught


@pytest.mark.slow  # one child process importing torch (~3 s on the 2-core VM)
def test_torch_features_of_a_small_mlp_planted_reads_and_an_unmapped_op() -> None:
    if not installed("torch"):
        pytest.skip("torch is not installed")
    run_check("tests.predict_checks", "mlp_checks()", timeout_s=300, framework="torch")


@pytest.mark.slow  # one child process importing torch and building a harness cell's task
def test_torch_features_of_the_example_cnn_as_a_cell_builds_it() -> None:
    if not installed("torch"):
        pytest.skip("torch is not installed")
    run_check("tests.predict_checks", "small_cnn_through_the_usermodel_task()", timeout_s=300,
              framework="torch")

"""The GPU step model (issue 51, part 3): exact arithmetic on a synthetic profile and step.

Every expected figure below is worked out by hand from the synthetic rows (module constants),
so a planted change in one profile term must move the prediction by exactly what the model's
equations (harness/predict/model.py) say. The torch check runs in a child process
(tests/predict_model_checks.py): this process never imports a framework."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.data.gpustep import Prediction
from harness.predict.features import OpRecord, StepFeatures, summarize_ops
from harness.predict.model import RECORDED_OP_DISPATCHES, predict, recompute
from harness.predict.profile import (
    CATALOGUE,
    Entry,
    Profile,
    Row,
    absent,
    completed,
    read_profile,
    write_profile,
)
from harness.predict.rates import HostSpeed
from tests.in_subprocess import installed, run_check

LAUNCH, DISPATCH_ADD, DISPATCH_ADD_ = 5e-6, 8e-6, 6e-6  # allocation: 2e-6
FLOOR, ROUND_TRIP = 2e-6, 20e-6
MATMUL_FP32_RATE, BANDWIDTH = 1e13, 1e12  # FLOP/s, bytes/s
PAGEABLE_LATENCY, PAGEABLE_RATE = 1e-5, 1e10
PYTHON_LOOP, NUMPY_LOOP = 4e-3, 1e-3


def timed(params: dict, seconds: float, **work: float) -> Row:
    return Row.timed(params, [seconds] * 3, 1, **work)  # type: ignore[arg-type]


def rows_by_entry(matmul_fp32_s: float, floor_s: float, launch_s: float) -> dict[str, list[Row]]:
    """The synthetic profile's rows: one per rate entry (1e12 units of work), so a rate is
    the same at every size and the arithmetic stays exact."""
    return {
        "host.dispatch": [timed({"op": "add"}, DISPATCH_ADD), timed({"op": "add_"}, DISPATCH_ADD_)],
        "host.launch_ahead": [timed({"op": "add_", "kernels": 32}, launch_s)],
        "device.kernel_floor": [timed({"op": "add_", "kernels": 32}, floor_s)],
        "device.graph_replay": [timed({"kernels": 1}, 3e-6), timed({"kernels": 1001}, 1.003e-3)],
        "device.sync": [timed({"after": "idle"}, 4e-6),
                        timed({"after": "one tiny kernel"}, ROUND_TRIP)],
        "matmul.fp32": [timed({"m": 1}, matmul_fp32_s, flops=1e12)],
        **{f"matmul.{label}": [timed({"m": 1}, 0.01, flops=1e12)]
           for label in ("tf32", "bf16", "fp16")},
        **{f"conv.{label}": [timed({"n": 1}, 0.02, flops=1e12)]
           for label in ("fp32", "tf32", "bf16")},
        "elementwise.add": [timed({"elements": 1}, 1e9 / BANDWIDTH, bytes=1e9)],
        "reduction.sum": [timed({"elements": 1}, 2e-3, bytes=1e9)],
        **{f"transfer.{way}.{memory}": [
            timed({"bytes": 4096}, PAGEABLE_LATENCY if memory == "pageable" else 4e-6,
                  bytes=4096.0),
            timed({"bytes": 10**9}, 0.1 if memory == "pageable" else 0.02, bytes=1e9)]
           for way in ("h2d", "d2h") for memory in ("pageable", "pinned")},
        "ops.aten": [Row(params={"op": "conv2d fwd"}, counts={"aten_ops": 1, "kernel_ops": 1}),
                     Row(params={"op": "adam step (4 tensors)"},
                         counts={"aten_ops": 19, "kernel_ops": 16})],
        "ops.kernels": [Row(params={"op": "conv2d fwd"}, counts={"kernels": 2.0}),
                        Row(params={"op": "adam step (4 tensors)"}, counts={"kernels": 7.0})],
        "host.python": [timed({"loop": "python_loop"}, PYTHON_LOOP)],
        "host.numpy": [timed({"loop": "numpy_loop"}, NUMPY_LOOP)],
    }


def profile(matmul_fp32_s: float = 1e12 / MATMUL_FP32_RATE, floor_s: float = FLOOR,
            launch_s: float = LAUNCH, without: str = "") -> Profile:
    rows = rows_by_entry(matmul_fp32_s, floor_s, launch_s)
    entries = completed({spec.name: Entry(what=spec.what, rows=rows[spec.name])
                         for spec in CATALOGUE if spec.name in rows})  # no JAX rows
    if without:
        entries[without] = absent(without, "cpu: no CUDA events")
    return Profile(created="2026-11-27T00:00:00+00:00", framework="torch",
                   device={"name": "cuda:0", "type": "cuda", "description": "Synthetic GPU"},
                   software={"torch": "2.11.0", "driver": "580"}, entries=entries)


def op(name: str, kind: str, moved: int, seconds: float, flops: int | None = 0,
       allocates: bool = True, shape: list[int] | None = None) -> OpRecord:
    tensor = [shape or [4, 4], "float32"]
    return OpRecord(op=name, kind=kind, inputs=[tensor], outputs=[tensor] if allocates else [],
                    flops=flops, bytes=moved, depth=1, host_s=seconds)


def step(matmul_flops: int = 2 * 10**9, extra: tuple[OpRecord, ...] = ()) -> StepFeatures:
    """addmm (1 MB, host 50 us), relu (2 MB, 10 us), a view (1 us), an in-place add_
    (1 KB, 5 us: the only op under 64 KiB, so tiny_s = 5 us); 1 MB copied in per step."""
    ops = [op("aten.addmm", "matmul", 10**6, 50e-6, flops=matmul_flops),
           op("aten.relu", "elementwise", 2 * 10**6, 10e-6),
           op("aten.t", "view", 0, 1e-6),
           op("aten.add_", "elementwise", 1000, 5e-6, allocates=False), *extra]
    return summarize_ops(StepFeatures(framework="torch", ops=ops, step_s=1e-3, h2d_bytes=10**6))


# Worked by hand for step() on profile():
HOST_HERE = 5e-6 + 5e-6 + 1e-6 + 5e-6  # each op's host time capped at tiny_s = 5 us
# Host 'profiled' (model 4): those 3.2 tiny ops, each at the profiled host's recorded op.
HOST_PRICED = HOST_HERE / 5e-6 * RECORDED_OP_DISPATCHES * DISPATCH_ADD_
HOST_OPS = 3 * LAUNCH + 2 * (DISPATCH_ADD - DISPATCH_ADD_)  # 3 launches, 2 allocations
MATMUL_S = 2e9 / MATMUL_FP32_RATE  # 200 us
DEVICE = MATMUL_S + 2e6 / BANDWIDTH + FLOOR  # relu at its bandwidth (= the floor), add_ floor
COPY = PAGEABLE_LATENCY + 1e6 / PAGEABLE_RATE


def test_a_profile_round_trips_and_is_versioned(tmp_path: Path) -> None:
    made = profile()
    path = tmp_path / "synthetic.json"
    write_profile(made, path)
    loaded = read_profile(path)
    assert loaded == made and loaded.schema_version == 1
    assert predict(step(), loaded).seconds == predict(step(), made).seconds


def test_the_step_is_the_slower_queue_plus_what_overlaps_neither() -> None:
    found = predict(step(), profile(), profile_name="synthetic")
    assert found.status == "predicted" and found.reason == ""
    assert found.host_s == pytest.approx(HOST_PRICED + HOST_OPS, rel=1e-12)
    assert found.device_s == pytest.approx(DEVICE, rel=1e-12)
    assert found.seconds == pytest.approx(DEVICE + COPY, rel=1e-12)
    assert found.regime == "compute-bound" and found.mapped_share == 1.0
    assert found.profile["name"] == "synthetic" and found.profile["device"] == "Synthetic GPU"
    assert found.profile["identity"] == ("Synthetic GPU (profiled 2026-11-27, torch 2.11.0, "
                                         "driver 580)")
    assert found.device_by_entry["matmul.fp32"] == pytest.approx(MATMUL_S, rel=1e-12)


def test_planted_profile_changes_move_the_prediction_as_the_model_says() -> None:
    base = predict(step(), profile())
    floor = predict(step(), profile(floor_s=2 * FLOOR))  # relu and add_ sit on the floor
    assert floor.seconds - base.seconds == pytest.approx(2 * FLOOR, rel=1e-9)
    slower = predict(step(), profile(matmul_fp32_s=2e12 / MATMUL_FP32_RATE))  # half the rate
    assert slower.seconds - base.seconds == pytest.approx(MATMUL_S, rel=1e-9)
    # A launch-bound step (a 20 MFLOP matmul: 2 us) pays every launch: 3 more of 5 us each.
    small, dearer = step(matmul_flops=2 * 10**7), profile(launch_s=2 * LAUNCH)
    launch_bound = predict(small, profile())
    assert launch_bound.regime == "launch-bound"
    assert launch_bound.seconds == pytest.approx(HOST_PRICED + HOST_OPS + COPY, rel=1e-12)
    assert predict(small, dearer).seconds - launch_bound.seconds == pytest.approx(
        3 * LAUNCH, rel=1e-9)


def test_an_unmapped_op_gives_unknown_naming_it() -> None:
    fft = op("aten._fft_r2c", "unknown", 4096, 5e-6, flops=None)
    found = predict(step(extra=(fft,)), profile())
    assert found.status == "unknown" and found.seconds is None
    assert "aten._fft_r2c x1" in found.reason and "75%" in found.reason, found.reason
    assert found.unmapped == {"aten._fft_r2c": 1}
    # A float64 matmul: no fp64 row, so unmapped too.
    wide = replace(step(), ops=[replace(step().ops[0], inputs=[[[4, 4], "float64"]])])
    assert predict(summarize_ops(wide), profile()).unmapped == {"aten.addmm": 1}


def test_a_missing_profile_row_gives_unknown_naming_it() -> None:
    found = predict(step(), profile(without="device.kernel_floor"))
    assert found.status == "unknown"
    assert found.reason == "the profile lacks device.kernel_floor (cpu: no CUDA events)"


def test_the_host_choice_is_recorded_and_rescales_what_it_says() -> None:
    here = HostSpeed(python_loop_s=2 * PYTHON_LOOP, numpy_loop_s=3 * NUMPY_LOOP)
    small = step(matmul_flops=2 * 10**7)  # launch-bound: the host sets the step
    this = predict(small, profile(), host="this", this_host=here)
    assert (this.host_choice, this.this_host) == ("this", here.record())
    assert this.terms["ops_scale"] == pytest.approx(3.0) and this.terms["python_scale"] == 1.0
    assert this.host_s == pytest.approx(HOST_HERE + 3 * HOST_OPS, rel=1e-12)
    rented = predict(small, profile(), host="profiled", this_host=here)
    assert rented.host_choice == "profiled" and rented.terms["ops_here"] == pytest.approx(3.2)
    assert rented.terms["op_host_s"] == pytest.approx(RECORDED_OP_DISPATCHES * DISPATCH_ADD_)
    assert rented.host_s == pytest.approx(HOST_PRICED + HOST_OPS, rel=1e-12)
    # This CPU's speed cancels: twice as slow a CPU (every op's time doubled), or no speed
    # given, reads the same step on the profiled host.
    slower = replace(small, ops=[replace(item, host_s=2 * item.host_s) for item in small.ops])
    assert predict(summarize_ops(slower), profile()).seconds == pytest.approx(rented.seconds)
    assert predict(small, profile()).seconds == pytest.approx(rented.seconds)
    blind = predict(small, profile(), host="this")
    assert blind.status == "unknown" and "host speed" in blind.reason


def test_variants_change_the_terms_they_change() -> None:
    plain = predict(step(), profile())
    resident = predict(step(), profile(), variant="resident")
    assert resident.terms["copy_blocking_s"] == 0.0
    assert plain.seconds - resident.seconds == pytest.approx(COPY, rel=1e-9)
    pinned = predict(step(), profile(), variant="pinned")
    assert pinned.terms["copy_blocking_s"] == 0.0
    assert pinned.terms["device_copy_s"] == pytest.approx(4e-6 + 1e6 / 5e10, rel=1e-9)
    graph = predict(step(), profile(), variant="cuda-graph")
    # one replay (intercept 2 us) on the host; a graph's 1 us per kernel as the floor
    assert graph.host_s == pytest.approx(2e-6, rel=1e-6)
    assert graph.device_s == pytest.approx(MATMUL_S + 2e-6 + 1e-6, rel=1e-6)
    compiled = predict(step(), profile(), variant="compiled")  # relu + add_ fused into one
    assert compiled.terms["kernels"] == 2 and compiled.terms["launches"] == 2
    bf16 = predict(step(), profile(), variant="bf16")
    assert bf16.device_by_entry["matmul.bf16"] == pytest.approx(2e9 / 1e14, rel=1e-9)
    assert bf16.terms["kernels"] == 4  # and a cast of the addmm's [4, 4] float32 input
    with pytest.raises(ValueError, match="unknown variant"):
        predict(step(), profile(), variant="turbo")


def test_a_stored_prediction_is_recomputed_from_its_record() -> None:
    here = HostSpeed(python_loop_s=PYTHON_LOOP, numpy_loop_s=2 * NUMPY_LOOP)
    found = predict(step(), profile(), host="this", this_host=here, variant="pinned",
                    profile_name="synthetic")
    stored = Prediction.from_dict(json.loads(json.dumps(found.to_dict())))
    assert stored == found
    assert stored.recombined() == pytest.approx(found.seconds, rel=1e-12)
    again = recompute(stored, StepFeatures.from_dict(step().record()), profile())
    assert again == found
    planted = replace(stored, terms={**stored.terms, "sync_s": 1e-3})
    assert planted.recombined() != pytest.approx(found.seconds)  # a changed term shows


@pytest.mark.slow  # one child process importing torch (~5 s on the 2-core VM)
def test_real_features_of_a_tiny_torch_mlp_on_the_shipped_h200() -> None:
    if not installed("torch"):
        pytest.skip("torch is not installed")
    run_check("tests.predict_model_checks", "tiny_mlp_on_the_shipped_h200()", timeout_s=300,
              framework="torch")


def adam_region(params: int) -> tuple[OpRecord, ...]:
    """An optimizer step as torch's profiler range wraps it: single-tensor Adam's lerp_ and
    addcdiv_ per parameter (1 KB each, host 5 us)."""
    per_param = [op("aten.lerp_", "elementwise", 1000, 5e-6, allocates=False),
                 op("aten.addcdiv_", "elementwise", 1000, 5e-6, allocates=False)]
    return (op("profiler._record_function_enter_new", "marker", 0, 1e-6),
            *per_param * params, op("profiler._record_function_exit", "marker", 0, 1e-6))


def test_a_training_step_pays_its_fixed_host_work_in_the_profiles_dispatches() -> None:
    from harness.predict.model import STEP_OVERHEAD_DISPATCHES

    small = step(matmul_flops=2 * 10**7)  # launch-bound: the host queue is the step
    plain, trained = predict(small, profile()), predict(step(2 * 10**7, adam_region(2)),
                                                        profile())
    assert plain.terms["optimizer_steps"] == 0 and plain.terms["host_step_s"] == 0.0
    assert trained.terms["optimizer_steps"] == 1
    assert trained.terms["host_step_s"] == pytest.approx(STEP_OVERHEAD_DISPATCHES
                                                         * DISPATCH_ADD_, rel=1e-12)
    # A planted change in host.dispatch's add_ moves it by that many dispatches (and the
    # allocation, add minus add_, the other way for each of the step's 3 + 1 allocations).
    dearer = rows_by_entry(1e12 / MATMUL_FP32_RATE, FLOOR, LAUNCH)
    dearer["host.dispatch"] = [timed({"op": "add"}, DISPATCH_ADD),
                               timed({"op": "add_"}, DISPATCH_ADD_ + 1e-6)]
    planted = Profile(created="2026-11-27T00:00:00+00:00", framework="torch",
                      device={"description": "Synthetic GPU"},
                      entries=completed({spec.name: Entry(what=spec.what,
                                                          rows=dearer[spec.name])
                                         for spec in CATALOGUE if spec.name in dearer}))
    moved = predict(step(2 * 10**7, adam_region(2)), planted)
    allocations = trained.terms["allocations"]
    # ... and each of the step's tiny ops priced at the profiled host (model 4) by as many.
    assert moved.host_s - trained.host_s == pytest.approx(
        STEP_OVERHEAD_DISPATCHES * 1e-6 - allocations * 1e-6
        + trained.terms["ops_here"] * RECORDED_OP_DISPATCHES * 1e-6, rel=1e-9)
    graph = predict(step(2 * 10**7, adam_region(2)), profile(), variant="cuda-graph")
    assert graph.terms["host_step_s"] == 0.0  # a replay runs no Python


def test_one_cpu_model_is_not_rescaled_and_another_is() -> None:
    """Host 'this': the profile's launches rescaled by numpy's loop on another CPU, not on
    the profiled host's own model (one core count); host 'profiled' uses no loop at all."""
    small = step(matmul_flops=2 * 10**7)
    hosted = replace(profile(), host={"cpu_model": "Xeon X"})
    same = HostSpeed(python_loop_s=2 * PYTHON_LOOP, numpy_loop_s=3 * NUMPY_LOOP,
                     cpu_model="Xeon X")
    found = predict(small, hosted, host="this", this_host=same)
    assert (found.terms["python_scale"], found.terms["ops_scale"]) == (1.0, 1.0)
    assert "profiled host's model" in found.notes[-1]
    other = replace(same, cpu_model="Laptop Y")
    assert predict(small, hosted, host="this", this_host=other).terms[
        "ops_scale"] == pytest.approx(3.0)
    assert predict(small, hosted, this_host=other).seconds == pytest.approx(
        predict(small, hosted, this_host=same).seconds)
    assert HostSpeed.from_record(same.record()) == same
    # One generic model name on hosts of other core counts (a 2-core VM and a 16-core GPU
    # host both read "Intel(R) Xeon(R) Processor") is two machines: rescaled.
    counted = replace(hosted, host={"cpu_model": "Xeon X", "cores": 16})
    assert predict(small, counted, host="this", this_host=replace(same, cores=16)).terms[
        "ops_scale"] == 1.0
    vm = replace(same, cores=2)
    assert predict(small, counted, host="this", this_host=vm).terms[
        "ops_scale"] == pytest.approx(3.0)
    assert HostSpeed.from_record(vm.record()) == vm


def test_a_recurrent_layer_the_cpu_ran_step_by_step_is_unknown() -> None:
    cell = (op("aten.unsafe_split", "other", 1000, 5e-6), op("aten.sigmoid_", "elementwise",
                                                            1000, 5e-6, allocates=False))
    found = predict(step(extra=cell * 16), profile())
    assert found.status == "unknown" and "16 gate splits" in found.reason, found.reason
    assert predict(step(extra=cell), profile()).status == "predicted"  # one cell: a user loop


def test_a_fused_recurrent_layer_is_unknown_naming_the_layer_and_the_missing_row() -> None:
    """An nn.LSTM oneDNN ran on the CPU records one fused op a layer (kind 'rnn'), which the
    GPU runs as cuDNN's RNN call: no profile row prices it, so no confident interval."""
    lstm = (op("aten.mkldnn_rnn_layer", "rnn", 10**6, 400e-6, flops=4 * 10**8),
            op("aten.mkldnn_rnn_layer", "rnn", 10**6, 400e-6, flops=4 * 10**8),
            op("aten.mkldnn_rnn_layer_backward", "rnn", 2 * 10**6, 900e-6, flops=8 * 10**8))
    found = predict(step(extra=lstm), profile())
    assert found.status == "unknown" and found.seconds is None
    assert found.reason.startswith("a fused recurrent layer (aten.mkldnn_rnn_layer, "
                                   "aten.mkldnn_rnn_layer_backward)"), found.reason
    assert "no row for cuDNN's RNN call" in found.reason
    on_gpu = predict(step(extra=(op("aten._cudnn_rnn", "rnn", 10**6, 50e-6, flops=10**8),)),
                     profile())
    assert on_gpu.status == "unknown" and "(aten._cudnn_rnn)" in on_gpu.reason
    # The GRU the CPU decomposes into cells stays unknown for its own reason.
    cell = (op("aten.unsafe_split", "other", 1000, 5e-6), op("aten.sigmoid_", "elementwise",
                                                            1000, 5e-6, allocates=False))
    gru = predict(step(extra=cell * 16), profile())
    assert gru.status == "unknown" and "cell decomposition" in gru.reason
    # A matmul-only step of the same work is still priced: the kind, not the FLOPs, refuses.
    assert predict(step(extra=tuple(replace(each, kind="matmul", op="aten.mm")
                                    for each in lstm)), profile()).status == "predicted"


def test_a_data_loaders_range_is_no_optimizer_step() -> None:
    """torch's DataLoader wraps each `__next__` in a profiler range too: one that builds new
    tensors (selects, a stack) and updates nothing in place. On the MNIST workload it was
    counted as a step (9 in 4 training steps), and the H100's GPU step read 1.75x high."""
    loader = (op("profiler._record_function_enter_new", "marker", 0, 1e-6),
              op("aten.select", "view", 0, 2e-6), op("aten.stack", "elementwise", 4096, 9e-6),
              op("profiler._record_function_exit", "marker", 0, 1e-6))
    features = step(2 * 10**7, (*loader, *adam_region(2), *loader))
    assert predict(features, profile()).terms["optimizer_steps"] == 1

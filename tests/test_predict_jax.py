"""Every framework of the matrix predicted (issue 61, part 2): a jitted JAX step's features
from its compiled program, the JAX rows of a profile, the JAX model on planted rows, Keras on
torch through torch's recorder, TensorFlow's and an old profile's "unknown" with the reason,
and harness check's recomputation of all of them.

The framework checks run in child processes (tests/jax_feature_checks.py); this process reads
HLO text, planted profiles and stored records only."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.data.gpustep import PREDICTED, UNKNOWN, Prediction
from harness.data.noprofile import NO_TENSORFLOW_PROFILE, NoProfileFeatures
from harness.predict import hlo
from harness.predict.features import StepFeatures
from harness.predict.jaxfeatures import (
    JaxFeatures,
    KernelRecord,
    load_features,
    summarized,
)
from harness.predict.jaxmodel import (
    JAX_MODEL_VERSION,
    floor_seconds,
    predict_any,
    predict_jax,
    recompute_any,
)
from harness.predict.make import jax_rows_of, with_jax
from harness.predict.profile import (
    JAX_ENTRIES,
    NO_JAX_ROW,
    Entry,
    Profile,
    ProfileError,
    from_document,
    load_profile,
    read_profile,
    spec_of,
    write_profile,
)
from harness.predict.rates import HostSpeed
from harness.spec import BadInput
from tests.in_subprocess import installed, run_check
from tests.test_predict_model import (
    BANDWIDTH,
    MATMUL_FP32_RATE,
    PAGEABLE_LATENCY,
    PAGEABLE_RATE,
    timed,
)
from tests.test_predict_model import profile as torch_profile

JAX_DISPATCH, JAX_FLOOR = 20e-6, 1.5e-6  # the planted JAX rows: one dispatch, one more kernel


def jax_entries(dispatch_s: float = JAX_DISPATCH, floor_s: float = JAX_FLOOR) -> dict[str, Entry]:
    """Planted JAX rows: a dispatch, and chains of 1 and 101 kernels (slope FLOOR_S)."""
    return {"jax.dispatch": Entry(what=spec_of("jax.dispatch").what,
                                  rows=[timed({"op": "jit(x + 1)", "hlo_kernels": 1},
                                              dispatch_s)]),
            "jax.kernel_floor": Entry(what=spec_of("jax.kernel_floor").what, rows=[
                timed({"kernels": 1, "hlo_kernels": 1}, dispatch_s),
                timed({"kernels": 100, "hlo_kernels": 101}, dispatch_s + 100 * floor_s)])}


def profile_with_jax(**rows: float) -> Profile:
    base = torch_profile()
    return replace(base, software={**base.software, "jax": "0.10.2", "jaxlib": "0.10.2",
                                   "jax_profiled": "2026-12-07T00:00:00+00:00"},
                   entries={**base.entries, **jax_entries(**rows)})


def jax_step(**given: object) -> JaxFeatures:
    """A jitted step: a 2 GFLOP float32 gemm asked at full precision, 3 elementwise kernels of
    1 MB each, a reduction of 1 KB; 1 MB placed per step; host times chosen by hand."""
    kernels = [KernelRecord(op="fusion", kind="matmul", dtype="f32", flops=2e9, bytes=3e6,
                            highest=True),
               *[KernelRecord(op="fusion", kind="elementwise", dtype="f32", bytes=1e6)] * 3,
               KernelRecord(op="fusion", kind="reduction", dtype="f32", bytes=1e3)]
    fields = {"framework": "jax", "kernels": kernels, "dispatch_here_s": 30e-6,
              "tiny_dispatch_here_s": 10e-6, "loop_host_here_s": 100e-6, "h2d_bytes": 10**6,
              **given}
    return summarized(JaxFeatures(**fields))  # type: ignore[arg-type]


# Worked by hand for jax_step() on profile_with_jax() (host 'profiled', no host speed given):
HOST = 100e-6 + (30e-6 - 10e-6) + JAX_DISPATCH  # loop + the step's arguments + a dispatch
# The gemm at the fp32 rate; 1 MB at the bandwidth (1 us) is under the floor (1.5 us); the
# reduction (1 KB) at the floor. reduction.sum's planted row: 1e9 bytes in 2 ms.
DEVICE = 2e9 / MATMUL_FP32_RATE + 3 * JAX_FLOOR + JAX_FLOOR
COPY = PAGEABLE_LATENCY + 1e6 / PAGEABLE_RATE


def test_a_jitted_step_is_one_dispatch_and_its_kernels_at_their_rates() -> None:
    assert 1e6 / BANDWIDTH < JAX_FLOOR  # what DEVICE assumes
    prediction = predict_jax(jax_step(), profile_with_jax())
    assert prediction.status == PREDICTED and prediction.framework == "jax"
    assert prediction.model_version == JAX_MODEL_VERSION
    assert prediction.host_s == pytest.approx(HOST)
    assert prediction.device_s == pytest.approx(DEVICE)
    assert prediction.seconds == pytest.approx(max(HOST, DEVICE) + COPY)
    assert prediction.regime == "compute-bound"  # the 200 us gemm outweighs 140 us of host
    assert prediction.recombined() == pytest.approx(prediction.seconds)
    assert prediction.terms["floor_s"] == pytest.approx(JAX_FLOOR)
    assert prediction.profile["jax"] == "0.10.2"  # the JAX rows' version named


def test_planted_rows_move_the_prediction_as_the_model_says() -> None:
    small = jax_step(kernels=[KernelRecord(op="fusion", kind="elementwise", dtype="f32",
                                           bytes=100.0)] * 40)
    slow_floor = predict_jax(small, profile_with_jax(floor_s=10e-6))
    assert slow_floor.device_s == pytest.approx(40 * 10e-6)  # 40 kernels at the floor
    slow_host = predict_jax(small, profile_with_jax(dispatch_s=500e-6))
    assert slow_host.regime == "launch-bound"
    assert slow_host.host_s == pytest.approx(100e-6 + 20e-6 + 500e-6)
    tf32 = predict_jax(jax_step(kernels=[replace(jax_step().kernels[0], highest=False)]),
                       profile_with_jax())
    assert tf32.device_by_entry == {"matmul.tf32": pytest.approx(2e9 / 1e14)}  # 10 ms per 1e12


def test_the_host_speed_rescales_this_cpus_part_only() -> None:
    this = HostSpeed(python_loop_s=8e-3, numpy_loop_s=2e-3)  # twice as slow as the profiled
    prediction = predict_jax(jax_step(), profile_with_jax(), this_host=this)
    assert prediction.terms["python_scale"] == pytest.approx(0.5)
    assert prediction.host_s == pytest.approx((100e-6 + 20e-6) * 0.5 + JAX_DISPATCH)
    this_host = predict_jax(jax_step(), profile_with_jax(), host="this", this_host=this)
    assert this_host.host_s == pytest.approx(100e-6 + 20e-6 + JAX_DISPATCH * 2)


def test_unknown_says_why_a_profile_without_jax_rows_a_loop_tensorflow() -> None:
    without = predict_jax(jax_step(), torch_profile())  # a profile made before the JAX rows
    assert without.status == UNKNOWN and without.reason == NO_JAX_ROW
    assert "harness profile-device" in without.reason
    looped = predict_jax(jax_step(loops=1), profile_with_jax())
    assert looped.status == UNKNOWN and "loop" in looped.reason
    for framework in ("tensorflow", "keras-tensorflow"):
        tf = predict_any(NoProfileFeatures(framework, NO_TENSORFLOW_PROFILE), profile_with_jax())
        assert tf.status == UNKNOWN and tf.framework == framework
        assert tf.reason.startswith("no TensorFlow profile") and "profile-device" in tf.reason


def test_shipped_profiles_load_without_jax_rows_and_take_them_when_added(
        tmp_path: Path) -> None:
    shipped = load_profile("h200")  # made before the JAX rows were
    assert shipped.entries["jax.dispatch"].absent == NO_JAX_ROW
    document = shipped.to_dict()
    del document["entries"]["jax.kernel_floor"]  # as the shipped files are
    assert from_document(document).entries["jax.kernel_floor"].absent == NO_JAX_ROW
    del document["entries"]["host.numpy"]  # a torch entry stays required
    with pytest.raises(ProfileError, match=r"host\.numpy missing"):
        from_document(document)
    rows = replace(shipped, created="2026-12-07T01:00:00+00:00", software={"jax": "0.10.2"},
                   entries={**shipped.entries, **jax_entries()})
    added = with_jax(shipped, rows)
    path = tmp_path / "h100-jax.json"
    write_profile(added, path)
    again = read_profile(path)
    assert floor_seconds(again) == pytest.approx(JAX_FLOOR)
    assert again.identity() == shipped.identity()  # torch predictions still recompute
    assert again.software["jax_profiled"] == "2026-12-07T01:00:00+00:00"
    cpu_rows = replace(rows, device={**rows.device, "type": "cpu"})
    with pytest.raises(BadInput, match="cpu"):
        with_jax(shipped, cpu_rows)
    other_gpu = replace(rows, device={**rows.device, "description": "NVIDIA H100 80GB HBM3"})
    with pytest.raises(BadInput, match="H100"):
        with_jax(shipped, other_gpu)


def test_the_shipped_h100_is_its_profile_of_12_07_with_the_jax_rows_of_12_08() -> None:
    """The H100 profile made again on 2026-12-07 (kept in benchmarks/data) took the JAX rows
    measured into the profile shipped before it on 2026-12-08, as --add-jax merges them
    (with_jax), their own date, versions and device kept (jax_rows_of reads them back)."""
    shipped = load_profile("h100")
    remade = read_profile(Path(__file__).resolve().parents[1] / "benchmarks" / "data"
                          / "profile-h100-20261207.json")
    assert shipped.identity() == remade.identity() and shipped.created.startswith("2026-12-07")
    assert {name: entry for name, entry in shipped.entries.items() if name not in JAX_ENTRIES} \
        == {name: entry for name, entry in remade.entries.items() if name not in JAX_ENTRIES}
    rows = jax_rows_of(shipped)
    assert rows.created == shipped.software["jax_profiled"] and rows.created.startswith(
        "2026-12-08")
    assert (rows.software["jax"], rows.quick) == (shipped.software["jax"], False)
    assert with_jax(remade, rows) == shipped  # the merge reproduced from the two files
    with pytest.raises(BadInput, match="no JAX rows"):
        jax_rows_of(remade)


def test_records_reload_as_their_framework_and_recompute() -> None:
    step = jax_step()
    assert load_features(step.record()) == step
    assert load_features(step.record()).recomputed() == step
    assert isinstance(load_features(StepFeatures(framework="torch").record()), StepFeatures)
    tf = NoProfileFeatures("tensorflow", NO_TENSORFLOW_PROFILE)
    assert load_features(tf.record()) == tf
    stored = Prediction.from_dict(predict_any(step, profile_with_jax()).to_dict())
    again = recompute_any(stored, load_features(step.record()), profile_with_jax())
    assert again.seconds == stored.seconds and again.terms == stored.terms


THREEFRY_LIKE = """HloModule jit_step, is_scheduled=true

%body (p: (s32[], u32[4])) -> (s32[], u32[4]) {
  %p = (s32[], u32[4]{0}) parameter(0)
  ROOT %t = (s32[], u32[4]{0}) tuple(%p)
}

%cond (p.1: (s32[], u32[4])) -> pred[] {
  %p.1 = (s32[], u32[4]{0}) parameter(0)
  ROOT %c = pred[] constant(true)
}

%fused_dot (param_0: f32[64,128], param_1: f32[128,32]) -> f32[64,32] {
  %param_0 = f32[64,128]{1,0} parameter(0)
  %param_1 = f32[128,32]{1,0} parameter(1)
  ROOT %dot.1 = f32[64,32]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, """ \
    """rhs_contracting_dims={0}, operand_precision={highest,highest}
}

%fused_add (param_0.1: f32[64,32]) -> f32[64,32] {
  %param_0.1 = f32[64,32]{1,0} parameter(0)
  ROOT %add.1 = f32[64,32]{1,0} add(%param_0.1, %param_0.1)
}

ENTRY %main (x: f32[64,128], w: f32[128,32], k: (s32[], u32[4])) -> f32[64,32] {
  %x = f32[64,128]{1,0} parameter(0)
  %w = f32[128,32]{1,0} parameter(1)
  %k = (s32[], u32[4]{0}) parameter(2)
  %while.1 = (s32[], u32[4]{0}) while(%k), condition=%cond, body=%body, """ \
    """backend_config={"known_trip_count":{"n":"5"}}
  %gemm = f32[64,32]{1,0} fusion(%x, %w), kind=kOutput, calls=%fused_dot
  %bare = f32[64,32]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %out = f32[64,32]{1,0} fusion(%gemm), kind=kLoop, calls=%fused_add
}
"""


def test_the_hlo_reader_counts_kernels_flops_and_bytes() -> None:
    kernels, counts, loops = hlo.entry_kernels(hlo.parse(THREEFRY_LIKE))
    assert [kernel.kind for kernel in kernels] == ["elementwise", "matmul", "matmul",
                                                   "elementwise"]
    assert loops == 0  # a short fixed loop of elementwise work: one fused kernel on a GPU
    assert kernels[1].flops == kernels[2].flops == 2 * 64 * 32 * 128
    assert kernels[1].highest and not kernels[2].highest
    assert kernels[1].bytes == 4 * (64 * 128 + 128 * 32 + 64 * 32)
    assert counts == {"dot": 1, "fusion": 2, "parameter": 3, "while": 1}
    unknown_trips = THREEFRY_LIKE.replace(', backend_config={"known_trip_count":{"n":"5"}}', "")
    assert hlo.entry_kernels(hlo.parse(unknown_trips))[2] == 1


@pytest.mark.slow  # a child process importing jax and compiling a small MLP step
def test_jax_features_of_a_jitted_mlp_step() -> None:
    if not installed("jax") or not installed("optax"):
        pytest.skip("jax or optax is not installed")
    run_check("tests.jax_feature_checks", "mlp_step_checks()", timeout_s=300, framework="jax")


@pytest.mark.slow  # a child process importing jax and building the MNIST workload's cell
@pytest.mark.parametrize("framework", ["jax", "keras-jax", "keras-torch"])
def test_a_cells_features_pass_records_its_step(framework: str) -> None:
    needed = {"jax": ("jax", "optax"), "keras-jax": ("jax", "keras"),
              "keras-torch": ("torch", "keras")}[framework]
    if not all(installed(name) for name in needed):
        pytest.skip(f"{' or '.join(needed)} not installed")
    run_check("tests.jax_feature_checks", f"cell_checks({framework!r})", timeout_s=600,
              framework=framework)


# --- through the workers: stored, printed, recomputed by harness check --------------------------

COMPARE = ("compare", "--workload", "mnist-small", "--framework", "jax,keras-tensorflow",
           "--device", "cpu", "--quick", "--no-ceilings", "--sizes", "32", "--no-report",
           "--param", "train_samples=512")


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """One quick CPU run of the JAX and Keras-on-TensorFlow MNIST cells through the workers,
    predicted on the shipped profiles (h200 without a JAX row) and a copy of h100 with planted
    JAX rows."""
    if not all(installed(name) for name in ("jax", "optax", "keras", "tensorflow")):
        pytest.skip("jax, optax, keras or tensorflow is not installed")
    from typer.testing import CliRunner

    from harness.cli import app

    out = tmp_path_factory.mktemp("jaxrun")
    planted = out / "h100-planted-jax.json"
    shipped = load_profile("h100")
    write_profile(with_jax(shipped, replace(shipped, entries={**shipped.entries,
                                                               **jax_entries()})), planted)
    result = CliRunner().invoke(app, [*COMPARE, "--predict-for", str(planted), "--out",
                                      str(out / "results")], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    (run_dir,) = [path for path in (out / "results").iterdir() if path.is_dir()]
    return run_dir, str(planted.resolve()), result.output


@pytest.mark.slow  # two worker processes (JAX, TensorFlow) through the CLI
def test_the_run_stores_each_frameworks_prediction_and_why_not(
        jax_run: tuple[Path, str, str]) -> None:
    from harness.data.store import load_run

    run_dir, planted, output = jax_run
    for cell in load_run(run_dir).cells:
        (case,) = cell.cases
        stored = case.gpu_predictions
        assert set(stored) == {"h100", "h200", planted}
        for name, by_host in stored.items():
            for prediction in by_host.values():
                assert prediction.framework == cell.framework
                if cell.framework == "keras-tensorflow":
                    assert prediction.reason == NO_TENSORFLOW_PROFILE
                elif name in (planted, "h100"):  # the shipped h100 holds JAX rows
                    assert prediction.status == PREDICTED and prediction.seconds
                else:
                    assert prediction.reason == NO_JAX_ROW
    from tests.terminal_lines import unfolded

    lines = unfolded(output.splitlines(), 100)  # the CLI folds at COLUMNS=100
    said = lines[lines.index("verdict:"):]
    assert any("unknown" in line and "no JAX row" in line for line in said), said
    # The planted profile's ranking line: jax predicted, keras-tensorflow unknown.
    assert any("jax ~" in line and "unknown: keras-tensorflow (no TensorFlow profile)" in line
               for line in said), said


@pytest.mark.slow
def test_harness_check_recomputes_them_and_catches_a_planted_one(
        jax_run: tuple[Path, str, str], tmp_path: Path) -> None:
    import json

    from harness.audit import audit_run

    run_dir, planted, _ = jax_run
    audit = audit_run(run_dir)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    assert not audit.unverifiable, [item.line() for item in audit.unverifiable]
    copy = tmp_path / run_dir.name
    copy.mkdir()
    for path in run_dir.iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    document = json.loads((copy / "run.json").read_text())
    jax_cell = next(cell for cell in document["cells"] if cell["cell"]["framework"] == "jax")
    jax_cell["cases"][0]["gpu_predictions"][planted]["this"]["seconds"] *= 1.3
    (copy / "run.json").write_text(json.dumps(document))
    wrong = [item for item in audit_run(copy).mismatches if "predicted GPU step" in item.figure]
    assert wrong, "a planted JAX prediction passed the check"


@pytest.mark.slow  # one child process that imports jax and measures its rows
def test_add_jax_measures_the_jax_rows_into_an_existing_profile(tmp_path: Path) -> None:
    if not installed("jax"):
        pytest.skip("jax is not installed")
    from typer.testing import CliRunner

    from harness.cli import app

    shipped = load_profile("h100")  # its torch rows stand in for a CPU profile's
    path = tmp_path / "cpu-without-jax.json"
    write_profile(replace(shipped, device={"name": "cpu", "type": "cpu", "description": "cpu"}),
                  path)
    result = CliRunner().invoke(app, ["profile-device", "--add-jax", str(path), "--quick"])
    assert result.exit_code == 0, result.output
    added = read_profile(path)
    assert added.entries["host.dispatch"] == shipped.entries["host.dispatch"]  # untouched
    assert added.software["jax"] and added.software["jax_quick"] is True
    floor = added.entries["jax.kernel_floor"]
    assert [row.params["hlo_kernels"] for row in floor.rows] == \
        [row.params["kernels"] for row in floor.rows]  # each chain kernel is its own kernel
    assert floor_seconds(added) >= 0.0
    assert added.entries["jax.dispatch"].rows[0].median_s > 0  # type: ignore[operator]
    gpu = tmp_path / "gpu.json"
    write_profile(shipped, gpu)
    refused = CliRunner().invoke(app, ["profile-device", "--add-jax", str(gpu), "--device",
                                       "cpu", "--quick"])
    assert refused.exit_code == 2 and "cuda device" in refused.output


def test_keras_on_torch_pays_its_python_between_the_ops_on_the_host() -> None:
    from harness.predict.model import predict
    from tests.test_predict_model import HOST_HERE
    from tests.test_predict_model import step as torch_step

    plain = replace(torch_step(), outside_ops_s=300e-6)  # 300 us between its ops
    keras = replace(plain, framework="keras-torch")
    torch_prediction, keras_prediction = predict(plain, torch_profile()), predict(
        keras, torch_profile())
    assert "host_outside_ops_s" not in torch_prediction.terms  # torch's step: unchanged
    assert keras_prediction.framework == "keras-torch"
    assert keras_prediction.terms["host_outside_ops_s"] == pytest.approx(300e-6)
    # Priced as torch's own Python is (model 4: per recorded op at the profiled host's cost).
    scale = keras_prediction.terms["python_scale"]
    assert torch_prediction.terms["python_scale"] == pytest.approx(scale)
    assert torch_prediction.terms["host_python_s"] == pytest.approx(HOST_HERE * scale)
    assert keras_prediction.terms["host_python_s"] == pytest.approx((HOST_HERE + 300e-6) * scale)
    assert keras_prediction.host_s - torch_prediction.host_s == pytest.approx(300e-6 * scale)

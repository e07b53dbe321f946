"""Device profiles (issue 51, part 1): versioned, round-tripped, refused in one line when they
are not one or are newer; the CPU profile holds every entry its catalogue promises there, and
says why each GPU-only one is absent. Structure and counts only, never a speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.measure import envinfo
from harness.predict import command
from harness.predict.profile import (
    ANY,
    CATALOGUE,
    ENTRY_NAMES,
    GPU,
    SCHEMA_VERSION,
    Entry,
    Profile,
    ProfileError,
    Row,
    absent,
    completed,
    load_profile,
    measured,
    read_profile,
    shipped_names,
    write_profile,
)
from tests.in_subprocess import installed, run_check


def synthetic() -> Profile:
    """A profile made by hand: two measured entries, every other one absent."""
    rows = [Row.timed({"m": 64, "n": 64, "k": 64}, [2e-6, 1e-6, 3e-6], 128, flops=2.0 * 64**3)]
    entries = completed({"matmul.fp32": measured("matmul.fp32", rows),
                         "ops.aten": measured("ops.aten", [Row(params={"op": "softmax fwd"},
                                                               counts={"aten_ops": 1})]),
                         "device.sync": absent("device.sync", "planted reason")})
    return Profile(created="2026-11-27T00:00:00+00:00", framework="torch", quick=True,
                   measured_s=1.5, device={"name": "cuda:0", "type": "cuda",
                                           "description": "Planted GPU"},
                   host={"cpu_model": "planted"}, software={"torch": "2.13", "driver": "1.0"},
                   entries=entries)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_profile_round_trips_with_its_version_and_identity(tmp_path: Path) -> None:
    profile = synthetic()
    path = tmp_path / "planted.json"
    write_profile(profile, path)
    document = json.loads(path.read_text())
    assert document["kind"] == "harness-device-profile"
    assert document["schema_version"] == SCHEMA_VERSION == 1
    loaded = read_profile(path)
    assert loaded == profile and loaded.to_dict() == document
    assert list(loaded.entries) == list(ENTRY_NAMES)  # every catalogue entry, in order
    row = loaded.entry("matmul.fp32").row(m=64)
    assert (row.median_s, row.calls_per_sample) == (2e-6, 128)  # the samples' median
    assert row.rate() == pytest.approx(2.0 * 64**3 / 2e-6)
    assert loaded.entry("device.sync").absent == "planted reason"
    assert "not measured" in loaded.entry("conv.bf16").absent  # filled in by completed()
    assert loaded.identity() == ("Planted GPU (profiled 2026-11-27, torch 2.13, driver 1.0, "
                                 "--quick)")


def test_a_newer_profile_is_refused_in_one_line_at_exit_2(tmp_path: Path) -> None:
    document = synthetic().to_dict()
    document["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ProfileError, match="schema_version 2 is newer than this harness reads"):
        read_profile(path)
    result = invoke("profile-device", "--show", str(path))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error: ") and "newer" in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("text, words", [
    ("{not json", "not JSON"),
    (json.dumps({"some": "run.json"}), "not a device profile"),
    (json.dumps({"kind": "harness-device-profile", "schema_version": "1"}), "whole number"),
])
def test_what_is_not_a_profile_is_one_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ProfileError, match=words) as raised:
        read_profile(path)
    assert "\n" not in str(raised.value)


def test_a_profile_missing_an_entry_or_with_a_wrong_median_is_refused(tmp_path: Path) -> None:
    document = synthetic().to_dict()
    del document["entries"]["host.python"]
    path = tmp_path / "short.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ProfileError, match=r"entry host\.python missing"):
        read_profile(path)
    document = synthetic().to_dict()
    document["entries"]["matmul.fp32"]["rows"][0]["median_s"] = 1e-9  # not its samples'
    path.write_text(json.dumps(document))
    with pytest.raises(ProfileError, match="not its samples' median"):
        read_profile(path)


def test_shipped_profiles_are_listed_and_an_unknown_name_lists_them(tmp_path: Path) -> None:
    write_profile(synthetic(), tmp_path / "planted-gpu.json")
    assert shipped_names(tmp_path) == ["planted-gpu"]
    assert load_profile("planted-gpu", tmp_path).device["description"] == "Planted GPU"
    with pytest.raises(ProfileError, match=r"no-such-gpu: .*\(shipped: planted-gpu\)"):
        load_profile("no-such-gpu", tmp_path)
    assert command.list_lines(tmp_path) == [
        "planted-gpu: Planted GPU (profiled 2026-11-27, torch 2.13, driver 1.0, --quick)"]
    assert command.list_lines(tmp_path / "empty")[0].startswith("no shipped profiles")
    for name in shipped_names():  # what the package ships loads at this version
        assert load_profile(name).schema_version <= SCHEMA_VERSION
    result = invoke("profile-device", "--list")
    assert result.exit_code == 0, result.output


def test_a_bad_device_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    result = invoke("profile-device", "--device", "gpu0", "--out", str(tmp_path / "x.json"))
    assert result.exit_code == 2
    assert result.stderr.strip() == ("harness: error: --device 'gpu0': expected cpu or cuda:N "
                                     "(example: cuda:0)")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow  # one child process that imports torch (~3 s on the 2-core VM)
def test_the_cpu_profile_holds_what_it_promises(tmp_path: Path) -> None:
    if not installed("torch"):
        pytest.skip("torch is not installed")
    path = tmp_path / "cpu.json"
    result = invoke("profile-device", "--device", "cpu", "--quick", "--out", str(path))
    assert result.exit_code == 0, result.output
    assert f"wrote {path}" in result.stdout
    profile = read_profile(path)
    assert (profile.framework, profile.quick, profile.device["type"]) == ("torch", True, "cpu")
    assert profile.host["cpu_model"] == envinfo.cpu_model()
    assert profile.software["torch"] and profile.software["driver"] is None
    for spec in CATALOGUE:
        entry = profile.entry(spec.name)
        if spec.applies == ANY:
            assert entry.present and entry.rows, spec.name
        else:
            assert spec.applies == GPU and entry.absent.startswith("cpu: "), spec.name
    for name in ("host.dispatch", "matmul.fp32", "conv.fp32", "elementwise.add",
                 "reduction.sum", "host.python", "host.numpy"):
        for row in profile.entry(name).rows:
            assert len(row.samples_s) >= 3 and row.calls_per_sample >= 1, (name, row)
            assert row.median_s is not None and row.iqr_s is not None
    for name in ("host.python", "host.numpy"):  # several passes, spread over the run
        row = profile.entry(name).rows[0]
        assert row.params["passes"] == 9 and row.median_s == min(row.params["pass_medians_s"])
    assert profile.entry("matmul.fp32").row(m=64).flops == 2.0 * 64 * 128 * 128
    assert profile.entry("elementwise.add").row(elements=1024).bytes == 3.0 * 1024 * 4
    counts = {row.params["op"]: row.counts for row in profile.entry("ops.aten").rows}
    assert counts["softmax fwd"] == {"aten_ops": 1, "kernel_ops": 1}
    assert counts["layernorm fwd"] == {"aten_ops": 1, "kernel_ops": 1}
    assert counts["linear fwd+bwd"]["kernel_ops"] >= 3  # addmm and two gradients at least


def test_the_copy_rows_read_written_memory_not_the_zero_page() -> None:
    """A lent H200's pageable copy read 18 GB/s from an untouched buffer and 7.2 GB/s from
    written data: the profile's source buffer must be resident (checked in a torch child)."""
    if not installed("torch"):
        pytest.skip("torch is not installed")
    run_check("tests.predict_checks", "transfer_source_pages_are_written()", framework="torch")


def test_the_host_loops_keep_each_loops_fastest_pass() -> None:
    """Per loop the pass with the least median is kept, every pass's median listed in order
    (planted rows: no clock)."""
    from harness.predict.hostspeed import fastest

    def loops(python_s: float, numpy_s: float) -> dict[str, Entry]:
        return {name: measured(name, [Row.timed({"loop": name}, [seconds] * 3, 1)])
                for name, seconds in (("host.python", python_s), ("host.numpy", numpy_s))}
    kept = fastest([loops(5e-3, 1e-3), loops(3e-3, 2e-3), loops(4e-3, 1.5e-3)])
    python, numpy = kept["host.python"].rows[0], kept["host.numpy"].rows[0]
    assert (python.median_s, numpy.median_s) == (3e-3, 1e-3)
    assert python.params == {"loop": "host.python", "passes": 3,
                             "pass_medians_s": [5e-3, 3e-3, 4e-3]}
    assert numpy.params["pass_medians_s"] == [1e-3, 2e-3, 1.5e-3]

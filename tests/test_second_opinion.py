"""Issue 49: a FLOP count that an independent count of the same call disputes is printed as
disputed, names the part and both figures, and makes no share of a peak; `harness check`
recomputes the verdict from the stored figures and holds every printed place to it.

The planted error: one op-level formula doubled (torch: aten.convolution; JAX: the jaxpr's
conv_general_dilated, whose count then disagrees with XLA's cost analysis). Each count runs in
a child process (torch and JAX are never imported here); their records then go through the
path the report takes (a run folder, summary.md, `harness check`) and the CLI's rate text.
One worker test plants the torch formula from the user's own model file, as a user's
`harness compare --model` would meet a wrong formula.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.stats import implausibility
from harness.audit import audit_run
from harness.commands.tables import flop_rate_text, short_rate
from harness.core import registry
from harness.data.ceilings import DeviceCeiling, Peaks
from harness.data.secondopinion import RECORD_KEY, Part, disputed_parts, disputed_text, record
from harness.report import render_report
from harness.report.views import warnings as warnings_view
from tests.cli_in_process import run_cli_in_process
from tests.in_subprocess import installed
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn
from tests.synthetic_runs import (
    CPU_MACHINE,
    cli_rows_of,
    make_case,
    make_result,
    typed_result,
    write_fixture_run,
)

PROJECT_ROOT = Path(__file__).resolve().parent.parent


# --- the children's side: a count with one formula doubled ---------------------------------------

def torch_counts() -> dict[str, Any]:
    """A depthwise-separable block's training step, counted as is and with aten.convolution's
    formula doubled (runs in a child: imports torch)."""
    import torch
    from torch import nn

    from harness.backends.torch import flops

    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(),
                        nn.Conv2d(8, 16, 1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 36, 4))
    x = torch.randn(2, 8, 6, 6)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)

    def step() -> None:
        optimizer.zero_grad()
        net(x).square().mean().backward()
        optimizer.step()

    honest = flops.count(step, net)
    formula = flops.FORMULAS["aten.convolution"]
    flops.FORMULAS["aten.convolution"] = lambda args, out: 2 * formula(args, out)
    planted = flops.count(step, net)
    return {"honest": [honest.flops, honest.second_opinion],
            "planted": [planted.flops, planted.second_opinion]}


def torch_autocast_counts() -> dict[str, Any]:
    """A small conv net's training step under CPU autocast (bf16; fp16 with a GradScaler),
    one convolution called twice in the step as a shared layer is: autocast casts its
    weight once for the whole region, so the second call's cast node is the first's. Counted
    as is and with aten.convolution_backward's formula doubled (runs in a child)."""
    import torch
    from torch import nn

    from harness.backends.torch import flops

    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.norm = nn.BatchNorm2d(8)
            self.conv = nn.Conv2d(8, 8, 3, padding=1)
            self.head = nn.Linear(8, 4)

        def forward(self, x: Any) -> Any:
            h = torch.relu(self.norm(self.stem(x)))
            h = torch.relu(self.conv(torch.relu(self.conv(h))))
            return self.head(h.mean((2, 3)))

    torch.manual_seed(0)
    torch.set_num_threads(1)
    net, x, y = Shared(), torch.randn(2, 3, 8, 8), torch.randn(2, 4)
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3)

    def step(dtype: Any) -> Any:
        scaler = torch.amp.GradScaler("cpu") if dtype == torch.float16 else None

        def call() -> None:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=dtype):
                loss = nn.functional.mse_loss(net(x).float(), y)
            if scaler is None:
                loss.backward()
                optimizer.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        return call

    found = {name: flops.count(step(dtype), net).second_opinion
             for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16))}
    formula = flops.FORMULAS["aten.convolution_backward"]
    flops.FORMULAS["aten.convolution_backward"] = lambda args, out: 2 * formula(args, out)
    found["bf16 planted"] = flops.count(step(torch.bfloat16), net).second_opinion
    return found


def jax_counts() -> dict[str, Any]:
    """A small conv net's Adam step: XLA's count beside the jaxpr's, as is and with the
    jaxpr's convolution formula doubled (runs in a child: imports JAX)."""
    import jax
    import jax.numpy as jnp
    import optax
    from jax import lax

    from harness.backends.jax import jaxprflops
    from harness.backends.jax.usermodel import xla_flops

    def conv(x: Any, w: Any, stride: int = 1) -> Any:
        return lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def apply(p: Any, x: Any) -> Any:
        h = jax.nn.relu(conv(x, p["c1"]))
        return jnp.mean(conv(h, p["c2"], 2), axis=(1, 2)) @ p["fc"]

    params = {"c1": jnp.full((3, 3, 3, 8), 0.1), "c2": jnp.full((3, 3, 8, 16), 0.1),
              "fc": jnp.full((16, 4), 0.1)}
    x, y, adam = jnp.ones((4, 12, 12, 3)), jnp.zeros((4, 4)), optax.adam(1e-3)

    def step(p: Any, state: Any) -> Any:
        loss, grads = jax.value_and_grad(lambda q: jnp.mean((apply(q, x) - y) ** 2))(p)
        updates, state = adam.update(grads, state, p)
        return optax.apply_updates(p, updates), state, loss

    traced = jax.jit(step).trace(params, adam.init(params))
    counted, _ = xla_flops(traced.lower().compile().cost_analysis())
    honest = jaxprflops.second_opinion(traced.jaxpr, counted)
    alone = _jax_convolutions_alone()
    formula = jaxprflops.CONTRACTIONS["conv_general_dilated"]
    jaxprflops.CONTRACTIONS["conv_general_dilated"] = lambda eqn: 2 * formula(eqn)
    return {"honest": [counted, honest], "convolutions alone": alone,
            "planted": [counted, jaxprflops.second_opinion(traced.jaxpr, counted)]}


def _jax_convolutions_alone() -> dict[str, list[float]]:
    """Single convolutions of every kind: [XLA's count, the jaxpr's] (runs in the child)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from harness.backends.jax import jaxprflops

    image, volume, line = ("NHWC", "HWIO", "NHWC"), ("NDHWC", "DHWIO", "NDHWC"), \
        ("NWC", "WIO", "NWC")
    kinds = {  # name: (function, input shape, kernel shape)
        "padded": (lambda x, w: lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=image), (2, 9, 9, 4), (3, 3, 4, 8)),
        "strided": (lambda x, w: lax.conv_general_dilated(
            x, w, (2, 2), ((1, 1), (1, 1)), dimension_numbers=image), (2, 15, 15, 4),
            (3, 3, 4, 8)),
        "dilated": (lambda x, w: lax.conv_general_dilated(
            x, w, (1, 1), "SAME", rhs_dilation=(2, 2), dimension_numbers=image),
            (2, 12, 12, 4), (3, 3, 4, 8)),
        "grouped": (lambda x, w: lax.conv_general_dilated(
            x, w, (1, 1), "SAME", feature_group_count=4, dimension_numbers=image),
            (2, 10, 10, 16), (3, 3, 4, 32)),
        "transposed": (lambda x, w: lax.conv_transpose(
            x, w, (2, 2), "SAME", dimension_numbers=image), (2, 7, 7, 8), (4, 4, 8, 4)),
        "1-D": (lambda x, w: lax.conv_general_dilated(
            x, w, (2,), ((2, 2),), dimension_numbers=line), (3, 33, 4), (5, 4, 8)),
        "3-D": (lambda x, w: lax.conv_general_dilated(
            x, w, (1, 2, 2), "SAME", dimension_numbers=volume), (2, 6, 8, 8, 2),
            (3, 3, 3, 2, 4)),
    }
    found = {}
    for name, (function, x, w) in kinds.items():
        traced = jax.jit(function).trace(jnp.ones(x), jnp.ones(w))
        found[name] = [traced.lower().compile().cost_analysis()["flops"],
                       jaxprflops.count_jaxpr(traced.jaxpr).low]
    return found


@functools.cache
def _child(function: str) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(PROJECT_ROOT))
    code = f"import json, tests.test_second_opinion as t; print(json.dumps(t.{function}()))"
    ran = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return dict(json.loads(ran.stdout.splitlines()[-1]))


@pytest.fixture(scope="module", params=["torch", "jax"])
def counted(request: pytest.FixtureRequest) -> dict[str, Any]:
    if not installed(request.param):
        pytest.skip(f"{request.param} is not installed")
    return {**_child(f"{request.param}_counts"), "framework": request.param}


# --- the counts themselves ------------------------------------------------------------------

def test_an_honest_count_is_not_disputed(counted: dict) -> None:
    _, honest = counted["honest"]
    assert honest["parts"] and disputed_text({RECORD_KEY: honest}) == ""


def test_a_doubled_formula_is_disputed_and_named_with_both_figures(counted: dict) -> None:
    flops, planted = counted["planted"]
    text = disputed_text({RECORD_KEY: planted})
    if counted["framework"] == "torch":
        # Both convolutions' forwards, each 2x its shapes' count; their backwards agree.
        assert flops > counted["honest"][0]
        disputed = disputed_parts({RECORD_KEY: planted})
        assert [part.name for part in disputed] == ["Conv2d '0' forward", "Conv2d '2' forward"]
        assert all(part.counted == 2 * part.low == 2 * part.high for part in disputed)
        assert "(aten.convolution) vs" in text and "(2x)" in text
    else:
        # XLA's count did not change: the jaxpr's doubled convolutions now exceed it.
        assert flops == counted["honest"][0]
        assert "the whole step (conv_general_dilated, dot_general)" in text
        assert f"{int(flops):,} FLOPs by op (XLA cost analysis)" in text
    part = disputed_parts({RECORD_KEY: planted})[0]
    assert f"{part.counted:,}" in text and f"{part.low:,}" in text


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_under_autocast_a_right_count_stands_and_a_wrong_one_is_disputed() -> None:
    """Autocast reaches each weight through a cast it caches for the whole region: a layer
    called twice found the first call's cast claimed and no accumulator behind it, so its
    second backward's shapes allowed the input gradient only (1.33x disputed under bf16)."""
    found = _child("torch_autocast_counts")
    for name in ("bf16", "fp16"):
        parts = {part["name"]: part for part in found[name]["parts"]}
        assert disputed_text({RECORD_KEY: found[name]}) == "", (name, parts)
        shared = parts["Conv2d 'conv' backward"]
        # Both calls compute both gradients: 4 x one call's forward.
        forward = parts["Conv2d 'conv' forward"]["counted"] // 2
        assert shared["counted"] == 4 * forward <= shared["high"], (name, shared)
        # The record says how: the second call's weight cast was the first's.
        assert "engine: input yes, weights cannot say; could flow: input yes, weights yes" \
            in shared["gradients"], shared
        assert parts["Conv2d 'stem' backward"]["counted"] == \
            parts["Conv2d 'stem' forward"]["counted"]  # its input needs no gradient
    disputed = disputed_parts({RECORD_KEY: found["bf16 planted"]})
    assert {part.name for part in disputed} == {"Conv2d 'stem' backward",
                                                "Conv2d 'conv' backward"}
    assert all(part.counted >= 2 * part.high for part in disputed)


@pytest.mark.skipif(not installed("jax"), reason="jax is not installed")
def test_the_jaxprs_convolution_count_is_xlas_on_every_kind() -> None:
    """The second opinion mirrors HloCostAnalysis's convolution formula (taps on padding or
    on an input dilation's holes do not count): equal to XLA's on each kind alone."""
    for name, (xla, jaxpr) in _child("jax_counts")["convolutions alone"].items():
        assert jaxpr == xla, name


# --- through a run folder: summary.md, measurements.csv, harness check, the CLI -------------------

def _fault_run(tmp_path: Path, planted: dict[str, Any], flops: float) -> Path:
    """A run of the suite's fault workload whose size-1 case carries the disputed count and
    runs faster than size 2 (so a share of the peak, were one made, would be the cell's best);
    the CPU's measured fp32 peak is 60 GFLOP/s."""
    honest = record("by", "module shapes", [Part("Linear 'head' forward", 1000, 1000, 1000,
                                                 {"aten.addmm": 1000})], [])
    cases = [make_case({"size": 1}, 0.002, extra={"flops_per_call": flops, RECORD_KEY: planted}),
             make_case({"size": 2}, 0.01, extra={"flops_per_call": flops, RECORD_KEY: honest})]
    results = [make_result("fault", "fake", "cpu", cases, variant="ok")]
    ceilings = {"cpu": {"peak_gflops_by_precision": {"fp32": 60.0}}}
    return write_fixture_run(tmp_path / "run", CPU_MACHINE, results, workload="fault",
                             sweep="size", params={"size": [1, 2]},
                             work=lambda case: {"flops": flops},
                             extra_doc={"ceilings": ceilings})


@pytest.fixture
def disputed_run(counted: dict, tmp_path: Path) -> tuple[Path, str]:
    flops, planted = counted["planted"]
    run = _fault_run(tmp_path, planted, float(flops))
    render_report([run], run)
    return run, disputed_text({RECORD_KEY: planted})


def test_a_reworded_disputed_line_has_every_figure_of_it_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four disputed parts (one against a range): the three named, each with its figures, and
    the one left unnamed, checked from their records whatever the line's words."""
    parts = [Part(f"layer {index} forward", 2000 * (index + 1), 1000 * (index + 1),
                  1000 * (index + 1) + (500 if index == 0 else 0), {"aten.mm": 1})
             for index in range(4)]
    monkeypatch.setattr(warnings_view, "DISPUTED_LINE",
                        "- {cell}{size} on {machine}: the counts differ: {parts}.")
    run = _fault_run(tmp_path, record("by", "module shapes", parts, []), 20000.0)
    render_report([run], run)
    text = (run / "summary.md").read_text()
    assert "DISPUTED FLOP count" not in text and "the counts differ: layer 0 forward" in text
    audit = audit_run(run)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    records = [item for item in json.loads((run / "figures.json").read_text())["figures"]
               if item["family"] == warnings_view.DISPUTED_FAMILY]
    # Per named part: by op, the second count (and its top for the range), the ratio; the rest.
    assert len(records) == 3 * 3 + 1 + 1
    bare = tmp_path / "bare"
    shutil.copytree(run, bare)
    stored = json.loads((bare / "figures.json").read_text())
    stored["figures"] = [item for item in stored["figures"] if item not in records]
    (bare / "figures.json").write_text(json.dumps(stored))
    rest = audit_run(bare)
    assert audit.checked - rest.checked == len(records)
    assert [item.figure for item in rest.mismatches] == ["DISPUTED FLOP count line"]


def test_the_report_prints_it_disputed_with_no_share_of_the_peak(
        disputed_run: tuple[Path, str]) -> None:
    run, text = disputed_run
    summary = (run / "summary.md").read_text()
    line = next(line for line in summary.splitlines()
                if line.startswith("- DISPUTED FLOP count: "))
    assert "fake cpu ok at size=1: " + text in line
    assert line.endswith("its FLOP rate is printed as disputed and is no share of a peak.")
    ceilings = summary.split("### Throughput vs the machine's measured ceilings")[1]
    rows = [row for row in ceilings.splitlines() if row.startswith("| ") and "fake" in row]
    assert len(rows) == 1 and "| 2 |" in rows[0]  # the agreeing case, never the disputed one
    with (run / "measurements.csv").open() as stream:
        marked = {row["size"]: row["flops_disputed"] for row in csv.DictReader(stream)}
    assert marked == {"1": text, "2": ""}
    audit = audit_run(run)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    assert not [item for item in audit.unverifiable if "DISPUTED" in item.line()]


def test_the_cli_prints_the_rate_disputed_with_no_share_of_the_peak(counted: dict) -> None:
    flops, planted = counted["planted"]
    cell = typed_result(make_result("fault", "fake", "cpu", [make_case(
        {"size": 1}, 0.002, extra={"flops_per_call": flops, RECORD_KEY: planted})],
        variant="ok"))
    (row,) = cli_rows_of(registry.load_workload("fault"), cell)
    text = flop_rate_text(row, DeviceCeiling("cpu", Peaks({"fp32": 60.0})), "fp32")
    assert "count disputed: " + row.flops_disputed in text and "of peak" not in text
    assert short_rate(row).endswith("GFLOP/s disputed")
    # Nor a verdict on physics: a probe far below the rate would otherwise read as low.
    tiny = DeviceCeiling("cpu", Peaks({"fp32": 1e-6}))
    assert implausibility(row, tiny) == ""
    assert implausibility(replace(row, flops_disputed=""), tiny) != ""


@pytest.mark.planted
def test_check_names_a_disputed_line_that_misquotes_the_record(
        disputed_run: tuple[Path, str]) -> None:
    run, text = disputed_run
    summary = run / "summary.md"
    part = text.split("; ")[0]
    figure = part.split(": ")[-1].split(" FLOPs")[0]
    summary.write_text(summary.read_text().replace(figure, figure + "1", 1))
    lines = [item.line() for item in audit_run(run).mismatches]
    assert any("disputed part" in line for line in lines), lines


@pytest.mark.planted
def test_check_names_a_disputed_count_left_unsaid(disputed_run: tuple[Path, str]) -> None:
    run, _ = disputed_run
    summary = run / "summary.md"
    summary.write_text("\n".join(line for line in summary.read_text().splitlines()
                                 if not line.startswith("- DISPUTED FLOP count: ")))
    # A report that leaves the case out prints neither its line nor its records.
    stored = json.loads((run / "figures.json").read_text())
    stored["figures"] = [record for record in stored["figures"]
                         if record["family"] != warnings_view.DISPUTED_FAMILY]
    (run / "figures.json").write_text(json.dumps(stored))
    rows = run / "measurements.csv"
    with rows.open(newline="") as stream:
        reader = csv.DictReader(stream)
        kept = [dict(row, flops_disputed="") for row in reader]
        names = list(reader.fieldnames or [])
    with rows.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=names)
        writer.writeheader()
        writer.writerows(kept)
    lines = [item.line() for item in audit_run(run).mismatches]
    assert any("DISPUTED FLOP count line printed no line" in line for line in lines), lines
    assert any("flops_disputed (the count is disputed) stored nothing" in line
               for line in lines), lines


@pytest.mark.planted
def test_check_names_a_share_of_the_peak_made_from_a_disputed_count(
        disputed_run: tuple[Path, str]) -> None:
    run, _ = disputed_run
    # The ceilings table's share of the undisputed size, its record moved to the disputed one.
    stored = json.loads((run / "figures.json").read_text())
    share = next(record for record in stored["figures"] if record["name"] == "% of ceiling"
                 and record["subject"]["size"] == "2" and record["subject"]["device"] == "cpu")
    share["subject"]["size"] = "1"
    (run / "figures.json").write_text(json.dumps(stored))
    found = [item.line() for item in audit_run(run).mismatches]
    assert any("% of ceiling from a disputed FLOP count" in line for line in found), found


# --- the user's path: a formula planted from the model file, `harness compare --model` ----------

PLANTED_MODEL = """
    import numpy as np
    import torch.nn as nn

    from harness.backends.torch import flops

    # The planted error: torch's convolution counted twice, as a wrong formula would.
    _formula = flops.FORMULAS["aten.convolution"]
    flops.FORMULAS["aten.convolution"] = lambda args, out: 2 * _formula(args, out)

    def model():
        return nn.Sequential(nn.Conv2d(3, 3, 3, padding=1, groups=3), nn.ReLU(),
                             nn.Conv2d(3, 8, 1), nn.Flatten(), nn.Linear(8 * 25, 2))

    def inputs(batch, rng):
        return rng.standard_normal((batch, 3, 5, 5), dtype=np.float32)
"""


@pytest.mark.slow  # one torch worker
@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_a_planted_formula_in_a_users_run_is_printed_disputed(tmp_path: Path) -> None:
    """Run in this process: its torch workers fork from the session's warm processes."""
    model = tmp_path / "planted.py"
    model.write_text(textwrap.dedent(PLANTED_MODEL))
    ran = run_cli_in_process("compare", "--model", str(model), "--device", "cpu", "--quick",
                             "--no-ceilings", "--sizes", "2", "--out", str(tmp_path / "out"),
                             env={"OMP_NUM_THREADS": "1", "COLUMNS": "200"})
    assert ran.returncode == 0, ran.stdout + ran.stderr  # its own check found no mismatch
    assert "GFLOP/s disputed" in ran.stdout
    said = " ".join(ran.stdout.split())
    assert said.count("Conv2d '0' forward: ") == 1  # once in the warnings, not twice
    assert "warning: DISPUTED FLOP count: " in said and "(aten.convolution) vs" in said
    (run,) = [path for path in (tmp_path / "out").iterdir() if path.is_dir()]
    summary = (run / "summary.md").read_text()
    assert "- DISPUTED FLOP count: " in summary and "(aten.convolution) vs" in summary
    document = json.loads((run / "run.json").read_text())
    (case,) = [case for cell in document["cells"] for case in cell["cases"]]
    names = [part.name for part in disputed_parts(case["extra"])]
    assert names == ["Conv2d '0' forward", "Conv2d '2' forward"]

"""The fixes `harness advise` tries, as variants of a user's model (issue 41): bf16 checked
against the model's own sensitivity to bf16's rounding (a benign model passes, one built to
lose precision in bf16 fails; issue 49, tests/test_precision_parity.py), composed
variant names, the thread count a threads-N cell really ran with, and Keras' bf16 policy.

Worker runs go through `harness compare --model` on the CPU, as tests/test_usermodel.py runs
them: tiny models, batch 2, one thread per framework (OMP_NUM_THREADS=1 in run_cli).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.run.plan import resolve_variants
from harness.spec import BadInput
from harness.workloads import matmul
from harness.workloads.usermodel.precision import PRECISION_TOLERANCE
from harness.workloads.usermodel.spec import (
    FIXES,
    ON_CPU_RESIDENT,
    VARIANTS,
    check,
    compose_variant,
    conflict,
    fixes_for,
    spec_for_name,
    thread_counts,
    variant_parts,
)
from tests.in_subprocess import installed
from tests.test_usermodel import (
    KERAS_MLP,
    TORCH_MLP,
    cases,
    compare,
    refused_variants,
    write_model,
)

# Loses its answer in bf16: the +1 sits below bf16's resolution at 1e3 (one ulp there is 4),
# so the two matmuls cancel to rounding noise instead of W @ 1. In float32 (one ulp at 1e3 is
# 6e-5) the difference keeps its digits.
TORCH_CANCELLING = """
    import numpy as np
    import torch.nn as nn

    class Cancelling(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(3, 2, bias=False)

        def forward(self, x):
            big = x * 1e3
            return self.linear(big + 1) - self.linear(big)

    def model():
        return Cancelling()

    def inputs(batch, rng):
        return rng.standard_normal((batch, 3), dtype=np.float32)
"""

torch_only = pytest.mark.skipif(not installed("torch"), reason="torch not installed")


def torch_spec() -> object:
    return spec_for_name("model-mymodel", {"family": "torch", "frameworks": ("torch",)})


# --- composition: names, canonical order, refusals (no worker) ---------------------------------

def test_a_composed_name_is_its_parts_in_the_declared_order() -> None:
    assert compose_variant(["bf16", "compiled", "resident"]) == "resident+compiled+bf16"
    assert compose_variant(["threads-2", "bf16"]) == "bf16+threads-2"
    assert variant_parts("resident+compiled+bf16") == ("resident", "compiled", "bf16")
    spec = torch_spec()
    # Given in any order, the same set is the same cell.
    assert resolve_variants(spec, "bf16+resident,resident+bf16,threads-3") == [
        "resident+bf16", "threads-3"]


@pytest.mark.parametrize("name", ["compiled+turbo", "threads-0", "threads-N", "turbo"])
def test_an_unknown_part_is_bad_input(name: str) -> None:
    with pytest.raises(BadInput, match="unknown variant"):
        resolve_variants(torch_spec(), name)
    with pytest.raises(BadInput, match="unknown variant"):
        variant_parts(name)


def test_a_workload_without_a_conflict_rule_does_not_compose() -> None:
    with pytest.raises(BadInput, match="do not compose"):
        resolve_variants(matmul.SPEC, "fp32+tf32")


def test_all_runs_every_single_variant_but_the_numbered_pattern() -> None:
    chosen = resolve_variants(torch_spec(), "all")
    assert "threads-N" not in chosen and "bf16" in chosen and chosen[0] == "as-written"


def test_a_composed_cell_is_refused_for_a_refused_part_or_a_conflict() -> None:
    spec = torch_spec()
    assert spec.refusal("resident+compiled", "torch", "cpu") == f"resident: {ON_CPU_RESIDENT}"
    assert spec.refusal("resident+compiled+bf16", "torch", "cuda:0") is None
    assert "two compile modes" in spec.refusal("compiled+compile-reduce-overhead", "torch",
                                               "cuda:0")
    assert "two compile modes" in conflict(("compiled", "compile-reduce-overhead"))
    assert "cuda-graph" in conflict(("compiled", "cuda-graph"))
    assert "one at a time" in conflict(("bf16", "fp16"))
    assert "joins no other" in conflict(("as-written", "bf16"))
    assert "twice" in conflict(("threads-2", "threads-4"))
    assert conflict(("resident", "compiled", "bf16")) is None
    # threads-N: the CPU's; fp16, tf32: the GPU's.
    assert spec.refusal("threads-4", "torch", "cpu") is None
    assert "thread count" in spec.refusal("threads-4", "torch", "cuda:0")
    assert spec.refusal("compiled+tf32", "torch", "cpu").startswith("tf32: ")


def test_every_fix_is_a_declared_variant_and_fixes_for_follows_the_declarations() -> None:
    assert set(FIXES) == set(VARIANTS) - {"as-written"}
    assert {name for name, fix in FIXES.items() if fix.changes_numerics} == set(
        PRECISION_TOLERANCE)
    gpu = fixes_for("torch", "cuda:0", cpu_cores=8)
    assert {"resident", "cuda-graph", "tf32", "fp16"} <= set(gpu)
    assert not any(name.startswith("threads-") for name in gpu)
    cpu = fixes_for("torch", "cpu", cpu_cores=8)
    assert "threads-4" in cpu and "threads-8" not in cpu  # 8 is torch's default already
    assert not {"resident", "cuda-graph", "tf32", "fp16"} & set(cpu)
    assert fixes_for("keras-torch", "cpu") == ["compiled", "bf16"]  # no steps_per_execution
    assert fixes_for("jax", "cuda:0") == ["compiled", "bf16"]
    assert thread_counts(1) == [] and thread_counts(8, default_threads=1) == [4, 8]


# --- the check of a lower-precision variant (no worker) ----------------------------------------

def planted(losses: list[float], reference: list[float]) -> tuple[dict, dict]:
    size = {"scale": max(abs(value) for value in reference), "bound": 1e-6,
            "bound_formula": "max(8 x |float32 - float64|, 64u) on the CPU"}
    inputs = {"size": size, "reference": np.array(reference), "reference_spe": None,
              "nondeterministic": "", "what": "train"}
    return inputs, {"result": losses, "spe": False}


def test_bf16_is_held_to_its_tolerance_and_fp32_variants_keep_theirs() -> None:
    inputs, output = planted([1.01, 0.5], [1.0, 0.5])  # 1e-2 of max |reference|
    verdict = check({}, "resident+bf16", inputs, output)
    assert verdict.passed and verdict.bound == PRECISION_TOLERANCE["bf16"]
    assert "loss within rtol 3e-2 of the fp32 reference (bf16 tolerance)" in verdict.detail
    assert not check({}, "compiled", inputs, output).passed  # float32's bound, unchanged
    assert check({}, "compiled", inputs, output).bound == 1e-6
    inputs, output = planted([1.1, 0.5], [1.0, 0.5])
    verdict = check({}, "bf16", inputs, output)
    assert not verdict.passed and "beyond rtol 3e-2" in verdict.detail
    assert check({}, "fp16", *planted([1.005, 0.5], [1.0, 0.5])).passed
    assert not check({}, "tf32", *planted([1.01, 0.5], [1.0, 0.5])).passed


# --- through workers ---------------------------------------------------------------------------

@torch_only
@pytest.mark.slow  # real framework workers
def test_bf16_passes_on_a_benign_model_and_threads_n_runs_with_n_threads(tmp_path: Path) -> None:
    model = write_model(tmp_path, TORCH_MLP)
    ran, document = compare(model, tmp_path / "out", "--sizes", "2", "--variant",
                            "as-written,bf16,threads-1,threads-2,resident+compiled")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    found = cases(document)
    bf16 = found[("torch", "bf16", 2)]
    assert bf16["status"] == "ok" and bf16["check"]["passed"], bf16
    # Judged by the model's own sensitivity to bf16's rounding (tests/test_precision_parity.py).
    assert bf16["check"]["sensitivity"]["precision"] == "bf16"
    assert bf16["check"]["detail"].startswith("bf16: loss ")
    assert "rounding the inputs and weights to bf16 moves the fp32 loss by up to " in \
        bf16["check"]["detail"]
    assert 0 < bf16["check"]["value"] <= bf16["check"]["bound"]  # bf16 really computed
    assert bf16["extra"]["autocast"] == "bfloat16"
    written = found[("torch", "as-written", 2)]
    assert written["check"]["value"] == 0.0 and written["check"]["bound"] < 1e-3
    # run_cli's workers start with OMP_NUM_THREADS=1: threads-2 is the variant's doing.
    assert found[("torch", "threads-1", 2)]["extra"]["threads"] == 1
    assert found[("torch", "threads-2", 2)]["extra"]["threads"] == 2
    assert written["extra"]["threads"] == 1
    assert refused_variants(document) == {"resident+compiled": f"resident: {ON_CPU_RESIDENT}"}


@torch_only
@pytest.mark.slow  # real framework workers
def test_a_model_that_loses_its_answer_in_bf16_fails_parity(tmp_path: Path) -> None:
    model = write_model(tmp_path, TORCH_CANCELLING)
    ran, document = compare(model, tmp_path / "out", "--sizes", "2",
                            "--variant", "as-written,bf16")
    assert ran.returncode == 1, ran.stdout + ran.stderr  # an invalid cell fails the run
    found = cases(document)
    assert found[("torch", "as-written", 2)]["status"] == "ok"
    bf16 = found[("torch", "bf16", 2)]
    assert bf16["status"] == "invalid" and not bf16["check"]["passed"], bf16
    # fp32 itself hardly moves when x and W are rounded (the difference is taken after them):
    # bf16's rounding of the two large intermediates is what destroys the answer.
    assert "rounding the inputs and weights to bf16 moves the fp32 loss by up to " in \
        bf16["reason"] and ": beyond " in bf16["reason"]
    assert bf16["rounds"][0]["samples"]  # timed all the same; the time is just not trusted


@pytest.mark.skipif(not (installed("keras") and installed("jax")),
                    reason="keras and jax not installed")
@pytest.mark.slow  # real framework workers
def test_a_keras_bf16_cell_builds_under_mixed_bfloat16_and_passes_parity(
        tmp_path: Path) -> None:
    model = write_model(tmp_path, KERAS_MLP)
    ran, document = compare(model, tmp_path / "out", "--sizes", "2",
                            "--framework", "keras-jax", "--variant", "bf16")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    case = cases(document)[("keras-jax", "bf16", 2)]
    assert case["status"] == "ok" and case["check"]["passed"], case
    assert case["extra"]["dtype_policy"] == "mixed_bfloat16"
    assert case["check"]["detail"].startswith("bf16: loss "), case["check"]
    assert case["extra"]["rounding_sensitivity"]["device"] == "cpu"
    assert 0 < case["check"]["value"] <= case["check"]["bound"]

"""Issue 64, part 6: fp16 with a GradScaler is judged on the updates the scaler applied, by the
same sensitivity rule as bf16, and what the scaler skipped is reported as skipped, never as a
wrong result.

A torchvision ResNet-18 at batch 64 on an H100 "failed parity: loss 7.2% from fp32": the
GradScaler (starting at 2^16) skipped the first update, so the second kept loss stood one update
behind fp32's. The cell now finds the scale before its kept calls (tests/lossscale_checks.py
builds an fp16 cell on the CPU, where torch's GradScaler skips as on CUDA), and a kept update
skipped anyway is compared over applied updates (planted records below).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.audit import Ledger, parity
from harness.data import sensitivity
from harness.workloads.usermodel.lossscale import applied_before, over_applied_updates
from harness.workloads.usermodel.spec import check
from tests.in_subprocess import installed, run_check

FP16_U = 2.0**-11
# fp32's loss before and after one update (7.2% apart) and a model that hardly moves under
# fp16-sized rounding (0.01%), as the ResNet-18 did.
REFERENCE = [2.5, 2.32]
DRAWS = [1e-4, 0.5e-4, 0.8e-4, 0.9e-4]


def fp16_case(losses: list[float], **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A training case's inputs and its fp16 output, with the sensitivity record a worker
    adds and the loss scaler's record (`extra`)."""
    size = {"scale": max(abs(value) for value in REFERENCE), "bound": 1e-6,
            "bound_formula": "max(8 x |float32 - float64|, 64u) on the CPU"}
    inputs = {"size": size, "reference": np.array(REFERENCE), "reference_spe": None,
              "nondeterministic": "", "what": "train"}
    record = {"precision": "fp16", "unit_roundoff": FP16_U, "device": "cuda:0",
              "draws": DRAWS, "spread": max(DRAWS)}
    return inputs, {"result": losses, "spe": False,
                    "extra": {sensitivity.RECORD_KEY: record, "autocast": "float16",
                              "loss_scaler": "torch.amp.GradScaler", **extra}}


def test_a_skipped_first_update_is_reported_as_skipped_not_as_a_wrong_loss() -> None:
    # The scaler skipped kept call 1's update: the second loss is the first one again.
    skipped = {"skipped_updates": 1, "skipped_update_calls": [1]}
    verdict = check({}, "fp16", *fp16_case([2.5001, 2.5002], **skipped))
    assert verdict.passed, verdict.detail
    assert verdict.detail.startswith("fp16: loss ")  # bf16's rule: its own sensitivity, 4x
    assert verdict.sensitivity is not None and verdict.sensitivity["multiple"] == 4.0
    assert "the loss scaler skipped the optimizer update of kept call 1 (inf/NaN gradients " \
           "at its scale), reported as skipped" in verdict.detail
    assert "no kept loss followed update 1: not checked" in verdict.detail
    ledger = Ledger("run")
    parity.recheck(ledger, "case", verdict.as_dict(), {sensitivity.RECORD_KEY: {
        "draws": DRAWS}}, "ok")
    assert ledger.audit.mismatches == []
    # Without the scaler's record the same losses fail, as the H100 cell did (7.2% away).
    plain = check({}, "fp16", *fp16_case([2.5001, 2.5002]))
    assert not plain.passed and plain.value > 0.07


def test_a_wrong_loss_still_fails_whatever_the_scaler_skipped() -> None:
    skipped = {"skipped_updates": 1, "skipped_update_calls": [1]}
    verdict = check({}, "fp16", *fp16_case([2.5001, 2.6], **skipped))
    assert not verdict.passed and "loss 4% from fp32" in verdict.detail
    assert ": beyond the floor 0.049%" in verdict.detail
    assert "reported as skipped" in verdict.detail


def test_applied_updates_are_compared_as_fp32_made_them() -> None:
    # The last kept call's update skipped: its loss came after one applied update, as fp32's.
    verdict = check({}, "fp16", *fp16_case([2.5001, 2.3201], skipped_updates=1,
                                           skipped_update_calls=[2]))
    assert verdict.passed and "kept call 2" in verdict.detail
    assert "not checked" not in verdict.detail
    assert applied_before(4, [2, 3]) == [0, 1, 1, 1]
    mapped, said = over_applied_updates([1, 2, 3], np.arange(6.0), {
        "skipped_update_calls": [1]})
    assert mapped.tolist() == [0, 1, 0, 1, 2, 3] and "(0, 0, 1)" in said
    kept, said = over_applied_updates([1, 2], np.arange(3.0), {"skipped_update_calls": [1]})
    assert kept.tolist() == [0, 1, 2] and "could not be split by call" in said


def test_the_scale_found_before_the_kept_calls_is_said() -> None:
    found = {"start": 65536.0, "scale": 8192.0, "overflowed_probes": 3, "settled": True}
    verdict = check({}, "fp16", *fp16_case([2.5001, 2.3201], skipped_updates=0,
                                           skipped_update_calls=[], loss_scale=found))
    assert verdict.passed and "reported as skipped" not in verdict.detail
    assert "; the loss scale was found before the kept calls: 65,536 -> 8,192 (3 probes " \
           "overflowed; no update made)" in verdict.detail
    quiet = {**found, "scale": 65536.0, "overflowed_probes": 0}
    assert "loss scale" not in check({}, "fp16", *fp16_case(
        [2.5001, 2.3201], loss_scale=quiet)).detail


@pytest.mark.slow  # one child process importing torch, a few small training steps
@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_an_fp16_cell_finds_its_scale_before_its_kept_steps() -> None:
    run_check("tests.lossscale_checks", "fp16_kept_steps_are_applied_updates()",
              timeout_s=300, framework="torch")
    run_check("tests.lossscale_checks", "a_scaler_skipping_a_kept_update_is_counted_by_call()",
              timeout_s=300, framework="torch")

"""How far the fp32 step moves when its inputs and weights are rounded the way a reduced
precision rounds them: measured on the variant's own device, after its timed calls.

Each of DRAWS runs builds the as-written step (float32 arithmetic) from the shared weights and
inputs, each floating number multiplied by (1 + d), d drawn uniformly from [-u, u] with u the
format's unit roundoff, and compares its kept results with the CPU's fp32 reference exactly as
the check compares the variant's (max |difference| / max |reference|). The largest of those
moves is the spread the variant's deviation is judged against (precision.py). The draws are
seeded by the run's seed and the batch size, so every round of a run perturbs alike; the
record is kept in the prepared folder and reused by the run's later rounds and by every cell
of the same precision on the same device (the fp32 step it measures is the same).
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from harness.data.store import write_json_atomic
from harness.workloads.usermodel.precision import (
    DRAWS,
    FLOAT32,
    SENSITIVITY_KEY,
    UNIT_ROUNDOFF,
    reduced_precision,
)
from harness.workloads.usermodel.spec import (
    KEPT_RESULTS,
    PREPARED_PARAM,
    ModelInputs,
    flat_result,
)

# The most seconds the perturbed fp32 runs may take, estimated from the variant's own call
# (the device profile's limit: a pass after the samples that a user waits for).
LIMIT_S = 10.0
CACHE_FOLDER = "sensitivity"
PERTURBATION = ("each input and weight x (1 + d), d uniform in [-u, u], independently per "
                "number")

Float32 = Callable[[], AbstractContextManager[Any]]


def perturbed(inputs: ModelInputs, unit: float, rng: np.random.Generator) -> ModelInputs:
    """The inputs with every floating number of x and the weights moved by a relative error
    drawn from [-unit, unit] (integers, such as token ids or a step counter, unchanged)."""
    def moved(array: np.ndarray) -> np.ndarray:
        if not np.issubdtype(array.dtype, np.floating):
            return array
        factor = 1.0 + rng.uniform(-unit, unit, array.shape)
        return (array * factor).astype(array.dtype)
    return {**inputs, "x": [moved(array) for array in inputs["x"]],
            "weights": {name: moved(array) for name, array in inputs["weights"].items()}}


def compared_run(inputs: ModelInputs) -> tuple[ModelInputs, np.ndarray, float, int] | None:
    """(inputs of the fp32 run, the reference it is compared with, the scale, calls) as the
    check compares the variant; None where the check compares nothing (a step the seed does
    not fix, or random numbers drawn in the forward itself)."""
    size = inputs["size"]
    compare = size.get("compare", "step")
    if compare == "none" or inputs.get("nondeterministic") or size.get("nondeterministic"):
        return None
    if compare == "deterministic":
        return ({**inputs, "what": "inference"}, flat_result(inputs["reference_eval"]),
                float(size["eval_scale"]), 1)
    return (inputs, flat_result(inputs["reference"]), float(size["scale"]),
            KEPT_RESULTS[inputs["what"]])


def moved_by(result: np.ndarray, reference: np.ndarray, scale: float) -> float:
    """max |result - reference| / scale, the check's figure (inf for another shape)."""
    if result.shape != reference.shape:
        return math.inf
    difference = float(np.max(np.abs(result - reference))) if result.size else 0.0
    return difference / scale if scale > 0 else (0.0 if difference == 0 else math.inf)


def run_float32(impl: Any, case: dict, device: Any, inputs: ModelInputs, calls: int) -> np.ndarray:
    """The kept results of `calls` as-written (float32) calls from these inputs and weights."""
    task = impl.make_task(case, "as-written", device, inputs, keep=calls)
    for _ in range(calls):
        task.step()
    return flat_result(task.output()["result"])


def cache_path(case: dict, framework: str, device: Any, precision: str) -> Path | None:
    folder = case.get(PREPARED_PARAM)
    if not folder:
        return None
    name = f"{framework}-{device.name}-{precision}-batch-{case['batch']}".replace(":", "_")
    return Path(str(folder)) / CACHE_FOLDER / f"{name}.json"


def read_cached(path: Path | None) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text()) if path is not None else None
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def rounding_sensitivity(impl: Any, case: dict, variant: str, device: Any,
                         inputs: ModelInputs, *, framework: str,
                         seconds_per_call: float | None,
                         float32: Float32 = nullcontext,
                         check_passed: bool = True) -> dict[str, Any]:
    """{SENSITIVITY_KEY: the record} for the case's extra, or {} for a float32 variant whose
    check passed or a case the check does not compare. `float32` is the backend's context that
    makes its arithmetic float32 whatever the variant switched on process-wide (torch: TF32
    off). A float32 variant that failed (`check_passed` False) is measured at float32's own
    epsilon, its draws against this device's unperturbed float32 run (precision.FLOAT32)."""
    precision = reduced_precision(variant) or (None if check_passed else FLOAT32)
    compared = compared_run(inputs) if precision is not None else None
    if precision is None or compared is None:
        return {}
    run_inputs, reference, scale, calls = compared
    unit = UNIT_ROUNDOFF[precision]
    record: dict[str, Any] = {"precision": precision, "unit_roundoff": unit,
                              "device": device.name}
    runs = DRAWS + (precision == FLOAT32)  # float32: one unperturbed run to measure from
    estimate = runs * calls * (seconds_per_call or 0.0)
    if estimate > LIMIT_S:
        return {SENSITIVITY_KEY: {**record, "not_measured": (
            f"{runs} x {calls} fp32 calls would take ~{estimate:.0f} s, over the "
            f"{LIMIT_S:g} s this pass may take")}}
    path = cache_path(case, framework, device, precision)
    cached = read_cached(path)
    if cached is not None:
        return {SENSITIVITY_KEY: cached}
    rng = np.random.default_rng([int(inputs.get("seed", 0)), int(case["batch"]), 2])
    draws: list[float] = []
    against = "the CPU's fp32 reference"
    try:
        with float32():
            if precision == FLOAT32:  # the device's own rounding is what is judged: not in it
                reference = run_float32(impl, case, device, run_inputs, calls)
                against = f"this device's ({device.name}) unperturbed fp32 run"
                gc.collect()
            for _ in range(DRAWS):
                result = run_float32(impl, case, device, perturbed(run_inputs, unit, rng), calls)
                draws.append(moved_by(result, reference, scale))
                # Each run's model and optimizer go before the next is built: on a GPU the
                # variant's own model still holds its memory.
                gc.collect()
    except Exception as exc:  # noqa: BLE001 - no measurement: the fixed tolerance, and why
        return {SENSITIVITY_KEY: {**record, "not_measured": (
            f"a perturbed fp32 run failed: {type(exc).__name__}: {exc}"[:300])}}
    if not all(math.isfinite(draw) for draw in draws):
        record["not_measured"] = "a perturbed fp32 run gave non-finite numbers"
    else:
        record.update(draws=draws, spread=max(draws), perturbation=PERTURBATION,
                      against=against, calls=calls)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, record)
    return {SENSITIVITY_KEY: record}

"""Older run.json layouts, brought up to the current one: the only place old key names live.

Each step turns a document of version N into version N + 1 and knows nothing else; `upgrade`
chains them, so a run folder written by any earlier harness loads as the current layout. Steps
work on plain dicts (the JSON as stored) and never change the caller's copy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from harness.data.results import SCHEMA_VERSION, RunDocument

# A document without schema_version: built in memory as an untyped dict (the layout of 1).
UNTYPED_VERSION = 1
# The report's hints for a workload whose spec cannot be loaded (renamed, broken, foreign).
DEFAULT_HINTS: dict[str, Any] = {"bandwidth_ceiling": "bandwidth_gbps",
                                 "cpu_baseline_any_variant": []}
# The device-busy pass came after the first runs: their timed cases say so rather than nothing.
NO_DEVICE_PROFILE = "not measured (before the device-busy pass existed)"


class UpgradeError(ValueError):
    """A document this harness cannot bring to its layout (too new, or no version number)."""


def hints_for_workload(workload: str) -> dict[str, Any]:
    """Runs stored before run.json carried hints: ask the installed spec, else the defaults."""
    from harness.core import registry

    try:
        return registry.load_workload(workload).report.as_dict()
    except Exception:  # noqa: BLE001 - an unknown or broken workload gets the defaults
        return dict(DEFAULT_HINTS)


def installed_style(framework: str) -> dict[str, str]:
    """Colour and label of a framework as installed now ('' colour: the report picks one)."""
    from harness.core import registry

    try:
        return registry.load_framework(framework).style()
    except Exception:  # noqa: BLE001 - an unknown framework gets a palette colour
        return {"color": "", "label": framework}


def _upgrade_case_1(case: dict[str, Any]) -> dict[str, Any]:
    """Version 1 wrote the allocated peak twice, once as peak_device_memory_bytes (the first
    name); timed cases from before the device-busy pass have no device_profile."""
    legacy = case.pop("peak_device_memory_bytes", None)
    if case.get("peak_device_allocated_bytes") is None and legacy is not None:
        case["peak_device_allocated_bytes"] = legacy
    if "cold_seconds" in case and not case.get("device_profile"):
        case["device_profile"] = {"reason": NO_DEVICE_PROFILE}
    return case


def upgrade_1_to_2(document: dict[str, Any]) -> dict[str, Any]:
    """1 -> 2: hints and framework styles always present, one name per device-memory peak."""
    if not document.get("hints"):
        document["hints"] = hints_for_workload(str(document.get("workload") or ""))
    styles = dict(document.get("frameworks") or {})
    for result in document.get("cells") or []:
        name = str((result.get("cell") or {}).get("framework") or "")
        if name and name not in styles:
            styles[name] = installed_style(name)
        result["cases"] = [_upgrade_case_1(case) for case in result.get("cases") or []]
    document["frameworks"] = styles
    document["schema_version"] = 2
    return document


def upgrade_2_to_3(document: dict[str, Any]) -> dict[str, Any]:
    """2 -> 3: rounds. A run from before rounds ran each cell once, in plan order: one round
    (so its verdicts say run-to-run drift was not measured) and no seed; its samples are all
    round 0, which a case without `sample_rounds` already means."""
    document.setdefault("rounds", 1)
    document.setdefault("seed", None)
    document["schema_version"] = 3
    return document


# A layout-3 case's keys that 4 keeps in its per-round records, and what they read as when absent.
ROUND_KEYS_3: dict[str, Any] = {"cold_seconds": None, "samples": [], "calls_per_sample": 1,
                                "other_load": None, "call_seconds": [], "sample_steps": [],
                                "attempts": [], "sample_rounds": [], "call_rounds": [],
                                "round_medians": []}


def _split(values: list[Any], rounds: list[int], number: int) -> list[Any]:
    """The values of round NUMBER, of a list parallel to ROUNDS (the round of each value)."""
    return [value for value, owner in zip(values, rounds) if owner == number]


def _case_rounds_3(case: dict[str, Any]) -> dict[str, Any]:
    """A layout-3 case's parallel arrays (the round of each sample and of each whole call,
    the round medians, the attempts tagged with their round) as one record per round.

    Layout 3 kept the first measured round's cold call and calls per sample, and the most
    loaded round's load, for the whole case: the first round's record gets them, the later
    ones none (their cold calls were not kept); the round medians are recomputed, not kept.
    """
    old = {key: case.pop(key, default) for key, default in ROUND_KEYS_3.items()}
    samples, calls, steps = old["samples"] or [], old["call_seconds"] or [], old["sample_steps"]
    if old["cold_seconds"] is None and not samples and not calls:
        return case  # not measured: no rounds
    sample_rounds = old["sample_rounds"] or [0] * len(samples)
    call_rounds = old["call_rounds"] or [0] * len(calls)
    step_rounds = sample_rounds if len(steps or []) == len(samples) else []
    attempts = old["attempts"] or []
    numbers = sorted({*sample_rounds, *call_rounds,
                      *(attempt.get("round", 0) for attempt in attempts)}) or [0]
    case["rounds"] = []
    for number in numbers:
        lists = {"call_seconds": _split(calls, call_rounds, number),
                 "sample_steps": _split(steps or [], step_rounds, number),
                 "attempts": [{key: value for key, value in attempt.items() if key != "round"}
                              for attempt in attempts if attempt.get("round", 0) == number]}
        case["rounds"].append({
            "round": number, "cold_seconds": old["cold_seconds"] if number == numbers[0] else None,
            "samples": _split(samples, sample_rounds, number),
            "calls_per_sample": old["calls_per_sample"],
            "other_load": old["other_load"] if number == numbers[0] else None,
            **{key: values for key, values in lists.items() if values}})  # as CaseRound writes
    return case


def upgrade_3_to_4(document: dict[str, Any]) -> dict[str, Any]:
    """3 -> 4: a case's rounds as a list of per-process records, not parallel arrays."""
    for result in document.get("cells") or []:
        result["cases"] = [_case_rounds_3(case) for case in result.get("cases") or []]
    document["schema_version"] = 4
    return document


# Where layout 4 kept a case's predicted GPU steps: an entry of its `extra`.
GPU_PREDICTIONS_4 = "gpu_predictions"


def upgrade_4_to_5(document: dict[str, Any]) -> dict[str, Any]:
    """4 -> 5: a case's predicted GPU steps a key of the case, out of its `extra`."""
    for result in document.get("cells") or []:
        for case in result.get("cases") or []:
            extra = case.get("extra")
            if isinstance(extra, dict) and GPU_PREDICTIONS_4 in extra:
                case["gpu_predictions"] = extra.pop(GPU_PREDICTIONS_4)
    document["schema_version"] = 5
    return document


# version N -> the step that makes it N + 1
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: upgrade_1_to_2,
                                                                   2: upgrade_2_to_3,
                                                                   3: upgrade_3_to_4,
                                                                   4: upgrade_4_to_5}


def document_version(document: dict[str, Any]) -> int:
    """The layout version a stored document says it has; UpgradeError when it cannot be read."""
    version = document.get("schema_version", UNTYPED_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UpgradeError(f"schema_version {version!r} is not a layout version")
    if version > SCHEMA_VERSION:
        raise UpgradeError(f"schema_version {version!r} is newer than this harness reads "
                           f"({SCHEMA_VERSION}); upgrade harness")
    return version


def upgrade(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of DOCUMENT in the current layout (SCHEMA_VERSION), every step applied in turn."""
    version = document_version(document)
    upgraded = copy.deepcopy(document)
    while version < SCHEMA_VERSION:
        upgraded = UPGRADES[version](upgraded)
        version += 1
    upgraded["schema_version"] = SCHEMA_VERSION
    return upgraded


def as_run_document(document: RunDocument | dict[str, Any]) -> RunDocument:
    """A RunDocument as is; a stored or hand-built dict upgraded to the current layout, typed."""
    if isinstance(document, RunDocument):
        return document
    return RunDocument.from_dict(upgrade(document))

"""Make a device profile: the measuring runs in a child process (the parent imports no
framework), the result is checked by the same loader every profile goes through."""

from __future__ import annotations

import re
from pathlib import Path

from harness.core import registry
from harness.measure import envinfo
from harness.predict.profile import Profile, ProfileError, from_document
from harness.run.context import RunContext
from harness.run.runner import run_json_child
from harness.spec import BadInput, Cell

FRAMEWORK = "torch"  # the only framework with a profile backend so far
CHILD = "harness.predict.devicechild"


class MeasurementFailed(RuntimeError):
    """The child measured nothing usable (it crashed or timed out): exit 1, not bad input."""


def default_device() -> str:
    """cuda:0 where nvidia-smi shows a GPU this process may use, else cpu."""
    return "cuda:0" if envinfo.visible_gpus() else "cpu"


def check_device(device: str) -> None:
    if device != "cpu" and not re.fullmatch(r"cuda:\d+", device):
        raise BadInput(f"--device {device!r}: expected cpu or cuda:N (example: cuda:0)")


def measure_profile(device: str, quick: bool, timeout_s: float) -> Profile:
    """The profile of DEVICE, measured now; BadInput where the framework or the device is
    not there, MeasurementFailed where the measuring broke."""
    check_device(device)
    installed, why = registry.framework_installed(FRAMEWORK)
    if not installed:
        raise BadInput(f"profile-device needs {FRAMEWORK}: {why}")
    document, why_not = run_json_child(
        CHILD, [FRAMEWORK, device, "quick" if quick else "full"],
        Cell("profile-device", "-", FRAMEWORK, device), timeout_s,
        RunContext.from_environment(quick=quick))
    if document is None:
        raise MeasurementFailed(f"measuring {device} failed: {why_not}")
    if "error" in document:
        raise BadInput(str(document["error"]))
    try:
        return from_document(document, f"the {device} profile just measured")
    except ProfileError as exc:  # the child wrote something the loader refuses: a bug here
        raise MeasurementFailed(str(exc)) from None


def default_out(profile: Profile) -> Path:
    """./<device description>[-quick].json, e.g. nvidia-h100-80gb-hbm3.json."""
    label = str(profile.device.get("description") or profile.device.get("name") or "device")
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "device"
    if profile.device.get("type") == "cpu":
        slug = f"cpu-{slug}"
    return Path(f"{slug}{'-quick' if profile.quick else ''}.json")

"""Make a device profile: the measuring runs in a child process (the parent imports no
framework), the result is checked by the same loader every profile goes through."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from harness.core import registry
from harness.measure import envinfo
from harness.predict.profile import (
    JAX_ENTRIES,
    NO_JAX_ROW,
    Profile,
    ProfileError,
    absent,
    from_document,
    read_profile,
)
from harness.run.context import RunContext
from harness.run.runner import run_json_child
from harness.spec import BadInput, Cell

FRAMEWORK = "torch"  # the profile's own rows; JAX's rows come from a child of their own
JAX = "jax"
CHILD = "harness.predict.devicechild"


class MeasurementFailed(RuntimeError):
    """The child measured nothing usable (it crashed or timed out): exit 1, not bad input."""


def default_device() -> str:
    """cuda:0 where nvidia-smi shows a GPU this process may use, else cpu."""
    return "cuda:0" if envinfo.visible_gpus() else "cpu"


def check_device(device: str) -> None:
    if device != "cpu" and not re.fullmatch(r"cuda:\d+", device):
        raise BadInput(f"--device {device!r}: expected cpu or cuda:N (example: cuda:0)")


def measured_in_child(framework: str, device: str, quick: bool, timeout_s: float) -> Profile:
    """FRAMEWORK's rows of DEVICE, measured now in a child process of its own; BadInput
    where the framework or the device is not there, MeasurementFailed where it broke."""
    check_device(device)
    installed, why = registry.framework_installed(framework)
    if not installed:
        raise BadInput(f"profile-device needs {framework}: {why}")
    document, why_not = run_json_child(
        CHILD, [framework, device, "quick" if quick else "full"],
        Cell("profile-device", "-", framework, device), timeout_s,
        RunContext.from_environment(quick=quick))
    if document is None:
        raise MeasurementFailed(f"measuring {device} with {framework} failed: {why_not}")
    if "error" in document:
        raise BadInput(str(document["error"]))
    try:
        return from_document(document, f"the {device} profile just measured")
    except ProfileError as exc:  # the child wrote something the loader refuses: a bug here
        raise MeasurementFailed(str(exc)) from None


def measure_profile(device: str, quick: bool, timeout_s: float) -> Profile:
    """The profile of DEVICE, measured now: torch's rows, then JAX's in a child of its own
    where JAX is installed (else its entries absent, saying why)."""
    profile = measured_in_child(FRAMEWORK, device, quick, timeout_s)
    installed, why = registry.framework_installed(JAX)
    if not installed:
        return replace(profile, entries={**profile.entries, **{
            name: absent(name, f"{NO_JAX_ROW} (jax was not installed: {why})")
            for name in JAX_ENTRIES}})
    try:
        return with_jax(profile, measured_in_child(JAX, device, quick, timeout_s))
    except (BadInput, MeasurementFailed) as exc:  # torch's rows stand without JAX's
        return replace(profile, entries={**profile.entries, **{
            name: absent(name, f"{NO_JAX_ROW} (measuring them failed: {exc})")
            for name in JAX_ENTRIES}})


def with_jax(profile: Profile, rows: Profile) -> Profile:
    """PROFILE with the JAX entries of ROWS (a JAX child's profile of the same device kind),
    and the JAX versions and date in its software. The profile's identity (device, date,
    torch, driver) stays: torch predictions made from it still recompute."""
    kind, jax_kind = profile.device.get("type"), rows.device.get("type")
    if kind != jax_kind:
        raise BadInput(f"the profile is of a {kind} device; JAX measured a {jax_kind} one "
                       "(pass --device as the profile was made)")
    named, measured = (" ".join(str(found.device.get("description") or "").split()).casefold()
                       for found in (profile, rows))
    if kind == "cuda" and named and measured and named != measured:
        raise BadInput(f"the profile is of a {profile.device.get('description')}; JAX measured "
                       f"a {rows.device.get('description')} (its rows belong to that GPU's "
                       "profile)")
    software = {**profile.software, "jax": rows.software.get("jax"),
                "jaxlib": rows.software.get("jaxlib"), "jax_profiled": rows.created,
                "jax_device": rows.device.get("description"),
                "jax_quick": rows.quick}
    return replace(profile, software=software, entries={
        **profile.entries, **{name: rows.entries[name] for name in JAX_ENTRIES}})


def add_jax(path: Path, device: str, quick: bool, timeout_s: float) -> Profile:
    """The profile file at PATH with its JAX rows measured now on DEVICE (added, or made
    again); the caller writes it."""
    return with_jax(read_profile(path), measured_in_child(JAX, device, quick, timeout_s))


def jax_rows_of(profile: Profile) -> Profile:
    """The JAX rows PROFILE holds, as with_jax takes them from a JAX child: their date,
    versions, device and --quick read back from the software keys with_jax wrote. So rows
    measured once into one profile of a GPU go unchanged into that GPU's profile made again
    (with_jax(new, jax_rows_of(old))), their own date kept; BadInput where it holds none."""
    software = profile.software
    missing = [name for name in JAX_ENTRIES if not profile.entries[name].present]
    if missing or not software.get("jax_profiled"):
        raise BadInput(f"the {profile.identity()} profile holds no JAX rows "
                       f"({', '.join(missing) or 'no jax_profiled date'})")
    device = {**profile.device, "description": software.get("jax_device")
              or profile.device.get("description")}
    return replace(profile, created=str(software["jax_profiled"]), device=device,
                   quick=bool(software.get("jax_quick")),
                   software={"jax": software.get("jax"), "jaxlib": software.get("jaxlib")})


def default_out(profile: Profile) -> Path:
    """./<device description>[-quick].json, e.g. nvidia-h100-80gb-hbm3.json."""
    label = str(profile.device.get("description") or profile.device.get("name") or "device")
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "device"
    if profile.device.get("type") == "cpu":
        slug = f"cpu-{slug}"
    return Path(f"{slug}{'-quick' if profile.quick else ''}.json")

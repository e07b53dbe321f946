"""A device profile: what the harness measured on one device, in one versioned JSON document.

Why measured and never typed in: vendor peaks are ambiguous (dense or sparse, boost or base
clock) and hand-typed spec tables carry errors; a profile holds what this harness, with this
framework version, got out of the device (HELP's idea: a device is the latencies of a fixed
set of reference programs). Every entry of `CATALOGUE` is in every profile, either measured
(rows of raw samples, with the work per call where a rate applies) or absent with the reason
(a CPU has no CUDA events, no CUDA graphs, no host<->device link).

The document (`Profile.to_dict`; SCHEMA_VERSION 1):
    {"kind": "harness-device-profile", "schema_version": 1, "created": ISO date (UTC),
     "framework": "torch", "quick": bool, "measured_s": seconds the measuring took,
     "device": {name, type, description, memory_bytes, capability, multiprocessors, ...},
     "host": {cpu_model, cores, os, python, threads}, "software": {torch, cuda, cudnn,
     driver, numpy, harness}, "entries": {name: {"what": ..., "rows": [Row...]} or
     {"what": ..., "absent": reason}}}
A row: `params` (the shape, dtype, size or op it measured), `samples_s` (seconds per call,
one per sample, each sample `calls_per_sample` calls back to back with a synchronise before
both clock reads), `median_s` and `iqr_s` (derived from the samples, written for readers and
checked on load), the work per call (`flops`, `bytes`) where a rate applies, `counts` where
the row counts things (kernels per op), and `contended` (why other processes may have slowed
it; '' if not).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from harness.data.results import sample_stats
from harness.data.serial import IF_SET, JsonRecord, JsonValue
from harness.spec import BadInput

KIND = "harness-device-profile"
# 1: the first layout. A loader refuses a newer one (its entries may mean other things).
SCHEMA_VERSION = 1
PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
# A stored median may differ from its samples' median by float rounding only.
MEDIAN_TOLERANCE = 1e-9

ANY, GPU = "any", "gpu"


@dataclass(frozen=True)
class EntrySpec:
    """One measurement every profile holds: its name, what one row's call is, where it applies."""

    name: str
    what: str
    applies: str  # ANY: every device; GPU: a CUDA device only (absent elsewhere, with why)
    # The framework whose child process measures it. JAX's rows came later than the first
    # profiles: a file without them loads, its JAX entries absent with NO_JAX_ROW.
    framework: str = "torch"


CATALOGUE: tuple[EntrySpec, ...] = (
    EntrySpec("host.dispatch", "one tiny eager op (add of 1-element tensors), calls back to "
              "back, synchronised at both clock reads: the pipelined cost per op, "
              "max(host dispatch + launch, device kernel floor)", ANY),
    EntrySpec("host.launch_ahead", "host seconds to dispatch and launch one tiny op while the "
              "device still sleeps (a queued torch.cuda._sleep): the host's cost alone, a row "
              "per number of kernels queued", GPU),
    EntrySpec("device.kernel_floor", "device seconds per tiny kernel run back to back, CUDA "
              "events around them, the host ahead of the device (checked per sample)", GPU),
    EntrySpec("device.graph_replay", "one replay of a CUDA graph of `kernels` captured tiny "
              "kernels (per kernel: median / kernels)", GPU),
    EntrySpec("device.sync", "one torch.cuda.synchronize(): on an idle device, and after one "
              "tiny kernel (a launch's round trip)", GPU),
    EntrySpec("matmul.fp32", "torch.mm of (m x k) by (k x n), float32 (TF32 off)", ANY),
    EntrySpec("matmul.tf32", "torch.mm, float32 inputs with TF32 tensor cores on", GPU),
    EntrySpec("matmul.bf16", "torch.mm, bfloat16", GPU),
    EntrySpec("matmul.fp16", "torch.mm, float16", GPU),
    EntrySpec("conv.fp32", "conv2d forward, NCHW, float32 (TF32 off)", ANY),
    EntrySpec("conv.tf32", "conv2d forward, float32 inputs with TF32 on", GPU),
    EntrySpec("conv.bf16", "conv2d forward, bfloat16", GPU),
    EntrySpec("elementwise.add", "torch.add(a, b, out=c), float32; bytes = 3 x numel x 4", ANY),
    EntrySpec("reduction.sum", "a.sum(), float32; bytes = numel x 4", ANY),
    EntrySpec("transfer.h2d.pageable", "copy_ from pageable host memory to the device", GPU),
    EntrySpec("transfer.h2d.pinned", "copy_ from pinned host memory to the device", GPU),
    EntrySpec("transfer.d2h.pageable", "copy_ from the device to pageable host memory", GPU),
    EntrySpec("transfer.d2h.pinned", "copy_ from the device to pinned host memory", GPU),
    EntrySpec("ops.aten", "aten ops one call of a common op dispatches (a TorchDispatchMode "
              "count; device-independent)", ANY),
    EntrySpec("ops.kernels", "device kernels, memsets, copies and host launch calls per call "
              "of a common op (torch.profiler, CUDA activity)", GPU),
    EntrySpec("host.python", "a fixed pure-Python loop (hostspeed.python_loop): single-thread "
              "interpreter speed", ANY),
    EntrySpec("host.numpy", "a fixed loop of small numpy ops (hostspeed.numpy_loop): "
              "single-thread per-call overhead of a C extension", ANY),
    EntrySpec("jax.dispatch", "a jitted x + 1 of an 8-element array, called back to back, "
              "block_until_ready before both clock reads of a sample: the pipelined cost of "
              "one JAX executable", ANY, framework="jax"),
    EntrySpec("jax.kernel_floor", "jitted chains of `kernels` tiny kernels XLA does not fuse "
              "(each an 8x8 reduction of the previous one's result), timed as jax.dispatch: "
              "the slope over `kernels` is one more kernel's cost inside an executable", ANY,
              framework="jax"),
)
ENTRY_NAMES = tuple(spec.name for spec in CATALOGUE)
JAX_ENTRIES = tuple(spec.name for spec in CATALOGUE if spec.framework == "jax")
# Entries every profile file must hold; the others (JAX's) may be missing from an older file.
REQUIRED_ENTRIES = tuple(spec.name for spec in CATALOGUE if spec.framework == "torch")
NO_JAX_ROW = ("the profile has no JAX row; make it again with harness profile-device (or add "
              "the JAX rows to this file: harness profile-device --add-jax FILE)")
_BY_NAME = {spec.name: spec for spec in CATALOGUE}


def spec_of(name: str) -> EntrySpec:
    return _BY_NAME[name]


class ProfileError(BadInput):
    """A file that is not a device profile this harness can read: one line, exit 2."""


class _Record(JsonRecord):
    WRITE_UNMARKED: ClassVar[str] = IF_SET["json"]


@dataclass(frozen=True)
class Row(_Record):
    """One measured case of an entry: its parameters and raw samples, or its counts."""

    params: dict[str, JsonValue] = field(default_factory=dict)
    samples_s: list[float] = field(default_factory=list)
    calls_per_sample: int = 0
    median_s: float | None = None
    iqr_s: float | None = None
    flops: float | None = None  # work of one call, for a FLOP rate
    bytes: float | None = None  # bytes one call moves, for a bandwidth
    counts: dict[str, float] = field(default_factory=dict)
    contended: str = ""

    @classmethod
    def timed(cls, params: dict[str, JsonValue], samples_s: list[float],
              calls_per_sample: int, **work: float | str | None) -> Row:
        """A row from raw samples, its median and IQR derived here (the only place)."""
        stats = sample_stats(samples_s)
        return cls(params=params, samples_s=list(samples_s), calls_per_sample=calls_per_sample,
                   median_s=stats.median, iqr_s=stats.iqr, **work)  # type: ignore[arg-type]

    def rate(self) -> float | None:
        """FLOP/s or bytes/s at the median (None without work or a time)."""
        work = self.flops if self.flops is not None else self.bytes
        if work is None or not self.median_s:
            return None
        return work / self.median_s


@dataclass(frozen=True)
class Entry(_Record):
    """One catalogue entry of a profile: its rows, or why it is absent."""

    what: str = ""
    rows: list[Row] = field(default_factory=list)
    absent: str = ""

    @property
    def present(self) -> bool:
        return not self.absent

    def row(self, **params: JsonValue) -> Row:
        """The row whose params include PARAMS; KeyError naming them where none does."""
        for row in self.rows:
            if all(row.params.get(key) == value for key, value in params.items()):
                return row
        raise KeyError(f"no row with {params}")


@dataclass(frozen=True)
class Profile(_Record):
    """A device profile (module docstring); `entries` holds every catalogue name."""

    kind: str = KIND
    schema_version: int = SCHEMA_VERSION
    created: str = ""
    framework: str = ""
    quick: bool = False
    measured_s: float | None = None
    device: dict[str, JsonValue] = field(default_factory=dict)
    host: dict[str, JsonValue] = field(default_factory=dict)
    software: dict[str, JsonValue] = field(default_factory=dict)
    entries: dict[str, Entry] = field(default_factory=dict)
    WRITE_UNMARKED: ClassVar[str] = "always"

    @classmethod
    def from_dict(cls, document: Mapping[str, Any], **given: Any) -> Profile:
        """The entries are records in a dict (the serializer decodes lists of records only)."""
        raw = document.get("entries")
        if not isinstance(raw, dict):
            raise TypeError("entries is not a JSON object")
        entries = {str(name): Entry.from_dict(value) for name, value in raw.items()
                   if isinstance(value, dict)}
        return super().from_dict(document, entries=entries, **given)

    def entry(self, name: str) -> Entry:
        return self.entries[name]

    def identity(self) -> str:
        """'NVIDIA H100 80GB HBM3 (profiled 2026-11-27, torch 2.11.0+cu130, driver 580.1)':
        what a prediction names as its device."""
        software = ", ".join(f"{key} {self.software[key]}" for key in ("torch", "driver")
                             if self.software.get(key))
        quick = ", --quick" if self.quick else ""
        return (f"{self.device.get('description') or self.device.get('name') or '?'} "
                f"(profiled {self.created[:10] or '?'}{', ' + software if software else ''}"
                f"{quick})")


def measured(name: str, rows: list[Row]) -> Entry:
    """A catalogue entry with its rows."""
    return Entry(what=spec_of(name).what, rows=rows)


def absent(name: str, reason: str) -> Entry:
    """A catalogue entry not measured, and why."""
    return Entry(what=spec_of(name).what, absent=reason)


def completed(entries: Mapping[str, Entry]) -> dict[str, Entry]:
    """Every catalogue entry, in catalogue order: those ENTRIES lack are absent, saying so."""
    return {name: entries.get(name) or absent(
        name, NO_JAX_ROW if name in JAX_ENTRIES else
        "not measured: the backend that made this profile has no measurement for it")
        for name in ENTRY_NAMES}


def from_document(document: object, source: Path | str = "profile") -> Profile:
    """A Profile from a parsed JSON value; ProfileError (one line) for anything else."""
    label = str(source)
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise ProfileError(f"{label}: not a device profile (no \"kind\": \"{KIND}\"; make one "
                           "with `harness profile-device`)")
    version = document.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ProfileError(f"{label}: not a device profile (schema_version {version!r} is not "
                           "a whole number >= 1)")
    if version > SCHEMA_VERSION:
        raise ProfileError(f"{label}: device profile schema_version {version} is newer than "
                           f"this harness reads ({SCHEMA_VERSION}); upgrade the harness")
    try:
        profile = Profile.from_dict(document)
        problems = _problems(profile)
        profile = replace(profile, entries={**completed(profile.entries), **profile.entries})
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ProfileError(f"{label}: not a valid device profile ({type(exc).__name__}: "
                           f"{exc})") from None
    if problems:
        raise ProfileError(f"{label}: not a valid device profile ({problems[0]})")
    return profile


def _problems(profile: Profile) -> list[str]:
    """What makes a parsed profile unusable: a catalogue entry missing, an entry neither
    measured nor absent, a stored median its own samples do not give."""
    found = []
    for name in ENTRY_NAMES:
        entry = profile.entries.get(name)
        if entry is None and name not in REQUIRED_ENTRIES:
            continue  # an older file without JAX's rows: filled in as absent
        if not isinstance(entry, Entry):
            found.append(f"entry {name} missing")
        elif not entry.absent and not entry.rows:
            found.append(f"entry {name} has neither rows nor a reason it is absent")
    for name, entry in profile.entries.items():
        for row in entry.rows if isinstance(entry, Entry) else ():
            median = sample_stats(row.samples_s).median
            if row.samples_s and (row.median_s is None or median is None or not math.isclose(
                    row.median_s, median, rel_tol=MEDIAN_TOLERANCE)):
                found.append(f"entry {name}: median_s {row.median_s} is not its samples' "
                             f"median {median}")
    return found


def read_profile(path: Path) -> Profile:
    """The profile stored at PATH; ProfileError (one line) where it is not one."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ProfileError(f"{path}: not a device profile (not JSON: {exc})") from None
    return from_document(document, path)


def write_profile(profile: Profile, path: Path) -> None:
    """Write atomically (a half-written profile must never be read as one)."""
    from harness.data.store import write_json_atomic

    write_json_atomic(path, profile.to_dict())


def shipped_names(folder: Path = PROFILES_DIR) -> list[str]:
    """Names of the profiles shipped in the package (file stems), sorted."""
    return sorted(path.stem for path in folder.glob("*.json"))


def resolve(name_or_path: str, folder: Path = PROFILES_DIR) -> Path:
    """A shipped profile's file by name, else the path given; ProfileError naming the
    shipped ones where neither exists."""
    shipped = folder / f"{name_or_path}.json"
    if "/" not in name_or_path and shipped.is_file():
        return shipped
    path = Path(name_or_path)
    if path.is_file():
        return path
    names = ", ".join(shipped_names(folder)) or "none"
    raise ProfileError(f"{name_or_path}: no such profile file or shipped profile "
                       f"(shipped: {names})")


def load_profile(name_or_path: str, folder: Path = PROFILES_DIR) -> Profile:
    """A shipped profile by name or a profile file by path, version-checked."""
    return read_profile(resolve(name_or_path, folder))


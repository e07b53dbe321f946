"""The machine's ceilings as one typed record: what each device's probe reached, its bound.

A run stores, per device, the peak matmul GFLOP/s per precision and the bandwidths its probe
measured (harness.measure.ceilings, in a child process), or this machine's remembered probe,
or (`--no-ceilings`) only the machine's theoretical bound (harness.measure.bounds); the CLI
table, the report, `harness check` and harness.analysis.plausibility judge every rate against
it. This module is the only one that knows the JSON keys of that record (run.json's `ceilings`,
the per-machine cache's entries, the probe child's output): `from_json` reads every form
written so far, `to_json` writes one.

The forms read (oldest first): `peak_gflops` (fp32 alone) and `peak_gflops_<precision>`;
`matmul_n` (the one size probed) and `measured_with` as one name; `peak_gflops_by_precision`,
the probe's second name for what the bound calls `gflops_by_precision`, now the one name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from harness.core.units import device_kind

# The bandwidth ceilings, by the key a workload names in its `bandwidth_ceiling` hint (and
# run.json stores): device memory (a copy, bytes read plus written) and the host->device link
# from pinned memory.
MEMORY = "bandwidth_gbps"
HOST_LINK = "h2d_pinned_gbps"
LINKS = (MEMORY, HOST_LINK)
GFLOPS = "gflops_by_precision"
# Older names of GFLOPS: the probe's second name, and the per-precision keys before it.
OLD_GFLOPS = "peak_gflops_by_precision"
OLD_FP32 = "peak_gflops"


class Fingerprint(TypedDict):
    """The machine a probe's figures describe (harness.measure.envinfo.machine_fingerprint):
    stored in the cache as JSON and hashed into its key, so it stays a plain dict."""

    cpu_model: str
    cores: int
    gpus: list[str]
    gpu_driver: str | None
    libraries: dict[str, str | None]  # distribution -> version, None when not installed


# --- JSON readers that never raise: a stored value of the wrong type reads as absent --------------

def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _object(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _numbers(value: object) -> dict[str, float]:
    return {str(key): number for key, item in _object(value).items()
            if (number := _number(item)) is not None}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _names(value: object) -> tuple[str, ...]:
    """A list of names; an older single name as a list of one."""
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def _sizes(value: object) -> tuple[int, ...]:
    items = value if isinstance(value, list) else []
    return tuple(int(item) for item in items if _number(item) is not None)


def _without_empty(document: Mapping[str, object]) -> dict[str, object]:
    """Written only where there is something to say (as run.json always was)."""
    return {key: value for key, value in document.items()
            if value not in (None, "", {}, [], (), False, 0.0)}


# --- the records ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Peaks:
    """Rates: GFLOP/s by precision ("fp32", "tf32", "bf16", ...) and GB/s by link (LINKS)."""

    gflops: Mapping[str, float] = field(default_factory=dict)
    gbps: Mapping[str, float] = field(default_factory=dict)

    def rate(self, key: str) -> float | None:
        """The rate for a precision or a link; None when there is none."""
        return self.gflops.get(key, self.gbps.get(key))

    def best(self, other: Peaks) -> Peaks:
        """Per figure the larger of the two (a ceiling one probe missed is still there)."""
        def larger(mine: Mapping[str, float], theirs: Mapping[str, float]) -> dict[str, float]:
            return {key: max(table[key] for table in (mine, theirs) if key in table)
                    for key in {**mine, **theirs}}
        return Peaks(larger(self.gflops, other.gflops), larger(self.gbps, other.gbps))

    def __bool__(self) -> bool:
        return bool(self.gflops or self.gbps)

    @classmethod
    def from_json(cls, document: Mapping[str, object]) -> Peaks:
        # The oldest forms: peak_gflops (fp32) and peak_gflops_<precision>.
        gflops = {key.removeprefix(OLD_FP32 + "_"): rate
                  for key, rate in _numbers(document).items() if key.startswith(OLD_FP32 + "_")}
        if (fp32 := _number(document.get(OLD_FP32))) is not None:
            gflops.setdefault("fp32", fp32)
        gflops.update(_numbers(document.get(OLD_GFLOPS)))
        gflops.update(_numbers(document.get(GFLOPS)))
        gbps = {link: rate for link in LINKS
                if (rate := _number(document.get(link))) is not None}
        return cls(gflops, gbps)

    def to_json(self) -> dict[str, object]:
        return _without_empty({GFLOPS: dict(self.gflops), **self.gbps})


@dataclass(frozen=True)
class Bound(Peaks):
    """Rates beyond which a result is impossible, each with the sentence saying how it was
    set (`how`, by precision or link: "this CPU's theoretical peak 2 cores x 3 GHz x ...")."""

    how: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, document: Mapping[str, object]) -> Bound:
        peaks = Peaks.from_json(document)
        how = {str(key): text for key, value in _object(document.get("how")).items()
               if (text := _text(value))}
        return cls(peaks.gflops, peaks.gbps, how)

    def to_json(self) -> dict[str, object]:
        return _without_empty({**super().to_json(), "how": dict(self.how)})


@dataclass(frozen=True)
class Remembered:
    """Where a run's figures came from when they were this machine's earlier probe."""

    probed: str  # its date, "2026-11-22"
    how: str  # "best probe seen on this machine: sizes [...], libraries [...]"


@dataclass(frozen=True)
class RememberedProbe:
    """One entry of the per-machine cache: the best probe of a device on one machine."""

    device: str
    fingerprint: Mapping[str, object]  # a Fingerprint as stored
    probed_at: float  # seconds since the epoch
    figures: Peaks
    description: str = ""  # the device as the framework named it ("NVIDIA H100 80GB HBM3")
    probed: str = ""  # probed_at as a date
    probe_sizes: tuple[int, ...] = ()
    measured_with: tuple[str, ...] = ()
    how: str = ""

    @classmethod
    def from_json(cls, value: object) -> RememberedProbe | None:
        """An entry as stored; None for one from before fingerprints and dates (never reused)."""
        document = _object(value)
        probed_at = _number(document.get("probed_at"))
        if "fingerprint" not in document or probed_at is None:
            return None
        return cls(device=_text(document.get("device")),
                   fingerprint=_object(document.get("fingerprint")), probed_at=probed_at,
                   figures=Peaks.from_json(_object(document.get("figures"))),
                   description=_text(document.get("device_name")),
                   probed=_text(document.get("probed")),
                   probe_sizes=_sizes(document.get("probe_sizes")),
                   measured_with=_names(document.get("measured_with")),
                   how=_text(document.get("how")))

    def to_json(self) -> dict[str, object]:
        return {"device": self.device, "device_name": self.description,
                "fingerprint": dict(self.fingerprint), "probed_at": self.probed_at,
                "probed": self.probed, "probe_sizes": list(self.probe_sizes),
                "measured_with": list(self.measured_with), "figures": self.figures.to_json(),
                "how": self.how}


@dataclass(frozen=True)
class DeviceCeiling:
    """One device's ceilings: what its probe reached and how, the bound beyond which a rate is
    impossible, or why there are none (`error`: the probe failed)."""

    device: str  # "cpu", "cuda:0"
    probe: Peaks = field(default_factory=Peaks)  # the best any library's probe reached
    physical: Bound | None = None  # None in runs from before bounds: the probe + a margin
    description: str = ""  # the device as the probing framework named it
    measured_with: tuple[str, ...] = ()  # the libraries that probed it ("torch", "numpy")
    probe_sizes: tuple[int, ...] = ()  # the square matmul sizes tried
    reached_at_n: Mapping[str, int] = field(default_factory=dict)  # precision -> best size
    contended_cores: float = 0.0  # cores other processes took while the probe ran
    theoretical_only: bool = False  # no probe: the machine's bound alone (--no-ceilings)
    error: str = ""  # why the probe has no figures
    remembered: Remembered | None = None  # the figures are this machine's earlier probe
    probed_because: str = ""  # why the run probed instead of remembering
    # Why the probe waits for a later run (a model file's first run on this machine): the
    # entry then holds the machine's bound alone (theoretical_only), as with --no-ceilings.
    deferred: str = ""
    cached: RememberedProbe | None = None  # this machine's best earlier probe, when probed
    extra_fields: Mapping[str, object] = field(default_factory=dict)  # unknown keys, kept

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def gflops(self, precision: str) -> float | None:
        """The probe's matmul peak at a precision, None when not probed."""
        return self.probe.gflops.get(precision)

    def gbps(self, link: str) -> float | None:
        """The probe's bandwidth of a link (MEMORY, HOST_LINK), None when not probed."""
        return self.probe.gbps.get(link)

    @classmethod
    def from_json(cls, value: object, device: str = "") -> DeviceCeiling:
        document = _object(value)
        known = {"device", "device_name", "measured_with", "probe_sizes", "matmul_n",
                 "peak_reached_at_n", "probe_contended_cores", "physical", "theoretical_only",
                 "error", "remembered", "probed_because", "deferred", "cached", GFLOPS, OLD_GFLOPS,
                 OLD_FP32, *LINKS}
        probe = Peaks.from_json(document)
        sizes = _sizes(document.get("probe_sizes"))
        reached = {key: int(n) for key, n in _numbers(document.get("peak_reached_at_n")).items()}
        if (one_size := _number(document.get("matmul_n"))) is not None:  # probed at one size
            sizes = sizes or (int(one_size),)
            reached = reached or {precision: int(one_size) for precision in probe.gflops}
        remembered = _object(document.get("remembered"))
        return cls(
            device=_text(document.get("device")) or device, probe=probe,
            physical=Bound.from_json(_object(document["physical"]))
            if isinstance(document.get("physical"), Mapping) else None,
            description=_text(document.get("device_name")),
            measured_with=_names(document.get("measured_with")), probe_sizes=sizes,
            reached_at_n=reached,
            contended_cores=_number(document.get("probe_contended_cores")) or 0.0,
            theoretical_only=document.get("theoretical_only") is True,
            error=_text(document.get("error")),
            remembered=Remembered(_text(remembered.get("probed")), _text(remembered.get("how")))
            if remembered else None,
            probed_because=_text(document.get("probed_because")),
            deferred=_text(document.get("deferred")),
            cached=RememberedProbe.from_json(document.get("cached")),
            extra_fields={key: item for key, item in document.items()
                          if key not in known and not key.startswith(OLD_FP32 + "_")})

    def to_json(self) -> dict[str, object]:
        remembered = self.remembered
        return {**_without_empty({
            "device": self.device, "device_name": self.description,
            "measured_with": list(self.measured_with), "probe_sizes": list(self.probe_sizes),
            "probe_contended_cores": self.contended_cores, **self.probe.to_json(),
            "peak_reached_at_n": dict(self.reached_at_n),
            "physical": self.physical.to_json() if self.physical else None,
            "theoretical_only": self.theoretical_only, "error": self.error,
            "remembered": {"probed": remembered.probed, "how": remembered.how}
            if remembered else None,
            "probed_because": self.probed_because, "deferred": self.deferred,
            "cached": self.cached.to_json() if self.cached else None}),
            **self.extra_fields}


@dataclass(frozen=True)
class Ceilings:
    """A run's ceilings, per device ("cpu", "cuda:0"); empty where none were settled (cells
    run elsewhere, no rate to judge, runs from before ceilings)."""

    devices: Mapping[str, DeviceCeiling] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.devices)

    def for_device(self, device: str) -> DeviceCeiling | None:
        """A device's ceilings, not a failed probe's: 'cuda:0' falls back to 'cuda', then to
        'gpu' (older runs); None when there are none."""
        for name in (device, device.split(":")[0], device_kind(device)):
            entry = self.devices.get(name)
            if entry is not None and not entry.failed:
                return entry
        return None

    def measured(self) -> dict[str, DeviceCeiling]:
        """The devices whose figures are there (a failed probe's are not)."""
        return {name: entry for name, entry in self.devices.items() if not entry.failed}

    @property
    def theoretical_only(self) -> bool:
        """Every device holds only the machine's bound: no probe ran."""
        return bool(self.devices) and all(entry.theoretical_only
                                          for entry in self.devices.values())

    @classmethod
    def from_json(cls, value: object) -> Ceilings:
        """run.json's `ceilings` in any stored form ({device: entry}; null in older runs)."""
        return cls({str(device): DeviceCeiling.from_json(entry, str(device))
                    for device, entry in _object(value).items() if isinstance(entry, Mapping)})

    def to_json(self) -> dict[str, object]:
        return {device: entry.to_json() for device, entry in self.devices.items()}

    # The run document's serializer (harness.data.serial) reads and writes records by these.
    @classmethod
    def from_dict(cls, value: Mapping[str, object]) -> Ceilings:
        return cls.from_json(value)

    def to_dict(self) -> dict[str, object]:
        return self.to_json()


def as_ceilings(stored: object) -> Ceilings:
    """A run document's `ceilings` as the record, whatever it holds now: the record itself, or
    its JSON (until the document's field holds the record)."""
    return stored if isinstance(stored, Ceilings) else Ceilings.from_json(stored)


def failed(device: str, why: str) -> DeviceCeiling:
    """A device whose probe gave no figures, and why."""
    return DeviceCeiling(device, error=why)

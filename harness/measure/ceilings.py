"""The machine's own ceilings: peak matmul FLOP/s per precision and memory bandwidth.

Why: a cell faster than what the hardware can do (a graph optimizer folded the loop, a timer
missed the work) must be flagged, not celebrated; and "percent of peak" says how far a cell is
from the best this machine allows. Datasheet numbers are leads only: we measure.

Three figures per device, each with how it was obtained:
- the probe: the best of several matmul sizes (up to the largest the run uses while a call stays
  affordable), best-of samples, all threads, every installed library (`measured_with`);
- the cache: the best probe seen on this machine before (~/.cache/harness/ceilings.json), so one
  probe run that lost its cores to another process cannot lower the bar; kept per device and
  machine fingerprint (CPU, cores, GPUs, driver, the probe's library versions) with its date, so
  every run reuses it for REMEMBER_FOR_DAYS instead of probing again (`recall`);
- the physical bound: beyond it a result is impossible, not fast. CPU: cores x SIMD FLOP/cycle x
  clock; GPU: the best probe or cached figure with a margin (no portable theoretical figure).
Runs in a child process (`python -m harness.measure.ceilings DEVICES SIZES OUT.json`; DEVICES
comma-separated, all probed in that one process, so the framework is imported once).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.backend import DeviceUnavailable
from harness.core.registry import backend_has_module, backend_module, framework_installed
from harness.core.settings import Settings, cache_folder
from harness.data.ceilings import (
    Bound,
    DeviceCeiling,
    Fingerprint,
    Peaks,
    Remembered,
    RememberedProbe,
    failed,
)
from harness.data.store import read_json_object, write_json_atomic
from harness.measure import envinfo
from harness.measure.timing import TimingPolicy, autorange

# First installed provider that has a ceilings module wins (numpy covers cpu-only installs).
PROVIDERS = ("torch", "numpy")
PROBE_POLICY = TimingPolicy(min_samples=5, min_time_s=0.3, max_time_s=3.0, warmup_s=0.2)
DEFAULT_PROBE_SIZES = (1024, 2048, 4096, 8192)
# The probe climbs to the next size only while one call there is predicted to stay under this.
MAX_PROBE_CALL_S = 1.0
# A GPU result this far above the best probe is impossible rather than a better kernel (cuBLAS
# at other sizes stays within a few percent of its best; folding or a missed sync is 10-1000x).
GPU_BOUND_MARGIN = 1.25
# Bytes: above a copy's bandwidth by more than this is cache or folding, not memory speed.
BANDWIDTH_MARGIN = 1.10
CACHE_ENV = "HARNESS_CACHE_DIR"  # read by harness.core.settings, never here
# Every run reuses this machine's remembered ceilings for this long, then probes again. Why a
# month: the fingerprint sees a new CPU, GPU, driver or library, not what changes under the same
# names (a BIOS power limit, a clock cap, a GPU swapped for one of its model, a failing fan); a
# probe a month bounds how long such a change goes unseen, for ~30 s of probing a month.
REMEMBER_FOR_DAYS = 30
DAY_S = 86_400.0


# Probing again when other processes competed: load only ever slows a probe down.
CONTENDED_RETRIES = 3


def best_seconds(step: Callable[[], object], synchronize: Callable[[], None]) -> float:
    """Fastest sample: a ceiling is the best case, and load from elsewhere only slows samples.

    While another process competes for the cores (measured, harness.measure.hostload), the probe is
    repeated, keeping the fastest, so a busy minute does not become the machine's ceiling.
    """
    fastest = float("inf")
    for _ in range(1 + CONTENDED_RETRIES):
        measurement = autorange(step, synchronize, PROBE_POLICY)
        fastest = min(fastest, *measurement.samples)
        load = measurement.other_load
        if load is None or not load.contended:
            break
        PROBE_CONTENTION.append(load.other_cores + load.steal_cores)
    return fastest


# Cores other processes took while a probe retried (recorded in the figures, so a reader and
# the stability test know the probe ran on a busy machine).
PROBE_CONTENTION: list[float] = []


def climb(sizes: list[int], rate_of: Callable[[int], float]) -> dict[int, float]:
    """Rates at ascending sizes, stopping before a size whose call would cost too much."""
    rates: dict[int, float] = {}
    for n in sorted(set(sizes)):
        if rates:
            last_rate = rates[max(rates)]
            if 2 * n**3 / (last_rate * 1e9) > MAX_PROBE_CALL_S:
                break
        rates[n] = rate_of(n)
    return rates


def probe_sizes(largest_run_n: int | None) -> list[int]:
    """The default ladder plus the largest square matmul the run itself will do."""
    sizes = list(DEFAULT_PROBE_SIZES)
    if largest_run_n and largest_run_n > 256:
        sizes.append(int(largest_run_n))
    return sorted(set(sizes))


@dataclass(frozen=True)
class LibraryProbe:
    """What one library's probe of a device reached (a backend's `ceilings.measure`), and the
    matmul size that reached each precision's peak."""

    peaks: Peaks
    reached_at_n: Mapping[str, int] = field(default_factory=dict)


def _best_of(measured: Sequence[LibraryProbe]) -> LibraryProbe:
    """Per figure, the best any library reached, with the size that reached it (seen: torch's
    CPU matmul at 144 GFLOP/s where numpy and TF reach 180-200)."""
    gflops: dict[str, float] = {}
    reached: dict[str, int] = {}
    gbps: dict[str, float] = {}
    for probe in measured:
        for precision, rate in probe.peaks.gflops.items():
            if precision not in gflops or rate > gflops[precision]:
                gflops[precision] = rate
                if precision in probe.reached_at_n:
                    reached[precision] = probe.reached_at_n[precision]
        for link, rate in probe.peaks.gbps.items():
            gbps[link] = max(gbps.get(link, rate), rate)
    return LibraryProbe(Peaks(gflops, gbps), reached)


def measure_in_process(device_name: str, sizes: list[int]) -> DeviceCeiling:
    """Measure with every installed provider that can open the device; keep the best."""
    measured: list[LibraryProbe] = []
    used: list[str] = []
    description = ""
    for framework in PROVIDERS:
        installed, _ = framework_installed(framework)
        if not (installed and backend_has_module(framework, "ceilings")):
            continue
        try:
            device = backend_module(framework, "device").open_device(device_name)
        except DeviceUnavailable:
            continue
        measured.append(backend_module(framework, "ceilings").measure(device, sizes))
        used.append(framework)
        description = description or device.description
    if not measured:
        return failed(device_name, "no installed framework can open this device")
    best = _best_of(measured)
    return DeviceCeiling(device_name, probe=best.peaks, description=description,
                         measured_with=tuple(used), probe_sizes=tuple(sizes),
                         reached_at_n=best.reached_at_n,
                         contended_cores=max(PROBE_CONTENTION, default=0.0))


# --- the per-machine cache and the physical bounds ---------------------------------------------

def cache_dir(settings: Settings | None = None) -> Path:
    """The harness's per-machine cache: the settings' cache_dir (HARNESS_CACHE_DIR; None: this
    process's environment's, for a library call), else XDG's cache, else ~/.cache."""
    return cache_folder(Settings.from_environment() if settings is None else settings)


def cache_path(folder: Path | None = None) -> Path:
    """ceilings.json in FOLDER, the run's cache folder (None: cache_dir())."""
    return (cache_dir() if folder is None else folder) / "ceilings.json"


def probe_fingerprint() -> Fingerprint:
    """This machine as its probe saw it: CPU, cores, GPUs and driver, and the versions of the
    probe's libraries (PROVIDERS: their framework names are their distribution names)."""
    return envinfo.machine_fingerprint(PROVIDERS)


def _entry_key(device_name: str, fingerprint: Mapping[str, object]) -> str:
    """One cache entry per device and fingerprint: a home folder shared by several machines
    (NFS on a cluster) keeps each machine's own probe."""
    return f"{device_name}|{envinfo.fingerprint_key(fingerprint)}"


def _remembered_probes(cache: Mapping[str, object]) -> list[RememberedProbe]:
    return [probe for value in cache.values()
            if (probe := RememberedProbe.from_json(value)) is not None]


def _fresh(entry: RememberedProbe | None, now: float) -> bool:
    """A remembered probe young enough to reuse (entries from before fingerprints: never)."""
    return entry is not None and now - entry.probed_at <= REMEMBER_FOR_DAYS * DAY_S


def remember(figures: DeviceCeiling, fingerprint: Mapping[str, object] | None = None,
             now: float | None = None, folder: Path | None = None) -> DeviceCeiling:
    """Attach this machine's best earlier probe to `figures` (`cached`), then store the new
    best with the fingerprint, the date and how it was probed.

    The best of the probes since the entry's last one, so one probe that lost its cores cannot
    lower the bar; an entry older than REMEMBER_FOR_DAYS is replaced, not merged, since its
    figures may describe a machine that has changed under the same names. FOLDER: the run's
    cache folder (None: cache_dir()).
    """
    if figures.failed:
        return figures
    fingerprint = dict(probe_fingerprint() if fingerprint is None else fingerprint)
    now = time.time() if now is None else now
    # As stored: entries this version cannot read are written back as they were (another
    # harness version on a shared home may still use them).
    cache: dict[str, object] = read_json_object(cache_path(folder))
    key = _entry_key(figures.device, fingerprint)
    stored = RememberedProbe.from_json(cache.get(key))
    previous = stored if _fresh(stored, now) else None
    figures = replace(figures, cached=previous)
    best = previous.figures.best(figures.probe) if previous else figures.probe
    sizes = tuple(sorted({*(previous.probe_sizes if previous else ()), *figures.probe_sizes}))
    libraries = tuple(sorted({*(previous.measured_with if previous else ()),
                              *figures.measured_with}))
    cache[key] = RememberedProbe(
        device=figures.device, fingerprint=fingerprint, probed_at=now, figures=best,
        description=figures.description, probed=time.strftime("%Y-%m-%d", time.localtime(now)),
        probe_sizes=sizes, measured_with=libraries,
        how=f"best probe seen on this machine: sizes {list(sizes)}, libraries {list(libraries)}",
    ).to_json()
    try:
        write_json_atomic(cache_path(folder), cache)
    except OSError:
        pass  # a read-only home only costs the cache, never the run
    return figures


@dataclass(frozen=True)
class Recall:
    """A device's remembered ceilings, or (figures None) why the run must probe it."""

    figures: DeviceCeiling | None
    why_not: str = ""
    never_probed: bool = False  # this machine's cache holds no probe of the device at all


def recall(device_name: str, sizes: Sequence[int] = (),
           fingerprint: Mapping[str, object] | None = None, now: float | None = None,
           folder: Path | None = None) -> Recall:
    """This machine's remembered probe of a device, as its ceilings, when its fingerprint
    matches, it is younger than REMEMBER_FOR_DAYS and it tried sizes up to the largest in SIZES
    (a --quick probe's two sizes would set a GPU's bar too low for a full run); else why not.

    Matched on the device ("cuda:0") and the fingerprint, not on the device's description,
    which only a framework import could read: that import is what this saves. FOLDER: the
    run's cache folder (None: cache_dir()).
    """
    fingerprint = probe_fingerprint() if fingerprint is None else fingerprint
    now = time.time() if now is None else now
    entries = sorted((entry for entry in _remembered_probes(read_json_object(cache_path(folder)))
                      if entry.device == device_name and entry.figures.gflops),
                     key=lambda entry: -entry.probed_at)
    if not entries:
        return Recall(None, f"no remembered probe of {device_name}", never_probed=True)
    entry = next((entry for entry in entries if entry.fingerprint == fingerprint), None)
    if entry is None:
        changed = fingerprint_change(entries[0].fingerprint, fingerprint)
        return Recall(None, f"this machine changed since {device_name}'s probe: {changed}")
    if not _fresh(entry, now):
        return Recall(None, f"{device_name}'s probe of {entry.probed} is older than "
                            f"{REMEMBER_FOR_DAYS} days")
    # Sizes within the probe's ladder are bracketed by sizes it tried; only larger ones matter.
    tried = max(entry.probe_sizes or (0,))
    missing = sorted(size for size in set(sizes) if size > tried)
    if missing:
        return Recall(None, f"{device_name}'s probe of {entry.probed} did not try "
                            f"n={','.join(map(str, missing))}")
    return Recall(DeviceCeiling(
        device_name, probe=entry.figures, description=entry.description,
        measured_with=entry.measured_with, probe_sizes=entry.probe_sizes,
        remembered=Remembered(entry.probed, entry.how), cached=entry))


# The devices whose first probe a run deferred (a model file's first run on this machine), by
# device and fingerprint, beside ceilings.json: the next run that finds no probe probes then.
DEFERRED_FILE = "ceilings-deferred.json"


def deferred_before(device_name: str, fingerprint: Mapping[str, object],
                    folder: Path | None = None) -> bool:
    """Whether a run on this machine already deferred DEVICE_NAME's first probe."""
    folder = cache_dir() if folder is None else folder
    return _entry_key(device_name, fingerprint) in read_json_object(folder / DEFERRED_FILE)


def mark_deferred(device_name: str, fingerprint: Mapping[str, object],
                  folder: Path | None = None, now: float | None = None) -> None:
    """Remember that this run deferred DEVICE_NAME's first probe, so the next run probes it."""
    folder = cache_dir() if folder is None else folder
    marks: dict[str, object] = read_json_object(folder / DEFERRED_FILE)
    marks[_entry_key(device_name, fingerprint)] = time.time() if now is None else now
    try:
        write_json_atomic(folder / DEFERRED_FILE, marks)
    except OSError:
        pass  # a read-only home: every run defers, and each says so


def fingerprint_change(before: Mapping[str, object], after: Mapping[str, object]) -> str:
    """'torch 2.4.0 -> 2.5.1, cores 64 -> 32': what differs between two fingerprints."""
    def libraries(fingerprint: Mapping[str, object]) -> Mapping[str, object]:
        found = fingerprint.get("libraries")
        return found if isinstance(found, Mapping) else {}

    old_libraries, new_libraries = libraries(before), libraries(after)
    changes = [f"{name} {old_libraries.get(name)} -> {new_libraries.get(name)}"
               for name in sorted({*old_libraries, *new_libraries})
               if old_libraries.get(name) != new_libraries.get(name)]
    changes += [f"{key.replace('_', ' ')} {before.get(key)} -> {after.get(key)}"
                for key in sorted({*before, *after} - {"libraries"})
                if before.get(key) != after.get(key)]
    return ", ".join(changes) or "a different fingerprint"


def with_bounds(figures: DeviceCeiling) -> DeviceCeiling:
    """Add `physical`: the rates beyond which a result is impossible, and how each was set."""
    if figures.failed:
        return figures
    best = figures.probe.best(figures.cached.figures) if figures.cached else figures.probe
    theoretical = envinfo.cpu_theoretical_gflops() if figures.device == "cpu" else None
    gflops, how = {}, {}
    for precision, rate in best.gflops.items():
        if theoretical and precision == "fp32":
            gflops[precision] = max(theoretical.gflops, rate)
            how[precision] = theoretical.how
        else:
            gflops[precision] = rate * GPU_BOUND_MARGIN
            how[precision] = f"best probe x {GPU_BOUND_MARGIN:g}"
    gbps = {link: rate * BANDWIDTH_MARGIN for link, rate in best.gbps.items()}
    how.update({link: f"best probe x {BANDWIDTH_MARGIN:g}" for link in gbps})
    return replace(figures, physical=Bound(gflops, gbps, how))


def main(argv: list[str]) -> int:
    """DEVICES SIZES OUT.json: one device's figures, or {"devices": {name: figures}} for several."""
    device_names, sizes, out_path = argv[0].split(","), argv[1], Path(argv[2])
    # Through the imported module, not __main__: the backends' probes record their contention
    # in harness.measure.ceilings, which `python -m` runs as a second copy named __main__.
    from harness.measure import ceilings as imported

    by_device: dict[str, DeviceCeiling] = {}
    for device_name in device_names:
        try:
            by_device[device_name] = imported.measure_in_process(
                device_name, [int(n) for n in sizes.split(",")])
        except Exception as exc:  # noqa: BLE001 - reported as data
            by_device[device_name] = failed(device_name, f"{type(exc).__name__}: {exc}")
        imported.PROBE_CONTENTION.clear()  # each device's figures name their own contention
    document = by_device[device_names[0]].to_json() if len(device_names) == 1 else {
        "devices": {name: entry.to_json() for name, entry in by_device.items()}}
    write_json_atomic(out_path, document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Idle power: each counter over quiet windows before a cell's first case, and its cache.

The counter holds the whole board's energy, idle included (~80 W on an H200 at rest), so the
idle power measured before the cell is stored beside each energy record, which keeps both the
total and the share above idle (harness.measure.energy).

Idle power is remembered per machine (idle_power.json in the harness's cache folder, beside
the ceilings): a settled measurement is reused for IDLE_REMEMBER_S by every cell on the same
device whose fingerprint (host, CPU, cores, the device and its counters) is unchanged, and each
record then says when it was measured; absent, older or another fingerprint: measured again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from harness.data.serial import JsonObject
from harness.data.store import read_json_object, write_json_atomic
from harness.measure import envinfo
from harness.measure.energycounters import EnergyCounter, EnergyWindow

# Idle power: the counter over this long with nothing launched, before the cell's first case.
IDLE_WINDOW_S = 1.0
# Idle windows are repeated (at most IDLE_MAX_WINDOWS) until two in a row agree this closely.
IDLE_MAX_WINDOWS, IDLE_SETTLED = 5, 0.03
# A settled idle power is reused this long on an unchanged machine (idle_power.json). Why an
# hour: measuring it costs 2-5 s of every run's first round (a GPU's idle draw settles for
# seconds after its context opens); what moves it under the same fingerprint (the room's and
# the board's temperature, a fan curve, another tenant) changes over hours, not minutes.
IDLE_REMEMBER_S = 3600.0
IDLE_CACHE_FILE = "idle_power.json"


def measure_idle(counters: dict[str, EnergyCounter], seconds: float = IDLE_WINDOW_S,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.perf_counter,
                 max_windows: int = IDLE_MAX_WINDOWS) -> dict[str, IdlePower]:
    """Each counter's power with nothing launched (watts None where it gave no reading).

    Quiet windows one after another until two in a row agree within IDLE_SETTLED (every
    counter), at most max_windows: a GPU that has just been busy, or whose context was just
    created, draws more for a few seconds (131 W read against 122 W settled on an H200, which
    made the share above idle negative). The last window is the figure; 'settled' says
    whether it agreed with the one before.
    """
    found: dict[str, IdlePower] = {}
    previous: dict[str, float] = {}
    for count in range(1, max_windows + 1):
        windows = {name: EnergyWindow(counter, clock) for name, counter in counters.items()}
        for window in windows.values():
            window.begin()
        sleep(seconds)
        for window in windows.values():
            window.end(0)
        found = {name: idle_record(window) for name, window in windows.items()}
        watts = {name: record.watts for name, record in found.items()
                 if record.watts is not None}
        settled = bool(watts) and all(
            name in previous and abs(value - previous[name]) <= IDLE_SETTLED * previous[name]
            for name, value in watts.items())
        found = {name: replace(record, settled=settled, windows=count)
                 for name, record in found.items()}
        if settled or not watts:
            break
        previous = watts
    return found


@dataclass(frozen=True)
class IdlePower:
    """A counter's power over one quiet window before the cell (None: it gave no reading),
    and whether it agreed with the window before it (`settled`, after `windows` windows)."""

    counter: str
    watts: float | None
    window_s: float = 0.0
    settled: bool = False
    windows: int = 1
    measured_at: float = 0.0  # time.time() at the end of its window
    remembered: bool = False  # read back from idle_power.json, not measured by this worker


def idle_record(window: EnergyWindow) -> IdlePower:
    joules = window.joules
    if joules is None or window.seconds <= 0:
        return IdlePower(window.counter.name, None)
    return IdlePower(window.counter.name, joules / window.seconds, window.seconds,
                     measured_at=time.time())


def idle_cache_path(folder: Path) -> Path:
    """idle_power.json in FOLDER, the run's cache folder (harness.core.settings.cache_folder)."""
    return folder / IDLE_CACHE_FILE


def recall_idle(fingerprint: JsonObject, counters: list[str], folder: Path,
                now: float | None = None) -> dict[str, IdlePower] | None:
    """The idle power remembered in the cache FOLDER for FINGERPRINT, one per counter name in
    COUNTERS, when every one is there, settled and younger than IDLE_REMEMBER_S; else None
    (measure it)."""
    now = time.time() if now is None else now
    entry = read_json_object(idle_cache_path(folder)).get(envinfo.fingerprint_key(fingerprint))
    if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint:
        return None
    stored = entry.get("counters")
    if not isinstance(stored, dict) or set(stored) != set(counters):
        return None
    found = {}
    for name, fields in stored.items():
        try:
            record = IdlePower(**fields)
        except TypeError:  # a layout this version cannot read
            return None
        if record.watts is None or not record.settled \
                or not 0 <= now - record.measured_at <= IDLE_REMEMBER_S:
            return None
        found[name] = replace(record, remembered=True)
    return found


def remember_idle(fingerprint: JsonObject, found: dict[str, IdlePower], folder: Path) -> None:
    """Store FOUND for FINGERPRINT in the cache FOLDER where every counter gave a settled
    figure (an unsettled one is measured again next time); a cache that cannot be written
    costs the reuse only."""
    if not found or not all(record.watts is not None and record.settled
                            for record in found.values()):
        return
    cache = read_json_object(idle_cache_path(folder))
    # One entry per fingerprint, which names the device: a shared home folder keeps each
    # machine's and each device's own idle power.
    cache[envinfo.fingerprint_key(fingerprint)] = {
        "fingerprint": fingerprint,
        "counters": {name: {key: value for key, value in vars(record).items()
                            if key != "remembered"} for name, record in found.items()}}
    try:
        write_json_atomic(idle_cache_path(folder), cache)
    except OSError:
        pass


def idle_origin(idle: IdlePower | None) -> tuple[str, str]:
    """Where the idle power came from, for the record: ('HH:MM', its date and time) when it
    was read back from the machine's cache, else ('', '') (measured before this cell)."""
    if idle is None or not idle.remembered:
        return "", ""
    when = time.localtime(idle.measured_at)
    return time.strftime("%H:%M", when), time.strftime("%Y-%m-%d %H:%M:%S", when)

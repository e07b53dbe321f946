"""What the step model reads from a device profile: costs per launch, rates, copies, host speed.

Each function reads one catalogue entry (harness/predict/profile.py) and returns plain numbers;
an entry the step needs that the profile lacks raises `MissingRow` naming it and why, which the
model turns into an "unknown" prediction. Nothing here knows about a step's ops.

Rates by size. A row of `matmul.*`, `conv.*`, `elementwise.add` or `reduction.sum` is one
call timed back to back from the host, so a call shorter than a few host launches measures the
host, not the device (the H200's 32x512x512 matmul: 10-18 us whatever the dtype, 1 TFLOP/s).
Such rows (median below HOST_BOUND_LAUNCHES launches) are left out of the rate curve where
a device-bound row remains; the rate of a call of W units of work is then interpolated in
log(work)-log(rate) between the two nearest device-bound rows, and clamped to the nearest
row outside their range. Rows of equal work (the conv shapes of 7.4 GFLOP) are one point, at
the geometric mean of their rates. "Shape bucket" is therefore the work per call: an op is
charged the rate the profile measured for calls of its size.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from harness.predict.profile import Entry, Profile, Row

# A row under 3 host launches of time is the host's pace, not the device's: its rate would
# make small kernels look slower on the device than they are and hide the launch bound.
HOST_BOUND_LAUNCHES = 3.0


class MissingRow(LookupError):
    """The profile lacks an entry (or a row of it) the step needs: the reason, one line."""


def present(profile: Profile, name: str) -> Entry:
    """The measured entry NAME; MissingRow saying why it is absent."""
    entry = profile.entries.get(name)
    if entry is None:
        raise MissingRow(f"the profile has no entry {name}")
    if entry.absent or not entry.rows:
        raise MissingRow(f"the profile lacks {name} ({entry.absent or 'no rows'})")
    return entry


def median(row: Row, name: str) -> float:
    if row.median_s is None:
        raise MissingRow(f"{name}: a row without a median ({row.params})")
    return row.median_s


def row_where(profile: Profile, name: str, **params: object) -> Row:
    """The row of NAME whose params include PARAMS; MissingRow where none does."""
    try:
        return present(profile, name).row(**params)  # type: ignore[arg-type]
    except KeyError:
        raise MissingRow(f"the profile's {name} has no row with {params}") from None


def launch_seconds(profile: Profile, launches: int) -> tuple[float, int]:
    """(host seconds per launch of a tiny in-place op, the queue depth of the row read):
    host.launch_ahead's row nearest LAUNCHES in log scale (docs/predict.md: the launch cost
    drifts with the queue's depth, so the row nearest a step's kernel count is read)."""
    rows = [row for row in present(profile, "host.launch_ahead").rows
            if isinstance(row.params.get("kernels"), int)]
    if not rows:
        raise MissingRow("the profile's host.launch_ahead has no row with a queue depth")
    wanted = math.log(max(launches, 1))
    best = min(rows, key=lambda row: abs(math.log(int(row.params["kernels"])) - wanted))  # type: ignore[arg-type]
    return median(best, "host.launch_ahead"), int(best.params["kernels"])  # type: ignore[arg-type]


def allocation_seconds(profile: Profile) -> float:
    """Host seconds an op that allocates its output costs beyond an in-place one:
    host.dispatch's out-of-place add minus its in-place add_, floored at 0."""
    out_of_place = median(row_where(profile, "host.dispatch", op="add"), "host.dispatch")
    in_place = median(row_where(profile, "host.dispatch", op="add_"), "host.dispatch")
    return max(0.0, out_of_place - in_place)


def dispatch_in_place(profile: Profile) -> float:
    """Host seconds of one tiny in-place op from Python, back to back (host.dispatch add_):
    the unit the training step's fixed host work is counted in (model.py)."""
    return median(row_where(profile, "host.dispatch", op="add_"), "host.dispatch")


def kernel_floor(profile: Profile) -> float:
    """Device seconds of the shortest kernel: device.kernel_floor's smallest median (rows
    differ by queue depth only)."""
    return min(median(row, "device.kernel_floor")
               for row in present(profile, "device.kernel_floor").rows)


def round_trip(profile: Profile) -> float:
    """Seconds the host waits at a sync point on an otherwise drained queue: device.sync
    after one tiny kernel (a launch's round trip), the cost of a `.item()`."""
    return median(row_where(profile, "device.sync", after="one tiny kernel"), "device.sync")


@dataclass(frozen=True)
class GraphReplay:
    """A CUDA graph's replay: fixed seconds per replay, and seconds per captured kernel."""

    fixed_s: float
    per_kernel_s: float


def graph_replay(profile: Profile) -> GraphReplay:
    """The line through device.graph_replay's smallest and largest graphs (1 and 1000
    kernels in a full profile): its slope per kernel and its intercept per replay."""
    rows = sorted((row for row in present(profile, "device.graph_replay").rows
                   if isinstance(row.params.get("kernels"), int)),
                  key=lambda row: int(row.params["kernels"]))  # type: ignore[arg-type]
    if len(rows) < 2:
        raise MissingRow("the profile's device.graph_replay needs two graph sizes")
    small, large = rows[0], rows[-1]
    small_k, large_k = int(small.params["kernels"]), int(large.params["kernels"])  # type: ignore[arg-type]
    slope = (median(large, "device.graph_replay") - median(small, "device.graph_replay")) / (
        large_k - small_k)
    return GraphReplay(fixed_s=max(0.0, median(small, "device.graph_replay") - slope * small_k),
                       per_kernel_s=slope)


@dataclass(frozen=True)
class Link:
    """A host->device copy: seconds for the smallest copy (the latency) and bytes/s of the
    largest (the bandwidth); a copy of B bytes costs latency + B / bandwidth."""

    latency_s: float
    bytes_per_s: float

    def seconds(self, moved: int) -> float:
        return self.latency_s + moved / self.bytes_per_s if moved > 0 else 0.0


def link(profile: Profile, memory: str) -> Link:
    """transfer.h2d.MEMORY (pageable or pinned) as a latency and a bandwidth."""
    name = f"transfer.h2d.{memory}"
    rows = sorted((row for row in present(profile, name).rows if row.bytes),
                  key=lambda row: float(row.bytes or 0))
    if not rows:
        raise MissingRow(f"the profile's {name} has no row with bytes")
    rate = rows[-1].rate()
    if not rate:
        raise MissingRow(f"the profile's {name} has no bandwidth")
    return Link(latency_s=median(rows[0], name), bytes_per_s=rate)


def rate_points(profile: Profile, name: str, launch_s: float) -> list[tuple[float, float]]:
    """(work per call, rate) of entry NAME's device-bound rows (module docstring), rows of
    equal work merged at their geometric mean rate, sorted by work."""
    rows = [row for row in present(profile, name).rows if row.rate()]
    if not rows:
        raise MissingRow(f"the profile's {name} has no row with a rate")
    bound = [row for row in rows if (row.median_s or 0.0) >= HOST_BOUND_LAUNCHES * launch_s]
    by_work: dict[float, list[float]] = {}
    for row in bound or rows:
        work = float(row.flops if row.flops is not None else row.bytes or 0.0)
        by_work.setdefault(work, []).append(float(row.rate() or 0.0))
    return [(work, math.exp(sum(math.log(rate) for rate in rates) / len(rates)))
            for work, rates in sorted(by_work.items())]


def rate_at(points: list[tuple[float, float]], work: float) -> float:
    """The rate for a call of WORK: log-log interpolation between the nearest points,
    clamped outside them."""
    if work <= points[0][0]:
        return points[0][1]
    if work >= points[-1][0]:
        return points[-1][1]
    for (low_work, low_rate), (high_work, high_rate) in itertools.pairwise(points):
        if low_work <= work <= high_work:
            share = math.log(work / low_work) / math.log(high_work / low_work)
            return math.exp(math.log(low_rate) + share * math.log(high_rate / low_rate))
    return points[-1][1]  # unreachable: the points are sorted and cover WORK


@dataclass(frozen=True)
class HostSpeed:
    """A host CPU's single-thread speed: seconds of harness/predict/hostspeed.py's two loops
    (the interpreter's, and numpy's per-call cost), as a profile's host.python and
    host.numpy rows hold them, and the CPU's model name where the caller knows it. Smaller
    is faster."""

    python_loop_s: float
    numpy_loop_s: float
    cpu_model: str = ""  # the CPU's model name where known: the same model is not rescaled
    # The usable cores where known (0: not known). A virtual CPU's model name can be the
    # generic "Intel(R) Xeon(R) Processor" on a 2-core VM and a 16-core GPU host alike: another
    # core count says the name does not make them one machine.
    cores: int = 0

    @classmethod
    def from_record(cls, record: Mapping[str, object]) -> HostSpeed:
        """A HostSpeed from its record (record()); a record without cpu_model or cores has
        none."""
        return cls(python_loop_s=float(record["python_loop_s"]),  # type: ignore[arg-type]
                   numpy_loop_s=float(record["numpy_loop_s"]),  # type: ignore[arg-type]
                   cpu_model=str(record.get("cpu_model") or ""),
                   cores=int(str(record.get("cores") or 0)))

    def record(self) -> dict[str, float | str]:
        found: dict[str, float | str] = {"python_loop_s": self.python_loop_s,
                                         "numpy_loop_s": self.numpy_loop_s}
        if self.cpu_model:
            found["cpu_model"] = self.cpu_model
        if self.cores:
            found["cores"] = self.cores
        return found

    def same_host_as(self, other: HostSpeed) -> bool:
        """Whether OTHER is taken for this machine's kind (its loops' ratio then noise): one
        CPU model, and one core count where both are known."""
        if not self.cpu_model or self.cpu_model != other.cpu_model:
            return False
        return not (self.cores and other.cores and self.cores != other.cores)


def profiled_host_speed(profile: Profile) -> HostSpeed:
    """The profiled machine's host speed, from its host.python and host.numpy rows."""
    python = present(profile, "host.python").rows[0]
    numpy = present(profile, "host.numpy").rows[0]
    return HostSpeed(python_loop_s=median(python, "host.python"),
                     numpy_loop_s=median(numpy, "host.numpy"),
                     cpu_model=str(profile.host.get("cpu_model") or ""),
                     cores=int(str(profile.host.get("cores") or 0)))

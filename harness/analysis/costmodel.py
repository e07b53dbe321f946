"""Where the GPU would start to win: a cost model per device, fitted to the measured sweep.

Why a model at all: the sizes where the GPU wins are often the ones too slow to run (seed
000's Jacobian: minutes per call at batch 1000), while a short sweep already holds what decides
the answer: each device's fixed cost per call, its launches and what each costs the host, and
how fast it turns FLOPs into time. Extrapolating those, not the wall times, makes the crossover
predictable. Per device, from figures the harness measured (never a data sheet):

    seconds(size) = fixed + launches(size) * per_launch + bytes(size) / bandwidth
                    + work(size) / rate

fitted with non-negative coefficients on relative error, its error measured by leaving the
largest size out. A device's curve is its case-table rows (harness.analysis.casetable.CaseRow),
read per call: call_median_s, flops, nbytes, launches_per_call, device_seconds, steps_per_call.
docs/methodology.md ("The predicted crossover") says how each term is measured and extended
past the sweep, and when a prediction is labelled an extrapolation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.analysis.casetable import CaseRow
from harness.core.units import format_seconds, three_digits

# Past this multiple of the largest size run, a predicted crossover is an extrapolation.
EXTRAPOLATION_FACTOR = 10.0
# The search for a crossover stops at this multiple of the largest size run.
SEARCH_FACTOR = 1000.0
GRID_POINTS = 400
MIN_SIZES_TO_FIT = 2
MIN_SIZES_FOR_ERROR = 3


def size_of(point: CaseRow) -> float:
    """A case's size as a point of its device's curve; ValueError for one without a number."""
    if point.size_value is None:
        raise ValueError(f"{point.key}: no numeric size, no point of a sweep")
    return point.size_value


@dataclass(frozen=True)
class PowerLaw:
    """count(size) = scale * size ** exponent, fitted through the upper sizes of a sweep."""

    scale: float
    exponent: float

    def __call__(self, size: float) -> float:
        return self.scale * size ** self.exponent


@dataclass(frozen=True)
class CostModel:
    """seconds(size) = fixed + launches(size) * per_launch + work(size) / rate, for one device."""

    device: str  # "cpu" or "gpu"
    fixed_s: float
    per_launch_s: float
    seconds_per_work: float  # 1 / rate
    work: PowerLaw
    launches: PowerLaw | None
    work_is_flops: bool
    from_profile: bool  # host and device parts fitted apart (a GPU cell with a profile)
    seconds_per_byte: float = 0.0  # 1 / bandwidth
    moved: PowerLaw | None = None  # bytes per call
    counted: str = "launches"  # what `launches` counts: profiled launches, or steps per call
    terms: int = 2  # coefficients fitted to one series of points (the most of any part)

    def parts(self, size: float) -> tuple[float, float, float]:
        """(fixed, launch, work) seconds at `size`; the bytes' time counts as work."""
        launch = 0.0 if self.launches is None else self.launches(size) * self.per_launch_s
        moving = 0.0 if self.moved is None else self.moved(size) * self.seconds_per_byte
        return self.fixed_s, launch, self.work(size) * self.seconds_per_work + moving

    def seconds(self, size: float) -> float:
        return sum(self.parts(size))

    def growth_per_doubling(self, size: float) -> float:
        here = self.seconds(size)
        return self.seconds(2 * size) / here if here > 0 else float("nan")

    def bound_at(self, size: float) -> str:
        """Which part dominates at `size`, in words with its measured constants."""
        fixed, launch, work = self.parts(size)
        if launch >= max(fixed, work) and launch > 0 and self.launches is not None:
            bound = "launch" if self.counted == "launches" else "step"
            return (f"{bound}-bound: {self.launches(size):.2g} {self.counted} per call at "
                    f"{format_seconds(self.per_launch_s)}")
        if work >= fixed and self.seconds_per_work > 0:
            unit = "FLOP/s" if self.work_is_flops else "size units/s"
            return f"work-bound: {_rate(1 / self.seconds_per_work)} {unit}"
        return f"fixed cost {format_seconds(fixed)} per call"


def fit_power_law(sizes: Sequence[float], counts: Sequence[float]) -> PowerLaw:
    """A power law through the upper half of (size, count), at least the two largest points.

    Why the upper half: counts of a fixed program grow polynomially, and the leading term, the
    one that decides far past the sweep, shows at the large sizes.
    """
    pairs = sorted((s, c) for s, c in zip(sizes, counts, strict=True) if s > 0 and c > 0)
    if not pairs:
        return PowerLaw(0.0, 0.0)
    if len(pairs) == 1:
        size, count = pairs[0]
        return PowerLaw(count / size, 1.0)
    upper = pairs[len(pairs) // 2 - (1 if len(pairs) % 2 == 0 else 0):] \
        if len(pairs) > 2 else pairs
    upper = upper if len(upper) >= 2 else pairs[-2:]
    logs = np.log([[s, c] for s, c in upper])
    exponent, intercept = np.polyfit(logs[:, 0], logs[:, 1], 1)
    return PowerLaw(float(math.exp(intercept)), float(exponent))


def _nonnegative_relative_fit(columns: list[np.ndarray], target: np.ndarray,
                              relative_to: np.ndarray | None = None) -> np.ndarray:
    """Non-negative coefficients minimising the error of columns @ coef against target,
    relative to `relative_to` (default: the target itself).

    Few columns (at most four), so every subset of active columns is tried in closed form:
    exact and dependency-free, where an iterative solver would need a tolerance.
    """
    scale = target if relative_to is None else relative_to
    weights = 1.0 / np.maximum(scale, 1e-30)
    design = np.column_stack(columns) * weights[:, None]
    goal = target * weights
    best, best_cost = np.zeros(len(columns)), float(np.sum(goal ** 2))
    for mask in range(1, 2 ** len(columns)):
        active = [index for index in range(len(columns)) if mask >> index & 1]
        coef, *_ = np.linalg.lstsq(design[:, active], goal, rcond=None)
        if np.any(coef < 0):
            continue
        cost = float(np.sum((design[:, active] @ coef - goal) ** 2))
        if cost < best_cost:
            best, best_cost = np.zeros(len(columns)), cost
            best[active] = coef
    return best


def _two_stage_fit(columns: list[np.ndarray], growing: int, target: np.ndarray) -> np.ndarray:
    """Coefficients of `columns` (the last `growing` of them grow with the size) for `target`.

    Each constant is taken where its term dominates: the growing terms' (seconds per FLOP,
    per byte) from the upper half of the sizes, where the device runs at the rate it keeps
    beyond the sweep (small calls never reach it: a 2-core CPU's matmul runs at half its
    large-size rate below n=256, and a fit over all sizes carries that into the forecast); the
    fixed terms (per call, per launch) from every size, once the growing part is taken off.
    With under four sizes there is no upper half to spare, and all terms are fitted at once.
    """
    count = len(target)
    if count < 4 or growing == 0:
        return _nonnegative_relative_fit(columns, target)
    upper = slice((count - 1) // 2, count)  # points are sorted by size
    upper_coef = _nonnegative_relative_fit([column[upper] for column in columns], target[upper])
    fixed_count = len(columns) - growing
    if growing == 1:
        upper_coef[-1] = _marginal_cost(columns, upper_coef, target, fixed_count)
    grown = sum((columns[index] * upper_coef[index]
                 for index in range(fixed_count, len(columns))), np.zeros(count))
    rest = np.maximum(target - grown, 0.0)
    fixed = _nonnegative_relative_fit(columns[:fixed_count], rest, relative_to=target)
    return np.concatenate([fixed, upper_coef[fixed_count:]])


def _marginal_cost(columns: list[np.ndarray], coef: np.ndarray, target: np.ndarray,
                   fixed_count: int) -> float:
    """The growing term's cost per unit from the step between the two largest sizes, where
    the work grew; the upper-half fit's coefficient where it did not or the step says nothing.

    Why the last step: a device's rate keeps changing inside a sweep, and the rate beyond it
    is nearest the one its largest sizes showed. On the H100 machine's 16-core host a small
    CNN's CPU training step ran at 145, 102 and 84 GFLOP/s at batch 128, 512 and 2048; a rate
    fitted over the upper half (32-512) predicted batch 2048 39% too fast, the last step's 9%.
    The per-call and per-launch terms cancel in the difference, but for the launches' own
    growth, which their fitted cost takes off first.
    """
    work_step = columns[-1][-1] - columns[-1][-2]
    if work_step <= 0.05 * columns[-1][-1]:  # the work hardly grew: the step cannot tell
        return float(coef[-1])
    time_step = target[-1] - target[-2] - sum(
        coef[index] * (columns[index][-1] - columns[index][-2])
        for index in range(1, fixed_count))
    marginal = float(time_step / work_step)
    return marginal if marginal > 0 else float(coef[-1])


def fit_device(device_kind: str, points: Sequence[CaseRow]) -> CostModel | None:
    """The device's cost model from its measured points; None with fewer than two sizes.

    A GPU point with a profile splits its wall time into the host's part (wall minus busy),
    taken per launch as the profiler counts them, and the device's busy time, fitted on the
    work. A point without a profile (a CPU cell, a GPU framework without a profiler) is fitted
    on its wall time: fixed + launches * per_launch + work / rate when it carries an op count
    (a CPU cell given its GPU twin's launch count: eager frameworks pay a dispatch per op on
    the CPU too), else fixed + work / rate.
    """
    points = sorted(points, key=size_of)
    if len(points) < MIN_SIZES_TO_FIT:
        return None
    sizes = [size_of(point) for point in points]
    work_is_flops = all(point.flops for point in points)
    work_counts = [float(point.flops or 0.0) if work_is_flops else size for point, size
                   in zip(points, sizes)]
    work = fit_power_law(sizes, work_counts)
    wall = np.array([point.call_median_s for point in points])
    ones, work_column = np.ones(len(points)), np.array(work_counts, dtype=float)
    byte_counts = np.array([float(point.nbytes or 0.0) for point in points])
    # Bytes join the fit only where there are more points than unknowns to fit them with.
    with_bytes = all(point.nbytes for point in points) and len(points) >= 4
    moved = fit_power_law(sizes, list(byte_counts)) if with_bytes else None
    counted, what = _per_call_counts(points)
    launch_counts = np.array(counted or [0.0] * len(points))
    launches = fit_power_law(sizes, list(launch_counts)) if counted else None
    if what == "launches" and all(point.device_seconds is not None for point in points):
        busy = np.array([min(float(point.device_seconds or 0.0), point.call_median_s)
                         for point in points])
        host_fixed, per_launch = _host_costs(wall - busy, launch_counts, wall)
        device = [ones, byte_counts, work_column] if with_bytes else [ones, work_column]
        coef = _two_stage_fit(device, len(device) - 1, np.maximum(busy, 1e-12))
        return CostModel(device_kind, float(coef[0]) + host_fixed, per_launch, float(coef[-1]),
                         work,
                         launches, work_is_flops, from_profile=True,
                         seconds_per_byte=float(coef[1]) if with_bytes else 0.0, moved=moved,
                         counted=what, terms=len(device))
    columns = [ones] + ([launch_counts] if counted else []) + (
        [byte_counts] if with_bytes else []) + [work_column]
    coef = _two_stage_fit(columns, 2 if with_bytes else 1, wall)
    return CostModel(device_kind, float(coef[0]), float(coef[1]) if counted else 0.0,
                     float(coef[-1]), work, launches, work_is_flops, from_profile=False,
                     seconds_per_byte=float(coef[-2]) if with_bytes else 0.0, moved=moved,
                     counted=what, terms=len(columns))


# Launch counts that change less than this over the sweep cannot tell a cost per launch from a
# fixed one: the host's time is then all taken per launch.
VARYING_COUNT_FACTOR = 2.0


def _host_costs(host: np.ndarray, launches: np.ndarray, wall: np.ndarray) -> tuple[float, float]:
    """(fixed, per launch) seconds of the host's part of a call (wall minus device-busy).

    Per launch alone misses what the host does once per call whatever the launches: an MNIST
    epoch's host slices and copies every sample, the same at batch 16 and 2048, while its
    launches fall 100x (seen on the H100: 0.58 ms of host time per launch at batch 2048, 57 us
    at 16). Where the counts vary enough, both are fitted; else the host time goes per launch.
    """
    host = np.maximum(host, 0.0)
    if launches.max() < VARYING_COUNT_FACTOR * launches.min():
        return 0.0, max(float(np.median(host / launches)), 0.0)
    fixed, per_launch = _nonnegative_relative_fit([np.ones(len(host)), launches], host,
                                                  relative_to=wall)
    return float(fixed), float(per_launch)


def _per_call_counts(points: Sequence[CaseRow]) -> tuple[list[float] | None, str]:
    """(counts, what they count) for the fixed-cost-per-event term of the fit.

    Launches where the profiler counted them at every size. Else steps per call where they
    change with the size: a call that is an epoch of N samples makes N / batch steps, each
    paying the framework's per-step cost (dispatch, optimizer, Python), so the epoch gets
    cheaper with the batch although its FLOPs stay the same; without this term a model of
    fixed + FLOPs / rate has nothing that shrinks with the batch.
    """
    if all(point.launches_per_call for point in points):
        return [float(point.launches_per_call or 0.0) for point in points], "launches"
    steps = [float(point.steps_per_call or 0.0) for point in points]
    if all(steps) and len(set(steps)) > 1:
        return steps, "steps"
    return None, "launches"


def held_out_error(device: str, points: Sequence[CaseRow]) -> float | None:
    """Relative error predicting the largest size from the others (None: too few sizes)."""
    points = sorted(points, key=size_of)
    if len(points) < MIN_SIZES_FOR_ERROR:
        return None
    model = fit_device(device, points[:-1])
    if model is None:
        return None
    largest = points[-1]
    return model.seconds(size_of(largest)) / largest.call_median_s - 1.0


@dataclass(frozen=True)
class CrossoverPrediction:
    """The predicted answer to "from what size is the GPU faster?", with its evidence."""

    kind: str  # crossover, gpu-always, cpu-always, too-few-sizes
    size: float | None
    cpu: CostModel | None
    gpu: CostModel | None
    largest_measured: float
    sizes_used: int
    held_out_error: float | None  # the larger of the two devices' (signed: + is too slow)
    caveats: tuple[str, ...] = field(default=())

    @property
    def extrapolated(self) -> bool:
        return (self.size is not None
                and self.size > EXTRAPOLATION_FACTOR * self.largest_measured)

    def why(self, sweep: str) -> str:
        """The mechanism in words: what bounds the GPU there, how the CPU cost grows."""
        if self.cpu is None or self.gpu is None:
            return ""
        at = self.size if self.size is not None else SEARCH_FACTOR * self.largest_measured
        cpu_growth = self.cpu.growth_per_doubling(at)
        gpu_growth = self.gpu.growth_per_doubling(at)
        if self.kind == "cpu-always":
            if gpu_growth >= cpu_growth * 0.98:
                return (f"both costs grow with the {sweep} at the same rate or the GPU's "
                        f"faster ({gpu_growth:.2f}x vs CPU {cpu_growth:.2f}x per doubling), and "
                        f"the GPU starts {self.gpu.seconds(at) / self.cpu.seconds(at):.2g}x "
                        f"slower")
            return (f"the CPU's cost grows faster ({cpu_growth:.2f}x vs GPU {gpu_growth:.2f}x "
                    f"per doubling) but not enough within {SEARCH_FACTOR:g}x the sizes run")
        return (f"GPU {self.gpu.bound_at(at)}; CPU cost grows {cpu_growth:.2f}x per doubling")

    def short_text(self, sweep: str, source: str = "") -> str:
        """The prediction in a clause, for the at-a-glance line (the table has the rest)."""
        whose = f" from {source}'s costs" if source else ""
        if self.kind == "too-few-sizes":
            return f"no prediction{whose} (too few sizes)"
        if self.kind == "crossover":
            head = f"predicted{whose}: GPU faster above {sweep} ~{_size(self.size)}" + (
                " (extrapolation)" if self.extrapolated else "")
        elif self.kind == "gpu-always":
            head = f"predicted{whose}: GPU faster at every size"
        else:
            searched = _size(self.largest_measured * SEARCH_FACTOR)
            head = f"predicted{whose}: no crossover up to {sweep} {searched}"
        error = (f", held-out error {100 * abs(self.held_out_error):.0f}%"
                 if self.held_out_error is not None else "")
        doubt = ", from noisy or SUSPECT points" if any(
            "noisy" in note or "SUSPECT" in note for note in self.caveats) else ""
        if any("cannot test the model's form" in note for note in self.caveats):
            doubt += ", too few sizes to test the model's form"
        return head + error + doubt

    def text(self, sweep: str) -> str:
        """One line for the verdict: the prediction, its basis and its error."""
        if self.kind == "too-few-sizes":
            return (f"no prediction: fewer than {MIN_SIZES_TO_FIT} sizes measured on both "
                    "devices, or no cost could be fitted to them")
        if self.kind == "crossover":
            head = (f"predicted: GPU faster above {sweep} ~{_size(self.size)}"
                    + (" (extrapolation, over 10x the largest size run)"
                       if self.extrapolated else ""))
        elif self.kind == "gpu-always":
            head = "predicted: GPU faster at every size"
        else:
            searched = _size(self.largest_measured * SEARCH_FACTOR)
            head = f"predicted: no crossover up to {sweep} {searched}"
        error = ("error on the held-out largest size "
                 f"{100 * abs(self.held_out_error):.0f}%" if self.held_out_error is not None
                 else f"held-out error not measured (fewer than {MIN_SIZES_FOR_ERROR} sizes)")
        tail = f"from {self.sizes_used} sizes, {error}"
        caveats = f"; {'; '.join(self.caveats)}" if self.caveats else ""
        return f"{head} ({self.why(sweep)}), {tail}{caveats}"


def crossover_between(cpu: CostModel, gpu: CostModel, smallest: float,
                      largest: float) -> tuple[str, float | None]:
    """(kind, size): the size from which the GPU model stays faster, searched on a log grid."""
    grid = np.geomspace(max(smallest, 1e-9), largest * SEARCH_FACTOR, GRID_POINTS)
    gpu_faster = [gpu.seconds(size) < cpu.seconds(size) for size in grid]
    if all(gpu_faster):
        return "gpu-always", None
    if not gpu_faster[-1]:
        return "cpu-always", None
    last_slower = max(index for index, faster in enumerate(gpu_faster) if not faster)
    low, high = float(grid[last_slower]), float(grid[last_slower + 1])
    for _ in range(60):  # bisection: the grid's step is ~2%, this pins the size down
        middle = math.sqrt(low * high)
        if gpu.seconds(middle) < cpu.seconds(middle):
            high = middle
        else:
            low = middle
    return "crossover", high


def predict_crossover(cpu_points: Sequence[CaseRow],
                      gpu_points: Sequence[CaseRow]) -> CrossoverPrediction:
    """Fit both devices and find where the curves cross; errors by leaving the largest out."""
    sizes = sorted({size_of(p) for p in cpu_points} & {size_of(p) for p in gpu_points})
    largest = max([size_of(p) for p in [*cpu_points, *gpu_points]], default=0.0)
    cpu, gpu = fit_device("cpu", cpu_points), fit_device("gpu", gpu_points)
    if cpu is None or gpu is None or not sizes or not (
            cpu.seconds(largest) > 0 and gpu.seconds(largest) > 0):  # no cost fitted at all
        return CrossoverPrediction("too-few-sizes", None, cpu, gpu, largest, len(sizes), None)
    errors = [error for error in (held_out_error("cpu", cpu_points),
                                  held_out_error("gpu", gpu_points)) if error is not None]
    worst = max(errors, key=abs) if len(errors) == 2 else None
    smallest = min(size_of(p) for p in [*cpu_points, *gpu_points])
    kind, size = crossover_between(cpu, gpu, smallest, largest)
    return CrossoverPrediction(kind, size, cpu, gpu, largest, len(sizes), worst,
                      _caveats(cpu_points, gpu_points) + _untested(cpu, gpu, cpu_points,
                                                                   gpu_points))


def _untested(cpu: CostModel, gpu: CostModel, cpu_points: Sequence[CaseRow],
              gpu_points: Sequence[CaseRow]) -> tuple[str, ...]:
    """A device fitted with as many terms as it has sizes passes through every point, and
    predicting its largest size from the others leaves fewer points than terms: its held-out
    error cannot test the model's form. Seed 000's Jacobian, batch 10/20/40: held-out error
    25%, and at batch 300 the CPU took 15.5 s where its model said ~33 s."""
    notes = [f"{model.device}: {model.terms} cost terms fitted to {len(points)} sizes, so the "
             "held-out error cannot test the model's form (run more sizes)"
             for model, points in ((cpu, cpu_points), (gpu, gpu_points))
             if len(points) <= model.terms]
    return tuple(notes)


def _caveats(cpu_points: Sequence[CaseRow], gpu_points: Sequence[CaseRow]) -> tuple[str, ...]:
    notes = []
    for device, points in (("cpu", cpu_points), ("gpu", gpu_points)):
        suspect = [_size(size_of(p)) for p in points if p.suspect]
        noisy = [_size(size_of(p)) for p in points if p.noisy and not p.suspect]
        if suspect:
            notes.append(f"fitted on SUSPECT {device} points ({', '.join(suspect)})")
        if noisy:
            notes.append(f"fitted on noisy {device} points ({', '.join(noisy)})")
        if points and not all(p.flops for p in points):
            notes.append(f"{device} work taken as the size (no FLOP count)")
    return tuple(notes)


def two_digits(size: float | None) -> str:
    """A predicted crossover's size with the 2 significant digits its error allows."""
    if size is None:
        return "?"
    if size < 100:
        return f"{float(f'{size:.2g}'):g}"  # never "1e+02"
    return f"{round(size, -math.floor(math.log10(size)) + 1):,.0f}"


def _size(size: float | None) -> str:
    """A size: every digit of a whole one (a measured size), else two_digits."""
    return f"{int(size):,}" if size is not None and float(size).is_integer() else two_digits(size)


def _rate(per_s: float) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if float(f"{per_s / scale:.3g}") >= 1:
            return f"{three_digits(per_s / scale)} {prefix}"
    return f"{three_digits(per_s)} "

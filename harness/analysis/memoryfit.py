"""Will a bigger batch fit? Memory fitted over a batch sweep, and the largest batch predicted.

Per (framework, device, variant) cell of a run whose sweep is a batch size, the memory of each
case is fitted as `fixed + per_sample x batch` (ordinary least squares), and the largest batch
predicted to fit is floor((capacity - fixed) / per_sample). The record says how good the fit
is (sizes used, residuals), where the batch lies against the predicted GPU-vs-CPU crossover
that run.json stores (`predictions`, harness.analysis.crossover), and, where there is no
prediction, why not. Pure computation over a RunDocument: no framework, no file.

What is fitted (GPU: the memory the step must hold, case extra REQUIRED_CASE_FIGURE, and the
allocator's peak, whose prediction is a floor; CPU: the per-case host peak, HOST_CASE_FIGURE),
against what capacity (the GPU's total memory less DEVICE_RESERVE_BYTES, an assumption; the
host's RAM): docs/methodology.md, "Will a bigger batch fit?". A straight line because a step's
memory is weights, optimizer state and workspace (fixed) plus activations and inputs
(proportional to the batch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import pairwise

from harness.analysis.costmodel import SEARCH_FACTOR, two_digits
from harness.backend import parse_cuda_index
from harness.core.units import device_kind, format_bytes, said_once
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.spec import Status

# Sweeps whose values are a batch size: only there is "per sample" the slope of the line.
BATCH_SWEEPS = frozenset({"batch", "batch_size"})
# Device memory outside the framework's allocator (CUDA context, driver, cuDNN/cuBLAS handles):
# about 0.3-0.6 GiB on recent GPUs and drivers; 1 GiB errs on the side of a smaller batch.
DEVICE_RESERVE_BYTES = 2**30
# The case `extra` key of a per-case host peak (bytes), where a worker records one.
HOST_CASE_FIGURE = "peak_host_memory_bytes"
# The case `extra` key of the memory a step must hold (bytes; backends/torch/stepmemory.py).
REQUIRED_CASE_FIGURE = "required_device_bytes"
# What a required-memory prediction is based on, as lines say it.
REQUIRED_BASIS = ("predicted from the memory the step must hold (weights, gradients, optimizer "
                  "state, saved activations, the largest transient)")
# The fewest batch sizes a prediction is drawn from. A line through two passes through both and
# leaves no residual, so nothing tests that memory grew in a straight line, and the prediction
# lies orders of magnitude beyond them (a --quick advise over batches 2 and 8 led its answer
# with ~1,190,000, issue 49): three sizes leave a residual that says how straight it grew.
MIN_PREDICTION_SIZES = 3


@dataclass(frozen=True)
class MemoryPoint:
    """One measured case: its batch size and the peak memory it held (bytes)."""

    batch: float
    peak_bytes: float


@dataclass(frozen=True)
class LineFit:
    """peak = fixed + per_sample x batch, least squares over `sizes` distinct batch sizes."""

    fixed_bytes: float
    per_sample_bytes: float
    sizes: int
    largest_size: float
    # The largest residual (measured - fitted), bytes; None with two sizes: a line through two
    # points leaves none, so its error is not measured.
    max_residual_bytes: float | None

    @property
    def predicts(self) -> bool:
        """Whether a largest batch may be drawn from it: memory grew with the batch, over
        MIN_PREDICTION_SIZES sizes or more (a residual tests the line)."""
        return self.per_sample_bytes > 0 and self.sizes >= MIN_PREDICTION_SIZES


def fit_line(points: Sequence[MemoryPoint]) -> LineFit | None:
    """The least-squares line through POINTS; None with fewer than two distinct batch sizes.

    Closed form (the normal equations of two unknowns) in exact fractions, so a peak that grows
    exactly linearly gives its fixed and per-sample parts to the byte, and this module needs no
    numpy; `harness check` refits with numpy, a second computation.
    """
    sizes = {point.batch for point in points}
    if len(sizes) < 2:
        return None
    batches = [Fraction(point.batch) for point in points]
    peaks = [Fraction(point.peak_bytes) for point in points]
    mean_batch, mean_peak = sum(batches) / len(points), sum(peaks) / len(points)
    slope = (sum((b - mean_batch) * (p - mean_peak) for b, p in zip(batches, peaks))
             / sum((b - mean_batch) ** 2 for b in batches))
    fixed = mean_peak - slope * mean_batch
    residuals = [float(p - fixed - slope * b) for b, p in zip(batches, peaks)]
    measured = len(sizes) > 2
    return LineFit(float(fixed), float(slope), len(sizes), max(sizes),
                   max(residuals, key=abs) if measured else None)


@dataclass(frozen=True)
class CrossoverPlace:
    """The predicted GPU-vs-CPU crossover run.json stores for the cell's framework and variant.

    kind: as harness.analysis.costmodel.CrossoverPrediction ('crossover', 'gpu-always',
    'cpu-always', 'too-few-sizes'); batch: the crossover's batch ('crossover' only);
    searched_to: the largest batch the predictor searched (SEARCH_FACTOR x the largest batch
    measured validly).
    """

    kind: str
    batch: float | None
    searched_to: float | None


@dataclass(frozen=True)
class MemoryFit:
    """The answer to "will a bigger batch fit?" for one cell, with its evidence."""

    run_id: str
    machine: str
    framework: str
    device: str
    variant: str
    memory: str  # 'device' (a GPU's allocator) or 'host' (the worker's RSS)
    figure: str  # what was fitted, in words
    points: tuple[MemoryPoint, ...]
    fit: LineFit | None
    capacity_bytes: float | None  # what the cell may fill (the reserve already subtracted)
    # How lines name the capacity ('78.6 GiB (of 79.6 GiB)'), or why there is none.
    capacity_text: str
    largest_batch: int | None
    reason: str = ""  # why there is no largest batch ('' when there is one)
    crossover: CrossoverPlace | None = None
    caveats: tuple[str, ...] = field(default=())
    label: str = ""  # how lines name the cell: 'cuda:0 (torch)', 'cuda:0 (torch, compiled)'
    # 'required': `fit` is of the memory each step must hold (REQUIRED_CASE_FIGURE) and the
    # peak's own fit and batch (a floor) are beside it; 'peak': `fit` is of the peak.
    basis: str = "peak"
    peak_fit: LineFit | None = None
    peak_batch: int | None = None

    @property
    def crossover_below(self) -> bool | None:
        """Whether the GPU is predicted to win at some batch that fits (None: not known)."""
        place = self.crossover
        if self.largest_batch is None or place is None:
            return None
        if place.kind == "gpu-always":
            return True
        if place.kind == "crossover" and place.batch is not None:
            return place.batch <= self.largest_batch
        if place.kind == "cpu-always" and place.searched_to is not None \
                and place.searched_to >= self.largest_batch:
            return False
        return None

    def line(self) -> str:
        """The answer in one line, as the terminal and summary.md print it."""
        head = self.label or f"{self.device} ({self.framework})"
        if self.fit is None:
            return f"{head}: no memory fit: {self.reason}"
        if not self.fit.predicts:  # its parts are no model: a falling line, one through 2
            return f"{head}: no prediction of the largest batch: {self.reason}"
        parts = f"{line_parts(self.fit)}, {fit_basis(self.fit)}"
        if self.largest_batch is None:
            return f"{head}: {self.basis} memory {parts}; no largest batch: {self.reason}"
        answer = (f"is ~{batch_text(self.largest_batch)}" if self.largest_batch > 0
                  else "is none: the fixed part alone does not fit")
        text = (f"{head}: the largest batch predicted to fit in {self.capacity_text} {answer} "
                f"({parts}){self.peak_clause()}")
        return text + "".join(f"; {note}" for note in self.caveats) + self.crossover_clause()

    def short_line(self) -> str:
        """The answer in one terminal line (compare's verdict): the figures without how they
        were measured, which summary.md's line() and method_clauses() (--details) say."""
        head = self.label or f"{self.device} ({self.framework})"
        if self.fit is None or not self.fit.predicts:
            return self.line()  # a reason, no figures to shorten
        if self.largest_batch is None:
            return f"{head}: {self.basis} memory {line_parts(self.fit)}; no largest batch: " \
                   f"{self.reason}"
        answer = (f"~{batch_text(self.largest_batch)}" if self.largest_batch > 0
                  else "none: the fixed part alone does not fit")
        capacity = self.capacity_text.split(" (", 1)[0]  # '79 GiB (of 80 GiB)' -> '79 GiB'
        text = (f"{head}: largest batch to fit in {capacity}: {answer} "
                f"({line_parts(self.fit).removeprefix('fixed ')})")
        if self.basis == "required":
            text += (f", the allocator's peak ~{batch_text(self.peak_batch)}: a floor"
                     if self.peak_batch is not None else ", the allocator's peak: none")
        notes = [SHORT_CAVEATS.get(note, note) for note in self.caveats]
        return text + "".join(f"; {note}" for note in notes) + self.crossover_clause()

    def method_clauses(self) -> list[str]:
        """How the fit was made, clause by clause, for --details: what was fitted, over which
        sizes, its residual, against what capacity; the peak's own fit where it is the floor."""
        if self.fit is None:
            return []
        clauses = [f"fitted: {self.figure}", sizes_text(self.fit), residual_text(self.fit),
                   f"against {self.capacity_text}"]
        if self.basis == "required" and self.peak_fit is not None:
            clauses.append(f"the allocator's peak (the libraries' workspace included): "
                           f"{line_parts(self.peak_fit)}")
        return clauses + [note for note in self.caveats if note in SHORT_CAVEATS]

    def peak_clause(self) -> str:
        """'; predicted from the memory the step must hold (...); the measured peak, the
        libraries' workspace included, gives ~87,200 (fixed 7.33 MiB + 945 KiB per sample): a
        floor', or '' for a prediction from the peak itself."""
        if self.basis != "required":
            return ""
        if self.peak_fit is None or self.peak_batch is None:
            peak = "the measured peak gives no prediction"
        else:
            peak = (f"the measured peak, the libraries' workspace included, gives "
                    f"~{batch_text(self.peak_batch)} ({line_parts(self.peak_fit)}): a floor")
        return f"; {REQUIRED_BASIS}; {peak}"

    def crossover_clause(self) -> str:
        """'; the predicted crossover (batch ~900) lies below it', or '' where none is known."""
        place, below = self.crossover, self.crossover_below
        if place is None or self.memory != "device":
            return ""
        if place.kind == "crossover":
            side = "below it" if below else "above it: the GPU cannot win below that batch"
            return f"; the predicted crossover (batch ~{two_digits(place.batch)}) lies {side}"
        if place.kind == "gpu-always":
            return "; the GPU is predicted faster at every batch"
        if place.kind == "cpu-always" and place.searched_to is not None:
            tail = ": the GPU cannot win below that batch" if below is False else ""
            return f"; no crossover predicted up to batch {two_digits(place.searched_to)}{tail}"
        return ""

    def __str__(self) -> str:
        return self.line()


def line_parts(fit: LineFit) -> str:
    """'fixed 7.33 MiB + 945 KiB per sample'."""
    return (f"fixed {format_bytes(fit.fixed_bytes)} + {format_bytes(fit.per_sample_bytes)} "
            "per sample")


def fit_basis(fit: LineFit) -> str:
    """'fitted over 3 sizes up to 512, largest residual 2.1 MiB' (or why no residual)."""
    return f"{sizes_text(fit)}, {residual_text(fit)}"


def sizes_text(fit: LineFit) -> str:
    """'fitted over 3 sizes up to 512'."""
    return f"fitted over {fit.sizes} sizes up to {int(fit.largest_size):,}"


def residual_text(fit: LineFit) -> str:
    """'largest residual 2.1 MiB', or why there is none."""
    if fit.max_residual_bytes is None:
        return "no residual (a line through 2 points)"
    return f"largest residual {format_bytes(abs(fit.max_residual_bytes))}"


def batch_text(batch: float) -> str:
    """A batch as printed: whole numbers with thousands separators; over 1,000 rounded down to
    3 significant digits (an extrapolated batch is not known to the sample, and rounding down
    keeps it a batch predicted to fit)."""
    whole = int(batch)
    if whole < 1000:
        return f"{whole:,}"
    step = 10 ** (len(str(whole)) - 3)
    return f"{whole // step * step:,}"


# --- from a run --------------------------------------------------------------------------------

def memory_fits(document: RunDocument, capacity_bytes: dict[str, float] | None = None
                ) -> list[MemoryFit]:
    """A MemoryFit per cell of a batch sweep that measured anything; [] for other sweeps.

    CAPACITY_BYTES: device -> bytes the cell may fill, overriding what the run recorded.
    """
    if document.sweep not in BATCH_SWEEPS:
        return []
    variants = {cell.variant for cell in document.cells}
    return [cell_fit(document, cell, (capacity_bytes or {}).get(cell.device),
                     label_variant=len(variants) > 1)
            for cell in document.cells if cell.cases]


def largest_batch_that_fits(document: RunDocument, framework: str, device: str,
                            variant: str, capacity_bytes: float | None = None
                            ) -> MemoryFit | None:
    """The memory fit of one cell of the run; None where the run has no such cell or its sweep
    is not a batch size. Its `largest_batch` is None where nothing can be predicted, and its
    `reason` says why. CAPACITY_BYTES overrides the capacity the run recorded."""
    if document.sweep not in BATCH_SWEEPS:
        return None
    for cell in document.cells:
        if (cell.framework, cell.device, cell.variant) == (framework, device, variant):
            return cell_fit(document, cell, capacity_bytes, label_variant=True)
    return None


def terminal_lines(document: RunDocument) -> list[str]:
    """Every GPU cell's fit (or why none), and a host fit where the run recorded per-case host
    peaks, one short line each, for compare's verdict (summary.md prints each fit's line():
    harness.report.views.memory); CPU cells without one stay quiet. Cells without a fit or a
    prediction for one reason share a line, said once per run: the demo's one batch size gave
    four equal lines, one per framework, and a model's two sizes three "no prediction" lines."""
    entries: list[str | tuple[str, str]] = []  # a line, or the (what, reason) of a group
    unfitted: dict[tuple[str, str], list[MemoryFit]] = {}
    for fit in memory_fits(document):
        if not shown(fit):
            continue
        if fit.fit is None or not fit.fit.predicts:
            key = (NO_FIT if fit.fit is None else NO_PREDICTION, fit.reason)
            if key not in unfitted:
                unfitted[key] = []
                entries.append(key)
            unfitted[key].append(fit)
        else:
            entries.append(fit.short_line())
    return [entry if isinstance(entry, str) else
            f"{heads_text(unfitted[entry])}: {entry[0]}: {entry[1]}" for entry in entries]


NO_FIT, NO_PREDICTION = "no memory fit", "no prediction of the largest batch"


def heads_text(fits: Sequence[MemoryFit]) -> str:
    """How a shared line names its cells: 'cuda:0 (torch, jax)', a device's frameworks
    together; a cell whose label says more (its variant) by that label."""
    by_device: dict[str, list[str]] = {}
    for fit in fits:
        if fit.label and fit.label != f"{fit.device} ({fit.framework})":
            by_device.setdefault(fit.label, [])
        else:
            by_device.setdefault(fit.device, []).append(fit.framework)
    return ", ".join(f"{device} ({', '.join(frameworks)})" if frameworks else device
                     for device, frameworks in by_device.items())


def method_lines(document: RunDocument) -> list[str]:
    """How each fit was made, for --details: what every fit shares said once ('memory fits,
    every cell: fitted over 3 sizes up to 512'), then each cell's own clauses."""
    clauses = {fit.label or f"{fit.device} ({fit.framework})": fit.method_clauses()
               for fit in memory_fits(document) if shown(fit) and fit.fit is not None}
    shared, own = said_once(clauses)
    lines = [f"memory fits, every cell: {'; '.join(shared)}"] if shared else []
    return lines + [f"memory fit, {label}: {'; '.join(parts)}" for label, parts in own.items()
                    if parts]


def shown(fit: MemoryFit) -> bool:
    """Whether a fit is worth a line: any measured GPU cell, a CPU cell only with a fit."""
    if fit.memory == "device":
        return bool(fit.points)
    return fit.fit is not None


def cell_fit(document: RunDocument, cell: CellResult, capacity_bytes: float | None = None,
             label_variant: bool = False) -> MemoryFit:
    """One cell's fit: its points, line, capacity, largest batch and crossover."""
    on_gpu = device_kind(cell.device) == "gpu"
    points = memory_points(document.sweep, cell, DEVICE_PEAK if on_gpu else HOST_CASE_FIGURE)
    required = memory_points(document.sweep, cell, REQUIRED_CASE_FIGURE) if on_gpu else []
    basis = "required" if fit_line(required) is not None else "peak"
    if capacity_bytes is not None:
        capacity: float | None = capacity_bytes
        capacity_text = f"{format_bytes(capacity_bytes)} (given)"
    else:
        capacity, capacity_text = (device_capacity(document, cell) if on_gpu
                                   else host_capacity(document, cell))
    peak_fit = fit_line(points)
    peak_batch, reason = largest_batch(peak_fit, capacity, capacity_text, points, on_gpu, cell)
    fit, largest = peak_fit, peak_batch
    if basis == "required":
        fit = fit_line(required)
        largest, reason = largest_batch(fit, capacity, capacity_text, required, on_gpu, cell)
    label = f"{cell.device} ({cell.framework}{', ' + cell.variant if label_variant else ''})"
    floor = (DEVICE_FLOOR,) if on_gpu and largest and basis == "peak" else ()
    return MemoryFit(
        run_id=document.run_id, machine=document.machine, framework=cell.framework,
        device=cell.device, variant=cell.variant, memory="device" if on_gpu else "host",
        figure=(REQUIRED_FIGURE if basis == "required" else device_figure(cell)) if on_gpu
        else "the worker's peak RSS per case",
        points=tuple(required if basis == "required" else points), fit=fit,
        capacity_bytes=capacity, capacity_text=capacity_text,
        largest_batch=largest, reason=reason,
        crossover=crossover_place(document, cell) if on_gpu else None,
        # The order matters to a peak (the allocator's cache), not to tensors counted per step.
        caveats=((*(order_caveats(document.sweep, cell) if basis == "peak" else ()), *floor)
                 if fit is not None else ()),
        label=label, basis=basis, peak_fit=peak_fit if basis == "required" else None,
        peak_batch=peak_batch if basis == "required" else None)


def batch_of(sweep: str, case: CaseResult) -> float | None:
    """The case's batch size, or None where it has no numeric one."""
    value = case.case.get(sweep)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value > 0 else None


# memory_points' FIGURE for the device peak: the case's own field (reserved where known, else
# allocated), not an extra.
DEVICE_PEAK = "peak_device_bytes"


def memory_points(sweep: str, cell: CellResult, figure: str) -> list[MemoryPoint]:
    """Each case's FIGURE in bytes at its batch size, where the case has a positive one: the
    device peak (DEVICE_PEAK), the memory its step must hold (REQUIRED_CASE_FIGURE) or its own
    host peak (HOST_CASE_FIGURE: none record one today), the last two case extras."""
    points = []
    for case in cell.cases:
        batch = batch_of(sweep, case)
        value = case.peak_device_bytes if figure == DEVICE_PEAK else case.extra.get(figure)
        if batch is not None and isinstance(value, (int, float)) \
                and not isinstance(value, bool) and value > 0:
            points.append(MemoryPoint(batch, float(value)))
    return points


REQUIRED_FIGURE = "the memory each case's step must hold (measured tensor by tensor)"


def device_figure(cell: CellResult) -> str:
    reserved = [case.peak_device_reserved_bytes for case in cell.cases]
    if any(reserved):
        return "the allocator's peak reserved memory per case"
    return "the allocator's peak allocated memory per case"


def device_capacity(document: RunDocument, cell: CellResult) -> tuple[float | None, str]:
    """(bytes the cell may fill, in words): the GPU's recorded total less the reserve."""
    host = cell.host or document.host
    totals = host.get("gpu_memory_bytes") if isinstance(host, dict) else None
    index = parse_cuda_index(cell.device)
    if not isinstance(totals, list) or index is None or index >= len(totals) \
            or not isinstance(totals[index], (int, float)):
        return None, "the GPU's total memory is not recorded in this run"
    total = float(totals[index])
    capacity = total - DEVICE_RESERVE_BYTES
    return capacity, f"{format_bytes(capacity)} (of {format_bytes(total)})"


def host_capacity(document: RunDocument, cell: CellResult) -> tuple[float | None, str]:
    """(the host's RAM, in words): other processes' memory is not subtracted, so this is an
    upper bound."""
    host = cell.host or document.host
    total = host.get("memory_bytes") if isinstance(host, dict) else None
    if not isinstance(total, (int, float)) or total <= 0:
        return None, "the host's memory is not recorded in this run"
    return float(total), f"{format_bytes(total)} of RAM"


def largest_batch(fit: LineFit | None, capacity: float | None, capacity_text: str,
                  points: Sequence[MemoryPoint], on_gpu: bool,
                  cell: CellResult) -> tuple[int | None, str]:
    """(floor((capacity - fixed) / per_sample), '') or (None, why not)."""
    if fit is None:
        return None, no_fit_reason(points, on_gpu, cell)
    if fit.per_sample_bytes <= 0:
        return None, (f"memory did not grow with the batch over the {fit.sizes} sizes run "
                      f"(up to {int(fit.largest_size):,}), so no per-sample cost can be "
                      "extrapolated")
    if not fit.predicts:
        return None, (f"a line through {fit.sizes} batch sizes (up to "
                      f"{int(fit.largest_size):,}) passes through each, so nothing tests it; "
                      f"{MIN_PREDICTION_SIZES} or more sizes make a prediction")
    if capacity is None:
        return None, capacity_text
    return max(0, math.floor((capacity - fit.fixed_bytes) / fit.per_sample_bytes)), ""


def no_fit_reason(points: Sequence[MemoryPoint], on_gpu: bool, cell: CellResult) -> str:
    if points:
        return (f"one batch size measured ({int(points[0].batch):,}); a fit needs two or "
                "more")
    if on_gpu:
        return "no case recorded its peak device memory"
    if cell.peak_host_memory_bytes is not None:
        return ("the host's peak RSS is one figure per cell (its worker ran every batch "
                "size), so no per-batch fit")
    return "no host memory recorded"


# A device fit extrapolates the workspaces the small batches got; near the limit cuDNN falls
# back to convolution algorithms with less (the small CNN on an H100: 628 KB per sample at
# batch 43,649, 226 KB from 87,298 up; predicted ~87,300, ran out at 349,192).
DEVICE_FLOOR = ("a floor, not the limit, where the framework trades workspace for memory near "
                "it (cuDNN convolutions: docs/methodology.md)")


ORDER_CAVEAT = ("the batch sizes did not run smallest first: a smaller batch's peak may hold "
                "memory a larger one left cached")
# The caveats as the terminal's short line says them (the long form goes to --details).
SHORT_CAVEATS = {DEVICE_FLOOR: "a floor (workspace)",
                 ORDER_CAVEAT: "sizes not run smallest first (cached memory)"}


def order_caveats(sweep: str, cell: CellResult) -> tuple[str, ...]:
    """A caveat where the sizes did not run smallest first: a later, smaller batch's peak can
    then hold memory a larger one left cached (a never-reset peak, the allocator's cache)."""
    batches = [batch for batch in (batch_of(sweep, case) for case in cell.cases)
               if batch is not None]
    if all(first < second for first, second in pairwise(batches)):
        return ()
    return (ORDER_CAVEAT,)


def crossover_place(document: RunDocument, cell: CellResult) -> CrossoverPlace | None:
    """The stored prediction of the cell's framework and variant on this machine, if any."""
    found = [record for record in document.predictions
             if record.get("framework") == cell.framework
             and record.get("variant") == cell.variant]
    same_machine = [record for record in found if record.get("machine") == document.machine]
    if not found or not (record := (same_machine or found)[0]).get("kind"):
        return None
    size = record.get("size")
    largest = largest_valid_batch(document, cell.framework, cell.variant)
    return CrossoverPlace(str(record["kind"]),
                          float(size) if isinstance(size, (int, float)) else None,
                          largest * SEARCH_FACTOR if largest is not None else None)


def largest_valid_batch(document: RunDocument, framework: str, variant: str) -> float | None:
    """The largest batch the framework's cells of this variant measured validly (the
    predictor's largest point: its search runs to SEARCH_FACTOR x this)."""
    batches = [batch_of(document.sweep, case) for cell in document.cells
               if (cell.framework, cell.variant) == (framework, variant)
               for case in cell.cases if case.status == Status.OK and case.samples]
    known = [batch for batch in batches if batch is not None]
    return max(known) if known else None

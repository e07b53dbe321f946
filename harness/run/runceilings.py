"""The ceilings a run judges its rates by: whether it has rates at all, the probe's largest
size, and per device the remembered probe, a probe now, or (a model file's first run on this
machine) the theoretical bound alone with the probe put off to the next run. RunSession
settles them before its first cell."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from harness.core import interrupt
from harness.core.settings import cache_folder
from harness.data.ceilings import Ceilings, DeviceCeiling
from harness.measure import bounds
from harness.run import memoryguard
from harness.run.context import RunContext
from harness.spec import Cell, WorkloadSpec


def has_rates(spec: WorkloadSpec) -> bool:
    """Whether the workload counts FLOPs or bytes, so the ceilings have a rate to judge: a probe
    costs seconds to a minute, and without a rate nothing is held against it."""
    return spec.flops is not None or spec.bytes_moved is not None or spec.counts_flops


def largest_square_matmul(spec: WorkloadSpec, cells: list[Cell]) -> int | None:
    """The n of a square matmul doing the run's largest call's FLOPs (2n^3), for the probe;
    None where it would not fit in memory."""
    if spec.flops is None:
        return None
    counts = [spec.flops(case) for cell in cells
              for case in spec.cases_for(cell.params, cell.variant)]
    largest = max((count for count in counts if count), default=None)
    n = round((largest / 2) ** (1 / 3)) if largest else None
    # Not a size whose three float32 matrices cannot fit: the probe tried n = 45000 on the
    # 24 GB VM (its case is refused by the memory guard anyway).
    return n if n is None or memoryguard.fits(3 * 4 * n**2) else None


# --quick probes two sizes only: the full ladder (up to n=8192) cost 85 s of a 120 s quick
# matmul run on a 2-core VM. The probe is a lower bound either way, and the machine's cached
# best probe (harness.measure.ceilings) still sets the ceilings.
QUICK_PROBE_SIZES = [1024, 2048]


def measure_ceilings(devices: list[str], largest_n: int | None, quick: bool = False,
                     probe: bool = False, context: RunContext | None = None,
                     defer_first: bool = False) -> Ceilings:
    """Peak FLOP/s and bandwidth per device, measured before the cells while the machine idles.

    Every run takes a device's remembered ceilings where this machine's fingerprint matches, the
    probe is younger than REMEMBER_FOR_DAYS and reached this run's sizes (harness.measure.ceilings
    .recall; `remembered` in its figures says so): a probe cost ~30 s of a 55 s run on an H200
    host. The others are probed, in one child, each with `probed_because`; PROBE
    (--probe-ceilings) probes every device. CONTEXT: the run's (its cache folder, its warm
    processes); None: this process's environment's settings, made quick by QUICK.
    DEFER_FIRST (`compare --model`): a device this machine never probed, whose rates a
    theoretical bound still judges, is not probed before the cells (~13 s of a 19 s first run
    on a 2-core VM): its entry holds the bound alone and says why (deferred_entry); the next
    run probes it.
    """
    from harness.measure import ceilings
    from harness.run import ceiling_probe

    context = RunContext.from_environment(quick) if context is None else context
    folder = cache_folder(context.settings)
    sizes = QUICK_PROBE_SIZES if quick else ceilings.probe_sizes(largest_n)
    fingerprint = ceilings.probe_fingerprint()
    recalled = {device: ceilings.Recall(None, "--probe-ceilings") if probe
                else ceilings.recall(device, sizes, fingerprint, folder=folder)
                for device in devices}
    figures = {device: ceilings.with_bounds(known.figures) for device, known in recalled.items()
               if known.figures is not None}
    if defer_first and not probe:
        figures.update(deferred_entries([device for device, known in recalled.items()
                                         if known.never_probed], fingerprint, folder))
    to_probe = [device for device in devices if device not in figures]
    if to_probe and interrupt.requested() is None:  # the session shows it as its phase
        probed = ceiling_probe.measure_all(to_probe, largest_n, sizes=sizes,
                                           fingerprint=fingerprint, context=context)
        figures.update({device: replace(probed[device], probed_because=recalled[device].why_not)
                        for device in to_probe})
    return Ceilings({device: figures[device] for device in devices if device in figures})


# Why a deferred device has no probe, in run.json and on the ceilings line.
DEFERRED_WHY = ("this machine's first run of a model file: the probe waits for the next run; "
                "rates are checked against the theoretical peak only")


def deferred_entries(devices: list[str], fingerprint: Mapping[str, object],
                     folder: Path) -> dict[str, DeviceCeiling]:
    """The machine's bound for each of DEVICES never probed here and not deferred before,
    marked deferred; a device without a bound (a GPU the datasheet table lacks) is left out,
    to be probed now, so no rate goes unjudged."""
    from harness.measure import ceilings

    fresh = [device for device in devices
             if not ceilings.deferred_before(device, fingerprint, folder)]
    found = bounds.unprobed_ceilings(fresh, cache=folder).devices if fresh else {}
    for device in found:
        ceilings.mark_deferred(device, fingerprint, folder)
    return {device: replace(entry, deferred=DEFERRED_WHY) for device, entry in found.items()}

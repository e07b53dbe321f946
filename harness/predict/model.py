"""The GPU step predicted from a CPU run's features and a device profile (issue 51, part 3).

Two queues. The host issues the step: it does the host work the step did here (its Python,
autograd, each op's dispatch) without the arithmetic, which moves to the device, and each
kernel costs it a launch. The device runs the kernels in order, each no faster than the
kernel floor, the profile's rate for its kind, size and dtype, or its bandwidth. Copies and
sync points are added where the two queues cannot overlap.

    host_here_s   = sum over the step's ops of min(host_s, tiny_s)
    ops_here      = host_here_s / tiny_s                  (the step's host work in tiny ops)
    host_python_s = ops_here x op_host_s                  (host 'profiled'; 0 under a CUDA graph)
                    host_here_s                           (host 'this')
    op_host_s     = RECORDED_OP_DISPATCHES x host.dispatch(add_)   (the profiled host's tiny op)
    host_ops_s    = (launches x launch_s + allocations x allocation_s) x ops_scale
                    (+ one launch for a pinned copy; under a CUDA graph: one replay, graph_fixed_s)
    host_step_s   = optimizer steps x STEP_OVERHEAD_DISPATCHES x host.dispatch(add_) x ops_scale
                    (0 under a CUDA graph)
    host_s   = host_python_s + host_ops_s + host_step_s
    device_s = sum over kernels of max(floor_s, work / rate(entry, work)) + device_copy_s
    seconds  = max(host_s, device_s) + copy_blocking_s + sync_s
    regime   = launch-bound where host_s >= device_s, else "compute-bound"

What that assumes, said once:
- **A simple pipeline.** The host runs ahead of the device and the step repeats, so in the
  steady state the slower queue sets the pace and the faster one hides behind it: the step
  is the larger total, not the sum. The first kernel's wait and the last kernel's tail are
  not counted (one kernel each: within the floor's error).
- **What does not overlap.** A pageable host->device copy blocks the host until the copy is
  done, and the copy waits for the kernels queued before it, so it is paid on top of both
  queues (copy_blocking_s = latency + bytes / bandwidth, transfer.h2d.pageable). A pinned
  copy (variant `pinned`) is queued like a kernel: on the device queue, one launch on the
  host. Each sync point in the user's code (features.user_sync_count: `.item()`, a print)
  drains the queue and costs a round trip (device.sync after one kernel); reads inside torch
  (Adam's step counter on the host) wait on nothing. The queue drained at a sync is taken
  to be the pipeline's slack, already in max(host_s, device_s).
- **Host costs.** A kernel's launch is host.launch_ahead (the host's cost of a tiny in-place
  op while the device sleeps) at the queue depth nearest the step's launch count; an op that
  allocates its output adds host.dispatch's out-of-place minus in-place difference. Every
  op that does work is charged the same: the profile measures a tiny add, so a matmul's
  heavier host path (cuBLAS heuristics) is not in it. The host work here (host_here_s) is
  each op's host time capped at tiny_s, the median host time of the step's ops that do work
  and move at most TINY_BYTES: what running an op costs this CPU with no arithmetic to
  speak of. The cap removes each op's arithmetic (it moves to the device), and with it a
  recording pass slowed in one op by a busy machine. An op's host time is timed inside
  the recording's dispatch mode, from Python: it holds the Python around the op, which is
  why the step's time outside its ops (features' python_s, a difference of two
  timings) is not added: at small batches the ops' recorded time already exceeds the step's
  wall (python_s reads 0), and at large ones the difference follows the arithmetic's
  pass-to-pass spread (the tiny MLP below at batch 512 on the 2-core VM: ops 2.5-10.6 ms in
  four passes of a 6.4-10.5 ms step). It keeps this CPU's own dispatch of each op, which
  the GPU's launch cost also holds: an upper bound by about 1-3 us an op.
- **Which host.** `profiled`: the profiled machine drives its GPU (a cloud GPU as rented):
  launch costs as profiled, and the step's host work priced per op at the profiled host's
  cost (model 4). This CPU's recording gives the step's host work in tiny ops (ops_here =
  host_here_s / tiny_s: each op's share of a tiny op's cost, a ratio of two times taken on
  one CPU in one pass, so this CPU's speed and its load at the time cancel), and each costs
  op_host_s, RECORDED_OP_DISPATCHES of the profile's tiny in-place dispatches: what an op
  recorded the same way cost the lent GPU hosts' own CPUs (benchmarks/predictlab/fitting.py
  recorded_op_dispatches, from the validation's rows; not fitted to a GPU step). Until
  model 3 this CPU's host work was rescaled by the two hosts' host.python loops, which did
  not transfer: the loop read 3.0-3.2 or 5-6.2 ms on one lent host (two levels), and from
  another CPU the step read up to 40% low (docs/predict.md, "From a foreign CPU").
  `this`: this CPU drives that GPU: launch costs rescaled by the host.numpy loops
  (ops_scale = this / profiled: numpy's per-call cost is the C-extension dispatch a launch
  is made of), the host work as measured here (python_scale 1). The choice and both
  scales are recorded (python_scale: host_python_s / host_here_s).
- **The training step's fixed host work.** On a GPU a training step costs the host more
  than its ops' dispatch and launches: the backward is handed to the device's autograd
  thread and back, and the optimizer's foreach path groups its tensors and computes its
  bias corrections in Python. The CPU run cannot show it (a CPU's backward runs on the
  calling thread; its optimizers loop per tensor) and no profile row measures it, so it is
  the model's one fitted constant: STEP_OVERHEAD_DISPATCHES tiny in-place dispatches of the
  profiled host per optimizer step (a profiler range that does work), fitted on the
  validation's measured steps and checked leaving each model out (harness/predict/
  fitting.py). Without it the small steps read 0.3-1 ms low on both lent GPUs.
- **Kernels** (which ones, per variant): harness/predict/kernels.py. Rates by size:
  harness/predict/rates.py. Under a CUDA graph the floor is the graph's replay cost per
  kernel (device.graph_replay's slope), the host pays one replay, and the step's Python
  does not run; copies and sync points stay as written.

"unknown" (status, with the reason) where the CPU ran a recurrent layer step by step
(ATen's cell decomposition, kernels.decomposed_cells: a GPU runs it as one cuDNN call, which
no profile row prices; the validation's GRU read 4-5x high), where the step holds a fused
recurrent layer (kernels.fused_recurrent_ops: an nn.LSTM oneDNN ran; the same cuDNN call,
priced at the matmul rate it read 0.6-1.0x and its interval held the step in under half the
cells), where the profile lacks a row the step needs, where
fewer than MIN_MAPPED_SHARE of the ops that do work map to a profile row, or where the
unmapped ops took more than MAX_UNMAPPED_HOST_SHARE of the ops' host time here. Why those:
an unmapped op is charged a launch and a kernel floor, which is right for a cheap op and
wrong by any amount for a heavy one (an FFT, a solve); the validation targets 25% error, so
the unmapped ops together may move the step by a few percent at most: 5% of the launches,
and 5% of the host time here (on a CPU an op's host time includes its arithmetic, so a
heavy unmapped op shows there).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness.core.diagnosis import DiagnosisKind
from harness.data.gpustep import PREDICTED, Prediction, combine, host_seconds
from harness.data.serial import JsonValue
from harness.predict.features import StepFeatures
from harness.predict.kernels import (
    Kernel,
    Plan,
    Variant,
    decomposed_cells,
    fused_recurrent_ops,
    optimizer_steps,
    plan_kernels,
)
from harness.predict.profile import Profile
from harness.predict.rates import (
    HostSpeed,
    MissingRow,
    allocation_seconds,
    dispatch_in_place,
    graph_replay,
    kernel_floor,
    launch_seconds,
    link,
    profiled_host_speed,
    rate_at,
    rate_points,
    round_trip,
)

MIN_MAPPED_SHARE = 0.95
MAX_UNMAPPED_HOST_SHARE = 0.05
HOSTS = ("profiled", "this")
# An op moving at most 64 KiB does next to no arithmetic on a CPU (a few microseconds at
# any bandwidth): its host time here is the CPU's cost of running an op at all.
TINY_BYTES = 64 * 1024
LAUNCH_BOUND, COMPUTE_BOUND = DiagnosisKind.LAUNCH, DiagnosisKind.COMPUTE
# The fixed host work of one training step on a GPU beyond its ops (module docstring, "The
# training step's fixed host work"), in tiny in-place dispatches (host.dispatch add_) of
# the profiled host. Fitted: the one constant of the model, median-unbiased over the
# validation's cells of both lent GPUs, and checked leaving each model out
# (benchmarks/predictlab/validation.py left_out_lines; docs/predict.md).
STEP_OVERHEAD_DISPATCHES = 100.0
# What one tiny op recorded by the features' dispatch mode costs the lent GPU hosts' CPUs,
# in their profile's tiny in-place dispatches (host.dispatch add_): the median over the
# validation's cells of every lending of tiny_op_s_here / add_ (fitting.recorded_op_dispatches;
# 10th-90th percentile 1.2-3.0: the hosts' two speeds). Measured on CPU runs, not fitted to
# a GPU step.
RECORDED_OP_DISPATCHES = 2.23
# A step whose CPU run decomposed a recurrent layer into more time steps than this is
# "unknown" (module docstring): one step's cell could be a user's own loop.
MAX_DECOMPOSED_CELLS = 1
# Keras on torch runs torch's ops from Keras' layers, fit loop and optimizer, whose Python
# between the ops is host work a GPU step pays too: its features' outside_ops_s (the time
# between the recorded ops, less the recorder's own) is added to the host work
# (host_outside_ops_s), where a plain torch step's is not (module docstring, "Host costs").
KERAS_TORCH = "keras-torch"


def profile_identity(profile: Profile, name: str = "") -> dict[str, JsonValue]:
    """What a prediction names of the profile it used: enough to tell two profiles apart."""
    software = {key: profile.software.get(key) for key in ("torch", "cuda", "cudnn", "driver")}
    return {"name": name, "identity": profile.identity(),
            "device": profile.device.get("description") or profile.device.get("name"),
            "created": profile.created, "schema_version": profile.schema_version,
            "quick": profile.quick, "framework": profile.framework, **software,
            "host_cpu": profile.host.get("cpu_model")}


@dataclass(frozen=True)
class Scales:
    """How host costs move from the machine they were measured on to the host chosen;
    python None: the host work priced per op at the profiled host's cost (torch_host_terms)."""

    ops: float
    python: float | None
    note: str = ""


def host_scales(profile: Profile, host: str, this_host: HostSpeed | None) -> Scales:
    """(ops_scale, python_scale) for HOST (module docstring, "Which host")."""
    if host == "profiled":
        return Scales(1.0, None)  # this CPU's speed cancels out of ops_here: not needed
    if this_host is None:
        raise MissingRow("host 'this' needs this machine's host speed (harness/predict/"
                         "hostspeed.py's loops) to rescale the profile's launch costs")
    profiled = profiled_host_speed(profile)
    if this_host.same_host_as(profiled):
        return Scales(1.0, 1.0, f"this CPU is the profiled host's model ({profiled.cpu_model}):"
                                " host costs not rescaled (the loops moved up to 1.6x between "
                                "two runs of one machine)")
    return Scales(this_host.numpy_loop_s / profiled.numpy_loop_s, 1.0)


def python_scale(scales: Scales, profile: Profile, here: dict[str, float]) -> dict[str, float]:
    """python_scale (host_python_s / host_here_s) and, priced per op, ops_here and op_host_s
    (module docstring): the profiled host's cost of a tiny op over this CPU's."""
    if scales.python is not None:
        return {"python_scale": scales.python}
    op_host_s = RECORDED_OP_DISPATCHES * dispatch_in_place(profile)
    tiny_s = here["tiny_op_s_here"]
    return {"op_host_s": op_host_s,
            "ops_here": here["host_here_s"] / tiny_s if tiny_s > 0 else 0.0,
            "python_scale": op_host_s / tiny_s if tiny_s > 0 else 0.0}


def device_seconds(kernels: list[Kernel], profile: Profile, floor_s: float,
                   launch_s: float) -> dict[str, float]:
    """Device seconds per profile entry: each kernel max(floor, work / rate at its size)."""
    by_entry: dict[str, float] = {}
    points: dict[str, list[tuple[float, float]]] = {}
    for kernel in kernels:
        if kernel.entry not in points:
            points[kernel.entry] = rate_points(profile, kernel.entry, launch_s)
        seconds = floor_s
        if kernel.work > 0:
            seconds = max(floor_s, kernel.work / rate_at(points[kernel.entry], kernel.work))
        by_entry[kernel.entry] = by_entry.get(kernel.entry, 0.0) + seconds
    return by_entry


def host_here(features: StepFeatures) -> dict[str, float]:
    """This CPU's host work for the step without its arithmetic (module docstring): each
    op's host time capped at tiny_s, the median host time of the step's ops that do work
    and move at most TINY_BYTES (what running an op costs this CPU, no arithmetic in it)."""
    working = [op for op in features.ops if op.kernel and op.kind != "host_read"]
    small = sorted(op.host_s for op in working if op.bytes <= TINY_BYTES) or sorted(
        op.host_s for op in working)
    tiny_s = small[len(small) // 2] if small else 0.0
    return {"tiny_op_s_here": tiny_s,
            "host_here_s": sum(min(op.host_s, tiny_s) for op in features.ops)}


def torch_host_terms(plan: Plan, features: StepFeatures, profile: Profile, variant: Variant,
               scales: Scales) -> dict[str, float]:
    """The host queue's terms (module docstring) and the constants they read."""
    launches = sum(kernel.launches for kernel in plan.kernels)
    allocations = sum(kernel.allocates and kernel.launches > 0 for kernel in plan.kernels)
    launch_s, depth = launch_seconds(profile, launches)
    allocation_s = allocation_seconds(profile)
    steps = optimizer_steps(features.ops)
    here = host_here(features)
    terms = {"launches": float(launches), "allocations": float(allocations),
             "launch_s": launch_s, "launch_queue_depth": float(depth),
             "allocation_s": allocation_s, "ops_scale": scales.ops,
             "optimizer_steps": float(steps),
             "step_overhead_s": STEP_OVERHEAD_DISPATCHES * dispatch_in_place(profile),
             **here, **python_scale(scales, profile, here)}
    if variant.graph:
        replay = graph_replay(profile)
        terms.update(graph_fixed_s=replay.fixed_s, graph_per_kernel_s=replay.per_kernel_s,
                     host_python_s=0.0, host_ops_s=replay.fixed_s * scales.ops,
                     host_step_s=0.0)
    else:
        if features.framework == KERAS_TORCH:  # Keras' own Python between the ops
            terms["host_outside_ops_s"] = features.outside_ops_s or 0.0
        terms.update(host_python_s=(terms["host_here_s"] + terms.get("host_outside_ops_s", 0.0))
                     * terms["python_scale"],
                     host_ops_s=(launches * launch_s + allocations * allocation_s)
                     * scales.ops,
                     host_step_s=steps * terms["step_overhead_s"] * scales.ops)
    return terms


def copy_terms(features: StepFeatures, profile: Profile, variant: Variant,
               terms: dict[str, float]) -> dict[str, float]:
    """Host->device copies: pageable blocks both queues, pinned rides the device queue."""
    moved = 0 if variant.resident else int(features.h2d_bytes or 0)
    found = {"h2d_bytes": float(moved), "copy_blocking_s": 0.0, "device_copy_s": 0.0}
    if moved:
        path = link(profile, "pinned" if variant.pinned else "pageable")
        found.update(h2d_latency_s=path.latency_s, h2d_bytes_per_s=path.bytes_per_s)
        if variant.pinned:
            found["device_copy_s"] = path.seconds(moved)
            terms["host_ops_s"] += terms["launch_s"] * terms["ops_scale"]
        else:
            found["copy_blocking_s"] = path.seconds(moved)
    return found


def coverage_problem(plan: Plan, features: StepFeatures) -> str:
    """Why the op coverage is too low to predict (module docstring), '' where it is not."""
    if not features.kernel_ops:
        return "the step has no op that does work"
    cells = decomposed_cells(features.ops)
    if cells > MAX_DECOMPOSED_CELLS:
        return (f"the CPU ran a recurrent layer step by step (ATen's cell decomposition: "
                f"{cells} gate splits, aten.unsafe_split with aten.sigmoid_; nn.GRU on a "
                "CPU), which a GPU runs as one fused cuDNN call the profile does not price")
    recurrent = fused_recurrent_ops(features.ops)
    if recurrent:
        return (f"a fused recurrent layer ({', '.join(recurrent)}): the profile has no row for "
                "cuDNN's RNN call, and the validation read LSTM steps 0.6-1.0x of the "
                "measured GPU step (docs/predict.md)")
    if not plan.unmapped:
        return ""
    names = ", ".join(f"{name} x{count}" for name, count in sorted(plan.unmapped.items()))
    share = 1 - sum(plan.unmapped.values()) / features.kernel_ops
    host_share = plan.unmapped_host_s / features.host_s_ops if features.host_s_ops else 0.0
    if share < MIN_MAPPED_SHARE:
        return (f"only {share:.0%} of the ops that do work map to a profile row (at least "
                f"{MIN_MAPPED_SHARE:.0%} needed); unmapped: {names}")
    if host_share > MAX_UNMAPPED_HOST_SHARE:
        return (f"unmapped ops took {host_share:.0%} of the ops' host time here (at most "
                f"{MAX_UNMAPPED_HOST_SHARE:.0%} allowed: they may be heavy); unmapped: {names}")
    return ""


def predict(features: StepFeatures, profile: Profile, *, host: str = "profiled",
            variant: str = "as-written", this_host: HostSpeed | None = None,
            profile_name: str = "") -> Prediction:
    """The GPU step of FEATURES on PROFILE's device (module docstring). HOST: 'profiled'
    or 'this'; VARIANT: 'as-written' or names joined by '+' (kernels.predicted_variants); THIS_HOST:
    this machine's host speed (needed for 'this'; recorded, not used, for 'profiled')."""
    if host not in HOSTS:
        raise ValueError(f"host must be one of {HOSTS}, not {host!r}")
    chosen = Variant.parse(variant)
    base = Prediction(framework=features.framework or "torch",
                      profile=profile_identity(profile, profile_name), host_choice=host,
                      this_host=this_host.record() if this_host else {}, variant=chosen.name)
    try:
        scales = host_scales(profile, host, this_host)
        plan = plan_kernels(features, profile, chosen)
        problem = coverage_problem(plan, features)
        if problem:
            return replace(base, reason=problem, unmapped=dict(plan.unmapped))
        terms = torch_host_terms(plan, features, profile, chosen, scales)
        terms.update(copy_terms(features, profile, chosen, terms))
        floor_s = terms["graph_per_kernel_s"] if chosen.graph else kernel_floor(profile)
        by_entry = device_seconds(plan.kernels, profile, floor_s, terms["launch_s"])
        terms.update(floor_s=floor_s, round_trip_s=round_trip(profile))
    except MissingRow as why:
        return replace(base, reason=str(why))
    terms.update(kernels=float(len(plan.kernels)), device_kernels_s=sum(by_entry.values()),
                 syncs=float(features.user_sync_count))
    terms["sync_s"] = terms["syncs"] * terms["round_trip_s"]
    host_s = host_seconds(terms)
    device_s = terms["device_kernels_s"] + terms["device_copy_s"]
    # each once: the plan notes an optimizer region per step (4 steps: 4 equal notes)
    notes = list(dict.fromkeys([*plan.notes, *([scales.note] if scales.note else [])]))
    return replace(base, status=PREDICTED, seconds=combine(terms), host_s=host_s,
                   device_s=device_s, regime=LAUNCH_BOUND if host_s >= device_s
                   else COMPUTE_BOUND, mapped_share=1 - sum(plan.unmapped.values())
                   / features.kernel_ops, unmapped=dict(plan.unmapped), terms=terms,
                   device_by_entry=by_entry, notes=notes)


def recompute(stored: Prediction, features: StepFeatures, profile: Profile) -> Prediction:
    """STORED predicted again from the features and profile it names, with its own choices
    (host, variant, this host's speed): a check compares the two."""
    this_host = HostSpeed.from_record(stored.this_host) if stored.this_host else None
    return predict(features, profile, host=stored.host_choice, variant=stored.variant,
                   this_host=this_host, profile_name=str(stored.profile.get("name") or ""))

"""The GPU step of a jitted JAX step (jax, keras-jax), from its features and a profile's rows.

A jitted step is one executable per step. The host dispatches it once; the device runs its
kernels in order:

    host_here_s   = loop_host_here_s + max(0, dispatch_here_s - tiny_dispatch_here_s)
    host_python_s = host_here_s x python_scale     (this CPU's work, as model.py rescales it)
    host_ops_s    = dispatches x jax.dispatch x ops_scale
    device_s      = sum over kernels of max(floor_s, flops / matmul or conv rate,
                                            bytes / bandwidth) + device_copy_s
    seconds       = max(host_python_s + host_ops_s, device_s) + copy_blocking_s

- `jax.dispatch` (the profile's JAX row): one tiny executable called back to back on the
  profiled host, what one dispatch costs there; `dispatch_here_s - tiny_dispatch_here_s`:
  what this step's arguments add to a dispatch here (flattening its pytree, checking its
  buffers); `loop_host_here_s`: the user's loop around the call here (gathering and placing
  a batch, Keras' fit loop), timed with the executable stubbed out.
- `floor_s`: the slope of `jax.kernel_floor` over the kernels its rows' programs hold (the
  cost of one more kernel inside an executable, back to back, on that GPU).
- Rates: a matmul kernel (a dot, or a fusion holding one) at `matmul.*` by its own FLOPs
  (rates.rate_at: the profile's rows interpolated by work per call, so each gemm's shape
  picks its own size bucket), float32 at `matmul.fp32` where it asked for full precision
  (Precision.HIGHEST, as the harness's JAX and Keras-on-JAX cells do) and at `matmul.tf32`
  otherwise (XLA's GPU default); convolutions likewise at `conv.*`; every other kernel by its
  bytes at `reduction.sum` (reductions) or `elementwise.add`. On a CPU profile float32 is
  fp32 (no TF32 there).
- Copies: a batch placed from host memory each step (h2d_bytes) is a pageable copy that
  blocks both queues, as in model.py (copy_blocking_s; none on a CPU profile: the batch
  is in the CPU's memory already); no sync points (a jitted step reads
  nothing back; the harness's JAX steps keep their loss on the device).

The kernel count is the CPU's HLO's (hlo.py: an upper bound on the GPU's), said in the
notes. "unknown", with the reason, where the profile has no JAX row, where the program holds
a loop (while / conditional: its trip count is not in the text), or where it has no kernel.
"""

from __future__ import annotations

from dataclasses import replace

from harness.data.gpustep import MODEL_VERSION, PREDICTED, Prediction, combine, host_seconds
from harness.data.noprofile import NO_TENSORFLOW_PROFILE, NoProfileFeatures
from harness.data.serial import JsonValue
from harness.predict.features import StepFeatures
from harness.predict.jaxfeatures import (
    JAX_FRAMEWORKS,
    Features,
    JaxFeatures,
    KernelRecord,
)
from harness.predict.model import (
    COMPUTE_BOUND,
    HOSTS,
    LAUNCH_BOUND,
    Scales,
    host_scales,
    predict,
    profile_identity,
    recompute,
)
from harness.predict.profile import NO_JAX_ROW, Profile
from harness.predict.rates import (
    HostSpeed,
    MissingRow,
    dispatch_in_place,
    launch_seconds,
    link,
    median,
    present,
    profiled_host_speed,
    rate_at,
    rate_points,
)

# 1: the first JAX model (this module's docstring).
JAX_MODEL_VERSION = 1


def jax_identity(profile: Profile, name: str = "") -> dict[str, JsonValue]:
    """What a JAX prediction names of its profile: the profile's identity and its JAX rows'
    versions and date (rows made again change it, so an older prediction is unverifiable)."""
    return {**profile_identity(profile, name),
            **{key: profile.software.get(key) for key in ("jax", "jaxlib", "jax_profiled")}}


def prediction_identity(profile: Profile, name: str, framework: str) -> dict[str, JsonValue]:
    """The identity a prediction of FRAMEWORK's step names (a check compares it)."""
    return jax_identity(profile, name) if framework in JAX_FRAMEWORKS else \
        profile_identity(profile, name)


def model_version(framework: str) -> int:
    """The model version this harness makes FRAMEWORK's predictions with."""
    return JAX_MODEL_VERSION if framework in JAX_FRAMEWORKS else MODEL_VERSION


def floor_seconds(profile: Profile) -> float:
    """jax.kernel_floor's slope per kernel, between its rows of fewest and most kernels (each
    row's count as its own HLO says, `hlo_kernels`, else the chain's length)."""
    def count(row_params: dict[str, JsonValue]) -> int:
        return int(str(row_params.get("hlo_kernels") or row_params.get("kernels") or 0))

    rows = sorted(present(profile, "jax.kernel_floor").rows, key=lambda row: count(row.params))
    if len(rows) < 2 or count(rows[-1].params) <= count(rows[0].params):
        raise MissingRow("the profile's jax.kernel_floor needs two chain lengths")
    rise = median(rows[-1], "jax.kernel_floor") - median(rows[0], "jax.kernel_floor")
    return max(0.0, rise / (count(rows[-1].params) - count(rows[0].params)))


def jax_rows(profile: Profile) -> tuple[float, float]:
    """(one dispatch's seconds, one kernel's floor) from the profile's JAX rows."""
    if any(profile.entries[name].absent for name in ("jax.dispatch", "jax.kernel_floor")):
        raise MissingRow(NO_JAX_ROW)
    dispatch = median(present(profile, "jax.dispatch").rows[0], "jax.dispatch")
    return dispatch, floor_seconds(profile)


def rate_entry(kernel: KernelRecord, on_cpu: bool) -> str:
    """The profile entry KERNEL runs at (module docstring, "Rates")."""
    if kernel.kind in ("matmul", "conv"):
        family = "matmul" if kernel.kind == "matmul" else "conv"
        if kernel.dtype == "f32":
            return f"{family}.fp32" if kernel.highest or on_cpu else f"{family}.tf32"
        if kernel.dtype == "f16" and family == "matmul":
            return "matmul.fp16"
        return f"{family}.bf16" if kernel.dtype in ("bf16", "f16") else f"{family}.fp32"
    return "reduction.sum" if kernel.kind == "reduction" else "elementwise.add"


def row_launch_s(profile: Profile) -> float:
    """A host launch of the profile's torch rows (which rows time the host: rates.py)."""
    try:
        return launch_seconds(profile, 100)[0]
    except MissingRow:
        return dispatch_in_place(profile)  # a CPU profile: no launch ahead of a device


def device_terms(features: JaxFeatures, profile: Profile, floor_s: float,
                 ) -> dict[str, float]:
    """Device seconds per profile entry: each kernel max(floor, work / rate at its size)."""
    on_cpu = profile.device.get("type") == "cpu"
    launch_s = row_launch_s(profile)
    by_entry: dict[str, float] = {}
    points: dict[str, list[tuple[float, float]]] = {}
    for kernel in features.kernels:
        entry = rate_entry(kernel, on_cpu)
        if entry not in points:
            points[entry] = rate_points(profile, entry, launch_s)
        work = kernel.flops if kernel.kind in ("matmul", "conv") else kernel.bytes
        seconds = max(floor_s, work / rate_at(points[entry], work)) if work > 0 else floor_s
        by_entry[entry] = by_entry.get(entry, 0.0) + seconds
    return by_entry


def why_unknown(features: JaxFeatures) -> str:
    if features.loops:
        return (f"the step's program holds {features.loops} loop(s) (while / conditional) "
                "whose trip count its HLO text does not give")
    if not features.kernels:
        return "the step's program has no kernel"
    return ""


def jax_scales(profile: Profile, host: str, this_host: HostSpeed | None) -> Scales:
    """torch's host scales, except that host 'profiled' rescales a JAX step's host time by the
    Python loops' ratio: torch's model 4 prices recorded torch ops at the profiled host's tiny
    op (model.python_scale), and a jitted step records no torch ops to count."""
    scales = host_scales(profile, host, this_host)
    if scales.python is not None:
        return scales
    if this_host is None:
        return Scales(scales.ops, 1.0, "this machine's host speed not given: its Python time "
                                       "is used as measured here, not rescaled")
    profiled = profiled_host_speed(profile)
    if this_host.same_host_as(profiled):
        return Scales(scales.ops, 1.0, f"this CPU is the profiled host's model "
                                       f"({profiled.cpu_model}): host costs not rescaled")
    return Scales(scales.ops, profiled.python_loop_s / this_host.python_loop_s,
                  "JAX host time rescaled by the Python loops' ratio (not validated from a "
                  "foreign CPU)")


def host_terms(features: JaxFeatures, profile: Profile, host: str,
               this_host: HostSpeed | None) -> tuple[dict[str, float], str]:
    """The host queue's terms (module docstring) and the rescale's note."""
    dispatch_s, floor_s = jax_rows(profile)
    scales = jax_scales(profile, host, this_host)
    arguments_here = max(0.0, (features.dispatch_here_s or 0.0)
                         - (features.tiny_dispatch_here_s or 0.0))
    host_here = (features.loop_host_here_s or 0.0) + arguments_here
    python = 1.0 if scales.python is None else scales.python  # jax_scales always sets it
    return {"dispatches": float(features.dispatches), "jax_dispatch_s": dispatch_s,
            "floor_s": floor_s, "ops_scale": scales.ops, "python_scale": python,
            "arguments_here_s": arguments_here, "host_here_s": host_here,
            "host_python_s": host_here * python,
            "host_ops_s": features.dispatches * dispatch_s * scales.ops,
            "host_step_s": 0.0}, scales.note


def predict_jax(features: JaxFeatures, profile: Profile, *, host: str = "profiled",
                this_host: HostSpeed | None = None, profile_name: str = "") -> Prediction:
    """The GPU step of a jitted JAX step on PROFILE's device (module docstring)."""
    if host not in HOSTS:
        raise ValueError(f"host must be one of {HOSTS}, not {host!r}")
    base = Prediction(model_version=JAX_MODEL_VERSION, framework=features.framework,
                      profile=jax_identity(profile, profile_name), host_choice=host,
                      this_host=this_host.record() if this_host else {})
    problem = why_unknown(features)
    if problem:
        return replace(base, reason=problem)
    try:
        terms, note = host_terms(features, profile, host, this_host)
        by_entry = device_terms(features, profile, terms["floor_s"])
        on_cpu = profile.device.get("type") == "cpu"  # the batch is in the device's memory
        moved = 0 if on_cpu else int(features.h2d_bytes or 0)
        path = link(profile, "pageable") if moved else None
    except MissingRow as why:
        return replace(base, reason=str(why))
    terms.update(kernels=float(len(features.kernels)), device_kernels_s=sum(by_entry.values()),
                 device_copy_s=0.0, h2d_bytes=float(moved), syncs=0.0, sync_s=0.0,
                 copy_blocking_s=path.seconds(moved) if path else 0.0)
    host_s, device_s = host_seconds(terms), terms["device_kernels_s"]
    notes = [*features.notes, *([note] if note else [])]
    return replace(base, status=PREDICTED, seconds=combine(terms), host_s=host_s,
                   device_s=device_s, regime=LAUNCH_BOUND if host_s >= device_s
                   else COMPUTE_BOUND, mapped_share=1.0, terms=terms,
                   device_by_entry=by_entry, notes=list(dict.fromkeys(notes)))


def predict_any(features: Features, profile: Profile, *, host: str = "profiled",
                this_host: HostSpeed | None = None, profile_name: str = "") -> Prediction:
    """The prediction of any framework's stored features: torch's and Keras-on-torch's by
    model.py, a jitted JAX step's here, a TensorFlow step's "unknown" (no profile)."""
    if isinstance(features, JaxFeatures):
        return predict_jax(features, profile, host=host, this_host=this_host,
                           profile_name=profile_name)
    if isinstance(features, NoProfileFeatures):
        return Prediction(framework=features.framework,
                          profile=profile_identity(profile, profile_name), host_choice=host,
                          this_host=this_host.record() if this_host else {},
                          reason=features.no_profile or NO_TENSORFLOW_PROFILE)
    assert isinstance(features, StepFeatures)
    return predict(features, profile, host=host, this_host=this_host, profile_name=profile_name)


def recompute_any(stored: Prediction, features: Features, profile: Profile) -> Prediction:
    """STORED predicted again from its features and profile with its own choices."""
    if isinstance(features, StepFeatures):
        return recompute(stored, features, profile)
    this_host = HostSpeed.from_record(stored.this_host) if stored.this_host else None
    return predict_any(features, profile, host=stored.host_choice, this_host=this_host,
                       profile_name=str(stored.profile.get("name") or ""))


"""The device-independent features of one torch step, recorded from its eager calls (the
fastest of a few kept).

harness/predict/features.py says what the features are and derives the totals; this module
records the ops. `Recording` is backends/torch/flops.py's counting mode with a record per op
added: the FLOPs of each op come from the same formulas, the same decomposition of composite
ops and the same cheap/heavy rule, so the features' FLOP total is the harness's count.

Sync points are found two ways, because on a CPU run nothing has to cross a device boundary:
aten._local_scalar_dense, which every scalar read dispatches (`.item()`, `float(t)`,
`bool(t)`, an `if` on a tensor), and, while the call runs, torch.Tensor's `.cpu()`,
`.numpy()`, `.tolist()` and printing (`__repr__`, `__format__`) are wrapped, since on a CPU
tensor they return without dispatching anything, yet each makes the host wait on a GPU. The
ops a print runs to format its tensor are left out of the step's ops and counted apart.
A `.to('cpu')` is not watched: on a CPU run it cannot be told from the step placing its own
inputs on its own device.
"""

from __future__ import annotations

import os
import statistics
import sysconfig
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.weak import WeakTensorKeyDictionary

from harness.backend import FEATURES_PART_STEPS
from harness.backends.torch import flops
from harness.predict.features import MARKER, VIEW, OpRecord, StepFeatures, SyncPoint, summarize_ops

if TYPE_CHECKING:
    from harness.workloads.usermodel.common import ModelTask
    from harness.workloads.usermodel.spec import ModelInputs

HOW = ("aten ops under a TorchDispatchMode (backends/torch/features.py): the fastest (ops' host "
       "time) of up to 3 recorded eager calls after one warm-up call; FLOPs by "
       "backends/torch/flops.py's formulas")
# Why several recorded calls: the lent GPU hosts' CPUs run the same single-threaded loop in
# one of two speeds (3.0-3.2 ms or 5.0-5.8 ms, switching within a process; docs/findings.md),
# and one call's op times landed in either. The fastest of a few is the host's own speed, the
# one its profile's dispatch costs were measured at; the budget bounds a slow step's passes.
# The passes also give the time between ops (outside_ops_seconds) gap by gap, the least of
# each: on the busy 2-core VM one pass of keras-torch's 4 MNIST steps took 0.45-2.4 s, and one
# pass's gaps summed 37-53 ms a step against 10-11 ms for the least of 3-5 passes (the rest:
# 16-26 gaps over 1 ms a pass, each where another process ran), so the budget lets 3 passes
# of such a step run.
RECORD_PASSES = 3
PASSES_BUDGET_S = 2.5
LOCAL_SCALAR = "aten._local_scalar_dense"
SCALAR_READ = "scalar read (.item(), float(), bool(), an if on a tensor)"
# Tensor methods that make the host wait for a GPU but dispatch nothing on a CPU tensor.
WATCHED = {"cpu": ".cpu()", "numpy": ".numpy()", "tolist": ".tolist()",
           "__repr__": "print / repr of a tensor", "__format__": "print / format of a tensor"}
# Of those, the ones that read a tensor a `.cpu()` already brought over: no second wait.
AFTER_CPU = ("numpy", "tolist")
# Name prefixes (leading underscores dropped) of ops that alias their input, though their
# schema does not say so (no alias annotation): they move no data.
VIEW_LIKE = ("unsafe_view", "lift_fresh", "alias", "reshape_alias")
MATMUL = ("mm", "addmm", "bmm", "baddbmm", "matmul", "mv", "addmv", "dot", "vdot", "addbmm",
          "addmm_activation", "linear")
KIND_PREFIXES = (
    (("convolution", "conv", "cudnn_convolution", "mkldnn_convolution", "slow_conv"), "conv"),
    (("scaled_dot_product", "native_multi_head_attention", "transformer_encoder",
      "flash_attention", "efficient_attention"), "attention"),
    (("cudnn_rnn", "miopen_rnn", "mkldnn_rnn", "lstm", "gru", "rnn"), "rnn"),
    (("native_layer_norm", "native_batch_norm", "native_group_norm", "layer_norm",
      "batch_norm", "group_norm", "rms_norm", "fused_rms_norm", "cudnn_batch_norm"), "norm"),
    (("softmax", "log_softmax", "safe_softmax"), "reduction"),
    (("mse_loss", "nll_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy",
      "binary_cross_entropy", "kl_div"), "loss"),
    (("foreach_", "fused_adam", "fused_sgd", "fused_adagrad"), "optimizer"),
    (("empty", "zeros", "ones", "full", "arange", "scalar_tensor", "new_", "fill", "zero_",
      "rand", "normal", "uniform", "bernoulli"), "creation"),
    (("copy", "to_copy", "clone", "contiguous", "cat", "stack", "index", "gather", "scatter",
      "embedding", "masked", "where", "pad", "constant_pad", "repeat", "flip", "roll"),
     "copy"),
)


def kind_of(func: Any, op_flops: int | None) -> str:
    """What sort of work an op is, for picking the rate it runs at on a device."""
    name = flops.base_name(func)
    if func.namespace in flops.CHEAP_NAMESPACES:  # profiler marks: host work, no kernel
        return MARKER
    if func.is_view or name.startswith(VIEW_LIKE) or name in flops.CHEAP_NAMES:
        return VIEW
    if flops.op_name(func) == LOCAL_SCALAR:
        return "host_read"
    if op_flops is None:
        return "unknown"
    if name in MATMUL:
        return "matmul"
    for prefixes, kind in KIND_PREFIXES:
        if name.startswith(prefixes):
            return kind
    if torch.Tag.pointwise in func.tags:
        return "elementwise"
    if torch.Tag.reduction in func.tags:
        return "reduction"
    return "contraction" if op_flops else "other"


def described(tensor: torch.Tensor) -> list[Any]:
    return [list(tensor.shape), str(tensor.dtype).removeprefix("torch.")]


def nbytes(tensor: torch.Tensor) -> int:
    try:
        return int(tensor.numel()) * int(tensor.element_size())
    except (RuntimeError, NotImplementedError, TypeError):  # nested or symbolic sizes
        return 0


def unique(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors, each object once (an in-place op returns the tensor it wrote)."""
    kept: list[torch.Tensor] = []
    for tensor in tensors:
        if not any(tensor is seen for seen in kept):
            kept.append(tensor)
    return kept


def written(func: Any, args: tuple, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors an op writes in place (schema alias annotations with a write): a
    `_foreach_add_` returns None, so its outputs alone would miss them."""
    found: list[torch.Tensor] = []
    for position, argument in enumerate(func._schema.arguments):
        info = argument.alias_info
        if info is None or not info.is_write:
            continue
        if position < len(args) and not argument.kwarg_only:
            found += flops.tensors(args[position])
        elif argument.name in kwargs:
            found += flops.tensors(kwargs[argument.name])
    return found


TORCH_DIR = str(Path(torch.__file__).parent) + os.sep
_HARNESS = Path(flops.__file__).parents[2]  # harness/ (backends/ and workloads/ link into it)
# Frames inside these folders are not where a user's code asked for a host read.
_NOT_USER = tuple(str(path) + os.sep for path in {
    Path(torch.__file__).parent, Path(np.__file__).parent, _HARNESS, _HARNESS.resolve(),
    (_HARNESS / "backends").resolve(), (_HARNESS / "workloads").resolve(),
    Path(sysconfig.get_paths()["stdlib"])})


_OURS = tuple(path for path in _NOT_USER if not path.startswith(
    (str(Path(torch.__file__).parent), str(Path(np.__file__).parent))))
# torch's frames between a caller and the recording mode (dynamo's disable wrapper, the
# dispatch machinery, Tensor's Python methods): they pass the caller's request on.
_PLUMBING = tuple(str(Path(torch.__file__).parent / name) for name in (
    "_dynamo", "utils/_python_dispatch", "_ops.py", "_tensor.py", "overrides.py",
    "utils/_contextlib", "_compile.py", "utils/_device.py"))


def asked_from() -> tuple[str, bool]:
    """(where, whether that is the user's code): 'file.py:LINE (function)' of the innermost
    frame outside torch, numpy, the harness and the standard library; where there is none,
    torch's own innermost frame, 'torch/optim/adam.py:LINE (function)'. Why both: a read
    inside torch may not wait on a GPU at all (Adam keeps its step counter on the host)."""
    stack = traceback.extract_stack()
    # The read is torch's own where the innermost frame past the harness and the standard
    # library (and torch's plumbing) is inside torch (Adam's step counter read in adam.py),
    # not the user's line that called into torch.
    asker = next((frame for frame in reversed(stack)
                  if not frame.filename.startswith(_OURS + _PLUMBING + ("<",))), None)
    if asker is not None and asker.filename.startswith(TORCH_DIR):
        inside = asker.filename[len(TORCH_DIR):]
        return f"torch/{inside}:{asker.lineno} ({asker.name})", False
    for frame in reversed(stack):
        if not frame.filename.startswith(_NOT_USER) and not frame.filename.startswith("<"):
            return f"{Path(frame.filename).name}:{frame.lineno} ({frame.name})", True
    for frame in reversed(stack):
        if frame.filename.startswith(TORCH_DIR):
            inside = frame.filename[len(TORCH_DIR):]
            return f"torch/{inside}:{frame.lineno} ({frame.name})", False
    return "?", False


class Recording(flops.Counting):
    """flops.Counting plus one OpRecord per op of the step, and the step's sync points."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[OpRecord] = []
        self.depth_of: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
        self.inside_read = 0  # > 0 while a watched host read runs: its ops are not the step's
        self.skipped = 0
        # Seconds from the mode's return after each op to its entry for the next op
        # (outside_ops_seconds): the Python between two ops, none of the recorder's own work.
        self.gaps: list[float] = []
        self.left: float | None = None  # when the mode last returned to the step's code
        self.nesting = 0  # > 0 inside the mode (a decomposed op dispatches its parts there)
        self.syncs: Counter[tuple[str, str, bool]] = Counter()
        self.brought_over: WeakTensorKeyDictionary = WeakTensorKeyDictionary()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        # The clock reads at the mode's entry and return bound the step's own time between
        # two ops: the recorder's bookkeeping (timing, FLOP formulas, the op's record) stays
        # out of it. A nested entry (a decomposed op's parts) is inside the outer op's call.
        entered = time.perf_counter()
        if self.nesting == 0 and self.left is not None and not self.inside_read:
            self.gaps.append(entered - self.left)
        self.nesting += 1
        try:
            return self._dispatched(func, args, kwargs or {})
        finally:
            self.nesting -= 1
            if self.nesting == 0:
                self.left = time.perf_counter()

    def _dispatched(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        # Mirrors flops.Counting.__torch_dispatch__ (tests hold the two totals equal), with
        # the op's own call timed and recorded.
        if func._overloadpacket.__name__ in flops.METADATA and func.namespace in ("aten", "prim"):
            return NotImplemented
        formula = flops.formula_for(func)
        if formula is None:
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        inputs = flops.tensors((args, kwargs))
        reached = self.reach.reached(inputs)
        started = time.perf_counter()
        out = func(*args, **kwargs)
        seconds = time.perf_counter() - started
        counted = formula(func, args, kwargs, out) if formula is not None else None
        cheap = formula is None and flops.is_cheap(func)
        if counted is not None:
            self.flops += counted
            self.reach.counted |= reached
        elif cheap:
            if reached and flops.carries_values(func):
                self.reach.carry(reached, flops.tensors(out))
        else:
            self.uncounted[flops.op_name(func)] += 1
            self.reach.uncounted |= reached
        self._record(func, inputs, unique(flops.tensors(out) + written(func, args, kwargs)),
                     counted if counted is not None else (0 if cheap else None), seconds)
        return out

    def _record(self, func: Any, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
                op_flops: int | None, seconds: float) -> None:
        if self.inside_read:
            self.skipped += 1
            return
        kind = kind_of(func, op_flops)
        depth = (kind != VIEW) + max((self.depth_of.get(tensor, 0) for tensor in inputs),
                                     default=0)
        for tensor in outputs:
            self.depth_of[tensor] = depth
        if kind == "host_read":
            self.syncs[(SCALAR_READ, *asked_from())] += 1
        moved = 0 if kind == VIEW else sum(nbytes(tensor) for tensor in inputs + outputs)
        self.ops.append(OpRecord(
            op=flops.op_name(func), kind=kind, inputs=[described(t) for t in inputs],
            outputs=[described(t) for t in outputs if not any(t is i for i in inputs)],
            flops=op_flops, bytes=moved, depth=depth, host_s=seconds))

    def host_read(self, method: str, tensor: Any) -> None:
        """A watched Tensor method was called outside any other host read."""
        if method in AFTER_CPU and isinstance(tensor, torch.Tensor) and \
                tensor in self.brought_over:
            return
        self.syncs[(WATCHED[method], *asked_from())] += 1

    def outside_ops_seconds(self, others: Sequence[Recording] = ()) -> float:
        """The step's time between its ops (the Python around them: a framework's layers and
        loop, Keras' on torch; gaps measured outside the recorder's bookkeeping, above), less
        what entering the mode costs from the step's code, taken as the 10th percentile of
        the gaps (two ops back to back). Where OTHERS (other passes of the same step) ran the
        same ops, each gap is the least of the passes': a gap the machine stretched in one
        pass (another process ran, a collection) is not the step's. The call's time before
        its first op and after its last (a part's set-up) is not counted."""
        gaps = least_gaps(self, others)
        if not gaps:
            return 0.0
        ordered = sorted(gaps)
        entering = ordered[len(ordered) // 10]
        return max(0.0, sum(ordered) - entering * len(ordered))

    def sync_points(self) -> list[SyncPoint]:
        return [SyncPoint(what=what, where=where, user_code=user, count=count)
                for (what, where, user), count in self.syncs.items()]


def least_gaps(kept: Recording, others: Sequence[Recording]) -> list[float]:
    """KEPT's gaps between ops, each the least over KEPT and those of OTHERS that ran the same
    ops in the same order (a step's passes); KEPT's own where none did."""
    names = [op.op for op in kept.ops]
    alike = [other.gaps for other in others if other is not kept
             and len(other.gaps) == len(kept.gaps) and [op.op for op in other.ops] == names]
    return [min(gap) for gap in zip(kept.gaps, *alike, strict=True)]


@contextmanager
def host_reads_watched(recording: Recording) -> Iterator[None]:
    """torch.Tensor's WATCHED methods report to RECORDING while inside; put back after."""
    own = {name: torch.Tensor.__dict__[name] for name in WATCHED if name in torch.Tensor.__dict__}
    for name in WATCHED:
        setattr(torch.Tensor, name, _watched(recording, name, getattr(torch.Tensor, name)))
    try:
        yield
    finally:
        for name in WATCHED:
            if name in own:
                setattr(torch.Tensor, name, own[name])
            else:
                delattr(torch.Tensor, name)


def _watched(recording: Recording, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not recording.inside_read:
            recording.host_read(name, self)
        recording.inside_read += 1
        try:
            result = original(self, *args, **kwargs)
        finally:
            recording.inside_read -= 1
        if name == "cpu" and isinstance(result, torch.Tensor):
            recording.brought_over[result] = True
        return result
    return watched


def median_seconds(step: Callable[[], Any], calls: int) -> float:
    """Median of CALLS plain calls (a CPU op is done when it returns: no sync needed)."""
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def record_step(step: Callable[[], Any], warmup: int = 1) -> Recording:
    """The ops and sync points of one call of STEP, after WARMUP plain calls (an optimizer's
    first step creates its state; a lazy module builds itself: neither is a steady step)."""
    for _ in range(warmup):
        step()
    recording = Recording()
    with host_reads_watched(recording), recording:
        step()
    return recording


def fastest_recording(step: Callable[[], Any], warmup: int, passes: int = RECORD_PASSES,
                      budget_s: float = PASSES_BUDGET_S,
                      ) -> tuple[Recording, list[float], list[Recording]]:
    """(the recording of STEP whose ops took the least host time, each pass's total in the
    order recorded, every pass's recording): up to PASSES recorded calls, no new one once
    BUDGET_S has passed."""
    started = time.perf_counter()
    kept: Recording | None = None
    totals: list[float] = []
    made: list[Recording] = []
    for index in range(max(1, passes)):
        recording = record_step(step, warmup if index == 0 else 0)
        made.append(recording)
        totals.append(sum(op.host_s for op in recording.ops))
        if kept is None or totals[-1] < min(totals[:-1]):
            kept = recording
        if time.perf_counter() - started > budget_s:
            break
    assert kept is not None
    return kept, totals, made


def features_of(step: Callable[[], Any], *, step_s: float | None = None,
                timed_calls: int = 3, h2d_bytes: int | None = None, h2d_how: str = "",
                warmup: int = 1, passes: int = RECORD_PASSES,
                framework: str = "torch") -> StepFeatures:
    """The features of STEP (harness/predict/features.py). STEP_S: its wall time per call
    where the caller timed it (a case's median), else the median of TIMED_CALLS plain calls
    here (0: none). H2D_BYTES: what one call copies host->device (None: not known).
    PASSES: recorded calls, the fastest kept (RECORD_PASSES says why). FRAMEWORK: whose step
    it is (keras-torch: Keras' layers and fit loop running torch's ops)."""
    recording, pass_totals, made = fastest_recording(step, warmup, passes)
    if step_s is None and timed_calls:
        step_s = median_seconds(step, timed_calls)
    return summarize_ops(StepFeatures(
        framework=framework, how=HOW, ops=recording.ops, sync_points=recording.sync_points(),
        step_s=step_s, h2d_bytes=h2d_bytes,
        h2d_how=h2d_how or ("not given" if h2d_bytes is None else "given by the caller"),
        ops_inside_host_reads=recording.skipped, pass_host_s=pass_totals,
        flop_coverage=dict(recording.coverage().record()),
        outside_ops_s=recording.outside_ops_seconds(made)))


def features_record(step: Callable[[], Any], **options: Any) -> dict[str, Any]:
    """The JSON-able record of features_of(STEP, **OPTIONS), to store with a case."""
    return features_of(step, **options).record()


def copied_bytes(task: ModelTask, inputs: ModelInputs) -> tuple[int, str]:
    """(bytes one call of a user-model task copies host->device, how that was decided): the
    batch's arrays at the dtype cells place them in (floats as float32) where the task
    copies them each call, 0 where they stay resident (backends/torch/usermodel.py)."""
    if task.extra.get("inputs") != "copied from host each call":
        return 0, f"inputs {task.extra.get('inputs') or 'not copied'}: 0 per call"
    total = sum(array.size * 4 if np.issubdtype(array.dtype, np.floating) else array.nbytes
                for array in inputs["x"])
    return int(total), "the batch's input arrays, copied from host each call (floats as float32)"


def task_features(task: ModelTask, inputs: ModelInputs, step_s: float | None = None,
                  timed_calls: int = 3) -> dict[str, Any]:
    """The features record of a user-model task's eager step (make_task in usermodel.py);
    {"unknown": why} where the task has no eager call to record."""
    if task.eager is None:
        return {"unknown": "the task has no eager call to record"}
    h2d, how = copied_bytes(task, inputs)
    return features_record(task.eager, step_s=step_s, timed_calls=timed_calls,
                           h2d_bytes=h2d, h2d_how=how)



# --- the features pass of a torch CPU cell (harness/run/casepasses.py features_pass) -------------

# Optimizer steps of an epoch-sized call (MNIST) the pass records (casepasses says why).
PART_STEPS = FEATURES_PART_STEPS
FEATURES_KEY, STEPS_KEY, REASON_KEY, HOST_SPEED_KEY = (
    "step_features", "step_features_steps", "step_features_reason", "host_speed")
# MNIST variants whose step is eager (the collector records eager aten ops): a compiled model
# or a captured graph runs other code than the ops a dispatch mode would see.
EAGER_MNIST = ("as-written", "preloaded", "adam-fused", "adam-foreach")


def host_speed_record() -> dict[str, float]:
    """This CPU's single-thread speed (harness/predict/hostspeed.py's two loops, quick policy:
    ~0.2 s): the prediction for host 'this' rescales the profile's launch costs by it."""
    from harness.predict import hostspeed  # noqa: PLC0415 - only a features pass needs it

    return hostspeed.speed_record()


def mnist_batch_bytes(task: Any) -> tuple[int, str]:
    """(bytes one MNIST step copies host->device, how): the batch's images and labels where
    the loop copies each batch (as-written's DataLoader), 0 where the set is resident."""
    from harness.backends.torch.mnist import DataLoaderTraining  # noqa: PLC0415

    if not isinstance(task, DataLoaderTraining):
        return 0, "the training set is resident on the device: 0 per step"
    x_train, y_train = task.inputs["x_train"], task.inputs["y_train"]
    per_sample = int(x_train[0].nbytes) + int(y_train[0].nbytes)
    return per_sample * int(task.batch_size), "one batch's images and labels, copied each step"


def mnist_features(step: Any, variant: str, seconds_per_call: float | None) -> dict[str, Any]:
    """The features of PART_STEPS optimizer steps of an MNIST epoch (blocks.CallStep.part),
    after the timed epochs (the optimizer's state exists: no warm-up call)."""
    if variant not in EAGER_MNIST:
        return {REASON_KEY: f"variant {variant} does not run its step eagerly; the features "
                            "of its as-written step are recorded in that cell"}
    steps = min(PART_STEPS, step.steps_per_call)
    per_step = (seconds_per_call / step.steps_per_call) if seconds_per_call else None
    h2d, how = mnist_batch_bytes(step.task)
    record = features_record(step.part(steps), step_s=per_step * steps if per_step else None,
                             timed_calls=0, h2d_bytes=h2d * steps, h2d_how=how, warmup=0)
    return {FEATURES_KEY: record, STEPS_KEY: steps}


def cell_features(step: Any, variant: str, inputs: Any,
                  seconds_per_call: float | None) -> dict[str, Any]:
    """The features pass of one torch CPU case: {step_features, step_features_steps,
    host_speed} or {step_features_reason: why}. STEP: what the case timed (a blocks.CallStep
    of MNIST, or a user-model task's bound step)."""
    from harness.measure.blocks import CallStep  # noqa: PLC0415
    from harness.workloads.usermodel.common import ModelTask  # noqa: PLC0415

    task = getattr(step, "__self__", None)
    if isinstance(step, CallStep):
        found = mnist_features(step, variant, seconds_per_call)
    elif isinstance(task, ModelTask):
        record = task_features(task, inputs, step_s=seconds_per_call, timed_calls=0)
        found = {REASON_KEY: f"no features: {record['unknown']}"} if "unknown" in record \
            else {FEATURES_KEY: record, STEPS_KEY: 1}
    else:
        return {REASON_KEY: "the features pass records training steps of own-model torch files "
                            "and of the MNIST workloads; this workload's step is neither"}
    if FEATURES_KEY in found:
        found[HOST_SPEED_KEY] = host_speed_record()
    return found

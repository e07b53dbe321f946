"""A user's torch model in one cell: as written, or with fixes applied (usermodel/spec.py).

A variant is one fix or several joined with '+' ("resident+compiled+bf16"); each part changes
one thing of the as-written step: where the inputs live (resident; cuda-graph needs them
resident), how the step runs (torch.compile in one of its modes, a CUDA graph), its arithmetic
(autocast bf16 / fp16 with a GradScaler, TF32), the layout (channels_last), or a process-wide
switch (cudnn.benchmark, the CPU's thread count). Switches are set in the cell's own worker
process, which runs this cell alone, so nothing outlives the cell.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import numpy as np
import torch

from harness.backend import VariantUnavailable
from harness.backends.torch import flops, stepmemory
from harness.backends.torch.device import TorchDevice, require_cuda, tf32
from harness.workloads.usermodel import sensitivity
from harness.workloads.usermodel.common import (
    ModelTask,
    add_deterministic,
    forward_variant,
    nested_map,
    user_code,
)
from harness.workloads.usermodel.source import UserCodeError, call_user, load_user_module
from harness.workloads.usermodel.spec import (
    CAPABILITIES,
    GPU_ONLY,
    JACOBIAN_PARTS,
    KEPT_RESULTS,
    NO_JACOBIAN,
    THREADS,
    TORCH_COMPILE_MODE,
    ModelInputs,
    autograd_functional_calls,
    declared_name,
    split_parts,
    training_targets,
)

if TYPE_CHECKING:
    from harness.backends.torch.graphs import CapturedOnFirstCall
    from harness.backends.torch.jacobians import JacobianSwitch

# The CPU reference computes in float32; on a GPU torch would run convolutions in TF32 by
# default (cuDNN), whose 10-bit mantissa no float32 bound covers.
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def build(path: str, seed: int | None = None) -> torch.nn.Module:
    """The file's model(), seeded so that the same seed builds the same weights."""
    user = load_user_module(path)
    if seed is not None:
        torch.manual_seed(seed)
    return call_user(path, "model()", user.model)


def weight_arrays(net: torch.nn.Module) -> dict[str, np.ndarray]:
    """Parameters and buffers in state_dict order (the stable order the weights file keeps)."""
    return {name: tensor.detach().cpu().numpy().copy() for name, tensor in
            net.state_dict().items()}


def load_weights(net: torch.nn.Module, weights: dict[str, np.ndarray], names: list[str]) -> None:
    net.load_state_dict({name: torch.from_numpy(np.array(weights[name])) for name in names})


def snapshot(value: Any) -> Any:
    """A copy no later call can change (a graph replay rewrites its static output in place)."""
    return nested_map(lambda v: v.detach().clone() if torch.is_tensor(v) else v, value)


def to_numpy(value: Any) -> Any:
    return nested_map(lambda v: v.detach().cpu().double().numpy() if torch.is_tensor(v)
                      else np.asarray(v, dtype=np.float64), value)


def on_device(array: np.ndarray, handle: torch.device, dtype: torch.dtype) -> torch.Tensor:
    tensor = torch.from_numpy(array).to(handle)
    return tensor.to(dtype) if tensor.is_floating_point() else tensor


Autocast = Callable[[], AbstractContextManager[Any]]


def training_call(net: Any, optimizer: torch.optim.Optimizer, inputs: Callable[[], list],
                  target: torch.Tensor,
                  loss_of: Callable[[Any, Any], Any] = torch.nn.functional.mse_loss,
                  *, autocast: Autocast = nullcontext, scaled: ScaledUpdate | None = None,
                  ) -> Callable[[], torch.Tensor]:
    """One optimizer step on the loss against the fixed targets; returns the loss.

    Default: Adam on the mean squared error; the file's loss(output, target) and
    optimizer(parameters) where it has them. `autocast` wraps forward and loss (the backward
    runs outside it, as torch's AMP recipe says); `scaled` (fp16) scales the loss for the
    backward and unscales the gradients before the update."""
    def call() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_of(net(*inputs()), target)
        if scaled is None:
            loss.backward()
            optimizer.step()
        else:
            scaled.backward_and_step(loss)
        return loss
    return call


def inference_call(net: Any, inputs: Callable[[], list],
                   autocast: Autocast = nullcontext) -> Callable[[], Any]:
    def call() -> Any:
        with torch.no_grad(), autocast():
            return net(*inputs())
    return call


# The most probes ScaledUpdate.settle makes: from 2^16, 32 halvings reach 2^-16, past any
# gradient a float16 can hold; a loss still overflowing there is not finite in float16 at all.
SETTLE_PROBES = 32


class ScaledUpdate:
    """fp16's GradScaler around the optimizer step.

    A GradScaler starts at 2^16 and skips every update whose gradients overflow at its scale,
    halving the scale: a plain fp16 loop's first updates may all be skipped while it finds its
    scale (a torchvision ResNet-18 on an H100: the second kept loss then sat one update behind
    fp32's, 7.2% away). The kept calls are what the check sets beside fp32's, so settle() finds
    the scale first, on the initial weights: each probe scales, backpropagates and unscales
    (inf/NaN gradients halve the scale), no update is made, and the weights, buffers and
    gradients are put back. A kept call whose update is skipped anyway is counted by its
    number (an optimizer post-hook: no device work in the timed call; the scaler reads
    found-inf on the host every step anyway), so the check compares each kept loss with fp32's
    after as many applied updates (workloads/usermodel/lossscale.py), never calling a skipped
    update a wrong result."""

    def __init__(self, optimizer: torch.optim.Optimizer, device_type: str,
                 watched: int) -> None:
        self.optimizer, self.watched = optimizer, watched
        self.scaler = torch.amp.GradScaler(device_type)
        self.calls = self.updates = 0
        self.skipped_calls: list[int] = []  # numbers (from 1) of watched calls not applied
        self.probing = False
        self.settled: dict[str, object] = {}
        optimizer.register_step_post_hook(self._updated)

    def _updated(self, *args: Any) -> None:
        self.updates += 1

    def backward_and_step(self, loss: torch.Tensor) -> None:
        if self.probing:  # settle(): the scale's update only, never the weights'
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            self.scaler.update()
            return
        before = self.updates
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.calls += 1
        if self.calls <= self.watched and self.updates == before:
            self.skipped_calls.append(self.calls)

    def settle(self, call: Callable[[], Any], net: torch.nn.Module,
               probes: int = SETTLE_PROBES) -> None:
        """Probe `call` (a whole training call, whose backward_and_step probes) until the
        scale stops falling: a fall means its gradients overflowed. Weights and buffers (a
        BatchNorm's running statistics) go back to the initial ones afterwards."""
        initial = {name: tensor.detach().clone() for name, tensor in net.state_dict().items()}
        start = scale = self.scaler.get_scale()
        overflowed, settled = 0, False
        self.probing = True
        try:
            for _ in range(probes):
                call()
                now = self.scaler.get_scale()
                settled = now >= scale
                if settled:
                    break
                overflowed, scale = overflowed + 1, now
        finally:
            self.probing = False
            restore(net, initial, None)
            self.optimizer.zero_grad(set_to_none=True)
        self.settled = {"start": start, "scale": self.scaler.get_scale(),
                        "overflowed_probes": overflowed, "settled": settled}

    def record(self) -> dict[str, object]:
        return {"skipped_updates": len(self.skipped_calls),
                "skipped_update_calls": list(self.skipped_calls),
                "loss_scale": dict(self.settled)}


def training_parts(path: str, net: torch.nn.Module, capturable: bool,
                   ) -> tuple[Callable[[Any, Any], Any], torch.optim.Optimizer, str]:
    """(loss, optimizer, what they are in words): the file's loss(output, target) and
    optimizer(parameters) where it defines them, else mean squared error and Adam."""
    user = load_user_module(path)
    names = ["loss: your loss()" if callable(getattr(user, "loss", None))
             else "loss: mean squared error"]
    loss_of = user.loss if callable(getattr(user, "loss", None)) else torch.nn.functional.mse_loss
    if callable(getattr(user, "optimizer", None)):
        optimizer = call_user(path, "optimizer(parameters)", user.optimizer, net.parameters())
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise UserCodeError(f"{Path(path).name}: optimizer(parameters) returned a "
                                f"{type(optimizer).__name__}, not a torch.optim.Optimizer")
        if capturable:  # a CUDA graph needs the optimizer's step on the device
            for group in optimizer.param_groups:
                if "capturable" in group:
                    group["capturable"] = True
        names.append(f"optimizer: your optimizer() -> {type(optimizer).__name__}")
    else:
        optimizer = torch.optim.Adam(net.parameters(), capturable=capturable)
        names.append("optimizer: Adam")
    return loss_of, optimizer, ", ".join(names)


def restore(net: torch.nn.Module, initial: dict[str, torch.Tensor],
            optimizer: torch.optim.Optimizer | None) -> None:
    """Put back the initial weights and a fresh optimizer state, in place (a captured graph
    keeps the addresses): the warm-up calls before a capture trained the model."""
    with torch.no_grad():
        for name, tensor in net.state_dict().items():
            tensor.copy_(initial[name])
        for state in (optimizer.state.values() if optimizer is not None else ()):
            for value in state.values():
                if torch.is_tensor(value):
                    value.zero_()


class GraphModelTask(ModelTask):
    """A cuda-graph cell: the first step() captures the graph, so the capture is in the cold
    call. The capture runs outside ModelTask.step, which reads any error of the call as the
    user's: a capture torch refuses stays a VariantUnavailable (the variant cannot run here)."""

    def __init__(self, graph: CapturedOnFirstCall, *args: Any, **kwargs: Any) -> None:
        super().__init__(graph, *args, **kwargs)
        self.graph = graph

    def step(self) -> Any:
        if not self.graph.captured:
            with user_code(self.path, "capturing the CUDA graph"):
                self.graph.capture()
        return super().step()


# The parts this implementation runs (threads-N stands for every thread count).
RUNS = frozenset(CAPABILITIES["torch"].variants)
# Parts that change the arithmetic: a random step's deterministic forward runs them too.
ARITHMETIC = ("bf16", "fp16", "tf32", "channels-last")
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def parts_of(variant: str) -> frozenset[str]:
    """The variant's parts, or VariantUnavailable for one this implementation does not run."""
    parts = split_parts(variant)
    for part in parts:
        if declared_name(part) not in RUNS:
            raise VariantUnavailable(f"torch runs no variant {part!r} of a user model")
    return frozenset(parts)


def set_switches(parts: frozenset[str], device: TorchDevice) -> dict[str, bool]:
    """Set the process-wide switches the parts ask for; what was set, for the case's extra.

    Process-wide on purpose: the worker runs this one cell, and the switch must hold for
    every op of the step, the user's own included."""
    for part in parts & GPU_ONLY.keys():
        if not device.is_gpu:
            raise VariantUnavailable(f"variant {part} needs a CUDA device: {GPU_ONLY[part]}")
    switched: dict[str, bool] = {}
    if "tf32" in parts:  # set_float32_matmul_precision("high") and cuDNN's TF32
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        switched["tf32"] = True
    if "cudnn-benchmark" in parts:
        torch.backends.cudnn.benchmark = True
        switched["cudnn_benchmark"] = True
    threads = [part for part in parts if declared_name(part) == THREADS]
    if threads:
        if device.is_gpu:
            raise VariantUnavailable(f"{threads[0]} sets the CPU's thread count: a CPU variant")
        torch.set_num_threads(int(threads[0].rpartition("-")[2]))
    return switched


def autocast_for(parts: frozenset[str], handle: torch.device, graphed: bool) -> Autocast:
    """torch.autocast in the variant's precision (bf16 / fp16), else no context. A captured
    graph must not keep autocast's cast cache (torch's CUDA-graph notes): off when graphed."""
    dtype = next((AUTOCAST_DTYPES[part] for part in parts if part in AUTOCAST_DTYPES), None)
    if dtype is None:
        return nullcontext
    return lambda: torch.autocast(handle.type, dtype=dtype, cache_enabled=not graphed)


def channels_last(parts: frozenset[str], host_arrays: list[np.ndarray]) -> bool:
    """Whether the variant asks for channels_last; refused for a model without 4-D inputs."""
    if "channels-last" not in parts:
        return False
    if not any(array.ndim == 4 for array in host_arrays):
        shapes = ", ".join(str(tuple(array.shape)) for array in host_arrays)
        raise VariantUnavailable(f"channels-last lays out 4-D (image) tensors; this model's "
                                 f"inputs have none ({shapes})")
    return True


def make_task(case: dict, variant: str, device: TorchDevice, inputs: ModelInputs,
              dtype: torch.dtype = torch.float32, keep: int | None = None) -> ModelTask:
    with user_code(inputs["model"], f"preparing {variant}"):
        forward = forward_variant(variant, ARITHMETIC)
        return add_deterministic(_make_task(variant, device, inputs, dtype, keep), inputs,
                                 lambda forward_inputs: _make_task(forward, device,
                                                                   forward_inputs, dtype, 1))


def _make_task(variant: str, device: TorchDevice, inputs: ModelInputs, dtype: torch.dtype,
               keep: int | None) -> ModelTask:
    parts = parts_of(variant)
    path, what = inputs["model"], inputs["what"]
    handle = device.handle
    extra: dict[str, object] = dict(set_switches(parts, device))
    graphed = "cuda-graph" in parts
    nhwc = channels_last(parts, inputs["x"])
    net = placed_net(path, inputs, handle, dtype, nhwc, extra)
    current = input_source(parts, inputs["x"], handle, dtype, nhwc, extra)
    model: Any = net
    compiled = [part for part in parts if part in TORCH_COMPILE_MODE]
    mode = TORCH_COMPILE_MODE[compiled[0]] if compiled else None
    if compiled:
        model = torch.compile(net, mode=mode)
        extra["compile_mode"] = mode or "default"
    autocast = autocast_for(parts, handle, graphed)
    if autocast is not nullcontext:
        extra["autocast"] = "bfloat16" if "bf16" in parts else "float16"
    step = step_maker(inputs, parts, net, handle, dtype, current, autocast, graphed, extra)
    call = step.make_call(model)
    eager = call if model is net else step.make_call(net)
    switch = jacobian_switch(parts, path)
    if switch is not None:  # the eager call too: the FLOP count and memory pass run it
        same = eager is call
        call = switch.around(call)
        eager = call if same else switch.around(eager)
    if mode == "reduce-overhead":
        call = marked_steps(call)
    graph: CapturedOnFirstCall | None = None
    if graphed:
        require_cuda(device, variant)
        from harness.backends.torch.graphs import CapturedOnFirstCall  # noqa: PLC0415 - GPU cells only

        initial = {name: tensor.detach().clone() for name, tensor in net.state_dict().items()}
        # Captured by the first step(), the cold call, not here. Its warm-up calls train the
        # model, so the initial weights and a fresh optimizer state go back right after.
        graph = CapturedOnFirstCall(call, handle,
                                    after_capture=lambda: restore(net, initial, step.optimizer))
        call = graph
    extra.update(parameters=sum(p.numel() for p in net.parameters()), what=what)
    if step.trained_with:
        extra["trained_with"] = step.trained_with
    kept = (path, keep or KEPT_RESULTS[what], snapshot, to_numpy)
    task = (ModelTask(call, *kept, extra=extra) if graph is None
            else GraphModelTask(graph, *kept, extra=extra))
    task.eager = eager
    MEMORY_PASSES[task] = lambda: stepmemory.measure_step(eager, net, step.optimizer)
    MODELS[task] = net
    if not device.is_gpu:  # the count it ran with, read after the timed calls
        task.late_extra.append(lambda: {"threads": torch.get_num_threads()})
    if step.scaled is not None:  # the loss scale found before the kept calls
        step.scaled.settle(eager, net)
        task.late_extra.append(step.scaled.record)
    if switch is not None:
        task.late_extra.append(switch.record)
    if mode == "reduce-overhead" and device.is_gpu:
        task.late_extra.append(compile_watch())
    return task


def placed_net(path: str, inputs: ModelInputs, handle: torch.device, dtype: torch.dtype,
               nhwc: bool, extra: dict[str, object]) -> Any:
    """The file's model with the shared weights, on the device, channels-last where asked."""
    net = build(path)
    load_weights(net, inputs["weights"], inputs["weight_names"])
    net = net.to(handle, dtype=dtype) if dtype != torch.float32 else net.to(handle)
    if nhwc:
        # Module.to takes memory_format (its **kwargs); torch's stubs list no such overload.
        net = net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        extra["memory_format"] = "channels_last"
    return net


def input_source(parts: frozenset[str], host_arrays: list[np.ndarray], handle: torch.device,
                 dtype: torch.dtype, nhwc: bool,
                 extra: dict[str, object]) -> Callable[[], list]:
    """What a call reads its inputs from: copied from host memory on every call, as a plain
    loop does, unless the variant keeps them on the device (resident) or must (a captured graph
    reads fixed addresses)."""
    def placed(array: np.ndarray) -> torch.Tensor:
        tensor = on_device(array, handle, dtype)
        return tensor.contiguous(memory_format=torch.channels_last) \
            if nhwc and tensor.dim() == 4 else tensor

    resident = [placed(array) for array in host_arrays]
    copied = not parts & {"resident", "cuda-graph"}
    extra["inputs"] = "copied from host each call" if copied else "resident on the device"
    if copied:
        return lambda: [placed(array) for array in host_arrays]
    return lambda: resident


@dataclass
class StepMaker:
    """How a call of the file's step is made from a module (the net, or its compiled form),
    and the training parts the task keeps beside it."""

    make_call: Callable[[Any], Callable[[], Any]]
    optimizer: Any = None
    trained_with: str = ""
    scaled: ScaledUpdate | None = None


def step_maker(inputs: ModelInputs, parts: frozenset[str], net: Any, handle: torch.device,
               dtype: torch.dtype, current: Callable[[], list], autocast: Any, graphed: bool,
               extra: dict[str, object]) -> StepMaker:
    """A training step, an inference call, or the file's own step(net, *inputs)."""
    path, what = inputs["model"], inputs["what"]
    if what == "train":
        net.train()
        target = on_device(training_targets(inputs), handle, dtype)
        loss_of, optimizer, trained_with = training_parts(path, net, graphed)
        scaled = None
        if "fp16" in parts:  # float16 gradients underflow without a loss scale
            scaled = ScaledUpdate(optimizer, handle.type, KEPT_RESULTS["train"])
            extra["loss_scaler"] = "torch.amp.GradScaler"
        return StepMaker(lambda module: training_call(module, optimizer, current, target,
                                                      loss_of, autocast=autocast, scaled=scaled),
                         optimizer, trained_with, scaled)
    if what == "inference":
        net.eval()
        return StepMaker(lambda module: inference_call(module, current, autocast))
    user_step = load_user_module(path).step

    def make_call(module: Any) -> Callable[[], Any]:
        def call() -> Any:  # compiled: the step gets torch.compile(model), as users do
            with autocast():
                return user_step(module, *current())
        return call
    return StepMaker(make_call)


def jacobian_switch(parts: frozenset[str], path: str) -> JacobianSwitch | None:
    """The Jacobian fix the parts ask for (harness/backends/torch/jacobians.py), or None;
    VariantUnavailable for a file that calls no torch.autograd.functional.jacobian / hessian
    (read from its text, as the planner reads it)."""
    chosen = sorted(parts & JACOBIAN_PARTS.keys())
    if not chosen:
        return None
    if not autograd_functional_calls(Path(path).read_text(errors="replace")):
        raise VariantUnavailable(f"{chosen[0]}: {NO_JACOBIAN}")
    from harness.backends.torch.jacobians import JacobianSwitch  # noqa: PLC0415 - these fixes only

    return JacobianSwitch(JACOBIAN_PARTS[chosen[0]], load_user_module(path))


def marked_steps(call: Callable[[], Any]) -> Callable[[], Any]:
    """reduce-overhead's CUDA graphs reuse their output memory: each call is a new iteration,
    which torch must be told (the kept results are copies, snapshot's)."""
    def marked() -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        return call()
    return marked


def compile_watch() -> Callable[[], Mapping[str, object]]:
    """Whether Inductor captured CUDA graphs for reduce-overhead, or why not (its skip log)."""
    from harness.backends.torch.graphs import CompileWatch  # noqa: PLC0415 - GPU cells only

    watch = CompileWatch(cuda_graphs_expected=True)
    return lambda: {"cuda_graphs": watch.record()}


# Each task's memory pass (required_memory), kept beside the task: ModelTask is shared by every
# framework, and only torch's has such a pass.
MEMORY_PASSES: WeakKeyDictionary[ModelTask, Callable[[], stepmemory.StepMemory]] = \
    WeakKeyDictionary()
# Each task's model, so the FLOP count's second opinion names layers as the file does.
MODELS: WeakKeyDictionary[ModelTask, torch.nn.Module] = WeakKeyDictionary()


def required_memory(task: ModelTask) -> dict[str, object]:
    """What one step of the task must hold (weights, gradients, optimizer state, saved
    activations, the largest transient: backends/torch/stepmemory.py), measured in one more
    eager call of the same step, as the case's extra; {} for a task built elsewhere."""
    measure = MEMORY_PASSES.get(task)
    return {} if measure is None else measure().record()


def count_flops(task: ModelTask) -> tuple[float | None, str, flops.CoverageRecord | None,
                                          dict[str, object] | None]:
    """(FLOPs of one call, who counted them, coverage, second opinion): our formulas and
    torch's (backends/torch/flops.py), around one eager call of the same step (a compiled or
    graph-replayed step runs the same ops, which a dispatch mode cannot see). The coverage
    names the heavy ops that still went uncounted; the second opinion sets each standard
    layer's share of the count beside its shapes' count (backends/torch/secondcount.py). A
    plain dispatch mode, without FlopCounterMode's module tracker, also counts a step that
    calls autograd.grad."""
    if task.eager is None:
        return None, "no eager call to count", None, None
    counted = flops.count(task.eager, MODELS.get(task))
    return (float(counted.flops), f"{flops.HOW}, one eager call", counted.coverage,
            counted.second_opinion)


def rounding_sensitivity(case: dict, variant: str, device: TorchDevice, inputs: ModelInputs,
                         **options: Any) -> dict[str, Any]:
    """How far the fp32 step moves under the variant's rounding (workloads/usermodel/
    sensitivity.py), on this device, in float32 whatever switches the variant set."""
    return sensitivity.rounding_sensitivity(sys.modules[__name__], case, variant, device,
                                            inputs, float32=partial(tf32, False), **options)


def step_features(step: Any, variant: str, inputs: Any,
                  seconds_per_call: float | None) -> dict[str, Any]:
    """The features pass of a CPU case (harness/run/casepasses.py features_pass), recorded by
    backends/torch/features.py: the step's ops for a GPU prediction (docs/predict.md)."""
    from harness.backends.torch.features import cell_features  # noqa: PLC0415 - after the check

    return cell_features(step, variant, inputs, seconds_per_call)

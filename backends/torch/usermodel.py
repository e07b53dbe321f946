"""A user's torch model in one cell: as written, data resident, torch.compile, CUDA graph."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from harness.backend import VariantUnavailable
from harness.backends.torch import flops
from harness.backends.torch.device import TorchDevice, require_cuda
from harness.workloads.usermodel.common import ModelTask, add_deterministic, nested_map, user_code
from harness.workloads.usermodel.source import UserCodeError, call_user, load_user_module
from harness.workloads.usermodel.spec import KEPT_RESULTS

if TYPE_CHECKING:
    from harness.backends.torch.graphs import CapturedOnFirstCall

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


def training_call(net: Any, optimizer: torch.optim.Optimizer, inputs: Callable[[], list],
                  target: torch.Tensor,
                  loss_of: Callable[[Any, Any], Any] = torch.nn.functional.mse_loss,
                  ) -> Callable[[], torch.Tensor]:
    """One optimizer step on the loss against the fixed targets; returns the loss.

    Default: Adam on the mean squared error; the file's loss(output, target) and
    optimizer(parameters) where it has them."""
    def call() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(net(*inputs()), target)
        loss.backward()
        optimizer.step()
        return loss
    return call


def inference_call(net: Any, inputs: Callable[[], list]) -> Callable[[], Any]:
    def call() -> Any:
        with torch.no_grad():
            return net(*inputs())
    return call


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


def make_task(case: dict, variant: str, device: TorchDevice, inputs: dict[str, Any],
              dtype: torch.dtype = torch.float32, keep: int | None = None) -> ModelTask:
    with user_code(inputs["model"], f"preparing {variant}"):
        return add_deterministic(_make_task(variant, device, inputs, dtype, keep), inputs,
                                 lambda forward: _make_task("as-written", device, forward,
                                                            dtype, 1))


def _make_task(variant: str, device: TorchDevice, inputs: dict[str, Any], dtype: torch.dtype,
               keep: int | None) -> ModelTask:
    path, what = inputs["model"], inputs["what"]
    handle = device.handle
    net = build(path)
    load_weights(net, inputs["weights"], inputs["weight_names"])
    net = net.to(handle, dtype=dtype) if dtype != torch.float32 else net.to(handle)
    host_arrays = inputs["x"]
    resident = [on_device(array, handle, dtype) for array in host_arrays]
    if variant == "as-written":  # copied from host memory on every call, as a plain loop does
        def current() -> list:
            return [on_device(array, handle, dtype) for array in host_arrays]
    else:
        def current() -> list:
            return resident
    model: Any = net
    if variant == "compiled":
        model = torch.compile(net)
    optimizer = None
    trained_with = ""
    if what == "train":
        net.train()
        target = on_device(inputs["targets"], handle, dtype)
        loss_of, optimizer, trained_with = training_parts(path, net, variant == "cuda-graph")

        def make_call(module: Any) -> Callable[[], Any]:
            return training_call(module, optimizer, current, target, loss_of)
    elif what == "inference":
        net.eval()

        def make_call(module: Any) -> Callable[[], Any]:
            return inference_call(module, current)
    else:
        user_step = load_user_module(path).step

        def make_call(module: Any) -> Callable[[], Any]:
            def call() -> Any:  # compiled: the step gets torch.compile(model), as users do
                return user_step(module, *current())
            return call
    call = make_call(model)
    eager = call if model is net else make_call(net)
    graph: CapturedOnFirstCall | None = None
    if variant == "cuda-graph":
        require_cuda(device, variant)
        from harness.backends.torch.graphs import CapturedOnFirstCall  # noqa: PLC0415 - GPU cells only

        initial = {name: tensor.detach().clone() for name, tensor in net.state_dict().items()}
        # Captured by the first step(), the cold call, not here. Its warm-up calls train the
        # model, so the initial weights and a fresh optimizer state go back right after.
        graph = CapturedOnFirstCall(call, handle,
                                    after_capture=lambda: restore(net, initial, optimizer))
        call = graph
    elif variant not in ("as-written", "resident", "compiled"):
        raise VariantUnavailable(f"torch runs no variant {variant!r} of a user model")
    parameters = sum(p.numel() for p in net.parameters())
    extra = {"parameters": parameters, "what": what}
    if trained_with:
        extra["trained_with"] = trained_with
    kept = (path, keep or KEPT_RESULTS[what], snapshot, to_numpy)
    task = (ModelTask(call, *kept, extra=extra) if graph is None
            else GraphModelTask(graph, *kept, extra=extra))
    task.eager = eager
    return task


def count_flops(task: ModelTask) -> tuple[float | None, str, dict[str, Any] | None]:
    """(FLOPs of one call, who counted them, coverage): torch's formulas plus ours for the
    fused ops it has none for (backends/torch/flops.py), around one eager call of the same
    step (a compiled or graph-replayed step runs the same ops, which a dispatch mode cannot
    see). The coverage names the heavy ops that still went uncounted. A plain dispatch mode,
    without FlopCounterMode's module tracker, also counts a step that calls autograd.grad."""
    if task.eager is None:
        return None, "no eager call to count", None
    counted = flops.count(task.eager)
    return float(counted.flops), f"{flops.HOW}, one eager call", counted.coverage

"""A user's torch model in one cell: as written, data resident, torch.compile, CUDA graph."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from backends.torch.device import TorchDevice, capture_cuda_graph, require_cuda
from harness.backend import VariantUnavailable
from workloads.usermodel.common import ModelTask, add_deterministic, nested_map, user_code
from workloads.usermodel.source import UserCodeError, call_user, load_user_module
from workloads.usermodel.spec import KEPT_RESULTS

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
    if variant == "cuda-graph":
        require_cuda(device, variant)
        initial = {name: tensor.detach().clone() for name, tensor in net.state_dict().items()}
        graph, static_output = capture_cuda_graph(call, handle)
        restore(net, initial, optimizer)

        def call() -> Any:
            graph.replay()
            return static_output
    elif variant not in ("as-written", "resident", "compiled"):
        raise VariantUnavailable(f"torch runs no variant {variant!r} of a user model")
    parameters = sum(p.numel() for p in net.parameters())
    extra = {"parameters": parameters, "what": what}
    if trained_with:
        extra["trained_with"] = trained_with
    task = ModelTask(call, path, keep or KEPT_RESULTS[what], snapshot, to_numpy, extra=extra)
    task.eager = eager
    return task


def count_flops(task: ModelTask) -> tuple[float | None, str]:
    """FLOPs of one call by torch's own counter, around one eager call of the same step (a
    compiled or graph-replayed step runs the same ops, which the counter cannot see)."""
    from torch.utils.flop_counter import FlopCounterMode

    if task.eager is None:
        return None, "no eager call to count"
    how = ("torch.utils.flop_counter.FlopCounterMode, one eager call (matmuls and "
           "convolutions; elementwise ops count 0)")
    try:
        with FlopCounterMode(display=False) as counter:
            task.eager()
        return float(counter.get_total_flops()), how
    except RuntimeError as exc:  # its module tracker refuses autograd.grad (jacobian)
        if "autograd.grad" not in str(exc):
            raise
    return float(dispatch_flops(task.eager)), how.replace(
        "FlopCounterMode", "flop_registry (FlopCounterMode's formulas, without its module "
        "tracker, which autograd.grad refuses)")


def dispatch_flops(call: Callable[[], Any]) -> int:
    """FLOPs of one call by torch's own per-op formulas (flop_counter.flop_registry), seen
    through a dispatch mode alone."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Counting(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                self.total += formula(*args, **kwargs, out_val=out)
            return out

    with Counting() as counting:
        call()
    return counting.total

"""Seed 3 in PyTorch as its users write it: nn.Sequential, Adam, CrossEntropyLoss on logits.

as-written: a DataLoader over a TensorDataset, each batch moved with `.to(device)`.
preloaded: the whole set moved to the device once; batches are index slices on the device.
compiled:   as-written with `torch.compile(model)`.
Against the host-bound GPU step (each on preloaded data, so only the step itself changes):
adam-fused / adam-foreach: Adam(fused=True) / Adam(foreach=True).
cuda-graph: gather, forward, backward and Adam(capturable=True) captured once in a CUDA graph,
            replayed per batch with the batch's indices copied into a static buffer.
reduce-overhead: the whole training step (gather, forward, backward, Adam), written
            functionally, under torch.compile(mode="reduce-overhead"): one CUDA graph
            through Inductor.
One step() is one epoch over the shared numpy order, so torch and TensorFlow see the same batches.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler, TensorDataset

from harness.backend import StepMarks, VariantUnavailable
from harness.backends.torch.device import TorchDevice, capture_cuda_graph, require_cuda
from harness.workloads.mnist import KERAS_ONLY_VARIANTS, MnistInputs

SEED = 0
EVAL_BATCH = 1000
# Eager steps (real batches, on a side stream) before the training step is captured.
GRAPH_WARMUP_STEPS = 3
PIXELS, CLASSES = 28 * 28, 10


def build_model(hidden_units: tuple[int, ...], dropout: float) -> nn.Sequential:
    """Flatten -> (Linear, ReLU, Dropout) per hidden layer -> Linear(10): logits, no softmax."""
    layers: list[nn.Module] = [nn.Flatten()]
    width = PIXELS
    for units in hidden_units:
        layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(dropout)]
        width = units
    layers.append(nn.Linear(width, CLASSES))
    return nn.Sequential(*layers)


class EpochOrderSampler(Sampler[int]):
    """Yields the current epoch's shared order, standing in for DataLoader's shuffle=True."""

    def __init__(self, size: int) -> None:
        self.order: list[int] = list(range(size))

    def __iter__(self) -> Iterator[int]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)


class AdamFlags(TypedDict, total=False):
    """torch.optim.Adam's switches for how the same update is launched."""

    fused: bool
    foreach: bool
    capturable: bool


class MnistTraining:
    """One model, its optimizer and a batch source; step() trains one epoch."""

    def __init__(self, model: nn.Module, train_model: nn.Module, inputs: MnistInputs,
                 device: TorchDevice, batch_size: int,
                 adam_options: AdamFlags | None = None) -> None:
        self.model = model  # the plain module: parameters and evaluation
        self.train_model = train_model  # what the training loop calls (compiled or not)
        self.device = device.handle
        self.batch_size = batch_size
        self.inputs = inputs
        # Defaults, as Keras' "adam"; the options only choose how the same update is launched.
        self.adam_options = adam_options or {}
        self.optimizer = torch.optim.Adam(model.parameters(), **self.adam_options)
        self.loss_fn = nn.CrossEntropyLoss()
        self.epoch = 0
        self.loss_sum = torch.zeros((), device=self.device)
        self.samples_seen = 0
        # The harness times blocks of an epoch's steps through these (harness.backend).
        self.steps_per_call = -(-len(inputs["y_train"]) // batch_size)
        self.step_marks = StepMarks()

    def batches(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        raise NotImplementedError

    def step(self) -> None:
        self.train_model.train()
        # Summed on the device: a .item() per batch would add a sync the Keras loop does not have.
        self.loss_sum = torch.zeros((), device=self.device)
        self.samples_seen = 0
        for index, (images, labels) in enumerate(self.batches(self.epoch)):
            self.step_marks.before_step(index)
            self.train_batch(images, labels)
            self.samples_seen += labels.shape[0]
        self.epoch += 1

    def train_batch(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """One optimizer step; the loss is summed on the device."""
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.train_model(images), labels)
        loss.backward()
        self.optimizer.step()
        self.loss_sum += loss.detach() * labels.shape[0]

    def test_accuracy(self) -> float:
        self.model.eval()
        x_test = torch.from_numpy(self.inputs["x_test"])
        y_test = torch.from_numpy(self.inputs["y_test"])
        correct = 0
        with torch.no_grad():
            for start in range(0, len(y_test), EVAL_BATCH):
                logits = self.model(x_test[start:start + EVAL_BATCH].to(self.device))
                predicted = logits.argmax(dim=1).cpu()
                correct += int((predicted == y_test[start:start + EVAL_BATCH]).sum())
        return correct / len(y_test)

    def output(self) -> dict[str, dict[str, object]]:
        train_loss = float(self.loss_sum.cpu()) / max(self.samples_seen, 1)
        return {"extra": {
            "params": sum(p.numel() for p in self.model.parameters()),
            "accuracy": self.test_accuracy(),
            "train_loss": train_loss,
            "steps_per_call": self.steps_per_call,
            "samples_distinct": self.inputs["samples_distinct"],
            "data_source": self.inputs["data_source"],
            "epochs_run": self.epoch,
            **{f"adam_{name}": value for name, value in self.adam_options.items()},
        }}


class DataLoaderTraining(MnistTraining):
    """The users' loop: a DataLoader on host tensors, every batch copied with .to(device)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        dataset = TensorDataset(torch.from_numpy(self.inputs["x_train"]),
                                torch.from_numpy(self.inputs["y_train"]))
        self.sampler = EpochOrderSampler(len(dataset))
        self.loader = DataLoader(dataset, batch_size=self.batch_size, sampler=self.sampler)

    def batches(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        orders = self.inputs["orders"]
        self.sampler.order = orders[epoch % len(orders)].tolist()
        for images, labels in self.loader:
            yield images.to(self.device), labels.to(self.device)


class PreloadedTraining(MnistTraining):
    """The whole set (and every epoch's order) on the device once; batches are slices there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.x_train = torch.from_numpy(self.inputs["x_train"]).to(self.device)
        self.y_train = torch.from_numpy(self.inputs["y_train"]).to(self.device)
        self.orders = torch.from_numpy(self.inputs["orders"]).to(self.device)

    def batches(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = self.orders[epoch % len(self.orders)]
        for start in range(0, len(order), self.batch_size):
            batch_index = order[start:start + self.batch_size]
            yield self.x_train[batch_index], self.y_train[batch_index]


def compile_failures_unavailable(epoch: Callable[[], None]) -> None:
    """Run an epoch of a compiled model; a compiler that cannot run here means unavailable."""
    try:
        epoch()
    except (torch._dynamo.exc.BackendCompilerFailed,
            torch._inductor.exc.InductorError) as exc:
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise VariantUnavailable(f"torch.compile failed here: {type(exc).__name__}: "
                                 f"{reason}") from exc


class CompiledTraining(DataLoaderTraining):
    """as-written with torch.compile(model); a compiler missing here makes it unavailable."""

    def step(self) -> None:
        compile_failures_unavailable(super().step)


class ReduceOverheadTraining(PreloadedTraining):
    """preloaded, the whole training step under torch.compile(mode="reduce-overhead").

    Gather, forward, loss, backward and the Adam update are one compiled function, written
    functionally so that Dynamo traces it as one graph and Inductor captures it in one CUDA
    graph: torch.func.grad_and_value over the module's parameters, and Adam's update (the
    default torch.optim.Adam rule) as foreach ops on those same parameters and its state.

    Why not `loss.backward(); optimizer.step()` inside the compiled function, as users write
    it first: Dynamo breaks the graph at Tensor.backward() (trace_autograd_ops is off by
    default), and torch.optim.Optimizer.step breaks it twice on purpose around the update.
    That form ran as 3 graphs with eager glue between them: 1.14 ms per step on the H200 for
    the small net at batch 32 against 185 us for the hand-captured cuda-graph variant (issue
    24); compiled autograd for the backward did not change that (1.02 vs 0.98 ms, wide net).
    Whether graphs were captured, graph breaks and torch's skip reasons are recorded in
    extra['cuda_graphs']. `mode` is "default" where CUDA graphs cannot run (the CPU test of
    the same compiled step).
    """

    FORM = ("functional: torch.func.grad_and_value over the module's parameters, Adam's "
            "update as foreach ops (one graph)")

    def __init__(self, *args: Any, mode: str = "reduce-overhead", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from harness.backends.torch.graphs import AdamState, CompileWatch  # noqa: PLC0415

        self.watch = CompileWatch(cuda_graphs_expected=mode == "reduce-overhead")
        self.names = [name for name, _ in self.model.named_parameters()]
        # Views of the module's own parameters: the compiled update writes the module's
        # weights in place, so evaluation reads what training made.
        self.params = [param.detach() for param in self.model.parameters()]
        self.adam = AdamState(self.params, **self.optimizer.defaults)
        # Static addresses: a replay neither copies the training set in nor treats the
        # updated weights and moments as fresh inputs.
        for tensor in (self.x_train, self.y_train, *self.params, *self.adam.tensors()):
            torch._dynamo.mark_static_address(tensor)
        self.mode = mode
        self.compiled_step = torch.compile(self.whole_step, mode=mode, dynamic=False)

    def batch_loss(self, params: list[torch.Tensor], images: torch.Tensor,
                   labels: torch.Tensor) -> torch.Tensor:
        logits = torch.func.functional_call(self.train_model, dict(zip(self.names, params)),
                                            (images,))
        return self.loss_fn(logits, labels)

    def whole_step(self, batch_index: torch.Tensor) -> torch.Tensor:
        """One optimizer step on the batch at these indices; returns the batch's mean loss."""
        images = self.x_train.index_select(0, batch_index)
        labels = self.y_train.index_select(0, batch_index)
        grads, loss = torch.func.grad_and_value(self.batch_loss)(self.params, images, labels)
        self.adam.update(self.params, grads)
        return loss.detach()

    def step(self) -> None:
        compile_failures_unavailable(self.epoch_of_indices)

    def epoch_of_indices(self) -> None:
        self.train_model.train()
        self.loss_sum = torch.zeros((), device=self.device)
        self.samples_seen = 0
        order = self.orders[self.epoch % len(self.orders)]
        for index, start in enumerate(range(0, len(order), self.batch_size)):
            self.step_marks.before_step(index)
            batch_index = order[start:start + self.batch_size]
            if self.mode == "reduce-overhead":
                # A new iteration: the previous replay's outputs may be overwritten now.
                torch.compiler.cudagraph_mark_step_begin()
            loss = self.compiled_step(batch_index)
            # Read before the next replay can overwrite it.
            self.loss_sum += loss * len(batch_index)
            self.samples_seen += len(batch_index)
        self.epoch += 1

    def output(self) -> dict[str, dict[str, object]]:
        found = super().output()
        found["extra"]["cuda_graphs"] = {**self.watch.record(), "form": self.FORM}
        return found


class GraphTraining(PreloadedTraining):
    """preloaded, with the whole training step captured in one CUDA graph and replayed.

    Every batch is trained exactly once: the first GRAPH_WARMUP_STEPS batches run eagerly on
    a side stream (as capture requires), the next batch is captured (capture records without
    running) and then replayed, and the rest are replays. A short last batch runs eagerly.
    The warm-up steps and the capture run inside the first step() (epoch 1, the cold call),
    never in make_task, so the capture's cost is in the cold figure.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.static_index = torch.zeros(self.batch_size, dtype=torch.int64, device=self.device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.eager_steps = 0

    def step(self) -> None:
        self.train_model.train()
        # Zeroed in place: the captured graph adds into this very tensor.
        self.loss_sum.zero_()
        self.samples_seen = 0
        order = self.orders[self.epoch % len(self.orders)]
        for start in range(0, len(order), self.batch_size):
            self.step_marks.before_step(start // self.batch_size)
            batch_index = order[start:start + self.batch_size]
            if len(batch_index) == self.batch_size:
                self.static_index.copy_(batch_index)
                self.graph_step()
            else:
                self.body(batch_index)
            self.samples_seen += len(batch_index)
        self.epoch += 1

    def body(self, batch_index: torch.Tensor) -> None:
        """The step as captured: gather on the device, forward, backward, Adam, loss sum."""
        self.optimizer.zero_grad(set_to_none=True)  # Python only: backward makes fresh grads
        images = self.x_train.index_select(0, batch_index)
        labels = self.y_train.index_select(0, batch_index)
        loss = self.loss_fn(self.train_model(images), labels)
        loss.backward()
        self.optimizer.step()
        self.loss_sum.add_(loss.detach() * len(batch_index))

    def graph_step(self) -> None:
        if self.graph is not None:
            self.graph.replay()
            return
        if self.eager_steps < GRAPH_WARMUP_STEPS:
            self.eager_steps += 1
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                self.body(self.static_index)
            torch.cuda.current_stream(self.device).wait_stream(side)
            return
        self.graph, _ = capture_cuda_graph(lambda: self.body(self.static_index), self.device,
                                           warmup_calls=0)
        self.graph.replay()  # the captured batch itself


def check_compile_possible(device: TorchDevice) -> None:
    """Inductor needs a C++ compiler for CPU code (and Triton for GPU code)."""
    if not hasattr(torch, "compile"):
        raise VariantUnavailable(f"torch {torch.__version__} has no torch.compile")
    if not device.is_gpu and not any(shutil.which(name) for name in ("g++", "c++", "clang++")):
        raise VariantUnavailable("torch.compile on CPU needs a C++ compiler (g++ or clang++); "
                                 "none found")
    if device.is_gpu:
        try:
            import triton  # noqa: F401, PLC0415 - only to know whether inductor can run
        except ImportError:
            raise VariantUnavailable("torch.compile on GPU needs triton; not installed") from None


TRAININGS = {"as-written": DataLoaderTraining, "preloaded": PreloadedTraining,
             "compiled": CompiledTraining, "adam-fused": PreloadedTraining,
             "adam-foreach": PreloadedTraining, "cuda-graph": GraphTraining,
             "reduce-overhead": ReduceOverheadTraining}
ADAM_OPTIONS: dict[str, AdamFlags] = {
    "adam-fused": {"fused": True}, "adam-foreach": {"foreach": True},
    "cuda-graph": {"capturable": True}, "reduce-overhead": {"capturable": True}}


def make_task(case: dict, variant: str, device: TorchDevice,
              inputs: MnistInputs) -> MnistTraining:
    if variant in KERAS_ONLY_VARIANTS:
        raise VariantUnavailable(f"{variant} is a Keras fit option (steps_per_execution); "
                                 "torch's counterparts are cuda-graph and reduce-overhead")
    if variant in ("cuda-graph", "reduce-overhead"):
        require_cuda(device, variant)
    torch.manual_seed(SEED)  # same initial weights and dropout masks on every run
    model = build_model(tuple(inputs["hidden_units"]), inputs["dropout"]).to(device.handle)
    train_model: nn.Module = model
    if variant in ("compiled", "reduce-overhead"):
        check_compile_possible(device)
    if variant == "compiled":  # compiled lazily: its cost lands in the cold epoch
        # torch.compile(module) returns an OptimizedModule (a Module); its stub says Callable.
        train_model = torch.compile(model)  # type: ignore[assignment]
    return TRAININGS[variant](model, train_model, inputs, device, case["batch_size"],
                              ADAM_OPTIONS.get(variant))


def step_features(step: Any, variant: str, inputs: Any,
                  seconds_per_call: float | None) -> dict[str, Any]:
    """The features pass of a CPU case (harness/run/casepasses.py features_pass), recorded by
    backends/torch/features.py: the step's ops for a GPU prediction (docs/predict.md)."""
    from harness.backends.torch.features import cell_features  # noqa: PLC0415 - after the check

    return cell_features(step, variant, inputs, seconds_per_call)

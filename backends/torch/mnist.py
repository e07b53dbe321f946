"""Seed 3 in PyTorch as its users write it: nn.Sequential, Adam, CrossEntropyLoss on logits.

as-written: a DataLoader over a TensorDataset, each batch moved with `.to(device)`.
preloaded: the whole set moved to the device once; batches are index slices on the device.
compiled:   as-written with `torch.compile(model)`.
One step() is one epoch over the shared numpy order, so torch and TensorFlow see the same batches.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler, TensorDataset

from backends.torch.device import TorchDevice
from harness.backend import VariantUnavailable

SEED = 0
EVAL_BATCH = 1000
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


class MnistTraining:
    """One model, its optimizer and a batch source; step() trains one epoch."""

    def __init__(self, model: nn.Module, train_model: nn.Module, inputs: dict[str, Any],
                 device: TorchDevice, batch_size: int) -> None:
        self.model = model  # the plain module: parameters and evaluation
        self.train_model = train_model  # what the training loop calls (compiled or not)
        self.device = device.handle
        self.batch_size = batch_size
        self.inputs = inputs
        self.optimizer = torch.optim.Adam(model.parameters())  # defaults, as Keras' "adam"
        self.loss_fn = nn.CrossEntropyLoss()
        self.epoch = 0
        self.loss_sum = torch.zeros((), device=self.device)
        self.samples_seen = 0

    def batches(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        raise NotImplementedError

    def step(self) -> None:
        self.train_model.train()
        # Summed on the device: a .item() per batch would add a sync the Keras loop does not have.
        self.loss_sum = torch.zeros((), device=self.device)
        self.samples_seen = 0
        for images, labels in self.batches(self.epoch):
            self.optimizer.zero_grad()
            loss = self.loss_fn(self.train_model(images), labels)
            loss.backward()
            self.optimizer.step()
            self.loss_sum += loss.detach() * labels.shape[0]
            self.samples_seen += labels.shape[0]
        self.epoch += 1

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

    def output(self) -> dict[str, Any]:
        train_loss = float(self.loss_sum.cpu()) / max(self.samples_seen, 1)
        return {"extra": {
            "params": sum(p.numel() for p in self.model.parameters()),
            "accuracy": self.test_accuracy(),
            "train_loss": train_loss,
            "steps_per_call": -(-len(self.inputs["y_train"]) // self.batch_size),
            "samples_distinct": self.inputs["samples_distinct"],
            "data_source": self.inputs["data_source"],
            "epochs_run": self.epoch,
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


class CompiledTraining(DataLoaderTraining):
    """as-written with torch.compile(model); a compiler missing here makes it unavailable."""

    def step(self) -> None:
        try:
            super().step()
        except (torch._dynamo.exc.BackendCompilerFailed,
                torch._inductor.exc.InductorError) as exc:
            reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            raise VariantUnavailable(f"torch.compile failed here: {type(exc).__name__}: "
                                     f"{reason}") from exc


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
             "compiled": CompiledTraining}


def make_task(case: dict, variant: str, device: TorchDevice,
              inputs: dict[str, np.ndarray]) -> MnistTraining:
    torch.manual_seed(SEED)  # same initial weights and dropout masks on every run
    model = build_model(tuple(inputs["hidden_units"]), inputs["dropout"]).to(device.handle)
    train_model: nn.Module = model
    if variant == "compiled":
        check_compile_possible(device)
        train_model = torch.compile(model)  # compiled lazily: its cost lands in the cold epoch
    return TRAININGS[variant](model, train_model, inputs, device, case["batch_size"])

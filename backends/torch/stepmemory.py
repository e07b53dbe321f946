"""What one torch step must hold in memory, measured in one eager call of it.

The allocator's peak over a sweep of small batches is a poor guide to the largest batch that
fits: it includes workspace the libraries take because memory is free (cuDNN picks
workspace-hungry convolution algorithms at small batches, smaller ones near the limit), so a
line fitted to it errs low. This module measures instead what the step cannot give back:

    weights (parameters and buffers) + gradients + optimizer state
    + the activations autograd saves for the backward pass (saved_tensors_hooks)
    + the largest transient: the largest single op's output (a dispatch mode sees every aten op
      of forward, backward and update); in a step that saves nothing for backward (inference)
      the op's inputs too, since nothing else holds them

Tensors are counted by their storage, once per (device, address): a saved view of a weight, or
the same activation saved by two ops, costs nothing more. The sum is a little above the true
peak of live tensors (saved activations are freed during the backward while its gradients
appear; the transient is added to all of them), which leaves room for the allocator's rounding
and the smaller workspaces the libraries fall back to. The same tensors, storages and ops
exist on a CPU and on a GPU, so a CPU run measures what a GPU's step would hold (cuDNN's own
saved buffers, e.g. batch norm's reserve space, appear in a GPU pass only).

The pass runs once per case after the timed samples, the check's results and the FLOP count
(harness.run.casepasses `required_memory_record`), so it reaches no timed sample and no kept
result; it trains the model one more step, as the FLOP count's eager call does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# The case `extra` keys the record uses (harness.analysis.memoryfit REQUIRED_CASE_FIGURE reads
# the first).
REQUIRED_KEY = "required_device_bytes"
PARTS_KEY = "required_device_parts"

StorageKey = tuple[str, int]  # (device, address of the storage's first byte)


def storages(values: Iterable[Any]) -> dict[StorageKey, int]:
    """The distinct storages behind the tensors among VALUES: key -> bytes. Tensors without a
    real storage of their own (meta, wrapper subclasses) are left out."""
    found: dict[StorageKey, int] = {}
    for value in values:
        if not isinstance(value, torch.Tensor) or value.device.type == "meta":
            continue
        try:
            storage = value.untyped_storage()
            found[(str(value.device), storage.data_ptr())] = storage.nbytes()
        except (RuntimeError, NotImplementedError, TypeError):
            continue
    return found


class TransientWatch(TorchDispatchMode):
    """The largest op of a call: its new outputs' bytes (a view or an in-place op makes none),
    and its working set (those plus its inputs other than the weights and optimizer state).
    Keeps storage keys and byte counts only, never a tensor: holding one would change the
    memory it measures."""

    def __init__(self, persistent: Iterable[StorageKey]) -> None:
        super().__init__()
        self.persistent = frozenset(persistent)
        self.largest_output = 0
        self.largest_working_set = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = storages(tree_leaves((args, kwargs)))
        outputs = storages(tree_leaves(out))
        new = sum(size for key, size in outputs.items() if key not in inputs)
        held_inputs = sum(size for key, size in inputs.items()
                          if key not in self.persistent and key not in outputs)
        self.largest_output = max(self.largest_output, new)
        self.largest_working_set = max(self.largest_working_set,
                                       held_inputs + sum(outputs.values()))
        return out


@dataclass(frozen=True)
class StepMemory:
    """The parts of what one step holds, bytes; each storage counted in the first part that
    holds it, in this order."""

    weights: int
    gradients: int
    optimizer_state: int
    saved_activations: int
    largest_transient: int

    @property
    def total(self) -> int:
        return (self.weights + self.gradients + self.optimizer_state + self.saved_activations
                + self.largest_transient)

    def record(self) -> dict[str, object]:
        """The case extra: the total, and its parts (key names as the fields here)."""
        return {REQUIRED_KEY: self.total,
                PARTS_KEY: {"weights": self.weights, "gradients": self.gradients,
                            "optimizer_state": self.optimizer_state,
                            "saved_activations": self.saved_activations,
                            "largest_transient": self.largest_transient}}


def optimizer_tensors(optimizer: torch.optim.Optimizer | None) -> list[torch.Tensor]:
    """Every tensor of the optimizer's state (Adam: exp_avg, exp_avg_sq, step)."""
    if optimizer is None:
        return []
    return [value for state in optimizer.state.values() for value in state.values()
            if isinstance(value, torch.Tensor)]


def bytes_outside(found: dict[StorageKey, int], *counted: dict[StorageKey, int]) -> int:
    return sum(size for key, size in found.items() if not any(key in seen for seen in counted))


def measure_step(call: Callable[[], Any], net: torch.nn.Module,
                 optimizer: torch.optim.Optimizer | None) -> StepMemory:
    """Run CALL (one eager step of NET) once, watched, and add up what it holds.

    Weights and optimizer state are read before the call (their addresses do not move: the
    update writes in place), gradients after it (set_to_none frees them at the step's start).
    A saved activation is counted unless it is a weight or optimizer state; a gradient is not
    subtracted from it, since a gradient may reuse the address of an activation the backward
    already freed.
    """
    weights = storages(chain(net.parameters(), net.buffers()))
    state = storages(optimizer_tensors(optimizer))
    saved: dict[StorageKey, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.update(storages([tensor]))
        return tensor

    watch = TransientWatch(chain(weights, state))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), watch:
        call()
    gradients = storages(parameter.grad for parameter in net.parameters())
    saved_bytes = bytes_outside(saved, weights, state)
    return StepMemory(
        weights=sum(weights.values()), gradients=bytes_outside(gradients, weights),
        optimizer_state=bytes_outside(state, weights, gradients),
        saved_activations=saved_bytes,
        largest_transient=(watch.largest_output if saved_bytes
                           else watch.largest_working_set))

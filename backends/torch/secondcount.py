"""The second opinion on a torch FLOP count: each covered layer's share of the op-level count
beside what its shapes say (backends/torch/shapeflops.py), forward and backward apart.

While flops.count runs the call, global module hooks see every covered layer call
(shapeflops.LAYERS): the forward's ops run between its hooks, so they are the layer's; the
autograd nodes its forward made (found walking back from its outputs to its inputs) are the
layer's, so the backward ops run under them (torch._C._current_autograd_node) are the
layer's backward. When the backward reaches a layer call, the engine says which gradients it
will compute through it (of its inputs, of its weights), and the shapes give that backward's
FLOPs. A layer's phase with an op that had no formula is not compared: that count is already
a lower bound (its coverage says so).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from harness.backends.torch import shapeflops
from harness.data import secondopinion

BY = ("module shapes: " + shapeflops.COVERED + ", forward and backward from each call's "
      "shapes (backends/torch/shapeflops.py)")


@dataclass
class Tally:
    """One layer's phase (forward or backward): the op-level FLOPs seen under it, by op, and
    the range its shapes give."""

    label: str
    counted: int = 0
    ops: Counter[str] = field(default_factory=Counter)
    uncounted: set[str] = field(default_factory=set)
    low: int = 0
    high: int = 0
    unreadable: str = ""  # why the shapes could not be read (then nothing is compared)
    gradients: set[str] = field(default_factory=set)  # each call's gradients, in words


@dataclass
class LayerCall:
    """One call of a covered layer, kept until its backward: shapes and where gradients go."""

    layer: shapeflops.Layer
    shapes: shapeflops.Shapes
    input_targets: list[Any]  # per input: the node its gradient flows into, or None
    weight_targets: list[Any]  # the AccumulateGrad nodes of the layer's parameters
    # Which gradients could flow at all, read from the tensors (an input's requires_grad, any
    # trainable parameter), not from the nodes the walk found: under autocast a weight reaches
    # its layer through a cast, and autocast caches that cast for the whole region, so a layer
    # called twice finds the first call's cast node claimed and no accumulator behind it.
    inputs_need: tuple[bool, ...] = ()
    weights_need: bool = False
    passes: set[int] = field(default_factory=set)  # backward passes that reached it

    def engine_grads(self) -> shapeflops.Grads:
        """The gradients the engine says this backward computes; None (cannot say) where a
        gradient could flow but the walk found no node to ask about."""
        inputs = tuple(_will_execute(node) if node is not None else (None if need else False)
                       for node, need in zip(self.input_targets, self.inputs_need, strict=True))
        if self.weight_targets:
            weights = _any([_will_execute(node) for node in self.weight_targets])
        else:
            weights = None if self.weights_need else False
        return shapeflops.Grads(inputs, weights)

    def possible_grads(self) -> shapeflops.Grads:
        """Every gradient that could flow through this call (the top of its range)."""
        return shapeflops.Grads(tuple(None if need else False for need in self.inputs_need),
                                None if self.weights_need else False)


def _tensors(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _input_tensor(value: Any) -> torch.Tensor | None:
    """A layer input as its gradient sees it (a packed sequence's data)."""
    if isinstance(value, torch.nn.utils.rnn.PackedSequence):
        return value.data
    return value if isinstance(value, torch.Tensor) else None


def _will_execute(node: Any) -> bool | None:
    """Whether this backward computes into `node`; None where the engine cannot say. The
    engine refuses to answer for one kind of node only, a leaf that autograd.grad returns the
    gradient of (torch/csrc/autograd/init.cpp, will_engine_execute_node: it raises after
    finding the leaf in the pass, due to run and captured), so that refusal is a yes."""
    if node is None:
        return False
    try:
        return bool(torch._C._will_engine_execute_node(node))
    except RuntimeError as exc:
        return True if "A leaf node was passed" in str(exc) else None


def _said(grads: shapeflops.Grads, could: bool = False) -> str:
    """'input yes, weights cannot say': a backward's gradients in words (the record's); of
    the gradients that `could` flow, the unknown ones (None) are the ones that can."""
    words = {True: "yes", False: "no", None: "yes" if could else "cannot say"}
    inputs = [f"input{index + 1 if len(grads.inputs) > 1 else ''} {words[flag]}"
              for index, flag in enumerate(grads.inputs)]
    return ", ".join([*inputs, f"weights {words[grads.weights]}"])


def _any(flags: list[bool | None]) -> bool | None:
    if any(flag is True for flag in flags):
        return True
    return False if all(flag is False for flag in flags) else None


class LayerShapes:
    """Hooks every covered layer call while a count runs; attributes the count's ops to the
    layer and phase they ran under; records what the shapes say."""

    def __init__(self, root: torch.nn.Module | None = None) -> None:
        self.names = {id(module): name for name, module in root.named_modules()} \
            if root is not None else {}
        self.stack: list[torch.nn.Module] = []
        self.tallies: dict[tuple[int, str], Tally] = {}
        self.claimed: dict[int, int] = {}  # id(autograd node) -> id(layer)
        self.kept: list[Any] = []  # nodes stay alive, so their ids stay theirs
        self.layers: dict[int, torch.nn.Module] = {}  # id -> layer (alive, as the nodes)
        self.labels: dict[int, str] = {}
        self.handles: list[Any] = []  # the hooks, removed when the count ends
        self.broken = ""  # why the attribution failed: then no part is compared

    def __enter__(self) -> LayerShapes:
        hooks = torch.nn.modules.module
        self.handles = [hooks.register_module_forward_pre_hook(self.entered),
                        hooks.register_module_forward_hook(self.left, with_kwargs=True,
                                                           always_call=True)]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    # -- layers entered and left --

    def label(self, module: torch.nn.Module) -> str:
        key = id(module)
        if key not in self.labels:
            name = self.names.get(key)
            self.labels[key] = f"{type(module).__name__} " + (
                f"'{name}'" if name else f"#{len(self.labels) + 1}")
            self.layers[key] = module
        return self.labels[key]

    def tally(self, module: torch.nn.Module, phase: str) -> Tally:
        key = (id(module), phase)
        if key not in self.tallies:
            self.tallies[key] = Tally(f"{self.label(module)} {phase}")
        return self.tallies[key]

    def entered(self, module: torch.nn.Module, args: Any) -> None:
        # A layer run again inside the backward (activation checkpointing) is not a new call.
        if torch._C._current_autograd_node() is None and shapeflops.layer_of(module):
            self.stack.append(module)

    def left(self, module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        if not self.stack or self.stack[-1] is not module:
            return
        self.stack.pop()
        layer = shapeflops.layer_of(module)
        if layer is None:
            return
        # Inputs in the layer's own order (query, key, value), however they were passed.
        named = [kwargs[name] for name in layer.names[len(args):] if name in kwargs]
        inputs = [*args, *named, *(v for k, v in kwargs.items() if k not in layer.names)]
        forward = self.tally(module, "forward")
        try:
            shapes = layer.shapes(module, inputs, output)
            self.follow_backward(module, layer, shapes, inputs, output)
        except Exception as exc:  # noqa: BLE001 - a second opinion never costs the count
            forward.unreadable = f"its shapes could not be read ({type(exc).__name__})"
            return
        forward.low += shapes["forward"]
        forward.high += shapes["forward"]

    # -- the backward through a layer call --

    def follow_backward(self, module: torch.nn.Module, layer: shapeflops.Layer,
                        shapes: shapeflops.Shapes, inputs: list[Any], output: Any) -> None:
        """Claim the autograd nodes this call made and hook the backward's arrival."""
        tops = list({id(t.grad_fn): t.grad_fn for t in _tensors(output)
                     if t.grad_fn is not None}.values())
        if not tops:
            return
        given = [_input_tensor(value) for value in inputs[:len(layer.names)]]
        boundary = {id(t.grad_fn) for t in _tensors(inputs) if t.grad_fn is not None}
        leaving = self.claim(module, tops, boundary)
        parameters = {id(p) for p in module.parameters()}
        call = LayerCall(layer, shapes,
                         [self.target(tensor, leaving) for tensor in given],
                         [node for node in leaving
                          if id(getattr(node, "variable", None)) in parameters],
                         tuple(tensor is not None and tensor.requires_grad for tensor in given),
                         any(p.requires_grad for p in module.parameters()))
        for node in tops:
            self.handles.append(node.register_prehook(
                lambda grads, call=call, module=module: self.reached(module, call)))

    def claim(self, module: torch.nn.Module, tops: list[Any], boundary: set[int]) -> list[Any]:
        """Walk back from the outputs' nodes to the inputs' (or earlier layers'), claiming the
        nodes between for `module`; returns the nodes where the walk left it."""
        leaving: list[Any] = []
        queue, seen = list(tops), set()
        while queue:
            node = queue.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if id(node) in boundary or id(node) in self.claimed or \
                    type(node).__name__ == "AccumulateGrad":
                leaving.append(node)
                continue
            self.claimed[id(node)] = id(module)
            self.layers[id(module)] = module
            self.kept.append(node)
            queue.extend(next_node for next_node, _ in node.next_functions)
        self.kept.extend(leaving)
        return leaving

    @staticmethod
    def target(tensor: torch.Tensor | None, leaving: list[Any]) -> Any:
        """Where an input's gradient goes: its node, or a leaf's accumulator; None if none."""
        if tensor is None or not tensor.requires_grad:
            return None
        if tensor.grad_fn is not None:
            return tensor.grad_fn
        return next((node for node in leaving if getattr(node, "variable", None) is tensor),
                    None)

    def reached(self, module: torch.nn.Module, call: LayerCall) -> None:
        """The backward arrived at a layer call: its range, once per backward pass."""
        task = torch._C._current_graph_task_id()
        if task in call.passes:
            return
        call.passes.add(task)
        backward = self.tally(module, "backward")
        try:
            engine, possible = call.engine_grads(), call.possible_grads()
            low, high = call.layer.backward(call.shapes, engine)
            # The top of the range allows every gradient that could flow: the engine's answer
            # is read through autograd nodes, and on the H200 under bf16 autocast a deep conv
            # net's convolution_backward computed both gradients where it said one (a false
            # 2x dispute on every conv). A formula error still shows above it.
            high = max(high, call.layer.backward(call.shapes, possible)[1])
            backward.gradients.add(f"engine: {_said(engine)}; could flow: "
                                   f"{_said(possible, could=True)}")
        except Exception as exc:  # noqa: BLE001 - never break the user's backward
            backward.unreadable = f"its gradients could not be read ({type(exc).__name__})"
            return
        backward.low += low
        backward.high += high

    # -- the op-level count, op by op (flops.Counting calls this) --

    def op(self, name: str, flops: int | None) -> None:
        """One heavy op of the count: its FLOPs (None: no formula) go to the layer and phase
        it ran under, if any."""
        try:
            self._attribute(name, flops)
        except Exception:  # noqa: BLE001 - a second opinion never costs the count
            self.broken = f"an op could not be attributed ({name})"

    def _attribute(self, name: str, flops: int | None) -> None:
        node = torch._C._current_autograd_node()
        if node is not None:
            owner = self.claimed.get(id(node))
            key = None if owner is None else (owner, "backward")
        else:
            key = (id(self.stack[-1]), "forward") if self.stack else None
        if key is None:
            return
        tally = self.tally(self.layers[key[0]] if key[1] == "backward" else self.stack[-1],
                           key[1])
        if flops is None:
            tally.uncounted.add(name)
        else:
            tally.counted += flops
            tally.ops[name] += flops

    def record(self) -> dict[str, object] | None:
        """The stored second opinion (harness.data.secondopinion), or None where no covered
        layer ran."""
        if not self.tallies:
            return None
        if self.broken:
            return secondopinion.record(BY, "module shapes", [], [self.broken])
        parts, skipped = [], []
        for tally in self.tallies.values():
            if not tally.ops and not tally.uncounted and tally.low > 0 and \
                    tally.label.endswith(" backward"):
                # Nothing at all ran under the layer's backward nodes: the attribution missed
                # them (on CUDA a causal nn.MultiheadAttention's backward ran under nodes the
                # walk did not claim), which says nothing of the count; not compared.
                skipped.append(f"{tally.label}: no op was seen under its backward nodes")
                continue
            if tally.uncounted or tally.unreadable:
                skipped.append(f"{tally.label}: " + (tally.unreadable or (
                    f"{', '.join(sorted(tally.uncounted))} has no formula (the count is a "
                    "lower bound there)")))
                continue
            parts.append(secondopinion.Part(tally.label, tally.counted, tally.low, tally.high,
                                            dict(tally.ops), " | ".join(sorted(tally.gradients))))
        return secondopinion.record(BY, "module shapes", parts, skipped)

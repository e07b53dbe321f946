"""FLOPs of torch's standard layers from their attributes and the shapes of one call: the
second opinion on the op-level count (backends/torch/secondcount.py compares the two).

Written apart from the op formulas on purpose (backends/torch/flops.py, convflops.py): this
count reads what a person reads, a layer's in/out channels, kernel, groups and the shapes it
was called with, so an op formula that is wrong (torch's grouped weight gradient, 22x) or a
kernel that does other work than its layer needs shows as a disagreement, never as agreement
of one formula with itself. Same convention: 2 FLOPs per multiply-add, bias adds,
activations, softmax and reductions 0, padded taps counted (a dense kernel computes them).

A training step is the forward plus a backward from the same shapes: each gradient the
engine computes through the layer (of its input, of its weights) costs the forward's
contraction once more. Where a layer's backward depends on the kernel (a fused RNN computes
every data gradient, the per-step CPU path only those needed; flash attention recomputes the
scores), the backward is a range, lowest to highest; so is a gradient the engine cannot say
it will compute (autograd.grad on a leaf).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

# One call's shapes as the formulas read them: name -> integer.
Shapes = dict[str, int]
Range = tuple[int, int]


@dataclass(frozen=True)
class Grads:
    """Which gradients a backward computes through one layer call: per input (in the layer's
    order: input; query, key, value) and of its weights. None: the engine cannot say."""

    inputs: tuple[bool | None, ...]
    weights: bool | None

    def low(self, index: int = 0) -> int:
        return int(bool(self.inputs[index])) if index < len(self.inputs) else 0

    def high(self, index: int = 0) -> int:
        return int(self.inputs[index] is not False) if index < len(self.inputs) else 0

    def weights_range(self) -> Range:
        return int(bool(self.weights)), int(self.weights is not False)


def _shape(value: Any) -> list[int]:
    return list(value.shape) if isinstance(value, torch.Tensor) else []


# --- convolutions: nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d ------------------------------

def conv_shapes(module: Any, inputs: Sequence[Any], output: Any) -> Shapes:
    """A convolution's forward: per sample and output position, C_out x C_in/groups x
    prod(kernel) multiply-adds; a transposed one's: per sample and input position,
    C_in x C_out/groups x prod(kernel) (each input scattered through its filters). An
    unbatched input is one sample."""
    dims = len(module.kernel_size)
    transposed = isinstance(module, nn.modules.conv._ConvTransposeNd)
    spatial = _shape(inputs[0] if transposed else output)
    batch = spatial[0] if len(spatial) == dims + 2 else 1
    positions = math.prod(spatial[-dims:])
    kernel = math.prod(module.kernel_size)
    if transposed:
        per = module.in_channels * (module.out_channels // module.groups) * kernel
    else:
        per = module.out_channels * (module.in_channels // module.groups) * kernel
    return {"forward": 2 * batch * positions * per}


def dense_backward(shapes: Shapes, grads: Grads) -> Range:
    """A convolution's or a linear layer's backward: the input gradient and the weight
    gradient each cost the forward's multiply-adds, where computed."""
    low_w, high_w = grads.weights_range()
    return (shapes["forward"] * (grads.low() + low_w),
            shapes["forward"] * (grads.high() + high_w))


# --- nn.Linear ---------------------------------------------------------------------------------

def linear_shapes(module: Any, inputs: Sequence[Any], output: Any) -> Shapes:
    """in x out multiply-adds per row of the input (all leading dimensions are rows)."""
    rows = math.prod(_shape(inputs[0])[:-1])
    return {"forward": 2 * rows * module.in_features * module.out_features}


# --- nn.RNN / nn.LSTM / nn.GRU ------------------------------------------------------------------

GATES_OF_MODE = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def rnn_shapes(module: Any, inputs: Sequence[Any], output: Any) -> Shapes:
    """Per token, layer and direction: the input (width x gates*H), hidden (H_out x gates*H)
    and projection (H x P) products; layer 1 on reads both directions' outputs."""
    sequence = inputs[0]
    if isinstance(sequence, nn.utils.rnn.PackedSequence):
        tokens, batch = int(sequence.data.shape[0]), int(sequence.batch_sizes[0])
    else:
        shape = _shape(sequence)
        tokens = math.prod(shape[:-1])
        batch = 1 if len(shape) == 2 else shape[0 if module.batch_first else 1]
    gates = GATES_OF_MODE[module.mode] * module.hidden_size
    out = module.proj_size or module.hidden_size
    directions = 2 if module.bidirectional else 1
    first_input = directions * module.input_size * gates
    per_token = first_input + directions * (module.num_layers - 1) * out * directions * gates
    per_token += module.num_layers * directions * (out * gates + module.hidden_size
                                                   * module.proj_size)
    return {"forward": 2 * tokens * per_token, "first_input": 2 * tokens * first_input,
            "first_step": 2 * batch * module.num_layers * directions * out * gates}


def rnn_backward(shapes: Shapes, grads: Grads) -> Range:
    """Weight gradients cost the forward once; data gradients once more, all of them in a
    fused kernel (cuDNN, oneDNN: the highest), or, on the per-step path, all but the layer-0
    input's (where the input needs none) and the step-0 hidden states' (zeros) (the lowest)."""
    forward = shapes["forward"]
    low_w, _ = grads.weights_range()
    data_low = forward - shapes["first_step"] - (0 if grads.low() else shapes["first_input"])
    return low_w * forward + data_low, 2 * forward


# --- nn.MultiheadAttention -----------------------------------------------------------------------

def attention_shapes(module: Any, inputs: Sequence[Any], output: Any) -> Shapes:
    """The q, k, v projections (E, kdim, vdim wide, to E), the scores and the weighted sum
    (each query token against each key token, E wide over all heads together) and the output
    projection (E to E). bias_k and add_zero_attn each add one key position."""
    query, key = _shape(inputs[0]), _shape(inputs[1])
    batched = len(query) == 3
    first = batched and module.batch_first
    length, source = (query[1], key[1]) if first else (query[0], key[0])
    batch = (query[0] if module.batch_first else query[1]) if batched else 1
    positions = source + int(module.bias_k is not None) + int(module.add_zero_attn)
    width = module.embed_dim
    shapes = {"q": 2 * batch * length * width * width,
              "k": 2 * batch * source * module.kdim * width,
              "v": 2 * batch * source * module.vdim * width,
              "out": 2 * batch * length * width * width,
              "attention": 2 * 2 * batch * length * positions * width}
    shapes["forward"] = sum(shapes.values())
    return shapes


def attention_backward(shapes: Shapes, grads: Grads) -> Range:
    """Weight gradients of the projections; each projection's input gradient where its input
    needs one; below the projections (where anything upstream needs a gradient) the output
    projection's input gradient and four products of the attention's size (dP, dV, dQ, dK),
    plus, at most, the scores recomputed (a flash kernel's backward)."""
    low_w, high_w = grads.weights_range()
    weights = shapes["q"] + shapes["k"] + shapes["v"] + shapes["out"]
    low = low_w * weights + sum(grads.low(i) * shapes[name] for i, name in enumerate("qkv"))
    high = high_w * weights + sum(grads.high(i) * shapes[name]
                                  for i, name in enumerate("qkv"))
    below = shapes["out"] + 2 * shapes["attention"]
    upstream_low = int(low_w > 0 or any(grads.low(i) for i in range(3)))
    upstream_high = int(high_w > 0 or any(grads.high(i) for i in range(3)))
    return (low + upstream_low * below,
            high + upstream_high * (below + shapes["attention"] // 2))


# --- which layers, and how each is counted --------------------------------------------------

@dataclass(frozen=True)
class Layer:
    """How one kind of layer is counted: its shapes from a call, its backward range."""

    kind: type[nn.Module]
    shapes: Callable[[Any, Sequence[Any], Any], Shapes]
    backward: Callable[[Shapes, Grads], Range]
    names: tuple[str, ...]  # forward's leading arguments, the inputs whose gradients matter


CONVOLUTIONS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
                nn.ConvTranspose3d)
LAYERS = (*(Layer(kind, conv_shapes, dense_backward, ("input",)) for kind in CONVOLUTIONS),
          Layer(nn.Linear, linear_shapes, dense_backward, ("input",)),
          *(Layer(kind, rnn_shapes, rnn_backward, ("input",))
            for kind in (nn.RNN, nn.LSTM, nn.GRU)),
          Layer(nn.MultiheadAttention, attention_shapes, attention_backward,
                ("query", "key", "value")))
COVERED = "nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d, nn.Linear, nn.RNN/LSTM/GRU, " \
          "nn.MultiheadAttention"


def layer_of(module: Any) -> Layer | None:
    """How to count `module`: a covered layer whose forward is torch's own (a subclass that
    rewrites forward may do other work than its attributes say, so it is not counted)."""
    for layer in LAYERS:
        if isinstance(module, layer.kind) and type(module).forward is layer.kind.forward:
            return layer
    return None

"""FLOPs of every convolution op the torch counter meets, forward and backward.

Why the harness's own: torch.utils.flop_counter's formula for `aten.convolution_backward`
drops the group division in the weight gradient, so a grouped convolution's weight gradient
counts `groups` times its work (a depthwise 3x3 over 64 channels, batch 8, 16x16: 155,713,536
FLOPs for forward + backward where the work is 7,077,888; torch 2.13, and 2.11 on the GPU
machine). Upstream's fix (pytorch/pytorch#183405) is not in the torches users have, so these
formulas replace torch's for every op named in CONV_FORMULAS (backends/torch/flops.py
formula_for asks ours first).

Convention, as torch's for contractions: 2 FLOPs per multiply-add; bias adds and the bias
gradient (a reduction) count 0. Dense counting: every (output position, kernel tap) pair of
the op's own shapes counts, including taps that fall on padding or, for a transposed
convolution, outputs its padding crops; that is the work an im2col / implicit-GEMM kernel
does. For a convolution (weight C_out x C_in/groups x k...) that is

    N x prod(output spatial) x C_out x C_in/groups x prod(k)     multiply-adds,

and for a transposed one (weight C_in x C_out/groups x k...), each input element scattered
through its filter, N x prod(input spatial) x C_in x C_out/groups x prod(k). Both are
N x prod(spatial) x prod(weight shape): the weight's shape already holds the group division.

The backward's two products are each the forward's multiply-adds again: the input gradient
(a transposed convolution of the output gradient with the same weight) and the weight
gradient (input against output gradient, per group), each where output_mask asks for it: the
first layer, whose input needs no gradient, computes no input gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from harness.backends.torch.flops import OpArguments


def multiply_adds(batch_input: torch.Tensor, weight: torch.Tensor, output: torch.Tensor,
                  transposed: bool) -> int:
    """Multiply-adds of one convolution, from the op's own tensors (N x C x spatial; an
    unbatched C x spatial input is one sample)."""
    spatial = batch_input if transposed else output
    dims = weight.dim() - 2
    batch = spatial.shape[0] if spatial.dim() == dims + 2 else 1
    return batch * math.prod(spatial.shape[-dims:]) * math.prod(weight.shape)


def _input(args: OpArguments) -> torch.Tensor:
    return args.tensor("input" if "input" in args else "self")


def _transposed(args: OpArguments, name: str) -> bool:
    return args.flag("transposed") if "transposed" in args else "transpose" in name


def forward_formula(name: str) -> Callable[[OpArguments, object], int]:
    """The forward of op `name`: its input, weight and output tensor (the op's result)."""
    def formula(args: OpArguments, out: object) -> int:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{name} returned {type(out).__name__}, not a tensor")
        return 2 * multiply_adds(_input(args), args.tensor("weight"), out,
                                 _transposed(args, name))
    return formula


def backward_formula(name: str) -> Callable[[OpArguments, object], int]:
    """convolution_backward and its kin: the forward's multiply-adds once for the input
    gradient and once for the weight gradient, each where output_mask asks for it (the
    .grad_input overload of _slow_conv2d_backward computes both)."""
    def formula(args: OpArguments, out: object) -> int:
        mask = args.flags("output_mask") if "output_mask" in args else [True, True]
        forward = multiply_adds(_input(args), args.tensor("weight"),
                                args.tensor("grad_output"), _transposed(args, name))
        return 2 * forward * (int(mask[0]) + int(mask[1]))
    return formula


def double_backward(args: OpArguments, out: object) -> int:
    """_convolution_double_backward (a gradient of a gradient): ggO = conv(ggI, W) +
    conv(I, ggW), gI from gO and ggW, gW from ggI and gO; each product is one forward's
    multiply-adds, present where its operand is given and output_mask asks for its result."""
    given_input = args.values.get("ggI") is not None
    given_weight = args.values.get("ggW") is not None
    mask = args.flags("output_mask")
    forward = multiply_adds(args.tensor("self"), args.tensor("weight"), args.tensor("gO"),
                            args.flag("transposed"))
    products = (int(mask[0]) * (int(given_input) + int(given_weight))
                + int(mask[1] and given_weight) + int(mask[2] and given_input))
    return 2 * forward * products


def conv_tbc(args: OpArguments, out: object) -> int:
    """conv_tbc: input T x B x C_in, weight K x C_in x C_out, output T_out x B x C_out."""
    if not isinstance(out, torch.Tensor):
        raise TypeError("conv_tbc returned no tensor")
    return 2 * out.numel() * math.prod(args.tensor("weight").shape[:2])


def conv_tbc_backward(args: OpArguments, out: object) -> int:
    """conv_tbc_backward computes the input and the weight gradients: twice the forward."""
    grad = args.tensor("self")
    return 2 * 2 * grad.numel() * math.prod(args.tensor("weight").shape[:2])


# Every aten convolution op, by the name the counter knows it (namespace.name, no overload).
# Eager code reaches the counter as aten.convolution / aten.convolution_backward (conv1d,
# conv_transpose2d, ... decompose to them above the dispatch mode); the rest are the same
# arithmetic under other names (backend kernels called directly, the privateuse1
# "overrideable" ops, MPS, scripted code calling _convolution).
FORWARD_OPS = (
    "convolution", "_convolution", "convolution_overrideable", "cudnn_convolution",
    "cudnn_convolution_transpose", "cudnn_convolution_relu", "cudnn_convolution_add_relu",
    "miopen_convolution", "miopen_depthwise_convolution", "miopen_convolution_transpose",
    "miopen_convolution_relu", "miopen_convolution_add_relu", "mkldnn_convolution",
    "_mps_convolution", "_mps_convolution_transpose", "_slow_conv2d_forward", "thnn_conv2d",
    "slow_conv3d", "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d",
    "slow_conv_transpose2d", "slow_conv_transpose3d", "_conv_depthwise2d", "conv_depthwise3d",
    "_nnpack_spatial_convolution",
)
BACKWARD_OPS = ("convolution_backward", "convolution_backward_overrideable",
                "_slow_conv2d_backward", "mps_convolution_backward",
                "mps_convolution_transpose_backward")

CONV_FORMULAS: dict[str, Callable[[OpArguments, object], int]] = {
    **{f"aten.{name}": forward_formula(name) for name in FORWARD_OPS},
    **{f"aten.{name}": backward_formula(name) for name in BACKWARD_OPS},
    "aten._convolution_double_backward": double_backward,
    "aten.conv_tbc": conv_tbc,
    "aten.conv_tbc_backward": conv_tbc_backward,
}

"""FLOPs of one torch call, and what the count covers.

`count(call)` runs the call once under a TorchDispatchMode and adds up, for every aten op that
ran, one of ours (`FORMULAS`, below) or, for an op we have none for, the formula torch's own
FlopCounterMode uses (torch.utils.flop_counter.flop_registry: matmuls, the CUDA attention
kernels). Ours: every convolution, forward and backward (backends/torch/convflops.py: torch's
backward drops the group division of the weight gradient), the fused RNN kernels (cuDNN,
MIOpen, oneDNN, MPS), the CPU and other backends' fused attention, the fused transformer
encoder layer and multi-head attention of nn.Transformer*'s inference fast path, and the
matrix-vector products. Torch's formula is never used for an op we have one for. The same
call gives the second opinion (backends/torch/secondcount.py): each covered layer's share of
the count beside what its shapes say. Convention, as torch's:
2 FLOPs per multiply-add of a contraction; elementwise, normalisation, reduction and data
movement count 0 (and so do bias adds, gate nonlinearities and softmax inside fused kernels).

Coverage: every other op is either known cheap (`is_cheap`: views, copies, creation,
elementwise, reductions, normalisations, pooling, losses, dropout, optimizer updates; its 0 is
the convention, not an omission) or, by default, plausibly compute-heavy: a contraction, FFT,
solver, custom op or anything new whose FLOPs went uncounted. Those are recorded with how
often they ran, and so is the share of the parameters (by element count) that reached an
uncounted heavy op and never an op with a formula, directly or through cheap ops (a
transpose, a dtype cast, a weight-norm product). The count is complete when neither exists.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry
from torch.utils.weak import WeakTensorKeyDictionary

from harness.backends.torch.convflops import CONV_FORMULAS
from harness.backends.torch.secondcount import LayerShapes

# What counted, in words, for the FLOP record (flops_counted_by).
HOW = ("the harness's formulas for convolutions, fused RNN, CPU attention and fused "
       "transformer ops (backends/torch/flops.py, convflops.py), torch.utils.flop_counter's "
       "(FlopCounterMode's flop_registry) for the rest (matmuls, CUDA attention); "
       "elementwise ops count 0")

T = TypeVar("T")

# A FLOP count's coverage as the harness stores it in extra['flops_coverage'] (JSON).
CoverageRecord = dict[str, bool | float | dict[str, int]]


@dataclass(frozen=True)
class FlopCoverage:
    """What a count covers: complete, or the heavy ops without a formula (name -> calls) and
    the share of the parameters' elements that reached only those."""

    complete: bool
    uncounted_ops: Mapping[str, int]
    uncounted_param_share: float

    def record(self) -> CoverageRecord:
        """The record the harness reads as extra['flops_coverage'] (these key names exactly)."""
        return {"complete": self.complete, "uncounted_ops": dict(self.uncounted_ops),
                "uncounted_param_share": self.uncounted_param_share}


@dataclass(frozen=True)
class Counted:
    """FLOPs of one call, what the count covers, and the second opinion on it (the stored
    record of harness.data.secondopinion; None where no covered layer ran)."""

    flops: int
    covered: FlopCoverage
    second_opinion: dict[str, object] | None = None

    @property
    def coverage(self) -> CoverageRecord:
        """The coverage as stored beside the count (a usermodel's count_flops returns it)."""
        return self.covered.record()


class OpArguments:
    """One op call's arguments by their schema names, defaults filled in, read as the type a
    formula needs: a value of another type raises TypeError, and the call counts as uncounted
    (formula_for), never as a wrong number."""

    def __init__(self, values: Mapping[str, object]) -> None:
        self.values = values

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def _typed(self, name: str, kind: type[T]) -> T:
        value = self.values[name]
        if not isinstance(value, kind):
            raise TypeError(f"argument {name} is {type(value).__name__}, not {kind.__name__}")
        return value

    def tensor(self, name: str) -> torch.Tensor:
        return self._typed(name, torch.Tensor)

    def integer(self, name: str) -> int:
        return self._typed(name, int)

    def optional_integer(self, name: str) -> int | None:
        """An int argument that an op may lack or leave None (proj_size)."""
        return None if self.values.get(name) is None else self.integer(name)

    def flag(self, name: str) -> bool:
        return self._typed(name, bool)

    def _items(self, name: str) -> list[object]:
        value = self.values[name]
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"argument {name} is {type(value).__name__}, not a list")
        return list(value)

    def flags(self, name: str) -> list[bool]:
        """A bool[N] argument (output_mask)."""
        return [bool(item) for item in self._items(name)]

    def tensors(self, name: str) -> list[torch.Tensor]:
        """A Tensor[] argument (the MPS LSTM's params)."""
        found = [item for item in self._items(name) if isinstance(item, torch.Tensor)]
        if len(found) != len(self._items(name)):
            raise TypeError(f"argument {name} holds a value that is not a tensor")
        return found


Formula = Callable[[OpArguments, object], int | None]


# ---------------------------------------------------------------------------------------------
# Formulas torch lacks. Each takes the op's arguments by schema name (`bound`) and its output,
# and returns the FLOPs, or None where it cannot tell (the op then counts as uncounted).

# Gates per cell, in the numbering cuDNN, MIOpen and oneDNN share (RNN_RELU, RNN_TANH, LSTM,
# GRU): each gate is one row block of the input and hidden weight matrices.
GATES = {0: 1, 1: 1, 2: 4, 3: 3}


def rnn_flops(mode: int, tokens: int, input_size: int, hidden_size: int, proj_size: int,
              num_layers: int, bidirectional: bool) -> int:
    """Forward FLOPs of a fused multi-layer RNN over `tokens` (time steps x batch, or the
    packed sequence's length): per token, layer and direction, the input matmul
    (in x gates*H), the hidden matmul (H_out x gates*H) and, for an LSTM with proj_size P, the
    projection (H x P), at 2 FLOPs per multiply-add. Layer 1 on reads layer 0's output, of
    width H_out per direction. Bias adds and gate nonlinearities are elementwise: 0."""
    gates = GATES[mode] * hidden_size
    out = proj_size or hidden_size
    directions = 2 if bidirectional else 1
    per_token = 0
    for layer in range(num_layers):
        width = input_size if layer == 0 else out * directions
        per_token += directions * (width * gates + out * gates + (hidden_size * proj_size))
    return 2 * tokens * per_token


def tokens_of(sequence: torch.Tensor) -> int:
    """Time steps x batch of an RNN input: (T, B, in), (B, T, in) or packed (sum, in)."""
    return sequence.numel() // sequence.shape[-1] if sequence.shape[-1] else 0


def fused_rnn(args: OpArguments, out: object) -> int:
    """_cudnn_rnn / miopen_rnn: the whole stack, all layers and directions in one call."""
    sequence = args.tensor("input")
    return rnn_flops(args.integer("mode"), tokens_of(sequence), sequence.shape[-1],
                     args.integer("hidden_size"), args.optional_integer("proj_size") or 0,
                     args.integer("num_layers"), args.flag("bidirectional"))


def fused_rnn_backward(args: OpArguments, out: object) -> int:
    """_cudnn_rnn_backward / miopen_rnn_backward: the data pass (gradients of the inputs and
    hidden states: the forward's matmuls against the transposed weights, the same FLOPs) always
    runs; the weight pass (gate gradients times inputs and states, the same FLOPs again) runs
    where output_mask asks for weight gradients."""
    forward = fused_rnn(args, out)
    return forward * (2 if args.flags("output_mask")[3] else 1)


def mkldnn_rnn_layer(args: OpArguments, out: object) -> int:
    """oneDNN's RNN on the CPU (nn.LSTM without proj_size): one call per layer and direction,
    its input that layer's (layer 0: the model's; later: both directions' outputs, 2H)."""
    sequence = args.tensor("input")
    return rnn_flops(args.integer("mode"), tokens_of(sequence), sequence.shape[-1],
                     args.integer("hidden_size"), 0, 1, False)


def mkldnn_rnn_layer_backward(args: OpArguments, out: object) -> int:
    """oneDNN's backward of one layer and direction computes the data and the weight gradients
    together: twice the forward's matmuls."""
    return 2 * mkldnn_rnn_layer(args, out)


def lstm_mps(args: OpArguments, out: object) -> int:
    """The MPS LSTM: params holds w_ih (4H x in), w_hh (4H x H) [, biases] per layer."""
    hidden = args.tensors("params")[1].shape[-1]
    sequence = args.tensor("input")
    return rnn_flops(2, tokens_of(sequence), sequence.shape[-1], hidden, 0,
                     args.integer("num_layers"), args.flag("bidirectional"))


def lstm_mps_backward(args: OpArguments, out: object) -> int:
    return 2 * lstm_mps(args, out)


def attention_flops(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> int:
    """Scaled dot-product attention, forward: scores Q.K^T (L x E by E x S) and the weighted
    sum P.V (L x S by S x Ev) per batch and query head, 2 FLOPs per multiply-add. Key/value
    may have fewer heads (grouped-query): each query head still does the full products.
    Softmax, scaling and masks are elementwise: 0; a causal mask is not discounted (as in
    torch's formulas for the CUDA kernels)."""
    heads = math.prod(query.shape[:-2])
    length, source = query.shape[-2], key.shape[-2]
    return 2 * heads * length * source * (query.shape[-1] + value.shape[-1])


def attention_backward_flops(query: torch.Tensor, key: torch.Tensor,
                             value: torch.Tensor) -> int:
    """Attention backward, as flash kernels run it: the scores recomputed (Q.K^T), dP = dO.V^T
    and dV = P^T.dO (E_v wide each), dQ = dS.K and dK = dS^T.Q (E wide each)."""
    heads = math.prod(query.shape[:-2])
    length, source = query.shape[-2], key.shape[-2]
    return 2 * heads * length * source * (3 * query.shape[-1] + 2 * value.shape[-1])


def sdpa(args: OpArguments, out: object) -> int:
    return attention_flops(args.tensor("query"), args.tensor("key"), args.tensor("value"))


def sdpa_backward(args: OpArguments, out: object) -> int:
    return attention_backward_flops(args.tensor("query"), args.tensor("key"),
                                    args.tensor("value"))


def sequence_lengths(batch: torch.Tensor) -> list[int] | None:
    """Lengths of the sequences in a (B, L, E) batch, or of a nested tensor's rows (the
    inference fast path packs padded batches so); None where neither applies."""
    if batch.is_nested:
        return [int(size[0]) for size in batch._nested_tensor_size().tolist()]
    if batch.dim() != 3:
        return None
    return [batch.shape[1]] * batch.shape[0]


def native_multi_head_attention(args: OpArguments, out: object) -> int | None:
    """nn.MultiheadAttention's fast path (eval, no grad): the q, k and v projections
    (E x E each, over the query's and the key's tokens), the attention of every query token
    to every key token of its sequence (E wide over all heads, both products), the output
    projection (E x E)."""
    queries, keys = sequence_lengths(args.tensor("query")), sequence_lengths(args.tensor("key"))
    if queries is None or keys is None:
        return None
    width = args.integer("embed_dim")
    pairs = sum(q * k for q, k in zip(queries, keys))
    projections = 2 * width * width * (2 * sum(queries) + 2 * sum(keys))
    return projections + 4 * width * pairs


def transformer_encoder_layer(args: OpArguments, out: object) -> int | None:
    """nn.TransformerEncoderLayer's fast path (eval, no grad): per token the fused qkv
    projection (E x 3E), the output projection (E x E) and the two feed-forward matmuls
    (E x F, F x E); per pair of tokens in a sequence the attention's two products (E wide)."""
    lengths = sequence_lengths(args.tensor("src"))
    if lengths is None:
        return None
    width, hidden = args.integer("embed_dim"), args.tensor("ffn_weight_1").shape[0]
    tokens, pairs = sum(lengths), sum(length * length for length in lengths)
    per_token = 2 * width * (3 * width + width + 2 * hidden)
    return tokens * per_token + 4 * width * pairs


def matrix_vector(args: OpArguments, out: object) -> int:
    """mv / addmv: one multiply-add per matrix element (the added vector is elementwise)."""
    matrix = args.tensor("mat" if "mat" in args else "self")
    return 2 * matrix.numel()


def dot(args: OpArguments, out: object) -> int:
    return 2 * args.tensor("self").numel()


def addbmm(args: OpArguments, out: object) -> int:
    """Batched products summed into one matrix: b x n x k by b x k x m (the sum over the
    batch is the multiply-adds' own accumulation)."""
    batch, rows, inner = args.tensor("batch1").shape
    return 2 * batch * rows * inner * args.tensor("batch2").shape[-1]


def addmm_activation(args: OpArguments, out: object) -> int:
    """addmm with a fused relu/gelu (nn.Linear in some fused paths): the matmul's FLOPs."""
    rows, inner = args.tensor("mat1").shape
    return 2 * rows * inner * args.tensor("mat2").shape[-1]


FORMULAS: dict[str, Formula] = {
    "aten._cudnn_rnn": fused_rnn,
    "aten._cudnn_rnn_backward": fused_rnn_backward,
    "aten.miopen_rnn": fused_rnn,
    "aten.miopen_rnn_backward": fused_rnn_backward,
    "aten.mkldnn_rnn_layer": mkldnn_rnn_layer,
    "aten.mkldnn_rnn_layer_backward": mkldnn_rnn_layer_backward,
    "aten._lstm_mps": lstm_mps,
    "aten.lstm_mps_backward": lstm_mps_backward,
    "aten._scaled_dot_product_flash_attention_for_cpu": sdpa,
    "aten._scaled_dot_product_flash_attention_for_cpu_backward": sdpa_backward,
    "aten._scaled_dot_product_fused_attention_overrideable": sdpa,
    "aten._scaled_dot_product_fused_attention_overrideable_backward": sdpa_backward,
    "aten._scaled_dot_product_attention_math_for_mps": sdpa,
    "aten._native_multi_head_attention": native_multi_head_attention,
    "aten._transformer_encoder_layer_fwd": transformer_encoder_layer,
    "aten.mv": matrix_vector,
    "aten.addmv": matrix_vector,
    "aten.dot": dot,
    "aten.vdot": dot,
    "aten.addbmm": addbmm,
    "aten._addmm_activation": addmm_activation,
    **CONV_FORMULAS,
}


# ---------------------------------------------------------------------------------------------
# Which ops without a formula are cheap (their 0 is the convention) and which are not.

# Name prefixes (leading underscores dropped) of aten ops whose work is O(elements touched):
# creation and copies, data movement and indexing, activations and their backwards (many carry
# no pointwise tag), reductions and softmax, normalisations, pooling and resampling, losses,
# random numbers and dropout, optimizer updates, the pointwise halves of fused RNN cells,
# nested-tensor packing, metadata. Every other op without a formula counts as heavy: it may
# hide real arithmetic (a solver, an FFT, a custom kernel, a fused layer we have no formula for).
CHEAP_PREFIXES = (
    # creation, copies, data movement
    "empty", "zeros", "ones", "full", "arange", "linspace", "logspace", "eye", "scalar_tensor",
    "new_", "lift", "to_copy", "copy", "clone", "detach", "alias", "unsafe_", "view", "reshape",
    "contiguous", "resize", "set_", "fill", "zero_", "local_scalar_dense", "item", "assert",
    "functional_assert", "pin_memory", "record_stream", "cat", "stack", "split", "chunk",
    "unbind", "index", "gather", "scatter", "select", "slice", "narrow", "masked", "where",
    "flip", "roll", "repeat", "tile", "pad", "constant_pad", "reflection_pad",
    "replication_pad", "embedding", "one_hot", "linalg_check_errors", "nonzero", "sort",
    "argsort", "topk", "unique",
    "searchsorted", "bucketize", "im2col", "col2im", "unfold", "fold", "permute", "transpose",
    "expand", "squeeze", "unsqueeze", "as_strided", "diag", "movedim", "tril", "triu", "polar",
    "nan_to_num",
    # activations and their backwards
    "relu", "threshold", "gelu", "silu", "sigmoid", "tanh", "hardtanh", "leaky_relu", "elu",
    "celu", "selu", "softplus", "mish", "hardswish", "hardsigmoid", "glu", "prelu",
    "log_sigmoid", "rrelu", "softshrink", "hardshrink", "logit",
    # reductions, softmax, normalisation
    "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "prod",
    "cumsum", "cumprod", "logsumexp", "logcumsumexp", "any", "all", "count_nonzero", "trace",
    "softmax", "log_softmax", "safe_softmax", "linalg_vector_norm", "native_layer_norm",
    "native_batch_norm", "native_group_norm", "batch_norm", "cudnn_batch_norm",
    "miopen_batch_norm", "fused_rms_norm", "rms_norm", "layer_norm", "group_norm",
    "instance_norm", "weight_norm",
    # pooling, resampling, losses
    "max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool", "fractional_max_pool",
    "upsample", "grid_sampler", "affine_grid", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
    "kl_div", "ctc_loss",
    # randomness, optimizers, fused RNN cells' pointwise halves, packing, metadata
    "bernoulli", "native_dropout", "dropout", "fused_dropout", "rand", "normal", "uniform",
    "exponential", "multinomial", "cudnn_init_dropout_state", "foreach_", "fused_adam",
    "fused_sgd", "fused_adagrad", "thnn_fused_lstm_cell", "thnn_fused_gru_cell",
    "cudnn_rnn_flatten_weight", "pack_padded_sequence", "pad_packed_sequence", "nested_",
    "to_padded_tensor", "addr", "outer", "ger", "equal", "isnan", "isinf", "is_", "sym_",
    "size", "stride", "numel", "storage_offset",
)
CHEAP_NAMES = frozenset({"t", "t_", "dim"})
# Namespaces whose ops do no arithmetic of their own (profiler marks, primitives' metadata).
CHEAP_NAMESPACES = ("profiler", "prim")
# Cheap ops whose outputs hold their inputs' values (beside views and pointwise ops): what
# they make from a parameter stands for it. Reductions, normalisations and creation ops
# (ones_like(loss) seeding the backward) do not, so a loss does not carry every parameter
# into the backward's matmuls.
CARRY_PREFIXES = ("to_copy", "copy", "clone", "contiguous", "detach", "alias", "lift",
                  "unsafe_", "view", "reshape", "cat", "stack", "split", "chunk", "unbind",
                  "index", "gather", "select", "slice", "narrow", "expand", "permute",
                  "transpose", "repeat", "tile", "pad", "constant_pad", "flip", "roll",
                  "cudnn_rnn_flatten_weight", "weight_norm")


def base_name(func: Any) -> str:
    return str(func._overloadpacket.__name__).lstrip("_")


def is_cheap(func: Any) -> bool:
    """Whether an op without a formula is cheap by our rule (its 0 is the convention): a view,
    tagged pointwise or reduction, or an aten op named by CHEAP_PREFIXES / CHEAP_NAMES, or in
    CHEAP_NAMESPACES. Custom ops (other namespaces) are heavy unless so tagged."""
    if func.is_view or torch.Tag.pointwise in func.tags or torch.Tag.reduction in func.tags:
        return True
    if func.namespace in CHEAP_NAMESPACES:
        return True
    name = base_name(func)
    return func.namespace == "aten" and (name in CHEAP_NAMES or name.startswith(CHEAP_PREFIXES))


def carries_values(func: Any) -> bool:
    """Whether a cheap op's outputs stand for the parameters its inputs reached."""
    if func.is_view or torch.Tag.pointwise in func.tags:
        return True
    name = base_name(func)
    return func.namespace == "aten" and (name in CHEAP_NAMES or name.startswith(CARRY_PREFIXES))


def op_name(func: Any) -> str:
    """The op as the coverage names it: namespace.name, no overload (aten._cudnn_rnn)."""
    return f"{func.namespace}.{func._overloadpacket.__name__}"


def bound(func: Any, args: tuple, kwargs: Mapping[str, object]) -> OpArguments:
    """The op's arguments by their schema names, defaults filled in."""
    values: dict[str, object] = {}
    for position, argument in enumerate(func._schema.arguments):
        if position < len(args) and not argument.kwarg_only:
            values[argument.name] = args[position]
        elif argument.name in kwargs:
            values[argument.name] = kwargs[argument.name]
        elif argument.has_default_value():
            values[argument.name] = argument.default_value
    return OpArguments(values)


# (op, args, kwargs, output) -> FLOPs of that call, or None where it cannot tell.
OpCounter = Callable[[Any, tuple, Mapping[str, object], object], int | None]


def formula_for(func: Any) -> OpCounter | None:
    """How to count one call of `func`: ours where we have one (torch's is then never asked:
    its convolution backward is wrong for groups), else torch's, else None. Ours answer None
    where they cannot tell (e.g. a shape they do not know): that call is then uncounted and
    named, and the rest of the count goes on."""
    ours = FORMULAS.get(op_name(func))
    if ours is None:
        torch_formula = flop_registry.get(func._overloadpacket)
        if torch_formula is None:
            return None
        return lambda op, args, kwargs, out: int(torch_formula(*args, **kwargs, out_val=out))

    def counted(op: Any, args: tuple, kwargs: Mapping[str, object], out: object) -> int | None:
        try:
            return ours(bound(op, args, kwargs), out)
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError):
            return None
    return counted


# ---------------------------------------------------------------------------------------------
# The counting mode.

def tensors(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def storage_key(tensor: torch.Tensor) -> int:
    """The address of a tensor's storage (views share it); 0 where it has none to read."""
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):  # nested, sparse, functorch wrappers
        return 0


class ParameterReach:
    """Which parameters each op reaches: a parameter itself, a view of it (same storage), or a
    tensor a value-carrying cheap op made from it (a dtype cast, a copied transpose)."""

    def __init__(self) -> None:
        self.numel: dict[int, int] = {}  # id(parameter) -> elements
        self.on_storage: dict[int, set[int]] = {}  # storage address -> parameter ids
        self.derived: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
        self.counted: set[int] = set()
        self.uncounted: set[int] = set()

    def register(self, parameter: torch.nn.Parameter) -> None:
        if id(parameter) in self.numel:
            return
        self.numel[id(parameter)] = parameter.numel()
        key = storage_key(parameter)
        if key:  # the parameters stay alive through the call: their addresses are theirs
            self.on_storage.setdefault(key, set()).add(id(parameter))

    def reached(self, arguments: list[torch.Tensor]) -> set[int]:
        found: set[int] = set()
        for tensor in arguments:
            if isinstance(tensor, torch.nn.Parameter):
                self.register(tensor)
            found |= self.on_storage.get(storage_key(tensor), set())
            found |= self.derived.get(tensor, frozenset())
        return found

    def carry(self, reached: set[int], outputs: list[torch.Tensor]) -> None:
        for tensor in outputs:
            self.derived[tensor] = frozenset(reached | self.derived.get(tensor, frozenset()))

    def uncounted_share(self) -> float:
        """Elements of the parameters that reached an uncounted heavy op and never an op with
        a formula, over all the call's parameters' elements."""
        total = sum(self.numel.values())
        missed = sum(self.numel[key] for key in self.uncounted - self.counted)
        return missed / total if total else 0.0


# Metadata queries that a subclass with Python-side sizes (nested jagged tensors) sends the
# mode; FlopCounterMode hands them back unhandled too.
METADATA = frozenset({"is_contiguous", "sym_is_contiguous", "is_strides_like_format",
                      "is_non_overlapping_and_dense", "size", "sym_size", "stride",
                      "sym_stride", "storage_offset", "sym_storage_offset", "numel",
                      "sym_numel", "dim", "layout"})


class Counting(TorchDispatchMode):
    """Adds up FLOPs by formula; records the heavy ops without one and the parameters each op
    reaches."""

    def __init__(self, layers: LayerShapes | None = None) -> None:
        super().__init__()
        self.flops = 0
        self.uncounted: Counter[str] = Counter()
        self.reach = ParameterReach()
        self.layers = layers  # told every heavy op, for the second opinion

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func._overloadpacket.__name__ in METADATA and func.namespace in ("aten", "prim"):
            return NotImplemented
        formula = formula_for(func)
        if formula is None:  # a composite op: count what it is made of, as FlopCounterMode does
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        reached = self.reach.reached(tensors((args, kwargs)))
        out = func(*args, **kwargs)
        flops = formula(func, args, kwargs, out) if formula is not None else None
        if flops is not None:
            self.flops += flops
            self.reach.counted |= reached
        elif formula is None and is_cheap(func):
            if reached and carries_values(func):
                self.reach.carry(reached, tensors(out))
            return out
        else:  # heavy without a formula, or ours could not tell
            self.uncounted[op_name(func)] += 1
            self.reach.uncounted |= reached
        if self.layers is not None:
            self.layers.op(op_name(func), flops)
        return out

    def coverage(self) -> FlopCoverage:
        share = round(self.reach.uncounted_share(), 6)
        return FlopCoverage(not self.uncounted and share == 0,
                            dict(sorted(self.uncounted.items())), share)


def count(call: Callable[[], Any], root: torch.nn.Module | None = None) -> Counted:
    """FLOPs of one eager call of `call` (run once here), what the count covers, and the
    second opinion from the covered layers' shapes (named as in `root` where given)."""
    with LayerShapes(root) as layers, Counting(layers) as counting:
        call()
    return Counted(counting.flops, counting.coverage(), layers.record())

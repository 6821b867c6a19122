"""FLOPs and bytes of one operator call from its input shapes and dtypes (Kineto `Input Dims`, `Input type`).

Small pure functions, one per family: matrix products (mm, addmm, bmm, baddbmm, matmul, linear), convolution
backward (the output-gradient shape gives the output size; the forward needs stride and padding, which
`Input Dims` does not carry, so it is counted from the output when the caller has it), attention (scaled dot
product and the flash / efficient / cudnn kernels, forward and backward, causal or not), and bytes-only models
of element-wise ops, reductions, norms, softmax, embedding and copies. `op_cost` dispatches on the operator name
and returns None for an operator without a model ("no model": the caller counts it, never guesses).

Conventions: a multiply-add is 2 FLOPs; bytes are each input tensor read once plus the output written once, at
the input's element size (the output dtype is not in the trace); the precision of a call is that of its first
floating-point input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Shape = Sequence[int]

ELEMENT_BYTES = {
    "double": ("fp64", 8),
    "float": ("fp32", 4),
    "c10::BFloat16": ("bf16", 2),
    "c10::Half": ("fp16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "long int": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
}
"""Kineto `Input type` of a tensor -> (precision name, bytes per element)."""
FLOAT_PRECISIONS = ("fp64", "fp32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class OpCost:
    """What one operator call computes and moves."""

    flops: int
    """Floating-point operations (0 for a bytes-only model)."""
    bytes: int | None
    """Bytes read and written (inputs once, output once); None when a size it needs is not in the trace."""
    precision: str | None
    """Precision of the call (ELEMENT_BYTES names: "bf16", "fp32", ...); None when no input has a known dtype."""


def numel(shape: Shape) -> int:
    """Elements of a tensor of `shape` (1 for a scalar [])."""
    return math.prod(shape)


def gemm(m: int, n: int, k: int, *, batch: int = 1, bias_elements: int = 0, element_bytes: int) -> tuple[int, int]:
    """(FLOPs, bytes) of `batch` products [m, k] x [k, n] plus a bias of `bias_elements` added to the output:
    2 m n k per product, one add per output element with a bias; bytes read A, B and the bias, write the output."""
    flops = batch * (2 * m * n * k + (m * n if bias_elements else 0))
    moved = batch * (m * k + k * n + m * n) + bias_elements
    return flops, moved * element_bytes


def matmul_shapes(a: Shape, b: Shape) -> tuple[int, int, int, int] | None:
    """(batch, m, n, k) of torch.matmul(a, b) with its 1-D and broadcast-batch rules; None if the shapes do not
    multiply."""
    if not a or not b:
        return None
    a2 = [1, *a] if len(a) == 1 else list(a)
    b2 = [*b, 1] if len(b) == 1 else list(b)
    if a2[-1] != b2[-2]:
        return None
    batch_a, batch_b = a2[:-2], b2[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a, batch_b = [1] * (width - len(batch_a)) + batch_a, [1] * (width - len(batch_b)) + batch_b
    if any(x != y and 1 not in (x, y) for x, y in zip(batch_a, batch_b, strict=True)):
        return None
    return math.prod(max(x, y) for x, y in zip(batch_a, batch_b, strict=True)), a2[-2], b2[-1], a2[-1]


def conv_flops(output: Shape, weight: Shape) -> int:
    """FLOPs of a convolution forward from its output [N, C_out, *spatial] and weight [C_out, C_in/groups, *kernel]:
    2 x output elements x (C_in/groups x kernel elements). Its input-gradient and weight-gradient each cost the same."""
    return 2 * numel(output) * numel(weight[1:])


def conv_output(input_: Shape, weight: Shape, stride: Shape, padding: Shape, dilation: Shape) -> list[int]:
    """Output shape of a (non-transposed) convolution: floor((in + 2 pad - dil (k - 1) - 1) / stride) + 1 per
    spatial dimension."""
    spatial = [
        (size + 2 * p - d * (k - 1) - 1) // s + 1
        for size, k, s, p, d in zip(input_[2:], weight[2:], stride, padding, dilation, strict=True)
    ]
    return [input_[0], weight[0], *spatial]


def causal_pairs(q_len: int, kv_len: int) -> int:
    """(query, key) pairs a causal mask keeps, aligned to the top left as torch's is_causal: row i sees keys 0..i."""
    if q_len <= kv_len:
        return q_len * (q_len + 1) // 2
    return kv_len * (kv_len + 1) // 2 + (q_len - kv_len) * kv_len


def attention_flops(batch_heads: int, q_len: int, kv_len: int, head_dim: int, v_dim: int, *, causal: bool) -> int:
    """FLOPs of one attention forward: Q K^T (2 Lq Lk d) and P V (2 Lq Lk dv) per batch x head, over the pairs a
    causal mask keeps (causal_pairs) when causal. Softmax and scaling are not counted (as in FlashAttention's
    papers). The backward is ATTENTION_BACKWARD x this (five products against two: S recomputed, dV, dP, dQ, dK)."""
    pairs = causal_pairs(q_len, kv_len) if causal else q_len * kv_len
    return 2 * batch_heads * pairs * (head_dim + v_dim)


ATTENTION_BACKWARD = 2.5


@dataclass(frozen=True)
class Call:
    """One operator call's inputs as Kineto records them: shapes (`Input Dims`), types (`Input type`) and, where
    the profiler wrote them (torch >= 2.1), the concrete values of non-tensor inputs (`Concrete Inputs`, as text)."""

    dims: Sequence[Shape]
    types: Sequence[str]
    concrete: Sequence[str] = ()

    def tensor(self, i: int) -> bool:
        """Whether input i is a tensor of a known dtype."""
        return i < len(self.dims) and i < len(self.types) and self.types[i] in ELEMENT_BYTES

    def nbytes(self, i: int) -> int:
        """Bytes of tensor input i (0 when input i is not a tensor)."""
        return numel(self.dims[i]) * ELEMENT_BYTES[self.types[i]][1] if self.tensor(i) else 0

    def element_bytes(self, i: int) -> int:
        """Bytes per element of tensor input i."""
        return ELEMENT_BYTES[self.types[i]][1]

    def value(self, i: int) -> str | None:
        """Concrete value text of input i ("[1, 1]", "True", "1"); None when absent or empty."""
        return self.concrete[i] if i < len(self.concrete) and self.concrete[i] != "" else None


Model = Callable[[Call], tuple[int, int | None] | None]


def _ints(text: str | None, rank: int) -> list[int] | None:
    """A concrete list of ints ("[2, 2]"; a single int repeats `rank` times); None if it is not one."""
    if text is None:
        return None
    parts = text.strip("[]").replace(" ", "").split(",")
    if not all(p.lstrip("-").isdigit() for p in parts):
        return None
    values = [int(p) for p in parts]
    return values * rank if len(values) == 1 else values if len(values) == rank else None


def _flag(text: str | None) -> bool | None:
    return {"True": True, "False": False, "1": True, "0": False}.get(text or "")


def _mm(c: Call) -> tuple[int, int] | None:
    if not (c.tensor(0) and c.tensor(1)) or len(c.dims[0]) != 2 or len(c.dims[1]) != 2:
        return None
    (m, k), n = c.dims[0], c.dims[1][1]
    return gemm(m, n, k, element_bytes=c.element_bytes(0))


def _addmm(c: Call) -> tuple[int, int] | None:
    found = _mm(Call(c.dims[1:3], c.types[1:3])) if c.tensor(0) else None
    if found is None:
        return None
    (m, k), n = c.dims[1], c.dims[2][1]
    return gemm(m, n, k, bias_elements=numel(c.dims[0]), element_bytes=c.element_bytes(1))


def _bmm(c: Call, first: int = 0) -> tuple[int, int] | None:
    a, b = first, first + 1
    if not (c.tensor(a) and c.tensor(b)) or len(c.dims[a]) != 3 or len(c.dims[b]) != 3:
        return None
    (batch, m, k), n = c.dims[a], c.dims[b][2]
    return gemm(m, n, k, batch=batch, element_bytes=c.element_bytes(a))


def _baddbmm(c: Call) -> tuple[int, int] | None:
    found = _bmm(c, 1) if c.tensor(0) else None
    if found is None:
        return None
    batch, m, n = c.dims[1][0], c.dims[1][1], c.dims[2][2]
    extra = numel(c.dims[0])
    return found[0] + batch * m * n, found[1] + extra * c.element_bytes(0)


def _matmul(c: Call) -> tuple[int, int] | None:
    shapes = matmul_shapes(c.dims[0], c.dims[1]) if c.tensor(0) and c.tensor(1) else None
    if shapes is None:
        return None
    batch, m, n, k = shapes
    flops = 2 * batch * m * n * k
    return flops, c.nbytes(0) + c.nbytes(1) + batch * m * n * c.element_bytes(0)


def _linear(c: Call) -> tuple[int, int] | None:
    if not (c.tensor(0) and c.tensor(1)) or len(c.dims[1]) != 2 or not c.dims[0] or c.dims[0][-1] != c.dims[1][1]:
        return None
    n, k = c.dims[1]
    bias = numel(c.dims[2]) if c.tensor(2) else 0
    return gemm(numel(c.dims[0][:-1]), n, k, bias_elements=bias, element_bytes=c.element_bytes(0))


def _conv_forward(stride_at: int, padding_at: int, dilation_at: int, transposed_at: int | None = None) -> Model:
    """A forward convolution whose stride, padding and dilation are concrete inputs at these positions."""

    def model(c: Call) -> tuple[int, int] | None:
        if not (c.tensor(0) and c.tensor(1)) or len(c.dims[0]) < 3 or len(c.dims[0]) != len(c.dims[1]):
            return None
        if transposed_at is not None and _flag(c.value(transposed_at)) is not False:
            return None
        rank = len(c.dims[0]) - 2
        stride, padding = _ints(c.value(stride_at), rank), _ints(c.value(padding_at), rank)
        dilation = _ints(c.value(dilation_at), rank)
        if stride is None or padding is None or dilation is None or min(stride) <= 0 or min(dilation) <= 0:
            return None
        out = conv_output(c.dims[0], c.dims[1], stride, padding, dilation)
        if min(out) <= 0:
            return None
        bias = numel(c.dims[2]) if c.tensor(2) else 0
        flops = conv_flops(out, c.dims[1]) + (numel(out) if bias else 0)
        return flops, c.nbytes(0) + c.nbytes(1) + (numel(out) + bias) * c.element_bytes(0)

    return model


def _convolution_backward(c: Call) -> tuple[int, int] | None:
    """aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask): one conv_flops per gradient asked for (output_mask)."""
    if not all(c.tensor(i) for i in range(3)) or _flag(c.value(7)) is not False:
        return None
    mask = (c.value(10) or "").strip("[]").replace(" ", "").split(",")
    if len(mask) != 3 or not set(mask) <= {"True", "False"}:
        return None
    grads = (mask[0] == "True") + (mask[1] == "True")
    flops = grads * conv_flops(c.dims[0], c.dims[2])
    written = (mask[0] == "True") * c.nbytes(1) + (mask[1] == "True") * c.nbytes(2)
    return flops, c.nbytes(0) + c.nbytes(1) + c.nbytes(2) + written


def _conv_backward_input(c: Call) -> tuple[int, int | None] | None:
    """cudnn_convolution_backward_input(input_size, grad_output, weight, ...): the input's size is a concrete
    list, so the bytes are known only with Concrete Inputs."""
    if not (c.tensor(1) and c.tensor(2)):
        return None
    size = _ints(c.value(0), len(c.dims[1]))
    written = numel(size) * c.element_bytes(1) if size is not None else None
    flops = conv_flops(c.dims[1], c.dims[2])
    return flops, None if written is None else c.nbytes(1) + c.nbytes(2) + written


def _attention(q_at: int, causal_at: int, *, heads_first: bool, backward: bool, mask_type: bool = False) -> Model:
    """An attention op: query, key, value at q_at.. ([B, H, L, E] when heads_first, else [B, L, H, E]), causal
    flag (or, with mask_type, xformers' custom_mask_type: 0 none, 1 and 2 causal) a concrete input at causal_at."""

    def model(c: Call) -> tuple[int, int] | None:
        q, k, v = q_at, q_at + 1, q_at + 2
        if not all(c.tensor(i) and len(c.dims[i]) == 4 for i in (q, k, v)):
            return None
        text = c.value(causal_at)
        causal = (text in ("1", "2") if text in ("0", "1", "2") else None) if mask_type else _flag(text)
        if causal is None:
            return None
        (b, h, lq, d), lk, dv = c.dims[q], c.dims[k][2], c.dims[v][3]
        if not heads_first:
            (b, lq, h, d), lk = c.dims[q], c.dims[k][1]
        flops = attention_flops(b * h, lq, lk, d, dv, causal=causal)
        out = b * h * lq * dv * c.element_bytes(q)
        moved = c.nbytes(q) + c.nbytes(k) + c.nbytes(v) + out
        return (int(flops * ATTENTION_BACKWARD), 2 * moved) if backward else (flops, moved)

    return model


def _streaming(c: Call) -> tuple[int, int] | None:
    """Bytes-only: every tensor input read once, one output the size of the largest input written (element-wise
    ops, norms, softmax and their backward passes; an in-place op writes its first input)."""
    tensors = [i for i in range(len(c.dims)) if c.tensor(i)]
    if not tensors:
        return None
    largest = max(tensors, key=lambda i: numel(c.dims[i]))
    return 0, sum(c.nbytes(i) for i in tensors) + c.nbytes(largest)


def _reduction(c: Call) -> tuple[int, int] | None:
    """Bytes-only: the input read (the reduced output, usually far smaller, is not counted: its size depends on
    the dimensions, a concrete input)."""
    return (0, c.nbytes(0)) if c.tensor(0) else None


def _copy(c: Call) -> tuple[int, int] | None:
    """Bytes-only: the first tensor read and written once (copy_ reads its source, the second input)."""
    source = 1 if c.tensor(1) else 0
    return (0, 2 * c.nbytes(source)) if c.tensor(source) else None


def _embedding(c: Call) -> tuple[int, int] | None:
    """embedding(weight [V, D], indices): the indices and the gathered rows read, the rows written."""
    if not (c.tensor(0) and c.tensor(1)) or len(c.dims[0]) != 2:
        return None
    rows = numel(c.dims[1]) * c.dims[0][1] * c.element_bytes(0)
    return 0, c.nbytes(1) + 2 * rows


_STREAMING = (
    "add add_ sub sub_ mul mul_ div div_ neg exp log pow rsqrt sqrt abs sin cos tanh sigmoid relu relu_ gelu silu "
    "silu_ hardtanh hardtanh_ leaky_relu clamp clamp_ clamp_min clamp_min_ where masked_fill masked_fill_ "
    "threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward addcmul_ addcdiv_ lerp_ "
    "native_dropout dropout softmax _softmax log_softmax _log_softmax _softmax_backward_data "
    "_log_softmax_backward_data layer_norm native_layer_norm native_layer_norm_backward group_norm "
    "native_group_norm native_group_norm_backward batch_norm native_batch_norm cudnn_batch_norm "
    "cudnn_batch_norm_backward native_batch_norm_backward rms_norm _fused_rms_norm"
).split()
_REDUCTIONS = "sum mean amax amin max min norm var var_mean std argmax argmin".split()
_COPIES = "copy_ _to_copy clone contiguous fill_ zero_".split()
_MODELS: dict[str, Model] = {
    "aten::mm": _mm,
    "aten::addmm": _addmm,
    "aten::bmm": _bmm,
    "aten::baddbmm": _baddbmm,
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::conv1d": _conv_forward(3, 4, 5),
    "aten::conv2d": _conv_forward(3, 4, 5),
    "aten::conv3d": _conv_forward(3, 4, 5),
    "aten::convolution": _conv_forward(3, 4, 5, 6),
    "aten::_convolution": _conv_forward(3, 4, 5, 6),
    "aten::cudnn_convolution": _conv_forward(3, 2, 4),
    "aten::convolution_backward": _convolution_backward,
    "aten::cudnn_convolution_backward_input": _conv_backward_input,
    "aten::scaled_dot_product_attention": _attention(0, 5, heads_first=True, backward=False),
    "aten::_scaled_dot_product_flash_attention": _attention(0, 4, heads_first=True, backward=False),
    "aten::_scaled_dot_product_efficient_attention": _attention(0, 6, heads_first=True, backward=False),
    "aten::_scaled_dot_product_cudnn_attention": _attention(0, 6, heads_first=True, backward=False),
    "aten::_flash_attention_forward": _attention(0, 8, heads_first=False, backward=False),
    "aten::_efficient_attention_forward": _attention(0, 9, heads_first=False, backward=False, mask_type=True),
    "aten::_scaled_dot_product_flash_attention_backward": _attention(1, 11, heads_first=True, backward=True),
    "aten::_scaled_dot_product_efficient_attention_backward": _attention(1, 11, heads_first=True, backward=True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _attention(1, 14, heads_first=True, backward=True),
    "aten::_flash_attention_backward": _attention(1, 11, heads_first=False, backward=True),
    "aten::_efficient_attention_backward": _attention(1, 14, heads_first=False, backward=True, mask_type=True),
    "aten::embedding": _embedding,
    **{f"aten::{name}": _streaming for name in _STREAMING},
    **{f"aten::{name}": _reduction for name in _REDUCTIONS},
    **{f"aten::{name}": _copy for name in _COPIES},
}


MODELED = frozenset(_MODELS)
"""Operator names op_cost has a model for."""


def has_model(name: str) -> bool:
    """Whether op_cost has a model for operators named `name`."""
    return name in _MODELS


def precision_of(types: Sequence[str]) -> str | None:
    """Precision of a call: that of its first floating-point tensor input, else of its first tensor input."""
    known = [ELEMENT_BYTES[t][0] for t in types if t in ELEMENT_BYTES]
    floating = [p for p in known if p in FLOAT_PRECISIONS]
    chosen = floating or known
    return chosen[0] if chosen else None


def op_cost(name: str, call: Call) -> OpCost | None:
    """FLOPs, bytes and precision of one call of operator `name`; None without a model for it or when its inputs
    do not fit the model (missing dtypes, a shape that does not multiply, a concrete input the model needs)."""
    model = _MODELS.get(name)
    found = model(call) if model is not None else None
    if found is None:
        return None
    return OpCost(flops=found[0], bytes=found[1], precision=precision_of(call.types))

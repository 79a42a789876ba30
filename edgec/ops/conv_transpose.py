"""Transposed 2-D convolution (nn.ConvTranspose2d, and ConvTranspose1d as H = 1): golden int8
kernel, filter re-layout and descriptor builder.

C kernels: runtime_c/src/conv/edgec_conv_transpose_s8.c (portable, any groups; _dsp and _mve for
groups 1). Arithmetic: TFLite's int8 TRANSPOSE_CONV with per-channel quantization
(tensorflow/lite/kernels/internal/reference/integer_ops/transpose_conv.h, TransposeConv): every
input pixel scatters (x + input_offset) * w into an int32 buffer of the whole output, then per
output element bias is added, MultiplyByQuantizedMultiplier (edgec.numerics.requantize is the same
function: gemmlowp's SaturatingRoundingDoublingHighMul rounds exactly like arm_nn's
doubling_high_mult_no_sat for non-negative multipliers), the output offset, and the clamp. The
geometry is PyTorch's: input pixel i and tap k reach output o = i * stride - pad + k * dilation,
kept when 0 <= o < out = (H - 1) * stride - 2 * pad + dilation * (K - 1) + output_padding + 1;
groups split C_in and C_out (depthwise: groups == C_in, any channel multiplier).

Gather instead of scatter: the C kernels compute each output pixel from the input pixels and taps
that reach it, so they need no int32 buffer of the output. The result is the same bits: each
output element is the same multiset of int32 products summed modulo 2^32 (TFLite's int32 adds
wrap, edgec's accumulate in uint32), and addition modulo 2^32 is associative and commutative, so
the order does not matter; bias and the folded input offset move through the sum the same way.

Phases: output o along an axis is reached by taps k with k * dilation == o + pad (mod stride),
i.e. one "phase" r = (o + pad) mod stride selects a fixed tap list (conv_transpose_phase_taps), and
consecutive taps of that list read input pixels dilation / gcd(stride, dilation) apart. The
filter is re-laid per phase (r_h, r_w) as rows [C_out][taps_h * taps_w * C_in/groups] so that an
output pixel's gather is one contiguous dot product per channel, as a convolution's would be.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from torchao.quantization.pt2e import PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import QuantizationSpec

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import CONV_TRANSPOSES
from edgec.ir import KernelChoice
from edgec.numerics import INT8_MAX, INT8_MIN
from edgec.ops import int4
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.conv import (
    CONV_BLOCKING,
    conv_output_stage,
    finalize_output_stage,
    node_arg,
    quantized_bias,
    weight_bits_attr,
    weighted_operands,
)
from edgec.ops.kernel import Field, Scratch, Struct, ints
from edgec.ops.kernel_layout import DSP, MVE, RowBlocking, blocked_bias, interleave_rows, kernel_isa, packed_choice
from edgec.ops.qspec import ACTIVATION_QSPEC, LINEAR_WEIGHT_QSPEC, annotate_with_output

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
CONV_TRANSPOSE_DESC = Struct(
    "edgec_conv_transpose_desc",
    (
        *ints("batches input_h input_w input_c"),
        Field(
            "output_h", doc="(input_h - 1) * stride_h - 2 * pad_h + dilation_h * (kernel_h - 1) + output_padding_h + 1"
        ),
        Field("output_w", doc="likewise along w"),
        *ints("output_c kernel_h kernel_w stride_h stride_w"),
        Field("pad_h", doc="PyTorch padding: removed from both ends of the output"),
        *ints("pad_w"),
        Field("output_padding_h", doc="0 <= output_padding < max(stride, dilation), as PyTorch"),
        *ints("output_padding_w dilation_h dilation_w"),
        Field("groups", doc="divides C_in and C_out; depthwise: groups == C_in"),
        Field("input_offset", doc="-input zero point, in [-127, 128]"),
        Field("output_offset", doc="output zero point, in [-128, 127]"),
        *ints("act_min act_max"),
        Field(
            "filter", "const int8_t *", doc="per phase (r_h, r_w) in raster order: [C_out][K_phase] rows (_s4: packed)"
        ),
        Field("bias", "const int32_t *", doc="portable: [C_out] or NULL; _dsp/_mve: folded per phase"),
        Field("multiplier", "const int32_t *", doc="[C_out]"),
        Field("shift", "const int32_t *", doc="[C_out], -31..31"),
    ),
)
STRUCTS = (CONV_TRANSPOSE_DESC,)
# The scratch-size rules of this unit's kernels: edgec_nn.h's macros are generated from these.
DSP_SCRATCH = Scratch("EDGEC_CONV_TRANSPOSE_S8_DSP_SCRATCH_BYTES", ("k",), "(5 * (((k) + 3) / 4 * 4))")
MVE_SCRATCH = Scratch("EDGEC_CONV_TRANSPOSE_S8_MVE_SCRATCH_BYTES", ("k",), "(2 * (((k) + 15) / 16 * 16))")
S4_DSP_SCRATCH = Scratch("EDGEC_CONV_TRANSPOSE_S4_DSP_SCRATCH_BYTES", ("k",), "(5 * (((k) + 7) / 8 * 8))")
SCRATCH = (DSP_SCRATCH, MVE_SCRATCH, S4_DSP_SCRATCH)

PORTABLE = "portable"
# Rows of the portable kernel's filter: one channel's taps after another, no padding.
_PLAIN = RowBlocking(rows=1, group=1)
# float64 is exact for integers below 2^53: the golden's matmuls stay below it when
# C_in/groups * 128 * 255 * taps does (checked).
_FLOAT64_EXACT = 2**53


def conv_transpose_output_size(
    in_size: int, kernel: int, stride: int, pad: int, output_padding: int, dilation: int
) -> int:
    """PyTorch's ConvTranspose output length along one axis; ValueError for a geometry PyTorch
    rejects (output_padding must be smaller than stride or dilation) or an empty output."""
    if in_size < 1 or kernel < 1 or stride < 1 or dilation < 1 or pad < 0 or output_padding < 0:
        raise ValueError(
            f"bad transposed conv geometry: in={in_size} kernel={kernel} stride={stride} "
            f"pad={pad} dilation={dilation} output_padding={output_padding}"
        )
    if output_padding >= max(stride, dilation):
        raise ValueError(f"output_padding {output_padding} must be smaller than stride {stride} or dilation {dilation}")
    out = (in_size - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1
    if out < 1:
        raise ValueError(f"empty transposed conv output along an axis: {out}")
    return out


def conv_transpose_phase_taps(kernel: int, stride: int, dilation: int) -> list[list[int]]:
    """Per phase r in 0..stride-1, the taps k (ascending) with k * dilation % stride == r."""
    return [[k for k in range(kernel) if k * dilation % stride == r] for r in range(stride)]


def _check_groups(c_in: int, c_out: int, groups: int) -> None:
    if groups < 1 or c_in % groups or c_out % groups:
        raise ValueError(f"groups={groups} must divide C_in={c_in} and C_out={c_out}")


def conv_transpose_phase_rows(w: np.ndarray, *, stride, dilation, groups: int) -> list[np.ndarray]:
    """PyTorch's ConvTranspose2d weight [C_in, C_out/groups, KH, KW] as one [C_out, K_phase] int8
    matrix per phase (r_h, r_w), phases in raster order: row co holds, for each tap (ky, kx) of the
    phase in (ky, kx) order, w[g * C_in/groups + i, co - g * C_out/groups, ky, kx] over i (the
    C_in/groups input channels of co's group g). K_phase = taps_h * taps_w * C_in/groups; a phase
    without taps has K_phase = 0."""
    w = np.asarray(w)
    if not np.issubdtype(w.dtype, np.integer) or w.ndim != 4:
        raise ValueError(f"expected an integer (int8) [C_in, C_out/groups, KH, KW] filter, got {w.dtype} {w.shape}")
    c_in, cout_g, kh, kw = w.shape
    _check_groups(c_in, cout_g * groups, groups)
    cin_g = c_in // groups
    # [G, C_in/G, C_out/G, KH, KW] -> [G, C_out/G, KH, KW, C_in/G] -> [C_out, KH, KW, C_in/G]
    ohwi = w.reshape(groups, cin_g, cout_g, kh, kw).transpose(0, 2, 3, 4, 1).reshape(groups * cout_g, kh, kw, cin_g)
    rows = []
    for taps_h in conv_transpose_phase_taps(kh, stride[0], dilation[0]):
        for taps_w in conv_transpose_phase_taps(kw, stride[1], dilation[1]):
            rows.append(ohwi[:, taps_h][:, :, taps_w].reshape(groups * cout_g, -1))
    return rows


def conv_transpose_filter(w: np.ndarray, *, stride, dilation, groups: int = 1, isa: str = PORTABLE) -> np.ndarray:
    """The filter as edgec_conv_transpose_s8 (isa "portable") or its _dsp / _mve forms read it:
    the phases' conv_transpose_phase_rows one after another, each phase plain (portable) or laid
    out by interleave_rows with the generic conv's blocking (DSP: 2 rows, groups of 4 bytes; MVE:
    4 rows, groups of 16 bytes). Flat int8."""
    blocking = _blocking(isa, groups)
    parts = [
        interleave_rows(rows, blocking)
        for rows in conv_transpose_phase_rows(w, stride=stride, dilation=dilation, groups=groups)
    ]
    return np.concatenate(parts).astype(np.int8)


def conv_transpose_bias(
    bias, w: np.ndarray, input_zp: int, *, stride, dilation, groups: int = 1, isa: str = PORTABLE
) -> np.ndarray | None:
    """The bias the kernel reads: the portable kernel's is the int32 bias itself (or None); the
    _dsp/_mve kernels' is folded per phase: for each phase, bias[co] - input_zp * (the sum of
    co's taps in that phase), wrapped to int32 and zero-padded to whole blocks (blocked_bias)."""
    blocking = _blocking(isa, groups)
    if isa == PORTABLE:
        return None if bias is None else np.ascontiguousarray(bias, dtype=np.int32)
    return np.concatenate(
        [
            blocked_bias(bias, rows, input_zp, blocking.rows)
            for rows in conv_transpose_phase_rows(w, stride=stride, dilation=dilation, groups=groups)
        ]
    )


def _blocking(isa: str, groups: int) -> RowBlocking:
    if isa == PORTABLE:
        return _PLAIN
    if isa not in (DSP, MVE):
        raise ValueError(f"unknown kernel family {isa!r}")
    if groups != 1:
        raise ValueError("the _dsp/_mve transposed conv kernels take groups=1 only")
    return CONV_BLOCKING[isa]


def conv_transpose_scratch_bytes(isa: str, weight_shape, *, stride, dilation) -> int:
    """Scratch bytes of edgec_conv_transpose_s8 (none) or _dsp/_mve, from the largest phase's K
    (groups 1): DSP the int8 row of one pixel plus two pixels' int16 columns, 5 bytes per tap
    rounded to 4 (EDGEC_CONV_TRANSPOSE_S8_DSP_SCRATCH_BYTES); MVE two int8 rows rounded to 16
    (EDGEC_CONV_TRANSPOSE_S8_MVE_SCRATCH_BYTES)."""
    if isa == PORTABLE:
        return 0
    padded = CONV_BLOCKING[isa].padded_k(largest_phase_taps(weight_shape, stride, dilation))
    return 5 * padded if isa == DSP else 2 * padded


def largest_phase_taps(weight_shape, stride, dilation) -> int:
    """K of the largest phase: C_in times its taps along H and along W (groups 1)."""
    c_in, _, kh, kw = weight_shape
    return (
        c_in
        * max(len(t) for t in conv_transpose_phase_taps(kh, stride[0], dilation[0]))
        * max(len(t) for t in conv_transpose_phase_taps(kw, stride[1], dilation[1]))
    )


def conv_transpose_accumulator(
    x: np.ndarray,
    w: np.ndarray,
    *,
    input_zp: int,
    stride=(1, 1),
    pad=(0, 0),
    output_padding=(0, 0),
    dilation=(1, 1),
    groups: int = 1,
    out_hw,
) -> np.ndarray:
    """The exact (unwrapped, int64) sums sum (x - input_zp) * w of a transposed conv, [N, Ho, Wo,
    C_out], in scatter form: each tap (ky, kx) adds the [N, H, W, C_out] products of every input
    pixel at o = i * stride - pad + k * dilation (one exact float64 matmul per tap and group), into
    a buffer of the uncropped output, which is then cropped by pad."""
    x = np.asarray(x)
    w = np.asarray(w)
    n, h, wd, c_in = x.shape
    c_in_w, cout_g, kh, kw = w.shape
    if x.dtype != np.int8 or w.dtype != np.int8 or c_in_w != c_in:
        raise ValueError(f"need int8 NHWC x and int8 [C_in, C_out/groups, KH, KW] w, got {x.shape}, {w.shape}")
    _check_groups(c_in, cout_g * groups, groups)
    expected = tuple(
        conv_transpose_output_size(*a) for a in zip((h, wd), (kh, kw), stride, pad, output_padding, dilation)
    )
    if tuple(out_hw) != expected:
        raise ValueError(f"out_hw {tuple(out_hw)} is not the ConvTranspose2d output size {expected}")
    cin_g = c_in // groups
    if cin_g * 128 * 255 * kh * kw >= _FLOAT64_EXACT:
        raise ValueError("reduction too long for the exact float64 accumulation")
    full = [
        (size - 1) * s + d * (k - 1) + 1 + op
        for size, s, d, k, op in zip((h, wd), stride, dilation, (kh, kw), output_padding)
    ]
    acc = np.zeros((n, full[0], full[1], groups, cout_g), dtype=np.int64)
    xg = (x.astype(np.float64) - input_zp).reshape(n, h, wd, groups, cin_g)
    wg = w.reshape(groups, cin_g, cout_g, kh, kw).astype(np.float64)
    for ky in range(kh):
        for kx in range(kw):
            products = np.einsum("nhwgi,gio->nhwgo", xg, wg[..., ky, kx]).astype(np.int64)
            y0, x0 = ky * dilation[0], kx * dilation[1]
            acc[:, y0 : y0 + (h - 1) * stride[0] + 1 : stride[0], x0 : x0 + (wd - 1) * stride[1] + 1 : stride[1]] += (
                products
            )
    acc = acc.reshape(n, full[0], full[1], groups * cout_g)
    return acc[:, pad[0] : pad[0] + out_hw[0], pad[1] : pad[1] + out_hw[1]]


def conv_transpose2d_s8(
    x: np.ndarray,
    w: np.ndarray,
    bias,
    multiplier,
    shift,
    *,
    input_zp: int,
    output_zp: int,
    stride=(1, 1),
    pad=(0, 0),
    output_padding=(0, 0),
    dilation=(1, 1),
    groups: int = 1,
    out_hw,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
) -> np.ndarray:
    """Golden int8 transposed convolution, bit-exact with edgec_conv_transpose_s8 (and _dsp/_mve).

    x int8 NHWC [N, H, W, C_in]; w int8 in PyTorch's ConvTranspose2d layout [C_in, C_out/groups,
    KH, KW]; bias int32 [C_out] or None; multiplier/shift [C_out] (QuantizeMultiplier); pad,
    output_padding, stride, dilation as PyTorch's (pad on both sides); out_hw must be PyTorch's
    output size. Per output element (TFLite TransposeConv):
      acc = wrap32(sum over (i, k) reaching it of (x[i] - input_zp) * w[k]  +  bias[co])
      y = clamp(requantize(acc, multiplier[co], shift[co]) + output_zp, act_min, act_max).
    Returns int8 [N, Ho, Wo, C_out].
    """
    c_out = np.asarray(w).shape[1] * groups
    if len(multiplier) != c_out or len(shift) != c_out or (bias is not None and len(bias) != c_out):
        raise ValueError("multiplier, shift and bias need one entry per output channel")
    if not (INT8_MIN <= input_zp <= INT8_MAX and INT8_MIN <= output_zp <= INT8_MAX):
        raise ValueError("zero points must be int8")
    if not INT8_MIN <= act_min <= act_max <= INT8_MAX:
        raise ValueError("need -128 <= act_min <= act_max <= 127")
    acc = conv_transpose_accumulator(
        x,
        w,
        input_zp=input_zp,
        stride=stride,
        pad=pad,
        output_padding=output_padding,
        dilation=dilation,
        groups=groups,
        out_hw=out_hw,
    )
    return conv_output_stage(acc, bias, multiplier, shift, output_zp, act_min, act_max)


def conv_transpose_desc(
    input_shape,
    w: np.ndarray,
    bias,
    multiplier,
    shift,
    *,
    input_zp: int,
    output_zp: int,
    stride=(1, 1),
    pad=(0, 0),
    output_padding=(0, 0),
    dilation=(1, 1),
    groups: int = 1,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    isa: str = PORTABLE,
) -> dict:
    """The field values of edgec_conv_transpose_desc, in declaration order, for the kernel of
    `isa` (PORTABLE: edgec_conv_transpose_s8, DSP/MVE: its _dsp/_mve forms): ints, and numpy
    arrays for the pointer fields (filter re-laid by conv_transpose_filter, bias by
    conv_transpose_bias -- None for "no bias" on the portable kernel)."""
    n, h, wd, c_in = (int(v) for v in input_shape)
    w = np.asarray(w)
    _, cout_g, kh, kw = w.shape
    out_h, out_w = (
        conv_transpose_output_size(*a) for a in zip((h, wd), (kh, kw), stride, pad, output_padding, dilation)
    )
    layout = dict(stride=stride, dilation=dilation, groups=groups, isa=isa)
    return dict(
        batches=n,
        input_h=h,
        input_w=wd,
        input_c=c_in,
        output_h=out_h,
        output_w=out_w,
        output_c=cout_g * groups,
        kernel_h=kh,
        kernel_w=kw,
        stride_h=stride[0],
        stride_w=stride[1],
        pad_h=pad[0],
        pad_w=pad[1],
        output_padding_h=output_padding[0],
        output_padding_w=output_padding[1],
        dilation_h=dilation[0],
        dilation_w=dilation[1],
        groups=groups,
        input_offset=-int(input_zp),
        output_offset=int(output_zp),
        act_min=int(act_min),
        act_max=int(act_max),
        filter=conv_transpose_filter(w, **layout),
        bias=conv_transpose_bias(bias, w, input_zp, **layout),
        multiplier=np.ascontiguousarray(multiplier, dtype=np.int32),
        shift=np.ascontiguousarray(shift, dtype=np.int32),
    )


# -- int4 weights ----------------------------------------------------------------------------------

S4_KERNEL = "edgec_conv_transpose_s4"
S4_REASON = (
    "int4 weights: the portable kernel's phase rows packed (edgec.ops.int4), each nibble read in place "
    "(no filter in RAM)"
)
S4_DSP_REASON = (
    "int4 weights: phase rows packed in words of 8, unpacked in registers for SMLAD against two "
    "pixels' widened columns; DSP extension (SMLAD)"
)
S4_ROW = 8  # the _dsp kernel's rows: whole words of 8 int4 weights


def _s4_rows(isa: str, rows: np.ndarray) -> np.ndarray:
    """A phase's [C_out, K] rows as the int4 kernel reads them: as they are (portable), or each
    zero-padded to whole words of S4_ROW weights (_dsp)."""
    if isa == PORTABLE:
        return rows
    return np.pad(rows, ((0, 0), (0, -rows.shape[1] % S4_ROW)))


def conv_transpose_s4_filter(w: np.ndarray, *, stride, dilation, groups: int = 1, isa: str = PORTABLE) -> np.ndarray:
    """edgec_conv_transpose_s4's (_dsp's) filter: the phase rows of int4 values w (int8 in [-8, 7],
    PyTorch's layout), each phase's [C_out][K_phase] rows (_dsp: padded, _s4_rows) one after
    another, packed by edgec.ops.int4.pack_int4."""
    rows = conv_transpose_phase_rows(w, stride=stride, dilation=dilation, groups=groups)
    return int4.pack_int4(np.concatenate([_s4_rows(isa, r).ravel() for r in rows]).astype(np.int8))


def conv_transpose_s4_weights(
    packed: np.ndarray, weight_shape, *, stride, dilation, groups: int = 1, isa: str = PORTABLE
) -> np.ndarray:
    """The int4 weights in PyTorch's layout [C_in, C_out/groups, KH, KW] read back from the packed
    phase rows (the inverse of conv_transpose_s4_filter): the golden's unpacking."""
    size = int(np.prod(weight_shape))
    index = np.arange(1, size + 1).reshape(weight_shape)  # 0 marks padding
    rows = conv_transpose_phase_rows(index, stride=stride, dilation=dilation, groups=groups)
    order = np.concatenate([_s4_rows(isa, r).ravel() for r in rows])
    values = int4.unpack_int4(packed, order.size)
    flat = np.zeros(size, np.int8)
    flat[order[order > 0] - 1] = values[order > 0]
    return flat.reshape(weight_shape)


def s4_isa(groups: int, target) -> str:
    """The int4 kernel: edgec_conv_transpose_s4_dsp on cores with the DSP extension (groups 1),
    else the portable edgec_conv_transpose_s4."""
    return DSP if groups == 1 and target.dsp else PORTABLE


# -- the op unit ----------------------------------------------------------------------------------

# ConvTranspose weights are [C_in, C_out/groups, ...]: per output channel is axis 1 when groups
# is 1; grouped layers (depthwise included) share one scale per tensor.
WEIGHT_QSPEC = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-127,
    quant_max=127,
    qscheme=torch.per_channel_symmetric,
    ch_axis=1,
    observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-20),
)


def int4_transposed_qspec(node) -> QuantizationSpec:
    """--weights int4 (edgec.ops.int4): symmetric in [-7, 7], per output channel (axis 1) when
    groups is 1, else one scale for the weight (as the int8 grouped layers)."""
    weight = WEIGHT_QSPEC if transpose_attrs(node)[4] == 1 else LINEAR_WEIGHT_QSPEC
    return dataclasses.replace(weight, quant_min=int4.INT4_QUANT_RANGE[0], quant_max=int4.INT4_QUANT_RANGE[1])


def transpose_attrs(node) -> tuple:
    """(stride, padding, output_padding, dilation, groups) of a transposed convolution node."""
    stride, padding, output_padding, groups, dilation = (
        node_arg(node, index, name, default)
        for index, name, default in (
            (3, "stride", 1),
            (4, "padding", 0),
            (5, "output_padding", 0),
            (6, "groups", 1),
            (7, "dilation", 1),
        )
    )
    return stride, padding, output_padding, dilation, int(groups)


def _pairs(node, values, rank: int) -> list[tuple[int, int]]:
    """Each attribute as (H, W); a 1-D layer's as (neutral, L), so it runs as H = 1."""
    neutral = (1, 0, 0, 1)  # stride, padding, output_padding, dilation
    pairs = []
    for value, default in zip(values, neutral):
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        pairs.append((default, int(items[-1])) if rank == 3 else (int(items[0]), int(items[-1])))
    return pairs


class ConvTranspose(OpDef):
    kind = "conv_transpose2d"
    targets = frozenset(CONV_TRANSPOSES)
    runtime_sources = ("conv/edgec_conv_transpose_s8.c",)
    fuses_activation = True
    spatial = True

    def annotate(self, node) -> None:
        groups = transpose_attrs(node)[4]
        weight = WEIGHT_QSPEC if groups == 1 else LINEAR_WEIGHT_QSPEC
        annotate_with_output(node, {node.args[0]: ACTIVATION_QSPEC, node.args[1]: weight})

    def lower(self, ctx, node) -> None:
        stride, padding, output_padding, dilation, groups = transpose_attrs(node)
        x, weight, bias = weighted_operands(ctx, node, "transposed conv", channel_axis=1)
        if len(x.shape) not in (3, 4) or weight.value.ndim != len(x.shape):
            raise EdgecError(f"{source_line(node)}: transposed convolution on {list(x.shape)} is not supported")
        stride, padding, output_padding, dilation = _pairs(
            node, (stride, padding, output_padding, dilation), len(x.shape)
        )
        c_out = weight.value.shape[1] * groups
        scales = np.broadcast_to(
            np.repeat(weight.scales, groups) if len(weight.scales) > 1 else weight.scales, (c_out,)
        )
        scales = scales.astype(np.float64)
        ctx.add_op(
            self.kind,
            node,
            [x],
            [ctx.output(node)],
            weight=weight.value,
            weight_scales=scales,
            bias=quantized_bias(bias, x.scale, scales, source_line(node)),
            stride=stride,
            pad=padding,
            output_padding=output_padding,
            dilation=dilation,
            groups=groups,
            clamp=(None, None),
            **weight_bits_attr(weight),
        )

    def relayout(self, op, graph) -> None:
        weight = op.attrs["weight"]  # [C_in, C_out/groups, (KH,) KW]
        op.attrs["weight"] = weight[:, :, None, :] if weight.ndim == 3 else weight

    def finalize(self, op, graph) -> None:
        """Output channel g * C_out/groups + j sums group g's input channels' taps into j (a bound:
        each output pixel takes one phase's taps only)."""
        weight, groups = op.attrs["weight"], op.attrs["groups"]
        c_in, cout_g = weight.shape[:2]
        rows = weight.reshape(groups, c_in // groups, cout_g, -1).transpose(0, 2, 1, 3).reshape(groups * cout_g, -1)
        finalize_output_stage(op, graph, rows)

    def specialize(self, op, graph, target) -> None:
        if int4.is_int4(op):
            op.attrs["isa"] = isa = s4_isa(op.attrs["groups"], target)
            if isa == DSP:
                op.kernel = KernelChoice(S4_KERNEL + "_dsp", "int4 dsp", S4_DSP_REASON)
            else:
                op.kernel = KernelChoice(S4_KERNEL, "int4", S4_REASON)
            return
        isa = kernel_isa(target) if op.attrs["groups"] == 1 else None
        op.attrs["isa"] = PORTABLE if isa is None else isa
        op.kernel = packed_choice(
            "edgec_conv_transpose_s8" + ("" if isa is None else f"_{isa}"),
            isa,
            target,
            op.attrs,
            "portable kernel: grouped convolutions have no packed kernel",
        )

    def _geometry(self, op) -> dict:
        a = op.attrs
        return dict(
            stride=a["stride"],
            pad=a["pad"],
            output_padding=a["output_padding"],
            dilation=a["dilation"],
            groups=a["groups"],
            act_min=a["act_min"],
            act_max=a["act_max"],
        )

    def _s4_layout(self, op) -> dict:
        a = op.attrs
        return dict(stride=a["stride"], dilation=a["dilation"], groups=a["groups"], isa=a.get("isa", PORTABLE))

    def _s4_filter(self, op) -> np.ndarray:
        return conv_transpose_s4_filter(op.attrs["weight"], **self._s4_layout(op))

    def golden(self, op, graph, inputs):
        """int4: the packed filter the C reads, unpacked, through the int8 golden."""
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        a = op.attrs
        w = a["weight"]
        if int4.is_int4(op):
            w = conv_transpose_s4_weights(self._s4_filter(op), w.shape, **self._s4_layout(op))
        return conv_transpose2d_s8(
            inputs[0],
            w,
            a["bias"],
            a["multiplier"],
            a["shift"],
            input_zp=x_t.zero_point,
            output_zp=out_t.zero_point,
            out_hw=out_t.shape[1:3],
            **self._geometry(op),
        )

    def scratch_bytes(self, op, graph, target) -> int:
        a = op.attrs
        if int4.is_int4(op):
            k = largest_phase_taps(a["weight"].shape, a["stride"], a["dilation"])
            return 0 if a["isa"] == PORTABLE else 5 * (-(-k // S4_ROW) * S4_ROW)
        return conv_transpose_scratch_bytes(
            a.get("isa", PORTABLE), a["weight"].shape, stride=a["stride"], dilation=a["dilation"]
        )

    def emit(self, op, graph, names) -> CCall:
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        a = op.attrs
        desc = conv_transpose_desc(
            x_t.shape,
            a["weight"],
            a["bias"],
            a["multiplier"],
            a["shift"],
            input_zp=x_t.zero_point,
            output_zp=out_t.zero_point,
            isa=PORTABLE if int4.is_int4(op) else a["isa"],  # int4: the plain bias (offset added to x)
            **self._geometry(op),
        )
        if int4.is_int4(op):
            desc["filter"] = self._s4_filter(op)
        p = names.symbol(op, "desc")
        call = descriptor(CONV_TRANSPOSE_DESC, p, desc)
        scratch = "" if a["isa"] == PORTABLE else f", {names.scratch(op)}"
        call.code = (
            f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])}{scratch});"
        )
        if a["isa"] != PORTABLE:
            k = largest_phase_taps(a["weight"].shape, a["stride"], a["dilation"])
            rule = S4_DSP_SCRATCH if int4.is_int4(op) else DSP_SCRATCH if a["isa"] == DSP else MVE_SCRATCH
            call.scratch_required = rule.call(k)
        return call

    def macs(self, op, graph) -> int:
        x = graph.tensors[op.inputs[0]].shape
        c_in, cout_g, kh, kw = op.attrs["weight"].shape
        return int(np.prod(x[:3]) * c_in * cout_g * kh * kw)


UNIT = ConvTranspose()

"""2-D convolution (any kernel, stride, padding, dilation, groups): golden int8 kernel and op unit.

The golden kernel is the specification the C kernels (runtime_c/src/conv/) are tested against,
byte for byte. Arithmetic: docs/numerics.md, "Convolution".
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import CONVS, aten
from edgec.ir import ARENA_ALIGNMENT, InPlace, KernelChoice
from edgec.numerics import (
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    INT32_MIN,
    activation_bounds,
    quantize_bias,
    quantize_multiplier,
    requantize,
    saturate_int8,
    wrap_int32,
)
from edgec.ops import conv_small, int4
from edgec.ops.base import CCall, OpDef, descriptor, require_quantized
from edgec.ops.conv_packed import (
    CONV_BLOCKING,
    CONV_DSP_SCRATCH,
    CONV_DSP_WIDE_1X1X8_SCRATCH,
    CONV_MVE_SCRATCH,
    mve_filter_rows,
    mve_packed_taps,
    mve_padded_runs,
    mve_routines,
    packed_conv_scratch_bytes,
)
from edgec.ops.kernel import Field, Struct, ints
from edgec.ops.kernel_layout import (
    DSP,
    MVE,
    blocked_bias,
    dsp_channel_table,
    interleave_rows,
    kernel_isa,
    packed_choice,
    widen_taps,
)
from edgec.ops.qspec import ACTIVATION_QSPEC, CONV_WEIGHT_QSPEC, annotate_with_output

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
# The int32 fields of the conv kernels' descriptors, in order.
CONV_DESC_INTS = ints(
    "batches input_h input_w input_c output_h output_w output_c kernel_h kernel_w stride_h stride_w pad_top pad_left "
    "dilation_h dilation_w groups input_offset output_offset act_min act_max",
    groups="divides input_c and output_c (1 for every kernel but edgec_conv_s8)",
    input_offset="-input_zero_point, in [-127, 128]",
    output_offset="output_zero_point, in [-128, 127]",
)
QUANT_FIELDS = (
    Field("multiplier", "const int32_t *", "[output_c]"),
    Field("shift", "const int32_t *", "[output_c]"),
)
CONV_DESC = Struct(
    "edgec_conv_desc",
    (
        *CONV_DESC_INTS,
        Field("filter", "const int8_t *", "OHWI, or the packed kernels' layout"),
        Field("bias", "const int32_t *", "[output_c] or NULL; packed kernels: the folded bias"),
        *QUANT_FIELDS,
    ),
)
CONV_DSP_WIDE_DESC = Struct(
    "edgec_conv_dsp_wide_desc",
    (
        *CONV_DESC_INTS,
        Field("wide_filter", "const int16_t *", "the packed filter widened to int16 pairs"),
        Field("channel_table", "const int32_t *", "8 words per channel pair"),
        *QUANT_FIELDS,
    ),
)
STRUCTS = (
    CONV_DESC,
    CONV_DSP_WIDE_DESC,
)
# The scratch-size rules of this unit's kernels: edgec_nn.h's macros are generated from these.
SCRATCH = (CONV_DSP_SCRATCH, CONV_DSP_WIDE_1X1X8_SCRATCH, CONV_MVE_SCRATCH)

# The largest |product| of an int8 weight and an offset-corrected int8 activation:
# w in [-128, 127], x - zp in [-255, 255].
_MAX_ABS_PRODUCT = 128 * 255
# The requantization shifts the C kernels accept (edgec_shift_valid).
MAX_ABS_SHIFT = 31
# float64 represents every integer below 2^53 exactly, so a float matmul of integer operands is
# exact (whatever the BLAS summation order or FMA use) while every partial sum stays below 2^53.
_FLOAT64_EXACT = 2**53


def conv_output_size(in_size: int, kernel: int, stride: int, pad_before: int, pad_after: int, dilation: int) -> int:
    """Output length along one axis (PyTorch/TFLite floor convention)."""
    span = dilation * (kernel - 1) + 1
    out = (in_size + pad_before + pad_after - span) // stride + 1
    if out < 1:
        raise ValueError(
            f"empty conv output: in={in_size} kernel={kernel} stride={stride} "
            f"pad=({pad_before},{pad_after}) dilation={dilation}"
        )
    return out


def padded_input(
    x: np.ndarray,
    zero_point: int,
    pad: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    out_hw: tuple[int, int],
) -> np.ndarray:
    """x - zero_point as int32, zero-padded top/left by `pad` and bottom/right as far as the taps
    of an `out_hw` output reach (so padded taps contribute 0, and excess input rows are unused)."""
    n, h, w, c = x.shape
    need_h = (out_hw[0] - 1) * stride[0] + (kernel[0] - 1) * dilation[0] + 1
    need_w = (out_hw[1] - 1) * stride[1] + (kernel[1] - 1) * dilation[1] + 1
    xp = np.zeros((n, max(need_h, pad[0] + h), max(need_w, pad[1] + w), c), dtype=np.int32)
    xp[:, pad[0] : pad[0] + h, pad[1] : pad[1] + w, :] = x.astype(np.int32) - np.int32(zero_point)
    return xp


def tap_view(
    xp: np.ndarray, ky: int, kx: int, stride: tuple[int, int], dilation: tuple[int, int], out_hw: tuple[int, int]
) -> np.ndarray:
    """The [N, Ho, Wo, C] view of the padded input that kernel tap (ky, kx) multiplies."""
    y0, x0 = ky * dilation[0], kx * dilation[1]
    return xp[
        :,
        y0 : y0 + (out_hw[0] - 1) * stride[0] + 1 : stride[0],
        x0 : x0 + (out_hw[1] - 1) * stride[1] + 1 : stride[1],
        :,
    ]


def conv_output_stage(
    acc: np.ndarray, bias, multiplier, shift, output_zp: int, act_min: int, act_max: int
) -> np.ndarray:
    """bias add, int32 wrap (the C accumulator), per-channel requantize, offset, clamp."""
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    acc = wrap_int32(acc)
    y = requantize(acc, np.asarray(multiplier, dtype=np.int64), np.asarray(shift, dtype=np.int64))
    return saturate_int8(y + output_zp, act_min, act_max)


def check_conv_args(
    x, multiplier, shift, bias, c_out, input_zp, output_zp, stride, pad, dilation, out_hw, act_min, act_max
):
    """ValueError for arguments the C kernels would reject (EDGEC_ARG_ERROR)."""
    if x.ndim != 4 or x.dtype != np.int8:
        raise ValueError("x must be int8 NHWC")
    if len(multiplier) != c_out or len(shift) != c_out or (bias is not None and len(bias) != c_out):
        raise ValueError("multiplier, shift and bias need one entry per output channel")
    if not (INT8_MIN <= input_zp <= INT8_MAX and INT8_MIN <= output_zp <= INT8_MAX):
        raise ValueError("zero points must be int8")
    if np.any(np.abs(np.asarray(shift, dtype=np.int64)) > MAX_ABS_SHIFT):
        raise ValueError(f"shifts must be in [-{MAX_ABS_SHIFT}, {MAX_ABS_SHIFT}]")
    if min(stride) < 1 or min(dilation) < 1 or min(pad) < 0:
        raise ValueError("stride and dilation must be >= 1, padding >= 0")
    if min(out_hw) < 1:
        raise ValueError(f"output size {out_hw} is empty")
    if not INT8_MIN <= act_min <= act_max <= INT8_MAX:
        raise ValueError("need -128 <= act_min <= act_max <= 127")


def conv2d_s8(
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
    dilation=(1, 1),
    groups: int = 1,
    out_hw,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
) -> np.ndarray:
    """Golden int8 conv. x int8 NHWC, w int8 OHWI [C_out, KH, KW, C_in/groups], bias int32 [C_out]
    or None, multiplier/shift [C_out]; pad = (pad_top, pad_left), bottom/right implied by out_hw.
    Returns int8 [N, Ho, Wo, C_out] (edgec_conv_s8 / edgec_conv_1x1_s8 bit for bit)."""
    x = np.asarray(x)
    w = np.asarray(w)
    c_out, kh, kw, cin_g = w.shape
    n, _, _, c_in = x.shape
    check_conv_args(
        x, multiplier, shift, bias, c_out, input_zp, output_zp, stride, pad, dilation, out_hw, act_min, act_max
    )
    if w.dtype != np.int8 or groups < 1 or c_in != cin_g * groups or c_out % groups:
        raise ValueError(f"int8 OHWI filter {w.shape} does not fit C_in={c_in}, groups={groups}")
    if kh * kw * cin_g * _MAX_ABS_PRODUCT >= _FLOAT64_EXACT:
        raise ValueError("reduction too long for the exact float64 accumulation")
    ho, wo = out_hw
    cout_g = c_out // groups
    xp = padded_input(x, input_zp, pad, (kh, kw), stride, dilation, out_hw)
    # Filter as [G, KH, KW, C_in/G, C_out/G] so each tap is a batched [C_in/G, C_out/G] matrix.
    wg = w.reshape(groups, cout_g, kh, kw, cin_g).transpose(0, 2, 3, 4, 1).astype(np.float64)
    acc = np.zeros((groups, n * ho * wo, cout_g), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            # [N,Ho,Wo,C_in] -> [G, N*Ho*Wo, C_in/G]; one exact float64 (BLAS) matmul per tap.
            cols = tap_view(xp, ky, kx, stride, dilation, out_hw)
            cols = cols.reshape(n * ho * wo, groups, cin_g).transpose(1, 0, 2).astype(np.float64)
            acc += np.matmul(cols, wg[:, ky, kx]).astype(np.int64)
    # [G, P, C_out/G] -> [P, C_out] with output channel g*C_out/G + j.
    acc = acc.transpose(1, 0, 2).reshape(n, ho, wo, c_out)
    return conv_output_stage(acc, bias, multiplier, shift, output_zp, act_min, act_max)


# -- the op unit ------------------------------------------------------------------------------


def conv_attrs(node) -> tuple:
    """(stride, padding, dilation, groups) of aten.conv1d / conv2d / convolution, as tuples."""
    if node.target == aten.convolution.default:
        _, _, _, stride, padding, dilation, _, _, groups = node.args
    else:
        stride, padding, dilation, groups = (
            node_arg(node, index, name, default)
            for index, name, default in ((3, "stride", 1), (4, "padding", 0), (5, "dilation", 1), (6, "groups", 1))
        )
    if isinstance(padding, str):
        raise EdgecError(f"{source_line(node)}: padding='{padding}' is not supported; give explicit padding")
    return _pair(stride), _pair(padding), _pair(dilation), int(groups)


def node_arg(node, index: int, name: str, default):
    """Argument `name` of an ATen call, given positionally (at `index`) or by keyword, else `default`."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _pair(value) -> tuple[int, int]:
    return (int(value[0]), int(value[-1])) if isinstance(value, (list, tuple)) else (int(value), int(value))


def weighted_operands(ctx, node, what: str, channel_axis: int = 0):
    """(activation, int8 weight, bias or None) of a conv/linear node; the weight must be quantized
    to int8, symmetric, per tensor or per output channel (along `channel_axis`)."""
    x = ctx.tensor(node.args[0])
    weight = ctx.constant(node.args[1])
    bias = ctx.constant(node_arg(node, 2, "bias", None))
    if weight is None or not weight.quantized:
        raise EdgecError(f"{source_line(node)}: {what} weight is not quantized")
    if weight.value.dtype != np.int8 or np.any(weight.zero_points != 0):
        raise EdgecError(
            f"{source_line(node)}: {what} weight must be int8 and symmetric (zero point 0), "
            f"got {weight.value.dtype} with zero points {sorted(set(weight.zero_points.tolist()))[:4]}"
        )
    if len(weight.scales) > 1 and weight.axis != channel_axis:
        raise EdgecError(
            f"{source_line(node)}: {what} weight is quantized per channel along axis "
            f"{weight.axis}; edgec needs the output-channel axis {channel_axis}"
        )
    return x, weights_for_bias(weight, bias, x.scale, channel_axis), bias


def weight_bits_attr(weight) -> dict:
    """{"weight_bits": 4} for a weight quantized within int4's range (edgec.ops.int4), else {}."""
    return {"weight_bits": 4} if int4.weight_bits(weight.quant_range) == 4 else {}


# The largest |int32 bias| weights_for_bias leaves: half of int32, so bias plus the weighted sum of
# the (then near-zero) weights of such a channel stays far inside int32.
BIAS_LIMIT = 2**30


def weights_for_bias(weight, bias, input_scale: float, channel_axis: int):
    """`weight` with the scale of each output channel whose real bias is too large for int32 at
    s_in * s_w raised to |b| / (s_in * BIAS_LIMIT), and that channel's int8 values requantized to
    it (round half away from zero), as TFLite's quantizer does (AdjustWeightsForBiasScale): a
    channel with near-zero weights (a dead filter, or one BN scaled down) and a real bias would
    otherwise saturate its bias and output the wrong constant. Only a real (float) bias: a
    program's own int32 bias fits by construction."""
    if bias is None or bias.quantized or input_scale is None:
        return weight
    channels = weight.value.shape[channel_axis]
    needed = np.abs(np.asarray(bias.value, np.float64)) / (input_scale * BIAS_LIMIT)
    if np.size(bias.value) != channels:  # a grouped transposed conv: its bias spans every group
        if np.size(weight.scales) != 1:
            return weight
        needed = needed.max(keepdims=True)  # its one weight scale serves every output channel
    scales = np.broadcast_to(np.asarray(weight.scales, np.float64), needed.shape)
    raised = np.flatnonzero(needed > scales * (INT32_MAX / BIAS_LIMIT))
    if raised.size == 0:
        return weight
    new_scales = scales.copy()
    new_scales[raised] = needed[raised]
    if needed.size != channels:  # per tensor
        return replace(weight, value=_requantized_weight(weight, scales / new_scales), scales=new_scales)
    ratio = np.expand_dims(scales / new_scales, [a for a in range(weight.value.ndim) if a != channel_axis])
    return replace(
        weight,
        value=_requantized_weight(weight, ratio),
        scales=new_scales,
        zero_points=np.zeros(channels, dtype=np.int64),
        axis=channel_axis,
    )


def _requantized_weight(weight, ratio) -> np.ndarray:
    """weight's int values times `ratio` (old scale / new), rounded half away from zero."""
    real = weight.value.astype(np.float64) * ratio
    limit = int4.INT4_QUANT_RANGE[1] if int4.weight_bits(weight.quant_range) == 4 else 127
    return np.clip(np.sign(real) * np.floor(np.abs(real) + 0.5), -limit, limit).astype(np.int8)


def conv_s4(desc: dict, x: np.ndarray) -> np.ndarray:
    """Golden edgec_conv_s4: int8 NHWC x -> int8 [N, Ho, Wo, C_out]."""
    d = desc
    cin_g = d["input_c"] // d["groups"]
    w = int4.unpack_int4(d["filter"], d["output_c"] * d["kernel_h"] * d["kernel_w"] * cin_g)
    w = w.reshape(d["output_c"], d["kernel_h"], d["kernel_w"], cin_g)
    x = np.asarray(x).reshape(d["batches"], d["input_h"], d["input_w"], d["input_c"])
    return conv2d_s8(
        x,
        w,
        d["bias"],
        d["multiplier"],
        d["shift"],
        input_zp=-d["input_offset"],
        output_zp=d["output_offset"],
        stride=(d["stride_h"], d["stride_w"]),
        pad=(d["pad_top"], d["pad_left"]),
        dilation=(d["dilation_h"], d["dilation_w"]),
        groups=d["groups"],
        out_hw=(d["output_h"], d["output_w"]),
        act_min=d["act_min"],
        act_max=d["act_max"],
    )


class Conv2d(OpDef):
    kind = "conv2d"
    targets = frozenset(CONVS)
    runtime_sources = (
        "conv/edgec_conv_s8.c",
        "conv/edgec_conv_s8_dsp.c",
        "conv/edgec_conv_s8_mve.c",
        "conv/edgec_conv_1x1_s8.c",
    )
    fuses_activation = True
    spatial = True
    limits = (
        "1-D and 2-D; every output channel's worst-case accumulator (bias + sum |w| * max |x - zp|) "
        "within int32, checked once calibrated"
    )

    def annotate(self, node) -> None:
        annotate_with_output(node, {node.args[0]: ACTIVATION_QSPEC, node.args[1]: CONV_WEIGHT_QSPEC})

    def lower(self, ctx, node) -> None:
        x, weight, bias = weighted_operands(ctx, node, "conv")
        if len(x.shape) not in (3, 4) or weight.value.ndim != len(x.shape):
            raise EdgecError(
                f"{source_line(node)}: only 1-D and 2-D convolution on NCL/NCHW input is supported, got {list(x.shape)}"
            )
        stride, padding, dilation, groups = conv_attrs(node)
        if len(x.shape) == 3:  # Conv1d: a 2-D convolution with H = 1 (its tensors are stored N,1,L,C)
            stride, padding, dilation = (1, stride[1]), (0, padding[1]), (1, dilation[1])
        c_out, c_in = weight.value.shape[0], x.shape[1]
        weight_scales = np.broadcast_to(weight.scales, (c_out,)).astype(np.float64)
        depthwise = groups == c_in and groups > 1
        out = ctx.output(node)
        ctx.add_op(
            "depthwise_conv2d" if depthwise else "conv2d",
            node,
            [x],
            [out],
            weight=weight.value,
            weight_scales=weight_scales,
            bias=quantized_bias(bias, x.scale, weight_scales, source_line(node)),
            stride=stride,
            pad=(padding[0], padding[1], padding[0], padding[1]),
            dilation=dilation,
            groups=groups,
            clamp=(None, None),
            **weight_bits_attr(weight),
        )

    def relayout(self, op, graph) -> None:
        op.attrs["weight"] = np.ascontiguousarray(
            as_2d_filter(op.attrs["weight"]).transpose(0, 2, 3, 1)
        )  # OIHW -> OHWI

    def finalize(self, op, graph) -> None:
        finalize_output_stage(op, graph)

    def golden(self, op, graph, inputs):
        if int4.is_int4(op):
            return conv_s4(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        a = op.attrs
        return conv2d_s8(
            inputs[0],
            a["weight"],
            a["bias"],
            a["multiplier"],
            a["shift"],
            input_zp=x_t.zero_point,
            output_zp=out_t.zero_point,
            stride=a["stride"],
            pad=a["pad"][:2],
            dilation=a["dilation"],
            groups=a["groups"],
            out_hw=out_t.shape[1:3],
            act_min=a["act_min"],
            act_max=a["act_max"],
        )

    def specialize(self, op, graph, target) -> None:
        """Ungrouped convolutions run the target's packed kernel, if it has one: 1x1 ones too, whose
        receptive field im2col merely widens (measured faster than a per-pixel matrix-vector
        product at every channel count of the reference models)."""
        a = op.attrs
        if int4.is_int4(op):
            return int4.specialize(op, graph, target)
        a["isa"] = kernel_isa(target) if a["groups"] == 1 else None
        # --opt speed/auto: the DSP kernel reads its filter widened to int16 (twice the flash)
        a["wide"] = a["isa"] == DSP and target.fast_layouts
        # Without a packed kernel, a small receptive field runs one with its window compiled in.
        small = conv_small.choose(a, a["isa"], target)
        a["small"] = small is not None
        op.kernel = small or self.chosen_kernel(op, target)

    @staticmethod
    def chosen_kernel(op, target) -> KernelChoice:
        """The record of op.attrs' choice (isa, wide: passes/constant_layouts.py may revise it)."""
        a = op.attrs
        if a["isa"] == MVE:  # the layer's assembly routines named (mve_routines): only those are linked
            function = "edgec_conv_s8_mve_with"
        elif a["isa"] is not None:
            function = f"edgec_conv_s8_{a['isa']}" + ("_wide" if a["wide"] else "")
        else:
            function = "edgec_conv_1x1_s8" if is_pointwise(a) else "edgec_conv_s8"
        choice = packed_choice(
            function, a["isa"], target, a, "portable kernel: grouped convolutions have no packed kernel"
        )
        if dsp_wide_1x1x8(a):
            return KernelChoice(
                function + "_1x1x8",
                choice.variant,
                choice.reason + "; a 1x1 stride-1 layer of 8 input channels and an even output count: one channel "
                "at a time over bands of 24 pixels, its taps and requantization in registers (without a clamp and "
                "with every channel's short requantization; else the pair routine)",
            )
        return choice

    def scratch_bytes(self, op, graph, target) -> int:
        if int4.is_int4(op):
            return int4.scratch_bytes(op)
        isa = op.attrs.get("isa")
        if isa is None:
            return 0
        generic = packed_conv_scratch_bytes(isa, op.attrs["weight"].shape)
        return max(generic, CONV_DSP_WIDE_1X1X8_SCRATCH.value()) if dsp_wide_1x1x8(op.attrs) else generic

    def runtime_sources_of(self, op) -> tuple[str, ...]:
        if op.attrs.get("small"):
            return ("conv/edgec_conv_s8_small.c",)
        if int4.is_int4(op):  # an unpacked odd-K layer runs the int8 packed kernel
            return int4.runtime_sources(op) + (self.runtime_sources if op.attrs.get("s4_unpacked") else ())
        return self.runtime_sources

    def emit(self, op, graph, names) -> CCall:
        a = op.attrs
        if int4.is_int4(op):
            return int4.emit(op, graph, names)
        if a.get("small"):
            return conv_small.emit(op, graph, names)
        if a.get("isa") is not None:
            return emit_packed_conv_call(op, graph, names)
        in_place = is_pointwise(a) and names.in_place(op)
        return emit_desc_call(
            CONV_DESC,
            op.kernel.function + ("_in_place" if in_place else ""),
            op,
            names,
            conv_desc(op, graph, a["weight"], a["bias"]),
            scratch=in_place,
        )

    def in_place(self, op, graph, target):
        """A portable 1x1 conv runs in place: edgec_conv_1x1_s8_in_place computes output pixel q (C_out
        bytes, into scratch) from input pixel r(q) alone, then stores it, for q = 0, 1, ... With
        the input starting d bytes after the output, storing pixel q writes input bytes
        [q*C_out - d, (q+1)*C_out - d), and the pixels still to be read start at byte
        r(q+1)*C_in (r increases with q). So the layout is safe when d >= q*C_out - r(q)*C_in for
        every q >= 1. Of the safe offsets the one closest to tail alignment (d = output bytes -
        input bytes: the two end together) is taken, rounded up to the alignment, so a chain of
        in-place layers keeps one end. At stride 1 with C_out > C_in that is tail alignment itself
        (the bound is (P-1)*(C_out - C_in)); with C_out <= C_in, it is C_in - C_out bytes from head
        alignment."""
        if int4.is_int4(op):
            return ()
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if not is_pointwise(op.attrs) or op.attrs.get("isa") is not None or op.attrs.get("small"):
            return self._overlapping(op, x_t, out_t, target)
        read = pointwise_input_pixels(x_t.shape, out_t.shape, op.attrs["stride"])
        offset = _safe_offset_nearest_tail(np.arange(1, len(read)), read[1:], x_t, out_t)
        return (InPlace(0, offset, scratch_bytes=out_t.shape[3]),)

    def _overlapping(self, op, x_t, out_t, target):
        """The generic kernels need no in-place variant: each computes the output pixels in order,
        reads pixel q's whole receptive field before it writes anything past pixel q, and no field
        starts before an earlier pixel's. So the output may start d bytes below the input when no
        output byte written before a field is read reaches that field, first(q) being the pixel
        index of q's first (top-left, clipped) tap: the portable kernel writes pixel q's channels
        while still reading its field, so it needs (q+1)*C_out <= d + first(q)*C_in; the packed
        ones copy a block of fields into scratch before writing those pixels, so q*C_out <= d +
        first(q)*C_in is enough -- but where the Helium kernel reads the fields of pixel pairs in
        place (mve_reads_fields_in_place), storing up to pixel q+1 while it reads q's field, the
        layer gets (q+2)*C_out <= d + first(q)*C_in (else it copies: slower, never wrong). As
        for the 1x1 conv, the safe offset nearest tail alignment is taken; the kernel's scratch
        stays as it is."""
        first = window_first_pixels(x_t.shape, out_t.shape, op.attrs["stride"], op.attrs["pad"])
        isa = op.attrs.get("isa")
        ahead = 2 if isa == MVE and mve_reads_fields_in_place(op.attrs, x_t.shape, out_t.shape) else int(isa is None)
        written = np.arange(len(first)) + ahead
        offset = _safe_offset_nearest_tail(written, first, x_t, out_t)
        return (InPlace(0, offset, scratch_bytes=self.scratch_bytes(op, None, target)),)

    def macs(self, op, graph) -> int:
        out = graph.tensors[op.outputs[0]].shape
        return int(np.prod(out) * np.prod(op.attrs["weight"].shape[1:]))


def mve_reads_fields_in_place(attrs, input_shape, output_shape) -> bool:
    """Whether edgec_conv_s8_mve reads this layer's receptive fields from the input itself
    (mve_direct_layer_make): C_out a multiple of 4 and window rows of whole groups of 16 taps
    (KW * C_in) or padded to 16, 1 or 3 of them, undilated along W, every requantization shift
    negative (the direct variants' output stage; a layer not yet quantized counts as such); a
    1x1 stride-1 layer whose output is its input's size is copied a pixel pair at a time instead."""
    c_out, kh, kw, c_in = attrs["weight"].shape
    contiguous = (kh, kw) == (1, 1) and attrs["stride"] == (1, 1) and not any(attrs["pad"][:2])
    contiguous = contiguous and tuple(output_shape[1:3]) == tuple(input_shape[1:3])
    rows = kw * c_in % 16 == 0 or mve_padded_runs(attrs["weight"].shape)
    strict = bool(np.all(np.asarray(attrs.get("shift", -1)) < 0))
    return not contiguous and strict and c_out % 4 == 0 and rows and kh in (1, 3) and attrs["dilation"][1] == 1


def as_2d_filter(weight: np.ndarray) -> np.ndarray:
    """A Conv1d filter [O, I, K] as the Conv2d filter [O, I, 1, K] it runs as; a 2-D one as is."""
    return weight[:, :, None, :] if weight.ndim == 3 else weight


def dsp_wide_1x1x8(attrs) -> bool:
    """edgec_conv_s8_dsp_wide_1x1x8's layers: the DSP kernel with a widened filter, 1x1, stride 1,
    8 input channels, an even output channel count (its band routine stores whole channel pairs)."""
    c_out, c_in = attrs["weight"].shape[0], attrs["weight"].shape[3]
    pointwise = is_pointwise(attrs) and attrs["stride"] == (1, 1)
    return attrs.get("isa") == DSP and bool(attrs.get("wide")) and pointwise and c_in == 8 and c_out % 2 == 0


def is_pointwise(attrs) -> bool:
    """A 1x1 ungrouped, unpadded, undilated convolution: edgec_conv_1x1_s8's case."""
    return (
        attrs["weight"].shape[1:3] == (1, 1)
        and attrs["groups"] == 1
        and not any(attrs["pad"])
        and attrs["dilation"] == (1, 1)
    )


def emit_packed_conv_call(op, graph, names) -> CCall:
    """edgec_conv_s8_dsp/_dsp_wide/_mve: the filter re-laid for the micro-kernel (widened to
    int16 for _dsp_wide), the input offset folded into the bias (see edgec.ops.kernel_layout);
    _dsp_wide takes the biases in its channel table."""
    a = op.attrs
    blocking = CONV_BLOCKING[a["isa"]]
    rows = a["weight"].reshape(a["weight"].shape[0], -1)
    zero_point = graph.tensors[op.inputs[0]].zero_point
    bias = blocked_bias(a["bias"], rows, zero_point, blocking.rows)
    weights = interleave_rows(mve_filter_rows(a["weight"]) if a["isa"] == MVE else rows, blocking)
    struct = CONV_DESC
    if a.get("wide"):
        struct = CONV_DSP_WIDE_DESC
        weights = widen_taps(weights)
        bias = dsp_channel_table(bias, a["multiplier"], a["shift"], graph.tensors[op.outputs[0]].zero_point)
    k, c_in = int(np.prod(a["weight"].shape[1:])), a["weight"].shape[3]
    if a["isa"] == MVE:
        k = mve_packed_taps(a["weight"].shape)
    required = CONV_DSP_SCRATCH.call(k, c_in) if a["isa"] == DSP else CONV_MVE_SCRATCH.call(k)
    if dsp_wide_1x1x8(a):
        required = CONV_DSP_WIDE_1X1X8_SCRATCH.call()
    desc = conv_desc(op, graph, weights, bias, struct)
    routines = [f"&{r}" if r else "NULL" for r in mve_routines(desc)] if a["isa"] == MVE else []
    return emit_desc_call(
        struct, op.kernel.function, op, names, desc, scratch=True, scratch_required=required, routines=routines
    )


def pointwise_input_pixels(input_shape, output_shape, stride) -> np.ndarray:
    """For each output pixel of a 1x1 conv (NHWC order), the index of the input pixel it reads."""
    n, h, w, _ = input_shape
    batch, oy, ox = np.unravel_index(np.arange(n * output_shape[1] * output_shape[2]), (n, *output_shape[1:3]))
    return ((batch * h + oy * stride[0]) * w + ox * stride[1]).astype(np.int64)


def window_first_pixels(input_shape, output_shape, stride, pad) -> np.ndarray:
    """For each output pixel of a convolution (NHWC order), the index of the first input pixel
    its receptive field reads (top-left, clipped to the image)."""
    n, h, w, _ = input_shape
    batch, oy, ox = np.unravel_index(np.arange(n * output_shape[1] * output_shape[2]), (n, *output_shape[1:3]))
    row = np.maximum(oy * stride[0] - pad[0], 0)
    col = np.maximum(ox * stride[1] - pad[1], 0)
    return ((batch * h + row) * w + col).astype(np.int64)


def _safe_offset_nearest_tail(written_pixels, read_pixel, x_t, out_t) -> int:
    """The input offset d (bytes after the output's start) of an in-place conv: before the kernel
    reads from input pixel read_pixel[i] on, it has stored written_pixels[i] output pixels, so d
    must be at least written*C_out - read*C_in for every i. Of the safe offsets the one nearest
    tail alignment (output bytes - input bytes) is taken, rounded up to the arena alignment."""
    needed = np.asarray(written_pixels, dtype=np.int64) * out_t.shape[3] - np.asarray(read_pixel) * x_t.shape[3]
    safe = int(needed.max(initial=out_t.nbytes - x_t.nbytes))
    return -(-safe // ARENA_ALIGNMENT) * ARENA_ALIGNMENT


def quantized_bias(bias, input_scale: float, weight_scales: np.ndarray, where: str):
    """int32 bias at scale s_in * s_w[c]: a program's own int32 bias as it is when its scales are
    those (to float32 precision, as the converters compute them), else round(b / (s_in * s_w))
    of its real value."""
    if bias is None:
        return None
    if not bias.quantized:
        if bias.value.dtype.kind != "f":
            raise EdgecError(f"{where}: bias of dtype {bias.value.dtype} carries no scale")
        return quantize_bias(bias.value, input_scale, weight_scales)
    if bias.value.dtype != np.int32 or np.any(bias.zero_points != 0):
        raise EdgecError(f"{where}: a quantized bias must be int32 with zero point 0, got {bias.value.dtype}")
    expected = input_scale * np.asarray(weight_scales, dtype=np.float64)
    scales = np.broadcast_to(bias.scales, expected.shape)
    if np.allclose(scales, expected, rtol=2**-20, atol=0):
        return bias.value.astype(np.int32)
    return quantize_bias(bias.value.astype(np.float64) * scales, input_scale, weight_scales)


SATURATING_RATIO = 2.0**29


def finalize_output_stage(op, graph, weight_rows: np.ndarray | None = None) -> None:
    """Per-channel (multiplier, shift) of s_in*s_w/s_out, and the fused clamp's int8 bounds, after
    checking that no output channel's accumulator can leave int32 (`weight_rows`: each output
    channel's weights, [C_out, K]; by default op.attrs["weight"] with the output channels first)."""
    require_quantized(op, graph, op.kind.replace("_", " "))
    x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    rows = op.attrs["weight"] if weight_rows is None else weight_rows
    check_accumulator_range(op, x_t.zero_point, np.asarray(rows).reshape(len(rows), -1))
    # A ratio of 2^29 or more moves the output by >= 2^29 steps per accumulator unit: every non-zero
    # accumulator saturates (int8 and int16 alike), so 2^29 computes the same bytes and stays
    # representable (an output range collapsed by clamps with disjoint bounds reaches 1e9).
    pairs = [
        quantize_multiplier(min(x_t.scale * float(s) / out_t.scale, SATURATING_RATIO))
        for s in op.attrs["weight_scales"]
    ]
    op.attrs["multiplier"] = np.array([m for m, _ in pairs], dtype=np.int32)
    op.attrs["shift"] = np.array([s for _, s in pairs], dtype=np.int32)
    op.attrs["act_min"], op.attrs["act_max"] = activation_bounds(out_t.zero_point, out_t.scale, *op.attrs["clamp"])


def check_accumulator_range(op, input_zp: int, weight_rows: np.ndarray) -> None:
    """EdgecError naming the layer if some input could take an output channel's accumulator,
    bias + sum w * (x - zp), outside int32: the C kernels would wrap it modulo 2^32 (defined, and
    what the golden does, but not the layer's value). The bound, bias +- sum |w| * max |x - zp|, is
    reached by the worst input (and is at most |bias| + K * 32640 for K taps), so a dead channel
    (all-zero weights) with a saturated bias still compiles."""
    largest_x = max(INT8_MAX - input_zp, input_zp - INT8_MIN)
    taps = np.abs(np.asarray(weight_rows, dtype=np.int64)).sum(axis=1) * largest_x
    bias = np.zeros_like(taps) if op.attrs["bias"] is None else np.asarray(op.attrs["bias"], dtype=np.int64)
    over = np.flatnonzero((bias + taps > INT32_MAX) | (bias - taps < INT32_MIN))
    if over.size:
        c = int(over[0])
        others = f" (and {over.size - 1} more channels)" if over.size > 1 else ""
        raise EdgecError(
            f"{op.source or op.name}: the int32 accumulator of output channel {c}{others} can overflow: "
            f"bias {bias[c]} +- worst-case weighted sum {taps[c]} leaves int32; the bias is too large "
            f"for the layer's input and weight scales"
        )


def conv_desc(op, graph, weights: np.ndarray, bias: np.ndarray | None, struct: Struct = CONV_DESC) -> dict:
    """The values of a conv layer's descriptor (edgec_conv_desc, or `struct`: the wide one): its
    geometry and quantization from op.attrs, the given filter and bias arrays (op.attrs' own, or
    a packed kernel's layout of them)."""
    a = op.attrs
    x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    n, h, w, c_in = x_t.shape
    _, kh, kw, _ = a["weight"].shape
    ints = (
        (n, h, w, c_in, *out_t.shape[1:], kh, kw, *a["stride"], *a["pad"][:2], *a["dilation"], a.get("groups", 1))
        + (-x_t.zero_point, out_t.zero_point, a["act_min"], a["act_max"])
        + (weights, bias, a["multiplier"], a["shift"])
    )
    return dict(zip(struct.names, ints, strict=True))


def emit_desc_call(
    struct: Struct,
    kernel: str,
    op,
    names,
    desc: dict,
    *,
    scratch: bool = False,
    scratch_required: str | None = None,
    routines: list[str] = (),
) -> CCall:
    """The call of a conv or depthwise kernel: `kernel(&desc, [routines, ]input, output[, scratch])`,
    its descriptor a static const `struct` of `desc`'s values (edgec.ops.base.descriptor)."""
    symbol = names.symbol(op, "desc")
    call = descriptor(struct, symbol, desc)
    args = [f"&{symbol}", *routines, names.ptr(op.inputs[0]), names.ptr(op.outputs[0])]
    args += [names.scratch(op)] if scratch else []
    call.code = f"status |= {kernel}({', '.join(args)});"
    call.scratch_required, call.function = scratch_required, kernel
    return call


UNIT = Conv2d()

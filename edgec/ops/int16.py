"""int16 activation kernels, the "16x8" scheme of TFLite and CMSIS-NN's _s16 kernels.

Activations are int16 and symmetric (zero point 0, so no input or output offset), weights int8
per output channel and symmetric, biases int64. A layer's int64 accumulator
acc = sum(x * w) + bias (exact: TFLite's reference kernels accumulate in int64) is brought to
the output scale by requantize_s64 (edgec.numerics: CMSIS-NN arm_nn_requantize_s64 on the
REDUCE_MULTIPLIER of the Q31 multiplier), then clamped to [act_min, act_max] in int16.

For every kernel this module has a `*_desc(...)` function computing the C descriptor's field
values from float scales and op attributes (a dict whose keys are the C struct's fields in
declaration order; numpy arrays for pointer fields, None for a NULL one) and a golden numpy
function taking that same dict and the input(s), so C and golden provably use the same constants.
"""

from __future__ import annotations

import numpy as np

from edgec.numerics import (
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    S64_SHIFT_MAX,
    add_bias_s64,
    quantize_multiplier,
    requantize,
    requantize_s64,
    saturate_int16,
    wrap_int32,
)
from edgec.ops.binary import BINARY_DIMS, _layout_fields
from edgec.ops.kernel import Field, Scratch, Struct, ints
from edgec.ops.pool import _check_axis, _divisor

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
CONV_S16_DESC = Struct(
    "edgec_conv_s16_desc",
    (
        *ints("batches input_h input_w input_c output_h output_w output_c kernel_h kernel_w stride_h"),
        *ints("stride_w pad_top pad_left dilation_h dilation_w groups act_min act_max"),
        Field("filter", "const int8_t *", doc="[output_c][kernel_h][kernel_w][input_c / groups]"),
        Field("bias", "const int64_t *", doc="[output_c] or NULL"),
        Field("multiplier", "const int32_t *", doc="[output_c]"),
        Field("shift", "const int32_t *", doc="[output_c]"),
    ),
)
DEPTHWISE_CONV_S16_DESC = Struct(
    "edgec_depthwise_conv_s16_desc",
    (
        *ints("batches input_h input_w input_c output_h output_w ch_mult kernel_h kernel_w stride_h"),
        *ints("stride_w pad_top pad_left dilation_h dilation_w act_min act_max"),
        Field("filter", "const int8_t *", doc="[kernel_h][kernel_w][input_c * ch_mult]"),
        Field("bias", "const int64_t *", doc="[input_c * ch_mult] or NULL"),
        Field("multiplier", "const int32_t *", doc="[input_c * ch_mult]"),
        Field("shift", "const int32_t *", doc="[input_c * ch_mult]"),
    ),
)
FULLY_CONNECTED_S16_DESC = Struct(
    "edgec_fully_connected_s16_desc",
    (
        *ints("batches input_c output_c act_min act_max"),
        Field("filter", "const int8_t *", doc="[output_c][input_c]"),
        Field("bias", "const int64_t *", doc="[output_c] or NULL"),
        Field("multiplier", "const int32_t *", doc="[output_c]"),
        Field("shift", "const int32_t *", doc="[output_c]"),
    ),
)
BINARY_S16_DESC = Struct(
    "edgec_binary_s16_desc",
    (
        *ints("num_dims"),
        Field("dims", count=BINARY_DIMS),
        Field("strides1", count=BINARY_DIMS),
        Field("strides2", count=BINARY_DIMS),
        *ints("input1_multiplier input1_shift input2_multiplier input2_shift left_shift"),
        *ints("output_multiplier output_shift act_min act_max"),
    ),
)
POOL_S16_DESC = Struct(
    "edgec_pool_s16_desc",
    (
        *ints("batches input_h input_w channels output_h output_w filter_h filter_w stride_h stride_w"),
        *ints("pad_top pad_left count_include_pad divisor_override act_min act_max"),
    ),
)
LUT_S16_DESC = Struct(
    "edgec_lut_s16_desc",
    (
        Field("size", doc="elements"),
        Field("table", "const int16_t *", doc="EDGEC_LUT_S16_SIZE entries"),
    ),
)
SOFTMAX_S16_DESC = Struct(
    "edgec_softmax_s16_desc",
    (
        *ints("outer axis_size inner input_multiplier input_left_shift"),
        Field("exp_lut", "const int16_t *", doc="EDGEC_LUT_S16_SIZE entries"),
        Field("one_over_one_plus_x_lut", "const int16_t *", doc="EDGEC_LUT_S16_SIZE entries"),
    ),
)
REQUANTIZE_S16_DESC = Struct("edgec_requantize_s16_desc", (*ints("size input_offset multiplier shift output_offset"),))
SQRT_S16_DESC = Struct(
    "edgec_sqrt_s16_desc",
    (
        Field("size", doc="elements"),
        Field("multiplier", doc="s_in / s_out^2 = multiplier * 4^-half_shift, multiplier in [0, 2^31)"),
        Field("half_shift", doc="0..31"),
    ),
)
STRUCTS = (
    CONV_S16_DESC,
    DEPTHWISE_CONV_S16_DESC,
    FULLY_CONNECTED_S16_DESC,
    BINARY_S16_DESC,
    POOL_S16_DESC,
    LUT_S16_DESC,
    SOFTMAX_S16_DESC,
    REQUANTIZE_S16_DESC,
    SQRT_S16_DESC,
)
# The scratch-size rules of this unit's kernels: edgec_nn.h's macros are generated from these.
CONV_S16_DSP_SCRATCH = Scratch("EDGEC_CONV_S16_DSP_SCRATCH_BYTES", ("k",), "(4 * (((k) + 1) / 2))")
FULLY_CONNECTED_S16_DSP_SCRATCH = Scratch(
    "EDGEC_FULLY_CONNECTED_S16_DSP_SCRATCH_BYTES", ("input_c",), "(4 * (((input_c) + 1) / 2))"
)
SCRATCH = (CONV_S16_DSP_SCRATCH, FULLY_CONNECTED_S16_DSP_SCRATCH)


def s16_multipliers(input_scale: float, weight_scales, output_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, shift) of s_in * s_w[c] / s_out (TFLite QuantizeMultiplier), shifts
    within what requantize_s64 takes (the effective scale below 2^7)."""
    pairs = [quantize_multiplier(input_scale * float(s) / output_scale) for s in np.atleast_1d(weight_scales)]
    shifts = np.array([s for _, s in pairs], dtype=np.int32)
    if (shifts > S64_SHIFT_MAX).any():
        raise ValueError(
            "an int16 layer's effective scale s_in * s_w / s_out must be below 2^7 "
            f"(requantize_s64's shift <= {S64_SHIFT_MAX})"
        )
    return np.array([m for m, _ in pairs], dtype=np.int32), shifts


def _output_stage(acc: np.ndarray, desc: dict) -> np.ndarray:
    """clamp(requantize_s64(acc + bias[c]), act_min, act_max) over the last (channel) axis."""
    bias = desc["bias"] if desc["bias"] is not None else np.zeros(1, dtype=np.int64)
    out = requantize_s64(add_bias_s64(acc, bias), desc["multiplier"], desc["shift"])
    return saturate_int16(out, desc["act_min"], desc["act_max"])


def _conv_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """PyTorch's output size with `pad` on both sides."""
    out = (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    if out < 1:
        raise ValueError(f"empty output: size {size}, kernel {kernel}, stride {stride}, pad {pad}, dilation {dilation}")
    return out


def _window_fields(input_shape, kernel_hw, stride, pad, dilation, output_hw) -> dict:
    n, h, w, c = (int(v) for v in input_shape)
    if output_hw is None:
        output_hw = tuple(_conv_output_size(*a) for a in zip((h, w), kernel_hw, stride, pad, dilation))
    return dict(batches=n, input_h=h, input_w=w, input_c=c, output_h=int(output_hw[0]), output_w=int(output_hw[1]))


def _bias_field(bias) -> np.ndarray | None:
    return None if bias is None else np.ascontiguousarray(bias, dtype=np.int64)


def _patches(x: np.ndarray, desc: dict):
    """(ky, kx, patch) per filter tap: patch[n, oy, ox, c] = x[n, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, c],
    zero outside the input (activations are symmetric: padding is the value 0)."""
    n, h, w, c = desc["batches"], desc["input_h"], desc["input_w"], desc["input_c"]
    oh, ow, kh, kw = desc["output_h"], desc["output_w"], desc["kernel_h"], desc["kernel_w"]
    sh, sw, dh, dw = desc["stride_h"], desc["stride_w"], desc["dilation_h"], desc["dilation_w"]
    pt, pl = desc["pad_top"], desc["pad_left"]
    span_h, span_w = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    padded = np.zeros((n, max(span_h, pt + h), max(span_w, pl + w), c), dtype=np.int64)
    padded[:, pt : pt + h, pl : pl + w, :] = x.reshape(n, h, w, c)
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dh, kx * dw
            yield ky, kx, padded[:, y0 : y0 + (oh - 1) * sh + 1 : sh, x0 : x0 + (ow - 1) * sw + 1 : sw, :]


# ---- convolution -------------------------------------------------------------------------------


def conv_s16_desc(
    input_shape,
    weight: np.ndarray,
    bias,
    input_scale: float,
    weight_scales,
    output_scale: float,
    *,
    stride=(1, 1),
    pad=(0, 0),
    dilation=(1, 1),
    groups: int = 1,
    output_hw=None,
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
) -> dict:
    """edgec_conv_s16_desc's fields. input_shape NHWC; weight int8 [C_out, C_in/groups, KH, KW]
    (PyTorch), stored OHWI; bias int64 [C_out] (numerics.quantize_bias_s64) or None; pad =
    (top, left), the output size PyTorch's for that padding on both sides unless output_hw says
    otherwise (TFLite SAME)."""
    c_out, _, kh, kw = weight.shape
    multiplier, shift = s16_multipliers(input_scale, np.broadcast_to(weight_scales, (c_out,)), output_scale)
    return dict(
        **_window_fields(input_shape, (kh, kw), stride, pad, dilation, output_hw),
        output_c=int(c_out),
        kernel_h=int(kh),
        kernel_w=int(kw),
        stride_h=int(stride[0]),
        stride_w=int(stride[1]),
        pad_top=int(pad[0]),
        pad_left=int(pad[1]),
        dilation_h=int(dilation[0]),
        dilation_w=int(dilation[1]),
        groups=int(groups),
        act_min=int(act_min),
        act_max=int(act_max),
        filter=np.ascontiguousarray(np.transpose(weight, (0, 2, 3, 1)), dtype=np.int8),
        bias=_bias_field(bias),
        multiplier=multiplier,
        shift=shift,
    )


def conv_s16(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_conv_s16 (CMSIS-NN arm_convolve_s16; TFLite reference_integer_ops::ConvPerChannel,
    the int16 overload): int16 NHWC in, int16 NHWC out [N, H_out, W_out, C_out].

    acc[n, oy, ox, o] = sum over ky, kx, i of x[n, oy*stride_h - pad_top + ky*dilation_h,
    ox*stride_w - pad_left + kx*dilation_w, g*Cg + i] * filter[o, ky, kx, i] (taps outside the
    input contribute 0; g = o // (C_out/groups), Cg = C_in/groups), exact in int64;
    out = clamp(requantize_s64(add_bias_s64(acc, bias[o]), multiplier[o], shift[o]), act_min, act_max).
    """
    groups, c_out = desc["groups"], desc["output_c"]
    cg, og = desc["input_c"] // groups, c_out // groups
    filt = desc["filter"].astype(np.int64).reshape(c_out, desc["kernel_h"], desc["kernel_w"], cg)
    acc = np.zeros((desc["batches"], desc["output_h"], desc["output_w"], c_out), dtype=np.int64)
    for ky, kx, patch in _patches(x, desc):
        for g in range(groups):
            acc[..., g * og : (g + 1) * og] += (
                patch[..., g * cg : (g + 1) * cg] @ filt[g * og : (g + 1) * og, ky, kx, :].T
            )
    return _output_stage(acc, desc)


def conv_s16_dsp_scratch_bytes(desc: dict) -> int:
    """EDGEC_CONV_S16_DSP_SCRATCH_BYTES: one im2col column of K = KH*KW*C_in/groups int16."""
    return 4 * ((desc["kernel_h"] * desc["kernel_w"] * (desc["input_c"] // desc["groups"]) + 1) // 2)


# ---- depthwise convolution ---------------------------------------------------------------------


def depthwise_conv_s16_desc(
    input_shape,
    weight: np.ndarray,
    bias,
    input_scale: float,
    weight_scales,
    output_scale: float,
    *,
    stride=(1, 1),
    pad=(0, 0),
    dilation=(1, 1),
    output_hw=None,
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
) -> dict:
    """edgec_depthwise_conv_s16_desc's fields. weight int8 [C_in * ch_mult, 1, KH, KW] (PyTorch,
    groups = C_in), stored [KH][KW][C_out] as TFLite's depthwise filter; the rest as conv_s16_desc."""
    c_out, _, kh, kw = weight.shape
    c_in = int(input_shape[3])
    if c_out % c_in:
        raise ValueError(f"depthwise: {c_out} output channels is not a multiple of {c_in} input channels")
    multiplier, shift = s16_multipliers(input_scale, np.broadcast_to(weight_scales, (c_out,)), output_scale)
    return dict(
        **_window_fields(input_shape, (kh, kw), stride, pad, dilation, output_hw),
        ch_mult=c_out // c_in,
        kernel_h=int(kh),
        kernel_w=int(kw),
        stride_h=int(stride[0]),
        stride_w=int(stride[1]),
        pad_top=int(pad[0]),
        pad_left=int(pad[1]),
        dilation_h=int(dilation[0]),
        dilation_w=int(dilation[1]),
        act_min=int(act_min),
        act_max=int(act_max),
        filter=np.ascontiguousarray(np.transpose(weight[:, 0], (1, 2, 0)), dtype=np.int8),
        bias=_bias_field(bias),
        multiplier=multiplier,
        shift=shift,
    )


def depthwise_conv_s16(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_depthwise_conv_s16 (CMSIS-NN arm_depthwise_conv_s16; TFLite
    reference_integer_ops::DepthwiseConvPerChannel, int16 overload): output channel
    o = c * ch_mult + m reads input channel c;
    acc[n, oy, ox, o] = sum over ky, kx of x[n, oy*stride_h - pad_top + ky*dilation_h,
    ox*stride_w - pad_left + kx*dilation_w, o // ch_mult] * filter[ky, kx, o] (0 outside), exact
    in int64; out = clamp(requantize_s64(add_bias_s64(acc, bias[o]), multiplier[o], shift[o]),
    act_min, act_max)."""
    filt = desc["filter"].astype(np.int64).reshape(desc["kernel_h"], desc["kernel_w"], -1)
    acc = np.zeros((desc["batches"], desc["output_h"], desc["output_w"], filt.shape[2]), dtype=np.int64)
    for ky, kx, patch in _patches(x, desc):
        acc += np.repeat(patch, desc["ch_mult"], axis=3) * filt[ky, kx]
    return _output_stage(acc, desc)


# ---- fully connected ---------------------------------------------------------------------------


def fully_connected_s16_desc(
    batches: int,
    weight: np.ndarray,
    bias,
    input_scale: float,
    weight_scales,
    output_scale: float,
    *,
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
) -> dict:
    """edgec_fully_connected_s16_desc's fields. weight int8 [C_out, C_in] (PyTorch Linear); per
    output channel (or one broadcast) weight scale; bias int64 [C_out] or None."""
    c_out, c_in = weight.shape
    multiplier, shift = s16_multipliers(input_scale, np.broadcast_to(weight_scales, (c_out,)), output_scale)
    return dict(
        batches=int(batches),
        input_c=int(c_in),
        output_c=int(c_out),
        act_min=int(act_min),
        act_max=int(act_max),
        filter=np.ascontiguousarray(weight, dtype=np.int8),
        bias=_bias_field(bias),
        multiplier=multiplier,
        shift=shift,
    )


def fully_connected_s16(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_fully_connected_s16 (CMSIS-NN arm_fully_connected_s16 / arm_nn_vec_mat_mult_t_s16,
    there per tensor, here per output channel; TFLite reference_integer_ops::FullyConnected int16):
    acc[b, o] = sum_k x[b, k] * filter[o, k] exact in int64;
    out = clamp(requantize_s64(add_bias_s64(acc, bias[o]), multiplier[o], shift[o]), act_min, act_max)."""
    xs = x.reshape(desc["batches"], desc["input_c"]).astype(np.int64)
    return _output_stage(xs @ desc["filter"].astype(np.int64).T, desc)


def fully_connected_s16_dsp_scratch_bytes(desc: dict) -> int:
    """EDGEC_FULLY_CONNECTED_S16_DSP_SCRATCH_BYTES: one input row of C_in int16, reordered."""
    return 4 * ((desc["input_c"] + 1) // 2)


# ---- add and mul -------------------------------------------------------------------------------

ADD_S16_LEFT_SHIFT = 15  # TFLite CalculateOpDataAdd: left_shift = 15 for int16 outputs (20 for int8)


def add_s16_desc(
    shape1, shape2, s1: float, s2: float, s_out: float, *, act_min: int = INT16_MIN, act_max: int = INT16_MAX
) -> dict:
    """edgec_binary_s16_desc's fields for y = x1 + x2 with NumPy broadcasting (layout as
    edgec.ops.binary.binary_desc). TFLite-micro CalculateOpDataAdd for int16: twice_max = 2 max(s1, s2),
    inputs rescaled by s_i / twice_max after a left shift of 15, the sum by twice_max / (2^15 s_out)."""
    twice_max = 2.0 * max(float(s1), float(s2))
    m1, sh1 = quantize_multiplier(float(s1) / twice_max)
    m2, sh2 = quantize_multiplier(float(s2) / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << ADD_S16_LEFT_SHIFT) * float(s_out)))
    return {
        **_layout_fields(shape1, shape2, ("strides1", "strides2")),
        "input1_multiplier": m1,
        "input1_shift": sh1,
        "input2_multiplier": m2,
        "input2_shift": sh2,
        "left_shift": ADD_S16_LEFT_SHIFT,
        "output_multiplier": mo,
        "output_shift": sho,
        "act_min": int(act_min),
        "act_max": int(act_max),
    }


def mul_s16_desc(
    shape1, shape2, s1: float, s2: float, s_out: float, *, act_min: int = INT16_MIN, act_max: int = INT16_MAX
) -> dict:
    """edgec_binary_s16_desc's fields for y = x1 * x2 with NumPy broadcasting: the output multiplier
    QuantizeMultiplier(s1 * s2 / s_out) (TFLite-micro CalculateOpDataMul), the input fields 0."""
    mo, sho = quantize_multiplier(float(s1) * float(s2) / float(s_out))
    return {
        **_layout_fields(shape1, shape2, ("strides1", "strides2")),
        "input1_multiplier": 0,
        "input1_shift": 0,
        "input2_multiplier": 0,
        "input2_shift": 0,
        "left_shift": 0,
        "output_multiplier": mo,
        "output_shift": sho,
        "act_min": int(act_min),
        "act_max": int(act_max),
    }


def _operands(x1, x2, desc: dict) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """The two int16 inputs read element by element through the descriptor's layout as the C
    kernel reads them (flat int64 arrays of the output's size), and the output shape."""
    for x in (x1, x2):
        if np.asarray(x).dtype != np.int16:
            raise TypeError(f"int16 kernels expect int16 inputs, got {np.asarray(x).dtype}")
    rank = desc["num_dims"]
    flat = []
    for x, name in ((x1, "strides1"), (x2, "strides2")):
        index = np.zeros((), dtype=np.int64)
        for size, stride in zip(desc["dims"][:rank], desc[name][:rank]):
            index = index[..., None] + np.arange(size, dtype=np.int64) * stride
        flat.append(np.ascontiguousarray(x).reshape(-1).astype(np.int64)[index.reshape(-1)])
    return flat[0], flat[1], np.broadcast_shapes(np.shape(x1), np.shape(x2))


def add_s16(x1, x2, desc: dict) -> np.ndarray:
    """edgec_add_s16 (CMSIS-NN arm_elementwise_add_s16; TFLite reference_integer_ops::Add for
    int16, offsets 0): a = requantize(x1 << left_shift, input1_multiplier, input1_shift), b likewise,
    y = clamp(requantize(a + b, output_multiplier, output_shift), act_min, act_max), requantize =
    numerics.requantize (arm_nn_requantize), a + b wrapping in int32 as the C (never with
    add_s16_desc's constants: |a|, |b| <= 2^29)."""
    a, b, shape = _operands(x1, x2, desc)
    scaled1 = requantize(a << desc["left_shift"], desc["input1_multiplier"], desc["input1_shift"])
    scaled2 = requantize(b << desc["left_shift"], desc["input2_multiplier"], desc["input2_shift"])
    y = requantize(wrap_int32(scaled1 + scaled2), desc["output_multiplier"], desc["output_shift"])
    return saturate_int16(y, desc["act_min"], desc["act_max"]).reshape(shape)


def mul_s16(x1, x2, desc: dict) -> np.ndarray:
    """edgec_mul_s16 (CMSIS-NN arm_elementwise_mul_s16; TFLite reference_integer_ops::Mul for
    int16, offsets 0): y = clamp(requantize(x1 * x2, output_multiplier, output_shift), act_min, act_max)."""
    a, b, shape = _operands(x1, x2, desc)
    y = requantize(a * b, desc["output_multiplier"], desc["output_shift"])
    return saturate_int16(y, desc["act_min"], desc["act_max"]).reshape(shape)


# ---- pooling -----------------------------------------------------------------------------------


def pool_s16_desc(
    input_shape,
    *,
    kernel,
    stride,
    pad,
    out_hw,
    divisor: str | int = "in_bounds",
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
) -> dict:
    """edgec_pool_s16_desc's fields for max_pool_s16 / avg_pool_s16: NHWC input_shape,
    kernel, stride, pad = (top, left), out_hw as edgec.ops.pool.pool2d_desc; divisor (average
    only) "in_bounds" (TFLite / CMSIS-NN), "include_pad" (PyTorch count_include_pad) or an int
    (divisor_override)."""
    n, h, w, c = (int(v) for v in input_shape)
    _check_axis("height", h, int(out_hw[0]), int(kernel[0]), int(stride[0]), int(pad[0]))
    _check_axis("width", w, int(out_hw[1]), int(kernel[1]), int(stride[1]), int(pad[1]))
    _divisor(divisor, np.zeros((1, 1), np.int64), (h, w), kernel, stride, pad, (1, 1))  # validates it
    return dict(
        batches=n,
        input_h=h,
        input_w=w,
        channels=c,
        output_h=int(out_hw[0]),
        output_w=int(out_hw[1]),
        filter_h=int(kernel[0]),
        filter_w=int(kernel[1]),
        stride_h=int(stride[0]),
        stride_w=int(stride[1]),
        pad_top=int(pad[0]),
        pad_left=int(pad[1]),
        count_include_pad=int(divisor == "include_pad"),
        divisor_override=divisor if isinstance(divisor, (int, np.integer)) else 0,
        act_min=int(act_min),
        act_max=int(act_max),
    )


def _pool_taps(desc: dict, x: np.ndarray):
    """(values [N, Ho, Wo, C] int64, in-bounds mask [Ho, Wo]) per filter tap."""
    n, h, w, c = desc["batches"], desc["input_h"], desc["input_w"], desc["channels"]
    x = np.asarray(x).reshape(n, h, w, c).astype(np.int64)
    oy = np.arange(desc["output_h"]) * desc["stride_h"] - desc["pad_top"]
    ox = np.arange(desc["output_w"]) * desc["stride_w"] - desc["pad_left"]
    for ky in range(desc["filter_h"]):
        for kx in range(desc["filter_w"]):
            iy, ix = oy + ky, ox + kx
            valid = ((iy >= 0) & (iy < h))[:, None] & ((ix >= 0) & (ix < w))[None, :]
            yield x[:, np.clip(iy, 0, h - 1)][:, :, np.clip(ix, 0, w - 1)], valid


def max_pool_s16(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_max_pool_s16 (CMSIS-NN arm_max_pool_s16, TFLite reference_integer_ops::MaxPool int16):
    y = clamp(max over the in-bounds taps, act_min, act_max), NHWC."""
    best = None
    for values, valid in _pool_taps(desc, x):
        contrib = np.where(valid[None, :, :, None], values, INT16_MIN)
        best = contrib if best is None else np.maximum(best, contrib)
    return saturate_int16(best, desc["act_min"], desc["act_max"])


def avg_pool_s16(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_avg_pool_s16 (CMSIS-NN arm_avgpool_s16, TFLite reference_integer_ops::AveragePool
    int16): sum over the in-bounds taps (padding is the value 0), n the divisor (in-bounds taps,
    PyTorch's count_include_pad count or divisor_override, as edgec.ops.pool.avg_pool2d_s8),
    y = clamp(trunc_div(sum > 0 ? sum + n // 2 : sum - n // 2, n), act_min, act_max)."""
    total = count = 0
    for values, valid in _pool_taps(desc, x):
        total = total + np.where(valid[None, :, :, None], values, 0)
        count = count + valid.astype(np.int64)
    divisor = "include_pad" if desc["count_include_pad"] else (desc["divisor_override"] or "in_bounds")
    n = _divisor(
        divisor,
        count,
        (desc["input_h"], desc["input_w"]),
        (desc["filter_h"], desc["filter_w"]),
        (desc["stride_h"], desc["stride_w"]),
        (desc["pad_top"], desc["pad_left"]),
        (desc["output_h"], desc["output_w"]),
    )[None, :, :, None]
    num = np.where(total > 0, total + n // 2, total - n // 2)
    return saturate_int16(np.sign(num) * (np.abs(num) // n), desc["act_min"], desc["act_max"])


# ---- int16 lookup tables with interpolation (TFLite LUTPopulate<int16_t> / LUTLookup) ----------

LUT_S16_SIZE = 513  # TFLite LUTSize<int16_t>(): 512 segments and one end point


def _round_f32(v: np.float32) -> np.float32:
    """TfLiteRound on a float: half away from zero (std::round), exact in float32."""
    whole = np.trunc(v)
    if abs(v - whole) >= np.float32(0.5):
        whole += np.float32(1.0) if v > 0 else np.float32(-1.0)
    return np.float32(whole)


def lut_populate_s16(transform, input_scale: float, input_zp: int, output_scale: float, output_zp: int) -> np.ndarray:
    """TFLite detail::LUTPopulateInt16<float> (tensorflow/lite/kernels/internal/common.h), step
    by step in float32 as the C++ evaluates it: 512 segments over the input range
    [s_in * (-32768 - zp_in), s_in * (32767 - zp_in)]; entry i = round(f(x_i) / s_out') less half
    the rounded error of the linear interpolation at the segment's midpoint, clamped to int16,
    and entry 512 = round(f(x_max) / s_out'), with s_out' the output range over 65536.
    `transform` gets a float32 and its result is rounded to float32 (C++'s float functions; give
    it float64 math rounded once, as LUT_FUNCTIONS do, to match the C library's expf / tanhf)."""
    f32 = np.float32

    def f(x):
        return f32(transform(f32(x)))

    s_in, s_out = f32(input_scale), f32(output_scale)
    input_min, input_max = s_in * f32(-32768 - input_zp), s_in * f32(32767 - input_zp)
    output_min, output_max = s_out * f32(-32768 - output_zp), s_out * f32(32767 - output_zp)
    step = (input_max - input_min) / f32(512)
    half_step = step / f32(2)
    scaling_inv = f32(65536) / (output_max - output_min)
    table = np.zeros(LUT_S16_SIZE, dtype=np.int16)
    for i in range(512):
        x = input_min + f32(i) * step
        val, val_midpoint, val_next = f(x), f(x + half_step), f(input_min + f32(i + 1) * step)
        sample_val = _round_f32(val * scaling_inv)
        midpoint_interp_val = _round_f32((val_next * scaling_inv + _round_f32(val * scaling_inv)) / f32(2))
        midpoint_err = midpoint_interp_val - _round_f32(val_midpoint * scaling_inv)
        bias = _round_f32(midpoint_err / f32(2))
        table[i] = int(min(max(sample_val - bias, f32(INT16_MIN)), f32(INT16_MAX)))
    table[512] = int(min(max(_round_f32(f(input_max) * scaling_inv), f32(INT16_MIN)), f32(INT16_MAX)))
    return table


def _wrap16(x: np.ndarray) -> np.ndarray:
    return ((np.asarray(x, dtype=np.int64) + 2**15) & 0xFFFF) - 2**15


def lut_lookup_s16(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """TFLite LUTLookup(int16_t, const int16_t *lut) (= CMSIS-NN's interpolation in
    arm_softmax_s16): index = 256 + (x >> 7), offset = x & 127,
    slope = int16(table[index + 1] - table[index]) (wrapping, as its int16_t local),
    y = int16(table[index] + ((slope * offset + 64) >> 7)) (wrapping)."""
    x = np.asarray(x, dtype=np.int64)
    t = np.asarray(table, dtype=np.int64)
    index = 256 + (x >> 7)
    slope = _wrap16(t[index + 1] - t[index])
    return _wrap16(t[index] + ((slope * (x & 0x7F) + 64) >> 7)).astype(np.int16)


def _libm_f32(function):
    """A float function of a float as the C library's expf / tanhf give it: the float64 value
    rounded to float32 (numpy's float32 kernels can be an ulp off, which moves a table entry)."""
    return lambda v: np.float32(function(np.float64(v)))


_expf, _tanhf = _libm_f32(np.exp), _libm_f32(np.tanh)


def _sigmoid(v: np.float32) -> np.float32:
    """1.0f / (1.0f + std::exp(-v)) in float, as TFLite's LUT transforms write it."""
    with np.errstate(over="ignore"):  # exp(-v) = inf below v = -88: the sigmoid is 0 there
        return np.float32(1.0) / (np.float32(1.0) + _expf(-v))


LUT_FUNCTIONS = {"sigmoid": _sigmoid, "tanh": _tanhf}


def lut_s16_desc(
    size: int, function, input_scale: float, output_scale: float, *, input_zp: int = 0, output_zp: int = 0
) -> dict:
    """edgec_lut_s16_desc's fields: `size` elements, the 513-entry table of `function` ("sigmoid",
    "tanh" or any float -> float callable, e.g. GELU) by lut_populate_s16."""
    transform = LUT_FUNCTIONS[function] if isinstance(function, str) else function
    return dict(size=int(size), table=lut_populate_s16(transform, input_scale, input_zp, output_scale, output_zp))


def lut_s16(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_lut_s16: y = lut_lookup_s16(x, table) per element (TFLite's int16 LUT activations)."""
    return lut_lookup_s16(np.asarray(x).reshape(-1)[: desc["size"]], desc["table"])


# ---- softmax -----------------------------------------------------------------------------------


def softmax_s16_desc(outer: int, axis_size: int, inner: int, input_scale: float, beta: float = 1.0) -> dict:
    """edgec_softmax_s16_desc's fields (TFLite-micro CalculateSoftmaxParams / InitializeLutForInt16
    for int16): input_multiplier, input_left_shift = QuantizeMultiplier(s_in * beta / (10 / 65535))
    (the float32 scale and beta in double); exp_lut = LUTPopulate(10/65535, 32767, 2/65535, 0, exp)
    over [-10, 0], one_over_one_plus_x_lut = LUTPopulate(1/65535, -32768, 2/65535, 0, 1/(1+x))
    over [0, 1]. The output's scale is 1/32768, zero point 0."""
    multiplier, shift = quantize_multiplier(float(np.float32(input_scale)) * float(np.float32(beta)) / (10.0 / 65535.0))
    lut_range = np.float32(65535)
    exp_lut = lut_populate_s16(_expf, np.float32(10.0) / lut_range, 32767, np.float32(2.0) / lut_range, 0)
    one_over = lut_populate_s16(
        lambda v: np.float32(1.0) / (np.float32(1.0) + v),
        np.float32(1.0) / lut_range,
        -32768,
        np.float32(2.0) / lut_range,
        0,
    )
    return dict(
        outer=int(outer),
        axis_size=int(axis_size),
        inner=int(inner),
        input_multiplier=multiplier,
        input_left_shift=shift,
        exp_lut=exp_lut,
        one_over_one_plus_x_lut=one_over,
    )


def softmax_s16(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_softmax_s16 (TFLite reference_ops::SoftmaxInt16; CMSIS-NN arm_softmax_s16 where it
    is defined) over the middle axis of [outer, axis_size, inner]:
      e = lut_lookup_s16(clamp(requantize(x - max, input_multiplier, input_left_shift) + 32767,
          int16), exp_lut);  sum = sum of e (int32);  h = clz32(sum);
      s = ((sum << (h - 1)) + 2^13) >> 14 (in int64);
      r = lut_lookup_s16(clamp(s - 98304, int16), one_over_one_plus_x_lut);
      y = clamp((e * r + round) >> (31 - h), 0, 32767), round = 2^(30 - h) (0 when h = 31).
    requantize is numerics.requantize (TFLite MultiplyByQuantizedMultiplier; its left shift
    saturates)."""
    shape = (desc["outer"], desc["axis_size"], desc["inner"])
    x = np.asarray(x, dtype=np.int64).reshape(shape)
    diff = x - x.max(axis=1, keepdims=True)
    scaled = requantize(diff, desc["input_multiplier"], desc["input_left_shift"]) + 32767
    e = lut_lookup_s16(np.clip(scaled, INT16_MIN, INT16_MAX), desc["exp_lut"]).astype(np.int64)
    total = e.sum(axis=1, keepdims=True)
    headroom = 32 - np.vectorize(lambda v: int(v).bit_length(), otypes=[np.int64])(total)  # clz32(sum > 0)
    shifted = ((total << (headroom - 1)) + (1 << 13)) >> 14
    r = lut_lookup_s16(np.clip(shifted - 98304, INT16_MIN, INT16_MAX), desc["one_over_one_plus_x_lut"])
    right = 31 - headroom
    rounding = np.where(right > 0, np.left_shift(1, np.maximum(right - 1, 0)), 0)
    y = (e * r.astype(np.int64) + rounding) >> right
    return np.clip(y, 0, INT16_MAX).astype(np.int16).reshape(-1)


# ---- square root -------------------------------------------------------------------------------


def sqrt_s16_desc(size: int, input_scale: float, output_scale: float) -> dict:
    """edgec_sqrt_s16_desc's fields: R = s_in / s_out^2 as multiplier * 4^-half_shift, the
    multiplier as large as stays below 2^31 (31 significant bits), half_shift in 0..31."""
    ratio = float(input_scale) / float(output_scale) ** 2
    half_shift = 0
    while half_shift < 31 and round(ratio * 4.0 ** (half_shift + 1)) < 2**31:
        half_shift += 1
    multiplier = round(ratio * 4.0**half_shift)
    if multiplier >= 2**31:
        raise ValueError(f"sqrt: s_in / s_out^2 = {ratio:g} is 2^31 or more")
    return dict(size=int(size), multiplier=int(multiplier), half_shift=half_shift)


def _isqrt(n: np.ndarray) -> np.ndarray:
    """floor(sqrt(n)) of int64 n in [0, 2^62), exact (float64's root corrected by one)."""
    n = np.asarray(n, dtype=np.int64)
    r = np.floor(np.sqrt(n.astype(np.float64))).astype(np.int64)
    r -= (r * r > n).astype(np.int64)
    return r + ((r + 1) * (r + 1) <= n).astype(np.int64)


def sqrt_s16(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_sqrt_s16: y = round_half_up(sqrt(x * R)) in [0, 32767], R = multiplier * 4^-half_shift,
    exactly: y = ((isqrt(4 * x * multiplier) >> half_shift) + 1) >> 1 (floor(2 sqrt(v)) =
    isqrt(4 v) for the integer part, and round(u) = (floor(2u) + 1) >> 1); x < 0 gives 0 (the
    root at the domain's edge, as the int16 tables take it)."""
    x = np.maximum(np.asarray(x, dtype=np.int64).reshape(-1)[: desc["size"]], 0)
    y = ((_isqrt(4 * x * desc["multiplier"]) >> desc["half_shift"]) + 1) >> 1
    return np.minimum(y, INT16_MAX).astype(np.int16)


# ---- int8 <-> int16 requantization -------------------------------------------------------------


def requantize_s16_desc(size: int, input_scale: float, input_zp: int, output_scale: float, output_zp: int) -> dict:
    """edgec_requantize_s16_desc's fields (both directions): TFLite-micro quantize_common.cc,
    QuantizeMultiplier(s_in / s_out) of the float32 scales in double."""
    multiplier, shift = quantize_multiplier(float(np.float32(input_scale)) / float(np.float32(output_scale)))
    return dict(
        size=int(size), input_offset=-int(input_zp), multiplier=multiplier, shift=shift, output_offset=int(output_zp)
    )


def _requantize_elements(desc: dict, x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64).reshape(-1)[: desc["size"]]
    y = requantize(x + desc["input_offset"], desc["multiplier"], desc["shift"]) + desc["output_offset"]
    return np.clip(y, lo, hi)


def requantize_s8_s16(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_requantize_s8_s16 (TFLite reference_ops::Requantize int8 -> int16):
    y = clamp(requantize(x + input_offset, multiplier, shift) + output_offset, int16)."""
    return _requantize_elements(desc, x, INT16_MIN, INT16_MAX).astype(np.int16)


def requantize_s16_s8(desc: dict, x: np.ndarray) -> np.ndarray:
    """edgec_requantize_s16_s8 (TFLite reference_ops::Requantize int16 -> int8):
    y = clamp(requantize(x + input_offset, multiplier, shift) + output_offset, int8)."""
    return _requantize_elements(desc, x, INT8_MIN, INT8_MAX).astype(np.int8)

"""Convolution family: golden numpy kernels vs the C kernels, byte for byte (0 LSB).

Covers edgec_conv_s8 (generic), edgec_conv_1x1_s8 (fast path) and edgec_depthwise_conv_s8
against edgec.ops.conv.conv2d_s8 / edgec.ops.depthwise.depthwise_conv2d_s8, and the golden
kernels themselves against a slow reference written straight from docs/numerics.md.
"""

from __future__ import annotations

import ctypes as C
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgec.errors import EdgecError
from edgec.ir import Graph, Op, Tensor
from edgec.numerics import quantize_multiplier
from edgec.ops.conv import CONV_DESC, conv2d_s8, conv_output_size
from edgec.ops.conv import UNIT as CONV
from edgec.ops.depthwise import DEPTHWISE_CONV_DESC, depthwise_conv2d_s8
from edgec.ops.depthwise import UNIT as DEPTHWISE
from edgec.ops.linear import UNIT as LINEAR
from tests.kernel_lib import ConvDesc, DepthwiseConvDesc, ptr, struct_from_desc

MAX_ABS_PRODUCT = 128 * 255  # |w * (x - zp)|
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------------------------
# ctypes binding
# --------------------------------------------------------------------------------------------

_GUARD = 16  # canary bytes after the output: a kernel writing past its output fails the test


def _bind(lib, name, desc_type, scratch: bool = False):
    """Kernel `name`: (const desc *, const int8_t *input, int8_t *output[, int8_t *scratch])."""
    fn = getattr(lib, name)
    fn.argtypes = [C.POINTER(desc_type), C.POINTER(C.c_int8), C.POINTER(C.c_int8)] + [C.POINTER(C.c_int8)] * scratch
    fn.restype = C.c_int
    return fn


@dataclass
class Case:
    """One conv/depthwise call: NHWC x, filter w (OHWI for conv, [1,KH,KW,C_out] for depthwise)."""

    x: np.ndarray
    w: np.ndarray
    bias: np.ndarray | None
    multiplier: np.ndarray
    shift: np.ndarray
    input_zp: int
    output_zp: int
    stride: tuple[int, int]
    pad: tuple[int, int]
    dilation: tuple[int, int]
    out_hw: tuple[int, int]
    act_min: int
    act_max: int
    groups: int = 1
    ch_mult: int = 1
    is_depthwise: bool = False

    @property
    def c_out(self) -> int:
        return self.w.shape[3] if self.is_depthwise else self.w.shape[0]

    def golden(self) -> np.ndarray:
        common = dict(
            input_zp=self.input_zp,
            output_zp=self.output_zp,
            stride=self.stride,
            pad=self.pad,
            dilation=self.dilation,
            out_hw=self.out_hw,
            act_min=self.act_min,
            act_max=self.act_max,
        )
        if self.is_depthwise:
            return depthwise_conv2d_s8(
                self.x, self.w, self.bias, self.multiplier, self.shift, ch_mult=self.ch_mult, **common
            )
        return conv2d_s8(self.x, self.w, self.bias, self.multiplier, self.shift, groups=self.groups, **common)


def case_desc(case: Case, keep: list, filter=None, bias=None, **overrides):
    """(ctypes descriptor, its type) of `case`: edgec_conv_desc or edgec_depthwise_conv_desc, with
    `filter` and `bias` instead of case.w and case.bias when given (a packed kernel's; the kernel
    size stays case.w's) and fields replaced by `overrides`."""
    x, w = case.x, case.w
    values = dict(
        batches=x.shape[0],
        input_h=x.shape[1],
        input_w=x.shape[2],
        input_c=x.shape[3],
        output_h=case.out_hw[0],
        output_w=case.out_hw[1],
        output_c=case.c_out,
        ch_mult=case.ch_mult,
        kernel_h=w.shape[1],
        kernel_w=w.shape[2],
        stride_h=case.stride[0],
        stride_w=case.stride[1],
        pad_top=case.pad[0],
        pad_left=case.pad[1],
        dilation_h=case.dilation[0],
        dilation_w=case.dilation[1],
        groups=case.groups,
        input_offset=-case.input_zp,
        output_offset=case.output_zp,
        act_min=case.act_min,
        act_max=case.act_max,
        filter=np.asarray(w if filter is None else filter),
        bias=case.bias if filter is None else bias,
        multiplier=np.asarray(case.multiplier),
        shift=np.asarray(case.shift),
    )
    values.update(overrides)
    struct, desc_type = (DEPTHWISE_CONV_DESC, DepthwiseConvDesc) if case.is_depthwise else (CONV_DESC, ConvDesc)
    return struct_from_desc(desc_type, {field: values[field] for field in struct.names}, keep), desc_type


def run_c(lib, name: str, case: Case, **overrides) -> tuple[int, np.ndarray]:
    """Call one C conv kernel on `case` (its descriptor's fields replaced by `overrides`); returns
    (status, int8 output [N, Ho, Wo, C_out])."""
    keep: list = []
    x = np.ascontiguousarray(case.x)
    x_before = x.copy()
    out_shape = (x.shape[0], *case.out_hw, case.c_out)
    desc, desc_type = case_desc(case, keep, **overrides)
    size = int(np.prod(out_shape))
    buf = np.full(size + _GUARD, 0x5A, dtype=np.int8)
    status = _bind(lib, name, desc_type)(C.byref(desc), ptr(x, C.c_int8), ptr(buf, C.c_int8))
    assert np.all(buf[size:] == 0x5A), "kernel wrote past the end of its output"
    np.testing.assert_array_equal(x, x_before)
    return status, buf[:size].reshape(out_shape)


# --------------------------------------------------------------------------------------------
# Random cases with extreme quantization parameters
# --------------------------------------------------------------------------------------------

_data_mode = st.sampled_from([0, 0, 0, 1, 2])  # uniform, extremes only, constant (see _int8)
zero_points = st.one_of(st.sampled_from([-128, 127, 0]), st.integers(-128, 127))

# Scales hitting the corners of QuantizeMultiplier: a positive shift (>= 1.0), q_fixed rounding up
# to 2^31 (1 - 2^-40), right shifts of 31 (2^-32), flush to zero (0.0 and 2^-40).
_SPECIAL_SCALES = [1e-6, 0.5, 1.0, 1.9, 1.0 - 2.0**-40, 0.75, 2.0**-32, 2.0**-40, 0.0, 0.0078125]


def _scales(rng: np.random.Generator, n: int, reduction: int, mode: int) -> np.ndarray:
    if mode == 0:  # log-uniform over the realistic-to-extreme span
        return np.exp(rng.uniform(math.log(1e-6), math.log(1.9), n))
    if mode == 1:
        return rng.choice(_SPECIAL_SCALES, n)
    if mode == 2:
        return np.full(n, rng.uniform(1e-4, 1.9))  # per-tensor
    # Matched to the accumulator size (|x - zp| * |w| ~ 7400 per tap), as a calibrated layer is:
    # most outputs land inside the int8 range instead of saturating or rounding to zero.
    return rng.uniform(0.2, 3.0, n) * 40.0 / (7400.0 * math.sqrt(reduction))


def _int8(rng: np.random.Generator, shape, mode: int, lo: int = -128) -> np.ndarray:
    if mode == 0:
        return rng.integers(lo, 128, shape).astype(np.int8)
    if mode == 1:  # only the extremes: maximal accumulators
        return rng.choice(np.array([lo, 127]), shape).astype(np.int8)
    return np.full(shape, rng.integers(lo, 128), dtype=np.int8)


def _bias(rng: np.random.Generator, n: int, reduction: int, mode: int) -> np.ndarray | None:
    # The accumulator starts at bias and adds `reduction` products of at most 32640: modes 2 and 3
    # keep every partial sum inside int32 but go right up to that edge (edgec compiles no layer
    # beyond it); mode 4 puts biases at the int32 limits, where the sum wraps modulo 2^32 in C
    # (uint32_t, UBSan-checked) and golden alike.
    limit = INT32_MAX - reduction * MAX_ABS_PRODUCT
    if mode == 0:
        return None
    if mode == 1:
        return rng.integers(-2000, 2001, n).astype(np.int32)
    if mode == 2:
        return rng.integers(-limit, limit + 1, n).astype(np.int32)
    if mode == 3:
        return rng.choice(np.array([-limit, limit]), n).astype(np.int32)
    return rng.choice(np.array([INT32_MIN, INT32_MIN + 1, INT32_MAX - 1, INT32_MAX]), n).astype(np.int32)


@st.composite
def _geometry(draw, max_hw=12, kernels=st.integers(1, 5), dilations=st.integers(1, 3)):
    """(H, W, KH, KW, stride, pad, dilation, out_hw) with independent implied bottom/right pads
    (the window shrinks where the padded image is smaller)."""
    in_hw, k, strides, pads, dil, out_hw = [], [], [], [], [], []
    for _ in range(2):
        size = draw(st.integers(1, max_hw))
        kernel = draw(kernels)
        stride = draw(st.integers(1, 3))
        dilation = draw(dilations)
        before = draw(st.integers(0, 2))
        after = draw(st.integers(0, 3))
        while dilation * (kernel - 1) + 1 > size + before + after:
            if dilation > 1:
                dilation -= 1
            else:
                kernel -= 1
        in_hw.append(size)
        k.append(kernel)
        strides.append(stride)
        pads.append(before)
        dil.append(dilation)
        out_hw.append(conv_output_size(size, kernel, stride, before, after, dilation))
    return tuple(in_hw), tuple(k), tuple(strides), tuple(pads), tuple(dil), tuple(out_hw)


@st.composite
def _qparams(draw, rng, c_out, reduction):
    lo, hi = sorted(draw(st.tuples(st.integers(-128, 127), st.integers(-128, 127))))
    act_min, act_max = draw(st.sampled_from([(-128, 127), (-128, 127), (lo, hi)]))
    scales = _scales(rng, c_out, reduction, draw(st.sampled_from([0, 1, 2, 3, 3, 3])))
    qm = [quantize_multiplier(float(s)) for s in scales]
    return dict(
        input_zp=draw(zero_points),
        output_zp=draw(zero_points),
        multiplier=np.array([m for m, _ in qm], dtype=np.int32),
        shift=np.array([s for _, s in qm], dtype=np.int32),
        bias=_bias(rng, c_out, reduction, draw(st.sampled_from([0, 0, 1, 1, 1, 1, 2, 3, 4]))),
        act_min=act_min,
        act_max=act_max,
    )


@st.composite
def conv_cases(draw, max_hw=12):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    (h, w), (kh, kw), stride, pad, dilation, out_hw = draw(_geometry(max_hw))
    groups = draw(st.sampled_from([1, 1, 2, 3, 4]))
    cin_g = draw(st.integers(1, 16 // groups))
    cout_g = draw(st.integers(1, 16 // groups))
    n = draw(st.integers(1, 2))
    x = _int8(rng, (n, h, w, cin_g * groups), draw(_data_mode))
    wt = _int8(rng, (cout_g * groups, kh, kw, cin_g), draw(_data_mode))
    q = draw(_qparams(rng, cout_g * groups, kh * kw * cin_g))
    return Case(x=x, w=wt, stride=stride, pad=pad, dilation=dilation, out_hw=out_hw, groups=groups, **q)


@st.composite
def depthwise_cases(draw, max_hw=12):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    (h, w), (kh, kw), stride, pad, dilation, out_hw = draw(_geometry(max_hw))
    c_in = draw(st.integers(1, 16))
    ch_mult = draw(st.integers(1, 3))
    n = draw(st.integers(1, 2))
    x = _int8(rng, (n, h, w, c_in), draw(_data_mode))
    wt = _int8(rng, (1, kh, kw, c_in * ch_mult), draw(_data_mode))
    q = draw(_qparams(rng, c_in * ch_mult, kh * kw))
    return Case(
        x=x, w=wt, stride=stride, pad=pad, dilation=dilation, out_hw=out_hw, ch_mult=ch_mult, is_depthwise=True, **q
    )


@st.composite
def pointwise_cases(draw):
    """1x1, groups 1, no padding, dilation 1, any stride; Ho/Wo floor or smaller (cropped)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    out_hw = tuple(draw(st.integers(1, (size - 1) // s + 1)) for size, s in zip((h, w), stride))
    c_in, c_out = draw(st.integers(1, 16)), draw(st.integers(1, 16))
    x = _int8(rng, (n, h, w, c_in), draw(_data_mode))
    wt = _int8(rng, (c_out, 1, 1, c_in), draw(_data_mode))
    q = draw(_qparams(rng, c_out, c_in))
    return Case(x=x, w=wt, stride=stride, pad=(0, 0), dilation=(1, 1), out_hw=out_hw, **q)


# --------------------------------------------------------------------------------------------
# Golden == C, 0 LSB
# --------------------------------------------------------------------------------------------


@settings(max_examples=1000, **SETTINGS)
@given(case=conv_cases())
def test_conv_c_matches_golden(kernel_lib, case):
    status, out = run_c(kernel_lib, "edgec_conv_s8", case)
    assert status == 0
    np.testing.assert_array_equal(out, case.golden())


@settings(max_examples=1000, **SETTINGS)
@given(case=depthwise_cases())
def test_depthwise_c_matches_golden(kernel_lib, case):
    status, out = run_c(kernel_lib, "edgec_depthwise_conv_s8", case)
    assert status == 0
    np.testing.assert_array_equal(out, case.golden())


@settings(max_examples=600, **SETTINGS)
@given(case=pointwise_cases())
def test_conv_1x1_fast_path_matches_generic_and_golden(kernel_lib, case):
    status_fast, fast = run_c(kernel_lib, "edgec_conv_1x1_s8", case)
    status_generic, generic = run_c(kernel_lib, "edgec_conv_s8", case)
    assert status_fast == status_generic == 0
    np.testing.assert_array_equal(fast, generic)
    np.testing.assert_array_equal(fast, case.golden())


def _as_grouped_conv(case: Case) -> Case:
    """The same depthwise layer as a generic conv with groups = C_in (OHWI [C_out,KH,KW,1])."""
    return Case(
        x=case.x,
        w=np.ascontiguousarray(case.w[0].transpose(2, 0, 1)[..., None]),
        bias=case.bias,
        multiplier=case.multiplier,
        shift=case.shift,
        input_zp=case.input_zp,
        output_zp=case.output_zp,
        stride=case.stride,
        pad=case.pad,
        dilation=case.dilation,
        out_hw=case.out_hw,
        act_min=case.act_min,
        act_max=case.act_max,
        groups=case.x.shape[3],
    )


@settings(max_examples=300, **SETTINGS)
@given(case=depthwise_cases())
def test_depthwise_equals_grouped_conv(kernel_lib, case):
    grouped = _as_grouped_conv(case)
    expected = case.golden()
    np.testing.assert_array_equal(grouped.golden(), expected)
    status, out = run_c(kernel_lib, "edgec_conv_s8", grouped)
    assert status == 0
    np.testing.assert_array_equal(out, expected)


# --------------------------------------------------------------------------------------------
# The golden itself, against a slow reference written straight from docs/numerics.md
# (exact rationals and per-element loops; shares no code with edgec.numerics)
# --------------------------------------------------------------------------------------------


def _round_half_away(q: Fraction) -> int:
    n = math.floor(abs(q) + Fraction(1, 2))
    return n if q >= 0 else -n


def _ref_requantize(acc: int, multiplier: int, shift: int) -> int:
    acc = (acc + 2**31) % 2**32 - 2**31  # the 32-bit accumulator wraps
    v = acc << max(shift, 0)
    v = max(-(2**31), min(2**31 - 1, v))  # x << left, saturated to int32
    high = math.floor(Fraction(v * multiplier, 2**31) + Fraction(1, 2))  # rounds half up
    return _round_half_away(Fraction(high, 2 ** max(-shift, 0)))


def _ref_output(acc: int, m: int, s: int, case: Case) -> int:
    return min(max(_ref_requantize(acc, m, s) + case.output_zp, case.act_min), case.act_max)


def ref_conv(case: Case) -> np.ndarray:
    n, h, w, _ = case.x.shape
    c_out, kh, kw, cin_g = case.w.shape
    cout_g = c_out // case.groups
    out = np.zeros((n, *case.out_hw, c_out), dtype=np.int8)
    for b, oy, ox, oc in np.ndindex(out.shape):
        acc = 0 if case.bias is None else int(case.bias[oc])
        for ky, kx, ic in np.ndindex(kh, kw, cin_g):
            iy = oy * case.stride[0] - case.pad[0] + ky * case.dilation[0]
            ix = ox * case.stride[1] - case.pad[1] + kx * case.dilation[1]
            if 0 <= iy < h and 0 <= ix < w:  # padded taps contribute 0
                xv = int(case.x[b, iy, ix, (oc // cout_g) * cin_g + ic]) - case.input_zp
                acc += int(case.w[oc, ky, kx, ic]) * xv
        out[b, oy, ox, oc] = _ref_output(acc, int(case.multiplier[oc]), int(case.shift[oc]), case)
    return out


def ref_depthwise(case: Case) -> np.ndarray:
    n, h, w, _ = case.x.shape
    _, kh, kw, c_out = case.w.shape
    out = np.zeros((n, *case.out_hw, c_out), dtype=np.int8)
    for b, oy, ox, oc in np.ndindex(out.shape):
        acc = 0 if case.bias is None else int(case.bias[oc])
        for ky, kx in np.ndindex(kh, kw):
            iy = oy * case.stride[0] - case.pad[0] + ky * case.dilation[0]
            ix = ox * case.stride[1] - case.pad[1] + kx * case.dilation[1]
            if 0 <= iy < h and 0 <= ix < w:
                xv = int(case.x[b, iy, ix, oc // case.ch_mult]) - case.input_zp
                acc += int(case.w[0, ky, kx, oc]) * xv
        out[b, oy, ox, oc] = _ref_output(acc, int(case.multiplier[oc]), int(case.shift[oc]), case)
    return out


@settings(max_examples=60, **SETTINGS)
@given(case=conv_cases(max_hw=6))
def test_conv_golden_matches_slow_reference(case):
    np.testing.assert_array_equal(case.golden(), ref_conv(case))


@settings(max_examples=60, **SETTINGS)
@given(case=depthwise_cases(max_hw=6))
def test_depthwise_golden_matches_slow_reference(case):
    np.testing.assert_array_equal(case.golden(), ref_depthwise(case))


def _scale_half():
    m, s = quantize_multiplier(0.5)
    assert (m, s) == (2**30, 0)  # 0.5 = 2^30 * 2^(0-31)
    return m, s


def test_conv_hand_computed_3x3_pad1():
    # x (zp 1): [[2,3],[4,5]] -> x - zp = [[1,2],[3,4]]; 3x3 all-ones filter, pad 1, out 2x2:
    # every output sees all four pixels, acc = 1+2+3+4 = 10, + bias 1 = 11.
    # y = requantize(11, 0.5) = 11 * 2^30 + 2^30 >> 31 = 6 (5.5 rounds up), + zp_out 3 = 9.
    m, s = _scale_half()
    x = np.array([2, 3, 4, 5], dtype=np.int8).reshape(1, 2, 2, 1)
    case = Case(
        x=x,
        w=np.ones((1, 3, 3, 1), np.int8),
        bias=np.array([1], np.int32),
        multiplier=np.array([m]),
        shift=np.array([s]),
        input_zp=1,
        output_zp=3,
        stride=(1, 1),
        pad=(1, 1),
        dilation=(1, 1),
        out_hw=(2, 2),
        act_min=-128,
        act_max=127,
    )
    np.testing.assert_array_equal(case.golden(), np.full((1, 2, 2, 1), 9, np.int8))


def test_conv_hand_computed_negative_rounding_and_clamp(kernel_lib):
    # 1x1 conv, three output channels on one pixel x = -7 (zp 0), weights [1], [-1], [1].
    # Multiplier 2^30 with shift -1 (scale 0.25), double rounding: acc -7 -> doubling multiply
    # -3.5 rounds half up to -3 -> divide by 2: -1.5 rounds half away to -2; acc 7 -> 4 -> 2.
    # Shift 0 (scale 0.5): -3.5 rounds half *up* in the doubling multiply -> -3.
    m, _ = _scale_half()
    x = np.array([-7], dtype=np.int8).reshape(1, 1, 1, 1)
    base = dict(
        x=x,
        w=np.array([1, -1, 1], np.int8).reshape(3, 1, 1, 1),
        bias=None,
        multiplier=np.array([m, m, m]),
        shift=np.array([-1, -1, 0]),
        input_zp=0,
        output_zp=0,
        stride=(1, 1),
        pad=(0, 0),
        dilation=(1, 1),
        out_hw=(1, 1),
    )
    case = Case(act_min=-128, act_max=127, **base)
    np.testing.assert_array_equal(case.golden().ravel(), [-2, 2, -3])
    clamped = Case(act_min=-1, act_max=1, **base)  # fused clamp bounds
    np.testing.assert_array_equal(clamped.golden().ravel(), [-1, 1, -1])
    for name in ("edgec_conv_s8", "edgec_conv_1x1_s8"):
        for c in (case, clamped):
            status, out = run_c(kernel_lib, name, c)
            assert status == 0
            np.testing.assert_array_equal(out, c.golden())


def test_depthwise_hand_computed_ch_mult_stride_dilation(kernel_lib):
    # x 1x3x3x1 = 0..8 (zp 0), ch_mult 2, 2x2 filter dilated by 2: taps (0,0),(0,2),(2,0),(2,2).
    # channel 0 weights all 1 -> 0+2+6+8 = 16; channel 1 weights [1,0,0,-1] -> 0-8 = -8.
    # multiplier for scale 1.0 is (2^30, 1): y = acc exactly; output zp -5 -> [11, -13].
    m, s = quantize_multiplier(1.0)
    x = np.arange(9, dtype=np.int8).reshape(1, 3, 3, 1)
    w = np.array([[[1, 1], [1, 0]], [[1, 0], [1, -1]]], np.int8).reshape(1, 2, 2, 2)
    case = Case(
        x=x,
        w=w,
        bias=None,
        multiplier=np.array([m, m]),
        shift=np.array([s, s]),
        input_zp=0,
        output_zp=-5,
        stride=(1, 1),
        pad=(0, 0),
        dilation=(2, 2),
        out_hw=(1, 1),
        act_min=-128,
        act_max=127,
        ch_mult=2,
        is_depthwise=True,
    )
    np.testing.assert_array_equal(case.golden().ravel(), [11, -13])
    status, out = run_c(kernel_lib, "edgec_depthwise_conv_s8", case)
    assert status == 0
    np.testing.assert_array_equal(out.ravel(), [11, -13])


def test_conv_output_size():
    assert conv_output_size(96, 3, 2, 0, 1, 1) == 48  # TF "SAME" for even input, stride 2
    assert conv_output_size(5, 3, 2, 1, 1, 1) == 3
    assert conv_output_size(7, 3, 1, 0, 0, 3) == 1  # dilated span 7
    assert conv_output_size(6, 1, 3, 0, 0, 1) == 2
    with pytest.raises(ValueError):
        conv_output_size(2, 3, 1, 0, 0, 1)


def test_large_reduction_golden_exact():
    # 3x3 x 512 channels of extremes: accumulators near 1.5e8 must stay exact in the golden.
    rng = np.random.default_rng(0)
    x = rng.choice(np.array([-128, 127], np.int8), (1, 3, 3, 512))
    w = rng.choice(np.array([-128, 127], np.int8), (2, 3, 3, 512))
    m, s = quantize_multiplier(1e-6)
    case = Case(
        x=x,
        w=w,
        bias=np.array([-7, 7], np.int32),
        multiplier=np.array([m, m]),
        shift=np.array([s, s]),
        input_zp=127,
        output_zp=0,
        stride=(1, 1),
        pad=(1, 1),
        dilation=(1, 1),
        out_hw=(3, 3),
        act_min=-128,
        act_max=127,
    )
    np.testing.assert_array_equal(case.golden(), ref_conv(case))


# --------------------------------------------------------------------------------------------
# Argument checking
# --------------------------------------------------------------------------------------------


def _small_conv_case(c_in=4, c_out=4, k=1, groups=1) -> Case:
    rng = np.random.default_rng(1)
    return Case(
        x=rng.integers(-128, 128, (1, 4, 4, c_in)).astype(np.int8),
        w=rng.integers(-128, 128, (c_out, k, k, c_in // groups)).astype(np.int8),
        bias=None,
        multiplier=np.full(c_out, 2**30),
        shift=np.zeros(c_out),
        input_zp=0,
        output_zp=0,
        stride=(1, 1),
        pad=(0, 0),
        dilation=(1, 1),
        out_hw=(4 - k + 1, 4 - k + 1),
        act_min=-128,
        act_max=127,
        groups=groups,
    )


@pytest.mark.parametrize(
    "override",
    [
        dict(groups=3),
        dict(groups=0),
        dict(stride_h=0),
        dict(dilation_w=0),
        dict(pad_top=-1),
        dict(act_min=10, act_max=9),
        dict(act_max=128),
    ],
)
def test_conv_rejects_invalid_args(kernel_lib, override):
    status, _ = run_c(kernel_lib, "edgec_conv_s8", _small_conv_case(k=3), **override)
    assert status == -1


@pytest.mark.parametrize(
    "override", [dict(pad_top=1), dict(pad_left=1), dict(dilation_h=2), dict(groups=2), dict(stride_w=0)]
)
def test_conv_1x1_rejects_what_it_cannot_do(kernel_lib, override):
    status, _ = run_c(kernel_lib, "edgec_conv_1x1_s8", _small_conv_case(), **override)
    assert status == -1


def test_conv_1x1_rejects_non_1x1_filter_and_oversized_output(kernel_lib):
    status, _ = run_c(kernel_lib, "edgec_conv_1x1_s8", _small_conv_case(k=3))
    assert status == -1
    case = _small_conv_case()
    case.out_hw = (5, 4)  # without padding row 4 would read past the input
    status, _ = run_c(kernel_lib, "edgec_conv_1x1_s8", case)
    assert status == -1


def test_grouped_conv_golden_rejects_bad_groups():
    case = _small_conv_case(c_in=4, c_out=4, groups=2)
    case.groups = 3
    with pytest.raises(ValueError):
        case.golden()


def test_depthwise_rejects_bad_channel_multipliers(kernel_lib):
    rng = np.random.default_rng(2)
    case = Case(
        x=rng.integers(-128, 128, (1, 4, 4, 3)).astype(np.int8),
        w=rng.integers(-128, 128, (1, 3, 3, 6)).astype(np.int8),
        bias=None,
        multiplier=np.full(6, 2**30),
        shift=np.zeros(6),
        input_zp=0,
        output_zp=0,
        stride=(1, 1),
        pad=(1, 1),
        dilation=(1, 1),
        out_hw=(4, 4),
        act_min=-128,
        act_max=127,
        ch_mult=2,
        is_depthwise=True,
    )
    assert run_c(kernel_lib, "edgec_depthwise_conv_s8", case)[0] == 0
    assert run_c(kernel_lib, "edgec_depthwise_conv_s8", case, ch_mult=0)[0] == -1
    assert run_c(kernel_lib, "edgec_depthwise_conv_s8", case, ch_mult=-2)[0] == -1
    # input_c * ch_mult past int32: refused, without overflowing
    assert run_c(kernel_lib, "edgec_depthwise_conv_s8", case, ch_mult=2**30)[0] == -1


# --------------------------------------------------------------------------------------------
# Extreme values: biases at the int32 limits (the accumulator wraps), zero points -128/127 in and
# out, multipliers 2^31 - 1 and 2^30, shifts at their limits -- every kernel, golden == C (UBSan)
# --------------------------------------------------------------------------------------------

EXTREME_BIASES = np.array([INT32_MIN, INT32_MAX, INT32_MIN + 1, INT32_MAX - 1, 0, -1, 2**30, -(2**30)], dtype=np.int32)
EXTREME_SHIFTS = ([-31] * 8, [30] * 8, [31] * 8, [-31, 30, 0, -1, 1, -24, -2, 31])
EXTREME_CASES = list(
    itertools.product(
        [(-128, 127), (127, -128), (-128, -128), (127, 127)], [2**31 - 1, 2**30], range(len(EXTREME_SHIFTS))
    )
)


def extreme_case(zero_points, multiplier: int, shifts: int, *, kernel: str, seed: int = 0) -> Case:
    """8 output channels (one per extreme bias) over inputs and weights of -128/127 only, so the
    sums are as large as they get and wrap past both int32 limits."""
    rng = np.random.default_rng(seed)
    extremes = np.array([-128, 127], dtype=np.int8)
    common = dict(
        bias=EXTREME_BIASES,
        multiplier=np.full(8, multiplier),
        shift=np.array(EXTREME_SHIFTS[shifts]),
        input_zp=zero_points[0],
        output_zp=zero_points[1],
        act_min=-128,
        act_max=127,
    )
    if kernel == "edgec_conv_1x1_s8":
        return Case(
            x=rng.choice(extremes, (2, 3, 5, 11)),
            w=rng.choice(extremes, (8, 1, 1, 11)),
            stride=(2, 1),
            pad=(0, 0),
            dilation=(1, 1),
            out_hw=(2, 5),
            **common,
        )
    if kernel == "edgec_depthwise_conv_s8":
        # ch_mult 1 runs the groups of four (3x3 inside runs and border pixels), 2 the general loop
        ch_mult = 1 + seed % 2
        return Case(
            x=rng.choice(extremes, (2, 6, 5, 8 // ch_mult)),
            w=rng.choice(extremes, (1, 3, 3, 8)),
            stride=(1, 2),
            pad=(1, 1),
            dilation=(1, 1),
            out_hw=(6, 3),
            ch_mult=ch_mult,
            is_depthwise=True,
            **common,
        )
    return Case(
        x=rng.choice(extremes, (2, 5, 6, 6)),
        w=rng.choice(extremes, (8, 3, 2, 3)),
        stride=(1, 2),
        pad=(1, 0),
        dilation=(2, 1),
        out_hw=(3, 3),
        groups=2,
        **common,
    )


@pytest.mark.parametrize("kernel", ["edgec_conv_s8", "edgec_conv_1x1_s8", "edgec_depthwise_conv_s8"])
@pytest.mark.parametrize("zero_points,multiplier,shifts", EXTREME_CASES)
def test_extreme_values_wrap_like_golden(kernel_lib, kernel, zero_points, multiplier, shifts):
    for seed in (0, 1):
        case = extreme_case(zero_points, multiplier, shifts, kernel=kernel, seed=seed)
        status, out = run_c(kernel_lib, kernel, case)
        assert status == 0
        np.testing.assert_array_equal(out, case.golden())


def test_extreme_values_golden_matches_slow_reference():
    for zero_points, multiplier, shifts in EXTREME_CASES[::3]:
        case = extreme_case(zero_points, multiplier, shifts, kernel="edgec_conv_s8")
        np.testing.assert_array_equal(case.golden(), ref_conv(case))
        case = extreme_case(zero_points, multiplier, shifts, kernel="edgec_depthwise_conv_s8", seed=1)
        np.testing.assert_array_equal(case.golden(), ref_depthwise(case))


@pytest.mark.parametrize("kernel", ["edgec_conv_s8", "edgec_conv_1x1_s8", "edgec_depthwise_conv_s8"])
@pytest.mark.parametrize(
    "override",
    [
        dict(input_offset=129),
        dict(input_offset=-128),
        dict(output_offset=128),
        dict(output_offset=-129),
        dict(input_offset=2**31 - 1),
        dict(stride_h=2**30),
        dict(stride_w=2**31 - 1),
    ],
)
def test_rejects_offsets_outside_int8_and_overflowing_strides(kernel_lib, kernel, override):
    """Zero points outside int8 would take x + input_offset and the output stage past int32, and a
    stride of 2^30 over 3 output rows the index arithmetic: refused, without undefined behaviour."""
    case = extreme_case((0, 0), 2**30, 0, kernel=kernel)
    assert run_c(kernel_lib, kernel, case)[0] == 0
    assert run_c(kernel_lib, kernel, case, **override)[0] == -1


@pytest.mark.parametrize("kernel", ["edgec_conv_s8", "edgec_depthwise_conv_s8"])
@pytest.mark.parametrize(
    "override", [dict(pad_top=2**31 - 1), dict(pad_left=2**31 - 4), dict(dilation_h=2**30), dict(dilation_w=2**31 - 1)]
)
def test_rejects_windows_whose_index_arithmetic_overflows(kernel_lib, kernel, override):
    case = extreme_case((0, 0), 2**30, 0, kernel=kernel)
    assert run_c(kernel_lib, kernel, case, **override)[0] == -1


@pytest.mark.parametrize("kernel", ["edgec_conv_s8", "edgec_conv_1x1_s8", "edgec_depthwise_conv_s8"])
@pytest.mark.parametrize("bad_shift", [32, -32, 2**31 - 1, -(2**31)])
def test_rejects_shifts_outside_their_range(kernel_lib, kernel, bad_shift):
    case = extreme_case((0, 0), 2**30, 0, kernel=kernel)
    case.shift = case.shift.copy()
    case.shift[5] = bad_shift
    assert run_c(kernel_lib, kernel, case)[0] == -1
    with pytest.raises(ValueError):
        case.golden()


# --------------------------------------------------------------------------------------------
# Compile time: a layer whose accumulator could leave int32 is refused, naming the layer
# --------------------------------------------------------------------------------------------


def _finalize(unit, kind: str, weight: np.ndarray, bias, x_shape, y_shape, input_zp: int = 0) -> None:
    graph = Graph(inputs=["x"], outputs=["y"])
    graph.add_tensor(Tensor("x", x_shape, scale=0.02, zero_point=input_zp))
    graph.add_tensor(Tensor("y", y_shape, scale=0.05, zero_point=0))
    c_out = y_shape[-1]
    op = Op(
        "conv_3",
        kind,
        ["x"],
        ["y"],
        dict(weight=weight, weight_scales=np.full(c_out, 1e-3), bias=bias, clamp=(None, None)),
        source="model.py:12 (self.conv(x))",
    )
    graph.ops = [op]
    unit.finalize(op, graph)


@pytest.mark.parametrize(
    "unit,kind,weight_shape,x_shape,y_shape",
    [
        (CONV, "conv2d", (3, 3, 3, 16), (1, 8, 8, 16), (1, 8, 8, 3)),
        (DEPTHWISE, "depthwise_conv2d", (1, 3, 3, 3), (1, 8, 8, 3), (1, 8, 8, 3)),
        (LINEAR, "fully_connected", (3, 144), (1, 144), (1, 3)),
    ],
)
def test_finalize_refuses_a_bias_the_accumulator_cannot_hold(unit, kind, weight_shape, x_shape, y_shape):
    weight = np.full(weight_shape, -128, dtype=np.int8)
    taps = int(np.prod(weight_shape)) // 3
    for zp, largest_x in ((0, 128), (127, 255), (-128, 255)):
        worst = taps * 128 * largest_x
        fits = np.array([0, INT32_MAX - worst, -(INT32_MAX - worst)], dtype=np.int32)
        _finalize(unit, kind, weight, fits, x_shape, y_shape, input_zp=zp)
        _finalize(unit, kind, weight, fits - np.array([0, 0, 1], np.int32), x_shape, y_shape, input_zp=zp)
        too_large = fits.copy()
        too_large[2] -= 2  # a sum of exactly -2^31 still fits
        with pytest.raises(EdgecError, match=r"model\.py:12 \(self\.conv\(x\)\).*output channel 2"):
            _finalize(unit, kind, weight, too_large, x_shape, y_shape, input_zp=zp)


def test_finalize_accepts_a_saturated_bias_on_a_dead_channel():
    """quantize_bias saturates to int32 when a channel's weight scale is tiny; with all-zero weights
    that channel's accumulator is the bias alone, which fits."""
    weight = np.ones((3, 3, 3, 16), dtype=np.int8)
    weight[1] = 0
    bias = np.array([1000, INT32_MAX, -1000], dtype=np.int32)
    _finalize(CONV, "conv2d", weight, bias, (1, 8, 8, 16), (1, 8, 8, 3))
    bias[1] = INT32_MIN
    _finalize(CONV, "conv2d", weight, bias, (1, 8, 8, 16), (1, 8, 8, 3))

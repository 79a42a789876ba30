"""Transposed convolution: golden numpy kernel vs the C kernels, byte for byte (0 LSB).

edgec_conv_transpose_s8 (portable, UBSan host build through ctypes) against
edgec.ops.conv_transpose.conv_transpose2d_s8; the golden against a slow scatter-form reference
written from TFLite's reference_integer_ops::TransposeConv (an int32 buffer of the whole output,
every input pixel scattered into it, wrapping) -- the C kernels gather instead, which gives the
same bits because each output element's terms are summed modulo 2^32 in another order; and the
golden's accumulator against torch.nn.functional.conv_transpose2d in float64 on integer data
(exact: every partial sum is an integer below 2^53). The _dsp/_mve paths run under QEMU
(test_conv_transpose_arm at the end; driver tests/data/port/conv_transpose_kernels.c).
"""

from __future__ import annotations

import ctypes as C
import struct
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgec.numerics import quantize_multiplier
from edgec.ops.conv_transpose import (
    PORTABLE,
    conv_transpose2d_s8,
    conv_transpose_accumulator,
    conv_transpose_desc,
    conv_transpose_filter,
    conv_transpose_output_size,
    conv_transpose_phase_rows,
    conv_transpose_scratch_bytes,
)
from edgec.ops.kernel_layout import DSP, MVE
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import CONV_TRANSPOSE_INT_FIELDS, ConvTransposeDesc, ptr

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
GUARD = 16
ARG_ERROR = -1


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    x: np.ndarray  # int8 NHWC
    w: np.ndarray  # int8 [C_in, C_out/groups, KH, KW] (PyTorch)
    bias: np.ndarray | None
    multiplier: np.ndarray
    shift: np.ndarray
    input_zp: int
    output_zp: int
    stride: tuple[int, int]
    pad: tuple[int, int]
    output_padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    act_min: int = -128
    act_max: int = 127
    extra: dict = field(default_factory=dict)

    @property
    def geometry(self) -> dict:
        return dict(
            stride=self.stride,
            pad=self.pad,
            output_padding=self.output_padding,
            dilation=self.dilation,
            groups=self.groups,
        )

    @property
    def out_hw(self) -> tuple[int, int]:
        _, h, w, _ = self.x.shape
        _, _, kh, kw = self.w.shape
        return tuple(
            conv_transpose_output_size(*a)
            for a in zip((h, w), (kh, kw), self.stride, self.pad, self.output_padding, self.dilation)
        )

    def golden(self) -> np.ndarray:
        return conv_transpose2d_s8(
            self.x,
            self.w,
            self.bias,
            self.multiplier,
            self.shift,
            input_zp=self.input_zp,
            output_zp=self.output_zp,
            out_hw=self.out_hw,
            act_min=self.act_min,
            act_max=self.act_max,
            **self.geometry,
        )

    def desc(self, isa: str = PORTABLE) -> dict:
        return conv_transpose_desc(
            self.x.shape,
            self.w,
            self.bias,
            self.multiplier,
            self.shift,
            input_zp=self.input_zp,
            output_zp=self.output_zp,
            act_min=self.act_min,
            act_max=self.act_max,
            isa=isa,
            **self.geometry,
        )


def multipliers(rng, count: int, style: int, scale: float = 2**12) -> tuple[np.ndarray, np.ndarray]:
    """Realistic (QuantizeMultiplier of about 64 / scale, the accumulator's spread, so outputs
    span the int8 range), extreme (2^31 - 1 or 2^30 with shifts at -31, 0 or up to 30) or any
    valid pair."""
    if style == 0:
        pairs = [quantize_multiplier(float(v)) for v in 2.0 ** rng.uniform(-2, 2, count) * 64 / scale]
        return np.array([m for m, _ in pairs], np.int32), np.array([s for _, s in pairs], np.int32)
    if style == 1:
        m = rng.choice([2**31 - 1, 2**30, 2**30 + 1], count)
        s = rng.choice([-31, -24, -1, 0, 1, 30], count)
        return m.astype(np.int32), s.astype(np.int32)
    return (rng.integers(0, 2**31, count).astype(np.int32), rng.integers(-31, 31, count).astype(np.int32))


def int8_array(rng, shape) -> np.ndarray:
    if rng.random() < 0.15:
        return rng.choice(np.array([-128, 127], dtype=np.int8), shape)
    return rng.integers(-128, 128, shape, dtype=np.int8)


def random_case(rng, *, groups_kind: str | None = None, max_hw: int = 6, max_c: int = 9) -> Case:
    """A random layer: groups 1, depthwise (groups == C_in, any multiplier) or another divisor;
    kernels 1..4, strides 1..3, dilations 1..3, pads and output paddings PyTorch allows."""
    while True:
        groups_kind = groups_kind or str(rng.choice(["one", "one", "depthwise", "grouped"]))
        if groups_kind == "one":
            groups, c_in, cout_g = 1, int(rng.integers(1, max_c + 1)), int(rng.integers(1, max_c + 1))
        elif groups_kind == "depthwise":
            groups = c_in = int(rng.integers(1, max_c + 1))
            cout_g = int(rng.integers(1, 4))
        else:
            groups = int(rng.integers(2, 4))
            c_in, cout_g = groups * int(rng.integers(1, 4)), int(rng.integers(1, 4))
        kernel = tuple(int(v) for v in rng.integers(1, 5, 2))
        stride = tuple(int(v) for v in rng.integers(1, 4, 2))
        dilation = tuple(int(v) for v in rng.choice([1, 1, 1, 2, 3], 2))
        pad = tuple(int(rng.integers(0, k * d)) if rng.random() < 0.7 else 0 for k, d in zip(kernel, dilation))
        output_padding = tuple(int(rng.integers(0, max(s, d))) for s, d in zip(stride, dilation))
        n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, max_hw + 1)), int(rng.integers(1, max_hw + 1))
        try:
            for size, k, s, p, op, d in zip((h, w), kernel, stride, pad, output_padding, dilation):
                conv_transpose_output_size(size, k, s, p, op, d)
        except ValueError:
            continue
        c_out = cout_g * groups
        x, w = int8_array(rng, (n, h, w, c_in)), int8_array(rng, (c_in, cout_g, *kernel))
        m, s = multipliers(rng, c_out, int(rng.choice([0, 0, 0, 1, 2])), scale=_spread(x, w, groups, kernel))
        bias = None if rng.random() < 0.2 else rng.integers(-(2**20), 2**20, c_out).astype(np.int32)
        if rng.random() < 0.1 and bias is not None:
            bias = rng.choice(np.array([-(2**31), 2**31 - 1], dtype=np.int64), c_out).astype(np.int32)
        zp = lambda: int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))  # noqa: E731
        lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
        act_min, act_max = [(-128, 127), (lo, 127), (lo, hi)][int(rng.integers(3))]
        return Case(x, w, bias, m, s, zp(), zp(), stride, pad, output_padding, dilation, groups, act_min, act_max)


def _spread(x, w, groups, kernel) -> float:
    """About the accumulator's standard deviation: terms per output times |x - zp| * |w|."""
    terms = max(1.0, kernel[0] * kernel[1] * x.shape[3] / groups / 2)
    return float(np.sqrt(terms) * 74 * 74)


# --------------------------------------------------------------------------------------------
# ctypes
# --------------------------------------------------------------------------------------------


def c_desc(values: dict, keep: list) -> ConvTransposeDesc:
    desc = ConvTransposeDesc(*[int(values[name]) for name in CONV_TRANSPOSE_INT_FIELDS])
    for name, ctype in (("filter", C.c_int8), ("bias", C.c_int32), ("multiplier", C.c_int32), ("shift", C.c_int32)):
        array = values[name]
        if array is not None:
            array = np.ascontiguousarray(array)
            keep.append(array)
            setattr(desc, name, ptr(array, ctype))
    return desc


def run_c(lib, values: dict, x: np.ndarray, output_size: int) -> tuple[int, np.ndarray]:
    fn = lib.edgec_conv_transpose_s8
    fn.argtypes = [C.POINTER(ConvTransposeDesc), C.POINTER(C.c_int8), C.POINTER(C.c_int8)]
    fn.restype = C.c_int
    keep: list = []
    desc = c_desc(values, keep)
    x = np.ascontiguousarray(x)
    out = np.full(output_size + GUARD, 0x5A, dtype=np.int8)
    status = fn(C.byref(desc), ptr(x, C.c_int8), ptr(out, C.c_int8))
    assert (out[output_size:] == 0x5A).all(), "wrote past its output"
    return status, out[:output_size]


def check_c_matches(lib, case: Case) -> None:
    expected = case.golden()
    status, out = run_c(lib, case.desc(), case.x, expected.size)
    assert status == 0
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


# --------------------------------------------------------------------------------------------
# Golden vs C (portable, UBSan)
# --------------------------------------------------------------------------------------------


@settings(max_examples=250, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), groups_kind=st.sampled_from(["one", "depthwise", "grouped"]))
def test_golden_matches_c(kernel_lib, seed, groups_kind):
    check_c_matches(kernel_lib, random_case(np.random.default_rng(seed), groups_kind=groups_kind))


@pytest.mark.parametrize(
    "c_in,c_out,kernel,stride,pad,output_padding,dilation,groups,hw",
    [
        (32, 16, 2, 2, 0, 0, 1, 1, (16, 16)),  # 2x upsampling
        (16, 8, 3, 2, 1, 1, 1, 1, (8, 8)),  # the usual decoder layer
        (4, 4, 3, 1, 1, 0, 1, 1, (5, 5)),  # stride 1: a plain conv with a flipped filter
        (3, 6, 4, 2, 1, 0, 1, 3, (4, 7)),  # depthwise, channel multiplier 2
        (2, 3, 3, 2, 0, 1, 2, 1, (3, 3)),  # dilation 2 with stride 2: one phase has no taps
        (5, 2, (1, 4), (1, 2), (0, 1), (0, 1), 1, 1, (1, 9)),  # ConvTranspose1d as H = 1
        (1, 1, 1, 3, 0, 2, 1, 1, (1, 1)),  # a 1x1 input: output padding only
    ],
)
def test_layers_match_c(kernel_lib, c_in, c_out, kernel, stride, pad, output_padding, dilation, groups, hw):
    rng = np.random.default_rng(c_in * 31 + c_out)
    pair = lambda v: v if isinstance(v, tuple) else (v, v)  # noqa: E731
    kernel = pair(kernel)
    x, w = int8_array(rng, (1, *hw, c_in)), int8_array(rng, (c_in, c_out // groups, *kernel))
    m, s = multipliers(rng, c_out, 0, scale=_spread(x, w, groups, kernel))
    case = Case(
        x,
        w,
        rng.integers(-5000, 5000, c_out).astype(np.int32),
        m,
        s,
        -3,
        7,
        pair(stride),
        pair(pad),
        pair(output_padding),
        pair(dilation),
        groups,
    )
    check_c_matches(kernel_lib, case)


def test_extreme_values_match_c(kernel_lib):
    """Saturated inputs and weights, zero points at both ends, bias at the int32 limits (the sum
    wraps), multipliers at 2^31 - 1 with the largest left and right shifts."""
    rng = np.random.default_rng(3)
    for input_zp in (-128, 127):
        for value in (-128, 127):
            for shift in (-31, 0, 30):
                c_in, c_out = 7, 5
                case = Case(
                    np.full((1, 3, 4, c_in), value, np.int8),
                    np.full((c_in, c_out, 3, 3), -128, np.int8),
                    np.array([2**31 - 1, -(2**31), 0, 1, -1], np.int32),
                    np.full(c_out, 2**31 - 1, np.int32),
                    np.full(c_out, shift, np.int32),
                    input_zp,
                    -input_zp - 1 if input_zp == 127 else 127,
                    (2, 1),
                    (1, 0),
                    (1, 0),
                    (1, 1),
                    1,
                )
                check_c_matches(kernel_lib, case)
    check_c_matches(kernel_lib, random_case(rng, groups_kind="one"))


def test_invalid_descriptors_are_refused(kernel_lib):
    """EDGEC_ARG_ERROR, and nothing written, for each broken field."""
    case = random_case(np.random.default_rng(11), groups_kind="one")
    good = case.desc()
    expected = case.golden()
    breakages = [
        dict(output_h=good["output_h"] + 1),
        dict(output_w=good["output_w"] - 1),
        dict(stride_h=0),
        dict(dilation_w=0),
        dict(pad_h=-1),
        dict(output_padding_h=max(good["stride_h"], good["dilation_h"])),
        dict(output_padding_w=-1),
        dict(groups=0),
        dict(groups=good["input_c"] + 1),
        dict(batches=0),
        dict(input_c=0),
        dict(input_offset=129),
        dict(input_offset=-128),
        dict(output_offset=128),
        dict(act_min=10, act_max=9),
        dict(act_max=128),
        dict(kernel_h=0),
        dict(filter=None),
        dict(multiplier=None),
        dict(shift=np.full(len(case.shift), 32, np.int32)),
        dict(multiplier=np.full(len(case.shift), -1, np.int32)),
        dict(input_h=2**20, stride_h=2**12, pad_h=0),
    ]
    for broken in breakages:
        status, out = run_c(kernel_lib, {**good, **broken}, case.x, expected.size)
        assert status == ARG_ERROR, broken
        assert (out == 0x5A).all(), f"refused {broken} but wrote its output"
    fn = kernel_lib.edgec_conv_transpose_s8
    assert fn(None, ptr(np.zeros(1, np.int8), C.c_int8), ptr(np.zeros(1, np.int8), C.c_int8)) == ARG_ERROR


# --------------------------------------------------------------------------------------------
# The golden against a slow scatter-form reference and against PyTorch
# --------------------------------------------------------------------------------------------


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier (double rounding, gemmlowp), on Python ints; the left
    shift saturates (it overflows, undefined, in TFLite's C++)."""
    left, right = max(shift, 0), max(-shift, 0)
    a = max(-(2**31), min(2**31 - 1, x * 2**left))
    if a == multiplier == -(2**31):
        high = 2**31 - 1
    else:
        ab = a * multiplier
        nudge = 2**30 if ab >= 0 else 1 - 2**30
        total = ab + nudge
        high = abs(total) // 2**31 * (1 if total >= 0 else -1)  # C++ division truncates
    mask = (1 << right) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if remainder > threshold else 0)


def scatter_reference(case: Case) -> np.ndarray:
    """TFLite's reference_integer_ops::TransposeConv, element by element, with PyTorch's geometry
    (pad, dilation, output_padding via the output size, groups): scatter every input value times
    every tap into an int32 buffer of the whole output (wrapping), then add bias, requantize,
    add the output offset and clamp."""
    x, w = case.x.astype(int), case.w.astype(int)
    n, h, wd, c_in = x.shape
    _, cout_g, kh, kw = w.shape
    (ho, wo), (sh, sw), (ph, pw), (dh, dw) = case.out_hw, case.stride, case.pad, case.dilation
    cin_g = c_in // case.groups
    buf = np.zeros((n, ho, wo, cout_g * case.groups), dtype=object)
    for b in range(n):
        for iy in range(h):
            for ix in range(wd):
                for ic in range(c_in):
                    g = ic // cin_g
                    value = x[b, iy, ix, ic] - case.input_zp
                    for ky in range(kh):
                        for kx in range(kw):
                            oy, ox = iy * sh - ph + ky * dh, ix * sw - pw + kx * dw
                            if 0 <= oy < ho and 0 <= ox < wo:
                                for j in range(cout_g):
                                    co = g * cout_g + j
                                    buf[b, oy, ox, co] = _wrap32(buf[b, oy, ox, co] + value * w[ic, j, ky, kx])
    out = np.zeros(buf.shape, dtype=np.int8)
    for index in np.ndindex(*buf.shape):
        co = index[3]
        acc = _wrap32(buf[index] + (int(case.bias[co]) if case.bias is not None else 0))
        y = _multiply_by_quantized_multiplier(acc, int(case.multiplier[co]), int(case.shift[co])) + case.output_zp
        out[index] = min(max(y, case.act_min), case.act_max)
    return out


def test_golden_matches_scatter_reference():
    rng = np.random.default_rng(2024)
    for i in range(40):
        case = random_case(rng, max_hw=4, max_c=4)
        np.testing.assert_array_equal(case.golden(), scatter_reference(case), err_msg=f"case {i}: {case}")


def test_accumulator_matches_torch():
    """conv_transpose2d in float64 on x - zp and the integer weights is the golden's accumulator
    (before bias, wrap and requantization) exactly, and its output size is PyTorch's."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        case = random_case(rng, max_hw=7, max_c=8)
        acc = conv_transpose_accumulator(case.x, case.w, input_zp=case.input_zp, out_hw=case.out_hw, **case.geometry)
        x = torch.from_numpy(case.x.astype(np.float64) - case.input_zp).permute(0, 3, 1, 2)
        expected = torch.nn.functional.conv_transpose2d(
            x,
            torch.from_numpy(case.w.astype(np.float64)),
            stride=case.stride,
            padding=case.pad,
            output_padding=case.output_padding,
            groups=case.groups,
            dilation=case.dilation,
        )
        np.testing.assert_array_equal(acc, expected.permute(0, 2, 3, 1).numpy().astype(np.int64))


def test_filter_layout_holds_every_weight_once():
    """Each tap belongs to exactly one phase, so the portable filter is a permutation of the
    weights; the packed ones add only zeros."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        case = random_case(rng)
        geometry = dict(stride=case.stride, dilation=case.dilation, groups=case.groups)
        plain = conv_transpose_filter(case.w, **geometry)
        assert sorted(plain.tolist()) == sorted(case.w.ravel().tolist())
        if case.groups == 1:
            for isa in (DSP, MVE):
                packed = conv_transpose_filter(case.w, isa=isa, **geometry)
                assert sorted(packed[packed != 0].tolist()) == sorted(plain[plain != 0].tolist())
                rows = conv_transpose_phase_rows(case.w, **geometry)
                largest = max(r.shape[1] for r in rows)
                assert (
                    conv_transpose_scratch_bytes(isa, case.w.shape, stride=case.stride, dilation=case.dilation)
                    >= (5 if isa == DSP else 2) * largest
                )


# --------------------------------------------------------------------------------------------
# Cortex-M4 (DSP) and Cortex-M55 (Helium) under QEMU
# --------------------------------------------------------------------------------------------

DRIVER = ROOT / "tests" / "data" / "port" / "conv_transpose_kernels.c"
SOURCES = [ROOT / "runtime_c" / "src" / "conv" / "edgec_conv_transpose_s8.c"]
ISA_CODE = {PORTABLE: 0, DSP: 1, MVE: 2}
ISAS = {"cortex-m4": (PORTABLE, DSP), "cortex-m55": (PORTABLE, DSP, MVE)}
HEADER_WORDS = 32


def record(case: Case, isa: str, expected_size: int, skew: int = 0) -> bytes:
    """One driver record: header (isa, payload bytes, output bytes, scratch bytes, scratch skew,
    filter bytes, bias words (0: NULL), the descriptor's int fields) then x, filter, bias,
    multiplier, shift, each padded to 4 bytes."""
    values = case.desc(isa)
    arrays = [case.x, values["filter"], values["bias"], values["multiplier"], values["shift"]]
    payload = b"".join(_padded(np.ascontiguousarray(a).tobytes()) for a in arrays if a is not None)
    scratch = conv_transpose_scratch_bytes(isa, case.w.shape, stride=case.stride, dilation=case.dilation)
    bias_words = 0 if values["bias"] is None else len(values["bias"])
    header = [
        ISA_CODE[isa],
        len(payload),
        expected_size,
        scratch,
        skew,
        len(values["filter"]),
        bias_words,
        *[int(values[name]) for name in CONV_TRANSPOSE_INT_FIELDS],
    ]
    return struct.pack(f"<{HEADER_WORDS}i", *header, *[0] * (HEADER_WORDS - len(header))) + payload


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


def arm_cases(target: str) -> list[tuple[Case, str, int]]:
    """(case, isa, scratch skew) for every path the target has: random layers (groups 1 for the
    packed paths; any groups for the portable one), the two benchmark shapes, and a misaligned
    scratch the packed paths must refuse."""
    rng = np.random.default_rng(17)
    cases = []
    for isa in ISAS[target]:
        for _ in range(60 if isa == PORTABLE else 150):
            case = random_case(rng, groups_kind=None if isa == PORTABLE else "one", max_c=20)
            cases.append((case, isa, 0))
        for layer in bench_layers(rng):
            cases.append((layer, isa, 0))
        if isa != PORTABLE:
            cases.append((random_case(rng, groups_kind="one"), isa, 1))
    return cases


BENCH_NAMES = (
    "ConvTranspose2d(32, 16, 2, stride 2) on 16x16",
    "ConvTranspose2d(16, 8, 3, stride 2, pad 1, output_padding 1) on 8x8",
)


def bench_layers(rng) -> list[Case]:
    """ConvTranspose2d(32, 16, 2, stride 2) on 16x16 and (16, 8, 3, stride 2, pad 1, output_padding 1)
    on 8x8, with realistic quantization."""
    layers = []
    for bench, (c_in, c_out, k, pad, op, hw) in enumerate(((32, 16, 2, 0, 0, 16), (16, 8, 3, 1, 1, 8))):
        x, w = int8_array(rng, (1, hw, hw, c_in)), int8_array(rng, (c_in, c_out, k, k))
        m, s = multipliers(rng, c_out, 0, scale=_spread(x, w, 1, (k, k)))
        layers.append(
            Case(
                x,
                w,
                rng.integers(-5000, 5000, c_out).astype(np.int32),
                m,
                s,
                5,
                -9,
                (2, 2),
                (pad, pad),
                (op, op),
                (1, 1),
                1,
                extra=dict(bench=bench),
            )
        )
    return layers


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", sorted(ISAS))
def test_conv_transpose_arm(target, tmp_path):
    cases = arm_cases(target)
    expected = [case.golden().ravel() for case, _, _ in cases]
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "kernels.elf",
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(
        b"".join(record(c, isa, e.size, skew) for (c, isa, skew), e in zip(cases, expected))
    )
    counts = toolchain.count_instructions(target, elf, timeout=180, cwd=tmp_path)
    assert len(counts["insns"]) == len(cases)
    data, at, failures = (tmp_path / "results.bin").read_bytes(), 0, []
    per_mac: dict[tuple[str, int], float] = {}
    for (case, isa, skew), want, insns in zip(cases, expected, counts["insns"]):
        if case.extra.get("bench") is not None:
            per_mac[isa, case.extra["bench"]] = insns / useful_macs(case)
        status, guards = struct.unpack_from("<2i", data, at)
        out = np.frombuffer(data, np.int8, want.size, at + 8)
        at += 8 + want.size
        what = f"{isa} {case.x.shape} {case.w.shape} stride {case.stride} pad {case.pad} op {case.output_padding}"
        if skew:
            if status != ARG_ERROR or not (out == 0x5A).all() or not guards:
                failures.append(f"misaligned scratch not refused cleanly: {what}")
        elif status != 0 or not guards:
            failures.append(f"status {status}, guards intact {guards}: {what}")
        elif not np.array_equal(out, want):
            failures.append(f"{np.count_nonzero(out != want)} of {want.size} bytes differ: {what}")
    assert at == len(data)
    assert not failures, f"{len(failures)} of {len(cases)} fail:\n" + "\n".join(failures[:10])
    for layer in range(2):
        print(
            f"{target} {BENCH_NAMES[layer]}: "
            + ", ".join(f"{isa} {per_mac[isa, layer]:.2f}" for isa in ISAS[target])
            + " instructions/MAC"
        )
        for isa in ISAS[target][1:]:
            assert per_mac[isa, layer] < per_mac[PORTABLE, layer] / 2


def useful_macs(case: Case) -> int:
    """The multiply-accumulates whose product lands inside the output (cropped ones excluded)."""
    ones = conv_transpose_accumulator(
        np.ones_like(case.x), np.ones_like(case.w), input_zp=0, out_hw=case.out_hw, **case.geometry
    )
    return int(ones.sum())

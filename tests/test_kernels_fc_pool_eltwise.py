"""Fully connected, pooling and elementwise kernels: golden numpy == portable C, byte for byte.

Three layers of checks:
  1. hand-computed numbers and a slow pure-Python reference written straight from
     docs/numerics.md check the golden kernels themselves (so golden and C cannot share a bug);
  2. hypothesis property tests over random shapes and extreme qparams check golden == C exactly;
  3. argument validation and in-place behaviour of the C kernels.
Every C output buffer carries a guard tail that must come back untouched.
"""

from __future__ import annotations

import ctypes as C
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from edgec.numerics import quantize_multiplier
from edgec.ops.eltwise import add_desc, add_params, add_s8, clamp_s8
from edgec.ops.linear import fully_connected_s8
from edgec.ops.pool import avg_pool2d_s8, max_pool2d_s8, pool2d_desc
from tests.kernel_lib import AddS8Desc, ClampS8Desc, FullyConnectedS8Desc, Pool2dDesc, ptr, struct_from_desc

EDGEC_OK, EDGEC_ARG_ERROR = 0, -1
GUARD = 16
GUARD_BYTE = 0x5A

# --------------------------------------------------------------------------------------------
# ctypes bindings
# --------------------------------------------------------------------------------------------
P8, P32 = C.POINTER(C.c_int8), C.POINTER(C.c_int32)


@pytest.fixture(scope="module")
def lib(kernel_lib):
    """kernel_lib with argtypes/restype set for the kernels under test."""
    kernel_lib.edgec_fully_connected_s8.argtypes = [C.c_void_p, P8, P8]
    pool_args = [C.POINTER(Pool2dDesc), P8, P8]
    kernel_lib.edgec_avgpool_s8.argtypes = pool_args
    kernel_lib.edgec_maxpool_s8.argtypes = pool_args
    kernel_lib.edgec_add_s8.argtypes = [C.POINTER(AddS8Desc), P8, P8, P8]
    kernel_lib.edgec_clamp_s8.argtypes = [C.POINTER(ClampS8Desc), P8]
    for name in ("edgec_fully_connected_s8", "edgec_avgpool_s8", "edgec_maxpool_s8", "edgec_add_s8", "edgec_clamp_s8"):
        getattr(kernel_lib, name).restype = C.c_int
    return kernel_lib


def guarded(n: int) -> np.ndarray:
    """An int8 buffer of n + GUARD bytes, all GUARD_BYTE; the kernel may write only the first n."""
    return np.full(n + GUARD, GUARD_BYTE, dtype=np.int8)


def check_guard(buf: np.ndarray, n: int) -> None:
    assert (buf[n:] == GUARD_BYTE).all(), "C kernel wrote past the end of its output"


def c_fully_connected(
    lib, x, w, bias, multiplier, shift, *, input_zp, output_zp, act_min=-128, act_max=127, per_channel=None
):
    x = np.ascontiguousarray(x, dtype=np.int8)
    w = np.ascontiguousarray(w, dtype=np.int8)
    (batches, n_in), n_out = x.shape, w.shape[0]
    if per_channel is None:
        per_channel = np.ndim(multiplier) > 0
    keep = []
    desc = fc_desc(
        batches, n_in, n_out, input_zp, output_zp, per_channel, act_min, act_max, w, bias, multiplier, shift, keep
    )
    out = guarded(batches * n_out)
    status = lib.edgec_fully_connected_s8(C.byref(desc), ptr(x, C.c_int8), ptr(out, C.c_int8))
    check_guard(out, batches * n_out)
    return status, out[: batches * n_out].reshape(batches, n_out)


def fc_desc(batches, n_in, n_out, input_zp, output_zp, per_channel, act_min, act_max, w, bias, mult, shift, keep):
    """An edgec_fully_connected_s8_desc (its arrays kept alive in `keep`); None: a NULL pointer."""
    return struct_from_desc(
        FullyConnectedS8Desc,
        dict(
            batches=batches,
            input_size=n_in,
            output_size=n_out,
            input_offset=-input_zp,
            output_offset=output_zp,
            per_channel=int(per_channel),
            act_min=act_min,
            act_max=act_max,
            filter=w,
            bias=None if bias is None else np.asarray(bias),
            multiplier=None if mult is None else np.atleast_1d(mult),
            shift=None if shift is None else np.atleast_1d(shift),
        ),
        keep,
    )


def pool_desc(shape, **window) -> Pool2dDesc:
    """An edgec_pool2d_desc of the in-bounds divisor (edgec_avgpool_s8's, edgec_maxpool_s8's)."""
    return Pool2dDesc(**pool2d_desc(shape, **window))


def c_pool(fn, x, *, kernel, stride, pad, out_hw, act_min=-128, act_max=127):
    x = np.ascontiguousarray(x, dtype=np.int8)
    n, _, _, c = x.shape
    desc = pool_desc(x.shape, kernel=kernel, stride=stride, pad=pad, out_hw=out_hw, act_min=act_min, act_max=act_max)
    size = n * out_hw[0] * out_hw[1] * c
    out = guarded(max(size, 0))
    status = fn(C.byref(desc), ptr(x, C.c_int8), ptr(out, C.c_int8))
    check_guard(out, max(size, 0))
    return status, (out[:size].reshape(n, out_hw[0], out_hw[1], c) if status == EDGEC_OK else None)


def c_add(lib, x1, x2, params: dict):
    x1 = np.ascontiguousarray(x1, dtype=np.int8)
    x2 = np.ascontiguousarray(x2, dtype=np.int8)
    out = guarded(x1.size)
    desc = AddS8Desc(**add_desc(x1.size, params))
    status = lib.edgec_add_s8(C.byref(desc), ptr(x1, C.c_int8), ptr(x2, C.c_int8), ptr(out, C.c_int8))
    check_guard(out, x1.size)
    return status, out[: x1.size].reshape(x1.shape)


def c_clamp(lib, x, act_min, act_max):
    buf = guarded(x.size)
    buf[: x.size] = x.ravel()
    status = lib.edgec_clamp_s8(C.byref(ClampS8Desc(x.size, act_min, act_max)), ptr(buf, C.c_int8))
    check_guard(buf, x.size)
    return status, buf[: x.size].reshape(x.shape)


# --------------------------------------------------------------------------------------------
# Slow reference, written straight from docs/numerics.md with Python ints (no numpy, no edgec)
# --------------------------------------------------------------------------------------------
def ref_int32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def ref_quantize_multiplier(d: float) -> tuple[int, int]:
    if d == 0:
        return 0, 0
    q, shift = math.frexp(d)
    q_fixed = int(math.floor(abs(q * 2**31) + 0.5))
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def ref_requantize(x: int, m: int, s: int) -> int:
    a = max(-(2**31), min(2**31 - 1, x << max(s, 0)))  # the left shift saturates
    high = ref_int32((a * m + 2**30) >> 31)
    e = max(-s, 0)
    mask = 2**e - 1
    r = high >> e
    threshold = (mask >> 1) + (1 if r < 0 else 0)
    return r + (1 if (high & mask) > threshold else 0)


def ref_clamp(v: int, lo: int, hi: int) -> int:
    return min(max(v, lo), hi)


def ref_fully_connected(x, w, bias, mults, shifts, zp_in, zp_out, lo, hi):
    out = []
    for row in x.tolist():
        out_row = []
        for o, w_row in enumerate(w.tolist()):
            acc = (0 if bias is None else int(bias[o])) + sum(wj * (xj - zp_in) for wj, xj in zip(w_row, row))
            out_row.append(ref_clamp(ref_requantize(ref_int32(acc), mults[o], shifts[o]) + zp_out, lo, hi))
        out.append(out_row)
    return np.array(out, dtype=np.int8)


def ref_pool(x, kernel, stride, pad, out_hw, lo, hi, mode):
    n_, h, w, c = x.shape
    out = np.zeros((n_, out_hw[0], out_hw[1], c), dtype=np.int8)
    for b in range(n_):
        for oy in range(out_hw[0]):
            for ox in range(out_hw[1]):
                for ch in range(c):
                    taps = [
                        int(x[b, iy, ix, ch])
                        for iy in range(oy * stride[0] - pad[0], oy * stride[0] - pad[0] + kernel[0])
                        for ix in range(ox * stride[1] - pad[1], ox * stride[1] - pad[1] + kernel[1])
                        if 0 <= iy < h and 0 <= ix < w
                    ]
                    if mode == "max":
                        v = max(taps)
                    else:
                        total, n = sum(taps), len(taps)
                        num = total + n // 2 if total > 0 else total - n // 2
                        v = math.trunc(num / n)  # C division truncates toward zero (exact: tiny ints)
                    out[b, oy, ox, ch] = ref_clamp(v, lo, hi)
    return out


def ref_add(x1, x2, s1, zp1, s2, zp2, s_out, zp_out, lo, hi):
    twice_max = 2 * max(s1, s2)
    m1, sh1 = ref_quantize_multiplier(s1 / twice_max)
    m2, sh2 = ref_quantize_multiplier(s2 / twice_max)
    mo, sho = ref_quantize_multiplier(twice_max / (2**20 * s_out))
    out = []
    for a_q, b_q in zip(x1.ravel().tolist(), x2.ravel().tolist()):
        a = ref_requantize((a_q - zp1) << 20, m1, sh1)
        b = ref_requantize((b_q - zp2) << 20, m2, sh2)
        out.append(ref_clamp(ref_requantize(a + b, mo, sho) + zp_out, lo, hi))
    return np.array(out, dtype=np.int8).reshape(x1.shape)


# --------------------------------------------------------------------------------------------
# 1. The golden kernels against hand-computed values and the slow reference
# --------------------------------------------------------------------------------------------
def test_requantize_reference_hand_values():
    # M = 0.5 is (2^30, 0). doubling_high_mult rounds half up, divide_by_pot half away from zero.
    assert ref_quantize_multiplier(0.5) == (2**30, 0)
    assert ref_requantize(13, 2**30, 0) == 7  # 6.5 -> 7
    assert ref_requantize(-13, 2**30, 0) == -6  # -6.5 -> -6 (the +2^30 nudge rounds half up)
    assert ref_requantize(12, 2**30, -2) == 2  # 6 / 4 = 1.5 -> 2
    assert ref_requantize(-12, 2**30, -2) == -2  # -1.5 -> -2 (away from zero)
    assert ref_requantize(3, 2**30, 2) == 6  # positive shift is a left shift first


def test_fully_connected_golden_hand_values():
    x = np.array([[1, 2, 3]], dtype=np.int8)
    w = np.array([[1, 1, 1], [-1, 0, 2], [0, 0, -13]], dtype=np.int8)
    bias = np.array([10, -3, 0], dtype=np.int32)
    # zp_in = 1: acc = [10 + 0+1+2, -3 + 0+0+4, -26]; * 0.5 -> [6.5, 0.5, -13] -> [7, 1, -13]; + zp_out 5.
    y = fully_connected_s8(x, w, bias, 2**30, 0, input_zp=1, output_zp=5)
    np.testing.assert_array_equal(y, [[12, 6, -8]])
    y = fully_connected_s8(x, w, bias, 2**30, 0, input_zp=1, output_zp=5, act_min=0, act_max=10)
    np.testing.assert_array_equal(y, [[10, 6, 0]])


def test_avg_pool_golden_hand_values():
    x = np.array([1, 2, 3, 5, -1, -2, 0, -3], dtype=np.int8).reshape(1, 2, 4, 1)
    # 2x2 stride 2: [1,2,-1,-2] sum 0 -> 0; [3,5,0,-3] sum 5 n 4 -> (5+2)/4 = 1
    np.testing.assert_array_equal(
        avg_pool2d_s8(x, kernel=(2, 2), stride=(2, 2), pad=(0, 0), out_hw=(1, 2)).ravel(), [0, 1]
    )
    # 1x2 stride 2: [1,2] 1.5 -> 2; [3,5] -> 4; [-1,-2] -1.5 -> -2; [0,-3] -1.5 -> -2
    np.testing.assert_array_equal(
        avg_pool2d_s8(x, kernel=(1, 2), stride=(1, 2), pad=(0, 0), out_hw=(2, 2)).ravel(), [2, 4, -2, -2]
    )
    # 3x3 pad 1 on the top-left corner sees 4 in-bounds taps [1,2,-1,-2] -> 0: padding not counted.
    y = avg_pool2d_s8(x, kernel=(3, 3), stride=(1, 1), pad=(1, 1), out_hw=(2, 4))
    assert y[0, 0, 0, 0] == 0
    # 5x5 kernel on a 2x4 input (kernel larger than the padded input) averages everything: 5/8 -> 1.
    y = avg_pool2d_s8(x, kernel=(5, 5), stride=(1, 1), pad=(0, 0), out_hw=(1, 1))
    assert y.ravel().tolist() == [1]


def test_max_pool_golden_hand_values():
    x = np.array([-128, -100, -90, -128], dtype=np.int8).reshape(1, 2, 2, 1)
    # All taps negative: padding must not contribute a 0.
    y = max_pool2d_s8(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), out_hw=(1, 1))
    assert y.ravel().tolist() == [-90]
    y = max_pool2d_s8(x, kernel=(2, 1), stride=(1, 1), pad=(1, 0), out_hw=(3, 2), act_min=-95)
    assert y.ravel().tolist() == [-95, -95, -90, -95, -90, -95]


def test_add_golden_hand_values():
    # Equal unit scales and zero points 0: y = saturate(x1 + x2).
    x1 = np.array([1, -5, 100, -100, 127], dtype=np.int8)
    x2 = np.array([2, 3, 100, -100, 1], dtype=np.int8)
    p = add_params(1.0, 0, 1.0, 0, 1.0, 0)
    assert (p["input1_multiplier"], p["input1_shift"], p["output_multiplier"], p["output_shift"]) == (
        2**30,
        0,
        2**30,
        -18,
    )
    np.testing.assert_array_equal(add_s8(x1, x2, p), [3, -2, 127, -128, 127])
    # Output scale 2 with zero point 10: y = round((x1 + x2) / 2) + 10 -> 3/2 = 1.5 -> 2 (+10).
    np.testing.assert_array_equal(add_s8(x1[:2], x2[:2], add_params(1.0, 0, 1.0, 0, 2.0, 10)), [12, 9])


def test_add_params_fields_match_c_struct():
    p = add_params(0.1, 3, 0.2, -4, 0.3, 5, -100, 100)
    assert ["size", *p] == [name for name, _ in AddS8Desc._fields_]
    assert (p["input1_offset"], p["input2_offset"], p["output_offset"], p["left_shift"]) == (-3, 4, 5, 20)
    assert (p["act_min"], p["act_max"]) == (-100, 100)


def test_clamp_golden_hand_values():
    x = np.array([-128, -1, 0, 6, 127], dtype=np.int8)
    np.testing.assert_array_equal(clamp_s8(x, 0, 6), [0, 0, 0, 6, 6])


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_golden_matches_slow_reference(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    lo, hi = sorted(data.draw(st.lists(st.integers(-128, 127), min_size=2, max_size=2)))
    zps = [data.draw(st.sampled_from([-128, -1, 0, 127])) for _ in range(3)]

    b, n_in, n_out = rng.integers(1, 3), rng.integers(1, 9), rng.integers(1, 5)
    x = rng.integers(-128, 128, (b, n_in), dtype=np.int8)
    w = rng.integers(-128, 128, (n_out, n_in), dtype=np.int8)
    bias = rng.integers(-(2**31), 2**31, n_out, dtype=np.int64).astype(np.int32) if rng.random() < 0.5 else None
    qm = [ref_quantize_multiplier(2.0 ** rng.uniform(-36, 2)) for _ in range(n_out)]
    mults, shifts = [m for m, _ in qm], [s for _, s in qm]
    np.testing.assert_array_equal(
        fully_connected_s8(
            x, w, bias, np.array(mults), np.array(shifts), input_zp=zps[0], output_zp=zps[1], act_min=lo, act_max=hi
        ),
        ref_fully_connected(x, w, bias, mults, shifts, zps[0], zps[1], lo, hi),
    )

    shape, kernel, stride, pad, out_hw = draw_pool_geometry(data, max_hw=5, max_c=3)
    xp = rng.integers(-128, 128, shape, dtype=np.int8)
    for golden, mode in ((avg_pool2d_s8, "avg"), (max_pool2d_s8, "max")):
        np.testing.assert_array_equal(
            golden(xp, kernel=kernel, stride=stride, pad=pad, out_hw=out_hw, act_min=lo, act_max=hi),
            ref_pool(xp, kernel, stride, pad, out_hw, lo, hi, mode),
        )

    s1, s2, s_out = (10.0 ** rng.uniform(-6, 1) for _ in range(3))
    xa = rng.integers(-128, 128, 12, dtype=np.int8)
    xb = rng.integers(-128, 128, 12, dtype=np.int8)
    np.testing.assert_array_equal(
        add_s8(xa, xb, add_params(s1, zps[0], s2, zps[1], s_out, zps[2], lo, hi)),
        ref_add(xa, xb, s1, zps[0], s2, zps[1], s_out, zps[2], lo, hi),
    )


# --------------------------------------------------------------------------------------------
# 2. golden == C, hypothesis property tests
# --------------------------------------------------------------------------------------------
ZERO_POINTS = st.one_of(st.sampled_from([-128, -127, -1, 0, 1, 126, 127]), st.integers(-128, 127))
ACT_RANGES = st.one_of(
    st.just((-128, 127)), st.lists(st.integers(-128, 127), min_size=2, max_size=2).map(lambda v: tuple(sorted(v)))
)
SEEDS = st.integers(0, 2**32 - 1)


def int8_data(rng, shape, mode):
    """Random int8 data, or saturating extremes that stress accumulators and rounding."""
    if mode == "random":
        return rng.integers(-128, 128, shape, dtype=np.int8)
    if mode == "extremes":
        return rng.choice(np.array([-128, -127, 126, 127], dtype=np.int8), size=shape)
    return np.full(shape, -128 if mode == "min" else 127, dtype=np.int8)


DATA_MODES = st.sampled_from(["random", "random", "random", "extremes", "min", "max"])


def random_quant(rng, count):
    """Multipliers/shifts from real scales 2^-40 .. 2^3: shifts from flushed-to-zero to left shifts."""
    pairs = [quantize_multiplier(2.0 ** rng.uniform(-40, 3)) for _ in range(count)]
    return np.array([m for m, _ in pairs], dtype=np.int64), np.array([s for _, s in pairs], dtype=np.int64)


@settings(max_examples=1000, deadline=None)
@given(
    seed=SEEDS,
    batches=st.integers(1, 3),
    n_in=st.integers(1, 300),
    n_out=st.integers(1, 40),
    per_channel=st.booleans(),
    bias_kind=st.sampled_from(["none", "typical", "int32", "int32_edges"]),
    zp_in=ZERO_POINTS,
    zp_out=ZERO_POINTS,
    act=ACT_RANGES,
    x_mode=DATA_MODES,
    w_mode=DATA_MODES,
)
# Bias at the int32 limits plus a maximal dot product: the accumulator must wrap, not overflow (UBSan).
@example(
    seed=0,
    batches=3,
    n_in=300,
    n_out=40,
    per_channel=True,
    bias_kind="int32_edges",
    zp_in=127,
    zp_out=-128,
    act=(-128, 127),
    x_mode="min",
    w_mode="min",
)
@example(
    seed=0,
    batches=2,
    n_in=300,
    n_out=7,
    per_channel=False,
    bias_kind="int32_edges",
    zp_in=-128,
    zp_out=0,
    act=(-128, 127),
    x_mode="max",
    w_mode="min",
)
@example(
    seed=1,
    batches=1,
    n_in=1,
    n_out=1,
    per_channel=False,
    bias_kind="none",
    zp_in=-128,
    zp_out=127,
    act=(0, 0),
    x_mode="max",
    w_mode="random",
)
def test_fully_connected_golden_equals_c(
    lib, seed, batches, n_in, n_out, per_channel, bias_kind, zp_in, zp_out, act, x_mode, w_mode
):
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (batches, n_in), x_mode)
    w = int8_data(rng, (n_out, n_in), w_mode)
    bias = {
        "none": None,
        "typical": rng.integers(-(2**20), 2**20, n_out).astype(np.int32),
        "int32": rng.integers(-(2**31), 2**31, n_out, dtype=np.int64).astype(np.int32),
        "int32_edges": rng.choice(np.array([-(2**31), -(2**31) + 1, 2**31 - 2, 2**31 - 1], dtype=np.int32), n_out),
    }[bias_kind]
    mult, shift = random_quant(rng, n_out if per_channel else 1)
    if not per_channel:
        mult, shift = int(mult[0]), int(shift[0])
    kwargs = dict(input_zp=zp_in, output_zp=zp_out, act_min=act[0], act_max=act[1])
    expected = fully_connected_s8(x, w, bias, mult, shift, **kwargs)
    status, got = c_fully_connected(lib, x, w, bias, mult, shift, **kwargs)
    assert status == EDGEC_OK
    np.testing.assert_array_equal(got, expected)


def draw_pool_geometry(data, max_hw=12, max_c=16):
    """NHWC shape and a geometry where every window overlaps the input. The output size is drawn
    independently of a "natural" formula, so the implied bottom/right padding varies freely, and
    kernels may be larger than the padded input."""
    n = data.draw(st.integers(1, 2))
    h, w = data.draw(st.integers(1, max_hw)), data.draw(st.integers(1, max_hw))
    c = data.draw(st.integers(1, max_c))
    kernel = (data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5)))
    stride = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    pad = (data.draw(st.integers(0, min(2, kernel[0] - 1))), data.draw(st.integers(0, min(2, kernel[1] - 1))))
    # The last window must start inside the input: (out - 1) * stride - pad < in.
    out_hw = (
        data.draw(st.integers(1, (h + pad[0] - 1) // stride[0] + 1)),
        data.draw(st.integers(1, (w + pad[1] - 1) // stride[1] + 1)),
    )
    return (n, h, w, c), kernel, stride, pad, out_hw


@pytest.mark.parametrize("kind", ["avg", "max"])
@settings(max_examples=800, deadline=None)
@given(data=st.data(), seed=SEEDS, act=ACT_RANGES, mode=DATA_MODES)
def test_pool_golden_equals_c(lib, kind, data, seed, act, mode):
    golden, c_fn = {"avg": (avg_pool2d_s8, lib.edgec_avgpool_s8), "max": (max_pool2d_s8, lib.edgec_maxpool_s8)}[kind]
    shape, kernel, stride, pad, out_hw = draw_pool_geometry(data)
    x = int8_data(np.random.default_rng(seed), shape, mode)
    kwargs = dict(kernel=kernel, stride=stride, pad=pad, out_hw=out_hw, act_min=act[0], act_max=act[1])
    expected = golden(x, **kwargs)
    status, got = c_pool(c_fn, x, **kwargs)
    assert status == EDGEC_OK
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize(
    "shape,kernel,stride,pad,out_hw",
    [
        ((1, 1, 1, 1), (5, 5), (1, 1), (2, 2), (3, 3)),  # 1x1 input, 5x5 kernel, windows mostly padding
        ((1, 1, 1, 3), (5, 5), (3, 3), (0, 0), (1, 1)),  # kernel bigger than the whole input
        ((2, 12, 12, 16), (3, 3), (2, 2), (1, 1), (6, 6)),  # MobileNet-style, implied bottom pad 0
        ((1, 12, 12, 4), (3, 3), (2, 2), (0, 0), (6, 6)),  # ceil_mode-like: implied bottom/right pad 1
        ((1, 7, 5, 2), (2, 4), (3, 1), (1, 2), (3, 6)),  # asymmetric everything
        ((1, 96, 96, 8), (2, 2), (2, 2), (0, 0), (48, 48)),  # model-sized
    ],
)
def test_pool_edge_geometries(lib, kind, shape, kernel, stride, pad, out_hw):
    golden, c_fn = {"avg": (avg_pool2d_s8, lib.edgec_avgpool_s8), "max": (max_pool2d_s8, lib.edgec_maxpool_s8)}[kind]
    rng = np.random.default_rng(sum(shape) + sum(kernel))
    for x in (
        rng.integers(-128, 128, shape, dtype=np.int8),
        np.full(shape, -128, np.int8),
        np.full(shape, 127, np.int8),
    ):
        kwargs = dict(kernel=kernel, stride=stride, pad=pad, out_hw=out_hw)
        status, got = c_pool(c_fn, x, **kwargs)
        assert status == EDGEC_OK
        np.testing.assert_array_equal(got, golden(x, **kwargs))


LOG_SCALES = st.floats(-6.0, 1.0).map(lambda e: 10.0**e)  # 1e-6 .. 10: shifts both signs


@settings(max_examples=1000, deadline=None)
@given(
    seed=SEEDS,
    size=st.integers(1, 300),
    s1=LOG_SCALES,
    s2=LOG_SCALES,
    s_out=LOG_SCALES,
    zp1=ZERO_POINTS,
    zp2=ZERO_POINTS,
    zp_out=ZERO_POINTS,
    act=ACT_RANGES,
    mode1=DATA_MODES,
    mode2=DATA_MODES,
)
@example(
    seed=0,
    size=4,
    s1=1e-6,
    s2=10.0,
    s_out=1e-6,
    zp1=-128,
    zp2=127,
    zp_out=-128,
    act=(-128, 127),
    mode1="max",
    mode2="min",
)
@example(
    seed=0,
    size=4,
    s1=10.0,
    s2=10.0,
    s_out=1e-6,
    zp1=127,
    zp2=-128,
    zp_out=127,
    act=(-128, 127),
    mode1="min",
    mode2="max",
)
def test_add_golden_equals_c(lib, seed, size, s1, s2, s_out, zp1, zp2, zp_out, act, mode1, mode2):
    rng = np.random.default_rng(seed)
    x1, x2 = int8_data(rng, size, mode1), int8_data(rng, size, mode2)
    params = add_params(s1, zp1, s2, zp2, s_out, zp_out, *act)
    expected = add_s8(x1, x2, params)
    status, got = c_add(lib, x1, x2, params)
    assert status == EDGEC_OK
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=500, deadline=None)
@given(
    seed=SEEDS,
    size=st.integers(1, 64),
    zp1=ZERO_POINTS,
    zp2=ZERO_POINTS,
    zp_out=ZERO_POINTS,
    act=ACT_RANGES,
    left_shift=st.integers(0, 23),
    mults=st.lists(st.integers(0, 2**31 - 1), min_size=3, max_size=3),
    shifts=st.lists(st.integers(-31, 31), min_size=3, max_size=3),
    mode=DATA_MODES,
)
# (127 + 128) << 23 << 8 wraps to INT32_MIN in both inputs, so a + b must wrap too.
@example(
    seed=0,
    size=8,
    zp1=-128,
    zp2=-128,
    zp_out=0,
    act=(-128, 127),
    left_shift=23,
    mults=[2**31 - 1, 2**31 - 1, 2**31 - 1],
    shifts=[8, 8, 0],
    mode="max",
)
def test_add_arbitrary_params_golden_equals_c(lib, seed, size, zp1, zp2, zp_out, act, left_shift, mults, shifts, mode):
    """Any in-range parameters (not only add_params' output), so int32 wraps in the shifts and the
    a + b sum are exercised: C (through uint32, UBSan-checked) and golden must still agree."""
    rng = np.random.default_rng(seed)
    x1, x2 = int8_data(rng, size, mode), int8_data(rng, size, mode)
    names = [name for name, _ in AddS8Desc._fields_][1:]
    params = dict(
        zip(
            names,
            [
                -zp1,
                mults[0],
                shifts[0],
                -zp2,
                mults[1],
                shifts[1],
                left_shift,
                zp_out,
                mults[2],
                shifts[2],
                act[0],
                act[1],
            ],
        )
    )
    status, got = c_add(lib, x1, x2, params)
    assert status == EDGEC_OK
    np.testing.assert_array_equal(got, add_s8(x1, x2, params))


@pytest.mark.parametrize("alias", ["input1", "input2", "both"])
def test_add_in_place(lib, alias):
    rng = np.random.default_rng(7)
    x1 = rng.integers(-128, 128, 257, dtype=np.int8)
    x2 = x1.copy() if alias == "both" else rng.integers(-128, 128, 257, dtype=np.int8)
    params = add_params(0.05, -3, 0.11, 17, 0.09, -128, -100, 120)
    expected = add_s8(x1, x2, params)
    buf1, buf2 = x1.copy(), x2.copy()
    ap = C.byref(AddS8Desc(**add_desc(x1.size, params)))
    p1, p2 = ptr(buf1, C.c_int8), ptr(buf2, C.c_int8)
    if alias == "input1":
        status = lib.edgec_add_s8(ap, p1, p2, p1)
        result = buf1
    elif alias == "input2":
        status = lib.edgec_add_s8(ap, p1, p2, p2)
        result = buf2
    else:  # x + x in place: all three pointers are one buffer
        status = lib.edgec_add_s8(ap, p1, p1, p1)
        result = buf1
    assert status == EDGEC_OK
    np.testing.assert_array_equal(result, expected)


@settings(max_examples=200, deadline=None)
@given(seed=SEEDS, size=st.integers(0, 300), act=ACT_RANGES)
def test_clamp_golden_equals_c(lib, seed, size, act):
    x = np.random.default_rng(seed).integers(-128, 128, size, dtype=np.int8)
    status, got = c_clamp(lib, x, *act)
    assert status == EDGEC_OK
    np.testing.assert_array_equal(got, clamp_s8(x, *act))


# --------------------------------------------------------------------------------------------
# 3. Argument validation
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize(
    "shape,kernel,stride,pad,out_hw",
    [
        ((1, 4, 4, 1), (2, 2), (1, 1), (2, 0), (3, 3)),  # pad >= kernel: first window is all padding
        ((1, 4, 4, 1), (3, 3), (2, 2), (1, 1), (4, 2)),  # last row window starts below the input
        ((1, 4, 4, 1), (2, 2), (0, 1), (0, 0), (2, 2)),  # zero stride
        ((1, 4, 4, 1), (0, 2), (1, 1), (0, 0), (2, 2)),  # empty kernel
    ],
)
def test_pool_rejects_windows_without_input(lib, kind, shape, kernel, stride, pad, out_hw):
    golden, c_fn = {"avg": (avg_pool2d_s8, lib.edgec_avgpool_s8), "max": (max_pool2d_s8, lib.edgec_maxpool_s8)}[kind]
    x = np.zeros(shape, dtype=np.int8)
    status, _ = c_pool(c_fn, x, kernel=kernel, stride=stride, pad=pad, out_hw=out_hw)
    assert status == EDGEC_ARG_ERROR
    with pytest.raises(ValueError):
        golden(x, kernel=kernel, stride=stride, pad=pad, out_hw=out_hw)


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_pool_rejects_bad_args(lib, kind):
    c_fn = lib.edgec_avgpool_s8 if kind == "avg" else lib.edgec_maxpool_s8
    x = np.zeros((1, 4, 4, 2), dtype=np.int8)
    out = np.zeros(64, dtype=np.int8)
    window = dict(kernel=(2, 2), stride=(1, 1), pad=(0, 0), out_hw=(3, 3))
    good = pool2d_desc(x.shape, **window)
    xp, op = ptr(x, C.c_int8), ptr(out, C.c_int8)
    assert c_fn(C.byref(Pool2dDesc(**good)), xp, op) == EDGEC_OK
    for field, value in (
        ("batches", 0),
        ("channels", 0),
        ("act_min", -129),
        ("act_max", -129),
        ("stride_h", 0),
        ("output_w", 5),
    ):
        assert c_fn(C.byref(Pool2dDesc(**{**good, field: value})), xp, op) == EDGEC_ARG_ERROR, field
    if kind == "avg":  # PyTorch's divisors are edgec_avg_pool2d_s8's
        for field in ("count_include_pad", "divisor_override"):
            assert c_fn(C.byref(Pool2dDesc(**{**good, field: 1})), xp, op) == EDGEC_ARG_ERROR, field
    assert c_fn(None, xp, op) == EDGEC_ARG_ERROR
    assert c_fn(C.byref(Pool2dDesc(**good)), None, op) == EDGEC_ARG_ERROR
    assert c_fn(C.byref(Pool2dDesc(**good)), xp, None) == EDGEC_ARG_ERROR
    # index arithmetic would overflow
    huge = {**good, "stride_h": 2**30, "filter_h": 2**31 - 1, "output_h": 2}
    assert c_fn(C.byref(Pool2dDesc(**huge)), xp, op) == EDGEC_ARG_ERROR


def test_fully_connected_rejects_bad_args(lib):
    x = np.zeros((1, 4), dtype=np.int8)
    w = np.zeros((2, 4), dtype=np.int8)
    base = dict(input_zp=0, output_zp=0)
    assert c_fully_connected(lib, x, w, None, 2**30, 0, **base)[0] == EDGEC_OK
    assert (
        c_fully_connected(lib, x, w, None, 2**30, 0, input_zp=0, output_zp=0, act_min=5, act_max=4)[0]
        == EDGEC_ARG_ERROR
    )
    assert c_fully_connected(lib, x, w, None, 2**30, 0, input_zp=0, output_zp=200)[0] == EDGEC_ARG_ERROR
    assert c_fully_connected(lib, x, w, None, 2**30, 32, **base)[0] == EDGEC_ARG_ERROR
    assert (
        c_fully_connected(lib, x, w, None, np.array([2**30, 2**30]), np.array([0, -32]), **base)[0] == EDGEC_ARG_ERROR
    )
    out = np.zeros(2, dtype=np.int8)
    keep = []
    no_quant = fc_desc(1, 4, 2, 0, 0, 0, -128, 127, w, None, None, None, keep)
    assert lib.edgec_fully_connected_s8(C.byref(no_quant), ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_ARG_ERROR
    assert lib.edgec_fully_connected_s8(None, ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_ARG_ERROR
    for batches, n_in, n_out in ((0, 4, 2), (1, 0, 2), (1, 4, 0), (-1, 4, 2)):
        desc = fc_desc(batches, n_in, n_out, 0, 0, 0, -128, 127, w, None, 2**30, 0, keep)
        assert lib.edgec_fully_connected_s8(C.byref(desc), ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_ARG_ERROR


def test_add_and_clamp_reject_bad_args(lib):
    x = np.zeros(4, dtype=np.int8)
    p = add_params(0.1, 0, 0.1, 0, 0.1, 0)
    assert c_add(lib, x, x, p)[0] == EDGEC_OK
    for field, value in (
        ("left_shift", 24),
        ("input1_offset", 129),
        ("output_offset", 128),
        ("output_shift", 32),
        ("input2_shift", -32),
        ("act_min", -129),
    ):
        assert c_add(lib, x, x, {**p, field: value})[0] == EDGEC_ARG_ERROR, field
    xs = [ptr(x, C.c_int8)] * 3
    assert lib.edgec_add_s8(C.byref(AddS8Desc(**add_desc(-1, p))), *xs) == EDGEC_ARG_ERROR
    assert lib.edgec_add_s8(C.byref(AddS8Desc(**add_desc(0, p))), *xs) == EDGEC_OK
    assert lib.edgec_add_s8(None, *xs) == EDGEC_ARG_ERROR
    assert lib.edgec_clamp_s8(C.byref(ClampS8Desc(4, 6, 0)), ptr(x, C.c_int8)) == EDGEC_ARG_ERROR
    assert lib.edgec_clamp_s8(C.byref(ClampS8Desc(-1, 0, 6)), ptr(x, C.c_int8)) == EDGEC_ARG_ERROR
    assert lib.edgec_clamp_s8(C.byref(ClampS8Desc(4, 0, 6)), None) == EDGEC_ARG_ERROR
    assert lib.edgec_clamp_s8(None, ptr(x, C.c_int8)) == EDGEC_ARG_ERROR
    assert lib.edgec_clamp_s8(C.byref(ClampS8Desc(4, -128, 128)), ptr(x, C.c_int8)) == EDGEC_ARG_ERROR


# --------------------------------------------------------------------------------------------
# 4. Extreme values: biases at the int32 limits, zero points -128/127 in and out, multipliers
#    2^31 - 1 and 2^30, shifts at their limits (golden == C, UBSan-checked, 0 LSB)
# --------------------------------------------------------------------------------------------
EXTREME_ZERO_POINTS = [(-128, 127), (127, -128), (-128, -128), (127, 127)]
EXTREME_MULTIPLIERS = [2**31 - 1, 2**30]
EXTREME_SHIFTS = [-31, -1, 0, 30, 31]
INT32_LIMITS = np.array([-(2**31), 2**31 - 1, -(2**31) + 1, 2**31 - 2, 0, -1, 1, 2**30], dtype=np.int32)


@pytest.mark.parametrize("zp_in,zp_out", EXTREME_ZERO_POINTS)
@pytest.mark.parametrize("multiplier", EXTREME_MULTIPLIERS)
@pytest.mark.parametrize("shift", EXTREME_SHIFTS)
def test_fully_connected_extreme_values(lib, zp_in, zp_out, multiplier, shift):
    """Inputs and weights of -128/127 only (maximal dot products) on biases at the int32 limits:
    the accumulators wrap past both limits; per channel and per tensor."""
    rng = np.random.default_rng(shift + 40)
    x = rng.choice(np.array([-128, 127], np.int8), (3, 301))
    w = rng.choice(np.array([-128, 127], np.int8), (8, 301))
    for per_channel in (False, True):
        mult = np.full(8, multiplier) if per_channel else multiplier
        shifts = np.roll(np.array(EXTREME_SHIFTS * 2)[:8], shift) if per_channel else shift
        kwargs = dict(input_zp=zp_in, output_zp=zp_out)
        status, got = c_fully_connected(lib, x, w, INT32_LIMITS, mult, shifts, **kwargs)
        assert status == EDGEC_OK
        np.testing.assert_array_equal(got, fully_connected_s8(x, w, INT32_LIMITS, mult, shifts, **kwargs))


@pytest.mark.parametrize("zp1,zp_out", EXTREME_ZERO_POINTS)
@pytest.mark.parametrize("multiplier", EXTREME_MULTIPLIERS)
@pytest.mark.parametrize("shift", EXTREME_SHIFTS)
@pytest.mark.parametrize("left_shift", [0, 20, 23])
def test_add_extreme_values(lib, zp1, zp_out, multiplier, shift, left_shift):
    """Every input pair of -128/127 against the other input's zero point at the opposite limit."""
    x1 = np.array([-128, -128, 127, 127, 0, -1], np.int8)
    x2 = np.array([-128, 127, -128, 127, 0, 1], np.int8)
    names = [name for name, _ in AddS8Desc._fields_][1:]
    for out_shift in (shift, -shift if abs(shift) <= 30 else 0):
        params = dict(
            zip(
                names,
                [
                    -zp1,
                    multiplier,
                    shift,
                    -zp_out,
                    multiplier,
                    -1,
                    left_shift,
                    zp_out,
                    multiplier,
                    out_shift,
                    -128,
                    127,
                ],
            )
        )
        status, got = c_add(lib, x1, x2, params)
        assert status == EDGEC_OK
        np.testing.assert_array_equal(got, add_s8(x1, x2, params))


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize(
    "shape,kernel,stride,pad,out_hw",
    [
        ((1, 1, 1, 1), (1, 1), (2**31 - 1, 2**31 - 1), (0, 0), (1, 1)),  # the largest stride
        ((1, 5, 3, 2), (5, 3), (2**31 - 1, 2**30), (4, 2), (1, 1)),  # padding k - 1, windows at its edge
        ((2, 16, 16, 5), (16, 16), (1, 1), (15, 15), (31, 31)),  # 256-tap windows (DSP's int16 limit)
        ((1, 17, 16, 4), (17, 16), (1, 1), (0, 0), (1, 1)),  # 272 taps: past it
    ],
)
@pytest.mark.parametrize("act", [(-128, 127), (-128, -128), (127, 127)])
def test_pool_extreme_values(lib, kind, shape, kernel, stride, pad, out_hw, act):
    golden, c_fn = {"avg": (avg_pool2d_s8, lib.edgec_avgpool_s8), "max": (max_pool2d_s8, lib.edgec_maxpool_s8)}[kind]
    rng = np.random.default_rng(3)
    for x in (
        np.full(shape, -128, np.int8),
        np.full(shape, 127, np.int8),
        rng.choice(np.array([-128, 127], np.int8), shape),
    ):
        kwargs = dict(kernel=kernel, stride=stride, pad=pad, out_hw=out_hw, act_min=act[0], act_max=act[1])
        status, got = c_pool(c_fn, x, **kwargs)
        assert status == EDGEC_OK
        np.testing.assert_array_equal(got, golden(x, **kwargs))


def test_kernels_reject_sizes_past_int32(lib):
    """Element counts or index arithmetic past int32: refused before any index is formed."""
    x = np.zeros((1, 4), dtype=np.int8)
    keep = []
    out = np.zeros(4, dtype=np.int8)
    for batches, n_in, n_out in ((2**20, 2**12, 1), (1, 2**16, 2**16), (2**16, 1, 2**16)):
        desc = fc_desc(batches, n_in, n_out, 0, 0, 0, -128, 127, x, None, 2**30, 0, keep)
        assert lib.edgec_fully_connected_s8(C.byref(desc), ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_ARG_ERROR
    for fn in (lib.edgec_avgpool_s8, lib.edgec_maxpool_s8):
        big = pool_desc((2**16, 2**8, 2**8, 1), kernel=(1, 1), stride=(1, 1), pad=(0, 0), out_hw=(2**8, 2**8))
        assert fn(C.byref(big), ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_ARG_ERROR

"""Average pooling with PyTorch's divisor rules: edgec_avg_pool2d_s8 against the golden
edgec.ops.pool.avg_pool2d_s8 (divisor "in_bounds", "include_pad" or an override), byte for byte.

Also: the golden against a slow per-window reference written from PyTorch's avg_pool2d CPU kernel
(hstart/hend, pool_size, divide_factor), and against torch.nn.functional.avg_pool2d itself on
integer-valued inputs. The one difference from PyTorch is the rounding: PyTorch returns the real
mean sum / divisor, edgec the nearest integer, ties away from zero (TFLite's and CMSIS-NN's
rounding), so edgec == round_half_away(torch) exactly and |edgec - torch| <= 1/2 before the clamp.
(Integers, so the float64 quotient is never on the wrong side of a tie: a mean that is not a
half-integer lies at least 1/(2 * divisor) from one.) QEMU: cortex-m4 (DSP path, and the portable
one past 256 taps) and cortex-m55 (Helium), driver tests/data/port/avg_pool2d_kernels.c.
"""

from __future__ import annotations

import ctypes as C
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgec.ops.pool import (
    adaptive_avg_pool2d_desc,
    adaptive_avg_pool2d_s8,
    avg_pool2d_s8,
    pool2d_desc,
    pool_output_size,
)
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import Pool2dDesc, ptr

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
GUARD = 16
ARG_ERROR = -1


def random_pool(rng, *, torch_pads: bool = False, max_hw: int = 9) -> dict:
    """Arguments of avg_pool2d_s8: channel counts around 4 lanes, kernels 1..4 (or the whole
    image), strides 1..3, pads below the kernel (PyTorch's <= kernel/2 with torch_pads),
    floor or ceil output sizes, every divisor kind (overrides up to the kernel's 2^23) and any
    zero point (the value of the taps outside the input that a divisor counts)."""
    c = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 16, 17]))
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, max_hw + 1)), int(rng.integers(1, max_hw + 1))
    if rng.random() < 0.15:
        kernel, stride, pad, ceil_mode = (h, w), (1, 1), (0, 0), False
    else:
        kernel = tuple(int(v) for v in rng.integers(1, 5, 2))
        stride = tuple(int(v) for v in rng.integers(1, 4, 2))
        pad = tuple(int(rng.integers(0, k // 2 + 1 if torch_pads else k)) for k in kernel)
        ceil_mode = bool(rng.random() < 0.5)
    out_hw = tuple(pool_output_size(size, k, s, p, ceil_mode) for size, k, s, p in zip((h, w), kernel, stride, pad))
    if min(out_hw) < 1:
        return random_pool(rng, torch_pads=torch_pads, max_hw=max_hw)
    divisor = ["in_bounds", "include_pad", "include_pad", int(rng.integers(1, 20)), int(rng.choice([1, 2, 2**23]))][
        int(rng.integers(5))
    ]
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    if rng.random() < 0.15:
        x = rng.choice(np.array([-128, 127], dtype=np.int8), x.shape)
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    act_min, act_max = [(-128, 127), (-128, 127), (lo, hi)][int(rng.integers(3))]
    zero_point = int(rng.choice([0, -128, 127, int(rng.integers(-128, 128))]))
    return dict(
        x=x,
        kernel=kernel,
        stride=stride,
        pad=pad,
        out_hw=out_hw,
        divisor=divisor,
        act_min=act_min,
        act_max=act_max,
        ceil_mode=ceil_mode,
        zero_point=zero_point,
    )


def golden(case: dict) -> np.ndarray:
    return avg_pool2d_s8(
        case["x"],
        kernel=case["kernel"],
        stride=case["stride"],
        pad=case["pad"],
        out_hw=case["out_hw"],
        act_min=case["act_min"],
        act_max=case["act_max"],
        divisor=case["divisor"],
        zero_point=case.get("zero_point", 0),
    )


def desc_values(case: dict) -> dict:
    return pool2d_desc(
        case["x"].shape,
        kernel=case["kernel"],
        stride=case["stride"],
        pad=case["pad"],
        out_hw=case["out_hw"],
        divisor=case["divisor"],
        act_min=case["act_min"],
        act_max=case["act_max"],
        zero_point=case.get("zero_point", 0),
    )


def run_c(lib, values: dict, x: np.ndarray, output_size: int) -> tuple[int, np.ndarray]:
    fn = lib.edgec_avg_pool2d_s8
    fn.argtypes = [C.POINTER(Pool2dDesc), C.POINTER(C.c_int8), C.POINTER(C.c_int8)]
    fn.restype = C.c_int
    x = np.ascontiguousarray(x)
    out = np.full(output_size + GUARD, 0x5A, dtype=np.int8)
    status = fn(C.byref(Pool2dDesc(**values)), ptr(x, C.c_int8), ptr(out, C.c_int8))
    assert (out[output_size:] == 0x5A).all(), "wrote past its output"
    return status, out[:output_size]


@settings(max_examples=300, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1))
def test_golden_matches_c(kernel_lib, seed):
    case = random_pool(np.random.default_rng(seed))
    expected = golden(case)
    status, out = run_c(kernel_lib, desc_values(case), case["x"], expected.size)
    assert status == 0
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


def test_in_bounds_divisor_is_edgec_avgpool_s8(kernel_lib):
    """divisor "in_bounds" (0, 0) gives edgec_avgpool_s8's bytes, and the golden's default."""
    rng = np.random.default_rng(4)
    fn = kernel_lib.edgec_avgpool_s8
    fn.restype = C.c_int
    for _ in range(60):
        case = {**random_pool(rng), "divisor": "in_bounds"}
        expected = golden(case)
        status, out = run_c(kernel_lib, desc_values(case), case["x"], expected.size)
        x = np.ascontiguousarray(case["x"])
        old = np.zeros(expected.size, dtype=np.int8)
        fn.argtypes = [C.POINTER(Pool2dDesc), C.POINTER(C.c_int8), C.POINTER(C.c_int8)]
        assert fn(C.byref(Pool2dDesc(**desc_values(case))), ptr(x, C.c_int8), ptr(old, C.c_int8)) == 0
        assert status == 0
        np.testing.assert_array_equal(out, old)
        np.testing.assert_array_equal(
            old.reshape(expected.shape),
            avg_pool2d_s8(
                case["x"],
                kernel=case["kernel"],
                stride=case["stride"],
                pad=case["pad"],
                out_hw=case["out_hw"],
                act_min=case["act_min"],
                act_max=case["act_max"],
            ),
        )


def test_invalid_descriptors_are_refused(kernel_lib):
    case = random_pool(np.random.default_rng(9))
    good = desc_values(case)
    size = golden(case).size
    for broken in (
        dict(divisor_override=-1),
        dict(count_include_pad=2),
        dict(count_include_pad=-1),
        dict(output_h=good["output_h"] + good["input_h"] + 2),
        dict(pad_top=good["filter_h"]),
        dict(stride_w=0),
        dict(channels=0),
        dict(act_min=1, act_max=0),
        dict(
            filter_h=2**20,
            filter_w=2**20,
            count_include_pad=1,
            input_h=2**10,
            input_w=2**10,
            pad_top=2**15,
            pad_left=2**15,
            output_h=1,
            output_w=1,
        ),
    ):
        status, out = run_c(kernel_lib, {**good, **broken}, case["x"], size)
        assert status == ARG_ERROR, broken
        assert (out == 0x5A).all()
    fn = kernel_lib.edgec_avg_pool2d_s8
    assert fn(None, ptr(np.zeros(1, np.int8), C.c_int8), ptr(np.zeros(1, np.int8), C.c_int8)) == ARG_ERROR
    with pytest.raises(ValueError):
        pool2d_desc(case["x"].shape, kernel=(2, 2), stride=(1, 1), pad=(0, 0), out_hw=(1, 1), divisor=0)


# --------------------------------------------------------------------------------------------
# The golden against PyTorch's rule (slow, per window) and against PyTorch itself
# --------------------------------------------------------------------------------------------


def _round_half_away(q: Fraction) -> int:
    magnitude = (abs(q.numerator) * 2 + q.denominator) // (2 * q.denominator)
    return magnitude if q >= 0 else -magnitude


def slow_reference(case: dict) -> np.ndarray:
    """PyTorch's avg_pool2d CPU kernel, window by window: hstart = oh*sH - padH, hend =
    min(hstart + kH, iH + padH), pool_size = (hend - hstart) * (wend - wstart), then hstart, hend
    clipped to the input; divide_factor = divisor_override, else pool_size if count_include_pad,
    else the clipped window's size, on real values (q - zero_point; padding is real 0). Then the
    zero point back, edgec's rounding (half away from zero) and the clamp."""
    zero_point = case.get("zero_point", 0)
    x = case["x"].astype(int) - zero_point
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), (ph, pw), (ho, wo) = case["kernel"], case["stride"], case["pad"], case["out_hw"]
    out = np.zeros((n, ho, wo, c), dtype=np.int8)
    for b in range(n):
        for oh in range(ho):
            for ow in range(wo):
                hstart, wstart = oh * sh - ph, ow * sw - pw
                hend, wend = min(hstart + kh, h + ph), min(wstart + kw, w + pw)
                pool_size = (hend - hstart) * (wend - wstart)
                hstart, wstart, hend, wend = max(hstart, 0), max(wstart, 0), min(hend, h), min(wend, w)
                if isinstance(case["divisor"], int):
                    divide_factor = case["divisor"]
                elif case["divisor"] == "include_pad":
                    divide_factor = pool_size
                else:
                    divide_factor = (hend - hstart) * (wend - wstart)
                for ch in range(c):
                    total = sum(x[b, i, j, ch] for i in range(hstart, hend) for j in range(wstart, wend))
                    y = _round_half_away(Fraction(total, divide_factor) + zero_point)
                    out[b, oh, ow, ch] = min(max(y, case["act_min"]), case["act_max"])
    return out


def test_golden_matches_slow_reference():
    rng = np.random.default_rng(12)
    for i in range(80):
        case = random_pool(rng, max_hw=6)
        np.testing.assert_array_equal(golden(case), slow_reference(case), err_msg=f"case {i}")


def test_golden_is_torch_rounded():
    """torch.nn.functional.avg_pool2d (float64, NCHW, PyTorch's own geometry and divisor
    arguments) on real values (q - zero_point) plus the zero point, rounded half away from zero
    and clamped, is the golden, byte for byte; unclamped, the two differ by at most 1/2."""
    rng = np.random.default_rng(13)
    for _ in range(150):
        case = random_pool(rng, torch_pads=True)
        divisor = case["divisor"]
        mean = (
            case["zero_point"]
            + torch.nn.functional.avg_pool2d(
                torch.from_numpy(case["x"].astype(np.float64) - case["zero_point"]).permute(0, 3, 1, 2),
                case["kernel"],
                case["stride"],
                case["pad"],
                ceil_mode=case["ceil_mode"],
                count_include_pad=divisor == "include_pad",
                divisor_override=divisor if isinstance(divisor, int) else None,
            )
            .permute(0, 2, 3, 1)
            .numpy()
        )
        assert mean.shape[1:3] == case["out_hw"]
        rounded = np.sign(mean) * np.floor(np.abs(mean) + 0.5)
        full = golden({**case, "act_min": -128, "act_max": 127})
        inside = (rounded >= -128) & (rounded <= 127)
        assert np.abs(full[inside] - mean[inside]).max(initial=0) <= 0.5
        np.testing.assert_array_equal(golden(case), np.clip(rounded, case["act_min"], case["act_max"]).astype(np.int8))


# --------------------------------------------------------------------------------------------
# QEMU
# --------------------------------------------------------------------------------------------

DRIVER = ROOT / "tests" / "data" / "port" / "avg_pool2d_kernels.c"
SOURCES = [ROOT / "runtime_c" / "src" / "pool" / "edgec_avgpool_s8.c"]
HEADER_WORDS = 20


def arm_cases() -> list[dict]:
    """Random pools, and windows past the DSP path's 256 taps (the portable loop finishes them)."""
    rng = np.random.default_rng(21)
    cases = [random_pool(rng) for _ in range(250)]
    for divisor in ("in_bounds", "include_pad", 7):
        x = rng.integers(-128, 128, (1, 17, 17, 8), dtype=np.int8)
        cases.append(
            dict(
                x=x,
                kernel=(17, 17),
                stride=(1, 1),
                pad=(3, 5),
                out_hw=(4, 6),
                divisor=divisor,
                act_min=-128,
                act_max=127,
                zero_point=-37,
            )
        )
    return cases


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_avg_pool2d_arm(target, tmp_path):
    cases = arm_cases()
    expected = [golden(case).ravel() for case in cases]
    records = []
    for case, want in zip(cases, expected):
        payload = case["x"].tobytes() + bytes(-case["x"].size % 4)
        header = [len(payload), want.size, *desc_values(case).values()]
        records.append(struct.pack(f"<{HEADER_WORDS}i", *header, *[0] * (HEADER_WORDS - len(header))) + payload)
    (tmp_path / "cases.bin").write_bytes(b"".join(records))
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "pool.elf",
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    result = toolchain.run_qemu(target, elf, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data, at, failures = (tmp_path / "results.bin").read_bytes(), 0, []
    for case, want in zip(cases, expected):
        status, guards = struct.unpack_from("<2i", data, at)
        out = np.frombuffer(data, np.int8, want.size, at + 8)
        at += 8 + want.size
        if status != 0 or not guards or not np.array_equal(out, want):
            failures.append(
                f"status {status}, guards {guards}, {np.count_nonzero(out != want)} bytes differ: "
                f"{ {k: v for k, v in case.items() if k != 'x'} } {case['x'].shape}"
            )
    assert at == len(data)
    assert not failures, f"{len(failures)} of {len(cases)} fail:\n" + "\n".join(failures[:10])


# --------------------------------------------------------------------------------------------
# Adaptive average pooling (PyTorch's uneven windows): edgec_adaptive_avg_pool_s8
# --------------------------------------------------------------------------------------------


class AdaptiveAvgPoolDesc(C.Structure):
    """edgec_adaptive_avg_pool_desc (edgec.ops.pool.adaptive_avg_pool2d_desc gives the values)."""

    _fields_ = [
        (name, C.c_int32)
        for name in ("batches", "input_h", "input_w", "channels", "output_h", "output_w", "act_min", "act_max")
    ]


def test_adaptive_golden_is_torch_rounded_and_matches_c(kernel_lib):
    """Every output size up to the input's, uneven windows included: the golden is
    torch.nn.functional.adaptive_avg_pool2d (float64) rounded half away from zero and clamped,
    and edgec_adaptive_avg_pool_s8 equals the golden byte for byte without writing past its output."""
    fn = kernel_lib.edgec_adaptive_avg_pool_s8
    fn.argtypes = [C.POINTER(AdaptiveAvgPoolDesc), C.POINTER(C.c_int8), C.POINTER(C.c_int8)]
    fn.restype = C.c_int
    rng = np.random.default_rng(21)
    for _ in range(120):
        n, h, w, c = (
            int(rng.integers(1, 3)),
            int(rng.integers(1, 14)),
            int(rng.integers(1, 14)),
            int(rng.integers(1, 6)),
        )
        out_hw = (int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1)))
        act = sorted(rng.integers(-128, 128, 2).tolist()) if rng.random() < 0.3 else [-128, 127]
        x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
        expected = adaptive_avg_pool2d_s8(x, out_hw=out_hw, act_min=act[0], act_max=act[1])
        mean = (
            torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2), out_hw)
            .permute(0, 2, 3, 1)
            .numpy()
        )
        rounded = np.sign(mean) * np.floor(np.abs(mean) + 0.5)
        np.testing.assert_array_equal(expected, np.clip(rounded, *act).astype(np.int8))
        out = np.full(expected.size + GUARD, 0x5A, dtype=np.int8)
        desc = AdaptiveAvgPoolDesc(**adaptive_avg_pool2d_desc(x.shape, out_hw=out_hw, act_min=act[0], act_max=act[1]))
        assert fn(C.byref(desc), ptr(np.ascontiguousarray(x), C.c_int8), ptr(out, C.c_int8)) == 0
        assert (out[expected.size :] == 0x5A).all(), "wrote past its output"
        np.testing.assert_array_equal(out[: expected.size].reshape(expected.shape), expected)
    bigger = AdaptiveAvgPoolDesc(**adaptive_avg_pool2d_desc((1, 2, 2, 1), out_hw=(3, 2)))
    assert fn(C.byref(bigger), ptr(np.zeros(4, np.int8), C.c_int8), ptr(np.zeros(8, np.int8), C.c_int8)) == ARG_ERROR

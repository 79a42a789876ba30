"""edgec_depthwise_conv_s8_packed's DSP rows (edgec_depthwise_conv_s8_packed_dsp.c) under QEMU
against the golden kernel: the pixel-pair rows (dsp_pairs_3x3_step24/48: 3x3 rows of at least 8
pixels at stride 1 or 2 on cortex-m4, or an even number from 4; of at least 4 on cortex-m33), and
the short rows of DS-CNN and MobileNet's late layers with dsp_group_rows_3x3's bookkeeping: the
cache filled by dsp_widen_columns (odd and even column counts, pad rows above and below the
image), the phase counted along the rows, rows no output row reads skipped (stride 4).

test_kernels_arm's depthwise cases draw images at most 10 pixels wide, so few of their rows reach
the pairs, and none at stride 2: these are the same cases (tests.test_kernels_arm.depthwise_case)
drawn on images 8 to 40 pixels wide, or 3 to 9, run by its driver."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edgec.targets import toolchain
from edgec.targets.cores import get_target
from tests import test_kernels_arm as arm
from tests.device_support import needs_toolchain, require_tools

CASES = 150
SHORT_CASES = 300  # about one in twenty: a full-group 3x3 layer with rows of 4 to 7 pixels


def wide_image(rng, kernel, stride, dilation):
    """arm._padded_image's draw with 8 to 40 columns and at most 5 rows (QEMU time)."""
    pad = tuple(int(rng.integers(0, k)) for k in kernel)
    pad_end = tuple(int(rng.integers(0, k)) for k in kernel)
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(8, 41))
    try:
        out_hw = tuple(
            arm.conv_output_size(size, k, s, p, e, d)
            for size, k, s, p, e, d in zip((h, w), kernel, stride, pad, pad_end, dilation)
        )
    except ValueError:
        out_hw = None
    return pad, pad_end, (n, h, w), out_hw


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O2", "-Os", "-O0"])
def test_long_depthwise_rows_match_golden(opt, tmp_path, monkeypatch):
    monkeypatch.setattr(arm, "_padded_image", wide_image)
    rng = np.random.default_rng({"-O2": 11, "-Os": 12, "-O0": 13}[opt])
    cases = [arm.depthwise_case(rng, arm.DSP) for _ in range(CASES)]
    # 3x3 undilated, stride_w 1 or 2, out_w >= 8
    paired = [
        c
        for c in cases
        if [arm.desc_field(c, f) for f in ("kernel_h", "kernel_w", "dilation_h", "dilation_w")] == [3, 3, 1, 1]
        and arm.desc_field(c, "stride_w") in (1, 2)
        and arm.desc_field(c, "output_w") >= 8
    ]
    assert len(paired) >= CASES // 8, "too few cases reach the pair routines"
    results = arm.run_on_target("cortex-m4", cases, tmp_path, opt)
    failures = [
        arm.describe(case)
        for case, (status, guards, output) in zip(cases, results)
        if status != case.status or not guards or (status == 0 and not np.array_equal(output, case.expected.ravel()))
    ]
    assert not failures, f"{len(failures)} of {len(cases)} cases fail:\n" + "\n".join(failures[:10])


def short_image(rng, kernel, stride, dilation):
    """arm._padded_image's draw with 1 to 12 rows and 3 to 9 columns (DS-CNN's rows are 5 pixels,
    MobileNet's last ones 3 and 6)."""
    pad = tuple(int(rng.integers(0, k)) for k in kernel)
    pad_end = tuple(int(rng.integers(0, k)) for k in kernel)
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 13)), int(rng.integers(3, 10))
    try:
        out_hw = tuple(
            arm.conv_output_size(size, k, s, p, e, d)
            for size, k, s, p, e, d in zip((h, w), kernel, stride, pad, pad_end, dilation)
        )
    except ValueError:
        out_hw = None
    return pad, pad_end, (n, h, w), out_hw


def _unrolled(case) -> bool:
    """A 3x3 undilated window: dsp_group_rows_3x3 runs its full groups."""
    return [arm.desc_field(case, f) for f in ("kernel_h", "kernel_w", "dilation_h", "dilation_w")] == [3, 3, 1, 1]


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O2", "-Os", "-O0"])
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m33"])
def test_short_depthwise_rows_match_golden(target, opt, tmp_path, monkeypatch):
    monkeypatch.setattr(arm, "_padded_image", short_image)
    rng = np.random.default_rng({"-O2": 21, "-Os": 22, "-O0": 23}[opt] + (10 if target == "cortex-m33" else 0))
    cases = [arm.depthwise_case(rng, arm.DSP, strides=(1, 1, 2, 3, 4)) for _ in range(SHORT_CASES)]
    unrolled = [c for c in cases if _unrolled(c) and arm.desc_field(c, "input_c") >= 4]
    assert sum(4 <= arm.desc_field(c, "output_w") < 8 for c in unrolled) >= SHORT_CASES // 30, "too few short rows"
    assert sum(arm.desc_field(c, "stride_h") == 4 for c in unrolled) >= SHORT_CASES // 60, "too few rows skipped"
    results = arm.run_on_target(target, cases, tmp_path, opt)
    failures = [
        arm.describe(case)
        for case, (status, guards, output) in zip(cases, results)
        if status != case.status or not guards or (status == 0 and not np.array_equal(output, case.expected.ravel()))
    ]
    assert not failures, f"{len(failures)} of {len(cases)} cases fail:\n" + "\n".join(failures[:10])


def int4_like_multipliers(rng, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) pairs as int4 layers have them (weight scales 16 times int8's): shifts of
    -1 among -2 to -24 (the wide short requantization), multipliers at 2^30, 2^31 - 1 or between;
    in one case in five a channel with shift 0, whose group takes the general requantization."""
    m = rng.integers(2**30, 2**31, count, dtype=np.int64)
    edges = rng.random(count) < 0.2
    m[edges] = rng.choice(np.array([2**30, 2**31 - 1]), int(edges.sum()))
    s = rng.choice(np.array([-1, -1, -1, -2, -3, -5, -24]), count)
    if rng.random() < 0.2:
        s[int(rng.integers(count))] = 0
    return m.astype(np.int32), s.astype(np.int32)


def _wide_groups(multiplier: np.ndarray, shift: np.ndarray) -> int:
    """Full groups of 4 channels that take the wide short requantization (edgec_dsp_requant_wide_ok,
    not edgec_dsp_requant_short): every multiplier >= 2^30, every shift -1 to -24, one of them -1."""
    return sum(
        bool(np.all(m >= 2**30) and np.all((s <= -1) & (s >= -24)) and np.any(s == -1))
        for m, s in zip(
            multiplier[: len(multiplier) // 4 * 4].reshape(-1, 4), shift[: len(shift) // 4 * 4].reshape(-1, 4)
        )
    )


def _int4_like_cases(rng, monkeypatch) -> list:
    """Short and long rows whose groups have shifts of -1 (dsp_row_3x3_wide, dsp_store_four_wide)
    and 0 (the general requantization), extreme biases among them; asserts that enough of them
    take each path."""
    drawn = []

    def multipliers(rng, count):
        drawn.append(int4_like_multipliers(rng, count))
        return drawn[-1]

    monkeypatch.setattr(arm, "multipliers", multipliers)
    monkeypatch.setattr(arm, "_padded_image", short_image)
    cases = [arm.depthwise_case(rng, arm.DSP, strides=(1, 1, 2, 4)) for _ in range(SHORT_CASES // 2)]
    monkeypatch.setattr(arm, "_padded_image", wide_image)
    cases += [arm.depthwise_case(rng, arm.DSP) for _ in range(CASES // 3)]
    assert len(drawn) == len(cases)
    wide_unrolled = [c for c, (m, s) in zip(cases, drawn) if _unrolled(c) and _wide_groups(m, s)]
    wide_other = [c for c, (m, s) in zip(cases, drawn) if not _unrolled(c) and _wide_groups(m, s)]
    assert len(wide_unrolled) >= len(cases) // 10 and len(wide_other) >= len(cases) // 20, "too few wide groups"
    assert sum(np.any(s == 0) for _, s in drawn) >= len(cases) // 10, "too few shifts of 0"
    return cases


def _run_and_check(target, cases, tmp_path, opt):
    results = arm.run_on_target(target, cases, tmp_path, opt)
    failures = [
        arm.describe(case)
        for case, (status, guards, output) in zip(cases, results)
        if status != case.status or not guards or (status == 0 and not np.array_equal(output, case.expected.ravel()))
    ]
    assert not failures, f"{len(failures)} of {len(cases)} cases fail:\n" + "\n".join(failures[:10])


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O2", "-Os", "-O0"])
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m33"])
def test_shift_minus_one_and_zero_depthwise_match_golden(target, opt, tmp_path, monkeypatch):
    rng = np.random.default_rng({"-O2": 31, "-Os": 32, "-O0": 33}[opt] + (10 if target == "cortex-m33" else 0))
    _run_and_check(target, _int4_like_cases(rng, monkeypatch), tmp_path, opt)


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_shift_minus_one_rows_in_a_clang_build(tmp_path, monkeypatch):
    """The wide rows' assembly through clang's assembler (-munaligned-access, as
    tests/test_build_variants.py's clang-unaligned build: clang keeps a frame register)."""
    require_tools("clang", "ld.lld", install=toolchain.CLANG_APT_INSTALL)
    base = get_target("cortex-m4")
    clang = dataclasses.replace(base, compiler="clang", cflags=base.cflags + ("-munaligned-access",))
    _run_and_check(clang, _int4_like_cases(np.random.default_rng(51), monkeypatch), tmp_path, "-O2")

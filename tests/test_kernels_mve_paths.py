"""The Helium fast paths of the packed kernels under QEMU cortex-m55, with cases drawn so that each
path runs many times (tests/test_kernels_arm.py's random mix reaches some of them only rarely):

- depthwise 3x3 at stride 1 by blocks of five pixels (mve_pixel_fives_3x3 and _strict: groups of 4
  channels the 8-channel path leaves, tests/test_kernels_arm.py's octet test has that one), whole
  rows of them (mve_group_rows_fives: output widths that are multiples of 5) or followed by pixel
  pairs and one pixel;
- the convolution's blocks whose shifts are all negative (mve_blocks_4x2_*_strict), with two or
  more group pairs per block (the _quads loop, odd and even pair counts);
- the add's eight-element loop for a right output shift (mve_add_right_shift) and its tail;
- the convolution's fields read in place (mve_direct_4x2_*): 3x3 and 1xK windows whose rows are
  whole groups of 16 taps (C_in 16, 32, 48: odd and even groups per run) or 3x3 ones of 9 to 15
  taps per row (C_in 3, 4, 5: rows padded to 16 taps), 1x1 stride-1 layers of any C_in; C_out a
  multiple of 4, every shift negative; strides, dilations, padding, in place or apart.

Each output equals the golden kernel's byte for byte, with the guards around it intact.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest

from edgec.ops.conv import mve_routines
from edgec.ops.eltwise import ADD_S8_DESC
from edgec.ops.kernel_layout import MVE
from tests.device_support import needs_toolchain
from tests.test_kernels_arm import (
    _conv_case,
    _padded_image,
    add_case,
    conv_case,
    depthwise_case,
    desc_field,
    describe,
    int8_array,
    pointwise_case,
    run_on_target,
)

CASES = 60  # per path


def _fives_depthwise(case) -> bool:
    """A 3x3 undilated stride-1 layer at least five pixels wide with a full group of channels whose
    shifts are all <= 0 that the 4-channel path runs: past the layer's last whole octet, or in an
    octet with a channel that shifts left (the 8-channel path takes the others)."""
    f = partial(desc_field, case)
    channels, shifts = f("input_c"), case.arrays[4]

    def four_channel(first: int) -> bool:
        octet = first - first % 8
        return octet + 8 > channels or bool((shifts[octet : octet + 8] > 0).any())

    return (
        (f("kernel_h"), f("kernel_w")) == (3, 3)
        and (f("stride_h"), f("stride_w")) == (1, 1)
        and (f("dilation_h"), f("dilation_w")) == (1, 1)
        and f("output_w") >= 5
        and any((shifts[i : i + 4] <= 0).all() and four_channel(i) for i in range(0, channels - 3, 4))
    )


def _k(case) -> int:
    """KH * KW * C_in of a conv case."""
    return desc_field(case, "kernel_h") * desc_field(case, "kernel_w") * desc_field(case, "input_c")


def _quads_conv(case) -> bool:
    """At least one full block of 4 output channels, 4 groups of 16 taps or more (two group pairs)
    and every shift negative."""
    return desc_field(case, "output_c") >= 4 and _k(case) > 48 and bool((case.arrays[4] < 0).all())


def direct_conv_case(rng, isa: str):
    """A convolution mve_direct_4x2 reads in place: a 3x3 or 1xK window whose rows are whole groups
    of 16 taps, or a 1x1 stride-1 unpadded one of any C_in; C_out a multiple of 4."""
    while True:
        shape = int(rng.choice([0, 0, 0, 1, 2]))
        if shape == 0:  # rows of whole groups, or of 9 to 15 taps (padded to 16: mve_padded_runs)
            (kh, kw), c_in = (3, 3), int(rng.choice([3, 4, 5, 16, 32, 48]))
        elif shape == 1:
            kh, kw = 1, int(rng.choice([1, 2, 4]))
            c_in = 16 * int(rng.integers(1, 4)) // kw
        else:
            kh, kw, c_in = 1, 1, int(rng.integers(1, 40))
        stride = (1, 1) if shape == 2 else tuple(int(v) for v in rng.integers(1, 3, 2))
        dilation = (int(rng.integers(1, 3)), 1)
        pad, pad_end, (n, h, w), out_hw = _padded_image(rng, (kh, kw), stride, dilation)
        if shape == 2:
            pad, pad_end, out_hw = (0, 0), (0, 0), (h, w)
        if out_hw is not None and out_hw[1] >= (4 if shape == 0 else 2):
            break
    weights = int8_array(rng, (4 * int(rng.integers(1, 5)), kh, kw, c_in))
    return _conv_case(rng, isa, int8_array(rng, (n, h, w, c_in)), weights, stride, dilation, (*pad, *pad_end), out_hw)


def _strict_shifts(case) -> bool:
    """Every shift negative: the direct reads' output stage (others keep the copies)."""
    return bool((case.arrays[4] < 0).all())


def _right_shift_add(case) -> bool:
    """A right-shifting output stage over at least 8 elements (edgec_add_s8_desc's fields by name)."""
    field = dict(zip([f.name for f in ADD_S8_DESC.fields if not f.pointer], case.fields))
    return field["output_shift"] < 0 and field["size"] >= 8


def _draw(make, keep, count: int, rng) -> list:
    """`count` valid cases that `keep` accepts; a predicate that stops matching what `make` draws (a
    descriptor's fields reordered) fails here instead of looping forever."""
    cases = []
    for _ in range(1000 * count):
        case = make(rng, MVE)
        if case.status == 0 and keep(case):
            cases.append(case)
            if len(cases) == count:
                return cases
    raise AssertionError(f"{keep.__name__} accepted {len(cases)} of {1000 * count} drawn cases")


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O2", "-Os"])
def test_helium_fast_paths_match_golden(opt, tmp_path: Path):
    rng = np.random.default_rng(11 if opt == "-O2" else 12)
    depthwise = _draw(depthwise_case, _fives_depthwise, CASES, rng)
    rows = [c for c in depthwise if desc_field(c, "output_w") % 5 == 0]
    convs = _draw(
        lambda r, isa: conv_case(r, isa) if r.random() < 0.5 else pointwise_case(r, isa), _quads_conv, CASES, rng
    )
    adds = _draw(add_case, _right_shift_add, CASES, rng)
    direct = _draw(direct_conv_case, _strict_shifts, CASES, rng)
    assert rows and any(desc_field(c, "output_w") % 5 for c in depthwise)
    assert any((_k(c) + 15) // 16 // 2 % 2 for c in convs) and any((_k(c) + 15) // 16 // 2 % 2 == 0 for c in convs)
    cases = depthwise + convs + adds + direct
    results = run_on_target("cortex-m55", cases, tmp_path, opt)
    failures = [
        f"status {status}, guards {guards}, {int(np.count_nonzero(out != c.expected.ravel()))} bytes "
        f"differ: {describe(c)}"
        for c, (status, guards, out) in zip(cases, results)
        if status != c.status or not guards or not np.array_equal(out, c.expected.ravel())
    ]
    assert not failures, f"{len(failures)} of {len(cases)} cases fail:\n" + "\n".join(failures[:10])


def _desc(kh, kw, c_in, c_out, stride=1, hw=8, out_hw=None, shift=-3):
    """The fields mve_routines reads of an edgec_conv_desc (batch 1, square, unpadded)."""
    out = out_hw or (hw - kh) // stride + 1
    return dict(
        batches=1, input_h=hw, input_w=hw, input_c=c_in, output_h=out, output_w=out, output_c=c_out,
        kernel_h=kh, kernel_w=kw, stride_h=stride, stride_w=stride, pad_top=0, pad_left=0, dilation_w=1,
        shift=np.full(c_out, shift),
    )  # fmt: skip


@pytest.mark.parametrize(
    "desc, blocks, direct",
    [
        # a 1x1 stride-1 layer over 64 channels (DS-CNN's pointwise): 4 groups, pixels copied in pairs
        (_desc(1, 1, 64, 64), "even_strict_quads", "even_quads"),
        # an RGB stem: 3x3 rows of 9 taps padded to 16, one group per run
        (_desc(3, 3, 3, 8, stride=2), "odd_strict", "single_runs3"),
        # a 3x3 window over 16 channels: 3 groups per run, 9 per block
        (_desc(3, 3, 16, 16), "odd_strict_quads", "triple_runs3"),
        (_desc(3, 3, 32, 16), "even_strict_quads", "even_runs3_quads"),  # 6 groups per run
        (_desc(3, 2, 16, 16), "even_strict_quads", "even_runs3"),  # 2 groups per run
        (_desc(1, 2, 40, 8), "odd_strict_quads", "odd"),  # one run of 5 groups
        (_desc(1, 3, 16, 8), "odd_strict", "odd"),  # one run of 3 groups
        (_desc(3, 3, 16, 16, shift=0), "odd_right", None),  # the direct reads need every shift < 0
        (_desc(3, 3, 16, 16, shift=2), "odd", None),
        (_desc(3, 3, 16, 6), "odd_strict_quads", None),  # C_out not a multiple of 4
        (_desc(1, 1, 16, 2), None, None),  # below one block of 4 channels: the C form only
    ],
)
def test_mve_routines_name_the_variant_of_the_layer(desc, blocks, direct):
    """edgec.ops.conv.mve_routines names the routines edgec_conv_s8_mve_with needs (the C returns
    EDGEC_ARG_ERROR for a layer whose routine is not named: checked on QEMU by the models'
    tests on cortex-m55)."""
    named = mve_routines(desc)
    assert named == (
        blocks and f"edgec_conv_mve_blocks_{blocks}",
        direct and f"edgec_conv_mve_direct_{direct}",
    )

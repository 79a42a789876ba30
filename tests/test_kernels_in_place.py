"""The in-place kernels on real overlapping layouts: edgec_depthwise_conv_s8_in_place,
edgec_conv_1x1_s8_in_place and the generic edgec_conv_s8 (which needs no variant), run with the
output over the input at the offsets the planner's hooks (DepthwiseConv2d.in_place,
Conv2d.in_place) choose and at other valid ones, equal the golden kernels byte for byte and write
nothing outside the two tensors and their scratch. (The DSP and MVE paths get the same cases under
QEMU in test_kernels_arm.py.)
(The library is built with UBSan; the models' ASan/UBSan host runs use these kernels in place.)
"""

from __future__ import annotations

import ctypes as C

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgec.ir import ARENA_ALIGNMENT, Graph, Op, Tensor
from edgec.ops.conv import UNIT as CONV
from edgec.ops.conv import is_pointwise, pointwise_input_pixels, window_first_pixels
from edgec.ops.depthwise import UNIT as DEPTHWISE
from edgec.ops.depthwise import packed_depthwise_bias, packed_depthwise_filter
from edgec.ops.kernel_layout import MVE
from tests.kernel_lib import ptr
from tests.test_kernels_conv import (
    EXTREME_CASES,
    SETTINGS,
    Case,
    _bind,
    _data_mode,
    _geometry,
    _int8,
    _qparams,
    _small_conv_case,
    case_desc,
    conv_cases,
    extreme_case,
    pointwise_cases,
)

GUARD = 16
GUARD_BYTE = 0x5A


def _at(buffer: np.ndarray, offset: int):
    return C.cast(buffer.ctypes.data + offset, C.POINTER(C.c_int8))


def run_in_place(
    lib,
    name: str,
    case: Case,
    input_offset: int,
    scratch_bytes: int,
    packed: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[int, np.ndarray]:
    """Runs kernel `name` with its input starting `input_offset` bytes after its output, inside one
    guarded buffer; returns (status, output). Fails if any byte outside the two tensors, or past
    the scratch, changed. `packed`: the (filter, bias) arrays passed instead of case.w and
    case.bias (the filter dimensions stay case.w's)."""
    x = np.ascontiguousarray(case.x)
    out_shape = (x.shape[0], *case.out_hw, case.c_out)
    out_size = int(np.prod(out_shape))
    low, high = min(0, input_offset), max(out_size, input_offset + x.size)
    block = np.full(GUARD + high - low + GUARD, GUARD_BYTE, dtype=np.int8)
    output_at = GUARD - low
    input_at = output_at + input_offset
    block[input_at : input_at + x.size] = x.ravel()
    scratch = np.full(scratch_bytes + GUARD, GUARD_BYTE, dtype=np.int8)
    keep: list = []
    desc, desc_type = case_desc(case, keep, *(packed or ()))
    scratch_arg = [] if name == "edgec_conv_s8" else [ptr(scratch, C.c_int8)]  # the portable kernel needs none
    status = _bind(lib, name, desc_type, bool(scratch_arg))(
        C.byref(desc), _at(block, input_at), _at(block, output_at), *scratch_arg
    )
    untouched = np.ones(block.size, dtype=bool)
    untouched[output_at : output_at + out_size] = False
    untouched[input_at : input_at + x.size] = False
    assert (block[untouched] == GUARD_BYTE).all(), "kernel wrote outside its input and output"
    assert (scratch[scratch_bytes:] == GUARD_BYTE).all(), "kernel wrote past its scratch"
    return status, block[output_at : output_at + out_size].reshape(out_shape)


def _ir_op(kind: str, case: Case) -> tuple[Op, Graph]:
    """The IR op the planner would see for `case` (shapes and the attrs its in_place hook reads)."""
    graph = Graph(inputs=["x"], outputs=["y"])
    graph.add_tensor(Tensor("x", case.x.shape))
    graph.add_tensor(Tensor("y", (case.x.shape[0], *case.out_hw, case.c_out)))
    attrs = dict(
        weight=case.w,
        stride=case.stride,
        pad=(*case.pad, 0, 0),
        dilation=case.dilation,
        groups=case.groups,
        ch_mult=case.ch_mult,
    )
    op = Op("layer", kind, ["x"], ["y"], attrs)
    graph.ops = [op]
    return op, graph


@st.composite
def depthwise_cases(draw, max_hw=12, kernels=st.integers(1, 5), dilations=st.integers(1, 3)):
    """ch_mult 1 (the in-place form's case): any geometry, batch 1 or 2."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    (h, w), (kh, kw), stride, pad, dilation, out_hw = draw(_geometry(max_hw, kernels, dilations))
    c = draw(st.integers(1, 16))
    x = _int8(rng, (draw(st.integers(1, 2)), h, w, c), draw(_data_mode))
    wt = _int8(rng, (1, kh, kw, c), draw(_data_mode))
    return Case(
        x=x,
        w=wt,
        stride=stride,
        pad=pad,
        dilation=dilation,
        out_hw=out_hw,
        is_depthwise=True,
        **draw(_qparams(rng, c, kh * kw)),
    )


@settings(max_examples=300, **SETTINGS)
@given(case=depthwise_cases(), data=st.data())
def test_depthwise_in_place_equals_golden(kernel_lib, case, data):
    op, graph = _ir_op("depthwise_conv2d", case)
    [planned] = DEPTHWISE.in_place(op, graph, None)
    c = case.x.shape[3]
    assert planned.input_offset % c == 0 and planned.input_offset % ARENA_ALIGNMENT == 0
    out_size = case.x.shape[0] * case.out_hw[0] * case.out_hw[1] * c
    # The planner's offset, head and tail alignment, any other multiple of C, and no overlap.
    offset = data.draw(
        st.sampled_from(
            [
                planned.input_offset,
                0,
                out_size - case.x.size,
                -case.x.size,
                out_size,
                c * data.draw(st.integers(-case.x.size // c, out_size // c)),
            ]
        )
    )
    status, out = run_in_place(kernel_lib, "edgec_depthwise_conv_s8_in_place", case, offset, planned.scratch_bytes)
    assert status == 0
    np.testing.assert_array_equal(out, case.golden())


@settings(max_examples=300, **SETTINGS)
@given(case=st.one_of(depthwise_cases(), depthwise_cases(kernels=st.just(3), dilations=st.just(1))), data=st.data())
def test_depthwise_packed_equals_golden(kernel_lib, case, data):
    """edgec_depthwise_conv_s8_packed apart from its input and over it (unstaged), and _in_place
    (staged, at the offsets of the test above): on the host their portable path, which shares the row
    cache, its slots and the 3x3 phases with the DSP and Helium paths (test_kernels_arm.py runs those). Half the cases
    are 3x3 undilated windows (where the image allows), the unrolled rows' case."""
    op, graph = _ir_op("depthwise_conv2d", case)
    op.attrs["isa"] = MVE  # the host's cache entries are Helium's: 4 int8
    unstaged, staged = DEPTHWISE.in_place(op, graph, None)
    c = case.x.shape[3]
    out_size = case.x.shape[0] * case.out_hw[0] * case.out_hw[1] * c
    packed = (packed_depthwise_filter(case.w), packed_depthwise_bias(case.bias, case.w, case.input_zp))
    if data.draw(st.booleans()):
        # Apart, at the planner's unstaged offset, and at the lowest multiple of C the contract allows.
        tightest = DEPTHWISE._unstaged(op, graph.tensors["x"], graph.tensors["y"], c, 0).input_offset
        offset = data.draw(st.sampled_from([-case.x.size, unstaged.input_offset, tightest]))
        status, out = run_in_place(
            kernel_lib, "edgec_depthwise_conv_s8_packed", case, offset, unstaged.scratch_bytes, packed
        )
    else:
        offset = data.draw(st.sampled_from([staged.input_offset, 0, out_size - case.x.size, -case.x.size]))
        status, out = run_in_place(
            kernel_lib, "edgec_depthwise_conv_s8_packed_in_place", case, offset, staged.scratch_bytes, packed
        )
    assert status == 0
    np.testing.assert_array_equal(out, case.golden())


def _lowest_safe_offset(case: Case) -> int:
    """The smallest input offset at which storing output pixel q never clobbers a pixel still to be read."""
    read = pointwise_input_pixels(case.x.shape, (case.x.shape[0], *case.out_hw, case.c_out), case.stride)
    later = np.arange(1, len(read))
    return int((later * case.c_out - read[1:] * case.x.shape[3]).max(initial=-case.x.size))


@settings(max_examples=300, **SETTINGS)
@given(case=pointwise_cases(), data=st.data())
def test_conv_1x1_in_place_equals_golden(kernel_lib, case, data):
    op, graph = _ir_op("conv2d", case)
    [planned] = CONV.in_place(op, graph, None)
    lowest = _lowest_safe_offset(case)
    assert planned.input_offset >= lowest and planned.input_offset % ARENA_ALIGNMENT == 0
    assert planned.scratch_bytes == case.c_out
    offset = data.draw(
        st.sampled_from([planned.input_offset, lowest, lowest + data.draw(st.integers(0, 64)), -case.x.size])
    )
    status, out = run_in_place(kernel_lib, "edgec_conv_1x1_s8_in_place", case, offset, case.c_out)
    assert status == 0
    np.testing.assert_array_equal(out, case.golden())


@settings(max_examples=300, **SETTINGS)
@given(case=conv_cases(), data=st.data())
def test_conv_over_its_input_equals_golden(kernel_lib, case, data):
    op, graph = _ir_op("conv2d", case)
    out_shape = (case.x.shape[0], *case.out_hw, case.c_out)
    first = window_first_pixels(case.x.shape, out_shape, case.stride, case.pad)
    lowest = int((np.arange(1, len(first) + 1) * case.c_out - first * case.x.shape[3]).max())
    offsets = [lowest, lowest + data.draw(st.integers(0, 64)), -case.x.size]
    if not is_pointwise(op.attrs):  # a 1x1 conv has its own in-place kernel
        [planned] = CONV.in_place(op, graph, None)
        assert planned.input_offset >= lowest and planned.input_offset % ARENA_ALIGNMENT == 0
        assert planned.scratch_bytes == 0  # the portable kernel's scratch: none
        offsets.append(planned.input_offset)
    status, out = run_in_place(kernel_lib, "edgec_conv_s8", case, data.draw(st.sampled_from(offsets)), 0)
    assert status == 0
    np.testing.assert_array_equal(out, case.golden())


def test_same_padded_3x3_conv_needs_only_a_row_and_two_pixels_more(kernel_lib):
    # 8x8x4 -> 8x8x4, 3x3, pad 1: pixel (y, x)'s field starts at pixel (y-1, x-1), so the output
    # may start W + 2 pixels (40 bytes) below the input and the pair spans 296 bytes, not 512.
    rng = np.random.default_rng(5)
    case = Case(
        x=rng.integers(-128, 128, (1, 8, 8, 4)).astype(np.int8),
        w=rng.integers(-128, 128, (4, 3, 3, 4)).astype(np.int8),
        bias=None,
        multiplier=np.full(4, 2**30),
        shift=np.full(4, -6),
        input_zp=1,
        output_zp=0,
        stride=(1, 1),
        pad=(1, 1),
        dilation=(1, 1),
        out_hw=(8, 8),
        act_min=-128,
        act_max=127,
    )
    op, graph = _ir_op("conv2d", case)
    [planned] = CONV.in_place(op, graph, None)
    assert planned.input_offset == (8 + 2) * 4
    status, out = run_in_place(kernel_lib, "edgec_conv_s8", case, planned.input_offset, 0)
    assert status == 0
    np.testing.assert_array_equal(out, case.golden())


def test_tail_aligned_1x1_expansion_writes_over_its_input(kernel_lib):
    # 4x4 pixels, 8 -> 16 channels, stride 1: tail-aligned, the input's first byte is the output's
    # byte 128, so pixels 8 and on of the output land on the input.
    rng = np.random.default_rng(3)
    case = Case(
        x=rng.integers(-128, 128, (1, 4, 4, 8)).astype(np.int8),
        w=rng.integers(-128, 128, (16, 1, 1, 8)).astype(np.int8),
        bias=None,
        multiplier=np.full(16, 2**30),
        shift=np.full(16, -8),
        input_zp=3,
        output_zp=-2,
        stride=(1, 1),
        pad=(0, 0),
        dilation=(1, 1),
        out_hw=(4, 4),
        act_min=-128,
        act_max=127,
    )
    op, graph = _ir_op("conv2d", case)
    [planned] = CONV.in_place(op, graph, None)
    assert planned.input_offset == 16 * (16 - 8) == 128  # P * (C_out - C_in)
    status, out = run_in_place(kernel_lib, "edgec_conv_1x1_s8_in_place", case, planned.input_offset, 16)
    assert status == 0
    np.testing.assert_array_equal(out, case.golden())


def test_in_place_kernels_need_scratch_and_depthwise_needs_ch_mult_1(kernel_lib):
    rng = np.random.default_rng(4)
    case = Case(
        x=rng.integers(-128, 128, (1, 3, 3, 4)).astype(np.int8),
        w=rng.integers(-128, 128, (1, 3, 3, 8)).astype(np.int8),
        bias=None,
        multiplier=np.full(8, 2**30),
        shift=np.zeros(8),
        input_zp=0,
        output_zp=0,
        stride=(1, 1),
        pad=(1, 1),
        dilation=(1, 1),
        out_hw=(3, 3),
        act_min=-128,
        act_max=127,
        ch_mult=2,
        is_depthwise=True,
    )
    status, _ = run_in_place(kernel_lib, "edgec_depthwise_conv_s8_in_place", case, -case.x.size, 9)
    assert status == -1
    x = np.zeros((1, 2, 2, 4), np.int8)
    out = np.zeros(16, np.int8)
    keep: list = []
    desc, desc_type = case_desc(_small_conv_case(), keep)
    fn = _bind(kernel_lib, "edgec_conv_1x1_s8_in_place", desc_type, scratch=True)
    assert fn(C.byref(desc), ptr(x, C.c_int8), ptr(out, C.c_int8), None) == -1


@pytest.mark.parametrize("zero_points,multiplier,shifts", EXTREME_CASES)
def test_depthwise_packed_extreme_values(kernel_lib, zero_points, multiplier, shifts):
    """The packed kernel's portable path on biases at the int32 limits (their folded form wraps, and
    so do the sums), zero points -128/127 in and out, multipliers 2^31 - 1 and 2^30 and shifts at
    their limits, with 3x3 rows unrolled (pad 1) and dilated: golden == C, apart and in place."""
    for dilation in ((1, 1), (2, 1)):
        case = extreme_case(zero_points, multiplier, shifts, kernel="edgec_depthwise_conv_s8")
        case.stride, case.dilation = (1, 1), dilation
        case.out_hw = (case.x.shape[1] + 2 - 2 * dilation[0], case.x.shape[2])
        op, graph = _ir_op("depthwise_conv2d", case)
        op.attrs["isa"] = MVE  # the host's cache entries are Helium's: 4 int8
        unstaged, staged = DEPTHWISE.in_place(op, graph, None)
        packed = (packed_depthwise_filter(case.w), packed_depthwise_bias(case.bias, case.w, case.input_zp))
        expected = case.golden()
        status, out = run_in_place(
            kernel_lib, "edgec_depthwise_conv_s8_packed", case, -case.x.size, unstaged.scratch_bytes, packed
        )
        assert status == 0
        np.testing.assert_array_equal(out, expected)
        status, out = run_in_place(
            kernel_lib,
            "edgec_depthwise_conv_s8_packed_in_place",
            case,
            staged.input_offset,
            staged.scratch_bytes,
            packed,
        )
        assert status == 0
        np.testing.assert_array_equal(out, expected)

"""Comparisons and torch.where / masked_fill (edgec.ops.select): golden == C, byte for byte.

1. models as people write them (a threshold against a live tensor or a scalar, masked_fill,
   broadcasting, a conv net's channels-last output thresholded): verify() on the host (golden ==
   host C, 0 LSB, and the layer check against the quantized program), one under QEMU Cortex-M4;
2. the condition table is the program's own float32 comparison (torch's dequantize and compare),
   and a scalar operand is quantized as the program's quantize_per_tensor does it, ties included;
3. edgec_select_s8 against the golden on random broadcast layouts (hypothesis), guard bytes, in
   place, argument checks;
4. a comparison used other than as a condition: one clear line naming the source line.
"""

from __future__ import annotations

import ctypes as C
import math
import subprocess

import numpy as np
import pytest
import torch
import torch.nn as nn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgec
from edgec.errors import EdgecError
from edgec.ops import select
from tests.kernel_lib import CFLAGS, RUNTIME, ctypes_struct, ptr, struct_from_desc

SelectDesc = ctypes_struct(select.SELECT_DESC)
EDGEC_OK, EDGEC_ARG_ERROR = 0, -1
GUARD, GUARD_BYTE = 16, 0x5A
P8 = C.POINTER(C.c_int8)
NUMPY_CMP = {
    "gt": np.greater,
    "ge": np.greater_equal,
    "lt": np.less,
    "le": np.less_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


# -- models --------------------------------------------------------------------------------------


class TensorThreshold(nn.Module):
    def forward(self, x, y):
        return torch.where(x > y, x, y * 0.5)


class ScalarThreshold(nn.Module):
    def forward(self, x):
        return torch.where(x > 0.5, x, 0.0)


class MaskedFill(nn.Module):
    def forward(self, x):
        return x.masked_fill(x < -0.2, 0.0)


class Broadcast(nn.Module):
    def forward(self, a, b):
        return torch.where(a >= b, a, b)


class ConvThreshold(nn.Module):
    """Conv2d outputs (stored channels last) thresholded against each other, against their
    per-channel mean (a live [1, 8, 1, 1] broadcast over the pixels), replaced by a per-channel
    constant and by a scalar, then read by another conv."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gate = nn.Conv2d(3, 8, 1)
        self.head = nn.Conv2d(8, 4, 1)
        self.register_buffer("floor", torch.linspace(-1.0, 0.4, 8).reshape(1, 8, 1, 1))

    def forward(self, x):
        y = self.conv(x)
        g = self.gate(x)
        z = torch.where(y <= g, y, g)  # elementwise, both channels last
        m = z.mean((2, 3), keepdim=True)
        z = torch.where(z > m, z, m)
        z = torch.where(z < 0.25, self.floor, z)
        return self.head(z.masked_fill(z > 1.0, 1.0))


class PerElementThresholds(nn.Module):
    """Comparisons with constant tensors: per element, broadcast along rows, per channel of a
    conv's channels-last output, thresholds beyond the input's range (never / always true)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.register_buffer("row", torch.linspace(-1, 1, 8))
        self.register_buffer("column", torch.tensor([[-0.3], [0.0], [9.0]]))
        self.register_buffer("channel", torch.tensor([-0.2, 0.1, -9.0, 0.3]).reshape(1, 4, 1, 1))

    def forward(self, x, image):
        y = torch.where(x > self.row, x, 0.0)
        z = x.masked_fill(x <= self.column, -0.5)
        w = torch.where(self.row >= x, x, 0.25)  # the constant first: x <= row
        c = self.conv(image)
        return y, z, w, torch.where(c < self.channel, c, 0.0)


class Combined(nn.Module):
    """&, |, ~ and logical_and / _or / _not of comparisons (with a tensor, a value, a constant
    tensor) and of each other."""

    def __init__(self):
        super().__init__()
        self.register_buffer("floor", torch.linspace(-0.5, 0.5, 6))

    def forward(self, x, y):
        inside = (x > -0.5) & ~(x > 0.5)
        either = torch.logical_or(x < y, torch.logical_not(y > self.floor))
        both = torch.logical_and(inside, either) | ~(x > 0.8) & (y == y)
        high = x > 0.3  # read by two combinations: one mask
        return (
            torch.where(both, x, y),
            x.masked_fill(~inside | (y < 0.0), 0.0),
            torch.where(((x < 0.5) & high) | ((y > 0.0) & high) | (x > 0.9) & ~inside, x, 0.0),
        )


class BoolMask(nn.Module):
    """A bool model input (a view of it, broadcast over the rows) as the condition, alone, negated,
    combined with a comparison and compared with 0 (attention code's `mask.unsqueeze(1) == 0`)."""

    def forward(self, x, mask):
        keep = mask.unsqueeze(1)
        return (
            x.masked_fill(keep, 0.0),
            torch.where(keep & (x > 0), x, 0.5),
            torch.where(~keep, x, -x),
            x.masked_fill(keep == 0, 0.25),
        )


class ConstantMask(nn.Module):
    """A constant bool tensor (a buffer) as the condition, alone, in masked_fill and combined with a
    comparison; and a view of a comparison ((x > 0).unsqueeze(1): the view moves to x)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("keep", torch.arange(6) % 3 == 0)

    def forward(self, x):
        return (
            torch.where(self.keep, x, 0.0),
            x.masked_fill(self.keep, -0.5),
            torch.where(self.keep & (x > 0), x, 0.25),
            torch.where((x.mean(1) > 0).unsqueeze(1), x, -x),
        )


CASES = {
    "tensor_threshold": (TensorThreshold, ((1, 8), (1, 8))),
    "scalar_threshold": (ScalarThreshold, ((1, 2, 16),)),
    "masked_fill": (MaskedFill, ((1, 24),)),
    "broadcast": (Broadcast, ((1, 4, 6), (1, 4, 1))),
    "conv": (ConvThreshold, ((1, 3, 6, 5),)),
    "per_element": (PerElementThresholds, ((1, 3, 8), (1, 3, 4, 5))),
    "combined": (Combined, ((1, 4, 6), (1, 4, 6))),
    "bool_mask": (BoolMask, ((1, 3, 6), ("bool", (1, 6)))),
    "constant_mask": (ConstantMask, ((1, 4, 6),)),
}


def _inputs(shapes, rng, count: int | None = None) -> list:
    """Samples per input (or one example, count None): floats, or bools for ("bool", shape)."""
    arrays = []
    for shape in shapes:
        if shape[0] == "bool":
            arrays.append(rng.random((count or 1, *shape[1])) > 0.5)
        else:
            arrays.append(rng.standard_normal((count or 1, *shape)).astype(np.float32))
    return arrays


def _compile(name: str, target: str = "host", decomposed: bool = False):
    """CASES[name] compiled; `decomposed`: given as its core-ATen ExportedProgram (a Python scalar
    operand is then aten.scalar_tensor)."""
    cls, shapes = CASES[name]
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    model = cls().eval()
    example = tuple(torch.from_numpy(x[0]) for x in _inputs(shapes, np.random.default_rng(0)))
    if decomposed:
        model, example = torch.export.export(model, example).run_decompositions(), None
    calibration = _inputs(shapes, rng, 16)
    if len(shapes) == 1:
        calibration = calibration[0]
    return edgec.compile(model, example, calibration=calibration, target=target, progress=False)


@pytest.mark.parametrize("name", sorted(CASES))
def test_select_models_verify_on_the_host(name):
    compiled = _compile(name)
    kinds = [op.kind for op in compiled.graph.ops]
    assert "select" in kinds and "compare" not in kinds
    result = compiled.verify()
    print(result)
    assert result.layers_checked == result.layers_total - kinds.count("reshape")  # a view computes nothing


@pytest.mark.parametrize(
    "name, decomposed",
    [("scalar_threshold", False), ("masked_fill", False), ("broadcast", False), ("masked_fill", True)],
)
def test_a_lone_select_equals_the_quantized_program_exactly(name, decomposed):
    """A model whose one layer is the select: the golden's int8 output equals the program's (its
    Q/DQ graph run by torch) on every element, inputs dense around the thresholds included; also
    from the core-ATen IR, whose scalar operand is aten.scalar_tensor."""
    compiled = _compile(name, decomposed=decomposed)
    assert compiled.verify(count=4).layers_checked == 1
    (layer,) = compiled.graph.ops
    assert layer.kind == "select"
    _, shapes = CASES[name]
    rng = np.random.default_rng(2)
    grid = np.concatenate([np.linspace(-0.6, 0.6, 241), [0.5, -0.2, 0.5 + 1e-7, -0.2 - 1e-7]])
    samples = [rng.choice(grid, size=(64, *shape)).astype(np.float32) for shape in shapes]
    out = compiled.graph.tensors[compiled.graph.outputs[0]]
    program = compiled.compiled.quantized_module
    for k in range(64):
        inputs = [torch.from_numpy(x[k]) for x in samples]
        expected = np.rint(program(*inputs)[0].detach().numpy() / out.scale) + out.zero_point
        got = np.rint(compiled.run(*[x[k] for x in samples]) / out.scale) + out.zero_point
        np.testing.assert_array_equal(got.reshape(expected.shape), expected)


@pytest.mark.parametrize("name, exact", [("per_element", 3), ("combined", 3), ("bool_mask", 4), ("constant_mask", 3)])
def test_conditions_equal_the_quantized_program_exactly(name, exact):
    """Constant-tensor thresholds, &, |, ~ and a bool input: the golden's int8 outputs (the first
    `exact`: those whose selects read the model inputs, not a conv's rounding) equal the program's
    (its Q/DQ graph run by torch) on every element, inputs dense around the thresholds (the layer
    check alone would let a mask byte 0 / 1 off pass: its step is 1)."""
    compiled = _compile(name)
    if name == "bool_mask":  # ~mask is read the other way round, no mask of its own
        assert [op.kind for op in compiled.graph.ops].count("select") == 5
    _, shapes = CASES[name]
    rng = np.random.default_rng(2)
    grid = np.concatenate([np.linspace(-0.6, 0.6, 241), [0.5, -0.5, 0.8, 0.0, 0.1, -0.3]])
    samples = [
        x if x.dtype == bool else rng.choice(grid, size=x.shape).astype(np.float32) for x in _inputs(shapes, rng, 48)
    ]
    graph, program = compiled.graph, compiled.compiled.quantized_module
    for k in range(48):
        expected = program(*[torch.from_numpy(x[k]) for x in samples])
        got = compiled.run(*[x[k] for x in samples])
        for name_out, e, g in list(zip(graph.outputs, expected, got))[:exact]:
            out = graph.tensors[name_out]
            q = lambda v, out=out: np.rint(np.asarray(v, np.float64) / out.scale) + out.zero_point  # noqa: E731
            np.testing.assert_array_equal(q(g).reshape(e.shape), q(e.detach().numpy()))


@pytest.mark.parametrize("cmp", sorted(select.CMP_CODES))
def test_per_element_thresholds_are_the_programs_float32_comparison(cmp):
    """(q CMP' k_i) ? a_i : b_i against torch's dequantize and compare of every int8 q with every
    threshold t_i: on the dequantized grid, next to it, and beyond the range (never, always)."""
    rng = np.random.default_rng(7)
    q = torch.arange(-128, 128, dtype=torch.int8)
    for _ in range(30):
        scale, zero_point = float(rng.uniform(1e-4, 0.2)), int(rng.integers(-128, 128))
        dq = torch.ops.quantized_decomposed.dequantize_per_tensor(q, scale, zero_point, -128, 127, torch.int8)
        on_grid = dq[rng.integers(0, 256, size=6)].numpy().astype(np.float64)
        t = np.concatenate([on_grid, on_grid + 1e-9, on_grid - 1e-9, [1e3, -1e3, 0.1]]).astype(np.float32)
        raw, k, a, b = select.per_element_thresholds(cmp, t, scale, zero_point)
        got = np.where(NUMPY_CMP[raw](q.numpy()[None, :], k[:, None]), a[:, None], b[:, None])
        expected = getattr(torch, cmp)(dq[None, :], torch.from_numpy(t)[:, None]).numpy()
        np.testing.assert_array_equal(got, expected.astype(np.int8))


def test_header_says_what_the_caller_passes_for_a_bool_mask(tmp_path):
    from edgec.pipeline import emit

    compiled = _compile("bool_mask")
    emit(compiled.compiled, tmp_path / "mask", "mask")
    header = (tmp_path / "mask" / "mask.h").read_text()
    assert "/* input 1: mask, int8" in header
    assert " * a bool mask (torch.bool): one byte per element, 0 false, 1 true (any nonzero reads as true) */" in header


@pytest.mark.parametrize("name", ["conv", "combined", "per_element", "bool_mask"])
def test_select_verifies_under_qemu_cortex_m4(name):
    compiled = _compile(name, target="cortex-m4")
    result = compiled.verify(count=4)
    print(result)
    assert result.layers_checked == result.layers_total - [op.kind for op in compiled.graph.ops].count("reshape")


class CompareAsOutput(nn.Module):
    def forward(self, x):
        return (x > 0.1).float() + x


class CompareSummed(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, 0.0) + (x > 0.3)


class CombinedSummed(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, 0.0) + ((x > 0.3) & (x < 0.6))


@pytest.mark.parametrize(
    "cls, target, problem",
    [
        (CompareAsOutput, "aten.gt.Scalar", "used other than as the condition of torch.where or masked_fill"),
        (CompareSummed, "aten.gt.Scalar", "used other than as the condition of torch.where or masked_fill"),
        (CombinedSummed, "aten.__and__.Tensor", "used other than as the condition of torch.where or masked_fill"),
    ],
)
def test_unsupported_comparisons_are_refused_in_one_line(cls, target, problem):
    with pytest.raises(EdgecError) as error:
        edgec.compile(cls().eval(), torch.randn(1, 8), target="host", progress=False)
    message = str(error.value)
    lines = [line for line in message.splitlines() if target in line]
    assert len(lines) == 1, message
    assert problem in lines[0]
    assert "test_select.py" in lines[0]  # the user's source line


# -- the program's arithmetic --------------------------------------------------------------------


@pytest.mark.parametrize("cmp", sorted(select.CMP_CODES))
def test_condition_table_is_the_programs_float32_comparison(cmp):
    rng = np.random.default_rng(3)
    q = torch.arange(-128, 128, dtype=torch.int8)
    for _ in range(40):
        scale, zero_point = float(rng.uniform(1e-4, 0.2)), int(rng.integers(-128, 128))
        dq = torch.ops.quantized_decomposed.dequantize_per_tensor(q, scale, zero_point, -128, 127, torch.int8)
        # thresholds on (and next to) the dequantized grid, where float32 vs float64 would differ
        k = int(rng.integers(-128, 128))
        for threshold in (float(dq[k + 128]), float(dq[k + 128]) + 1e-9, (k - zero_point) * scale, 0.1):
            expected = getattr(torch, cmp)(dq, threshold).numpy().astype(np.int8)
            np.testing.assert_array_equal(select.condition_table(cmp, threshold, scale, zero_point), expected)


def test_scalar_operand_is_quantized_as_the_programs_quantize():
    rng = np.random.default_rng(4)
    for _ in range(200):
        scale, zero_point = float(rng.uniform(1e-3, 0.1)), int(rng.integers(-20, 20))
        k = int(rng.integers(-140, 140))
        for value in ((k + 0.5) * scale, k * scale, float(rng.standard_normal() * 3)):  # ties too
            expected = torch.ops.quantized_decomposed.quantize_per_tensor(
                torch.tensor([value], dtype=torch.float32), scale, zero_point, -128, 127, torch.int8
            )
            assert select.quantize_scalar(value, scale, zero_point, "multiply") == int(expected[0])


# -- the C kernel --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    """edgec_select_s8 alone, built as the kernel tests build the runtime (UBSan, -Werror): the
    whole runtime takes a minute to build on a loaded machine."""
    path = tmp_path_factory.mktemp("select") / "libselect.so"
    source = RUNTIME / "src" / "eltwise" / "edgec_select_s8.c"
    subprocess.run(["cc", *CFLAGS, f"-I{RUNTIME / 'include'}", str(source), "-o", str(path)], check=True)
    library = C.CDLL(str(path))
    library.edgec_select_s8.argtypes = [C.POINTER(SelectDesc), P8, P8, P8, P8, P8]
    library.edgec_select_s8.restype = C.c_int
    return library


def c_select(lib, desc: dict, operands, size: int, out=None) -> tuple[int, np.ndarray]:
    """(status, output) of edgec_select_s8 into a guarded buffer (or `out`, for in place)."""
    keep = []
    c_desc = struct_from_desc(SelectDesc, desc, keep)
    arrays = [None if x is None else np.ascontiguousarray(x, np.int8) for x in operands]
    if out is None:
        out = np.full(size + GUARD, GUARD_BYTE, dtype=np.int8)
    pointers = [None if x is None else ptr(x, C.c_int8) for x in arrays]
    status = lib.edgec_select_s8(C.byref(c_desc), *pointers, ptr(out, C.c_int8))
    assert (out[size:] == GUARD_BYTE).all(), "C kernel wrote past the end of its output"
    return status, out[:size]


@st.composite
def layouts(draw):
    rank = draw(st.integers(1, 6))
    out = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    shapes = []
    for _ in select.ROLES:
        cut = draw(st.integers(0, rank))
        shapes.append(tuple(d if draw(st.booleans()) else 1 for d in out[cut:]))
    return np.broadcast_shapes(*shapes), shapes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    layout=layouts(),
    cmp=st.sampled_from(sorted(select.CMP_CODES)),
    use_table=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_select_kernel_equals_golden(lib, layout, cmp, use_table, seed):
    out_shape, shapes = layout
    rng = np.random.default_rng(seed)
    # few distinct values, so that equal x1 and x2 (eq, ge, le) occur
    operands = [rng.integers(-3, 3, size=shape).astype(np.int8) * 40 for shape in shapes]
    table = rng.integers(0, 2, size=256).astype(np.int8) if use_table else None
    desc = select.select_desc(cmp, out_shape, dict(zip(select.ROLES, shapes)), table)
    expected = select.select_s8(*operands, desc)
    cond = table[operands[0].astype(np.int64) + 128] != 0 if use_table else NUMPY_CMP[cmp](operands[0], operands[1])
    np.testing.assert_array_equal(
        expected.reshape(out_shape), np.broadcast_to(np.where(cond, operands[2], operands[3]), out_shape)
    )
    if use_table:
        operands[1] = None  # x2 is not read with a table
    status, got = c_select(lib, desc, operands, math.prod(out_shape))
    assert status == EDGEC_OK
    np.testing.assert_array_equal(got, expected.reshape(-1))


def test_select_kernel_in_place_over_each_operand(lib):
    rng = np.random.default_rng(6)
    shape = (3, 5, 7)
    for role in range(4):
        operands = [rng.integers(-128, 128, size=shape).astype(np.int8) for _ in select.ROLES]
        desc = select.select_desc("ge", shape, dict.fromkeys(select.ROLES, shape), None)
        expected = select.select_s8(*operands, desc)
        buffer = np.concatenate([operands[role].reshape(-1), np.full(GUARD, GUARD_BYTE, np.int8)])
        operands[role] = buffer[: math.prod(shape)]  # the same bytes the kernel writes
        status, got = c_select(lib, desc, operands, math.prod(shape), out=buffer)
        assert status == EDGEC_OK
        np.testing.assert_array_equal(got, expected)


def test_select_kernel_rejects_bad_arguments(lib):
    x = np.zeros(4, np.int8)
    good = select.select_desc("gt", (4,), dict.fromkeys(select.ROLES, (4,)), None)
    bad = [
        {**good, "cmp": 6},
        {**good, "cmp": -1},
        {**good, "num_dims": 0},
        {**good, "num_dims": select.SELECT_MAX_DIMS + 1},
        {**good, "dims": (0,) + good["dims"][1:]},
        {**good, "a_strides": (-1,) + good["a_strides"][1:]},
        {**good, "dims": (2**16, 2**16) + good["dims"][2:], "num_dims": 2},
    ]
    for desc in bad:
        assert c_select(lib, desc, [x, x, x, x], 4)[0] == EDGEC_ARG_ERROR
    assert c_select(lib, good, [x, None, x, x], 4)[0] == EDGEC_ARG_ERROR  # x2 NULL without a table
    assert c_select(lib, good, [None, x, x, x], 4)[0] == EDGEC_ARG_ERROR

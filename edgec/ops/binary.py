"""Elementwise binary ops with NumPy broadcasting (add, sub, mul, minimum, maximum, PReLU):
golden int8 kernels and their descriptors.

C kernels: runtime_c/src/eltwise/edgec_binary_s8.c (edgec_binary_s8, edgec_prelu_s8), its packed
variants edgec_binary_s8_dsp.c and edgec_binary_s8_mve.c (a model compiles only the one its layers
call) and their shared layout walk, edgec_binary_s8_plane.h. The same-shape add keeps its own
faster kernel, edgec_add_s8 (edgec.ops.eltwise); add and sub here take their constants from the
same add_params.

Broadcasting is described to the kernels by `broadcast_layout`: the output shape with every size-1
dimension dropped and adjacent dimensions merged wherever both inputs allow it, plus each input's
element stride per remaining dimension (0 where that input is broadcast). The common cases then
need one or two loop levels: same shape [N] (strides 1, 1), a scalar operand [N] (1, 0), a
per-channel operand over pixels, NHWC [1,H,W,C] * [1,1,1,C]: [H*W, C] with strides (C, 1) and
(0, 1). The small operand is read in place, never copied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import aten
from edgec.ir import InPlace, KernelChoice, Tensor, same_bytes, stored_shape, to_stored
from edgec.numerics import (
    INT8_MAX,
    INT8_MIN,
    activation_bounds,
    quantize_multiplier,
    requantize,
    round_half_away,
    saturate_int8,
    wrap_int32,
)
from edgec.ops.base import CCall, OpDef, descriptor, require_quantized
from edgec.ops.eltwise import add_params
from edgec.ops.kernel import Const, Field, Struct, ints
from edgec.ops.kernel_layout import kernel_isa, packed_choice
from edgec.ops.lut import (
    LUT_CHANNELS_DESC,
    LUT_DESC,
    LUT_SIZE,
    lut_channels_s8,
    lut_desc,
    lut_s8,
    round_half_away_exact,
)
from edgec.ops.qspec import ACTIVATION_QSPEC, activation_inputs, annotate, annotate_with_output

# Op codes of edgec_binary_desc.op (enum edgec_binary_op in edgec_nn.h).
BINARY_OPS = {"add": 0, "sub": 1, "mul": 2, "minimum": 3, "maximum": 4}
BINARY_MAX_DIMS = 6  # EDGEC_BINARY_MAX_DIMS

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
BINARY_DIMS = Const("EDGEC_BINARY_MAX_DIMS", BINARY_MAX_DIMS)
BINARY_DESC = Struct(
    "edgec_binary_desc",
    (
        Field("op", doc="an edgec_binary_op"),
        Field("num_dims", doc="1..EDGEC_BINARY_MAX_DIMS"),
        Field("dims", doc="output dims, each >= 1", count=BINARY_DIMS),
        Field("strides1", doc="input1 element strides, >= 0", count=BINARY_DIMS),
        Field("strides2", doc="input2 element strides, >= 0", count=BINARY_DIMS),
        Field("input1_offset", doc="-zero_point of input 1, in [-127, 128]"),
        Field("input1_multiplier", doc="add/sub; all multipliers >= 0"),
        *ints("input1_shift"),
        Field("input2_offset", doc="-zero_point of input 2, in [-127, 128]"),
        Field("input2_multiplier", doc="add/sub"),
        *ints("input2_shift"),
        Field("left_shift", doc="add/sub: 20; 0..23"),
        Field("output_offset", doc="output zero point, in [-128, 127]"),
        *ints("output_multiplier"),
        Field("output_shift", doc="shifts: -31..31, positive to the left"),
        *ints("act_min act_max"),
    ),
)
PRELU_LOOKUP = "edgec_prelu_s8_lookup"  # PReLU through tables made at compile time (Prelu.specialize)
# The same tables through the lookup kernels of edgec.ops.lut, where the layout is theirs: one slope
# per channel over channels-last pixels (edgec_lut_channels_s8), or one slope (edgec_lut_s8).
PRELU_CHANNELS, PRELU_ONE_TABLE = "edgec_lut_channels_s8", "edgec_lut_s8"
# The flash a PReLU's tables (256 B a slope) may take whatever its size, 64 slopes (a larger layer's
# only where its output outnumbers their entries); --opt size builds them at run time (edgec_prelu_s8,
# about 30 instructions an entry a call), no flash.
PRELU_TABLES_MAX_BYTES = 64 * LUT_SIZE

PRELU_DESC = Struct(
    "edgec_prelu_desc",
    (
        *ints("num_dims"),
        Field("dims", count=BINARY_DIMS),
        Field("input_strides", count=BINARY_DIMS),
        Field("alpha_strides", count=BINARY_DIMS),
        Field("input_offset", doc="-zero_point of the input, in [-127, 128]"),
        Field("alpha_offset", doc="-zero_point of alpha, in [-127, 128]"),
        Field("output_offset", doc="in [-128, 127]"),
        Field("identity_multiplier", doc="QuantizeMultiplier(s_in / s_out), >= 0"),
        *ints("identity_shift"),
        Field("alpha_multiplier", doc="QuantizeMultiplier(s_in * s_alpha / s_out), >= 0"),
        Field("alpha_shift", doc="shifts: -31..31"),
        Field("act_min", doc="-128 and 127 for TFLite's PRELU"),
        *ints("act_max"),
    ),
)
STRUCTS = (
    BINARY_DESC,
    PRELU_DESC,
)

# edgec_binary_desc's quantization fields, after op and the layout (edgec_add_s8_desc's names and
# order after its size, so add and sub fill them straight from add_params).
_QUANT_FIELDS = (
    "input1_offset",
    "input1_multiplier",
    "input1_shift",
    "input2_offset",
    "input2_multiplier",
    "input2_shift",
    "left_shift",
    "output_offset",
    "output_multiplier",
    "output_shift",
    "act_min",
    "act_max",
)


def broadcast_layout(shape1, shape2) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(out_dims, strides1, strides2) of the NumPy broadcast of two contiguous tensors, with the
    fewest dimensions: output element (i_0, ..., i_k) reads input j at sum_d i_d * strides_j[d].

    Size-1 output dimensions are dropped; two adjacent dimensions merge when each input is either
    broadcast along both or has both (then its outer stride is the inner one times the inner
    size), which is the only way they can merge, so merging every such run is minimal. A
    single-element output is ((1,), (1,), (1,)).
    """
    shape1, shape2 = tuple(int(d) for d in shape1), tuple(int(d) for d in shape2)
    if any(d < 1 for d in shape1 + shape2):
        raise ValueError(f"broadcast_layout needs positive dimensions, got {shape1} and {shape2}")
    # np.broadcast_shapes raises ValueError when they do not broadcast
    dims, (strides1, strides2) = broadcast_layouts(np.broadcast_shapes(shape1, shape2), (shape1, shape2))
    return dims, strides1, strides2


def broadcast_layouts(out_shape, shapes) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """(dims, strides per operand) of reading each of `shapes` broadcast to `out_shape`: the rule
    of broadcast_layout for any number of operands (edgec_select_s8 reads four). A single-element
    output is ((1,), [(1,), ...]). ValueError when they do not broadcast to `out_shape`."""
    out_shape = tuple(int(d) for d in out_shape)
    rank = len(out_shape)
    if np.broadcast_shapes(out_shape, *shapes) != out_shape:
        raise ValueError(f"operands {[tuple(s) for s in shapes]} do not broadcast to {out_shape}")
    strides = []
    for shape in shapes:
        padded = (1,) * (rank - len(shape)) + tuple(int(d) for d in shape)
        contiguous = [int(np.prod(padded[d + 1 :], dtype=np.int64)) for d in range(rank)]
        strides.append([0 if size == 1 else step for size, step in zip(padded, contiguous)])
    dims, merged = [], [[] for _ in shapes]
    for d in range(rank):
        if out_shape[d] == 1:
            continue
        if dims and all((m[-1] == 0) == (s[d] == 0) for m, s in zip(merged, strides)):
            dims[-1] *= out_shape[d]
            for m, s in zip(merged, strides):
                m[-1] = s[d]  # the inner stride of the run
            continue
        dims.append(out_shape[d])
        for m, s in zip(merged, strides):
            m.append(s[d])
    if not dims:
        return (1,), [(1,)] * len(shapes)
    return tuple(dims), [tuple(m) for m in merged]


def _layout_fields(shape1, shape2, stride_names: tuple[str, str]) -> dict:
    """num_dims, dims and the two stride arrays, padded to BINARY_MAX_DIMS (dims with 1,
    strides with 0; the kernels read only the first num_dims)."""
    dims, strides1, strides2 = broadcast_layout(shape1, shape2)
    if len(dims) > BINARY_MAX_DIMS:
        raise ValueError(
            f"broadcasting {tuple(shape1)} with {tuple(shape2)} needs {len(dims)} loop levels, "
            f"more than {BINARY_MAX_DIMS}"
        )
    pad = BINARY_MAX_DIMS - len(dims)
    return {
        "num_dims": len(dims),
        "dims": dims + (1,) * pad,
        stride_names[0]: strides1 + (0,) * pad,
        stride_names[1]: strides2 + (0,) * pad,
    }


def binary_desc(
    op: str,
    shape1,
    shape2,
    q1: tuple[float, int],
    q2: tuple[float, int],
    q_out: tuple[float, int],
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
) -> dict:
    """Fields of the C struct edgec_binary_desc (same names, same order) for y = op(x1, x2) with
    NumPy broadcasting; q1, q2, q_out are (scale, zero_point). Tuple values are the C arrays.

    add, sub: add_params' constants (TFLite's int8 ADD/SUB: left_shift 20, inputs rescaled by
    s_i / (2 max(s1, s2)), the sum or difference by 2 max(s1, s2) / (2^20 s_out)).
    mul: output multiplier QuantizeMultiplier(s1 * s2 / s_out) (a left shift when >= 1), the
    rescale fields 0. minimum, maximum: compare the raw int8 values (TFLite's MAXIMUM/MINIMUM),
    which is only right when all three tensors share scale and zero point: else ValueError.
    """
    if op not in BINARY_OPS:
        raise ValueError(f"unknown binary op {op!r}; expected one of {sorted(BINARY_OPS)}")
    (s1, zp1), (s2, zp2), (s_out, zp_out) = q1, q2, q_out
    desc = {"op": BINARY_OPS[op], **_layout_fields(shape1, shape2, ("strides1", "strides2"))}
    if op in ("add", "sub"):
        quant = add_params(s1, zp1, s2, zp2, s_out, zp_out, act_min, act_max)
    elif op == "mul":
        multiplier, shift = quantize_multiplier(float(s1) * float(s2) / float(s_out))
        quant = dict.fromkeys(_QUANT_FIELDS, 0)
        quant.update(
            input1_offset=-int(zp1),
            input2_offset=-int(zp2),
            output_offset=int(zp_out),
            output_multiplier=multiplier,
            output_shift=shift,
        )
    else:
        if not (float(s1), int(zp1)) == (float(s2), int(zp2)) == (float(s_out), int(zp_out)):
            raise ValueError(
                f"{op} compares raw int8 values: its inputs and output need the same scale and "
                f"zero point, got {q1}, {q2} and {q_out}"
            )
        quant = dict.fromkeys(_QUANT_FIELDS, 0)
    quant["act_min"], quant["act_max"] = int(act_min), int(act_max)
    return {**desc, **{name: quant[name] for name in _QUANT_FIELDS}}


def prelu_desc(
    input_shape,
    alpha_shape,
    q_in: tuple[float, int],
    q_alpha: tuple[float, int],
    q_out: tuple[float, int],
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
) -> dict:
    """Fields of the C struct edgec_prelu_desc (same names, same order) for y = x if x >= 0 else
    alpha * x, alpha broadcast against x (NHWC per channel: alpha [C] over [1,H,W,C]; or one
    alpha). TFLite's int8 PRELU (CalculatePreluParams): identity multiplier
    QuantizeMultiplier(s_in / s_out), alpha multiplier QuantizeMultiplier(s_in * s_alpha / s_out).
    act_min/act_max: the int8 range unless an activation is fused.
    """
    (s_in, zp_in), (s_alpha, zp_alpha), (s_out, zp_out) = q_in, q_alpha, q_out
    identity_multiplier, identity_shift = quantize_multiplier(float(s_in) / float(s_out))
    alpha_multiplier, alpha_shift = quantize_multiplier(float(s_in) * float(s_alpha) / float(s_out))
    return {
        **_layout_fields(input_shape, alpha_shape, ("input_strides", "alpha_strides")),
        "input_offset": -int(zp_in),
        "alpha_offset": -int(zp_alpha),
        "output_offset": int(zp_out),
        "identity_multiplier": identity_multiplier,
        "identity_shift": identity_shift,
        "alpha_multiplier": alpha_multiplier,
        "alpha_shift": alpha_shift,
        "act_min": int(act_min),
        "act_max": int(act_max),
    }


def _gathered(x1: np.ndarray, x2: np.ndarray, desc: dict, stride_names: tuple[str, str]):
    """The two inputs read element by element through the descriptor's layout, as the C kernel
    reads them (flat int64 arrays of the output's size), and the output shape."""
    for x in (x1, x2):
        if np.asarray(x).dtype != np.int8:
            raise TypeError(f"binary kernels expect int8 inputs, got {np.asarray(x).dtype}")
    out_shape = np.broadcast_shapes(np.shape(x1), np.shape(x2))
    dims = desc["dims"][: desc["num_dims"]]
    if int(np.prod(dims, dtype=np.int64)) != int(np.prod(out_shape, dtype=np.int64)):
        raise ValueError(f"descriptor dims {dims} do not cover the broadcast shape {out_shape}")
    flat = []
    for x, name in zip((x1, x2), stride_names):
        index = np.zeros((), dtype=np.int64)
        for size, stride in zip(dims, desc[name][: desc["num_dims"]]):
            index = index[..., None] + np.arange(size, dtype=np.int64) * stride
        flat.append(np.ascontiguousarray(x).reshape(-1).astype(np.int64)[index.reshape(-1)])
    return flat[0], flat[1], out_shape


def rescale_for_add(x: np.ndarray, offset: int, multiplier: int, shift: int, left_shift: int) -> np.ndarray:
    """An add/sub operand on the common grid: requantize((x + offset) * 2^left_shift, m, shift)."""
    return requantize((np.asarray(x, dtype=np.int64) + offset) << left_shift, multiplier, shift)


def binary_s8(x1, x2, desc: dict) -> np.ndarray:
    """Golden edgec_binary_s8: y = op(x1, x2) broadcast to np.broadcast_shapes(x1.shape, x2.shape),
    the inputs read through desc's layout (binary_desc). With p the fields of desc:
      add/sub: a = requantize((x1 + input1_offset) << left_shift, input1_multiplier, input1_shift),
               b likewise; r = requantize(a +/- b wrapped to int32, output_multiplier, output_shift)
      mul:     r = requantize((x1 + input1_offset) * (x2 + input2_offset), output_multiplier,
               output_shift)
      then y = clamp(r + output_offset, act_min, act_max);
      minimum/maximum: y = clamp(min/max(x1, x2), act_min, act_max) on the raw values.
    requantize is arm_nn_requantize (double rounding), as in TFLite's reference int8 ADD, SUB
    (reference_integer_ops::Add, reference_ops::Sub) and MUL (reference_integer_ops::Mul).
    """
    a, b, out_shape = _gathered(x1, x2, desc, ("strides1", "strides2"))
    p = desc
    op = p["op"]
    if op in (BINARY_OPS["add"], BINARY_OPS["sub"]):
        scaled1 = rescale_for_add(a, p["input1_offset"], p["input1_multiplier"], p["input1_shift"], p["left_shift"])
        scaled2 = rescale_for_add(b, p["input2_offset"], p["input2_multiplier"], p["input2_shift"], p["left_shift"])
        # The C works through uint32 (no signed overflow); with binary_desc's constants it never wraps.
        total = wrap_int32(scaled1 + scaled2 if op == BINARY_OPS["add"] else scaled1 - scaled2)
        y = requantize(total, p["output_multiplier"], p["output_shift"]) + p["output_offset"]
    elif op == BINARY_OPS["mul"]:
        product = (a + p["input1_offset"]) * (b + p["input2_offset"])
        y = requantize(product, p["output_multiplier"], p["output_shift"]) + p["output_offset"]
    elif op == BINARY_OPS["minimum"]:
        y = np.minimum(a, b)
    elif op == BINARY_OPS["maximum"]:
        y = np.maximum(a, b)
    else:
        raise ValueError(f"unknown binary op code {op}")
    return saturate_int8(y, p["act_min"], p["act_max"]).reshape(out_shape)


def prelu_s8(x, alpha, desc: dict) -> np.ndarray:
    """Golden edgec_prelu_s8 (TFLite reference_ops::BroadcastPrelu4DSlow on int8), alpha and x
    read through desc's layout (prelu_desc). With v = x + input_offset:
      v >= 0: r = requantize(v, identity_multiplier, identity_shift)
      v <  0: r = requantize(v * (alpha + alpha_offset), alpha_multiplier, alpha_shift)
      y = clamp(r + output_offset, act_min, act_max).
    """
    v, a, out_shape = _gathered(x, alpha, desc, ("input_strides", "alpha_strides"))
    v = v + desc["input_offset"]
    positive = requantize(v, desc["identity_multiplier"], desc["identity_shift"])
    negative = requantize(v * (a + desc["alpha_offset"]), desc["alpha_multiplier"], desc["alpha_shift"])
    y = np.where(v >= 0, positive, negative) + desc["output_offset"]
    return saturate_int8(y, desc["act_min"], desc["act_max"]).reshape(out_shape)


def prelu_tables(alpha, desc: dict) -> np.ndarray:
    """The tables of edgec_prelu_s8_lookup: int8 [alpha.size, 256], row k the outputs of prelu_s8
    (hence bit-exact by construction) for input bytes -128..127 under alpha element k."""
    flat = np.ascontiguousarray(alpha, dtype=np.int8).reshape(-1)
    grid = np.repeat(np.arange(-128, 128, dtype=np.int8)[:, None], flat.size, axis=1)
    each = {**desc, **_layout_fields(grid.shape, flat.shape, ("input_strides", "alpha_strides"))}
    return np.ascontiguousarray(prelu_s8(grid, flat, each).T)


def float_prelu_tables(slopes, q_in: tuple[float, int], q_out: tuple[float, int], act_min: int, act_max: int):
    """int8 [slopes.size, 256]: row k the program's float PReLU under slope k for input bytes
    -128..127 (x = s_in (q - zp_in); y = x if x >= 0 else slope * x in float64, rounded to the output
    step, halves away from zero: the rule of edgec's float tables, edgec.ops.lut)."""
    (s_in, zp_in), (s_out, zp_out) = q_in, q_out
    x = float(s_in) * (np.arange(-128, 128, dtype=np.float64) - int(zp_in))
    slope = np.asarray(slopes, dtype=np.float64).reshape(-1, 1)
    y = np.where(x >= 0, x, slope * x)
    q = round_half_away_exact(np.clip(y / float(s_out), -1024.0, 1024.0)) + int(zp_out)
    return np.ascontiguousarray(np.clip(q, act_min, act_max).astype(np.int8))


def lookup_tables(op) -> np.ndarray:
    """The tables edgec_prelu_s8_lookup reads for PReLU `op`: its float slopes' (float_prelu_tables,
    made at finalize) or those of its int8 slopes (prelu_tables)."""
    tables = op.attrs.get("tables")
    return prelu_tables(op.attrs["alpha"].values, op.attrs["desc"]) if tables is None else tables


def prelu_s8_lookup(x, tables: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_prelu_s8_lookup: element i's output is tables[alpha index of i, x_i + 128], the
    alpha index and x read through desc's layout (as prelu_s8 reads alpha and x)."""
    dims = desc["dims"][: desc["num_dims"]]
    flat_x = np.ascontiguousarray(x).reshape(-1).astype(np.int64)
    at_x = at_alpha = np.zeros((), dtype=np.int64)
    for size, sx, sa in zip(dims, desc["input_strides"], desc["alpha_strides"]):
        at_x = at_x[..., None] + np.arange(size, dtype=np.int64) * sx
        at_alpha = at_alpha[..., None] + np.arange(size, dtype=np.int64) * sa
    values = flat_x[at_x.reshape(-1)]
    return tables[at_alpha.reshape(-1), values + 128].reshape(np.shape(x))


def table_layout(desc: dict) -> tuple[int, int] | None:
    """(pixels, channels) where a PReLU's layout (prelu_desc) is one slope per channel over
    channels-last pixels, or one slope over every element (channels 1); else None."""
    dims = tuple(desc["dims"][: desc["num_dims"]])
    inputs = tuple(desc["input_strides"][: desc["num_dims"]])
    alphas = tuple(desc["alpha_strides"][: desc["num_dims"]])
    if len(dims) == 2 and inputs == (dims[1], 1) and alphas == (0, 1):
        return dims
    if len(dims) == 1 and inputs == (1,):
        return (1, dims[0]) if alphas == (1,) else (dims[0], 1)
    return None


# -- the op units ---------------------------------------------------------------------------------

# torch target -> (binary op, operands swapped, the constant operand is a divisor)
_TARGETS = {
    aten.add.Tensor: ("add", False, False),
    aten.add.Scalar: ("add", False, False),
    aten.sub.Tensor: ("sub", False, False),
    aten.sub.Scalar: ("sub", False, False),
    aten.rsub.Tensor: ("sub", True, False),
    aten.rsub.Scalar: ("sub", True, False),
    aten.mul.Tensor: ("mul", False, False),
    aten.mul.Scalar: ("mul", False, False),
    aten.div.Tensor: ("mul", False, True),
    aten.div.Scalar: ("mul", False, True),
    aten.minimum.default: ("minimum", False, False),
    aten.maximum.default: ("maximum", False, False),
}
_SHARED_QPARAMS = ("minimum", "maximum")  # they compare raw int8: inputs and output share qparams


@dataclass
class ConstantOperand:
    """A binary op's compile-time operand: int8 values (in PyTorch axis order until relayout, then
    stored like the output) with their qparams; a PReLU's float slopes are float64 (scale 1)."""

    index: int  # which operand (0 or 1)
    values: np.ndarray
    scale: float
    zero_point: int


def scalar_operand(value: float, op: str, like: Tensor | None) -> tuple[np.ndarray, float, int]:
    """A Python scalar as an int8 constant: exact at scale |value| / 127 (q = +-127), or at the
    other operand's qparams for minimum/maximum, which must share them."""
    if op in _SHARED_QPARAMS:
        q = np.clip(like.zero_point + round_half_away(value / like.scale), INT8_MIN, INT8_MAX)
        return np.array(q, dtype=np.int8), like.scale, like.zero_point
    if value == 0:
        return np.array(0, dtype=np.int8), 1.0, 0
    return np.array(127 if value > 0 else -127, dtype=np.int8), abs(value) / 127.0, 0


def _broadcast_stored(torch_shape, out: Tensor) -> tuple[int, ...]:
    """An operand's shape, padded to the output's rank, in the output's stored axis order."""
    padded = (1,) * (len(out.torch_shape) - len(torch_shape)) + tuple(torch_shape)
    return stored_shape(padded, out.perm)


class Binary(OpDef):
    """add, sub, mul, div by a constant, minimum, maximum with NumPy broadcasting, between two
    activations or an activation and a constant (a tensor or a Python scalar). The same-shape add
    of two activations runs edgec_add_s8 (kind 'add', edgec.ops.eltwise); everything else
    edgec_binary_s8, whose descriptor reads a broadcast operand in place."""

    kind = "binary"
    targets = frozenset(_TARGETS)
    runtime_sources = ("eltwise/edgec_binary_s8.c",)
    fuses_activation = True
    layout_follows_input = True
    limits = (
        "alpha 1; division by a constant only, without rounding_mode; broadcasting within "
        f"{BINARY_MAX_DIMS} loop levels"
    )

    def annotate(self, node) -> None:
        op = _TARGETS[node.target][0]
        if op not in _SHARED_QPARAMS:
            annotate_with_output(node, activation_inputs(node, 2))
            return
        first = node.args[0]
        inputs = {first: ACTIVATION_QSPEC}
        if isinstance(node.args[1], Node) and node.args[1] is not first:  # maximum(x, x): one input edge
            inputs[node.args[1]] = SharedQuantizationSpec((first, node))
        annotate(node, inputs, SharedQuantizationSpec((first, node)))

    def check(self, node) -> str | None:
        if node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1) != 1:
            return f"{node.target} with alpha other than 1"
        if _TARGETS[node.target][2] and isinstance(node.args[1], Node) and node.args[1].op != "get_attr":
            # in a float model normalize makes it a reciprocal; a quantized program's stays
            return "division by an activation in a quantized program (only by a constant)"
        if node.kwargs.get("rounding_mode") is not None:
            return f"{node.target} with rounding_mode"
        shapes = [tuple(a.meta["val"].shape) if isinstance(a, Node) and "val" in a.meta else () for a in node.args[:2]]
        try:
            if len(broadcast_layout(*shapes)[0]) > BINARY_MAX_DIMS:
                return (
                    f"{node.target} broadcasting {list(shapes[0])} with {list(shapes[1])} "
                    f"(more than {BINARY_MAX_DIMS} loop levels)"
                )
        except ValueError:
            return f"{node.target} of shapes {list(shapes[0])} and {list(shapes[1])} that do not broadcast"
        return None

    def lower(self, ctx, node) -> None:
        op, swapped, divisor = _TARGETS[node.target]
        args = [node.args[1], node.args[0]] if swapped else list(node.args[:2])
        tensors = [ctx.tensor(a) if ctx.is_tensor(a) else None for a in args]
        if all(t is None for t in tensors):
            raise EdgecError(f"{source_line(node)}: {op} of two constants (fold it in the model)")
        like = next(t for t in tensors if t is not None)
        constant = None
        for index, (arg, tensor) in enumerate(zip(args, tensors)):
            if tensor is None:
                constant = self._constant(ctx, node, index, arg, op, divisor, like)
        out = ctx.output(node)
        live = [t for t in tensors if t is not None]
        if op == "add" and constant is None and tensors[0].shape == tensors[1].shape == out.shape:
            ctx.add_op("add", node, live, [out], clamp=(None, None))
            return
        ctx.add_op(
            self.kind,
            node,
            live,
            [out],
            op=op,
            constant=constant,
            clamp=(None, None),
            torch_shapes=[tuple(like.shape) if t is None else None for t in tensors],
        )

    @staticmethod
    def _constant(ctx, node, index, arg, op, divisor, like) -> ConstantOperand:
        if isinstance(arg, Node):
            value = ctx.constant(arg)
            # An int16 constant (of an int16 layer) is refused with the layers that have no int16 kernel.
            if not value.quantized or value.value.dtype not in (np.int8, np.int16) or len(value.scales) != 1:
                raise EdgecError(
                    f"{source_line(node)}: the constant operand of {op} must be quantized per tensor to int8"
                )
            if divisor:
                raise EdgecError(
                    f"{source_line(node)}: division by a constant tensor is not supported; multiply by its inverse"
                )
            return ConstantOperand(index, value.value, float(value.scales[0]), int(value.zero_points[0]))
        scalar = float(arg)
        if divisor:
            if scalar == 0:
                raise EdgecError(f"{source_line(node)}: division by zero")
            scalar = 1.0 / scalar
        values, scale, zero_point = scalar_operand(scalar, op, like)
        return ConstantOperand(index, values, scale, zero_point)

    def relayout(self, op, graph) -> None:
        """Each operand's shape in the output's stored order; a constant re-laid to match."""
        out = graph.tensors[op.outputs[0]]
        constant = op.attrs["constant"]
        shapes, live = [], iter(op.inputs)
        for index in range(2):
            if constant is not None and constant.index == index:
                shape = _broadcast_stored(constant.values.shape, out)
                padded = constant.values.reshape(
                    (1,) * (len(out.torch_shape) - constant.values.ndim) + constant.values.shape
                )
                constant.values = to_stored(out, padded).reshape(shape)
            else:
                tensor = graph.tensors[next(live)]
                shape = _broadcast_stored(tensor.torch_shape, out)
                padded = (1,) * (len(out.torch_shape) - len(tensor.torch_shape)) + tensor.torch_shape
                if not same_bytes(tensor.torch_shape, tensor.perm, padded, out.perm):
                    raise EdgecError(
                        f"{op.source}: {op.attrs['op']} broadcasts an operand stored as "
                        f"{list(tensor.shape)} against {list(out.shape)}; edgec cannot read it in place"
                    )
            shapes.append(shape)
        op.attrs["shapes"] = shapes

    def _qparams(self, op, graph) -> list[tuple[float, int]]:
        constant, live, result = op.attrs["constant"], iter(op.inputs), []
        for index in range(2):
            if constant is not None and constant.index == index:
                result.append((constant.scale, constant.zero_point))
            else:
                tensor = graph.tensors[next(live)]
                result.append((tensor.scale, tensor.zero_point))
        return result

    def finalize(self, op, graph) -> None:
        require_quantized(op, graph, op.attrs["op"])
        out = graph.tensors[op.outputs[0]]
        bounds = activation_bounds(out.zero_point, out.scale, *op.attrs["clamp"])
        try:
            op.attrs["desc"] = binary_desc(
                op.attrs["op"], *op.attrs["shapes"], *self._qparams(op, graph), (out.scale, out.zero_point), *bounds
            )
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {exc}") from None

    def _operands(self, op, inputs):
        constant, live = op.attrs["constant"], iter(inputs)
        return [
            constant.values if constant is not None and constant.index == index else next(live) for index in range(2)
        ]

    def golden(self, op, graph, inputs):
        x1, x2 = (np.asarray(x).reshape(shape) for x, shape in zip(self._operands(op, inputs), op.attrs["shapes"]))
        return binary_s8(x1, x2, op.attrs["desc"]).reshape(graph.tensors[op.outputs[0]].shape)

    def specialize(self, op, graph, target) -> None:
        isa = op.attrs["isa"] = kernel_isa(target)
        op.kernel = packed_choice("edgec_binary_s8" + ("" if isa is None else f"_{isa}"), isa, target, op.attrs)

    def runtime_sources_of(self, op) -> tuple[str, ...]:
        """The file of the variant the layer calls (each holds the portable planes it falls back on)."""
        isa = op.attrs.get("isa")
        return ("eltwise/edgec_binary_s8.c",) if isa is None else (f"eltwise/edgec_binary_s8_{isa}.c",)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(BINARY_DESC, p, op.attrs["desc"])
        constant = op.attrs["constant"]
        pointers = []
        live = iter(op.inputs)
        for index in range(2):
            if constant is not None and constant.index == index:
                symbol = names.symbol(op, "constant")
                call.constants.append(("int8_t", symbol, constant.values.ravel()))
                pointers.append(symbol)
            else:
                pointers.append(names.ptr(next(live)))
        call.code = f"status |= {op.kernel.function}(&{p}, {pointers[0]}, {pointers[1]}, {names.ptr(op.outputs[0])});"
        return call

    def in_place(self, op, graph, target):
        """The kernels read element i of both inputs before writing element i: an input that is not
        broadcast may be overwritten."""
        out = graph.tensors[op.outputs[0]]
        return tuple(InPlace(i, 0) for i, name in enumerate(op.inputs) if graph.tensors[name].shape == out.shape)


class Prelu(OpDef):
    """nn.PReLU: per-channel (or one) slope, TFLite's int8 PRELU arithmetic, the slopes read in
    place per channel. A program whose slopes are float (litert-torch's PT2EQuantizer leaves them
    so; TFLite then runs the PReLU in float) or quantized per channel: the program's float PReLU as
    one table per slope (float_prelu_tables), run by edgec_prelu_s8_lookup."""

    kind, c_function = "prelu", "edgec_prelu_s8"
    targets = frozenset({aten.prelu.default, aten._prelu_kernel.default})
    runtime_sources = ("eltwise/edgec_binary_s8.c",)
    fuses_activation = True
    layout_follows_input = True

    def annotate(self, node) -> None:
        annotate_with_output(node, activation_inputs(node, 2))

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        alpha = ctx.constant(node.args[1])
        per_tensor = alpha.quantized and alpha.value.dtype == np.int8 and len(alpha.scales) == 1
        if per_tensor:
            slopes, scale, zero_point = alpha.value.reshape(-1), float(alpha.scales[0]), int(alpha.zero_points[0])
        elif not alpha.quantized or alpha.value.dtype == np.int8:
            slopes, scale, zero_point = _float_slopes(alpha), 1.0, 0
        else:
            raise EdgecError(f"{source_line(node)}: PReLU slopes must be float or quantized to int8")
        shape = [1] * len(x.shape)
        if slopes.size > 1:
            shape[1 if len(x.shape) > 1 else 0] = slopes.size
        ctx.add_op(
            self.kind,
            node,
            [x],
            [ctx.output(node)],
            clamp=(None, None),
            alpha=ConstantOperand(1, slopes.reshape(shape), scale, zero_point),
            float_slopes=not per_tensor,
        )

    def kernel_function(self, op) -> str:
        return "edgec_prelu_s8_lookup" if op.attrs["float_slopes"] else self.c_function

    def relayout(self, op, graph) -> None:
        out = graph.tensors[op.outputs[0]]
        alpha = op.attrs["alpha"]
        shape = _broadcast_stored(alpha.values.shape, out)
        alpha.values = to_stored(out, alpha.values).reshape(shape)

    def finalize(self, op, graph) -> None:
        x, out, alpha = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]], op.attrs["alpha"]
        bounds = activation_bounds(out.zero_point, out.scale, *op.attrs["clamp"])
        op.attrs["desc"] = prelu_desc(
            x.shape,
            alpha.values.shape,
            (x.scale, x.zero_point),
            (alpha.scale, alpha.zero_point),
            (out.scale, out.zero_point),
            *bounds,
        )
        if op.attrs["float_slopes"]:
            op.attrs["tables"] = float_prelu_tables(
                alpha.values, (x.scale, x.zero_point), (out.scale, out.zero_point), *bounds
            )

    def specialize(self, op, graph, target) -> None:
        """Tables made at compile time (256 B of flash per slope), always for float slopes (a
        program quantized by another tool: no integer kernel computes them); for int8 slopes, --opt
        not size, where they take at most PRELU_TABLES_MAX_BYTES or the output outnumbers their
        entries. Else edgec_prelu_s8, which builds them at run time (about 30 instructions an entry,
        on every call). The tables run through a lookup kernel of edgec.ops.lut where the layout is
        its (table_layout), else through edgec_prelu_s8_lookup."""
        table_bytes = LUT_SIZE * op.attrs["alpha"].values.size
        elements = graph.tensors[op.outputs[0]].elements
        if op.attrs["float_slopes"]:
            why = "float slopes: tables made at compile time"
        elif target.opt != "size" and (table_bytes <= PRELU_TABLES_MAX_BYTES or elements >= table_bytes):
            why = f"tables made at compile time: {table_bytes:,} B of flash (--opt {target.opt})"
        else:
            super().specialize(op, graph, target)
            return
        layout = table_layout(op.attrs["desc"])
        if layout is None:
            function = PRELU_LOOKUP
        else:
            function = PRELU_ONE_TABLE if layout[1] == 1 else PRELU_CHANNELS
        op.kernel = KernelChoice(function, "lookup", why)

    def runtime_sources_of(self, op) -> tuple[str, ...]:
        """The PReLU kernels' file (a band stage calls edgec_prelu_s8_lookup on any PReLU layer),
        and the lookup kernels' where the layer alone runs one."""
        if op.kernel is not None and op.kernel.function in (PRELU_CHANNELS, PRELU_ONE_TABLE):
            return (*self.runtime_sources, "activation/edgec_lut_s8.c")
        return self.runtime_sources

    def golden(self, op, graph, inputs):
        """The kernel's arithmetic: a lookup in the same tables the C reads, or TFLite's."""
        function = op.kernel.function if op.kernel is not None else None
        if function in (PRELU_CHANNELS, PRELU_ONE_TABLE):
            return self._table_golden(op, inputs[0])
        if op.attrs["float_slopes"] or function == PRELU_LOOKUP:
            return prelu_s8_lookup(inputs[0], lookup_tables(op), op.attrs["desc"])
        return prelu_s8(inputs[0], op.attrs["alpha"].values, op.attrs["desc"])

    @staticmethod
    def _lut_desc(op) -> tuple[Struct, dict]:
        """The descriptor (struct, fields) of the layer's edgec_lut_channels_s8 or edgec_lut_s8 call."""
        pixels, channels = table_layout(op.attrs["desc"])
        if op.kernel.function == PRELU_ONE_TABLE:
            return LUT_DESC, lut_desc(lookup_tables(op)[0], pixels)
        return LUT_CHANNELS_DESC, {"pixels": pixels, "channels": channels}

    def _table_golden(self, op, x):
        struct, desc = self._lut_desc(op)
        if struct is LUT_DESC:
            return lut_s8(x, desc)
        return lut_channels_s8(x, lookup_tables(op), desc)

    def emit(self, op, graph, names) -> CCall:
        if op.kernel.function in (PRELU_CHANNELS, PRELU_ONE_TABLE):
            p = names.symbol(op, "desc")
            struct, desc = self._lut_desc(op)
            call = descriptor(struct, p, desc)
            pointers = [names.ptr(op.inputs[0]), names.ptr(op.outputs[0])]
            if struct is LUT_CHANNELS_DESC:
                tables = names.symbol(op, "tables")
                call.constants.append(("int8_t", tables, lookup_tables(op).ravel()))
                pointers.insert(0, tables)
            call.code = f"status |= {op.kernel.function}(&{p}, {', '.join(pointers)});"
            return call
        if op.kernel.function == PRELU_LOOKUP:
            tables = names.symbol(op, "tables")
            call = self.emit_lookup(op, graph, names, tables)
            call.constants.append(("int8_t", tables, lookup_tables(op).ravel()))
            return call
        p = names.symbol(op, "desc")
        call = descriptor(PRELU_DESC, p, op.attrs["desc"])
        symbol = names.symbol(op, "alpha")
        call.constants.append(("int8_t", symbol, op.attrs["alpha"].values.ravel()))
        call.code = (
            f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {symbol}, {names.ptr(op.outputs[0])});"
        )
        return call

    def emit_lookup(self, op, graph, names, tables: str) -> CCall:
        """The call of edgec_prelu_s8_lookup on the `tables` constant (prelu_tables of the op's
        alpha): no set-up per call, for a band stage's calls on a few rows."""
        p = names.symbol(op, "desc")
        call = descriptor(PRELU_DESC, p, op.attrs["desc"])
        call.code = f"status |= {PRELU_LOOKUP}(&{p}, {tables}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call

    def in_place(self, op, graph, target):
        return (InPlace(0, 0),)


def _float_slopes(alpha) -> np.ndarray:
    """A PReLU's slopes as the program computes with them: float, or dequantized (per channel)."""
    value = np.asarray(alpha.value, dtype=np.float64).reshape(-1)
    if not alpha.quantized:
        return value
    return (value - np.asarray(alpha.zero_points, np.float64).reshape(-1)) * np.asarray(alpha.scales).reshape(-1)


UNITS = (Binary(), Prelu())

"""L2 normalisation along one axis (F.normalize), int8 in and out: TFLite's L2_NORMALIZATION.

C kernel: runtime_c/src/norm/edgec_l2_norm_s8.c (edgec_l2_norm_s8). The arithmetic is TFLite
Micro's reference_integer_ops::L2Normalization, bit for bit: per row of n int8 values q_i,

    d_i  = q_i - input_zero_point;   acc = sum_i d_i^2                     (int32)
    (m, s) = GetInvSqrtQuantizedMultiplierExp(acc, reverse_shift = -1)     (1 / sqrt(acc) as Q31 * 2^s)
    y_i  = clamp(MultiplyByQuantizedMultiplier(d_i, m, s + 7), -128, 127)

The output is fixed at scale 1/128, zero point 0 (TFLite's spec for the op; edgec's quantizer
annotates it so); a program that quantizes it otherwise gets a requantize to its qparams after.
GetInvSqrtQuantizedMultiplierExp normalises acc into [2^27, 2^29) by pairs of bits and runs five
Newton-Raphson steps of gemmlowp fixed point with 3 integer bits from x = 1 (inv_sqrt_multiplier
below, step by step); acc <= 1 (a zero row, or one step from it) gives (2^31 - 1, 0). eps is not
an argument of the integer kernel (TFLite's neither): it only guards a zero norm, which acc <= 1
covers; an eps that could change a non-zero row is refused.
"""

from __future__ import annotations

import numpy as np

from edgec.errors import EdgecError
from edgec.frontend.torch_ops import L2_NORMALIZES
from edgec.ir import Tensor
from edgec.numerics import INT32_MAX, INT32_MIN, requantize, saturate_int8
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.kernel import Struct, ints
from edgec.ops.qspec import activation_inputs, annotate, fixed_qspec
from edgec.ops.softmax import outer_axis_inner

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
L2_NORM_DESC = Struct("edgec_l2_norm_desc", ints("outer depth inner input_zero_point"))
STRUCTS = (L2_NORM_DESC,)

OUTPUT_SCALE, OUTPUT_ZERO_POINT = 1.0 / 128.0, 0
MAX_DEPTH = 32768  # EDGEC_L2_NORM_MAX_DEPTH: 255^2 per value keeps the sum of squares in int32
_OUTPUT_SHIFT = 7  # kOutputScale: the 1/128 output step folded into the multiplier's shift


def _srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 (C's truncating int64 division)."""
    if a == b == INT32_MIN:
        return INT32_MAX
    product = a * b
    nudged = product + ((1 << 30) if product >= 0 else 1 - (1 << 30))
    return abs(nudged) >> 31 if nudged >= 0 else -(abs(nudged) >> 31)


def _pot(x: int, exponent: int) -> int:
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> on int32."""
    if exponent > 0:
        threshold = (1 << (31 - exponent)) - 1
        return INT32_MAX if x > threshold else INT32_MIN if x < -threshold else x << exponent
    shift = -exponent
    mask = (1 << shift) - 1
    remainder = x & mask
    return (x >> shift) + (1 if remainder > (mask >> 1) + (1 if x < 0 else 0) else 0)


def inv_sqrt_multiplier(acc: int) -> tuple[int, int]:
    """GetInvSqrtQuantizedMultiplierExp(acc, kReverseShift = -1): (multiplier, left shift)."""
    if acc <= 1:
        return INT32_MAX, 0
    shift = 11
    while acc >= 1 << 29:
        acc //= 4
        shift += 1
    pairs = (32 - acc.bit_length() - 1) // 2 - 1  # CountLeadingZeros(acc) - 1, in pairs, minus one
    shift -= pairs
    acc <<= 2 * pairs
    half_input = _pot(acc >> 1, -1)  # F3 input / 2
    half_three = (1 << 28) + (1 << 27)  # F3 1.5
    x = 1 << 28  # F3 one
    for _ in range(5):
        x3 = _pot(_srdhm(_srdhm(x, x), x), 6)  # Rescale<3> of the F9 cube
        x = _pot(_srdhm(half_three, x) - _srdhm(half_input, x3), 3)  # Rescale<3> of an F6 value
    x = _srdhm(x, 1518500250)  # times sqrt(2) / 2 in F0
    if shift < 0:
        x <<= -shift
        shift = 0
    return x, -shift


def l2_norm_desc(shape, axis: int, input_zero_point: int) -> dict:
    """edgec_l2_norm_desc fields (declaration order): rows along `axis` of a contiguous `shape`."""
    outer, depth, inner = outer_axis_inner(shape, axis)
    return {"outer": outer, "depth": depth, "inner": inner, "input_zero_point": int(input_zero_point)}


def l2_norm_s8(x: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_l2_norm_s8: x viewed as [outer][depth][inner], each (outer, inner) row
    normalised (module docstring); returns x's shape at scale 1/128, zero point 0."""
    rows = np.asarray(x, dtype=np.int64).reshape(desc["outer"], desc["depth"], desc["inner"])
    d = rows - desc["input_zero_point"]
    out = np.empty_like(d)
    for o in range(desc["outer"]):
        for i in range(desc["inner"]):
            multiplier, shift = inv_sqrt_multiplier(int((d[o, :, i] ** 2).sum()))
            out[o, :, i] = requantize(d[o, :, i], multiplier, shift + _OUTPUT_SHIFT)
    return saturate_int8(out).reshape(np.shape(x))


# -- the op unit ------------------------------------------------------------------------------


class L2Norm(OpDef):
    kind, c_function = "l2_norm", "edgec_l2_norm_s8"
    targets = frozenset(L2_NORMALIZES)
    runtime_sources = ("norm/edgec_l2_norm_s8.c",)
    layout_follows_input = True
    limits = f"at most {MAX_DEPTH} values normalised together"

    def annotate(self, node) -> None:
        annotate(node, activation_inputs(node, 1), fixed_qspec(OUTPUT_SCALE, OUTPUT_ZERO_POINT))

    def check(self, node) -> str | None:
        depth = node.args[0].meta["val"].shape[node.args[1]]
        return f"F.normalize over {depth} values (at most {MAX_DEPTH})" if depth > MAX_DEPTH else None

    def lower(self, ctx, node) -> None:
        """The kernel writes 1/128 steps; a program that quantizes the result otherwise (litert-torch's
        PT2E quantizer observes it like any activation) gets it requantized to its own qparams."""
        x = ctx.tensor(node.args[0])
        attrs = {"dim": node.args[1] % len(x.shape), "eps": node.args[2]}
        declared = ctx.quantized_as(node)
        if declared is None or declared == (OUTPUT_SCALE, OUTPUT_ZERO_POINT, "int8"):
            ctx.add_op(self.kind, node, [x], [ctx.output(node)], **attrs)
            return
        steps = ctx.graph.add_tensor(
            Tensor(f"{node.name}_l2", tuple(node.meta["val"].shape), OUTPUT_SCALE, OUTPUT_ZERO_POINT, source=node.name)
        )
        ctx.add_op(self.kind, node, [x], [steps], **attrs)
        ctx.add_op("lut", node, [steps], [ctx.output(node)], function="requantize", function_attrs={})

    def relayout(self, op, graph) -> None:
        op.attrs["stored_dim"] = graph.tensors[op.inputs[0]].stored_axis(op.attrs["dim"])

    def finalize(self, op, graph) -> None:
        x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if (out.scale, out.zero_point) != (OUTPUT_SCALE, OUTPUT_ZERO_POINT):
            raise EdgecError(
                f"{op.source}: F.normalize's output must be quantized with scale 1/128 and zero point 0 "
                f"(TFLite's L2_NORMALIZATION), got ({out.scale}, {out.zero_point})"
            )
        if op.attrs["eps"] >= x.scale:
            raise EdgecError(
                f"{op.source}: F.normalize with eps {op.attrs['eps']:g}, not below the input step {x.scale:g}: "
                "the integer kernel (TFLite's) only guards a zero norm; use a smaller eps"
            )
        op.attrs["desc"] = l2_norm_desc(x.shape, op.attrs["stored_dim"], x.zero_point)

    def golden(self, op, graph, inputs):
        return l2_norm_s8(inputs[0], op.attrs["desc"])

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(L2_NORM_DESC, p, op.attrs["desc"])
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call


UNITS = (L2Norm(),)

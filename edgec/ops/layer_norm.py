"""Layer normalisation over the last axes (nn.LayerNorm, F.layer_norm), int8 in and out: the
golden kernel, its descriptor and the op unit.

C kernel: runtime_c/src/norm/edgec_layer_norm_s8.c (edgec_layer_norm_s8). TFLite has no int8
LAYER_NORM kernel to follow, so the arithmetic is edgec's own, integer only and exact to specify
(every step is an integer operation whose result is defined to the bit; the C does the same):

Per row of n int8 values q_i (input zero point cancels in q_i - mean):
    sum  = sum_i q_i                                   (int32)
    d_i  = n * q_i - sum = n * (q_i - mean)            (int32, |d_i| <= 255 (n - 1))
    F    = max(0, (30 - 3 L) // 2), L = ceil(log2 n)   (eps's fraction bits: 15 for n = 1 .. 0 for n > 512)
    V    = 4^F sum_i d_i^2 + eps_term                  (int64 < 2^61; sum_i d_i^2 = n^3 var_q < 2^(16 + 3L))
           eps_term = round(eps * n^3 * 4^F / s_x^2) (at most 2^60), so V = 4^F n^3 (var_q + eps / s_x^2)
    t    = the t >= 0 that puts V * 4^t in [2^60, 2^62) (t = 0 if V >= 2^60; V = 0: all u_i = 0)
    r    = isqrt(V * 4^t)                              (floor square root, exact; r in [2^30, 2^31))
    g    = floor((2^61 - 1) / r)                       (< 2^31: 1/r in Q61)
    u_i  = RoundShift(d_i * 2^(t+F) * g, 37)           (int64 product < 2^62; u_i = 2^24 2^F d_i / sqrt(V)
                                                        = 2^24 (x_i - mean) / (sqrt(n) sqrt(var + eps)))
    y_i  = clamp(RoundShift(u_i * scale[j] + offset[j], S) + output_zp, act_min, act_max)
with j = i's feature, scale[j] = round(gamma_j sqrt(n) 2^(S - 24) / s_y) (int32),
offset[j] = round(beta_j 2^S / s_y) (int64, |offset| <= 2^56), one shift S in [32, 62] per layer
(the largest that keeps every scale[j] in int32 and every offset within 2^56; S < 32 would need
gamma sqrt(n) / s_y >= 2^23, which is refused), and RoundShift(v, s) = floor((v + 2^(s-1)) / 2^s)
(round half up). Every intermediate stays within int64: |u_i| <= 2^24 (1 + 2^-29), so
|u_i * scale[j] + offset[j]| < 2^57. n is limited to 4096 (V < 2^62).

Accuracy: u_i carries 24 fractional bits and r at least 30 significant bits, so the output is the
correctly rounded float layer norm up to a rounding tie (tests compare with float). eps carries F
fraction bits: a row of a few nearly equal values has sum d_i^2 of a few units, and eps rounded to
a whole unit moved such a row by up to 2 steps (fuzz seed 343 v4: n = 3, eps * n^3 / s_x^2 = 0.21
rounded to 0, V = 42); the rounding of eps is now at most 2^-(2F+1) units (a row with sum d_i^2 > 0
has it >= n (n - 1), so for n > 512, F = 0 loses less than 2^-20 of V). eps_term reaches its cap
2^60 only where eps / s_x^2 > 2^30, below the activation observer's smallest scale for eps <= 1e-3.
"""

from __future__ import annotations

import math

import numpy as np

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import aten
from edgec.numerics import INT8_MAX, INT8_MIN, activation_bounds, round_half_away, saturate_int8
from edgec.ops.base import CCall, OpDef, descriptor, require_quantized
from edgec.ops.kernel import Field, Struct, ints
from edgec.ops.qspec import ACTIVATION_QSPEC, annotate_with_output

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
LAYER_NORM_DESC = Struct(
    "edgec_layer_norm_desc",
    (
        *ints("rows features eps_term_hi eps_term_lo shift output_offset act_min act_max"),
        Field("scale", "const int32_t *", doc="[features]"),
        Field("offset_hi", "const int32_t *", doc="[features]"),
        Field("offset_lo", "const int32_t *", doc="[features]"),
    ),
)
STRUCTS = (LAYER_NORM_DESC,)

LAYER_NORM_MAX_FEATURES = 4096  # EDGEC_LAYER_NORM_MAX_FEATURES
_EPS_TERM_MAX = 1 << 60
_OFFSET_MAX = 1 << 56
_U_BITS = 24  # fractional bits of u_i
_U_SHIFT = 61 - _U_BITS  # d 2^t g / 2^37 = 2^24 d / sqrt(V): g is 1/r in Q61


def eps_fraction_bits(features: int) -> int:
    """F: the fraction bits eps_term carries (V = 4^F sum d^2 + eps_term stays below 2^61)."""
    return max(0, (30 - 3 * (features - 1).bit_length()) // 2)


def round_shift(v, shift):
    """floor((v + 2^(shift-1)) / 2^shift) on int64 (or Python int) values, shift >= 1."""
    return (v + (1 << (shift - 1))) >> shift


def layer_norm_desc(
    rows: int,
    features: int,
    gamma,
    beta,
    eps: float,
    input_qparams,
    output_qparams,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
) -> dict:
    """edgec_layer_norm_desc fields (declaration order); gamma/beta float [features] or None."""
    if not 1 <= features <= LAYER_NORM_MAX_FEATURES or rows < 1:
        raise ValueError(f"layer_norm over {features} features (1..{LAYER_NORM_MAX_FEATURES}) and {rows} rows")
    (s_x, _), (s_y, zp_y) = input_qparams, output_qparams
    gamma = np.ones(features) if gamma is None else np.asarray(gamma, dtype=np.float64).ravel()
    beta = np.zeros(features) if beta is None else np.asarray(beta, dtype=np.float64).ravel()
    real_scale = gamma * math.sqrt(features) / s_y  # per unit of u / 2^24
    real_offset = beta / s_y
    if np.abs(real_offset).max(initial=0) >= 2.0**54:
        raise ValueError("layer_norm beta / output scale is too large")
    largest = np.abs(real_scale).max(initial=0)
    shift = 62
    while shift > 31 and (
        largest * 2.0 ** (shift - _U_BITS) >= 2**31 - 1 or np.abs(real_offset).max(initial=0) * 2.0**shift > _OFFSET_MAX
    ):
        shift -= 1
    if shift < 32:  # the C takes the high word of the 64-bit sum, then shifts it by S - 32
        raise ValueError("layer_norm gamma / output scale or beta / output scale is too large")
    scale = np.array([round_half_away(float(v) * 2.0 ** (shift - _U_BITS)) for v in real_scale], dtype=np.int32)
    offset = np.array([round_half_away(float(v) * 2.0**shift) for v in real_offset], dtype=np.int64)
    eps_term = min(
        _EPS_TERM_MAX, round_half_away(float(eps) * features**3 * 4.0 ** eps_fraction_bits(features) / (s_x * s_x))
    )
    return {
        "rows": int(rows),
        "features": int(features),
        "eps_term_hi": int(eps_term >> 32),
        "eps_term_lo": int(eps_term & 0xFFFFFFFF) - (1 << 32 if eps_term & 0x80000000 else 0),
        "shift": int(shift),
        "output_offset": int(zp_y),
        "act_min": int(act_min),
        "act_max": int(act_max),
        "scale": scale,
        "offset_hi": (offset >> 32).astype(np.int32),
        "offset_lo": (offset & 0xFFFFFFFF).astype(np.uint32).view(np.int32),
    }


def _int64(hi, lo):
    return (np.asarray(hi, dtype=np.int64) << 32) + (np.asarray(lo, dtype=np.int64) & 0xFFFFFFFF)


def layer_norm_s8(x: np.ndarray, desc: dict) -> np.ndarray:
    """Golden int8 layer norm, bit-exact with edgec_layer_norm_s8: x flat [rows * features];
    returns the flat int8 output. Arithmetic: see the module docstring."""
    n = desc["features"]
    q = np.asarray(x, dtype=np.int64).reshape(desc["rows"], n)
    eps_term = int(_int64(desc["eps_term_hi"], desc["eps_term_lo"]))
    scale = np.asarray(desc["scale"], dtype=np.int64)
    offset = _int64(desc["offset_hi"], desc["offset_lo"])
    d = n * q - q.sum(axis=1, keepdims=True)
    fraction = eps_fraction_bits(n)
    out = np.empty_like(q)
    for row in range(len(q)):
        variance = (int((d[row] * d[row]).sum()) << (2 * fraction)) + eps_term
        if variance == 0:
            u = np.zeros(n, dtype=np.int64)
        else:
            t = 0
            while variance << (2 * t) < 1 << 60:
                t += 1
            g = ((1 << 61) - 1) // math.isqrt(variance << (2 * t))
            u = round_shift(d[row] * (1 << (t + fraction)) * g, _U_SHIFT)
        out[row] = round_shift(u * scale + offset, desc["shift"])
    return saturate_int8(out + desc["output_offset"], desc["act_min"], desc["act_max"]).ravel()


# -- the op unit ------------------------------------------------------------------------------


class LayerNorm(OpDef):
    kind, c_function = "layer_norm", "edgec_layer_norm_s8"
    targets = frozenset({aten.layer_norm.default})
    runtime_sources = ("norm/edgec_layer_norm_s8.c",)
    fuses_activation = True
    limits = f"at most {LAYER_NORM_MAX_FEATURES} features normalised together"

    def annotate(self, node) -> None:
        annotate_with_output(node, {node.args[0]: ACTIVATION_QSPEC})

    def check(self, node) -> str | None:
        features = math.prod(node.args[1])
        if features > LAYER_NORM_MAX_FEATURES:
            return f"layer_norm over {features} features (at most {LAYER_NORM_MAX_FEATURES})"
        return None

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        args = list(node.args) + [None] * (5 - len(node.args))
        weight, bias = (None if a is None else ctx.constant(a) for a in args[2:4])
        for what, c in (("weight", weight), ("bias", bias)):
            if c is not None and c.quantized:
                raise EdgecError(f"{source_line(node)}: layer_norm {what} must stay float")
        eps = node.kwargs.get("eps", args[4] if args[4] is not None else 1e-5)
        features = math.prod(node.args[1])
        ctx.add_op(
            self.kind,
            node,
            [x],
            [ctx.output(node)],
            features=features,
            eps=float(eps),
            clamp=(None, None),
            gamma=None if weight is None else np.asarray(weight.value, dtype=np.float64),
            beta=None if bias is None else np.asarray(bias.value, dtype=np.float64),
        )

    def torch_order_tensors(self, op, graph) -> list[str]:
        return [*op.inputs, *op.outputs]

    def finalize(self, op, graph) -> None:
        require_quantized(op, graph, "layer_norm")
        x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        bounds = activation_bounds(out.zero_point, out.scale, *op.attrs["clamp"])
        try:
            op.attrs["desc"] = layer_norm_desc(
                x.elements // op.attrs["features"],
                op.attrs["features"],
                op.attrs["gamma"],
                op.attrs["beta"],
                op.attrs["eps"],
                (x.scale, x.zero_point),
                (out.scale, out.zero_point),
                *bounds,
            )
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {exc}") from None

    def golden(self, op, graph, inputs):
        return layer_norm_s8(inputs[0], op.attrs["desc"]).reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(LAYER_NORM_DESC, p, op.attrs["desc"])
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call


UNITS = (LayerNorm(),)

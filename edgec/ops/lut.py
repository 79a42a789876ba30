"""Lookup-table activations: any int8 -> int8 elementwise function as a 256-entry table.

C kernel: runtime_c/src/activation/edgec_lut_s8.c (edgec_lut_s8, descriptor edgec_lut_desc).
The table IS the specification: y[i] = table[x[i] + 128]. The golden kernel (lut_s8) is that
lookup, so the golden, the host C and the Cortex-M C agree by construction; what has to be right
is the table, built here at compile time from the op and both tensors' qparams.

Float functions (sigmoid, tanh, hardswish, hardsigmoid, silu, gelu with approximate 'none' or
'tanh', elu (selu and celu as its instances), softplus, mish, exp, abs, sign, neg, erf, log_sigmoid,
softsign, sin, cos, sqrt, rsqrt,
reciprocal, log, pow with a scalar exponent) follow one rule, computed in float64:
    y_q = clamp(round_half_away(f(s_in * (q - zp_in)) / s_out) + zp_out, -128, 127)
with f written as PyTorch defines it (the test checks each table against torch's own float64
function). Rounding is exact ties-away-from-zero on the float64 quotient. Infinities (log(0),
1/0) saturate; a function that is not a number on part of the input's int8 range (sqrt of a
negative value) is refused with the input's scale.

Two tables instead reproduce TFLite's int8 integer arithmetic, so a TFLite-quantized model gives
the same bytes:
  * leaky_relu: tflite::reference_ops::QuantizeLeakyRelu with the multipliers of TFLite Micro's
    CalculateOpDataLeakyRelu (leaky_relu_common.cc) / TFLite's LeakyReluPrepare (activations.cc);
  * requantize: tflite::reference_ops::Requantize with the multiplier of TFLite Micro's
    quantize_common.cc (PrepareQuantizeReference), the int8 -> int8 QUANTIZE op.
Both are MultiplyByQuantizedMultiplier (edgec.numerics.requantize, double rounding) of
x - zp_in, plus zp_out, clamped. A third, hardswish_tflite_table (reference_ops::HardSwish), is the
hardswish of a program quantized by another tool (read the TFLite way); edgec's own PTQ keeps the
correctly rounded float rule. TFLite's int32 `x * (1 << left_shift)` overflows (undefined)
when a multiplier is at least about 2^23; such qparams are refused with a ValueError.

Output qparams: FIXED_OUTPUT_QPARAMS lists the functions whose int8 output TFLite fixes (and
hardsigmoid, fixed the same way as sigmoid: its range is [0, 1] too). Every other function needs
observed output qparams (OBSERVED_OUTPUT_FUNCTIONS).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from edgec.errors import EdgecError
from edgec.frontend.torch_ops import aten
from edgec.ir import InPlace
from edgec.numerics import INT8_MAX, INT8_MIN, INT32_MAX, quantize_multiplier, requantize
from edgec.ops.base import CCall, OpDef, descriptor, require_quantized
from edgec.ops.kernel import Field, Struct
from edgec.ops.qspec import ACTIVATION_QSPEC, activation_inputs, annotate, fixed_qspec

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
LUT_DESC = Struct(
    "edgec_lut_desc",
    (
        Field("size", doc="number of elements, >= 1"),
        Field("table", "const int8_t *", doc="256 entries in flash: entry x + 128 is the output for input x"),
    ),
)
LUT_CHANNELS_DESC = Struct(
    "edgec_lut_channels_desc",
    (
        Field("pixels", doc="the tensor viewed as [pixels][channels], channels last, contiguous; >= 1"),
        Field("channels", doc=">= 1: one 256-entry table each"),
    ),
)
STRUCTS = (LUT_DESC, LUT_CHANNELS_DESC)

LUT_SIZE = 256
INT8_VALUES = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.int64)  # table index i holds q = i - 128

# (scale, zero_point) of the int8 output. TFLite's int8 quantization spec fixes LOGISTIC at 1/256
# and -128 and TANH at 1/128 and 0 (its int8 kernels produce exactly those; TFLite Micro's
# logistic_common.cc checks the zero point). hardsigmoid's range is sigmoid's, [0, 1].
FIXED_OUTPUT_QPARAMS: dict[str, tuple[float, int]] = {
    "sigmoid": (1.0 / 256.0, -128),
    "tanh": (1.0 / 128.0, 0),
    "hardsigmoid": (1.0 / 256.0, -128),
}


# -- float functions (float64, as PyTorch defines them) ----------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _hardsigmoid(x: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0


def _hardswish(x: np.ndarray) -> np.ndarray:
    return x * np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
        return 0.5 * x * (1.0 + np.tanh(inner))
    if approximate != "none":
        raise ValueError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")
    erf = np.array([math.erf(v) for v in (x * math.sqrt(0.5)).tolist()])
    return x * 0.5 * (1.0 + erf)


def _elu(x: np.ndarray, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> np.ndarray:
    """torch's elu: scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1)) (selu and celu
    are its instances)."""
    return float(scale) * np.where(x > 0, x, float(alpha) * np.expm1(float(input_scale) * np.minimum(x, 0.0)))


def _softplus(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> np.ndarray:
    """torch.nn.functional.softplus: x itself where beta * x > threshold (linear region)."""
    beta = float(beta)
    bx = beta * x
    return np.where(bx > float(threshold), x, np.log1p(np.exp(np.minimum(bx, float(threshold)))) / beta)


def _mish(x: np.ndarray) -> np.ndarray:
    # torch computes x * tanh(log1p(exp(x))) without softplus's threshold; logaddexp(0, x) is
    # the same function without exp's overflow for large x.
    return x * np.tanh(np.logaddexp(0.0, x))


FLOAT_FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "hardswish": _hardswish,
    "hardsigmoid": _hardsigmoid,
    "silu": _silu,
    "gelu": _gelu,
    "elu": _elu,
    "celu": lambda x, alpha=1.0: _elu(x, alpha, input_scale=1.0 / float(alpha)),
    "sign": np.sign,
    "softplus": _softplus,
    "mish": _mish,
    "exp": np.exp,
    "abs": np.abs,
    "neg": np.negative,
    "erf": np.vectorize(math.erf, otypes=[np.float64]),
    "log_sigmoid": lambda x: -np.logaddexp(0.0, -x),
    "softsign": lambda x: x / (1.0 + np.abs(x)),
    "sin": np.sin,
    "cos": np.cos,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x,
    "log": np.log,
    "pow": lambda x, exponent: np.power(x, float(exponent)),
}
INTEGER_FUNCTIONS = ("leaky_relu", "requantize")
# Activations whose output qparams come from observation (requantize takes the op's own).
OBSERVED_OUTPUT_FUNCTIONS = (frozenset(FLOAT_FUNCTIONS) - frozenset(FIXED_OUTPUT_QPARAMS)) | {"leaky_relu"}


def _check_qparams(s_in: float, zp_in: int, s_out: float, zp_out: int) -> None:
    for name, scale in (("input", s_in), ("output", s_out)):
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"{name} scale must be a finite positive number, got {scale}")
    for name, zp in (("input", zp_in), ("output", zp_out)):
        if not INT8_MIN <= zp <= INT8_MAX:
            raise ValueError(f"{name} zero point {zp} is outside int8")


def round_half_away_exact(v: np.ndarray) -> np.ndarray:
    """Round float64 values to the nearest integer, ties away from zero, exactly.

    trunc and the fraction v - trunc(v) are exact in float64, so a value just below a tie
    (0.49999999999999994) is not pushed over it as floor(|v| + 0.5) would."""
    whole = np.trunc(v)
    return whole + np.sign(v) * (np.abs(v - whole) >= 0.5)


def float_table(function: str, s_in: float, zp_in: int, s_out: float, zp_out: int, **attrs) -> np.ndarray:
    """The table of a float function (FLOAT_FUNCTIONS): the module docstring's rule in float64."""
    _check_qparams(s_in, zp_in, s_out, zp_out)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        y = FLOAT_FUNCTIONS[function](float(s_in) * (INT8_VALUES - int(zp_in)).astype(np.float64), **attrs)
    if np.isnan(y).any():
        raise ValueError(f"{function}{attrs} is not a number on part of the input range (scale {s_in})")
    # Clipping first changes nothing (|zp_out| <= 128) and keeps infinities out of the rounding.
    q = round_half_away_exact(np.clip(y / float(s_out), -1024.0, 1024.0)) + int(zp_out)
    return np.clip(q, INT8_MIN, INT8_MAX).astype(np.int8)


def _tflite_multiplier(real: float, largest_input: int, what: str) -> tuple[int, int]:
    """TFLite QuantizeMultiplier of a positive double, refusing multipliers whose left shift
    makes TFLite's int32 `x * (1 << shift)` overflow for an |x| up to largest_input."""
    if real >= 2.0**30 or largest_input << max(quantize_multiplier(real)[1], 0) > INT32_MAX:
        raise ValueError(
            f"{what} multiplier {real} is too large: TFLite's int32 arithmetic "
            f"overflows for an input {largest_input} away from its zero point"
        )
    return quantize_multiplier(real)


def _clamped(y: np.ndarray) -> np.ndarray:
    return np.clip(y, INT8_MIN, INT8_MAX).astype(np.int8)


def leaky_relu_multipliers(s_in: float, zp_in: int, s_out: float, negative_slope: float) -> dict:
    """TFLite's LeakyReluOpData multipliers: identity s_in / s_out, alpha s_in * alpha / s_out.

    TFLite computes both ratios in float32 (the scales and alpha are float fields; the float
    expression is converted to double afterwards), then QuantizeMultiplier. A negative alpha
    gives a negative multiplier; the reference kernel multiplies by its magnitude and negates the
    product (reference/leaky_relu.h). QuantizeMultiplier's rounding is symmetric and a float32
    ratio never rounds up to 2^31, so that magnitude is QuantizeMultiplier(|ratio|).
    Returns {"identity": (m, shift), "alpha": (m, shift), "alpha_negative": bool}.
    """
    f32 = np.float32
    identity = float(f32(s_in) / f32(s_out))
    alpha = float(f32(f32(s_in) * f32(negative_slope)) / f32(s_out))
    return {
        "identity": _tflite_multiplier(identity, INT8_MAX - zp_in, "leaky_relu identity"),
        "alpha": _tflite_multiplier(abs(alpha), zp_in - INT8_MIN, "leaky_relu alpha"),
        "alpha_negative": alpha < 0,
    }


def leaky_relu_table(s_in: float, zp_in: int, s_out: float, zp_out: int, negative_slope: float = 0.01) -> np.ndarray:
    """TFLite int8 LEAKY_RELU as a table (reference_ops::QuantizeLeakyRelu):
        d = q - zp_in
        y = zp_out + (d >= 0 ? MBQM(d, identity) : sign(alpha) * MBQM(d, |alpha|)), clamped to int8
    with MultiplyByQuantizedMultiplier (MBQM = edgec.numerics.requantize) and the multipliers of
    leaky_relu_multipliers.
    """
    _check_qparams(s_in, zp_in, s_out, zp_out)
    multipliers = leaky_relu_multipliers(s_in, zp_in, s_out, negative_slope)
    d = INT8_VALUES - int(zp_in)
    positive = requantize(d, *multipliers["identity"])
    negative = requantize(d, *multipliers["alpha"])
    if multipliers["alpha_negative"]:
        negative = -negative
    return _clamped(np.where(d >= 0, positive, negative) + int(zp_out))


def requantize_table(s_in: float, zp_in: int, s_out: float, zp_out: int) -> np.ndarray:
    """TFLite int8 -> int8 QUANTIZE as a table (reference_ops::Requantize):
        y = clamp(MBQM(q - zp_in, m, shift) + zp_out), (m, shift) = QuantizeMultiplier(s_in / s_out)
    with the ratio in double (TFLite Micro casts both float scales to double before dividing:
    pass float32-valued scales for bit parity with a TFLite model)."""
    _check_qparams(s_in, zp_in, s_out, zp_out)
    largest = max(INT8_MAX - zp_in, zp_in - INT8_MIN)
    multiplier, shift = _tflite_multiplier(float(s_in) / float(s_out), largest, "requantize")
    return _clamped(requantize(INT8_VALUES - int(zp_in), multiplier, shift) + int(zp_out))


def _c_divide(x: np.ndarray, divisor: int) -> np.ndarray:
    """C integer division (truncates toward zero)."""
    return np.sign(x) * (np.abs(x) // divisor)


def _int16_rounding_doubling_high_mul(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp::SaturatingRoundingDoublingHighMul on int16 (b > -32768, so it never saturates)."""
    product = a * int(b)
    return _c_divide(product + np.where(product >= 0, 1 << 14, 1 - (1 << 14)), 1 << 15)


def _rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp::RoundingDivideByPOT: x / 2^exponent rounded, ties away from zero."""
    mask = (1 << exponent) - 1
    return (x >> exponent) + ((x & mask) > (mask >> 1) + (x < 0))


def _int16_multiplier(real: np.float32) -> tuple[int, int]:
    """QuantizeMultiplier then DownScaleInt32ToInt16Multiplier (TFLite's HardSwishPrepare)."""
    multiplier, exponent = quantize_multiplier(float(real))
    return (32767 if multiplier >= INT32_MAX - (1 << 15) else (multiplier + (1 << 15)) >> 16), exponent


def hardswish_tflite_table(s_in: float, zp_in: int, s_out: float, zp_out: int) -> np.ndarray:
    """TFLite int8 HARD_SWISH as a table (reference_ops::HardSwish, the kernel TFLite Micro runs,
    with HardSwishPrepare's int16 multipliers from float32 ratios): x on a 2^7 finer scale, times
    a "relu-ish" fixed-point factor in [0, 1] that maps [-3, 3] to [0, 1], rescaled by shifts.
    It is not correctly rounded: 1 LSB from the float rule on inputs near a rounding tie."""
    _check_qparams(s_in, zp_in, s_out, zp_out)
    f32 = np.float32
    hires_scale = f32(f32(1.0 / 128.0) * f32(s_in))
    out_multiplier, out_exponent = _int16_multiplier(f32(hires_scale / f32(s_out)))
    reluish_multiplier, reluish_exponent = _int16_multiplier(f32(hires_scale / f32(3.0 / 32768.0)))
    if out_exponent > 0:
        raise ValueError(f"hardswish output scale {s_out} is too small for TFLite's HARD_SWISH")

    def saturating_left_shift(v: np.ndarray, amount: int) -> np.ndarray:
        return np.clip(v * (1 << amount), -(1 << 15), (1 << 15) - 1)

    hires = (INT8_VALUES - int(zp_in)) * 128
    preshift_output = _int16_rounding_doubling_high_mul(hires, out_multiplier)
    reluish = hires
    if reluish_exponent > 0:
        reluish = saturating_left_shift(reluish, reluish_exponent - 1)
    reluish = _int16_rounding_doubling_high_mul(reluish, reluish_multiplier)
    if reluish_exponent > 0:
        reluish = saturating_left_shift(reluish, 1)
    if reluish_exponent < 0:
        reluish = _rounding_divide_by_pot(reluish, -reluish_exponent)
    reluish = (reluish + (1 << 15)) >> 1
    preshift = _c_divide(reluish * preshift_output, 1 << 15)  # SaturatingDoublingHighMul; reluish >= 0
    return _clamped(_rounding_divide_by_pot(preshift, -out_exponent) + int(zp_out))


def lut_table(function: str, s_in: float, zp_in: int, s_out: float, zp_out: int, **attrs) -> np.ndarray:
    """The int8[256] table of `function` (a FLOAT_FUNCTIONS name, 'leaky_relu' or 'requantize')
    for input qparams (s_in, zp_in) and output qparams (s_out, zp_out); entry i is the output
    for input q = i - 128. attrs: gelu approximate='none'|'tanh'; elu alpha; softplus beta,
    threshold; leaky_relu negative_slope (the torch names and defaults)."""
    if function == "leaky_relu":
        return leaky_relu_table(s_in, zp_in, s_out, zp_out, **attrs)
    if function == "requantize":
        return requantize_table(s_in, zp_in, s_out, zp_out, **attrs)
    if function not in FLOAT_FUNCTIONS:
        known = sorted(FLOAT_FUNCTIONS) + list(INTEGER_FUNCTIONS)
        raise ValueError(f"no lookup table for {function!r}; known: {known}")
    return float_table(function, s_in, zp_in, s_out, zp_out, **attrs)


# -- the kernel ---------------------------------------------------------------------------------


def lut_desc(table: np.ndarray, size: int) -> dict:
    """Fields of the C struct edgec_lut_desc (same names, same order): `size` elements through
    the int8[256] `table` (a flash constant in generated code)."""
    table = np.asarray(table)
    if table.dtype != np.int8 or table.shape != (LUT_SIZE,):
        raise ValueError(f"a lookup table is int8[{LUT_SIZE}], got {table.dtype}{list(table.shape)}")
    if size < 1:
        raise ValueError(f"lookup of {size} elements")
    return {"size": int(size), "table": table}


def lut_channels_s8(x: np.ndarray, tables: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_lut_channels_s8: y[p, c] = tables[c, x[p, c] + 128], x viewed as [pixels][channels]."""
    rows = np.asarray(x, np.int8).reshape(desc["pixels"], desc["channels"]).astype(np.int64)
    return tables[np.arange(desc["channels"]), rows - INT8_MIN].reshape(np.shape(x))


def lut_s8(x: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_lut_s8: y = table[x + 128] for each of the desc['size'] int8 elements of x
    (any shape with that many elements; the result has x's shape)."""
    x = np.asarray(x)
    if x.dtype != np.int8 or x.size != desc["size"]:
        raise TypeError(f"lut_s8 expects {desc['size']} int8 values, got {x.dtype} {x.shape}")
    return desc["table"][x.astype(np.int64) - INT8_MIN]


# -- the op unit ----------------------------------------------------------------------------------

# torch target -> (table function, {attribute: (argument index, torch default)})
_FUNCTIONS = {
    aten.sigmoid.default: ("sigmoid", {}),
    aten.tanh.default: ("tanh", {}),
    aten.hardswish.default: ("hardswish", {}),
    aten.hardsigmoid.default: ("hardsigmoid", {}),
    aten.silu.default: ("silu", {}),
    aten.gelu.default: ("gelu", {"approximate": (None, "none")}),
    aten.elu.default: ("elu", {"alpha": (1, 1.0), "scale": (2, 1.0), "input_scale": (3, 1.0)}),
    aten.selu.default: ("elu", {"alpha": (None, 1.6732632423543772), "scale": (None, 1.0507009873554805)}),
    aten.celu.default: ("celu", {"alpha": (1, 1.0)}),
    aten.sign.default: ("sign", {}),
    aten.softplus.default: ("softplus", {"beta": (1, 1.0), "threshold": (2, 20.0)}),
    aten.mish.default: ("mish", {}),
    aten.leaky_relu.default: ("leaky_relu", {"negative_slope": (1, 0.01)}),
    aten.exp.default: ("exp", {}),
    aten.abs.default: ("abs", {}),
    aten.neg.default: ("neg", {}),
    aten.erf.default: ("erf", {}),
    aten.log_sigmoid.default: ("log_sigmoid", {}),
    aten.sin.default: ("sin", {}),
    aten.cos.default: ("cos", {}),
    aten.sqrt.default: ("sqrt", {}),
    aten.rsqrt.default: ("rsqrt", {}),
    aten.reciprocal.default: ("reciprocal", {}),
    aten.log.default: ("log", {}),
    aten.pow.Tensor_Scalar: ("pow", {"exponent": (1, None)}),
}


def _attribute(node, name: str, index: int | None, default):
    if index is not None and len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


class Lut(OpDef):
    """Any int8 -> int8 elementwise function as a 256-entry table, run in place; also the requantize
    op lowering inserts where an activation's qparams change (function 'requantize')."""

    kind, c_function = "lut", "edgec_lut_s8"
    targets = frozenset(_FUNCTIONS)
    runtime_sources = ("activation/edgec_lut_s8.c",)
    layout_follows_input = True
    limits = ""

    def annotate(self, node) -> None:
        function = _FUNCTIONS[node.target][0]
        fixed = FIXED_OUTPUT_QPARAMS.get(function)
        annotate(node, activation_inputs(node, 1), ACTIVATION_QSPEC if fixed is None else fixed_qspec(*fixed))

    def lower(self, ctx, node) -> None:
        function, attributes = _FUNCTIONS[node.target]
        x = ctx.tensor(node.args[0])
        values = {name: _attribute(node, name, index, default) for name, (index, default) in attributes.items()}
        op = ctx.add_op(self.kind, node, [x], [ctx.output(node)], function=function, function_attrs=values)
        if ctx.converter_semantics and function == "hardswish":
            # A program quantized the TFLite way means TFLite's integer HARD_SWISH.
            op.attrs["table"] = "tflite"
        if ctx.tflite_compatible and function == "tanh":
            # TFLite Micro's int8 TANH writes steps of 1/128 around 0 whatever the output tensor
            # declares, and its readers take those bytes at the declared qparams.
            op.attrs["table_qparams"] = FIXED_OUTPUT_QPARAMS["tanh"]

    def finalize(self, op, graph) -> None:
        require_quantized(op, graph, op.attrs.get("function", "lookup table"))
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        out_scale, out_zero_point = op.attrs.get("table_qparams", (out_t.scale, out_t.zero_point))
        qparams = (x_t.scale, x_t.zero_point, out_scale, out_zero_point)
        try:
            if op.attrs.get("table") == "tflite":
                table = hardswish_tflite_table(*qparams)
            else:
                table = lut_table(op.attrs["function"], *qparams, **op.attrs["function_attrs"])
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {op.attrs['function']}: {exc}") from None
        op.attrs["desc"] = lut_desc(table, out_t.elements)

    def golden(self, op, graph, inputs):
        return lut_s8(inputs[0], op.attrs["desc"])

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(LUT_DESC, p, op.attrs["desc"])
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call

    def in_place(self, op, graph, target):
        return (InPlace(0, 0),)  # edgec_lut_s8 reads element i before writing it


UNIT = Lut()

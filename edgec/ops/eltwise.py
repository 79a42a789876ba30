"""Elementwise ops (add, clamp): golden int8 kernels, parameters and op units.

C kernels: runtime_c/src/eltwise/edgec_add_s8.c and edgec_clamp_s8.c.
"""

from __future__ import annotations

import numpy as np

from edgec.errors import EdgecError
from edgec.frontend.torch_ops import ACTIVATIONS, aten
from edgec.ir import InPlace
from edgec.numerics import (
    ADD_LEFT_SHIFT,
    INT8_MAX,
    INT8_MIN,
    activation_bounds,
    quantize_multiplier,
    requantize,
    saturate_int8,
    wrap_int32,
)
from edgec.ops.base import CCall, OpDef, descriptor, require_quantized
from edgec.ops.kernel import Field, Scratch, Struct, ints
from edgec.ops.kernel_layout import kernel_isa, packed_choice
from edgec.ops.qspec import annotate_shared

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
ADD_S8_DESC = Struct(
    "edgec_add_s8_desc",
    (
        Field("size", doc="elements of each input and of the output, >= 0"),
        Field("input1_offset", doc="-zero_point of input 1"),
        *ints("input1_multiplier input1_shift"),
        Field("input2_offset", doc="-zero_point of input 2"),
        *ints("input2_multiplier input2_shift"),
        Field("left_shift", doc="20"),
        *ints("output_offset output_multiplier output_shift act_min act_max"),
    ),
)
CLAMP_S8_DESC = Struct("edgec_clamp_s8_desc", (Field("size", doc=">= 0"), *ints("act_min act_max")))
STRUCTS = (ADD_S8_DESC, CLAMP_S8_DESC)
# The scratch-size rules of this unit's kernels: edgec_nn.h's macros are generated from these.
ADD_SCRATCH = Scratch("EDGEC_ADD_S8_SCRATCH_BYTES", (), "(2 * 256 * 4)")
SCRATCH = (ADD_SCRATCH,)


def add_params(
    s1: float,
    zp1: int,
    s2: float,
    zp2: int,
    s_out: float,
    zp_out: int,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
) -> dict:
    """The quantization fields of edgec_add_s8_desc (its names and order, after `size`; also
    edgec_binary_desc's) for y = x1 + x2.

    TFLite/CMSIS-NN scheme: twice_max = 2 * max(s1, s2); inputs are rescaled by s_i / twice_max
    with ADD_LEFT_SHIFT (20) bits of headroom, the sum by twice_max / (2^20 * s_out).
    """
    twice_max = 2.0 * max(float(s1), float(s2))
    m1, sh1 = quantize_multiplier(float(s1) / twice_max)
    m2, sh2 = quantize_multiplier(float(s2) / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * float(s_out)))
    return {
        "input1_offset": -int(zp1),
        "input1_multiplier": m1,
        "input1_shift": sh1,
        "input2_offset": -int(zp2),
        "input2_multiplier": m2,
        "input2_shift": sh2,
        "left_shift": ADD_LEFT_SHIFT,
        "output_offset": int(zp_out),
        "output_multiplier": mo,
        "output_shift": sho,
        "act_min": int(act_min),
        "act_max": int(act_max),
    }


def add_desc(size: int, params: dict) -> dict:
    """edgec_add_s8_desc's fields: `size` elements, add_params' constants."""
    return {"size": int(size), **params}


def add_s8(x1, x2, params: dict) -> np.ndarray:
    """Golden int8 add of two same-shape tensors, bit-exact with edgec_add_s8 (params: add_params)."""
    x1 = np.asarray(x1)
    x2 = np.asarray(x2)
    if x1.dtype != np.int8 or x2.dtype != np.int8:
        raise TypeError(f"add_s8 expects int8 inputs, got {x1.dtype} and {x2.dtype}")
    if x1.shape != x2.shape:
        raise ValueError(f"add_s8 needs same-shape inputs, got {x1.shape} and {x2.shape}")
    p = params
    shift = p["left_shift"]
    a = requantize((x1.astype(np.int64) + p["input1_offset"]) << shift, p["input1_multiplier"], p["input1_shift"])
    b = requantize((x2.astype(np.int64) + p["input2_offset"]) << shift, p["input2_multiplier"], p["input2_shift"])
    # The C adds through uint32 (no signed overflow UB); with add_params' multipliers it never wraps.
    total = wrap_int32(a + b)
    y = requantize(total, p["output_multiplier"], p["output_shift"]) + p["output_offset"]
    return saturate_int8(y, p["act_min"], p["act_max"])


def clamp_s8(x, act_min: int, act_max: int) -> np.ndarray:
    """Golden standalone clamp (edgec_clamp_s8): a new int8 array with values in [act_min, act_max]."""
    x = np.asarray(x)
    if x.dtype != np.int8:
        raise TypeError(f"clamp_s8 expects int8 input, got {x.dtype}")
    return saturate_int8(x, act_min, act_max)


# -- the op units -------------------------------------------------------------------------------

# edgec_add_s8_dsp/_mve's scratch (EDGEC_ADD_S8_SCRATCH_BYTES): each input's 256 rescaled values
# as int32 lookup tables.
ADD_SCRATCH_BYTES = 2 * 256 * 4


class Add(OpDef):
    """The same-shape add of two activations (lowered by edgec.ops.binary.Binary)."""

    kind = "add"
    runtime_sources = ("eltwise/edgec_add_s8.c",)
    fuses_activation = True
    layout_follows_input = True

    def finalize(self, op, graph) -> None:
        require_quantized(op, graph, "add")
        a, b, out = (graph.tensors[n] for n in op.inputs + op.outputs)
        bounds = activation_bounds(out.zero_point, out.scale, *op.attrs["clamp"])
        op.attrs["params"] = add_params(
            a.scale, a.zero_point, b.scale, b.zero_point, out.scale, out.zero_point, *bounds
        )

    def golden(self, op, graph, inputs):
        return add_s8(inputs[0], inputs[1], op.attrs["params"])

    def specialize(self, op, graph, target) -> None:
        isa = op.attrs["isa"] = kernel_isa(target)
        op.kernel = packed_choice("edgec_add_s8" + ("" if isa is None else f"_{isa}"), isa, target, op.attrs)

    def scratch_bytes(self, op, graph, target) -> int:
        return 0 if op.attrs.get("isa") is None else ADD_SCRATCH_BYTES

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        isa = op.attrs.get("isa")
        call = descriptor(ADD_S8_DESC, p, add_desc(graph.tensors[op.outputs[0]].elements, op.attrs["params"]))
        scratch = "" if isa is None else f", {names.scratch(op)}"
        call.code = (
            f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.inputs[1])}, "
            f"{names.ptr(op.outputs[0])}{scratch});"
        )
        call.scratch_required = None if isa is None else ADD_SCRATCH.call()
        return call

    def in_place(self, op, graph, target):
        # Every add kernel reads element i of both inputs before writing element i of the output
        # (the packed ones four at a time); they keep their lookup tables in scratch.
        scratch = self.scratch_bytes(op, graph, target)
        return (InPlace(0, 0, scratch_bytes=scratch), InPlace(1, 0, scratch_bytes=scratch))


def clamp_bounds(node) -> tuple[float | None, float | None]:
    """The float interval a ReLU/ReLU6/hardtanh/clamp node keeps."""
    if node.target in (aten.relu.default, aten.relu_.default):
        return 0.0, None
    if node.target == aten.relu6.default:
        return 0.0, 6.0
    if node.target in (aten.hardtanh.default, aten.hardtanh_.default):
        return (float(node.args[1]) if len(node.args) > 1 else -1.0), (
            float(node.args[2]) if len(node.args) > 2 else 1.0
        )
    low = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    high = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    if low is not None and high is not None and low > high:
        low = high  # torch.clamp with min > max sets every element to max
    return (None if low is None else float(low)), (None if high is None else float(high))


class Clamp(OpDef):
    """A ReLU/ReLU6/hardtanh/clamp. Usually fused into its producer; runs alone only when it
    cannot be (its producer has other users). The kernel clamps in place: the output is a copy of
    the input clamped, unless the plan puts it over its input."""

    kind, c_function = "clamp", "edgec_clamp_s8"
    targets = frozenset(ACTIVATIONS)
    runtime_sources = ("eltwise/edgec_clamp_s8.c",)
    layout_follows_input = True
    keeps_qparams = True

    def annotate(self, node) -> None:
        annotate_shared(node)

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])  # unquantized when PT2E fused it with its producer
        ctx.add_op(self.kind, node, [x], [ctx.output(node, qparams_of=x)], clamp=clamp_bounds(node))

    def finalize(self, op, graph) -> None:
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if not x_t.quantized or (x_t.scale, x_t.zero_point) != (out_t.scale, out_t.zero_point):
            raise EdgecError(f"{op.source}: a standalone activation must keep its input's qparams")
        op.attrs["act_min"], op.attrs["act_max"] = activation_bounds(out_t.zero_point, out_t.scale, *op.attrs["clamp"])

    def golden(self, op, graph, inputs):
        return clamp_s8(inputs[0], op.attrs["act_min"], op.attrs["act_max"])

    def emit(self, op, graph, names) -> CCall:
        size = graph.tensors[op.outputs[0]].elements
        src, dst = names.ptr(op.inputs[0]), names.ptr(op.outputs[0])
        p = names.symbol(op, "desc")
        call = descriptor(CLAMP_S8_DESC, p, dict(size=size, act_min=op.attrs["act_min"], act_max=op.attrs["act_max"]))
        copy = "" if src == dst else f"memcpy({dst}, {src}, {size}); "
        call.code = f"{copy}status |= {op.kernel.function}(&{p}, {dst});"
        return call

    def in_place(self, op, graph, target):
        return (InPlace(0, 0),)  # edgec_clamp_s8 works in place: planned so, the copy disappears


UNITS = (Add(), Clamp())

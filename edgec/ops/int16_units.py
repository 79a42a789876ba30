"""The op units of int16 activations (the 16x8 scheme: kernels and goldens in edgec.ops.int16).

The quantizer gives the layers selected for int16 (`--activations int16`, `--int16-layers`)
symmetric int16 activation qspecs; lowering keeps each tensor's dtype, and PT2E's requantize
pairs where an int8 tensor meets an int16 one become `lut` ops of function 'requantize' between
dtypes. After the layout passes, `select_int16_kernels` gives every op that touches an int16
tensor its int16 unit below (op.kernel.unit; the op keeps its kind, and the unit reuses the int8
unit's lowering and layout work, already done by then), or refuses the model naming the layer
when no int16 kernel exists.
"""

from __future__ import annotations

import numpy as np

from edgec.errors import EdgecError
from edgec.ir import Graph, InPlace, KernelChoice, Op
from edgec.numerics import INT16_MAX, INT16_MIN, round_half_away
from edgec.ops import int16 as s16
from edgec.ops.base import KINDS, CCall, OpDef, descriptor
from edgec.ops.lut import FLOAT_FUNCTIONS
from edgec.ops.movement import COPY_DESC, copy_desc, copy_s8, strided_copies
from edgec.ops.softmax import outer_axis_inner

# TFLite's int16 LOGISTIC / TANH / SOFTMAX outputs (and edgec's fixed-qparams int16 functions).
FIXED_OUTPUT = (1.0 / 32768, 0)
_C_TYPE = {"int8": "int8_t", "int16": "int16_t"}
# Ops that only view their input's bytes: any dtype.
VIEW_KINDS = frozenset({"reshape"})
INT16 = "int16 activations (TFLite's 16x8 kernel)"


def int16_bounds(scale: float, lo: float | None, hi: float | None) -> tuple[int, int]:
    """A fused clamp [lo, hi] (None: unbounded) as int16 bounds of a symmetric tensor."""
    act_min, act_max = INT16_MIN, INT16_MAX
    if lo is not None:
        act_min = max(INT16_MIN, min(INT16_MAX, round_half_away(lo / scale)))
    if hi is not None:
        act_max = min(INT16_MAX, max(INT16_MIN, round_half_away(hi / scale)))
    return act_min, act_max


class S16Unit(OpDef):
    """What every int16 unit shares: a descriptor call `kernel(&desc, inputs..., output)`; no
    in-place forms unless the unit gives its own (the int8 units' byte-offset proofs assume one
    byte per element)."""

    kernel = ""
    base_kind = ""  # the int8 unit whose lowering and layout the op went through

    def macs(self, op, graph) -> int:
        return KINDS[self.base_kind].macs(op, graph)

    # A unit with Helium and DSP kernels (`kernel`_mve, `kernel`_dsp): how each multiplies.
    isa_ways: dict[str, str] = {}

    def kernel_function(self, op) -> str:
        isa = op.attrs.get("isa") if self.isa_ways else None
        return self.kernel + (f"_{isa}" if isa else "")

    def specialize(self, op, graph, target) -> None:
        if not self.isa_ways:
            op.kernel = KernelChoice(
                self.kernel_function(op),
                "int16",
                f"{INT16}: portable kernel (the only one this op has)",
                unit=self.kind,
            )
            return
        isa = "mve" if target.mve else "dsp" if target.dsp else None
        op.attrs["isa"] = isa
        core = {"mve": "Helium", "dsp": "the DSP extension"}
        reason = (
            f"{INT16}: {target.name} has {core[isa]} ({self.isa_ways[isa]})"
            if isa
            else f"{INT16}: portable kernel: {target.name} has no DSP extension"
        )
        op.kernel = KernelChoice(self.kernel_function(op), "int16" + (f" {isa}" if isa else ""), reason, unit=self.kind)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(self.desc_type, p, op.attrs["desc"])
        args = ", ".join(
            [
                *(f"(const {_C_TYPE[graph.tensors[n].dtype]} *){names.ptr(n)}" for n in op.inputs),
                *(f"({_C_TYPE[graph.tensors[n].dtype]} *){names.ptr(n)}" for n in op.outputs),
            ]
        )
        scratch = f", (int16_t *){names.scratch(op)}" if self.takes_scratch(op) else ""
        call.code = f"status |= {op.kernel.function}(&{p}, {args}{scratch});"
        call.scratch_required = self.scratch_macro(op)
        return call

    def scratch_macro(self, op) -> str | None:
        return None

    def takes_scratch(self, op) -> bool:
        return False


def _io_tensors(op, graph):
    return graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]


def _weighted_desc(op, build, *args, **kwargs) -> dict:
    """_desc of a conv / depthwise / linear layer, its per-channel multipliers and shifts also kept in
    op.attrs as the int8 units keep them (edgec.tools.verify's layer tolerance reads them)."""
    desc = _desc(op, build, *args, **kwargs)
    op.attrs["multiplier"], op.attrs["shift"] = desc["multiplier"], desc["shift"]
    return desc


def _desc(op, build, *args, **kwargs) -> dict:
    """build(*args, **kwargs), its ValueError (e.g. TFLite's effective-scale limit) an EdgecError
    naming the layer."""
    try:
        return build(*args, **kwargs)
    except ValueError as exc:
        raise EdgecError(f"{op.source or op.name}: {op.kind}: {exc}; keep this layer int8 (--int16-layers)") from None


class Conv2dS16(S16Unit):
    kind, base_kind, kernel, desc_type = "conv2d_s16", "conv2d", "edgec_conv_s16", s16.CONV_S16_DESC
    runtime_sources = ("conv/edgec_conv_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        a = op.attrs
        bounds = int16_bounds(out_t.scale, *a["clamp"])
        filters = a["weight"].transpose(0, 3, 1, 2)  # OHWI -> PyTorch's OIHW
        a["desc"] = _weighted_desc(
            op,
            s16.conv_s16_desc,
            x_t.shape,
            filters,
            a["bias"],
            x_t.scale,
            a["weight_scales"],
            out_t.scale,
            stride=a["stride"],
            pad=a["pad"][:2],
            dilation=a["dilation"],
            groups=a["groups"],
            output_hw=out_t.shape[1:3],
            act_min=bounds[0],
            act_max=bounds[1],
        )

    # how the Helium and DSP kernels multiply (the kernel choice's reason)
    isa_ways = {"mve": "VMLADAVA on int8 weights widened to 16-bit lanes", "dsp": "SMLALD"}

    def takes_scratch(self, op) -> bool:
        """The DSP kernels reorder their column in scratch, the Helium convolution gathers it there."""
        return op.attrs.get("isa") is not None

    def golden(self, op, graph, inputs):
        return s16.conv_s16(op.attrs["desc"], inputs[0])

    def scratch_bytes(self, op, graph, target) -> int:
        return s16.conv_s16_dsp_scratch_bytes(op.attrs["desc"]) if self.takes_scratch(op) else 0

    def scratch_macro(self, op) -> str | None:
        d = op.attrs["desc"]
        k = d["kernel_h"] * d["kernel_w"] * (d["input_c"] // d["groups"])
        return s16.CONV_S16_DSP_SCRATCH.call(k) if self.takes_scratch(op) else None


class DepthwiseConv2dS16(S16Unit):
    kind, base_kind = "depthwise_conv2d_s16", "depthwise_conv2d"
    kernel, desc_type = "edgec_depthwise_conv_s16", s16.DEPTHWISE_CONV_S16_DESC
    runtime_sources = ("depthwise/edgec_depthwise_conv_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        a = op.attrs
        bounds = int16_bounds(out_t.scale, *a["clamp"])
        filters = a["weight"].transpose(3, 0, 1, 2)  # [1, KH, KW, C_out] -> PyTorch's [C_out, 1, KH, KW]
        a["desc"] = _weighted_desc(
            op,
            s16.depthwise_conv_s16_desc,
            x_t.shape,
            filters,
            a["bias"],
            x_t.scale,
            a["weight_scales"],
            out_t.scale,
            stride=a["stride"],
            pad=a["pad"][:2],
            dilation=a["dilation"],
            output_hw=out_t.shape[1:3],
            act_min=bounds[0],
            act_max=bounds[1],
        )

    isa_ways = {
        "mve": "VMULLB/VMULLT of eight channels into exact 32-bit sums",
        "dsp": "SMLAxy of four channels into exact 32-bit sums",
    }

    def golden(self, op, graph, inputs):
        return s16.depthwise_conv_s16(op.attrs["desc"], inputs[0])


class FullyConnectedS16(Conv2dS16):
    kind, base_kind = "fully_connected_s16", "fully_connected"
    kernel, desc_type = "edgec_fully_connected_s16", s16.FULLY_CONNECTED_S16_DESC
    runtime_sources = ("fc/edgec_fully_connected_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        a = op.attrs
        bounds = int16_bounds(out_t.scale, *a["clamp"])
        rows = x_t.elements // x_t.shape[-1]  # linear over the last axis: every leading index is a row
        a["desc"] = _weighted_desc(
            op,
            s16.fully_connected_s16_desc,
            rows,
            a["weight"],
            a["bias"],
            x_t.scale,
            a["weight_scales"],
            out_t.scale,
            act_min=bounds[0],
            act_max=bounds[1],
        )

    def golden(self, op, graph, inputs):
        return s16.fully_connected_s16(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)

    def scratch_bytes(self, op, graph, target) -> int:
        return s16.fully_connected_s16_dsp_scratch_bytes(op.attrs["desc"]) if self.takes_scratch(op) else 0

    def scratch_macro(self, op) -> str | None:
        input_c = op.attrs["desc"]["input_c"]
        return s16.FULLY_CONNECTED_S16_DSP_SCRATCH.call(input_c) if self.takes_scratch(op) else None

    def takes_scratch(self, op) -> bool:
        """Only the DSP kernel: Helium reads the input row in place."""
        return op.attrs.get("isa") == "dsp"


class PoolS16(S16Unit):
    desc_type = s16.POOL_S16_DESC
    runtime_sources = ("pool/edgec_pool_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        if (x_t.scale, x_t.zero_point) != (out_t.scale, out_t.zero_point):
            raise EdgecError(f"{op.source}: pooling must keep its input's qparams")
        a = op.attrs
        if a.get("divisor") == "adaptive":
            raise EdgecError(
                f"{op.source}: adaptive average pooling with uneven windows has no int16 kernel; "
                f"keep it int8 with --int16-layers"
            )
        bounds = int16_bounds(out_t.scale, *a["clamp"])
        a["desc"] = _desc(
            op,
            s16.pool_s16_desc,
            x_t.shape,
            kernel=a["kernel"],
            stride=a["stride"],
            pad=a["pad"][:2],
            out_hw=out_t.shape[1:3],
            divisor=a.get("divisor", "in_bounds"),
            act_min=bounds[0],
            act_max=bounds[1],
        )


class AvgPoolS16(PoolS16):
    kind, base_kind, kernel = "avg_pool2d_s16", "avg_pool2d", "edgec_avg_pool_s16"

    def golden(self, op, graph, inputs):
        return s16.avg_pool_s16(op.attrs["desc"], inputs[0])


class MaxPoolS16(PoolS16):
    kind, base_kind, kernel = "max_pool2d_s16", "max_pool2d", "edgec_max_pool_s16"

    def golden(self, op, graph, inputs):
        return s16.max_pool_s16(op.attrs["desc"], inputs[0])


class ClampS16(S16Unit):
    """A standalone ReLU/ReLU6/clamp of an int16 tensor: edgec_max_pool_s16 over 1x1 windows of
    the flat tensor, its act bounds the clamp (y = clamp(x, act_min, act_max) exactly)."""

    kind, base_kind, kernel, desc_type = "clamp_s16", "clamp", "edgec_max_pool_s16", s16.POOL_S16_DESC
    runtime_sources = ("pool/edgec_pool_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        if (x_t.scale, x_t.zero_point) != (out_t.scale, out_t.zero_point):
            raise EdgecError(f"{op.source}: a standalone activation must keep its input's qparams")
        bounds = int16_bounds(out_t.scale, *op.attrs["clamp"])
        op.attrs["desc"] = s16.pool_s16_desc(
            (1, 1, out_t.elements, 1),
            kernel=(1, 1),
            stride=(1, 1),
            pad=(0, 0),
            out_hw=(1, out_t.elements),
            act_min=bounds[0],
            act_max=bounds[1],
        )

    def golden(self, op, graph, inputs):
        return s16.max_pool_s16(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)


class BinaryS16(S16Unit):
    """add and mul of two int16 activations (same shape: kind 'add'; broadcast: kind 'binary')."""

    kind, base_kind, desc_type = "binary_s16", "binary", s16.BINARY_S16_DESC
    runtime_sources = ("eltwise/edgec_binary_s16.c",)

    def finalize(self, op, graph) -> None:
        a, b, out = (graph.tensors[n] for n in (*op.inputs, *op.outputs))
        bounds = int16_bounds(out.scale, *op.attrs["clamp"])
        shapes = op.attrs.get("shapes") or (a.shape, b.shape)
        build = s16.mul_s16_desc if op.attrs.get("op") == "mul" else s16.add_s16_desc
        op.attrs["desc"] = _desc(op, build, *shapes, a.scale, b.scale, out.scale, act_min=bounds[0], act_max=bounds[1])

    def kernel_function(self, op) -> str:
        return "edgec_mul_s16" if op.attrs.get("op") == "mul" else "edgec_add_s16"

    def in_place(self, op, graph, target):
        """Element i of both inputs is read before element i is written: an input that is not
        broadcast may be overwritten."""
        out = graph.tensors[op.outputs[0]]
        return tuple(InPlace(i, 0) for i, name in enumerate(op.inputs) if graph.tensors[name].shape == out.shape)

    def golden(self, op, graph, inputs):
        shapes = op.attrs.get("shapes") or [graph.tensors[n].shape for n in op.inputs]
        x1, x2 = (np.asarray(x).reshape(shape) for x, shape in zip(inputs, shapes))
        run = s16.mul_s16 if op.attrs.get("op") == "mul" else s16.add_s16
        return run(x1, x2, op.attrs["desc"]).reshape(graph.tensors[op.outputs[0]].shape)


class SoftmaxS16(S16Unit):
    kind, base_kind, kernel, desc_type = "softmax_s16", "softmax", "edgec_softmax_s16", s16.SOFTMAX_S16_DESC
    runtime_sources = ("softmax/edgec_softmax_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        if (out_t.scale, out_t.zero_point) != FIXED_OUTPUT:
            raise EdgecError(
                f"{op.source}: an int16 softmax output must be quantized with scale 1/32768 and "
                f"zero point 0, got ({out_t.scale}, {out_t.zero_point})"
            )
        outer, axis_size, inner = outer_axis_inner(x_t.shape, op.attrs["stored_dim"])
        op.attrs["desc"] = _desc(op, s16.softmax_s16_desc, outer, axis_size, inner, x_t.scale)

    def in_place(self, op, graph, target):
        return (InPlace(0, 0),)  # each row is read whole (its max, its sum) before it is written

    def golden(self, op, graph, inputs):
        return s16.softmax_s16(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)


class LutS16(S16Unit):
    """An elementwise float function (sigmoid, tanh, GELU, ...) as TFLite's interpolated 513-entry
    int16 table (sigmoid and tanh as TFLite's own transforms).

    _DOMAIN_EDGE: a symmetric int16 input holds negative values even where the float input never
    is negative (the sqrt of a sum of squares, an STFT magnitude): a function that is not a number
    below 0 (sqrt, log, a fractional power) takes its value at 0 there; the int8 table, whose
    asymmetric range starts at the observed minimum, refuses such an input instead."""

    kind, base_kind, kernel, desc_type = "lut_s16", "lut", "edgec_lut_s16", s16.LUT_S16_DESC
    runtime_sources = ("activation/edgec_lut_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        function, attrs = op.attrs["function"], op.attrs["function_attrs"]
        if function in s16.LUT_FUNCTIONS and not attrs:
            transform = function
        else:

            def transform(v, f=FLOAT_FUNCTIONS[function]):
                with np.errstate(over="ignore", invalid="ignore"):
                    y = f(np.array([np.float64(v)]), **attrs)[0]
                    if np.isnan(y) and v < 0:  # sqrt, log of a negative: see _DOMAIN_EDGE
                        y = f(np.array([0.0]), **attrs)[0]
                return np.float32(y)

        op.attrs["desc"] = _desc(
            op,
            s16.lut_s16_desc,
            out_t.elements,
            transform,
            x_t.scale,
            out_t.scale,
            input_zp=x_t.zero_point,
            output_zp=out_t.zero_point,
        )

    def in_place(self, op, graph, target):
        return (InPlace(0, 0),)  # edgec_lut_s16 reads element i before writing it

    def golden(self, op, graph, inputs):
        return s16.lut_s16(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)


class SqrtS16(S16Unit):
    """sqrt of an int16 tensor, correctly rounded in integers (edgec_sqrt_s16): an interpolated
    table is coarse near 0, where the root is steepest (an STFT magnitude's small bins)."""

    kind, base_kind, kernel, desc_type = "sqrt_s16", "lut", "edgec_sqrt_s16", s16.SQRT_S16_DESC
    runtime_sources = ("activation/edgec_sqrt_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        op.attrs["desc"] = _desc(op, s16.sqrt_s16_desc, out_t.elements, x_t.scale, out_t.scale)

    def in_place(self, op, graph, target):
        return (InPlace(0, 0),)  # element i is read before it is written

    def golden(self, op, graph, inputs):
        return s16.sqrt_s16(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)


class SquareS16(S16Unit):
    """x ** 2 of an int16 tensor as edgec_mul_s16 of x by itself (the product requantized): an
    interpolated table of x^2 lands steps away from the program on a few % of inputs."""

    kind, base_kind, kernel, desc_type = "square_s16", "lut", "edgec_mul_s16", s16.BINARY_S16_DESC
    runtime_sources = ("eltwise/edgec_binary_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        op.attrs["desc"] = _desc(op, s16.mul_s16_desc, x_t.shape, x_t.shape, x_t.scale, x_t.scale, out_t.scale)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(self.desc_type, p, op.attrs["desc"])
        x = f"(const int16_t *){names.ptr(op.inputs[0])}"
        call.code = f"status |= {self.kernel}(&{p}, {x}, {x}, (int16_t *){names.ptr(op.outputs[0])});"
        return call

    def in_place(self, op, graph, target):
        return (InPlace(0, 0),)  # element i of both operands is read before element i is written

    def golden(self, op, graph, inputs):
        x = np.asarray(inputs[0])
        return s16.mul_s16(x, x, op.attrs["desc"]).reshape(graph.tensors[op.outputs[0]].shape)


def lut_unit(op) -> str:
    """The int16 unit of a table function: sqrt and x ** 2 computed exactly, the others as tables."""
    if op.attrs["function"] == "sqrt":
        return "sqrt_s16"
    if op.attrs["function"] == "pow" and op.attrs["function_attrs"].get("exponent") == 2:
        return "square_s16"
    return "lut_s16"


class RequantizeS16(S16Unit):
    """int8 <-> int16 at new qparams (TFLite's QUANTIZE / Requantize between the two dtypes)."""

    kind, base_kind, desc_type = "requantize_s16", "lut", s16.REQUANTIZE_S16_DESC
    runtime_sources = ("eltwise/edgec_requantize_s16.c",)

    def finalize(self, op, graph) -> None:
        x_t, out_t = _io_tensors(op, graph)
        op.attrs["desc"] = _desc(
            op, s16.requantize_s16_desc, out_t.elements, x_t.scale, x_t.zero_point, out_t.scale, out_t.zero_point
        )

    def kernel_function(self, op) -> str:
        return "edgec_requantize_s8_s16" if op.attrs["widen"] else "edgec_requantize_s16_s8"

    def golden(self, op, graph, inputs):
        run = s16.requantize_s8_s16 if op.attrs["widen"] else s16.requantize_s16_s8
        return run(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)


class CopyS16(S16Unit):
    """Data movement of int16 tensors (permute, slice, cat, expand...): edgec_copy_s8 on their
    bytes, each element copy two byte copies (an innermost loop of 2, or a contiguous run twice
    as long)."""

    kind, base_kind, kernel = "copy_s16", "copy", "edgec_copy_s8"
    runtime_sources = ("movement/edgec_movement_s8.c",)

    def finalize(self, op, graph) -> None:
        op.attrs["copies"] = [(index, _byte_copy(op, desc)) for index, desc in strided_copies(op, graph)]

    def golden(self, op, graph, inputs):
        out = graph.tensors[op.outputs[0]]
        result = np.zeros(out.nbytes, dtype=np.int8)
        for index, desc in op.attrs["copies"]:
            result = copy_s8(desc, np.ascontiguousarray(inputs[index], dtype=np.int16).view(np.int8), result)
        return result.view(np.int16).reshape(out.shape)

    def emit(self, op, graph, names) -> CCall:
        call = CCall("", [], [])
        for number, (index, desc) in enumerate(op.attrs["copies"]):
            p = names.symbol(op, f"desc{number}")
            call.params += descriptor(COPY_DESC, p, desc).params
            call.code += (
                " " if call.code else ""
            ) + f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[index])}, {names.ptr(op.outputs[0])});"
        return call


def _byte_copy(op, desc: dict) -> dict:
    """An element copy descriptor of int16 data as the copy of its bytes: an innermost loop over
    each element's 2 bytes, merged into a contiguous run where there is one (simplify_copy)."""
    try:
        return copy_desc(
            [*desc["dims"], 2],
            [2 * s for s in desc["input_strides"]] + [1],
            [2 * s for s in desc["output_strides"]] + [1],
            input_elements=2 * desc["input_elements"],
            output_elements=2 * desc["output_elements"],
            input_start=2 * desc["input_start"],
            output_start=2 * desc["output_start"],
        )
    except ValueError as exc:
        raise EdgecError(f"{op.source}: int16 data movement: {exc}; keep this layer int8 (--int16-layers)") from None


UNITS = (
    CopyS16(),
    ClampS16(),
    Conv2dS16(),
    DepthwiseConv2dS16(),
    FullyConnectedS16(),
    AvgPoolS16(),
    MaxPoolS16(),
    BinaryS16(),
    SoftmaxS16(),
    LutS16(),
    SqrtS16(),
    SquareS16(),
    RequantizeS16(),
)
# The int8 kind of each unit that has an int16 counterpart.
INT16_KIND = {
    "conv2d": "conv2d_s16",
    "depthwise_conv2d": "depthwise_conv2d_s16",
    "fully_connected": "fully_connected_s16",
    "avg_pool2d": "avg_pool2d_s16",
    "max_pool2d": "max_pool2d_s16",
    "add": "binary_s16",
    "binary": "binary_s16",
    "softmax": "softmax_s16",
    "lut": "lut_s16",
    "copy": "copy_s16",
    "clamp": "clamp_s16",
    "recurrent": "recurrent_s16",  # the LSTM's (edgec.ops.recurrent.RecurrentS16)
}


def _problem(op: Op, graph: Graph) -> str | None:
    """Why `op` (touching an int16 tensor) cannot run an int16 kernel, or None."""
    dtypes = [graph.tensors[name].dtype for name in (*op.inputs, *op.outputs)]
    if op.kind == "lut" and op.attrs["function"] == "requantize":
        return None if sorted(dtypes) == ["int16", "int8"] else "requantize between int16 tensors"
    if set(dtypes) != {"int16"}:
        return f"{op.kind} mixes {' and '.join(sorted(set(dtypes)))} tensors"
    if op.kind == "binary" and (op.attrs["op"] not in ("add", "mul") or op.attrs["constant"] is not None):
        return f"{op.attrs['op']}{' with a constant operand' if op.attrs['constant'] is not None else ''}"
    if op.kind == "lut" and op.attrs["function"] not in FLOAT_FUNCTIONS:
        return op.attrs["function"]
    if op.kind == "recurrent" and op.attrs["cell"] != "lstm":
        return RECURRENT_INT16_PROBLEM
    if op.kind not in INT16_KIND:
        return op.kind
    return None


# Why a GRU cannot be int16 (the quantizer refuses it before lowering; select_int16_kernels after).
RECURRENT_INT16_PROBLEM = "GRU (the int16 recurrent kernel is the LSTM's; keep the GRU int8)"

# The kinds of the int8 units that have an int16 counterpart or need none: what the quantizer lets
# a layer selected for int16 be (reductions and unfolded pads are refused after lowering).
INT16_CAPABLE_KINDS = frozenset(INT16_KIND) | VIEW_KINDS | {"pad", "zeros"}  # zeros: an LSTM's zero state


def _int8_recurrent(op, graph: Graph) -> bool:
    """An int8 recurrent layer whose int16 tensors are only the LSTM cell state its caller holds
    (c0, c_n: TFLite's int16 cell state): its own kernel, not an int16 one."""
    return op.kind == "recurrent" and {graph.tensors[n].dtype for n in (op.inputs[0], op.outputs[0])} == {"int8"}


def select_int16_kernels(graph: Graph) -> None:
    """Every op touching an int16 tensor is compiled by its int16 unit (op.kernel.unit; its
    specialize records the kernel); views stay as they are. One EdgecError lists the ops that have
    none."""
    problems = []
    for op in graph.ops:
        dtypes = {graph.tensors[name].dtype for name in (*op.inputs, *op.outputs)}
        if "int16" not in dtypes or op.kind in VIEW_KINDS or _int8_recurrent(op, graph):
            continue
        problem = _problem(op, graph)
        if problem is not None:
            problems.append(f"  {problem} ({op.name}): {op.source}")
            continue
        if op.kind == "lut" and op.attrs["function"] == "requantize":
            op.kernel = KernelChoice("", "int16", INT16, unit="requantize_s16")
            op.attrs["widen"] = graph.tensors[op.outputs[0]].dtype == "int16"
        else:
            unit = lut_unit(op) if op.kind == "lut" else INT16_KIND[op.kind]
            op.kernel = KernelChoice("", "int16", INT16, unit=unit)
    if problems:
        raise EdgecError("these layers have no int16 kernel; keep them int8 (--int16-layers):\n" + "\n".join(problems))

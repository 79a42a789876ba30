"""Fully connected (nn.Linear): golden int8 kernel and op unit.

C kernel: runtime_c/src/fc/edgec_fully_connected_s8.c (edgec_fully_connected_s8).
"""

from __future__ import annotations

import numpy as np

from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import LINEARS
from edgec.ir import KernelChoice, stored_offsets
from edgec.numerics import INT8_MAX, INT8_MIN, requantize, saturate_int8, wrap_int32
from edgec.ops import int4
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.conv import finalize_output_stage, quantized_bias, weight_bits_attr, weighted_operands
from edgec.ops.kernel import Field, Struct, ints
from edgec.ops.kernel_layout import (
    DSP,
    MVE,
    RowBlocking,
    folded_bias,
    interleave_rows,
    kernel_isa,
    packed_choice,
    widen_taps,
)
from edgec.ops.qspec import ACTIVATION_QSPEC, LINEAR_WEIGHT_QSPEC, annotate_with_output

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
FULLY_CONNECTED_S8_DESC = Struct(
    "edgec_fully_connected_s8_desc",
    (
        *ints("batches input_size output_size"),
        Field("input_offset", doc="-input_zero_point, in [-127, 128]"),
        Field("output_offset", doc="output_zero_point, in [-128, 127]"),
        Field("per_channel", doc="0: multiplier and shift hold one entry for all outputs"),
        *ints("act_min act_max"),
        Field("filter", "const int8_t *", doc="[output_size][input_size]; packed paths: re-laid (see below)"),
        Field("bias", "const int32_t *", doc="[output_size] or NULL; packed paths: the folded bias, required"),
        Field("multiplier", "const int32_t *", doc="[output_size] if per_channel, else [1]"),
        Field("shift", "const int32_t *", doc="as multiplier, each in [-31, 31]"),
    ),
)
STRUCTS = (FULLY_CONNECTED_S8_DESC,)


def fully_connected_s8(
    x, w, bias, multiplier, shift, *, input_zp: int, output_zp: int, act_min: int = INT8_MIN, act_max: int = INT8_MAX
) -> np.ndarray:
    """Golden int8 fully connected layer, bit-exact with edgec_fully_connected_s8.

    x: int8 [B, IN]; w: int8 [OUT, IN] (nn.Linear.weight layout); bias: int32 [OUT] or None.
    multiplier/shift: scalars (per-tensor) or int arrays [OUT] (per-channel), from
    edgec.numerics.quantize_multiplier. Returns int8 [B, OUT]:
        acc = int32(bias[o] + sum_j w[o, j] * (x[b, j] - input_zp))    (wraps like the C)
        y   = clamp(requantize(acc, m[o], s[o]) + output_zp, act_min, act_max)
    """
    x = np.asarray(x)
    w = np.asarray(w)
    if x.dtype != np.int8 or w.dtype != np.int8:
        raise TypeError(f"fully_connected_s8 expects int8 x and w, got {x.dtype} and {w.dtype}")
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"fully_connected_s8 shapes do not match: x {x.shape}, w {w.shape}")
    acc = (x.astype(np.int64) - int(input_zp)) @ w.astype(np.int64).T
    if bias is not None:
        bias = np.asarray(bias, dtype=np.int64)
        if bias.shape != (w.shape[0],):
            raise ValueError(f"bias shape {bias.shape} does not match {w.shape[0]} outputs")
        acc = acc + bias
    # The C accumulates modulo 2^32 (no signed overflow UB); a real model never gets near it.
    acc = wrap_int32(acc)
    y = requantize(acc, np.asarray(multiplier, dtype=np.int64), np.asarray(shift, dtype=np.int64))
    return saturate_int8(y + int(output_zp), act_min, act_max)


# -- the op unit ------------------------------------------------------------------------------

# The packed kernels (edgec_fully_connected_s8_dsp/_mve): outputs per micro-kernel step and filter
# bytes per output and step. The DSP kernel's int8 filter runs in blocks of 6 outputs (its last
# block of the rest in one of 2, 4 or 6), its widened filter (_dsp_wide) in blocks of 4.
FC_BLOCKING = {DSP: RowBlocking(rows=6, group=4), MVE: RowBlocking(rows=4, group=16)}
FC_WIDE_BLOCKING = RowBlocking(rows=4, group=4)


def fc_packed_filter(weights: np.ndarray, isa: str, wide: bool = False) -> np.ndarray:
    """A [rows, K] int8 filter as edgec_fully_connected_s8_dsp (_wide: before widen_taps) or _mve
    reads it: interleave_rows in blocks; on the DSP int8 path the last block of the rest rounded up
    to an even count of rows."""
    blocking = FC_WIDE_BLOCKING if wide else FC_BLOCKING[isa]
    whole = len(weights) // blocking.rows * blocking.rows
    if blocking.rows != 6 or whole == len(weights):
        return interleave_rows(weights, blocking)
    last = RowBlocking(rows=-(-(len(weights) - whole) // 2) * 2, group=4)
    return np.concatenate([interleave_rows(weights[:whole], blocking), interleave_rows(weights[whole:], last)])


def fully_connected_s4(desc: dict, x: np.ndarray) -> np.ndarray:
    """Golden edgec_fully_connected_s4: int8 x [batches, input_c] -> int8 [batches, output_c]."""
    d = desc
    w = int4.unpack_int4(d["filter"], d["output_c"] * d["input_c"]).reshape(d["output_c"], d["input_c"])
    return fully_connected_s8(
        np.asarray(x).reshape(d["batches"], d["input_c"]),
        w,
        d["bias"],
        d["multiplier"],
        d["shift"],
        input_zp=-d["input_offset"],
        output_zp=d["output_offset"],
        act_min=d["act_min"],
        act_max=d["act_max"],
    )


class FullyConnected(OpDef):
    kind = "fully_connected"
    targets = frozenset(LINEARS)
    runtime_sources = ("fc/edgec_fully_connected_s8.c",)
    fuses_activation = True

    def annotate(self, node) -> None:
        annotate_with_output(node, {node.args[0]: ACTIVATION_QSPEC, node.args[1]: LINEAR_WEIGHT_QSPEC})

    def lower(self, ctx, node) -> None:
        x, weight, bias = weighted_operands(ctx, node, "linear")  # x: [..., features], any rank
        out = ctx.output(node)
        scales = np.asarray(weight.scales, dtype=np.float64)
        ctx.add_op(
            self.kind,
            node,
            [x],
            [out],
            weight=weight.value,
            weight_scales=scales,
            bias=quantized_bias(bias, x.scale, np.broadcast_to(scales, (weight.value.shape[0],)), source_line(node)),
            clamp=(None, None),
            **weight_bits_attr(weight),
        )

    def torch_order_tensors(self, op, graph) -> list[str]:
        """Over the last axis of a tensor of rank 3 or more: PyTorch's order."""
        return [*op.inputs, *op.outputs] if len(graph.tensors[op.inputs[0]].shape) > 2 else []

    def relayout(self, op, graph) -> None:
        """A flatten of channels-last data brings the features in stored order: the weight column
        of each feature moves to where the feature is stored."""
        x = graph.tensors[op.inputs[0]]
        if len(x.torch_shape) > 2:  # over the last axis: stored in PyTorch's order (torch_order_tensors)
            return
        base = graph.tensors[graph.storage(op.inputs[0])]
        if base.perm is not None:
            weight = op.attrs["weight"]
            stored = np.empty_like(weight)
            features = tuple(None if axis is None else axis - 1 for axis in base.perm[1:])
            stored[:, stored_offsets(base.torch_shape[1:], features)] = weight
            op.attrs["weight"] = stored

    def finalize(self, op, graph) -> None:
        finalize_output_stage(op, graph)

    def golden(self, op, graph, inputs):
        if int4.is_int4(op):
            return fully_connected_s4(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        a = op.attrs
        rows = x_t.elements // x_t.shape[-1]  # linear over the last axis: every leading index is a row
        return fully_connected_s8(
            inputs[0].reshape(rows, -1),
            a["weight"],
            a["bias"],
            per_tensor_or_channel(a["multiplier"]),
            per_tensor_or_channel(a["shift"]),
            input_zp=x_t.zero_point,
            output_zp=out_t.zero_point,
            act_min=a["act_min"],
            act_max=a["act_max"],
        ).reshape(out_t.shape)

    def specialize(self, op, graph, target) -> None:
        if int4.is_int4(op):
            return int4.specialize(op, graph, target)
        op.attrs["isa"] = kernel_isa(target)
        # --opt speed/auto: the DSP kernel reads its filter widened to int16 (twice the flash)
        op.attrs["wide"] = op.attrs["isa"] == DSP and target.fast_layouts
        op.kernel = self.chosen_kernel(op, target)

    @staticmethod
    def chosen_kernel(op, target) -> KernelChoice:
        """The record of op.attrs' choice (isa, wide: passes/constant_layouts.py may revise it)."""
        isa, wide = op.attrs["isa"], op.attrs["wide"]
        function = "edgec_fully_connected_s8" + ("" if isa is None else f"_{isa}") + ("_wide" if wide else "")
        return packed_choice(function, isa, target, op.attrs)

    def scratch_bytes(self, op, graph, target) -> int:
        return int4.scratch_bytes(op) if int4.is_int4(op) else 0

    def runtime_sources_of(self, op) -> tuple[str, ...]:
        return int4.runtime_sources(op) if int4.is_int4(op) else self.runtime_sources

    def emit(self, op, graph, names) -> CCall:
        if int4.is_int4(op):
            return int4.emit(op, graph, names)
        a = op.attrs
        isa = a.get("isa")
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if isa is None:
            weights, bias = a["weight"], a["bias"]
        else:  # the filter re-laid for the micro-kernel, the input offset folded into the bias
            weights = fc_packed_filter(a["weight"], isa, bool(a.get("wide")))
            if a.get("wide"):  # int16 taps, passed as their (little-endian) bytes
                weights = widen_taps(weights).astype("<i2").view(np.int8)
            bias = folded_bias(a["bias"], a["weight"], x_t.zero_point)
        p = names.symbol(op, "desc")
        call = descriptor(
            FULLY_CONNECTED_S8_DESC,
            p,
            dict(
                batches=x_t.elements // x_t.shape[-1],
                input_size=x_t.shape[-1],
                output_size=out_t.shape[-1],
                input_offset=-x_t.zero_point,
                output_offset=out_t.zero_point,
                per_channel=int(len(a["multiplier"]) > 1),
                act_min=a["act_min"],
                act_max=a["act_max"],
                filter=np.asarray(weights),
                bias=None if bias is None else np.asarray(bias, np.int32),
                multiplier=np.asarray(a["multiplier"], np.int32),
                shift=np.asarray(a["shift"], np.int32),
            ),
        )
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call

    def macs(self, op, graph) -> int:
        x = graph.tensors[op.inputs[0]]
        return int(x.elements // x.shape[-1] * op.attrs["weight"].size)


def per_tensor_or_channel(values: np.ndarray):
    return int(values[0]) if len(values) == 1 else values


UNIT = FullyConnected()

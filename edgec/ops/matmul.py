"""Matrix products of two activations (torch.matmul / bmm, the two products of attention): the
golden int8 kernel, its descriptor and the op unit.

C kernel: runtime_c/src/matmul/edgec_batch_matmul_s8.c (edgec_batch_matmul_s8). The arithmetic is
TFLite Micro's int8 BATCH_MATMUL (tensorflow/lite/kernels/internal/reference/batch_matmul.h,
BatchMatMul with its int8 FullyConnectedParams; CMSIS-NN arm_batch_matmul_s8 computes the same):
both operands carry zero points, there is no bias, and one multiplier for the whole output:

    acc[b, m, n] = sum_k (lhs[b, m, k] + lhs_offset) * (rhs[b, k, n] + rhs_offset)   (int32, wraps)
    out[b, m, n] = clamp(requantize(acc, multiplier, shift) + output_offset, act_min, act_max)

with lhs_offset = -lhs_zp, rhs_offset = -rhs_zp, (multiplier, shift) = QuantizeMultiplier(s_lhs *
s_rhs * alpha / s_out) (alpha = 1, or a positive constant factor that followed the product, such as
attention's 1/sqrt(d), taken in by fold_output_scales) and requantize = arm_nn_requantize
(edgec.numerics.requantize). The batch dimensions broadcast like NumPy's (a broadcast operand is
read in place with stride 0); the right operand is read through two strides, so a transposed
operand (q @ k^T) needs no copy.
"""

from __future__ import annotations

import math

import numpy as np
from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import SOFTMAXES, aten
from edgec.ir import stored_shape
from edgec.numerics import (
    INT8_MAX,
    INT8_MIN,
    activation_bounds,
    quantize_multiplier,
    requantize,
    saturate_int8,
    wrap_int32,
)
from edgec.ops.base import CCall, OpDef, descriptor, require_quantized
from edgec.ops.binary import broadcast_layout
from edgec.ops.kernel import Const, Field, Struct, ints
from edgec.ops.movement import gathered_ids
from edgec.ops.qspec import activation_inputs, annotate_with_output

MATMUL_MAX_BATCH_DIMS = 4  # EDGEC_MATMUL_MAX_BATCH_DIMS

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
MATMUL_BATCH_DIMS = Const("EDGEC_MATMUL_MAX_BATCH_DIMS", MATMUL_MAX_BATCH_DIMS)
BATCH_MATMUL_DESC = Struct(
    "edgec_batch_matmul_desc",
    (
        *ints("batch_rank"),
        Field("batch_dims", count=MATMUL_BATCH_DIMS),
        Field("lhs_batch_strides", count=MATMUL_BATCH_DIMS),
        Field("rhs_batch_strides", count=MATMUL_BATCH_DIMS),
        *ints("rows cols depth rhs_depth_stride rhs_col_stride"),
        Field("lhs_offset", doc="-lhs zero point"),
        Field("rhs_offset", doc="-rhs zero point"),
        Field("output_offset", doc="output zero point"),
        *ints("multiplier shift act_min act_max"),
    ),
)
STRUCTS = (BATCH_MATMUL_DESC,)


def batch_matmul_desc(
    lhs_shape,
    rhs_shape,
    lhs_qparams,
    rhs_qparams,
    out_qparams,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    *,
    rhs_transposed: bool = False,
    rhs_strides=None,
    alpha: float = 1.0,
) -> dict:
    """edgec_batch_matmul_desc fields (declaration order) for lhs [..., M, K] @ rhs [..., K, N],
    lhs contiguous. The right operand is contiguous too, or stored [..., N, K] with rhs_transposed
    (its transpose is multiplied), or read in place from another tensor with `rhs_strides` (one
    element stride per axis of rhs_shape [..., K, N]). qparams are (scale, zero_point) pairs; the
    product is scaled by `alpha` > 0 (its requantization multiplier is s_lhs s_rhs alpha / s_out).
    Raises ValueError beyond the kernel."""
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    if rhs_strides is not None:
        return _strided_desc(
            lhs_shape, rhs_shape, tuple(rhs_strides), lhs_qparams, rhs_qparams, out_qparams, act_min, act_max, alpha
        )
    if len(lhs_shape) < 2 or len(rhs_shape) < 2:
        raise ValueError("matmul needs operands of rank 2 or more")
    rows, depth = lhs_shape[-2:]
    cols, rhs_depth = (rhs_shape[-2], rhs_shape[-1]) if rhs_transposed else (rhs_shape[-1], rhs_shape[-2])
    if depth != rhs_depth:
        raise ValueError(f"matmul of {list(lhs_shape)} and {list(rhs_shape)}: inner dimensions differ")
    if min(rows, cols, depth) < 1:
        raise ValueError("matmul dimensions must be positive")
    dims, lhs_strides, rhs_strides = broadcast_layout(lhs_shape[:-2] or (1,), rhs_shape[:-2] or (1,))
    if dims == (1,):
        dims, lhs_strides, rhs_strides = (), (), ()
    if len(dims) > MATMUL_MAX_BATCH_DIMS:
        raise ValueError(f"matmul batch broadcast needs {len(dims)} loop levels (at most {MATMUL_MAX_BATCH_DIMS})")
    multiplier, shift = quantize_multiplier(lhs_qparams[0] * rhs_qparams[0] * alpha / out_qparams[0])
    pad = (0,) * (MATMUL_MAX_BATCH_DIMS - len(dims))
    return {
        "batch_rank": len(dims),
        "batch_dims": tuple(dims) + pad,
        "lhs_batch_strides": tuple(s * rows * depth for s in lhs_strides) + pad,
        "rhs_batch_strides": tuple(s * depth * cols for s in rhs_strides) + pad,
        "rows": rows,
        "cols": cols,
        "depth": depth,
        "rhs_depth_stride": 1 if rhs_transposed else cols,
        "rhs_col_stride": depth if rhs_transposed else 1,
        "lhs_offset": -int(lhs_qparams[1]),
        "rhs_offset": -int(rhs_qparams[1]),
        "output_offset": int(out_qparams[1]),
        "multiplier": multiplier,
        "shift": shift,
        "act_min": int(act_min),
        "act_max": int(act_max),
    }


def _strided_desc(
    lhs_shape, rhs_shape, rhs_strides, lhs_qparams, rhs_qparams, out_qparams, act_min, act_max, alpha
) -> dict:
    """batch_matmul_desc for a right operand read through explicit strides (no batch merging)."""
    rank = max(len(lhs_shape), len(rhs_shape))
    lhs_batch = (1,) * (rank - len(lhs_shape)) + lhs_shape[:-2]
    rhs_batch = (1,) * (rank - len(rhs_shape)) + rhs_shape[:-2]
    rhs_batch_strides = (0,) * (rank - len(rhs_shape)) + rhs_strides[:-2]
    lhs_batch_strides = contiguous_batch_strides(lhs_batch, lhs_shape[-2] * lhs_shape[-1])
    dims, lhs_steps, rhs_steps = [], [], []
    for size_l, size_r, step_l, step_r in zip(lhs_batch, rhs_batch, lhs_batch_strides, rhs_batch_strides):
        if size_l != size_r and 1 not in (size_l, size_r):
            raise ValueError(f"matmul batch dimensions {list(lhs_batch)} and {list(rhs_batch)} do not broadcast")
        if max(size_l, size_r) > 1:
            dims.append(max(size_l, size_r))
            lhs_steps.append(step_l if size_l > 1 else 0)
            rhs_steps.append(step_r if size_r > 1 else 0)
    desc = batch_matmul_desc(
        lhs_shape[-2:], rhs_shape[-2:], lhs_qparams, rhs_qparams, out_qparams, act_min, act_max, alpha=alpha
    )
    if len(dims) > MATMUL_MAX_BATCH_DIMS:
        raise ValueError(f"matmul batch broadcast needs {len(dims)} loop levels (at most {MATMUL_MAX_BATCH_DIMS})")
    pad = (0,) * (MATMUL_MAX_BATCH_DIMS - len(dims))
    desc.update(
        batch_rank=len(dims),
        batch_dims=tuple(dims) + pad,
        lhs_batch_strides=tuple(lhs_steps) + pad,
        rhs_batch_strides=tuple(rhs_steps) + pad,
        rhs_depth_stride=rhs_strides[-2],
        rhs_col_stride=rhs_strides[-1],
    )
    return desc


def contiguous_batch_strides(batch, block: int) -> tuple[int, ...]:
    strides, step = [], block
    for size in reversed(batch):
        strides.insert(0, step)
        step *= size
    return tuple(strides)


def batch_matmul_s8(lhs: np.ndarray, rhs: np.ndarray, desc: dict) -> np.ndarray:
    """Golden int8 batch matmul, bit-exact with edgec_batch_matmul_s8: the flat contiguous
    operands read as `desc` describes them; returns the flat output [batch..., rows, cols].
    Arithmetic: see the module docstring."""
    rank = desc["batch_rank"]
    dims = desc["batch_dims"][:rank]
    rows, cols, depth = desc["rows"], desc["cols"], desc["depth"]
    batch_index = np.indices(dims).reshape(rank, -1).T if rank else np.zeros((1, 0), dtype=np.int64)
    lhs_base = batch_index @ np.asarray(desc["lhs_batch_strides"][:rank], dtype=np.int64)
    rhs_base = batch_index @ np.asarray(desc["rhs_batch_strides"][:rank], dtype=np.int64)
    m, k, n = np.arange(rows), np.arange(depth), np.arange(cols)
    lhs_at = lhs_base[:, None, None] + m[None, :, None] * depth + k[None, None, :]  # [B, M, K]
    rhs_at = (
        rhs_base[:, None, None]
        + k[None, :, None] * desc["rhs_depth_stride"]
        + n[None, None, :] * desc["rhs_col_stride"]
    )  # [B, K, N]
    a = np.asarray(lhs, dtype=np.int64).ravel()[lhs_at] + desc["lhs_offset"]
    b = np.asarray(rhs, dtype=np.int64).ravel()[rhs_at] + desc["rhs_offset"]
    acc = wrap_int32(np.matmul(a, b))
    y = requantize(acc, desc["multiplier"], desc["shift"]) + desc["output_offset"]
    return saturate_int8(y, desc["act_min"], desc["act_max"]).ravel()


# -- the op unit ------------------------------------------------------------------------------


class MatMul(OpDef):
    """torch.matmul / bmm of two activations of rank >= 2 (one constant matrix makes it a linear
    layer before quantization: normalize's _constant_matmul_as_linear)."""

    kind, c_function = "batch_matmul", "edgec_batch_matmul_s8"
    family = "matmul"
    targets = frozenset({aten.matmul.default, aten.bmm.default})
    runtime_sources = ("matmul/edgec_batch_matmul_s8.c",)
    fuses_activation = True
    limits = "both operands of rank 2 or more"

    def annotate(self, node) -> None:
        """A softmax operand (attention weights) is read at the softmax's fixed qparams: an
        observer of its own would only add a requantization of the whole score matrix."""
        inputs = activation_inputs(node, 2)
        for arg in inputs:
            if arg.op == "call_function" and arg.target in SOFTMAXES:
                inputs[arg] = SharedQuantizationSpec(arg)
        annotate_with_output(node, inputs)

    def check(self, node) -> str | None:
        shapes = [a.meta["val"].shape for a in node.args[:2] if hasattr(a, "meta") and "val" in a.meta]
        if len(shapes) == 2 and min(len(s) for s in shapes) < 2:
            return f"{node.target} of a vector (rank-1 operand)"
        return None

    def lower(self, ctx, node) -> None:
        constants = [ctx.constant(a).value.shape for a in node.args[:2] if not ctx.is_tensor(a)]
        if constants:
            count = math.prod(constants[0][:-2])
            raise EdgecError(
                f"{source_line(node)}: matmul with a constant operand of shape {list(constants[0])}: "
                f"{count} different constant matrices (one matrix is a linear layer)"
            )
        lhs, rhs = (ctx.tensor(a) for a in node.args[:2])
        ctx.add_op(self.kind, node, [lhs, rhs], [ctx.output(node)], clamp=(None, None))

    def torch_order_tensors(self, op, graph) -> list[str]:
        return [*op.inputs, *op.outputs]

    def finalize(self, op, graph) -> None:
        require_quantized(op, graph, "matmul")
        lhs, rhs = (graph.tensors[name] for name in op.inputs)
        out = graph.tensors[op.outputs[0]]
        bounds = activation_bounds(out.zero_point, out.scale, *op.attrs["clamp"])
        rhs_shape, rhs_strides = op.attrs.get("rhs_view", (rhs.shape, None))
        try:
            op.attrs["desc"] = batch_matmul_desc(
                lhs.shape,
                rhs_shape,
                (lhs.scale, lhs.zero_point),
                (rhs.scale, rhs.zero_point),
                (out.scale, out.zero_point),
                *bounds,
                rhs_transposed=op.attrs.get("rhs_transposed", False),
                rhs_strides=rhs_strides,
                alpha=op.attrs.get("alpha", 1.0),
            )
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {exc}") from None

    def golden(self, op, graph, inputs):
        rhs = np.asarray(inputs[1]).ravel()[op.attrs.get("rhs_start", 0) :]
        return batch_matmul_s8(inputs[0], rhs, op.attrs["desc"]).reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(BATCH_MATMUL_DESC, p, op.attrs["desc"])
        start = op.attrs.get("rhs_start", 0)
        rhs = names.ptr(op.inputs[1]) + (f" + {start}" if start else "")
        call.code = (
            f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {rhs}, {names.ptr(op.outputs[0])});"
        )
        return call

    def macs(self, op, graph) -> int:
        d = op.attrs.get("desc")
        if d is None:
            return 0
        return int(math.prod(d["batch_dims"][: d["batch_rank"]]) * d["rows"] * d["cols"] * d["depth"])


def fold_output_scales(graph) -> None:
    """A matmul whose only reader multiplies it by a positive constant (attention's 1/sqrt(d))
    takes the factor into its requantization and the product's qparams: one int8 rounding and one
    pass over the score matrix fewer. Runs after fuse_activations (the product's clamps come along)."""
    for mul in [op for op in graph.ops if op.kind == "binary" and op.attrs["op"] == "mul"]:
        constant = mul.attrs["constant"]
        if constant is None or constant.values.size != 1 or len(mul.inputs) != 1:
            continue
        factor = constant.scale * (int(constant.values.reshape(-1)[0]) - constant.zero_point)
        matmul = graph.producer(mul.inputs[0])
        if (
            factor <= 0
            or matmul is None
            or matmul.kind != MatMul.kind
            or matmul.attrs["clamp"] != (None, None)
            or graph.consumers(mul.inputs[0]) != [mul]
            or mul.inputs[0] in graph.outputs
        ):
            continue
        matmul.attrs.update(alpha=matmul.attrs.get("alpha", 1.0) * factor, clamp=mul.attrs["clamp"])
        matmul.outputs = list(mul.outputs)
        graph.ops.remove(mul)
    graph.remove_unused_tensors()


def place_right_operands(graph) -> None:
    """Where a matmul's right operand is a copy that only it reads (the k^T and v of attention:
    slices of the qkv projection, transposed), let the matmul read the copy's source in place
    when that source holds the operand contiguous along the depth (the fast kernel paths: q @ k^T
    reads k rows of the qkv projection), else let the copy store the operand transposed, so that
    the depth is contiguous for the kernel. Runs after fuse_copies, before finalize."""
    for op in [op for op in graph.ops if op.kind == MatMul.kind]:
        chain = _operand_chain(graph, op)
        if chain is None:
            continue
        copy, views = chain
        rhs = graph.tensors[op.inputs[1]]
        ids = gathered_ids(copy, graph).reshape(rhs.shape)
        affine = affine_strides(ids)
        if affine is not None and affine[1][-2] == 1:
            start, strides = affine
            op.inputs[1] = copy.inputs[0]
            op.attrs.update(rhs_view=(rhs.shape, strides), rhs_start=start)
            for dropped in (copy, *views):
                graph.ops.remove(dropped)
        elif rhs.shape[-1] > 1:  # the copy (and the views of it) store the last two axes swapped
            for name in (copy.outputs[0], *(view.outputs[0] for view in views)):
                tensor = graph.tensors[name]
                rank = len(tensor.shape)
                tensor.perm = (*range(rank - 2), rank - 1, rank - 2)
                tensor.shape = stored_shape(tensor.shape, tensor.perm)
            op.attrs["rhs_transposed"] = True
    graph.remove_unused_tensors()


def _operand_chain(graph, op):
    """(copy, views) when op's right operand is the output of a one-input copy, through free views
    that keep the last two dimensions, each read only by the next; else None."""
    if op.inputs[0] == op.inputs[1]:
        return None
    name, views = op.inputs[1], []
    shape = graph.tensors[name].shape
    while True:
        producer = graph.producer(name)
        if (
            producer is None
            or graph.consumers(name) != [views[-1] if views else op]
            or name in graph.outputs
            or graph.tensors[name].perm is not None
            or len(graph.tensors[name].shape) < 2
            or graph.tensors[name].shape[-2:] != shape[-2:]
        ):
            return None
        if producer.kind == "copy":
            return (producer, views) if len(producer.inputs) == 1 else None
        if producer.kind != "reshape":
            return None
        views.append(producer)
        name = producer.inputs[0]


def affine_strides(ids: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """(start, strides) with ids[i_0, ..., i_k] = start + sum_d i_d * strides[d] (strides >= 0),
    or None."""
    start = int(ids.reshape(-1)[0])
    strides = []
    for axis, size in enumerate(ids.shape):
        step = 0
        if size > 1:
            step = int(np.take(ids, 1, axis=axis).reshape(-1)[0]) - start
        strides.append(step)
    if min(strides, default=0) < 0:
        return None
    expected = start + sum(
        np.arange(size).reshape([-1 if d == axis else 1 for d in range(ids.ndim)]) * step
        for axis, (size, step) in enumerate(zip(ids.shape, strides))
    )
    return (start, tuple(strides)) if np.array_equal(ids, np.broadcast_to(expected, ids.shape)) else None


UNITS = (MatMul(),)

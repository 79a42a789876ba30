"""Matrix products of two activations (torch.matmul / bmm, the two products of attention): the
golden int8 kernel, its descriptor and the op unit.

C kernel: runtime_c/src/matmul/edgec_batch_matmul_s8.c (edgec_batch_matmul_s8). The arithmetic is
TFLite Micro's int8 BATCH_MATMUL (tensorflow/lite/kernels/internal/reference/batch_matmul.h,
BatchMatMul with its int8 FullyConnectedParams; CMSIS-NN arm_batch_matmul_s8 computes the same):
both operands carry zero points, there is no bias, and one multiplier for the whole output:

    acc[b, m, n] = sum_k (lhs[b, m, k] + lhs_offset) * (rhs[b, k, n] + rhs_offset)   (int32, wraps)
    out[b, m, n] = clamp(requantize(acc, multiplier, shift) + output_offset, act_min, act_max)

with lhs_offset = -lhs_zp, rhs_offset = -rhs_zp, (multiplier, shift) = QuantizeMultiplier(s_lhs *
s_rhs / s_out) and requantize = arm_nn_requantize (edgec.numerics.requantize). The batch
dimensions broadcast like NumPy's (a broadcast operand is read in place with stride 0); the right
operand is read through two strides, so a transposed operand (q @ k^T) needs no copy.
"""
from __future__ import annotations

import math

import numpy as np
from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

from edgec.errors import EdgecError
from edgec.frontend import source_line
from edgec.numerics import INT8_MAX, INT8_MIN, activation_bounds, quantize_multiplier, requantize, saturate_int8, wrap_int32
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.binary import broadcast_layout
from edgec.ops.qspec import activation_inputs, annotate_with_output
from edgec.torch_ops import SOFTMAXES, aten

MATMUL_MAX_BATCH_DIMS = 4  # EDGEC_MATMUL_MAX_BATCH_DIMS


def batch_matmul_desc(lhs_shape, rhs_shape, lhs_qparams, rhs_qparams, out_qparams,
                      act_min: int = INT8_MIN, act_max: int = INT8_MAX, *, rhs_transposed: bool = False) -> dict:
    """edgec_batch_matmul_desc fields (declaration order) for lhs [..., M, K] @ rhs [..., K, N],
    both contiguous; with rhs_transposed the right operand is stored [..., N, K] (its transpose is
    multiplied). qparams are (scale, zero_point) pairs. Raises ValueError beyond the kernel."""
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
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
    multiplier, shift = quantize_multiplier(lhs_qparams[0] * rhs_qparams[0] / out_qparams[0])
    pad = (0,) * (MATMUL_MAX_BATCH_DIMS - len(dims))
    return {
        "batch_rank": len(dims),
        "batch_dims": tuple(dims) + pad,
        "lhs_batch_strides": tuple(s * rows * depth for s in lhs_strides) + pad,
        "rhs_batch_strides": tuple(s * depth * cols for s in rhs_strides) + pad,
        "rows": rows, "cols": cols, "depth": depth,
        "rhs_depth_stride": 1 if rhs_transposed else cols,
        "rhs_col_stride": depth if rhs_transposed else 1,
        "lhs_offset": -int(lhs_qparams[1]), "rhs_offset": -int(rhs_qparams[1]),
        "output_offset": int(out_qparams[1]), "multiplier": multiplier, "shift": shift,
        "act_min": int(act_min), "act_max": int(act_max),
    }


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
    lhs_at = lhs_base[:, None, None] + m[None, :, None] * depth + k[None, None, :]                  # [B, M, K]
    rhs_at = rhs_base[:, None, None] + k[None, :, None] * desc["rhs_depth_stride"] \
        + n[None, None, :] * desc["rhs_col_stride"]                                                 # [B, K, N]
    a = np.asarray(lhs, dtype=np.int64).ravel()[lhs_at] + desc["lhs_offset"]
    b = np.asarray(rhs, dtype=np.int64).ravel()[rhs_at] + desc["rhs_offset"]
    acc = wrap_int32(np.matmul(a, b))
    y = requantize(acc, desc["multiplier"], desc["shift"]) + desc["output_offset"]
    return saturate_int8(y, desc["act_min"], desc["act_max"]).ravel()


# -- the op unit ------------------------------------------------------------------------------

class MatMul(OpDef):
    """torch.matmul / bmm of two activations of rank >= 2 (a constant operand is a linear layer)."""
    kind = "batch_matmul"
    family = "matmul"
    targets = frozenset({aten.matmul.default, aten.bmm.default})
    runtime_sources = ("matmul/edgec_batch_matmul_s8.c",)
    fuses_activation = True

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
        if not all(ctx.is_tensor(a) for a in node.args[:2]):
            raise EdgecError(f"{source_line(node)}: matmul with a constant operand; write it as a linear layer")
        lhs, rhs = (ctx.tensor(a) for a in node.args[:2])
        ctx.add_op(self.kind, node, [lhs, rhs], [ctx.output(node)], clamp=(None, None))

    def torch_order_tensors(self, op, graph) -> list[str]:
        return [*op.inputs, *op.outputs]

    def relayout(self, op, graph) -> None:
        for name in (*op.inputs, *op.outputs):
            if graph.tensors[name].perm is not None:
                raise EdgecError(f"{op.source}: matmul operand {name} is stored channels last; "
                                 "edgec runs matmul on tensors in PyTorch's axis order")

    def finalize(self, op, graph) -> None:
        lhs, rhs = (graph.tensors[name] for name in op.inputs)
        out = graph.tensors[op.outputs[0]]
        bounds = activation_bounds(out.zero_point, out.scale, *op.attrs["clamp"])
        try:
            op.attrs["desc"] = batch_matmul_desc(lhs.shape, rhs.shape, (lhs.scale, lhs.zero_point),
                                                 (rhs.scale, rhs.zero_point), (out.scale, out.zero_point), *bounds,
                                                 rhs_transposed=op.attrs.get("rhs_transposed", False))
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {exc}") from None

    def golden(self, op, graph, inputs):
        return batch_matmul_s8(inputs[0], inputs[1], op.attrs["desc"]).reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor("edgec_batch_matmul_desc", p, op.attrs["desc"])
        call.code = (f"status |= edgec_batch_matmul_s8(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.inputs[1])}, "
                     f"{names.ptr(op.outputs[0])});")
        return call

    def macs(self, op, graph) -> int:
        d = op.attrs.get("desc")
        if d is None:
            return 0
        return int(math.prod(d["batch_dims"][:d["batch_rank"]]) * d["rows"] * d["cols"] * d["depth"])


UNITS = (MatMul(),)

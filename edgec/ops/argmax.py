"""argmax and topk over one axis as model outputs: int32 indices (argmax: the first maximum, as
PyTorch), read from the int8 activations (quantization keeps their order; ties the int8 grid
makes take the lowest index first), runtime_c/src/movement/edgec_argmax_s8.c. topk's values are
the input's own int8 bytes (its qparams). The input is read in PyTorch's axis order (a
channels-last tensor goes through a copy), the outputs written so. topk(k=1) never reaches this
unit: passes/normalize.py makes it amax and argmax."""

from __future__ import annotations

import math

import numpy as np

from edgec.frontend.torch_ops import ARGMAXES, GETITEM, aten
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.kernel import Field, Struct, ints
from edgec.ops.qspec import ACTIVATION_QSPEC, annotate

# The C struct of this unit's kernel (edgec.ops.kernel); edgec_nn.h's is generated from it.
ARGMAX_DESC = Struct(
    "edgec_argmax_desc",
    (
        Field("outer", doc="the input viewed as [outer][axis_size][inner], contiguous"),
        *ints("axis_size inner"),
    ),
)
TOPK_DESC = Struct(
    "edgec_topk_desc",
    (
        Field("outer", doc="the input viewed as [outer][axis_size][inner], contiguous"),
        *ints("axis_size inner"),
        Field("k", doc="1..axis_size: the output is [outer][k][inner]"),
        Field("largest", doc="1: the k largest, in descending order; 0: the k smallest, ascending"),
    ),
)
STRUCTS = (ARGMAX_DESC, TOPK_DESC)


def argmax_desc(shape, axis: int) -> dict:
    """Fields of the C struct edgec_argmax_desc: the input viewed as [outer][axis_size][inner]."""
    shape = tuple(int(d) for d in shape)
    axis = axis % len(shape)
    return {"outer": math.prod(shape[:axis]), "axis_size": shape[axis], "inner": math.prod(shape[axis + 1 :])}


def argmax_s8(x: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_argmax_s8: int32 [outer][inner], each the first index of the maximum."""
    rows = np.asarray(x, np.int8).reshape(desc["outer"], desc["axis_size"], desc["inner"])
    return rows.argmax(axis=1).astype(np.int32)


def topk_desc(shape, axis: int, k: int, largest: bool) -> dict:
    """Fields of the C struct edgec_topk_desc."""
    return {**argmax_desc(shape, axis), "k": int(k), "largest": int(bool(largest))}


def topk_s8(x: np.ndarray, desc: dict) -> tuple[np.ndarray, np.ndarray]:
    """Golden edgec_topk_s8: (values int8, indices int32), each [outer][k][inner]: the k largest
    (smallest) values along the axis, best first, equal values in index order."""
    rows = np.asarray(x, np.int8).reshape(desc["outer"], desc["axis_size"], desc["inner"]).astype(np.int64)
    keys = -rows if desc["largest"] else rows
    order = np.argsort(keys, axis=1, kind="stable")[:, : desc["k"], :]
    return np.take_along_axis(rows, order, axis=1).astype(np.int8), order.astype(np.int32)


class ArgMax(OpDef):
    kind = "argmax"
    targets = frozenset(ARGMAXES)
    runtime_sources = ("movement/edgec_argmax_s8.c",)
    c_function = "edgec_argmax_s8"
    limits = "over one given axis (dim), its result a model output or read by nothing else edgec runs"

    def annotate(self, node) -> None:
        annotate(node, {node.args[0]: ACTIVATION_QSPEC}, None)  # indices: no quantization

    def check(self, node) -> str | None:
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        if dim is None:
            return "argmax without dim (over the flattened tensor)"
        if any(user.op != "output" for user in node.users):
            return "argmax whose indices another operator reads (only a model output)"
        return None

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        out = ctx.output(node)
        out.scale, out.zero_point, out.dtype = 1.0, 0, "int32"  # the indices themselves
        ctx.add_op(self.kind, node, [x], [out], dim=int(node.args[1]) % len(x.shape))

    def torch_order_tensors(self, op, graph) -> list[str]:
        return [op.inputs[0], op.outputs[0]]

    def finalize(self, op, graph) -> None:
        op.attrs["desc"] = argmax_desc(graph.tensors[op.inputs[0]].shape, op.attrs["dim"])

    def golden(self, op, graph, inputs):
        return argmax_s8(inputs[0], op.attrs["desc"]).reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(ARGMAX_DESC, p, op.attrs["desc"])
        output = f"(int32_t *)(void *){names.ptr(op.outputs[0])}"
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {output});"
        return call


class TopKItem:
    """topk's tuple result: item 0 (values) and item 1 (indices) each lower to their own call."""

    def __init__(self, node):
        self.node = node

    def lower_item(self, ctx, getitem, item: int) -> None:
        x = ctx.tensor(self.node.args[0])
        out = ctx.output(getitem)
        if item == 1:
            out.scale, out.zero_point, out.dtype = 1.0, 0, "int32"  # the indices themselves
        else:
            out.scale, out.zero_point = x.scale, x.zero_point  # the input's own bytes
        k, dim, largest = _topk_options(self.node)
        ctx.add_op("topk", getitem, [x], [out], dim=dim % len(x.shape), k=k, largest=largest, item=item)


def _topk_options(node) -> tuple[int, int, bool]:
    options = dict(zip(("k", "dim", "largest", "sorted"), node.args[1:]), **node.kwargs)
    return int(options["k"]), int(options.get("dim", -1)), bool(options.get("largest", True))


class TopK(OpDef):
    kind = "topk"
    targets = frozenset({aten.topk.default})
    runtime_sources = ("movement/edgec_argmax_s8.c",)
    c_function = "edgec_topk_s8"
    limits = "over one axis, sorted; its values and indices model outputs or read by nothing else edgec runs"

    def annotate(self, node) -> None:
        annotate(node, {node.args[0]: ACTIVATION_QSPEC}, None)  # values: the input's bytes; indices: none

    def check(self, node) -> str | None:
        options = dict(zip(("k", "dim", "largest", "sorted"), node.args[1:]), **node.kwargs)
        if not options.get("sorted", True):
            return "topk(sorted=False)"
        if any(user.target is not GETITEM or any(u.op != "output" for u in user.users) for user in node.users):
            return "topk whose values or indices another operator reads (only model outputs)"
        return None

    def lower(self, ctx, node) -> None:
        ctx.values[node.name] = TopKItem(node)

    def torch_order_tensors(self, op, graph) -> list[str]:
        return [op.inputs[0], op.outputs[0]]

    def finalize(self, op, graph) -> None:
        op.attrs["desc"] = topk_desc(
            graph.tensors[op.inputs[0]].shape, op.attrs["dim"], op.attrs["k"], op.attrs["largest"]
        )

    def golden(self, op, graph, inputs):
        result = topk_s8(inputs[0], op.attrs["desc"])[op.attrs["item"]]
        return result.reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(TOPK_DESC, p, op.attrs["desc"])
        out = names.ptr(op.outputs[0])
        values, indices = ("NULL", f"(int32_t *)(void *){out}") if op.attrs["item"] else (out, "NULL")
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {values}, {indices});"
        return call


UNITS = (ArgMax(), TopK())

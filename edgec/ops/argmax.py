"""argmax over one axis as a model output: int32 indices (the first maximum, as PyTorch), read
from the int8 activations (quantization keeps their order; ties the int8 grid makes take the
first), runtime_c/src/movement/edgec_argmax_s8.c. The input is read in PyTorch's axis order (a
channels-last tensor goes through a copy), the output written so."""

from __future__ import annotations

import math

import numpy as np

from edgec.frontend.torch_ops import ARGMAXES
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
STRUCTS = (ARGMAX_DESC,)


def argmax_desc(shape, axis: int) -> dict:
    """Fields of the C struct edgec_argmax_desc: the input viewed as [outer][axis_size][inner]."""
    shape = tuple(int(d) for d in shape)
    axis = axis % len(shape)
    return {"outer": math.prod(shape[:axis]), "axis_size": shape[axis], "inner": math.prod(shape[axis + 1 :])}


def argmax_s8(x: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_argmax_s8: int32 [outer][inner], each the first index of the maximum."""
    rows = np.asarray(x, np.int8).reshape(desc["outer"], desc["axis_size"], desc["inner"])
    return rows.argmax(axis=1).astype(np.int32)


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


UNITS = (ArgMax(),)

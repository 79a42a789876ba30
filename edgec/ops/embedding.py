"""nn.Embedding over token ids given as a model input: a gather of int8 rows.

The ids are an int32 model input (a PyTorch int64 or int32 input: the generated API takes
`const int32_t *`). The table is the float weight quantized once, at compile time, to the
embedding's output qparams exactly as the program's quantize does (float32 x * (1/scale), halves to
even, saturated): each output row is then the program's quantized row, bit for bit, and the kernel
only copies bytes (runtime_c/src/movement/edgec_embedding_s8.c). An id outside [0, rows) is
clamped to the nearest row (PyTorch raises an IndexError; a device cannot): a defined result,
documented in the generated header, never a read outside the table.
"""

from __future__ import annotations

import numpy as np

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import EMBEDDINGS
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.kernel import Field, Struct, ints
from edgec.ops.qspec import ACTIVATION_QSPEC, annotate

# The C struct of this unit's kernel (edgec.ops.kernel); edgec_nn.h's is generated from it.
EMBEDDING_DESC = Struct(
    "edgec_embedding_desc",
    (
        Field("count", doc="ids to look up; the output is [count][dim]"),
        *ints("rows dim", rows="table rows: an id is clamped to [0, rows - 1]", dim="int8 values per row"),
        Field("table", "const int8_t *", doc="[rows][dim], quantized at the output's qparams"),
    ),
)
STRUCTS = (EMBEDDING_DESC,)


def quantize_table(weight: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """The float table as the program's quantize_per_tensor turns each looked-up row into int8:
    float32 x * float32(1/scale), rounded half to even, plus the zero point, saturated."""
    scaled = np.asarray(weight, np.float32) * np.float32(1.0 / scale)
    return np.clip(np.rint(scaled).astype(np.int64) + zero_point, -128, 127).astype(np.int8)


def embedding_s8(ids: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_embedding_s8: [count][dim] int8, row id (clamped to [0, rows - 1]) of the table."""
    rows = np.clip(np.asarray(ids, np.int64).reshape(-1), 0, desc["rows"] - 1)
    return desc["table"].reshape(desc["rows"], desc["dim"])[rows]


class Embedding(OpDef):
    kind = "embedding"
    targets = frozenset(EMBEDDINGS)
    runtime_sources = ("movement/edgec_embedding_s8.c",)
    c_function = "edgec_embedding_s8"
    limits = "ids an int32/int64 model input; an id outside [0, num_embeddings) reads the nearest row (clamped)"

    def annotate(self, node) -> None:
        annotate(node, {}, ACTIVATION_QSPEC)  # the weight stays float: lowering quantizes it at the output's qparams

    def check(self, node) -> str | None:
        ids = node.args[1]
        if not isinstance(ids, type(node)) or ids.op != "placeholder":
            return "embedding whose ids are not a model input (ids computed in the model)"
        if node.args[0].op != "get_attr":
            return "embedding whose table is not a constant weight"
        return None

    def lower(self, ctx, node) -> None:
        weight = ctx.constant(node.args[0])
        ids = ctx.tensor(node.args[1])
        if ids.dtype != "int32":
            raise EdgecError(f"{source_line(node)}: embedding ids must be an integer model input ({ids.name})")
        table = np.asarray(weight.value, np.float64)
        if weight.quantized:  # a program that quantized the table: the values its dequantize gives
            table = (table - weight.zero_points.reshape(-1, 1)) * weight.scales.reshape(-1, 1)
        if table.ndim != 2:
            raise EdgecError(
                f"{source_line(node)}: embedding table of shape {list(table.shape)} (expected [rows, dim])"
            )
        out = ctx.output(node)
        ctx.add_op(self.kind, node, [ids], [out], table=table.astype(np.float32))

    def torch_order_tensors(self, op, graph) -> list[str]:
        return [op.inputs[0], op.outputs[0]]

    def finalize(self, op, graph) -> None:
        out = graph.tensors[op.outputs[0]]
        table = op.attrs["table"]
        op.attrs["desc"] = {
            "count": graph.tensors[op.inputs[0]].elements,
            "rows": table.shape[0],
            "dim": table.shape[1],
            "table": quantize_table(table, out.scale, out.zero_point).reshape(-1),
        }

    def golden(self, op, graph, inputs):
        return embedding_s8(inputs[0], op.attrs["desc"]).reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(EMBEDDING_DESC, p, op.attrs["desc"])
        ids = f"(const int32_t *)(const void *){names.ptr(op.inputs[0])}"
        call.code = f"status |= {op.kernel.function}(&{p}, {ids}, {names.ptr(op.outputs[0])});"
        return call


UNITS = (Embedding(),)

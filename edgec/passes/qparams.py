"""Qparams that must agree: an op whose kernel moves or compares values (OpDef.keeps_qparams:
pooling, views, copies, padding, standalone clamps; minimum, maximum) gets inputs at its output's qparams. Where a
program quantized them differently (another tool's choice, or shared qparams the quantizer could
not impose), a requantize op (TFLite's int8 QUANTIZE, as a table) is inserted before the op.
"""

from __future__ import annotations

from edgec.ir import Graph, Op, Tensor
from edgec.ops import KINDS


def unify_qparams(graph: Graph) -> None:
    for op in list(graph.ops):
        if not (KINDS[op.kind].keeps_qparams or _compares(op)):
            continue
        out = graph.tensors[op.outputs[0]]
        for index, name in enumerate(op.inputs):
            source = graph.tensors[name]
            if out.quantized and source.quantized and (source.scale, source.zero_point) != (out.scale, out.zero_point):
                op.inputs[index] = _requantized(graph, op, source, out).name


def _compares(op: Op) -> bool:
    """minimum/maximum compare raw bytes (TFLite's MAXIMUM/MINIMUM); the converter requantizes each
    input to the output's qparams (QUANTIZE), which commutes with the comparison: rounding is monotone."""
    return op.kind == "binary" and op.attrs.get("op") in ("minimum", "maximum")


def _requantized(graph: Graph, before: Op, source: Tensor, like: Tensor) -> Tensor:
    name = f"{source.name}_as_{before.name}"
    tensor = graph.tensors.get(name) or graph.add_tensor(
        Tensor(name, source.shape, like.scale, like.zero_point, source=source.source, dtype=like.dtype)
    )
    if graph.producer(name) is None:
        graph.ops.insert(
            graph.ops.index(before),
            Op(
                f"requantize_{len(graph.ops)}",
                "lut",
                [source.name],
                [name],
                {"function": "requantize", "function_attrs": {}},
                before.source,
            ),
        )
    return tensor

"""Layout: activations become NHWC, and every op re-lays its constants to match."""
from __future__ import annotations

from edgec.errors import EdgecError
from edgec.ir import Graph
from edgec.ops import KINDS


def to_nhwc(graph: Graph) -> None:
    _check_flattens(graph)
    for op in graph.ops:
        KINDS[op.kind].to_nhwc(op, graph)  # constants first: they read the NCHW shapes
    for tensor in graph.tensors.values():
        if len(tensor.shape) == 4:
            n, c, h, w = tensor.shape
            tensor.shape = (n, h, w, c)
    graph.layout = "NHWC"


def _check_flattens(graph: Graph) -> None:
    """A flatten of NCHW data with H*W > 1 and C > 1 reads the bytes in a different order in
    NHWC; only a fully connected consumer can absorb that (by permuting its weight columns)."""
    for op in graph.ops:
        if op.kind != "reshape":
            continue
        source = graph.tensors[op.inputs[0]]
        if len(source.shape) != 4 or source.shape[1] == 1 or source.shape[2] * source.shape[3] == 1:
            continue
        target = graph.tensors[op.outputs[0]]
        consumers = graph.consumers(op.outputs[0])
        if len(target.shape) != 2 or op.outputs[0] in graph.outputs or any(c.kind != "fully_connected" for c in consumers):
            raise EdgecError(f"{op.source}: reshaping {list(source.shape)} to {list(target.shape)} is supported "
                             f"only as a flatten feeding linear layers")

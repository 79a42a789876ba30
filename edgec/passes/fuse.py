"""Fusion on the IR: zero padding into the following conv, activations into their producer.

After these passes no `pad` op is left, and a `clamp` op survives only where its producer has
other users (then it runs alone, in place on a copy).
"""
from __future__ import annotations

from edgec.errors import EdgecError
from edgec.ir import Graph
from edgec.ops import KINDS

CONV_KINDS = {"conv2d", "depthwise_conv2d"}


def fold_pad(graph: Graph) -> None:
    for pad in [op for op in graph.ops if op.kind == "pad"]:
        consumers = graph.consumers(pad.outputs[0])
        if not consumers or any(op.kind not in CONV_KINDS for op in consumers) or pad.outputs[0] in graph.outputs:
            raise EdgecError(f"{pad.source}: zero padding is supported only directly before a convolution")
        for conv in consumers:
            conv.attrs["pad"] = tuple(a + b for a, b in zip(conv.attrs["pad"], pad.attrs["pad"]))
        graph.replace_uses(pad.outputs[0], pad.inputs[0])
        graph.ops.remove(pad)
    graph.remove_unused_tensors()


def fuse_activations(graph: Graph) -> None:
    for clamp in [op for op in graph.ops if op.kind == "clamp"]:
        source = clamp.inputs[0]
        producer = graph.producer(source)
        fusable = (producer is not None and KINDS[producer.kind].fuses_activation
                   and len(graph.consumers(source)) == 1 and source not in graph.outputs)
        if fusable:
            producer.attrs["clamp"] = _intersect(producer.attrs["clamp"], clamp.attrs["clamp"])
            producer.outputs = list(clamp.outputs)
            graph.ops.remove(clamp)
        elif not graph.tensors[source].quantized:
            raise EdgecError(f"{clamp.source}: this activation follows an op it cannot be fused into")
    graph.remove_unused_tensors()


def _intersect(a, b):
    low = max((v for v in (a[0], b[0]) if v is not None), default=None)
    high = min((v for v in (a[1], b[1]) if v is not None), default=None)
    return low, high

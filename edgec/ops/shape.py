"""Ops that move no data: views (flatten/view/reshape/squeeze) and explicit zero padding.

A view's output tensor aliases its input's bytes, so it costs no RAM and no code. Padding is
folded into the following convolution by passes/fuse.py and never reaches the device.
"""
from __future__ import annotations

from edgec.errors import EdgecError
from edgec.frontend import source_line
from edgec.ops.base import CCall, OpDef
from edgec.torch_ops import PADS, VIEWS, aten


class Reshape(OpDef):
    kind = "reshape"
    targets = frozenset(VIEWS)

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        ctx.add_op(self.kind, node, [x], [ctx.output(node, alias_of=x.name, qparams_of=x)])

    def golden(self, op, graph, inputs):
        return inputs[0].reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        return CCall("", [], [])  # a view: the output already is the input's bytes


class Pad(OpDef):
    kind = "pad"
    targets = frozenset(PADS)

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        pad = list(node.args[1])
        mode = node.args[2] if node.target == aten.pad.default and len(node.args) > 2 else "constant"
        value = node.args[-1] if len(node.args) > (3 if node.target == aten.pad.default else 2) else 0.0
        if mode != "constant" or (value or 0.0) != 0.0 or len(pad) != 4 or len(x.shape) != 4:
            raise EdgecError(f"{source_line(node)}: only zero padding of H and W (before a conv) is supported")
        left, right, top, bottom = (int(v) for v in pad)
        ctx.add_op(self.kind, node, [x], [ctx.output(node, qparams_of=x)], pad=(top, left, bottom, right))


UNITS = (Reshape(), Pad())

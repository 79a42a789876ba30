"""Ops that move no data: views (flatten/view/reshape/squeeze) and explicit zero padding.

A view's output tensor aliases its input's bytes, so it costs no RAM and no code. Padding is
folded into the following convolution by passes/fuse.py and never reaches the device.
"""
from __future__ import annotations

from edgec.errors import EdgecError
from edgec.ir import same_bytes
from edgec.frontend import source_line
from edgec.ops.base import CCall, OpDef
from edgec.ops.qspec import annotate_shared
from edgec.torch_ops import PADS, VIEWS, aten


class Reshape(OpDef):
    kind = "reshape"
    targets = frozenset(VIEWS)

    def annotate(self, node) -> None:
        annotate_shared(node)

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        ctx.add_op(self.kind, node, [x], [ctx.output(node, alias_of=x.name, qparams_of=x)])

    def relayout(self, op, graph) -> None:
        check_reshape(op, graph)

    def golden(self, op, graph, inputs):
        return inputs[0].reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        return CCall("", [], [])  # a view: the output already is the input's bytes


class Pad(OpDef):
    kind = "pad"
    targets = frozenset(PADS)

    def annotate(self, node) -> None:
        annotate_shared(node)

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        pad = list(node.args[1])
        mode = node.args[2] if node.target == aten.pad.default and len(node.args) > 2 else "constant"
        value = node.args[-1] if len(node.args) > (3 if node.target == aten.pad.default else 2) else 0.0
        if mode != "constant" or (value or 0.0) != 0.0 or len(pad) != 2 * (len(x.shape) - 2) or len(x.shape) not in (3, 4):
            raise EdgecError(f"{source_line(node)}: only zero padding of H and W (or L) before a conv is supported")
        left, right, top, bottom = (*(int(v) for v in pad), 0, 0)[:4]
        ctx.add_op(self.kind, node, [x], [ctx.output(node, qparams_of=x)], pad=(top, left, bottom, right))


def check_reshape(op, graph) -> None:
    """A reshape must move no byte, or be a flatten feeding only linear layers (which absorb the
    order by permuting their weight columns)."""
    source, target = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    if same_bytes(source.torch_shape, source.perm, target.torch_shape, target.perm):
        return
    consumers = graph.consumers(op.outputs[0])
    if len(target.shape) == 2 and op.outputs[0] not in graph.outputs and consumers \
            and all(c.kind == "fully_connected" for c in consumers):
        return
    raise EdgecError(f"{op.source}: reshaping {list(source.torch_shape)} to {list(target.torch_shape)} reorders "
                     f"the stored bytes; edgec supports it only as a flatten feeding linear layers")


UNITS = (Reshape(), Pad())

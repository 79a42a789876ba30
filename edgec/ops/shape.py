"""Ops that move no data: views (flatten/view/reshape/squeeze) and explicit zero padding.

A view's output tensor aliases its input's bytes, so it costs no RAM and no code. Padding is
folded into the following convolution by passes/fuse.py and never reaches the device.
"""

from __future__ import annotations

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import PADS, VIEWS, aten
from edgec.ir import KernelChoice, same_bytes
from edgec.ops.base import CCall, OpDef
from edgec.ops.movement import lower_edge_pad, make_copy, reshape_gather
from edgec.ops.qspec import annotate_shared


class Reshape(OpDef):
    kind = "reshape"
    targets = frozenset(VIEWS)

    def annotate(self, node) -> None:
        annotate_shared(node)

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        ctx.add_op(self.kind, node, [x], [ctx.output(node, alias_of=x.name, qparams_of=x)])

    keeps_qparams = True

    def relayout(self, op, graph) -> None:
        """A reshape that would reorder stored bytes becomes a copy, unless it is a flatten that
        only linear layers read (they permute their weight columns instead)."""
        if not is_free_view(op, graph):
            make_copy(op, graph, reshape_gather(graph.tensors[op.outputs[0]].torch_shape))

    def golden(self, op, graph, inputs):
        return inputs[0].reshape(graph.tensors[op.outputs[0]].shape)

    def specialize(self, op, graph, target) -> None:
        op.kernel = KernelChoice("", "view", "a view of its input: no code, no bytes")

    def emit(self, op, graph, names) -> CCall:
        return CCall("", [], [])  # a view: the output already is the input's bytes


class Pad(OpDef):
    """Constant padding: folded into the convolutions it feeds (passes/fuse.fold_pad) when it pads
    with zeros along the spatial axes only, else a constant_pad op (edgec.ops.movement). Reflect
    and replicate padding are strided copies, one per padded axis (movement.lower_edge_pad)."""

    kind = "pad"
    targets = frozenset(PADS)
    keeps_qparams = True

    def annotate(self, node) -> None:
        annotate_shared(node)

    def check(self, node) -> str | None:
        mode = _mode(node)
        return None if mode == "constant" or mode in EDGE_PAD_MODES else f"padding mode '{mode}'"

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        pad = [int(v) for v in node.args[1]]
        if _mode(node) in EDGE_PAD_MODES:
            lower_edge_pad(ctx, node, x, pad, _mode(node))
            return
        value = (
            node.args[3]
            if node.target == aten.pad.default and len(node.args) > 3
            else node.args[2]
            if node.target != aten.pad.default and len(node.args) > 2
            else node.kwargs.get("value")
        )
        if min(pad, default=0) < 0:
            raise EdgecError(f"{source_line(node)}: negative padding (a crop) is not supported; slice instead")
        ctx.add_op(self.kind, node, [x], [ctx.output(node, qparams_of=x)], torch_pad=pad, value=float(value or 0.0))


EDGE_PAD_MODES = ("reflect", "replicate")


def _mode(node) -> str:
    if node.target == aten.pad.default:
        return node.args[2] if len(node.args) > 2 else node.kwargs.get("mode", "constant")
    return "constant"


def is_free_view(op, graph) -> bool:
    """A reshape that moves no byte, or a flatten feeding only linear layers (which absorb the
    order by permuting their weight columns)."""
    source, target = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    if same_bytes(source.torch_shape, source.perm, target.torch_shape, target.perm):
        return True
    consumers = graph.consumers(op.outputs[0])
    return (
        len(target.shape) == 2
        and op.outputs[0] not in graph.outputs
        and bool(consumers)
        and all(c.kind == "fully_connected" for c in consumers)
    )


UNITS = (Reshape(), Pad())

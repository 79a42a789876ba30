"""Layout: choose how each activation is stored, then let every op re-lay its constants to match.

Spatial ops (convolutions, pooling: OpDef.spatial) run on channels-last data: NHWC for a 4-D tensor,
and a 3-D (N, C, L) one stored as N, 1, L, C, so the 2-D kernels run 1-D layers as H = 1. Ops whose
output is laid out like their inputs (elementwise ops, activations: OpDef.layout_follows_input, or
OpDef.layout_ties) tie their tensors into one group; a group that touches a spatial op is stored
channels last, any other tensor in PyTorch's order -- except that a group fed by a reshape of
channels-last data is stored channels last too when that keeps the reshape free. Ops that work along
the last PyTorch axis (layer norm, matmul, linear on N-D data: OpDef.torch_order_tensors) pin their
tensors' groups to PyTorch's order; a copy (which can move bytes from any layout to any other) ties
its output to its input only when neither group is pinned, and channels last does not spread into a
pinned group. A reshape is a free view when the two tensors' stored bytes coincide element for
element; a flatten of channels-last data feeding only linear layers is free as well, the linear
layers permuting their weight columns. Where a spatial op's tensor falls into a pinned group (a mean
over the last axis of a linear's rank-3 output, a Conv1d's output under a layer norm), the spatial
op gets a copy of its own in between that moves the bytes to channels last (or back).
"""

from __future__ import annotations

from dataclasses import replace

from edgec.ir import Graph, Op, same_bytes, stored_shape
from edgec.ops import KINDS
from edgec.ops.movement import relayout_copy


def channels_last(rank: int) -> tuple[int | None, ...] | None:
    """The perm storing channels (axis 1) last, for ranks with spatial axes (see Tensor.perm)."""
    if rank == 3:
        return (0, None, 2, 1)
    return (0, *range(2, rank), 1) if rank >= 4 else None


def assign_layouts(graph: Graph) -> None:
    groups = _Groups(graph)
    while _separate_spatial_from_pinned(graph, groups):
        groups = _Groups(graph)
    spatial = {groups.find(name) for op in graph.ops if KINDS[op.kind].spatial for name in _spatial_tensors(op, graph)}
    changed = True
    while changed:  # across a reshape, channels last spreads where it keeps the reshape free
        changed = False
        for op in graph.ops:
            if op.kind != "reshape":
                continue
            a, b = (graph.tensors[name].shape for name in (op.inputs[0], op.outputs[0]))
            ends = (groups.find(op.inputs[0]), groups.find(op.outputs[0]))
            if (
                (ends[0] in spatial) != (ends[1] in spatial)
                and not set(ends) & groups.pinned
                and None not in (channels_last(len(a)), channels_last(len(b)))
                and same_bytes(a, channels_last(len(a)), b, channels_last(len(b)))
            ):
                spatial.update(ends)
                changed = True
    for name, tensor in graph.tensors.items():
        if groups.find(name) in spatial:
            tensor.perm = channels_last(len(tensor.shape))
            tensor.shape = stored_shape(tensor.shape, tensor.perm)


def _spatial_tensors(op: Op, graph: Graph) -> list[str]:
    """The tensors a spatial op needs stored channels last."""
    if not KINDS[op.kind].spatial:
        return []
    return [name for name in op.inputs + op.outputs if len(graph.tensors[name].shape) >= 3]


def _separate_spatial_from_pinned(graph: Graph, groups: "_Groups") -> bool:
    """Give the first spatial op with a tensor in a pinned group a relayout copy of that tensor:
    before the op for an input, after it for an output. Whether any was inserted."""
    for position, op in enumerate(graph.ops):
        for name in _spatial_tensors(op, graph):
            if groups.find(name) not in groups.pinned:
                continue
            tensor = graph.tensors[name]
            moved = graph.add_tensor(replace(tensor, name=f"{name}_channels_last", alias_of=None))
            if name in op.inputs:
                op.inputs = [moved.name if t == name else t for t in op.inputs]
                graph.ops.insert(position, _relayout_copy(graph, op, name, moved.name))
            else:
                op.outputs = [moved.name if t == name else t for t in op.outputs]
                graph.ops.insert(position + 1, _relayout_copy(graph, op, moved.name, name))
            return True
    return False


def _relayout_copy(graph: Graph, op: Op, source: str, target: str) -> Op:
    names = {other.name for other in graph.ops}
    name = next(f"copy_{n}" for n in range(len(graph.ops), 2 * len(graph.ops) + 2) if f"copy_{n}" not in names)
    return relayout_copy(name, source, target, graph, op.source)


def relayout(graph: Graph) -> None:
    """Each op re-lays its constants and maps its axis attributes for the stored layouts."""
    for op in graph.ops:
        KINDS[op.kind].relayout(op, graph)


class _Groups:
    """Union-find over tensors whose layouts must agree."""

    def __init__(self, graph: Graph):
        self.parent = {name: name for name in graph.tensors}
        pinned_names = {name for op in graph.ops for name in KINDS[op.kind].torch_order_tensors(op, graph)}
        for copies in (False, True):  # copies last, once the pinned groups are known
            if copies:
                self.pinned = {self.find(name) for name in pinned_names}
            for op in graph.ops:
                if (op.kind == "copy") != copies:
                    continue
                for name in KINDS[op.kind].layout_ties(op, graph):
                    ends = (self.find(name), self.find(op.outputs[0]))
                    if copies and set(ends) & self.pinned:
                        continue
                    self.parent[ends[0]] = ends[1]
        self.pinned = {self.find(name) for name in pinned_names}

    def find(self, name: str) -> str:
        while self.parent[name] != name:
            self.parent[name] = self.parent[self.parent[name]]
            name = self.parent[name]
        return name

"""Static memory plan: every activation and kernel scratch buffer gets an offset in one arena.

Liveness is exact over the scheduled op list: a buffer is live from the op that writes it to the
last op that reads it or any view of it; the graph input is live from the start and the output
to the end. Offsets come from a greedy best-offset placement, largest buffer first.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from edgec.ir import Graph
from edgec.ops import KINDS

ALIGNMENT = 4  # word alignment, so kernels may read activations 32 bits at a time


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    first: int  # index of the op that writes it (-1: live before the first op)
    last: int  # index of the last op that reads it (len(ops): live after the last op)

    def overlaps_in_time(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class MemoryPlan:
    offsets: dict[str, int]
    arena_bytes: int
    lower_bound_bytes: int
    buffers: list[Buffer] = field(default_factory=list)
    scratch: dict[str, tuple[int, int]] = field(default_factory=dict)  # op name -> (offset, bytes)


def scratch_buffer_name(op_name: str) -> str:
    return f"{op_name}.scratch"


def buffers(graph: Graph, target) -> list[Buffer]:
    end = len(graph.ops)
    first: dict[str, int] = {graph.storage(name): -1 for name in graph.inputs}
    last: dict[str, int] = {graph.storage(name): end for name in graph.outputs}
    for index, op in enumerate(graph.ops):
        for name in op.outputs:
            first.setdefault(graph.storage(name), index)
        for name in op.inputs:
            storage = graph.storage(name)
            last[storage] = max(last.get(storage, index), index)
    result = [Buffer(name, graph.tensors[name].size, first[name], last.get(name, first[name]))
              for name in first]
    for index, op in enumerate(graph.ops):
        size = KINDS[op.kind].scratch_bytes(op, graph, target)
        if size:
            result.append(Buffer(scratch_buffer_name(op.name), size, index, index))
    return result


def liveness_lower_bound(items: list[Buffer], steps: int) -> int:
    """The peak of bytes live at once: no placement can use less."""
    return max((sum(b.size for b in items if b.first <= step <= b.last) for step in range(-1, steps + 1)), default=0)


def _align(value: int) -> int:
    return (value + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def place(items: list[Buffer]) -> dict[str, int]:
    """Largest first; each at the lowest aligned offset clear of every placed buffer it meets in time."""
    offsets: dict[str, int] = {}
    placed: list[Buffer] = []
    for item in sorted(items, key=lambda b: (-b.size, b.first, b.name)):
        conflicts = sorted((offsets[b.name], offsets[b.name] + b.size) for b in placed if b.overlaps_in_time(item))
        offset = 0
        for start, stop in conflicts:
            if offset + item.size <= start:
                break
            offset = max(offset, _align(stop))
        offsets[item.name] = offset
        placed.append(item)
    return offsets


def plan_memory(graph: Graph, target) -> MemoryPlan:
    items = buffers(graph, target)
    offsets = place(items)
    arena = _align(max((offsets[b.name] + b.size for b in items), default=0))
    scratch = {op.name: (offsets[scratch_buffer_name(op.name)], b.size)
               for op in graph.ops for b in items if b.name == scratch_buffer_name(op.name)}
    return MemoryPlan(offsets, max(arena, ALIGNMENT), liveness_lower_bound(items, len(graph.ops)), items, scratch)


def offset_of(plan: MemoryPlan, graph: Graph, tensor: str) -> int:
    return plan.offsets[graph.storage(tensor)]

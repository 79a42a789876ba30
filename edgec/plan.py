"""Static memory plan: every activation and kernel scratch buffer gets an offset in one arena.

Liveness is exact over the scheduled op list: a buffer is live from the op that writes it to the
last op that reads it or any view of it; the graph input is live from the start and the output
to the end. Two buffers live at the same step must not share bytes.

Placing the buffers is dynamic storage allocation (NP-hard), so offsets come from two stages:
several greedy heuristics (orderings x fit rules), of which the smallest arena wins; then, unless
that already equals the liveness lower bound, a branch-and-bound search over placement orders
(SkylineSearch) that stops at the lower bound or when its node budget is spent. Both stages are
deterministic: the same graph always gets the same offsets. `check_plan` re-verifies a plan.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from edgec.ir import Graph
from edgec.ops import KINDS

ALIGNMENT = 4  # word alignment, so kernels may read activations 32 bits at a time
SEARCH_MAX_BUFFERS = 128  # larger graphs keep the greedy plan: each search node costs buffers x steps
SEARCH_NODE_BUDGET = 20_000  # bounds planning time (about a second); unlike a clock, it is deterministic
SEARCH_RESTART_NODES = 2_000  # per capacity and tie order, so a bad order cannot eat the whole budget


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    first: int  # index of the op that writes it (-1: live before the first op)
    last: int  # index of the last op that reads it (len(ops): live after the last op)

    def overlaps_in_time(self, other: Buffer) -> bool:
        return self.first <= other.last and other.first <= self.last

    def live_at(self, step: int) -> bool:
        return self.first <= step <= self.last


@dataclass
class MemoryPlan:
    offsets: dict[str, int]
    arena_bytes: int
    lower_bound_bytes: int
    buffers: list[Buffer] = field(default_factory=list)
    scratch: dict[str, tuple[int, int]] = field(default_factory=dict)  # op name -> (offset, bytes)
    strategy: str = ""  # which placement produced the offsets, for the report


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


def _align(value: int) -> int:
    return (value + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def live_bytes(items: list[Buffer], step: int) -> int:
    """Bytes of the buffers live at `step` (an op index; -1 before the first op)."""
    return sum(b.size for b in items if b.live_at(step))


def liveness_lower_bound(items: list[Buffer], steps: int) -> int:
    """The peak over steps of the bytes live at once, each buffer rounded up to ALIGNMENT (buffers
    start on aligned offsets, so every one but the topmost also pads to it): no plan can use less."""
    return max((_align(sum(_align(b.size) for b in items if b.live_at(step))) for step in range(-1, steps + 1)),
               default=0)


def arena_size(items: list[Buffer], offsets: dict[str, int]) -> int:
    return _align(max((offsets[b.name] + b.size for b in items), default=0))


# --- greedy placement -------------------------------------------------------------------------

def lowest_fit(size: int, taken: list[tuple[int, int]]) -> int:
    """The lowest aligned offset whose `size` bytes miss every (start, stop) in `taken`."""
    offset = 0
    for start, stop in sorted(taken):
        if offset + size <= start:
            break
        offset = max(offset, _align(stop))
    return offset


def best_fit(size: int, taken: list[tuple[int, int]]) -> int:
    """The offset of the smallest free gap that holds `size` bytes (lowest on ties), else the top;
    keeping large gaps whole leaves room for large buffers placed later."""
    gaps, offset = [], 0
    for start, stop in sorted(taken):
        if offset + size <= start:
            gaps.append((start - offset, offset))
        offset = max(offset, _align(stop))
    return min(gaps)[1] if gaps else offset


GREEDY_ORDERS: dict[str, Callable[[Buffer], tuple]] = {
    "largest first": lambda b: (-b.size, b.first, b.name),  # TFLM's GreedyMemoryPlanner order
    "first use": lambda b: (b.first, -b.size, b.name),
    "largest size x lifetime": lambda b: (-b.size * (b.last - b.first + 1), b.first, b.name),
    "longest lifetime": lambda b: (b.first - b.last, -b.size, b.name),
}
FIT_RULES: dict[str, Callable[[int, list[tuple[int, int]]], int]] = {"lowest fit": lowest_fit, "best fit": best_fit}


def place_in_order(order: list[Buffer], fit: Callable[[int, list[tuple[int, int]]], int]) -> dict[str, int]:
    """Each buffer in turn at `fit`'s offset among the placed buffers it meets in time."""
    offsets: dict[str, int] = {}
    placed: list[Buffer] = []
    for item in order:
        taken = [(offsets[b.name], offsets[b.name] + b.size) for b in placed if b.overlaps_in_time(item)]
        offsets[item.name] = fit(item.size, taken)
        placed.append(item)
    return offsets


def best_greedy(items: list[Buffer]) -> tuple[str, dict[str, int]]:
    """The smallest arena over every ordering x fit rule; ties go to the first in table order."""
    candidates = [(f"greedy, {order}, {rule}", place_in_order(sorted(items, key=key), fit))
                  for order, key in GREEDY_ORDERS.items() for rule, fit in FIT_RULES.items()]
    return min(candidates, key=lambda candidate: arena_size(items, candidate[1]))


# --- search -----------------------------------------------------------------------------------

class SkylineSearch:
    """Depth-first search for a plan that fits a given arena capacity.

    Lowest-fit decoding of some order reaches an optimal plan (decode an optimal plan in offset
    order: no buffer lands higher than it was), and repeating that until nothing moves gives an
    optimal plan whose decoded offsets never decrease. So only orders with non-decreasing offsets
    are searched, and below the last offset nothing more is placed: a partial plan is then fully
    described by its skyline (per step, the lowest offset still usable) and the buffers left, which
    makes dead ends memoizable. A buffer goes at the highest skyline point over its lifetime;
    buffers at the same height are tried in one of the greedy orders, each a separate restart.
    """

    def __init__(self, items: list[Buffer], steps: int):
        self.sizes = np.array([_align(b.size) for b in items], dtype=np.int64)
        self.live = np.array([[b.live_at(step) for step in range(-1, steps + 1)] for b in items])
        self.tie_orders = [sorted(range(len(items)), key=lambda i: key(items[i])) for key in GREEDY_ORDERS.values()]
        self.nodes_spent = 0

    def fit(self, capacity: int, nodes: int) -> tuple[list[int] | None, int | None]:
        """(offsets by item index, None) of a plan within `capacity`; else (None, a lower bound on
        the arena of every plan) if the search proved none fits; else (None, None) when each
        restart spent its `nodes`."""
        self.capacity, self.dead_ends, self.next_capacity = capacity, set(), None
        for order in self.tie_orders:
            self.order, self.nodes_left, self.offsets = order, nodes, [0] * len(order)
            found = self._descend(np.zeros(self.live.shape[1], dtype=np.int64), frozenset(order))
            self.nodes_spent += nodes - self.nodes_left
            if found:
                return self.offsets, None
            if self.nodes_left > 0:  # explored to the end, so every plan was pruned by a bound
                return None, self.next_capacity
        return None, None

    def _descend(self, skyline: np.ndarray, remaining: frozenset) -> bool:
        if not remaining:
            return True
        order = [i for i in self.order if i in remaining]
        starts = np.where(self.live[order], skyline, 0).max(axis=1)
        skyline = np.maximum(skyline, starts.min())  # below the lowest possible next offset stays empty
        key = (skyline.tobytes(), remaining)
        if key in self.dead_ends:
            return False
        bound = max(int((starts + self.sizes[order]).max()),
                    int((skyline + self.sizes[order] @ self.live[order]).max()))
        if bound > self.capacity:
            self.next_capacity = bound if self.next_capacity is None else min(bound, self.next_capacity)
            return False
        for position in np.argsort(starts, kind="stable"):
            if self.nodes_left <= 0:
                return False
            self.nodes_left -= 1
            index, start = order[position], int(starts[position])
            self.offsets[index] = start
            child = np.where(self.live[index], start + self.sizes[index], skyline)
            if self._descend(np.maximum(child, start), remaining - {index}):
                return True
        if self.nodes_left > 0:  # every child was searched to the end, not cut short by the budget
            self.dead_ends.add(key)
        return False


def search(items: list[Buffer], steps: int, lower_bound: int, incumbent: int) -> list[int] | None:
    """Offsets (by item index) of the smallest plan below `incumbent` found within the node budget.

    The capacity starts at the lower bound and, after a proof that nothing fits, rises to the
    proof's bound (IDA*-style), so a plan found that way is optimal. Once the restarts at some
    capacity run out of nodes instead, it bisects between the capacities known to fail and the
    best plan so far."""
    fitter = SkylineSearch(items, steps)
    best, floor, failed, capacity = None, lower_bound, None, lower_bound  # floor: no plan is smaller
    while capacity < incumbent and fitter.nodes_spent < SEARCH_NODE_BUDGET:
        offsets, proven_floor = fitter.fit(capacity, min(SEARCH_RESTART_NODES, SEARCH_NODE_BUDGET - fitter.nodes_spent))
        if offsets is not None:
            best, incumbent = offsets, max(o + s for o, s in zip(offsets, fitter.sizes))
        elif proven_floor is not None:
            floor = proven_floor
        else:
            failed = capacity
        capacity = floor if failed is None else _halfway(max(floor, failed + ALIGNMENT), incumbent)
    return best


def _halfway(low: int, high: int) -> int:
    return max(low, (low + high) // 2 // ALIGNMENT * ALIGNMENT)


def place(items: list[Buffer], steps: int) -> tuple[str, dict[str, int]]:
    """(strategy, offsets by buffer name): the best greedy plan, improved by the search on small graphs."""
    strategy, offsets = best_greedy(items)
    bound = liveness_lower_bound(items, steps)
    arena = arena_size(items, offsets)
    if arena > bound and len(items) <= SEARCH_MAX_BUFFERS:
        found = search(items, steps, bound, arena)
        if found is not None:
            strategy, offsets = "skyline search", {b.name: o for b, o in zip(items, found)}
    return strategy, offsets


def plan_memory(graph: Graph, target) -> MemoryPlan:
    items = buffers(graph, target)
    strategy, offsets = place(items, len(graph.ops))
    scratch = {op.name: (offsets[scratch_buffer_name(op.name)], b.size)
               for op in graph.ops for b in items if b.name == scratch_buffer_name(op.name)}
    return MemoryPlan(offsets, max(arena_size(items, offsets), ALIGNMENT), liveness_lower_bound(items, len(graph.ops)),
                      items, scratch, strategy)


def offset_of(plan: MemoryPlan, graph: Graph, tensor: str) -> int:
    return plan.offsets[graph.storage(tensor)]


def check_plan(graph: Graph, plan: MemoryPlan) -> list[str]:
    """What is wrong with `plan` for `graph` (nothing: []), checked from scratch without the
    planner's liveness: a backward pass over the ops finds what is live during each op, and no two
    of those (nor the op's scratch) may share a byte; every offset is aligned and inside the arena."""
    problems = [f"arena {plan.arena_bytes} is not a multiple of {ALIGNMENT}"] if plan.arena_bytes % ALIGNMENT else []
    for step, regions in enumerate(_occupied_regions(graph, plan), start=-1):
        problems += _region_problems(step, regions, plan.arena_bytes)
    return list(dict.fromkeys(problems))  # a misplaced buffer is reported once, not at every step


def _owner(graph: Graph, name: str) -> str:
    tensor = graph.tensors[name]
    return name if tensor.alias_of is None else _owner(graph, tensor.alias_of)


def _occupied_regions(graph: Graph, plan: MemoryPlan) -> list[list[tuple[str, int, int]]]:
    """Per step (graph inputs, each op, graph outputs): the (name, start, stop) byte ranges in use."""
    def region(name: str) -> tuple[str, int, int]:
        owner = _owner(graph, name)
        start = plan.offsets.get(owner)
        return (owner, -1, -1) if start is None else (owner, start, start + graph.tensors[owner].size)

    live_after = {_owner(graph, name) for name in graph.outputs}
    during_ops = []
    for op in reversed(graph.ops):
        written = {_owner(graph, name) for name in op.outputs}
        read = {_owner(graph, name) for name in op.inputs}
        regions = [region(name) for name in sorted(live_after | written | read)]
        if op.name in plan.scratch:
            offset, size = plan.scratch[op.name]
            regions.append((scratch_buffer_name(op.name), offset, offset + size))
        during_ops.insert(0, regions)
        live_after = (live_after - written) | read
    inputs = [region(name) for name in sorted({_owner(graph, name) for name in graph.inputs})]
    outputs = [region(name) for name in sorted({_owner(graph, name) for name in graph.outputs})]
    return [inputs, *during_ops, outputs]


def _region_problems(step: int, regions: list[tuple[str, int, int]], arena: int) -> list[str]:
    problems = []
    highest: tuple[str, int, int] | None = None
    for name, start, stop in sorted(regions, key=lambda region: region[1:]):
        if start < 0:
            problems.append(f"{name} has no offset")
            continue
        if start % ALIGNMENT:
            problems.append(f"{name} at {start} is not {ALIGNMENT}-byte aligned")
        if stop > arena:
            problems.append(f"{name} [{start}, {stop}) ends past the {arena}-byte arena")
        if highest is not None and start < highest[2]:
            other, other_start, other_stop = highest
            problems.append(f"at step {step}: {name} [{start}, {stop}) overlaps {other} [{other_start}, {other_stop})")
        if highest is None or stop > highest[2]:
            highest = (name, start, stop)
    return problems

"""Static memory plan: every activation and kernel scratch buffer gets an offset in one arena.

Liveness is exact over the scheduled op list: a buffer is live from the op that writes it to the
last op that reads it or any view of it; the graph input is live from the start and the output
to the end. Two buffers live at the same step must not share bytes -- except an in-place op's
input and output: where an op's unit offers it (OpDef.in_place) and the input dies at the op, the
output is written over the input. Such a pair, and so a whole chain of in-place ops, becomes one
Block whose buffers keep fixed offsets from each other; MemoryPlan.in_place records the pairs and
check_plan accepts exactly those overlaps.

Placing the blocks is dynamic storage allocation (NP-hard), so offsets come from two stages:
several greedy heuristics (orderings x fit rules), of which the smallest arena wins; then, unless
that already equals the liveness lower bound, a branch-and-bound search over placement orders
(SkylineSearch) that stops at the lower bound or when its node budget is spent. Both stages are
deterministic: the same graph always gets the same offsets. `check_plan` re-verifies a plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from edgec.ir import ARENA_ALIGNMENT, Graph, InPlace, Op
from edgec.ops import unit_of

ALIGNMENT = ARENA_ALIGNMENT
SEARCH_MAX_BUFFERS = 128  # larger graphs keep the greedy plan: each search node costs blocks x steps
SEARCH_NODE_BUDGET = 20_000  # bounds planning time (about a second); unlike a clock, it is deterministic
SPLIT_TRIAL_BUDGET = 400  # greedy plans tried when splitting in-place chains (plan_memory); deterministic
SEARCH_RESTART_NODES = 2_000  # per capacity and tie order, so a bad order cannot eat the whole budget


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    first: int  # index of the op that writes it (-1: live before the first op)
    last: int  # index of the last op that reads it (len(ops): live after the last op)

    def live_at(self, step: int) -> bool:
        return self.first <= step <= self.last


@dataclass(frozen=True)
class Block:
    """Buffers placed as one piece, each at a fixed offset (aligned, >= 0) from the block's start:
    an in-place chain x -> y -> z (each written over the one before), or a single buffer."""

    members: tuple[tuple[Buffer, int], ...]

    @classmethod
    def of(cls, buffer: Buffer) -> Block:
        return cls(((buffer, 0),))

    @property
    def name(self) -> str:
        return self.members[0][0].name

    @property
    def size(self) -> int:
        return max(offset + buffer.size for buffer, offset in self.members)

    @property
    def first(self) -> int:
        return min(buffer.first for buffer, _ in self.members)

    @property
    def last(self) -> int:
        return max(buffer.last for buffer, _ in self.members)

    def extent(self, step: int) -> tuple[int, int] | None:
        """[low, high) relative to the block's start: the bytes its members live at `step` span."""
        live = [(offset, offset + buffer.size) for buffer, offset in self.members if buffer.live_at(step)]
        return (min(low for low, _ in live), max(high for _, high in live)) if live else None

    @cached_property
    def segments(self) -> tuple[tuple[int, int, int, int], ...]:
        """(first step, last step, low, high): the block's extent, in runs of steps where it is constant."""
        runs: list[list[int]] = []
        for step in range(self.first, self.last + 1):
            extent = self.extent(step)
            if extent is not None and runs and runs[-1][1] == step - 1 and tuple(runs[-1][2:]) == extent:
                runs[-1][1] = step
            elif extent is not None:
                runs.append([step, step, *extent])
        return tuple(tuple(run) for run in runs)


@dataclass
class MemoryPlan:
    offsets: dict[str, int]
    arena_bytes: int
    lower_bound_bytes: int  # the liveness bound of this schedule, in-place pairs counted once
    buffers: list[Buffer] = field(default_factory=list)
    scratch: dict[str, tuple[int, int]] = field(default_factory=dict)  # op name -> (offset, bytes)
    strategy: str = ""  # which placement produced the offsets, for the report
    in_place: dict[str, InPlace] = field(default_factory=dict)  # op name -> how its output overwrites an input
    lower_bound_without_in_place_bytes: int = 0  # the liveness bound were no op run in place
    banding: dict | None = None  # how band stages fit a RAM budget (edgec.backend.banding.Banding.to_json)
    precision: dict | None = None  # how int4 weights fit a flash budget (edgec.pipeline.fit_flash_budget)


def scratch_buffer_name(op_name: str) -> str:
    return f"{op_name}.scratch"


def buffers(graph: Graph, target, in_place: dict[str, InPlace] | None = None) -> list[Buffer]:
    """Every activation's storage and every op's scratch, with lifetimes; an op in `in_place`
    gets the scratch its in-place kernel needs instead of its usual one."""
    in_place = in_place or {}
    end = len(graph.ops)
    first: dict[str, int] = {graph.storage(name): -1 for name in graph.inputs if name not in graph.streamed_inputs}
    last: dict[str, int] = {graph.storage(name): end for name in graph.outputs}
    for index, op in enumerate(graph.ops):
        for name in op.outputs:
            first.setdefault(graph.storage(name), index)
        for name in op.inputs:
            storage = graph.storage(name)
            if storage in graph.streamed_inputs:
                continue
            last[storage] = max(last.get(storage, index), index)
    result = [Buffer(name, graph.tensors[name].nbytes, first[name], last.get(name, first[name])) for name in first]
    for index, op in enumerate(graph.ops):
        size = _scratch_size(op, graph, target, in_place.get(op.name))
        if size:
            result.append(Buffer(scratch_buffer_name(op.name), size, index, index))
    return result


def _scratch_size(op: Op, graph: Graph, target, in_place: InPlace | None) -> int:
    return in_place.scratch_bytes if in_place is not None else unit_of(op).scratch_bytes(op, graph, target)


def _align(value: int) -> int:
    return (value + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def in_place_span(input_bytes: int, output_bytes: int, input_offset: int) -> int:
    """Bytes an input and the output written over it span together (aligned)."""
    return _align(max(output_bytes, input_offset + input_bytes)) - min(0, input_offset)


# --- in place ---------------------------------------------------------------------------------


def in_place_choices(graph: Graph, target) -> dict[str, InPlace]:
    """The ops that run in place, and how: each op's first in-place form whose input dies at the
    op (no later op reads it, it is no graph output, the op reads it once) and that needs no more
    bytes at the op's step than input + output + the usual scratch."""
    lives = {b.name: b for b in buffers(graph, target)}
    choices = {}
    for index, op in enumerate(graph.ops):
        for option in unit_of(op).in_place(op, graph, target):
            if _input_dies_at(graph, op, option.input, lives, index) and _saves_bytes(graph, op, option, target):
                choices[op.name] = option
                break
    return choices


def _input_dies_at(graph: Graph, op: Op, input_index: int, lives: dict[str, Buffer], index: int) -> bool:
    storage = graph.storage(op.inputs[input_index])
    reads = sum(graph.storage(name) == storage for name in op.inputs)
    return reads == 1 and lives[storage].last == index


def _saves_bytes(graph: Graph, op: Op, option: InPlace, target) -> bool:
    x = graph.tensors[graph.storage(op.inputs[option.input])].nbytes
    y = graph.tensors[op.outputs[0]].nbytes
    usual = _align(x) + _align(y) + _align(unit_of(op).scratch_bytes(op, graph, target))
    return in_place_span(x, y, option.input_offset) + _align(option.scratch_bytes) <= usual


def blocks(graph: Graph, items: list[Buffer], in_place: dict[str, InPlace]) -> list[Block]:
    """`items` grouped into placement blocks: each in-place output joins its input's block at the
    declared offset; blocks come in the order of their first buffer in `items`."""
    position = {item.name: (item.name, 0) for item in items}  # buffer -> (block root, offset from root)
    for op in graph.ops:
        if op.name in in_place:
            root, offset = position[graph.storage(op.inputs[in_place[op.name].input])]
            position[graph.storage(op.outputs[0])] = (root, offset - in_place[op.name].input_offset)
    grouped: dict[str, list[tuple[Buffer, int]]] = {}
    for item in items:
        root, offset = position[item.name]
        grouped.setdefault(root, []).append((item, offset))
    result = []
    for members in grouped.values():
        base = min(offset for _, offset in members)
        result.append(Block(tuple((item, offset - base) for item, offset in members)))
    return result


# --- bounds -----------------------------------------------------------------------------------


def _height(block: Block, step: int) -> int:
    extent = block.extent(step)
    return 0 if extent is None else _align(extent[1]) - extent[0]


def liveness_lower_bound(items: list[Block], steps: int) -> int:
    """The peak over steps of the bytes live at once, each block's span rounded up to ALIGNMENT
    (blocks start on aligned offsets, so every one but the topmost also pads to it): no plan can
    use less."""
    return max((_align(sum(_height(b, step) for b in items)) for step in range(-1, steps + 1)), default=0)


def arena_size(items: list[Block], offsets: dict[str, int]) -> int:
    return _align(max((offsets[b.name] + b.size for b in items), default=0))


def occupied_bytes(plan: MemoryPlan, step: int) -> int:
    """Arena bytes in use at `step` (an op index; -1 before the first op): the union of the byte
    ranges of the buffers live then, so an in-place op's input and output count once."""
    ranges = sorted((plan.offsets[b.name], plan.offsets[b.name] + b.size) for b in plan.buffers if b.live_at(step))
    total, covered = 0, 0
    for start, stop in ranges:
        total += max(0, stop - max(start, covered))
        covered = max(covered, stop)
    return total


# --- greedy placement -------------------------------------------------------------------------


def forbidden_starts(item: Block, placed: Block, placed_offset: int) -> list[tuple[int, int]]:
    """The open ranges (low, high) of start offsets at which `item` would share a byte with
    `placed` (at `placed_offset`) at some step."""
    return [
        (placed_offset + low - item_high, placed_offset + high - item_low)
        for item_first, item_last, item_low, item_high in item.segments
        for first, last, low, high in placed.segments
        if item_first <= last and first <= item_last
    ]


def lowest_fit(forbidden: list[tuple[int, int]]) -> int:
    """The lowest aligned offset outside every open range in `forbidden`."""
    offset = 0
    for low, high in sorted(forbidden):
        if offset <= low:
            break
        offset = max(offset, _align(high))
    return offset


def best_fit(forbidden: list[tuple[int, int]]) -> int:
    """The offset that leaves the least room unused in the free gap it goes in (lowest on ties),
    else the top; keeping large gaps whole leaves room for large blocks placed later."""
    gaps, offset = [], 0
    for low, high in sorted(forbidden):
        if offset <= low:
            gaps.append((low - offset, offset))
        offset = max(offset, _align(high))
    return min(gaps)[1] if gaps else offset


GREEDY_ORDERS: dict[str, Callable[[Block], tuple]] = {
    "largest first": lambda b: (-b.size, b.first, b.name),  # TFLM's GreedyMemoryPlanner order
    "first use": lambda b: (b.first, -b.size, b.name),
    "largest size x lifetime": lambda b: (-b.size * (b.last - b.first + 1), b.first, b.name),
    "longest lifetime": lambda b: (b.first - b.last, -b.size, b.name),
}
FIT_RULES: dict[str, Callable[[list[tuple[int, int]]], int]] = {"lowest fit": lowest_fit, "best fit": best_fit}


def place_in_order(order: list[Block], fit: Callable[[list[tuple[int, int]]], int]) -> dict[str, int]:
    """Each block in turn at `fit`'s offset among the blocks placed before it."""
    offsets: dict[str, int] = {}
    placed: list[Block] = []
    for item in order:
        offsets[item.name] = fit([r for other in placed for r in forbidden_starts(item, other, offsets[other.name])])
        placed.append(item)
    return offsets


def best_greedy(items: list[Block]) -> tuple[str, dict[str, int]]:
    """The smallest arena over every ordering x fit rule; ties go to the first in table order."""
    candidates = [
        (f"greedy, {order}, {rule}", place_in_order(sorted(items, key=key), fit))
        for order, key in GREEDY_ORDERS.items()
        for rule, fit in FIT_RULES.items()
    ]
    return min(candidates, key=lambda candidate: arena_size(items, candidate[1]))


# --- search -----------------------------------------------------------------------------------


class SkylineSearch:
    """Depth-first search for a plan that fits a given arena capacity.

    Lowest-fit decoding of some order reaches an optimal plan of single buffers (decode an optimal
    plan in offset order: no buffer lands higher than it was), and repeating that until nothing
    moves gives an optimal plan whose decoded offsets never decrease. So only orders with
    non-decreasing offsets are searched, and below the last offset nothing more is placed: a
    partial plan is then fully described by its skyline (per step, the lowest offset still usable)
    and the blocks left, which makes dead ends memoizable. A block goes at the lowest offset where
    its extent clears the skyline at every step; blocks at the same height are tried in one of the
    greedy orders, each a separate restart. (For in-place chains, whose extent changes over time,
    the search is a heuristic: the lower bound, not the search, then proves optimality.)
    """

    def __init__(self, items: list[Block], steps: int):
        extents = [[b.extent(step) for step in range(-1, steps + 1)] for b in items]
        self.live = np.array([[e is not None for e in row] for row in extents])
        self.lows = np.array([[e[0] if e else 0 for e in row] for row in extents], dtype=np.int64)
        self.highs = np.array([[_align(e[1]) if e else 0 for e in row] for row in extents], dtype=np.int64)
        self.heights = self.highs - self.lows
        self.tops = self.highs.max(axis=1)
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
        starts = np.where(self.live[order], skyline - self.lows[order], 0).max(axis=1)
        skyline = np.maximum(skyline, starts.min())  # below the lowest possible next offset stays empty
        key = (skyline.tobytes(), remaining)
        if key in self.dead_ends:
            return False
        bound = max(int((starts + self.tops[order]).max()), int((skyline + self.heights[order].sum(axis=0)).max()))
        if bound > self.capacity:
            self.next_capacity = bound if self.next_capacity is None else min(bound, self.next_capacity)
            return False
        for position in np.argsort(starts, kind="stable"):
            if self.nodes_left <= 0:
                return False
            self.nodes_left -= 1
            index, start = order[position], int(starts[position])
            self.offsets[index] = start
            child = np.where(self.live[index], start + self.highs[index], skyline)
            if self._descend(np.maximum(child, start), remaining - {index}):
                return True
        if self.nodes_left > 0:  # every child was searched to the end, not cut short by the budget
            self.dead_ends.add(key)
        return False


def search(items: list[Block], steps: int, lower_bound: int, incumbent: int) -> list[int] | None:
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
            best, incumbent = offsets, max(o + t for o, t in zip(offsets, fitter.tops))
        elif proven_floor is not None:
            floor = proven_floor
        else:
            failed = capacity
        capacity = floor if failed is None else _halfway(max(floor, failed + ALIGNMENT), incumbent)
    return best


def _halfway(low: int, high: int) -> int:
    return max(low, (low + high) // 2 // ALIGNMENT * ALIGNMENT)


def place(items: list[Block], steps: int, *, search_too: bool = True) -> tuple[str, dict[str, int]]:
    """(strategy, offsets by block name): the best greedy plan, improved by the search on small
    graphs (unless `search_too` is False)."""
    strategy, offsets = best_greedy(items)
    if not search_too or len(items) > SEARCH_MAX_BUFFERS:
        return strategy, offsets
    bound = liveness_lower_bound(items, steps)
    arena = arena_size(items, offsets)
    if arena > bound:
        found = search(items, steps, bound, arena)
        if found is not None:
            strategy, offsets = "skyline search", {b.name: o for b, o in zip(items, found)}
    return strategy, offsets


def plan_memory(graph: Graph, target, *, in_place: bool = True) -> MemoryPlan:
    """The plan for graph.ops in their order. Ops run in place where in_place_choices allows
    (unless `in_place` is False). In-place chains are rigid: a chain's buffers keep their offsets
    from each other even after some die, which can cost more than the overlaps save. So while the
    greedy arena is above the bound, the in-place op whose removal shrinks the greedy arena most
    runs out of place (which splits its chain), within SPLIT_TRIAL_BUDGET trial plans; the
    survivors get the full plan, which is kept unless the full plan without any in-place op is
    smaller."""
    choices = in_place_choices(graph, target) if in_place else {}
    arena, bound = _greedy_arena(graph, target, choices)
    trials_left = SPLIT_TRIAL_BUDGET
    while arena > bound and len(choices) <= trials_left:
        trials_left -= len(choices)
        trials = [{op: form for op, form in choices.items() if op != name} for name in choices]
        results = [(*_greedy_arena(graph, target, trial), trial) for trial in trials]
        best = min(results, key=lambda result: result[0], default=None)
        if best is None or best[0] >= arena:
            break
        arena, bound, choices = best
    chosen = _plan(graph, target, choices)
    if chosen.in_place and chosen.arena_bytes > chosen.lower_bound_bytes:
        without = _plan(graph, target, {})
        if without.arena_bytes < chosen.arena_bytes:
            return without
    return chosen


def _greedy_arena(graph: Graph, target, in_place: dict[str, InPlace]) -> tuple[int, int]:
    grouped = blocks(graph, buffers(graph, target, in_place), in_place)
    _, offsets = place(grouped, len(graph.ops), search_too=False)
    return arena_size(grouped, offsets), liveness_lower_bound(grouped, len(graph.ops))


def _plan(graph: Graph, target, in_place: dict[str, InPlace]) -> MemoryPlan:
    steps = len(graph.ops)
    items = buffers(graph, target, in_place)
    grouped = blocks(graph, items, in_place)
    strategy, block_offsets = place(grouped, steps)
    offsets = {buffer.name: block_offsets[block.name] + offset for block in grouped for buffer, offset in block.members}
    scratch = {
        op.name: (offsets[scratch_buffer_name(op.name)], b.size)
        for op in graph.ops
        for b in items
        if b.name == scratch_buffer_name(op.name)
    }
    without = liveness_lower_bound([Block.of(b) for b in buffers(graph, target)], steps) if in_place else None
    bound = liveness_lower_bound(grouped, steps)
    return MemoryPlan(
        offsets,
        max(arena_size(grouped, block_offsets), ALIGNMENT),
        bound,
        items,
        scratch,
        strategy,
        in_place,
        bound if without is None else without,
    )


def offset_of(plan: MemoryPlan, graph: Graph, tensor: str) -> int:
    return plan.offsets[graph.storage(tensor)]


# --- the checker ------------------------------------------------------------------------------


def check_plan(graph: Graph, plan: MemoryPlan, target=None) -> list[str]:
    """What is wrong with `plan` for `graph` (nothing: []), checked from scratch without the
    planner's liveness: a backward pass over the ops finds what is live during each op, and no two
    of those (nor the op's scratch) may share a byte, except an in-place op's input and output at
    exactly the offset its unit declares; every offset is aligned and inside the arena, and every
    scratch as large as its kernel needs."""
    problems = [f"arena {plan.arena_bytes} is not a multiple of {ALIGNMENT}"] if plan.arena_bytes % ALIGNMENT else []
    regions, read_later = _occupied_regions(graph, plan)
    overlaps = [None] + [_allowed_overlap(graph, plan, op) for op in graph.ops] + [None]
    for index, op in enumerate(graph.ops):
        problems += _in_place_problems(graph, plan, op, read_later[index], target)
        problems += _scratch_problems(graph, plan, op, target)
    for step, (step_regions, overlap) in enumerate(zip(regions, overlaps), start=-1):
        problems += _region_problems(step, step_regions, plan.arena_bytes, overlap)
    return list(dict.fromkeys(problems))  # a misplaced buffer is reported once, not at every step


def _owner(graph: Graph, name: str) -> str:
    tensor = graph.tensors[name]
    return name if tensor.alias_of is None else _owner(graph, tensor.alias_of)


def _occupied_regions(graph: Graph, plan: MemoryPlan) -> tuple[list[list[tuple[str, int, int]]], list[set[str]]]:
    """Per step (graph inputs, each op, graph outputs): the (name, start, stop) byte ranges in use;
    and per op, the buffers still needed after it."""

    def region(name: str) -> tuple[str, int, int] | None:
        owner = _owner(graph, name)
        if owner in graph.streamed_inputs:
            return None
        start = plan.offsets.get(owner)
        return (owner, -1, -1) if start is None else (owner, start, start + graph.tensors[owner].nbytes)

    live_after = {_owner(graph, name) for name in graph.outputs}
    during_ops, needed_after = [], []
    for op in reversed(graph.ops):
        written = {_owner(graph, name) for name in op.outputs}
        read = {_owner(graph, name) for name in op.inputs}
        regions = [r for r in map(region, sorted(live_after | written | read)) if r is not None]
        if op.name in plan.scratch:
            offset, size = plan.scratch[op.name]
            regions.append((scratch_buffer_name(op.name), offset, offset + size))
        during_ops.insert(0, regions)
        needed_after.insert(0, set(live_after))
        live_after = (live_after - written) | read
    inputs = [r for r in map(region, sorted({_owner(graph, name) for name in graph.inputs})) if r is not None]
    outputs = [region(name) for name in sorted({_owner(graph, name) for name in graph.outputs})]
    return [inputs, *during_ops, outputs], needed_after


def _declared_pair(graph: Graph, plan: MemoryPlan, op: Op) -> tuple[str, str] | None:
    """(input, output) buffers of `op`'s declared in-place form, if it has one that fits the op."""
    form = plan.in_place.get(op.name)
    if form is None or not 0 <= form.input < len(op.inputs):
        return None
    return _owner(graph, op.inputs[form.input]), _owner(graph, op.outputs[0])


def _allowed_overlap(graph: Graph, plan: MemoryPlan, op: Op) -> frozenset | None:
    """The one pair of buffers that may share bytes while `op` runs: its in-place input and output,
    if they sit exactly as declared."""
    pair = _declared_pair(graph, plan, op)
    if pair is None or any(name not in plan.offsets for name in pair):
        return None
    source, result = pair
    return (
        frozenset(pair) if plan.offsets[source] - plan.offsets[result] == plan.in_place[op.name].input_offset else None
    )


def _in_place_problems(graph: Graph, plan: MemoryPlan, op: Op, needed_after: set[str], target) -> list[str]:
    form = plan.in_place.get(op.name)
    if form is None:
        return []
    pair = _declared_pair(graph, plan, op)
    if form not in unit_of(op).in_place(op, graph, target) or pair is None:
        return [f"{op.name}: {op.kind} cannot run in place as {form}"]
    source, result = pair
    problems = []
    if source in needed_after:
        problems.append(f"{op.name} runs in place over {source}, which is still read after it")
    if sum(_owner(graph, name) == source for name in op.inputs) > 1:
        problems.append(f"{op.name} runs in place over {source}, which it reads twice")
    if _allowed_overlap(graph, plan, op) is None:
        problems.append(
            f"{op.name} runs in place, but {source} does not start {form.input_offset} bytes after {result}"
        )
    return problems


def _scratch_problems(graph: Graph, plan: MemoryPlan, op: Op, target) -> list[str]:
    needed = _scratch_size(op, graph, target, plan.in_place.get(op.name))
    planned = plan.scratch.get(op.name, (0, 0))[1]
    return [f"{op.name} needs {needed} bytes of scratch, planned {planned}"] if planned < needed else []


def _region_problems(
    step: int, regions: list[tuple[str, int, int]], arena: int, allowed_overlap: frozenset | None
) -> list[str]:
    problems = []
    placed: list[tuple[str, int, int]] = []
    for name, start, stop in sorted(regions, key=lambda region: region[1:]):
        if start < 0:
            problems.append(f"{name} has no offset")
            continue
        if start % ALIGNMENT:
            problems.append(f"{name} at {start} is not {ALIGNMENT}-byte aligned")
        if stop > arena:
            problems.append(f"{name} [{start}, {stop}) ends past the {arena}-byte arena")
        for other, other_start, other_stop in placed:
            if start < other_stop and other_start < stop and frozenset((name, other)) != allowed_overlap:
                problems.append(
                    f"at step {step}: {name} [{start}, {stop}) overlaps {other} [{other_start}, {other_stop})"
                )
        placed.append((name, start, stop))
    return problems

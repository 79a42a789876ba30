"""Operator scheduling: the op order (graph.ops) that needs the fewest arena bytes.

Which ops run first matters wherever a graph branches (a residual block's shortcut before or after
its main path, the two inputs of an add): each order keeps different buffers alive at once, and
decides which op is the last reader of a buffer and so may run in place over it. The bytes live
during an op depend only on which ops ran before it, not on their order, so the order with the
lowest peak comes from a dynamic program over the sets of ops already run (the downsets of the
dependency graph): best(done) = min over ready ops o of max(bytes during o, best(done + o)). A
chain has one downset per op; a graph of b independent branches of length n has about n^b. Past
SCHEDULE_STATE_BUDGET sets, or on very long graphs, the given order stays. Ties keep the given
order, so a graph the given order already suits is not reordered.
"""

from __future__ import annotations

import sys

from edgec.backend.plan import ALIGNMENT, MemoryPlan, in_place_span, plan_memory
from edgec.ir import Graph, Op
from edgec.ops import unit_of

SCHEDULE_STATE_BUDGET = 20_000  # deterministic bound on scheduling time (about a second)
SCHEDULE_MAX_OPS = sys.getrecursionlimit() // 2  # the dynamic program recurses once per op


def schedule_and_plan(graph: Graph, target) -> MemoryPlan:
    """Plans graph.ops in the given order and in the peak-minimising one, keeps the order whose
    arena is smaller (the new one on a tie) in graph.ops, and returns its plan."""
    given = list(graph.ops)
    given_plan = plan_memory(graph, target)
    order = peak_minimising_order(graph, target)
    if order is None or order == given:
        return given_plan
    graph.ops = order
    plan = plan_memory(graph, target)
    if plan.arena_bytes <= given_plan.arena_bytes:
        return plan
    graph.ops = given
    return given_plan


def peak_minimising_order(graph: Graph, target) -> list[Op] | None:
    """A topological order of graph.ops whose busiest step has the fewest live bytes, or None if
    the search would take too long."""
    if len(graph.ops) > SCHEDULE_MAX_OPS:
        return None
    return _Scheduler(graph, target).order()


class _OverBudget(Exception):
    pass


def _align(value: int) -> int:
    return (value + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


class _Scheduler:
    """The dynamic program over sets of done ops (bit masks over op indices in graph.ops)."""

    def __init__(self, graph: Graph, target):
        self.graph, self.target = graph, target
        ops = graph.ops
        producer = {name: index for index, op in enumerate(ops) for name in op.outputs}
        # A set: an op may read one tensor twice (x + x), which must not add its producer's bit twice.
        self.needs = [
            sum(1 << index for index in {producer[name] for name in op.inputs if name in producer}) for op in ops
        ]
        self.kept = {graph.storage(name) for name in graph.outputs}
        self.sizes = {name: _align(graph.tensors[name].nbytes) for name in graph.tensors}
        self.readers: dict[str, int] = {}
        for index, op in enumerate(ops):
            for name in op.inputs:
                storage = graph.storage(name)
                self.readers[storage] = self.readers.get(storage, 0) | 1 << index
        self.born = {graph.storage(name): 0 for name in graph.inputs}  # storage -> mask of its writer
        for index, op in enumerate(ops):
            for name in op.outputs:
                self.born.setdefault(graph.storage(name), 1 << index)
        self.best: dict[int, tuple[int, int]] = {}  # done -> (peak of the rest, op to run next)
        self.everything = (1 << len(ops)) - 1

    def order(self) -> list[Op] | None:
        try:
            self._peak(0)
        except _OverBudget:
            return None
        result, done = [], 0
        while done != self.everything:
            _, index = self.best[done]
            result.append(self.graph.ops[index])
            done |= 1 << index
        return result

    def _peak(self, done: int) -> int:
        """The lowest possible peak of live bytes over the ops not in `done`."""
        if done == self.everything:
            return 0
        if done in self.best:
            return self.best[done][0]
        if len(self.best) >= SCHEDULE_STATE_BUDGET:
            raise _OverBudget
        best = None
        for index in range(len(self.graph.ops)):
            if not done >> index & 1 and self.needs[index] & ~done == 0:
                peak = max(self._bytes_during(done, index), self._peak(done | 1 << index))
                if best is None or peak < best[0]:
                    best = (peak, index)
        self.best[done] = best
        return best[0]

    def _live_before(self, done: int) -> list[str]:
        """The storages written by `done` (or graph inputs) that a later op, or the caller, reads."""
        return [
            name
            for name, born in self.born.items()
            if born & done == born and (name in self.kept or self.readers.get(name, 0) & ~done)
        ]

    def _bytes_during(self, done: int, index: int) -> int:
        """Bytes live while op `index` runs after the ops in `done`: what is live before it, its new
        output and its scratch; where it runs in place, its input, output and scratch together
        take what plan.in_place_choices would give them."""
        op, graph = self.graph.ops[index], self.graph
        live = self._live_before(done)
        before = sum(self.sizes[name] for name in live)
        scratch = _align(unit_of(op).scratch_bytes(op, graph, self.target))
        output = graph.storage(op.outputs[0])
        if output in live:  # a view: no bytes of its own
            return before + scratch
        usual = before + self.sizes[output] + scratch
        for option in unit_of(op).in_place(op, graph, self.target):
            source = graph.storage(op.inputs[option.input])
            if self._dies_at(source, done, index) and sum(graph.storage(n) == source for n in op.inputs) == 1:
                span = in_place_span(graph.tensors[source].nbytes, graph.tensors[output].nbytes, option.input_offset)
                shared = before - self.sizes[source] + span + _align(option.scratch_bytes)
                if shared <= usual:
                    return shared
        return usual

    def _dies_at(self, storage: str, done: int, index: int) -> bool:
        return storage not in self.kept and self.readers.get(storage, 0) & ~(done | 1 << index) == 0

"""Fitting a RAM budget below the layer-by-layer liveness bound: band stages (edgec.ops.band).

When the planned arena exceeds the target's RAM budget, the chains of spatial layers around the
first step over budget are tried as band stages, at several chunk heights; of those whose liveness
bound fits the budget, the ones with the least added work are planned, and the first whose plan
fits wins; if none does, the one with the smallest arena is kept and the search repeats at the
next step over budget. Added work is estimated in cycles: each extra kernel call costs CALL_CYCLES (its
set-up, argument checks, the packed kernels' row caching), each byte a window shift moves
MOVE_CYCLES_PER_BYTE. No row is computed twice, so no MAC is added. A model within budget is not
touched: its graph and plan are exactly the layer-by-layer ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgec.backend.plan import MemoryPlan, blocks, buffers, in_place_choices, liveness_lower_bound, occupied_bytes
from edgec.backend.schedule import schedule_and_plan
from edgec.ir import Graph, Op
from edgec.ops import unit_of
from edgec.ops.band import can_band, make_stage

CHUNKS = (1, 2, 3, 4, 6, 8, 12, 16)  # rows per kernel call tried
# Fitted to `edgec bench --target cortex-m4` (estimated cycles, 5 flash wait states) of MobileNetV1 0.25
# --ram 32K and MobileNetV2 0.35 --ram 48K against layer by layer: a kernel call brings its code and
# tables back through the flash cache and re-reads its first rows (the packed depthwise kernel caches
# KH rows per call), about 4,500 cycles; newlib-nano's memmove moves a byte in about 4.
CALL_CYCLES = 4_500
MOVE_CYCLES_PER_BYTE = 4
MAX_STAGE_OPS = 12
PLANS_TRIED = 6  # full plans per step over budget, cheapest (or smallest) candidates first


@dataclass
class Banding:
    """What fitting the budget did, for the build's output and report.json."""

    budget: int
    layer_by_layer_bytes: int
    arena_bytes: int
    stages: list[dict]  # per stage: layers, chunk rows, scratch, calls added, bytes moved, cycles added
    fits: bool

    def summary(self) -> str:
        if not self.stages:
            return f"RAM budget {self.budget:,} B: no band stage lowers the arena below {self.layer_by_layer_bytes:,} B"
        added = sum(stage["added_cycles"] for stage in self.stages)
        parts = "; ".join(
            f"{s['first']}..{s['last']} ({s['layers']} layers) in bands of {s['chunk']} "
            f"row{'s' if s['chunk'] > 1 else ''}"
            for s in self.stages
        )
        verdict = "fits" if self.fits else "still over budget"
        curves = "; ".join(
            f"{s['first']}..{s['last']}: "
            + ", ".join(
                f"{p['chunk']} row{'s' if p['chunk'] > 1 else ''} {p['stage_bytes']:,} B +{p['added_cycles']:,}"
                for p in s["trade_off"]
            )
            for s in self.stages
        )
        return (
            f"RAM budget {self.budget:,} B: arena {self.layer_by_layer_bytes:,} B layer by layer -> "
            f"{self.arena_bytes:,} B depth-first ({verdict}); {parts}; about {added:,} estimated cycles "
            f"added (kernel calls and window shifts; no MAC recomputed)\n"
            f"  band height -> bytes live in the stage, estimated cycles added: {curves}"
        )

    def to_json(self) -> dict:
        return {
            "budget_bytes": self.budget,
            "layer_by_layer_arena_bytes": self.layer_by_layer_bytes,
            "arena_bytes": self.arena_bytes,
            "fits": self.fits,
            "stages": self.stages,
        }


def added_cycles(stage: Op) -> int:
    calls = len(stage.attrs["actions"]) - len(stage.attrs["ops"])
    return int(calls * CALL_CYCLES + stage.attrs["moved_bytes"] * MOVE_CYCLES_PER_BYTE)


def chains(graph: Graph) -> list[list[int]]:
    """Maximal runs of consecutive ops that can run banded, each reading the one before (a residual
    add also another tensor), whose outputs (but the last's) nothing else reads."""
    runs: list[list[int]] = []
    readers: dict[str, int] = {}
    for op in graph.ops:
        for name in op.inputs:
            readers[graph.storage(name)] = readers.get(graph.storage(name), 0) + 1
    outputs = {graph.storage(name) for name in graph.outputs}
    for index, op in enumerate(graph.ops):
        if not can_band(op, graph):
            continue
        previous = graph.ops[index - 1] if index else None
        if (
            runs
            and runs[-1][-1] == index - 1
            and previous.outputs[0] in op.inputs
            and readers.get(previous.outputs[0]) == 1
            and previous.outputs[0] not in outputs
        ):
            runs[-1].append(index)
        else:
            runs.append([index])
    return [run for run in runs if len(run) > 1]


def _with_stage(graph: Graph, first: int, last: int, chunk: int) -> tuple[Graph, Op] | None:
    try:
        stage = make_stage(graph.ops[first : last + 1], graph, chunk)
    except ValueError:
        return None
    banded = Graph(
        graph.tensors,
        graph.ops[:first] + [stage] + graph.ops[last + 1 :],
        graph.inputs,
        graph.outputs,
        graph.input_rounding,
    )
    return banded, stage


def _stage_entry(stage: Op, graph: Graph, target) -> dict:
    layers = stage.attrs["ops"]
    return {
        "name": stage.name,
        "first": layers[0].name,
        "last": layers[-1].name,
        "layers": len(layers),
        "chunk": stage.attrs["chunk"],
        "window_rows": stage.attrs["window_rows"],
        "scratch_bytes": unit_of(stage).scratch_bytes(stage, graph, target),
        "kernel_calls": len(stage.attrs["actions"]),
        "moved_bytes": stage.attrs["moved_bytes"],
        "added_cycles": added_cycles(stage),
        "trade_off": trade_off(layers, graph, target),
    }


def trade_off(layers: list[Op], graph: Graph, target) -> list[dict]:
    """Points of the RAM / work curve of one stage: per chunk height, the bytes live while it runs
    (input and output as in place, windows, kernel scratch) and the estimated cycles it adds."""
    points = []
    for chunk in CHUNKS:
        try:
            stage = make_stage(layers, graph, chunk)
        except ValueError:
            continue
        point = {"chunk": chunk, "stage_bytes": _stage_floor(stage, graph, target), "added_cycles": added_cycles(stage)}
        if not points or (points[-1]["stage_bytes"], points[-1]["added_cycles"]) != (
            point["stage_bytes"],
            point["added_cycles"],
        ):
            points.append(point)
    return points


def fit_budget(graph: Graph, target, plan: MemoryPlan) -> tuple[MemoryPlan, Banding | None]:
    """`plan` if it fits target.ram_bytes (or there is no budget); else the graph (changed in
    place) and plan with band stages that fit, or the smallest arena they reach, and what was done."""
    budget = target.ram_bytes
    if budget is None or plan.arena_bytes <= budget:
        return plan, None
    start = plan.arena_bytes
    stages: list[Op] = []
    while plan.arena_bytes > budget:
        found = _best_stage(graph, target, plan, budget)
        if found is None:
            break
        banded, stage, banded_plan = found
        graph.ops = banded.ops
        plan = banded_plan
        stages.append(stage)
    entries = [_stage_entry(stage, graph, target) for stage in stages]
    return plan, Banding(budget, start, plan.arena_bytes, entries, plan.arena_bytes <= budget)


def _best_stage(graph: Graph, target, plan: MemoryPlan, budget: int):
    """The cheapest (banded graph, stage, plan) whose plan lowers the peak: one that fits the budget
    if any does, else the one with the smallest arena below the current one."""
    steps = [step for step in range(-1, len(graph.ops) + 1) if occupied_bytes(plan, step) > budget]
    over = max(steps[0], 0) if steps else 0
    candidates = []
    for run in chains(graph):
        for first in run:
            for last in run:
                if last <= first or last - first + 1 > MAX_STAGE_OPS or not first <= over <= last:
                    continue
                for chunk in CHUNKS:
                    made = _with_stage(graph, first, last, chunk)
                    if made is None:
                        continue
                    banded, stage = made
                    if _stage_floor(stage, banded, target) > plan.arena_bytes:
                        continue
                    floor = _liveness_bound(banded, target)
                    candidates.append((floor > budget, added_cycles(stage), floor, first, last, chunk))
    fitting = sorted(c[1:] for c in candidates if not c[0])[:PLANS_TRIED]
    for _, _, first, last, chunk in fitting:
        banded, stage = _with_stage(graph, first, last, chunk)
        banded_plan = schedule_and_plan(banded, target)
        if banded_plan.arena_bytes <= budget:
            return banded, stage, banded_plan
    best = None
    for _, _, first, last, chunk in sorted((c[2], c[1], *c[3:]) for c in candidates)[:PLANS_TRIED]:
        banded, stage = _with_stage(graph, first, last, chunk)
        banded_plan = schedule_and_plan(banded, target)
        if banded_plan.arena_bytes < (plan.arena_bytes if best is None else best[2].arena_bytes):
            best = (banded, stage, banded_plan)
    return best


def _liveness_bound(graph: Graph, target) -> int:
    """The liveness bound of `graph` in its op order (in-place layers as the planner would take
    them): the arena no plan of that order beats, found without planning."""
    choices = in_place_choices(graph, target)
    return liveness_lower_bound(blocks(graph, buffers(graph, target, choices), choices), len(graph.ops))


def _stage_floor(stage: Op, graph: Graph, target) -> int:
    """Bytes live while the stage runs, at least: its input and output (overlapping as in place) and
    its scratch."""
    x, y = graph.tensors[stage.inputs[0]].nbytes, graph.tensors[stage.outputs[0]].nbytes
    d = stage.attrs["input_offset"]
    return max(y, d + x) - min(0, d) + unit_of(stage).scratch_bytes(stage, graph, target)

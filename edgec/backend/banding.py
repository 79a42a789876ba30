"""Fitting a RAM budget below the layer-by-layer liveness bound: band stages (edgec.ops.band).

When the planned arena exceeds the target's RAM budget, the chains of spatial layers around the
first step over budget are tried as band stages, at several chunk heights; of those whose liveness
bound fits the budget, the ones with the least added work are planned, and the first whose plan
fits wins; if none does, the one with the smallest arena is kept and the search repeats at the
next step over budget. Added work is estimated in cycles: each extra kernel call costs its set-up
(call_cycles: CALL_CYCLES for a convolution or pooling kernel -- argument checks, the packed
kernels' row caching; far less for an elementwise one, a PReLU reading tables made at compile
time), each byte a window shift moves MOVE_CYCLES_PER_BYTE. No row is computed twice, so no MAC
is added. A model within budget is not touched: its graph and plan are exactly the layer-by-layer
ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgec.backend.plan import MemoryPlan, blocks, buffers, in_place_choices, liveness_lower_bound, occupied_bytes
from edgec.backend.schedule import schedule_and_plan
from edgec.errors import EdgecError
from edgec.ir import Graph, Op
from edgec.ops import unit_of
from edgec.ops.band import ELEMENTWISE_KINDS, can_band, make_stage

CHUNKS = (1, 2, 3, 4, 6, 8, 12, 16)  # rows per kernel call tried
# Fitted to `edgec bench --target cortex-m4` (estimated cycles, 5 flash wait states) of MobileNetV1 0.25
# --ram 32K and MobileNetV2 0.35 --ram 48K against layer by layer: a kernel call brings its code and
# tables back through the flash cache and re-reads its first rows (the packed depthwise kernel caches
# KH rows per call), about 4,500 cycles; newlib-nano's memmove moves a byte in about 4.
CALL_CYCLES = 4_500
# An elementwise layer's call (a PReLU through its compile-time tables, edgec_prelu_s8_lookup; a
# residual add) has no table to build, no rows to cache and little code: its descriptor's checks
# and a loop set-up per channel, about 1,000 instructions on PNet's first PReLU's 2-row band
# (tests/test_kernels_binary_arm.py's "prelu lookup 2x70x10": 8,003 for 1,400 elements at ~5).
ELEMENTWISE_CALL_CYCLES = 1_000
MOVE_CYCLES_PER_BYTE = 4
# A streamed input's fetch: the call of the application's read_rows and its copy's start (its bytes
# count as moved).
FETCH_CYCLES = 300
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
            f"{s['first']}..{s['last']} ({s['layers']} layers{', the input streamed' if s['streamed_input'] else ''}) "
            f"in bands of {s['chunk']} "
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


def call_cycles(layer: Op) -> int:
    """The set-up a kernel call of `layer` on a band costs (what a call adds beside its elements'
    work): a windowed kernel's CALL_CYCLES, an elementwise one's ELEMENTWISE_CALL_CYCLES."""
    return ELEMENTWISE_CALL_CYCLES if layer.kind in ELEMENTWISE_KINDS else CALL_CYCLES


def added_cycles(stage: Op) -> int:
    """Kernel calls beyond one per layer, each at its layer's set-up cost (call_cycles), window
    shifts, and a streamed input's fetches (a call of the application's read_rows, its rows copied
    in)."""
    actions = stage.attrs["actions"]
    fetches = actions[actions[:, 0] < 0]
    layers = stage.attrs["ops"]
    calls = np.bincount(actions[actions[:, 0] >= 0, 0], minlength=len(layers)) - 1
    return int(
        sum(int(count) * call_cycles(layer) for count, layer in zip(calls, layers))
        + len(fetches) * FETCH_CYCLES
        + (stage.attrs["moved_bytes"] + stage.attrs["fetched_bytes"]) * MOVE_CYCLES_PER_BYTE
    )


def check_stream_input(graph: Graph, target, stream: bool) -> None:
    """One line unless a --stream-input build has one int8 image input (batch 1, NHWC) and no
    recurrent time step per invoke (--stream)."""
    if not target.stream_input:
        return
    tensors = [graph.tensors[name] for name in graph.inputs]
    if (
        stream
        or len(tensors) != 1
        or len(tensors[0].shape) != 4
        or tensors[0].shape[0] != 1
        or tensors[0].dtype != "int8"
    ):
        shapes = ", ".join(f"{t.dtype} {list(t.shape)}" for t in tensors)
        raise EdgecError(
            f"--stream-input needs one int8 image input (batch 1, NHWC) and no --stream; the model takes {shapes}"
            + (" with --stream" if stream else "")
        )


def chains(graph: Graph) -> list[list[int]]:
    """Maximal runs of consecutive ops that can run banded, each reading an output of an earlier op
    of the run (a residual add also another tensor): the candidates of band stages, branches
    inside them included (two heads reading one map)."""
    runs: list[list[int]] = []
    for index, op in enumerate(graph.ops):
        if not can_band(op, graph):
            continue
        produced = {graph.ops[i].outputs[0] for i in runs[-1]} if runs and runs[-1][-1] == index - 1 else set()
        if produced & set(op.inputs):
            runs[-1].append(index)
        else:
            runs.append([index])
    return [run for run in runs if len(run) > 1]


def stage_outputs(graph: Graph, first: int, last: int) -> list[str]:
    """The outputs of ops first..last that the rest of the graph reads (or the graph's outputs)."""
    outside = {graph.storage(name) for op in graph.ops[:first] + graph.ops[last + 1 :] for name in op.inputs}
    outside |= {graph.storage(name) for name in graph.outputs}
    return [op.outputs[0] for op in graph.ops[first : last + 1] if op.outputs[0] in outside]


def _streams(graph: Graph, first: int, target) -> bool:
    """Whether a stage starting at op `first` takes the model's input in rows (--stream-input): it
    reads the one input, which nothing else reads."""
    name = graph.ops[first].inputs[0]
    return (
        target.stream_input
        and graph.inputs == [name]
        and name not in graph.outputs
        and sum(name in op.inputs for op in graph.ops) == 1
    )


def _with_stage(graph: Graph, first: int, last: int, chunk: int, target) -> tuple[Graph, Op] | None:
    stream = _streams(graph, first, target)
    try:
        stage = make_stage(graph.ops[first : last + 1], graph, chunk, stage_outputs(graph, first, last), stream)
    except ValueError:
        return None
    banded = Graph(
        graph.tensors,
        graph.ops[:first] + [stage] + graph.ops[last + 1 :],
        graph.inputs,
        graph.outputs,
        graph.input_rounding,
        list(graph.inputs) if stream else list(graph.streamed_inputs),
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
        "outputs": list(stage.outputs),
        "streamed_input": stage.attrs["layout"].stream,
        "window_rows": stage.attrs["window_rows"],
        "scratch_bytes": unit_of(stage).scratch_bytes(stage, graph, target),
        "kernel_calls": len(stage.attrs["actions"]),
        "moved_bytes": stage.attrs["moved_bytes"],
        "added_cycles": added_cycles(stage),
        "trade_off": trade_off(stage, graph, target),
    }


def trade_off(stage: Op, graph: Graph, target) -> list[dict]:
    """Points of the RAM / work curve of one stage: per chunk height, the bytes live while it runs
    (input and output as in place, windows, kernel scratch) and the estimated cycles it adds."""
    points = []
    layers, outputs, stream = stage.attrs["ops"], stage.outputs, stage.attrs["layout"].stream
    for chunk in CHUNKS:
        try:
            other = make_stage(layers, graph, chunk, outputs, stream)
        except ValueError:
            continue
        point = {"chunk": chunk, "stage_bytes": _stage_floor(other, graph, target), "added_cycles": added_cycles(other)}
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
        graph.ops, graph.streamed_inputs = banded.ops, banded.streamed_inputs
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
                    made = _with_stage(graph, first, last, chunk, target)
                    if made is None:
                        continue
                    banded, stage = made
                    if _stage_floor(stage, banded, target) > plan.arena_bytes:
                        continue
                    floor = _liveness_bound(banded, target)
                    candidates.append((floor > budget, added_cycles(stage), floor, first, last, chunk))
    fitting = sorted(c[1:] for c in candidates if not c[0])[:PLANS_TRIED]
    for _, _, first, last, chunk in fitting:
        banded, stage = _with_stage(graph, first, last, chunk, target)
        banded_plan = schedule_and_plan(banded, target)
        if banded_plan.arena_bytes <= budget:
            return banded, stage, banded_plan
    best = None
    for _, _, first, last, chunk in sorted((c[2], c[1], *c[3:]) for c in candidates)[:PLANS_TRIED]:
        banded, stage = _with_stage(graph, first, last, chunk, target)
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
    """Bytes live while the stage runs, at least: its input (unless streamed) and outputs (a single
    output overlapping the input as in place) and its scratch."""
    x = 0 if stage.attrs["layout"].stream else graph.tensors[stage.inputs[0]].nbytes
    y = sum(graph.tensors[name].nbytes for name in stage.outputs)
    d = stage.attrs["input_offset"]
    arrays = x + y if d is None else max(y, d + x) - min(0, d)
    return arrays + unit_of(stage).scratch_bytes(stage, graph, target)

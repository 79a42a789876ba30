"""The memory planner: reaches the liveness bound on the reference models, in place where the ops
allow it, is optimal on small random graphs, never overlaps live buffers other than a declared
in-place pair (checked by plan.check_plan's own liveness), and is deterministic."""

from __future__ import annotations

import copy
import itertools
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgec.backend.plan import (
    ALIGNMENT,
    Block,
    Buffer,
    MemoryPlan,
    arena_size,
    check_plan,
    liveness_lower_bound,
    occupied_bytes,
    place,
    plan_memory,
)
from edgec.ir import Graph, InPlace, Op, Tensor
from edgec.ops import KINDS
from edgec.pipeline import compile_model
from edgec.zoo import mlperf

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits"

# Arena bytes on the host target (portable kernels: no scratch), each the liveness bound of the
# model's schedule; and that bound without in-place execution, where it differs.
EXPECTED_ARENA = {"ds_cnn": 8_500, "mobilenet_v1_025": 39_168, "resnet8": 33_312, "fc_autoencoder": 768}
BOUND_WITHOUT_IN_PLACE = {"ds_cnn": 16_000, "mobilenet_v1_025": 55_296, "resnet8": 49_152}
# Issue #4's goals for the activation arena, all kernel scratch included, on cortex-m4 (whose
# packed kernels need im2col and table scratch): 8.5, 46, 49.2 and 0.8 kB, with kB = 1000 B as in
# the TFLite Micro figures the issue compares against.
CORTEX_M4_GOALS = {"ds_cnn": 8_500, "mobilenet_v1_025": 46_000, "resnet8": 49_200, "fc_autoencoder": 800}


def _compile(name: str, target: str = "host"):
    if name == "digits":
        return compile_model(str(DIGITS / "digits.pt2"), calibration=np.load(DIGITS / "calib.npy")[:8], target=target)
    return compile_model(
        f"{mlperf.__file__}:{name}",
        calibration=mlperf.calibration_data(name, 8, seed=0),
        target=target,
        warn=lambda _: None,
    )


@pytest.fixture(scope="module", params=[*sorted(EXPECTED_ARENA), "digits"])
def compiled(request):
    return request.param, _compile(request.param)


def test_reference_model_arena_equals_liveness_bound(compiled):
    name, model = compiled
    plan = model.plan
    if name == "digits":
        # Its in-place chain (stem over the input, stride-2 conv over the stem's output, then the
        # 1x1) is rigid: the chain's offsets leave the input's last 4 bytes above the bound.
        assert (plan.arena_bytes, plan.lower_bound_bytes, plan.lower_bound_without_in_place_bytes) == (548, 544, 768)
    else:
        assert plan.arena_bytes == plan.lower_bound_bytes == EXPECTED_ARENA[name]
        assert plan.lower_bound_without_in_place_bytes == BOUND_WITHOUT_IN_PLACE.get(name, EXPECTED_ARENA[name])
    assert check_plan(model.graph, plan, model.target) == []


def test_reference_model_plan_is_deterministic(compiled):
    _, model = compiled
    again = plan_memory(copy.deepcopy(model.graph), model.target)
    assert again.offsets == model.plan.offsets and again.arena_bytes == model.plan.arena_bytes
    assert again.in_place == model.plan.in_place


def _peak(plan: MemoryPlan, steps: int) -> str:
    """The step with the most bytes in use and what is live then, for a failure message."""
    step = max(range(-1, steps + 1), key=lambda s: occupied_bytes(plan, s))
    live = ", ".join(f"{b.name} {b.size}" for b in plan.buffers if b.live_at(step))
    return f"peak {occupied_bytes(plan, step)} B at step {step}: {live}"


@pytest.mark.parametrize("name", sorted(CORTEX_M4_GOALS))
def test_cortex_m4_arena_meets_the_goal_at_the_liveness_bound(name):
    model = _compile(name, "cortex-m4")
    plan = model.plan
    assert plan.arena_bytes == plan.lower_bound_bytes
    assert plan.arena_bytes <= CORTEX_M4_GOALS[name], _peak(plan, len(model.graph.ops))
    assert check_plan(model.graph, plan, model.target) == []


def test_depthwise_separable_chains_run_in_place():
    model = _compile("mobilenet_v1_025")
    in_place = {op.kind for op in model.graph.ops if op.name in model.plan.in_place}
    assert in_place == {"depthwise_conv2d", "conv2d"}
    # Every depthwise and pointwise layer after the stem writes over its input: one block.
    assert len(model.plan.in_place) == 26


# --- the checker ------------------------------------------------------------------------------


def _chain(kind: str = "softmax") -> Graph:
    """x -> a -> b (a view of a) -> c; every tensor 16 bytes."""
    graph = Graph(inputs=["x"], outputs=["c"])
    for name, alias in (("x", None), ("a", None), ("b", "a"), ("c", None)):
        graph.add_tensor(Tensor(name, (16,), alias_of=alias))
    graph.ops = [Op("op_a", kind, ["x"], ["a"]), Op("op_b", "reshape", ["a"], ["b"]), Op("op_c", kind, ["b"], ["c"])]
    return graph


def _with_offsets(plan: MemoryPlan, **offsets) -> MemoryPlan:
    return replace(plan, offsets={**plan.offsets, **offsets})


def test_checker_accepts_the_plan_and_rejects_broken_ones():
    graph = _chain()
    plan = plan_memory(graph, None)
    assert plan.arena_bytes == plan.lower_bound_bytes == 32 and check_plan(graph, plan) == []
    # c is written while b (a view of a) is read, so c may not sit on a: the view keeps a alive.
    assert any("overlaps" in p for p in check_plan(graph, _with_offsets(plan, c=plan.offsets["a"])))
    assert any("aligned" in p for p in check_plan(graph, _with_offsets(plan, a=plan.offsets["a"] + 2)))
    assert any("past" in p for p in check_plan(graph, _with_offsets(plan, c=plan.arena_bytes - 8)))
    missing = MemoryPlan({k: v for k, v in plan.offsets.items() if k != "c"}, plan.arena_bytes, 0)
    assert any("no offset" in p for p in check_plan(graph, missing))


def test_scratch_gets_its_own_bytes(monkeypatch):
    monkeypatch.setattr(KINDS["softmax"], "scratch_bytes", lambda op, graph, target: 10)
    graph = _chain()
    plan = plan_memory(graph, None)
    assert set(plan.scratch) == {"op_a", "op_c"} and all(size == 10 for _, size in plan.scratch.values())
    assert plan.arena_bytes == plan.lower_bound_bytes == 44  # 16 in + 16 out + 12 (10 aligned)
    assert check_plan(graph, plan) == []
    on_output = {**plan.scratch, "op_c": (plan.offsets["c"], 10)}
    assert any("op_c.scratch" in p and "overlaps" in p for p in check_plan(graph, replace(plan, scratch=on_output)))
    too_small = {**plan.scratch, "op_c": (plan.scratch["op_c"][0], 8)}
    assert check_plan(graph, replace(plan, scratch=too_small)) == ["op_c needs 10 bytes of scratch, planned 8"]


def test_in_place_chain_shares_bytes_and_the_checker_accepts_only_that():
    graph = _chain("clamp")  # x -> clamp -> a -> view b -> clamp -> c: both clamps run in place
    plan = plan_memory(graph, None)
    assert plan.in_place == {"op_a": InPlace(0, 0), "op_c": InPlace(0, 0)}
    assert plan.offsets["x"] == plan.offsets["a"] == plan.offsets["c"]
    assert plan.arena_bytes == plan.lower_bound_bytes == 16 and plan.lower_bound_without_in_place_bytes == 32
    assert check_plan(graph, plan) == []
    # Not declared: the same overlap is a clash.
    assert any("overlaps" in p for p in check_plan(graph, replace(plan, in_place={"op_c": InPlace(0, 0)})))
    # Declared, but at another offset than the op allows.
    moved = replace(plan, in_place={**plan.in_place, "op_a": InPlace(0, 4)})
    assert any("cannot run in place" in p for p in check_plan(graph, moved))
    # Declared over an input that a later op still reads (x is an output here).
    graph.outputs = ["c", "x"]
    assert any("still read after it" in p for p in check_plan(graph, plan))


def test_in_place_add_writes_over_the_input_that_dies():
    graph = Graph(inputs=["x"], outputs=["s"])
    for name in ("x", "a", "s"):
        graph.add_tensor(Tensor(name, (64,)))
    graph.ops = [Op("op_a", "softmax", ["x"], ["a"]), Op("add", "add", ["x", "a"], ["s"])]
    plan = plan_memory(graph, None)
    assert "add" in plan.in_place and plan.arena_bytes == plan.lower_bound_bytes == 128
    assert plan.offsets["s"] in (plan.offsets["x"], plan.offsets["a"])
    assert check_plan(graph, plan) == []
    both = Graph(
        inputs=["x"],
        outputs=["s"],
        tensors={n: Tensor(n, (64,)) for n in ("x", "s")},
        ops=[Op("add", "add", ["x", "x"], ["s"])],
    )
    assert plan_memory(both, None).in_place == {}  # the kernel reads x twice per element


# --- random graphs ----------------------------------------------------------------------------


@st.composite
def graphs(draw, max_ops: int = 24) -> Graph:
    """Random op sequences: each op reads 1-3 earlier tensors (so residual and concat-like joins
    keep tensors alive across many ops), some ops are views, sizes are not word multiples; clamps
    and adds may run in place, softmaxes may not."""
    graph = Graph(inputs=["x"])
    graph.add_tensor(Tensor("x", (draw(st.integers(1, 300)),)))
    produced = ["x"]
    for index in range(draw(st.integers(1, max_ops))):
        arity = draw(st.integers(1, min(3, len(produced))))
        inputs = draw(st.lists(st.sampled_from(produced), min_size=arity, max_size=arity, unique=True))
        name = f"t{index}"
        kind = "add" if arity > 1 else draw(st.sampled_from(["reshape", "clamp", "softmax", "softmax"]))
        if kind == "reshape":
            graph.add_tensor(Tensor(name, graph.tensors[inputs[0]].shape, alias_of=inputs[0]))
        else:
            graph.add_tensor(Tensor(name, (draw(st.integers(1, 300)),)))
        graph.ops.append(Op(f"{kind}{index}", kind, inputs, [name]))
        produced.append(name)
    graph.outputs = [produced[-1]]
    return graph


def _optimal_arena(items: list[Buffer]) -> int:
    """Brute force: lowest aligned fit over every placement order (one of them is optimal)."""
    best = None
    for order in itertools.permutations(items):
        placed: list[tuple[Buffer, int]] = []
        for item in order:
            offset = 0
            while any(
                item.first <= other.last
                and other.first <= item.last
                and offset < start + other.size
                and start < offset + item.size
                for other, start in placed
            ):
                offset += ALIGNMENT
            placed.append((item, offset))
        arena = max(-(-(start + b.size) // ALIGNMENT) * ALIGNMENT for b, start in placed)
        best = arena if best is None else min(best, arena)
    return best


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graph_plans_are_valid_and_deterministic(graph):
    plan = plan_memory(graph, None)
    assert check_plan(graph, plan) == []
    peak = max(occupied_bytes(plan, step) for step in range(-1, len(graph.ops) + 1))
    assert plan.arena_bytes >= plan.lower_bound_bytes >= peak
    assert plan.lower_bound_without_in_place_bytes >= plan.lower_bound_bytes
    assert plan.arena_bytes <= plan_memory(graph, None, in_place=False).arena_bytes
    assert plan.arena_bytes % ALIGNMENT == 0
    assert plan_memory(copy.deepcopy(graph), None).offsets == plan.offsets


@settings(max_examples=150, deadline=None)
@given(graphs(max_ops=5))
def test_small_random_graph_plans_are_optimal(graph):
    plan = plan_memory(graph, None, in_place=False)
    assert check_plan(graph, plan) == []
    optimum = _optimal_arena(plan.buffers)
    assert plan.arena_bytes == optimum
    if optimum == plan.lower_bound_bytes:
        assert plan.arena_bytes == plan.lower_bound_bytes


# --- the search -------------------------------------------------------------------------------


def test_search_reaches_the_bound_where_every_greedy_order_fails():
    # The digits model's buffers: the greedy orders give 832 or 1,024 bytes.
    items = [
        Block.of(b)
        for b in (
            Buffer("input", 64, -1, 0),
            Buffer("relu", 512, 0, 1),
            Buffer("relu_1", 256, 1, 2),
            Buffer("relu_2", 256, 2, 3),
            Buffer("relu_3", 512, 3, 4),
            Buffer("pool", 32, 4, 6),
            Buffer("linear", 10, 6, 7),
        )
    ]
    strategy, offsets = place(items, 7)
    assert strategy == "skyline search"
    assert arena_size(items, offsets) == liveness_lower_bound(items, 7) == 768


def test_search_finds_the_optimum_when_the_bound_is_unreachable():
    # No plan fits the 48-byte liveness bound; 52 bytes is optimal (proven with an ILP solver).
    spans = [
        (8, 0, 0),
        (4, 6, 6),
        (28, 4, 6),
        (8, 3, 4),
        (20, 5, 5),
        (20, 0, 0),
        (20, 0, 2),
        (8, 1, 4),
        (4, 2, 4),
        (12, 1, 3),
        (4, 1, 3),
    ]
    items = [Block.of(Buffer(f"b{i}", size, first, last)) for i, (size, first, last) in enumerate(spans)]
    _, offsets = place(items, 7)
    assert liveness_lower_bound(items, 7) == 48
    assert arena_size(items, offsets) == 52


def test_search_places_an_in_place_block_around_a_buffer():
    # MobileNet's stem in miniature: the 24-byte input is read while the block's upper member (8
    # bytes at 16) is written; the block's lower 16 bytes are written only after the input died,
    # so the input fits beneath the member: 24 + 8, not 24 + 24.
    block = Block(((Buffer("stem", 8, 0, 1), 16), (Buffer("wide", 24, 1, 2), 0)))
    items = [Block.of(Buffer("input", 24, -1, 0)), block]
    _, offsets = place(items, 3)
    assert liveness_lower_bound(items, 3) == arena_size(items, offsets) == 32
    assert offsets == {"input": 0, "stem": 8}


def test_plan_does_not_depend_on_the_hash_seed():
    # Buffers on which the greedy orders miss the bound, so the search (which uses sets) decides.
    script = (
        "import random; from edgec.backend.plan import Block, Buffer, place; rng = random.Random(0); "
        "items = [Block.of(Buffer(f'b{i}', rng.randrange(1, 200), a, a + rng.randrange(0, 5))) "
        "for i, a in enumerate(rng.randrange(-1, 20) for _ in range(30))]; "
        "strategy, offsets = place(items, 24); assert strategy == 'skyline search'; "
        "print(sorted(offsets.items()))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1

"""Operator scheduling: on ResNet-8 and random branching graphs the chosen order plans into no
more bytes than the given one, and its peak is the lowest of all topological orders."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings

from edgec.backend.plan import blocks, buffers, check_plan, in_place_choices, liveness_lower_bound, plan_memory
from edgec.backend.schedule import peak_minimising_order, schedule_and_plan
from edgec.ir import Graph
from edgec.pipeline import compile_model
from edgec.zoo import mlperf
from tests.test_plan import graphs


def _topological_orders(graph: Graph):
    """Every order of graph.ops in which each op comes after the producers of its inputs."""

    def extend(done: list, available: set):
        if len(done) == len(graph.ops):
            yield list(done)
            return
        for op in graph.ops:
            if op not in done and all(name in available for name in op.inputs):
                yield from extend(done + [op], available | set(op.outputs))

    yield from extend([], set(graph.inputs))


def _is_topological(graph: Graph, order: list) -> bool:
    available = set(graph.inputs)
    for op in order:
        if not all(name in available for name in op.inputs):
            return False
        available |= set(op.outputs)
    return sorted(op.name for op in order) == sorted(op.name for op in graph.ops)


def _in_order(graph: Graph, order: list) -> Graph:
    reordered = copy.copy(graph)
    reordered.ops = list(order)
    return reordered


def test_resnet8_schedule_plans_no_more_than_the_lowering_order():
    model = compile_model(f"{mlperf.__file__}:resnet8", calibration=mlperf.calibration_data("resnet8", 8, seed=0))
    graph = model.graph
    lowered = sorted(graph.ops, key=lambda op: int(op.name.rsplit("_", 1)[1]))  # FX node order
    given = plan_memory(_in_order(graph, lowered), model.target)
    assert _is_topological(graph, graph.ops) and graph.ops != lowered
    assert model.plan.arena_bytes <= given.arena_bytes
    assert model.plan.lower_bound_bytes <= given.lower_bound_bytes
    # The strided shortcuts now run after their block's first conv, as the last readers of the
    # block's input, so they write over it.
    shortcuts = [op for op in graph.ops if op.kind == "conv2d" and op.attrs["weight"].shape[1:3] == (1, 1)]
    assert len(shortcuts) == 2 and all(op.name in model.plan.in_place for op in shortcuts)
    assert check_plan(graph, model.plan, model.target) == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_ops=12))
def test_random_graph_schedule_plans_no_more_than_the_given_order(graph):
    given = plan_memory(graph, None)
    scheduled = copy.deepcopy(graph)
    plan = schedule_and_plan(scheduled, None)
    assert _is_topological(graph, scheduled.ops)
    assert plan.arena_bytes <= given.arena_bytes
    assert check_plan(scheduled, plan) == []


def _in_place_bound(graph: Graph) -> int:
    """The liveness bound of graph.ops' order with its ops in place where the planner allows it
    (what the schedule minimises; plan_memory may still settle for a plan without in-place)."""
    in_place = in_place_choices(graph, None)
    return liveness_lower_bound(blocks(graph, buffers(graph, None, in_place), in_place), len(graph.ops))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_ops=7))
def test_schedule_has_the_lowest_liveness_bound_of_all_orders(graph):
    order = peak_minimising_order(graph, None)
    assert _is_topological(graph, order)
    assert _in_place_bound(_in_order(graph, order)) == min(
        _in_place_bound(_in_order(graph, o)) for o in _topological_orders(graph)
    )

"""The whole compiler, top to bottom:
load -> export -> normalize -> fold BN -> quantize -> lower -> fuse -> unify qparams -> layout ->
fuse copies -> finalize -> specialize -> kernel library (--kernels) -> constant layouts (--opt auto) ->
schedule + plan -> emit.
"""

from __future__ import annotations

import copy
import math
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch
from torch.fx import GraphModule

from edgec.backend import codegen
from edgec.backend.banding import check_stream_input, fit_budget
from edgec.backend.codegen import layer_constants_bytes
from edgec.backend.plan import MemoryPlan
from edgec.backend.schedule import schedule_and_plan
from edgec.errors import EdgecError, FloatActivation
from edgec.frontend import export, precision
from edgec.frontend.calibration import DEFAULT as DEFAULT_CALIBRATION
from edgec.frontend.calibration import range_warnings
from edgec.frontend.lower import lower
from edgec.frontend.quantize import (
    EdgecQuantizer,
    float_outputs,
    int4_weight_nodes,
    is_quantized,
    quantize,
    quantize_float_activations,
)
from edgec.frontend.torch_ops import GETITEM
from edgec.frontend.weight_rounding import DEFAULT as DEFAULT_INT4_ROUNDING
from edgec.frontend.weight_rounding import round_int4_weights
from edgec.ir import Graph
from edgec.ops import OPS, unit_of
from edgec.ops.band import banded_layers
from edgec.ops.cmsis_nn import select_cmsis_nn_kernels
from edgec.ops.int16_units import select_int16_kernels
from edgec.ops.matmul import fold_output_scales, place_right_operands
from edgec.ops.recurrent import keep_last_steps, make_streaming
from edgec.passes.constant_layouts import choose_constant_layouts
from edgec.passes.fold_batchnorm import fold_batchnorm
from edgec.passes.fuse import chain_split_requantizes, fold_double_requantize, fold_pad, fuse_activations, fuse_copies
from edgec.passes.layout import assign_layouts, relayout
from edgec.passes.normalize import SDPA, attention_refusal, normalize
from edgec.passes.qparams import unify_qparams
from edgec.targets.cores import TARGETS, Target, get_target

RANDOM_CALIBRATION_SAMPLES = 32


@dataclass
class Quantized:
    """A model quantized for edgec's kernels, before anything target-specific."""

    origin: str
    example_inputs: tuple
    float_module: GraphModule | None  # BN-folded float model; None for a pre-quantized program
    quantized_module: GraphModule


@dataclass
class Compiled(Quantized):
    graph: Graph = None
    plan: MemoryPlan = None
    target: Target = None
    choices: list[str] = field(default_factory=list)  # what target-level choices were made and why
    notes: dict[str, str] = field(default_factory=dict)  # op name -> why the precision choosers chose its form


def compile_model(
    spec,
    *,
    calibration,
    target: str | Target = "host",
    example_inputs=None,
    stream: bool = False,
    progress: Callable | None = None,
    warn: Callable[[str], None] = print,
    method: str = DEFAULT_CALIBRATION,
    per_channel_linear: bool = False,
    activations: str = "int8",
    int16_layers: Iterable[str] = (),
    weights: str = "int8",
    int4_layers: Iterable[str] = (),
    int4_rounding: str = DEFAULT_INT4_ROUNDING,
    tflite_compatible: bool = False,
) -> Compiled:
    loaded, module = prepare(spec, example_inputs)
    return compile_loaded(
        loaded,
        module,
        target,
        calibration=calibration,
        stream=stream,
        tflite_compatible=tflite_compatible,
        progress=progress,
        warn=warn,
        method=method,
        per_channel_linear=per_channel_linear,
        activations=activations,
        int16_layers=int16_layers,
        weights=weights,
        int4_layers=int4_layers,
        int4_rounding=int4_rounding,
    )


def compile_loaded(
    loaded: export.LoadedModel,
    module: GraphModule,
    target: str | Target,
    *,
    calibration,
    stream: bool = False,
    tflite_compatible: bool = False,
    progress: Callable | None = None,
    warn: Callable[[str], None] = print,
    **options,
) -> Compiled:
    """quantize_loaded (`options`: its precision and calibration keywords) -> compile_for; a model
    whose int8 constants exceed the flash budget the user gave (--flash) gets int4 weights in the
    layers the chooser picks (fit_flash_budget). The typical part's budget never changes a
    model's precision: a user who did not name a budget has not agreed to lose accuracy."""
    if options.get("activations") == "auto" and list(options.get("int16_layers", ())):
        raise EdgecError("--activations auto chooses the int16 layers itself: drop --int16-layers, or name them all")
    quantized = quantize_loaded(loaded, module, calibration=calibration, progress=progress, warn=warn, **options)
    compiled = compile_completing(
        quantized, calibration, target, warn=warn, stream=stream, tflite_compatible=tflite_compatible
    )
    budget = compiled.target.flash_bytes
    if not (
        budget is None
        or not compiled.target.flash_budget_given
        or quantized.float_module is None
        or options.get("weights", "int8") != "int8"
        or list(options.get("int4_layers", ()))
        or constants_total(compiled.graph) <= budget
    ):
        compiled = fit_flash_budget(
            loaded, compiled, calibration=calibration, stream=stream, tflite_compatible=tflite_compatible, **options
        )
    if options.get("activations") != "auto" or quantized.float_module is None:
        return compiled
    return fit_activations(
        loaded, compiled, calibration=calibration, stream=stream, tflite_compatible=tflite_compatible, **options
    )


def compile_completing(quantized: Quantized, calibration, target, *, warn, **options) -> Compiled:
    """compile_for; a quantized program that leaves in float an activation edgec runs in int8
    (torchao's inductor quantizers: a conv's output before float pooling) gets it quantized from
    the calibration data, one at a time as compiling finds them, when the user gave calibration
    data (without, the one-line FloatActivation stands); the program's own qparams stay."""
    completed: set[str] = set()
    while True:
        try:
            return compile_for(quantized, target, **options)
        except FloatActivation as missing:
            if quantized.float_module is not None or calibration is None or missing.node in completed:
                raise
            samples = calibration_samples(calibration, quantized.example_inputs, warn)
            quantize_float_activations(quantized.quantized_module, [missing.node], samples, warn)
            completed.add(missing.node)


def constants_total(graph: Graph) -> int:
    """The flash bytes of the graph's constants as specialized now (what emit writes)."""
    return sum(layer_constants_bytes(op, graph) for op in graph.ops)


def fit_flash_budget(
    loaded: export.LoadedModel, compiled: Compiled, *, calibration, stream: bool, tflite_compatible: bool, **options
) -> Compiled:
    """The int8 build `compiled` is over its flash budget: the layers edgec.frontend.precision
    chooses get int4 weights, the build is redone with them (each chosen layer's kernel reason
    and plan.precision say why; compiled.choices the choice and the frontier). When even every
    choosable layer int4 does not fit, `compiled` is returned with plan.precision saying the
    smallest constants reachable (emit's budget error names them)."""
    target, budget = compiled.target, compiled.target.flash_bytes
    rounding = options.get("int4_rounding", DEFAULT_INT4_ROUNDING)
    samples = calibration_samples(calibration, loaded.example_inputs, lambda _: None)
    layers = precision.choosable_layers(compiled.float_module)
    if not layers:
        return compiled
    reference = precision.measure_sensitivities(compiled.float_module, layers, samples, rounding)
    base_noise = precision.relative_noise(reference, precision.run_flat(compiled.quantized_module, samples))

    def build(int4_layers: list[str]) -> Compiled:
        quantized = quantize_loaded(
            loaded,
            copy.deepcopy(compiled.float_module),
            calibration=calibration,
            warn=lambda _: None,
            **{**options, "int4_layers": int4_layers},
        )
        return compile_for(quantized, target, stream=stream, tflite_compatible=tflite_compatible)

    smallest = build([layer.path for layer in layers])
    ops_of = _layer_ops(compiled.float_module, layers, smallest.graph)
    int8_ops, int4_ops = _ops_by_name(compiled.graph), _ops_by_name(smallest.graph)
    for layer in layers:
        layer.int8_bytes = sum(layer_constants_bytes(int8_ops[name], compiled.graph) for name in ops_of[layer.path])
        layer.int4_bytes = sum(layer_constants_bytes(int4_ops[name], smallest.graph) for name in ops_of[layer.path])
    int8_bytes = constants_total(compiled.graph)
    choice = precision.choose(layers, int8_bytes, budget, base_noise)
    record = {
        "budget_bytes": budget,
        "int8_constants_bytes": int8_bytes,
        "smallest_constants_bytes": constants_total(smallest.graph),
        "int8_sqnr_db": _finite(precision.sqnr_db(base_noise)),
    }
    if choice is None:
        compiled.plan.precision = {**record, "fits": False}
        return compiled
    chosen = build(choice.int4)
    measured = precision.relative_noise(reference, precision.run_flat(chosen.quantized_module, samples))
    under = _budget_words(target)
    for layer in layers:
        int4 = layer.path in choice.int4
        note = (
            f"{'int4' if int4 else 'int8'}: {'chosen' if int4 else 'kept'} under {under}, sensitivity "
            f"{layer.sqnr_db:.1f} dB SQNR with its weights int4 alone ({layer.saved:,} B saved at int4)"
        )
        chosen.notes.update({name: note for name in ops_of[layer.path]})
    _annotate(chosen)
    chosen.plan.precision = {
        **record,
        "fits": True,
        "constants_bytes": constants_total(chosen.graph),
        "int4_layers": choice.int4,
        "estimated_sqnr_db": _finite(choice.estimated_sqnr_db),
        "measured_sqnr_db": _finite(precision.sqnr_db(measured)),
        "layers": [
            {
                "path": layer.path,
                "ops": ops_of[layer.path],
                "weights": "int4" if layer.path in choice.int4 else "int8",
                "sensitivity_sqnr_db": _finite(layer.sqnr_db),
                "int8_bytes": layer.int8_bytes,
                "int4_bytes": layer.int4_bytes,
            }
            for layer in layers
        ],
        "frontier": [{"constants_bytes": size, "estimated_sqnr_db": _finite(sqnr)} for size, sqnr in choice.frontier],
    }
    chosen.choices = precision_summary(chosen.plan.precision, under) + chosen.choices
    return chosen


def precision_summary(record: dict, under: str) -> list[str]:
    """What `edgec build` prints about the chooser's choice: the choice and a few frontier points."""
    int4 = record["int4_layers"]
    points = precision.frontier_points([(p["constants_bytes"], p["estimated_sqnr_db"]) for p in record["frontier"]])
    return [
        f"weights under {under}: int8 constants {record['int8_constants_bytes']:,} B -> "
        f"{record['constants_bytes']:,} B with {len(int4)} of {len(record['layers'])} layers int4 "
        f"(--int4-layers {','.join(int4)}); SQNR vs float {_db(record['int8_sqnr_db'])} int8 -> "
        f"{_db(record['measured_sqnr_db'])} (estimated {_db(record['estimated_sqnr_db'])}) on the calibration data",
        "  frontier (constants, estimated SQNR, the least sensitive layers per byte int4 first): "
        + ", ".join(f"{size:,} B {_db(sqnr)}" for size, sqnr in points),
    ]


def fit_activations(
    loaded: export.LoadedModel, compiled: Compiled, *, calibration, stream: bool, tflite_compatible: bool, **options
) -> Compiled:
    """--activations auto: int16 activations for the layers' outputs where they buy the most
    accuracy per byte, within the RAM budget (the arena, planned exactly on each candidate build)
    and the flash budget (docs/precision.md). `compiled` is the int8-activation build (its int4
    layers, if any, chosen already: they stay int8-activation, the 16x8 kernels take int8 weights).
    The chosen build's plan.precision["activations"] and compiled.choices say what was chosen."""
    target, weights = compiled.target, compiled.plan.precision or {}
    if not weights.get("fits", True):
        return compiled  # over the flash budget whatever the activations: emit says so
    samples = calibration_samples(calibration, loaded.example_inputs, lambda _: None)
    int4 = list(weights.get("int4_layers", options.get("int4_layers", ())))
    float_module = compiled.float_module
    moves = [] if options.get("weights") == "int4" else precision.int16_moves(float_module, int4)
    reference = precision.run_flat(float_module, samples)
    base_noise = precision.relative_noise(reference, precision.run_flat(compiled.quantized_module, samples))
    precision.measure_activation_noise(float_module, moves, samples, reference)
    builds: dict[tuple, Compiled | None] = {(): compiled}

    def build(paths: tuple) -> Compiled | None:
        """The build with `paths` int16 (None if edgec refuses it or it would change the model's
        input or output dtype), cached."""
        key = tuple(sorted(paths))
        if key not in builds:
            try:
                quantized = quantize_loaded(
                    loaded,
                    copy.deepcopy(float_module),
                    calibration=calibration,
                    warn=lambda _: None,
                    **{**options, "activations": "int8", "int16_layers": list(key), "int4_layers": int4},
                )
                candidate = compile_for(quantized, target, stream=stream, tflite_compatible=tflite_compatible)
            except EdgecError:
                candidate = None
            ends = (*candidate.graph.inputs, *candidate.graph.outputs) if candidate else ()
            builds[key] = candidate if all(candidate.graph.tensors[n].dtype == "int8" for n in ends) else None
        return builds[key]

    def fits(candidate: Compiled) -> bool:
        return (target.ram_bytes is None or candidate.plan.arena_bytes <= target.ram_bytes) and (
            target.flash_bytes is None or constants_total(candidate.graph) <= target.flash_bytes
        )

    def cost(candidate: Compiled) -> int:
        """The RAM and flash bytes a build takes beyond the int8-activation one."""
        return max(0, candidate.plan.arena_bytes - compiled.plan.arena_bytes) + max(
            0, constants_total(candidate.graph) - constants_total(compiled.graph)
        )

    def estimate(paths: tuple) -> float:
        return max(0.0, base_noise - precision.removed_noise(moves, precision.int16_nodes(float_module, paths)))

    singles = {move.index: build(move.paths) for move in moves}
    order = sorted(
        (move for move in moves if singles[move.index] is not None),
        key=lambda move: (-(base_noise - estimate(move.paths)) / max(1, cost(singles[move.index])), move.index),
    )
    chosen: tuple = ()
    for move in order:
        paths = tuple(dict.fromkeys(chosen + move.paths))
        candidate = build(paths)
        if paths != chosen and candidate is not None and fits(candidate):
            chosen = paths
    frontier = _pareto(
        [
            (point.plan.arena_bytes, constants_total(point.graph), precision.sqnr_db(estimate(paths)), paths)
            for paths, point in builds.items()
            if point is not None
        ]
    )
    result = build(chosen)
    measured = precision.relative_noise(reference, precision.run_flat(result.quantized_module, samples))
    chosen_nodes = precision.int16_nodes(float_module, chosen)
    record = {
        "ram_budget_bytes": target.ram_bytes,
        "flash_budget_bytes": target.flash_bytes,
        "int8_arena_bytes": compiled.plan.arena_bytes,
        "arena_bytes": result.plan.arena_bytes,
        "int8_constants_bytes": constants_total(compiled.graph),
        "constants_bytes": constants_total(result.graph),
        "int16_layers": _graph_order(float_module, chosen),
        "int8_sqnr_db": _finite(precision.sqnr_db(base_noise)),
        "estimated_sqnr_db": _finite(precision.sqnr_db(estimate(chosen))),
        "measured_sqnr_db": _finite(precision.sqnr_db(measured)),
        "layers": [
            {
                "path": move.path,
                "int16_layers": list(move.paths),
                "activations": "int16" if move.nodes <= chosen_nodes else "int8",
                "sensitivity_sqnr_db": _finite(move.sqnr_db),
                "arena_bytes": singles[move.index].plan.arena_bytes if singles[move.index] else None,
            }
            for move in moves
        ],
        "frontier": [
            {
                "arena_bytes": arena,
                "constants_bytes": size,
                "estimated_sqnr_db": _finite(sqnr),
                "int16_layers": _graph_order(float_module, paths),
            }
            for arena, size, sqnr, paths in frontier
        ],
    }
    if result is not compiled:
        result.notes = dict(compiled.notes)
        note = f"int16: chosen by --activations auto {_ram_words(target)}"
        for op in _layer_level_ops(result.graph):
            if any(result.graph.tensors[name].dtype == "int16" for name in op.outputs):
                result.notes[op.name] = f"{note}; {result.notes[op.name]}" if op.name in result.notes else note
        _annotate(result)
        weights_chosen = precision_summary(weights, _budget_words(target)) if weights.get("fits") else []
        result.choices = weights_chosen + result.choices
    result.plan.precision = {**weights, "activations": record}
    result.choices = activation_summary(record, _ram_words(target)) + result.choices
    return result


def _pareto(points: list[tuple]) -> list[tuple]:
    """The (arena, constants, estimated SQNR, paths) points no other point beats: none with an
    arena as small and a higher SQNR; of equal ones, the fewest constants, then the fewest paths."""
    frontier = []
    for point in sorted(points, key=lambda p: (p[0], -p[2], p[1], len(p[3]), p[3])):
        if not frontier or point[2] > frontier[-1][2]:
            frontier.append(point)
    return frontier


def _graph_order(module: GraphModule, paths: tuple) -> list[str]:
    """`paths` in the order of the first node each selects."""
    order = {node.name: i for i, node in enumerate(module.graph.nodes)}
    first = {path: min((order[n] for n in precision.int16_nodes(module, (path,))), default=0) for path in paths}
    return sorted(paths, key=lambda path: (first[path], path))


def _ram_words(target: Target) -> str:
    return "without a RAM budget" if target.ram_bytes is None else f"under the RAM budget {target.ram_bytes:,} B"


def activation_summary(record: dict, under: str) -> list[str]:
    """What `edgec build` prints about --activations auto: the choice and a few frontier points."""
    int16 = record["int16_layers"]
    chosen = sum(layer["activations"] == "int16" for layer in record["layers"])
    points = precision.frontier_points([(p["arena_bytes"], p["estimated_sqnr_db"]) for p in record["frontier"]])
    return [
        f"activations auto {under}: arena {record['int8_arena_bytes']:,} B int8 -> "
        f"{record['arena_bytes']:,} B with {chosen} of {len(record['layers'])} layers' outputs int16 "
        f"(--int16-layers {','.join(int16) if int16 else '(none)'}); "
        f"SQNR vs float {_db(record['int8_sqnr_db'])} int8 -> "
        f"{_db(record['measured_sqnr_db'])} (estimated {_db(record['estimated_sqnr_db'])}) on the calibration data",
        "  frontier (arena, estimated SQNR of the builds tried that no other beats): "
        + ", ".join(f"{size:,} B {_db(sqnr)}" for size, sqnr in points),
    ]


def _annotate(compiled: Compiled) -> None:
    """Each noted layer's kernel reason starts with its note (what the precision choosers decided)."""
    for op in _layer_level_ops(compiled.graph):
        if op.name in compiled.notes:
            op.kernel = replace(op.kernel, reason=f"{compiled.notes[op.name]}; {op.kernel.reason}")


def _db(value: float | None) -> str:
    return "exact" if value is None else f"{value:.1f} dB"


def _finite(value: float) -> float | None:
    """A dB figure for JSON: None for a noiseless (infinite) one."""
    return None if math.isinf(value) else round(value, 2)


def _layer_level_ops(graph: Graph) -> list:
    """The graph's ops, a band stage's (edgec.ops.band) in its place."""
    return [layer for op in graph.ops for layer in banded_layers(op)]


def _ops_by_name(graph: Graph) -> dict:
    return {op.name: op for op in _layer_level_ops(graph)}


def _budget_words(target: Target) -> str:
    size = target.flash_bytes
    text = f"{size // 2**20}M" if size % 2**20 == 0 else f"{size // 1024}K" if size % 1024 == 0 else f"{size}"
    return f"--flash {text}" if target.part == "budget from --ram/--flash" else f"the {text} flash of {target.part}"


def _layer_ops(float_module: GraphModule, layers: list, int4_graph: Graph) -> dict[str, list[str]]:
    """Each layer's IR op names: the ops with int4 weights in `int4_graph` (every layer int4) are
    the layers' nodes, in graph order."""
    order = {node.name: i for i, node in enumerate(float_module.graph.nodes)}
    owners = sorted(((order[name], layer.path) for layer in layers for name in layer.nodes))
    ops = [op.name for op in _layer_level_ops(int4_graph) if op.attrs.get("weight_bits") == 4]
    if len(ops) != len(owners):
        raise EdgecError(
            f"--flash: {len(owners)} layers were made int4 but the compiled model has {len(ops)} int4 ops; "
            f"cannot tell the layers' flash apart (please report this model)"
        )
    result: dict[str, list[str]] = {layer.path: [] for layer in layers}
    for (_, path), name in zip(owners, ops):
        result[path].append(name)
    return result


def quantize_model(
    spec,
    *,
    calibration,
    example_inputs=None,
    progress: Callable | None = None,
    warn: Callable[[str], None] = print,
    method: str = DEFAULT_CALIBRATION,
    per_channel_linear: bool = False,
    activations: str = "int8",
    int16_layers: Iterable[str] = (),
    weights: str = "int8",
    int4_layers: Iterable[str] = (),
    int4_rounding: str = DEFAULT_INT4_ROUNDING,
) -> Quantized:
    """load -> export -> normalize -> fold BN -> quantize (or keep a program's own Q/DQ).
    `spec`: anything export.load takes (a .pt2 path, 'file.py:factory', an ExportedProgram, or
    an nn.Module with `example_inputs`). `method` (edgec.frontend.calibration) and `per_channel_linear` are
    EdgecQuantizer's options, and so are `activations` ("int8" or "int16", the 16x8 scheme, for the
    whole model) and `int16_layers` (the nn.Module paths whose layers take int16 activations), and
    `weights` ("int8" or "int4": every linear and convolution layer) and `int4_layers` (the paths
    whose layers take int4 weights), chosen by `int4_rounding` (edgec.frontend.weight_rounding)."""
    if activations == "auto":
        raise EdgecError(
            "activations='auto' chooses int16 layers within a target's budgets: use compile_model / edgec build"
        )
    loaded, module = prepare(spec, example_inputs)
    return quantize_loaded(
        loaded,
        module,
        calibration=calibration,
        progress=progress,
        warn=warn,
        method=method,
        per_channel_linear=per_channel_linear,
        activations=activations,
        int16_layers=int16_layers,
        weights=weights,
        int4_layers=int4_layers,
        int4_rounding=int4_rounding,
    )


def quantize_loaded(
    loaded: export.LoadedModel,
    module: GraphModule,
    *,
    calibration,
    progress: Callable | None = None,
    warn: Callable[[str], None] = print,
    method: str = DEFAULT_CALIBRATION,
    per_channel_linear: bool = False,
    activations: str = "int8",
    int16_layers: Iterable[str] = (),
    weights: str = "int8",
    int4_layers: Iterable[str] = (),
    int4_rounding: str = DEFAULT_INT4_ROUNDING,
) -> Quantized:
    """quantize_model after `prepare`: calibrate and quantize (or keep a program's own Q/DQ)."""
    for note in loaded.notes:
        warn(note)
    if is_quantized(module):
        if (
            method != DEFAULT_CALIBRATION
            or per_channel_linear
            or activations != "int8"
            or list(int16_layers)
            or weights != "int8"
            or list(int4_layers)
        ):
            warn(f"WARNING: {loaded.origin} is already quantized; calibration and precision options do not apply")
        if calibration is not None and (names := float_outputs(module)):
            quantize_float_activations(
                module, names, calibration_samples(calibration, loaded.example_inputs, warn), warn
            )
        return Quantized(loaded.origin, loaded.example_inputs, None, module)
    samples = calibration_samples(calibration, loaded.example_inputs, warn, module)
    if calibration is not None:
        for line in range_warnings(samples, loaded.example_inputs):
            warn(line)
    float_module = copy.deepcopy(module)
    if weights == "int4" or list(int4_layers):
        round_int4_weights(module, int4_weight_nodes(module, weights == "int4", int4_layers), samples, int4_rounding)
    quantizer = EdgecQuantizer(
        method,
        per_channel_linear,
        activations="int8" if activations == "auto" else activations,  # auto: compile_loaded chooses
        int16_layers=int16_layers,
        weights=weights,
        int4_layers=int4_layers,
    )
    return Quantized(loaded.origin, loaded.example_inputs, float_module, quantize(module, samples, progress, quantizer))


def prepare(spec, example_inputs=None) -> tuple[export.LoadedModel, GraphModule]:
    """load -> export -> normalize -> fold BN, and every unsupported operator reported at once:
    all that happens before calibration."""
    loaded = export.load(spec, example_inputs)
    module = normalize(loaded.module)  # first: an attention mask of 0 and -inf becomes a bool mask
    check_finite(module, loaded.origin)
    module = fold_batchnorm(module)
    check_supported(module, loaded.origin)
    return loaded, module


def compile_for(
    quantized: Quantized, target: str | Target = "host", *, stream: bool = False, tflite_compatible: bool = False
) -> Compiled:
    """lower -> (stream: one time step per invoke) -> fuse -> unify qparams -> layout -> fuse
    copies -> finalize -> specialize for `target` -> constant layouts -> schedule + plan -> over the
    RAM budget: band stages (edgec.backend.banding). `tflite_compatible`: where TFLite Micro departs
    from the program's literal meaning, compute what TFLite Micro computes (docs/tflite-compatible.md)."""
    target_info = get_target(target)
    graph = lower(
        quantized.quantized_module,
        converter_semantics=quantized.float_module is None,
        tflite_compatible=tflite_compatible,
    )
    if tflite_compatible:
        fold_double_requantize(graph)
        chain_split_requantizes(graph)
    if stream:
        make_streaming(graph)
    else:
        keep_last_steps(graph)
    fold_pad(graph)
    fuse_activations(graph)
    fold_output_scales(graph)
    unify_qparams(graph)
    assign_layouts(graph)
    relayout(graph)
    fuse_copies(graph)
    place_right_operands(graph)
    select_int16_kernels(graph)
    for op in graph.ops:
        unit_of(op).finalize(op, graph)
        unit_of(op).specialize(op, graph, target_info)
    choices = []
    if target_info.kernels == "cmsis-nn":
        choices += select_cmsis_nn_kernels(graph, target_info, Path(target_info.cmsis_nn_dir))
    choices += choose_constant_layouts(graph, target_info)
    check_stream_input(graph, target_info, stream)
    plan, banding = fit_budget(graph, target_info, schedule_and_plan(graph, target_info))
    if banding is not None:
        plan.banding = banding.to_json()
        choices.append(banding.summary())
    return Compiled(
        quantized.origin,
        quantized.example_inputs,
        quantized.float_module,
        quantized.quantized_module,
        graph,
        plan,
        target_info,
        choices,
    )


def emit(compiled: Compiled, out_dir: Path, name: str) -> dict:
    """Writes the C directory atomically (see _write_atomically): a failure, or a model over the
    target's memory budget, never leaves an output directory."""

    def write(staging: Path) -> dict:
        report = codegen.emit(
            compiled.graph, compiled.plan, staging, name=name, target=compiled.target, origin=compiled.origin
        )
        check_memory_budget(report, compiled.target)
        return report

    return _write_atomically(Path(out_dir), write)


def _write_atomically(out_dir: Path, write: Callable[[Path], dict]) -> dict:
    """`write` fills a sibling temporary folder, which is then renamed into place: `out_dir` is
    either the whole new directory or left as it was. Returns what `write` returns."""
    check_output_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        report = write(staging)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


def emit_many(models: list[tuple[Compiled, str]], out_dir: Path, *, shared_arena: bool = False) -> dict:
    """Several models (compiled for one target, each with its C name) into one directory with one
    runtime (and, with `shared_arena`, one arena sized by the largest), written atomically as
    emit writes one. Returns the directory's report (codegen.emit_many)."""
    if not models:
        raise EdgecError("no models to write")
    names = [name for _, name in models]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise EdgecError(f"two models are named {repeated[0]!r}: give each model its own name (--name)")
    target = models[0][0].target
    for compiled, name in models:
        if (compiled.target.name, compiled.target.cflags, compiled.target.kernels, compiled.target.cmsis_nn_dir) != (
            target.name,
            target.cflags,
            target.kernels,
            target.cmsis_nn_dir,
        ):
            raise EdgecError(
                f"model {name!r} is compiled for {compiled.target.name} (--kernels "
                f"{compiled.target.kernels}), {names[0]!r} for {target.name} (--kernels {target.kernels}): "
                f"models sharing one directory and runtime need the same target and kernels"
            )

    def write(staging: Path) -> dict:
        report = codegen.emit_many(
            [(c.graph, c.plan, name, c.origin) for c, name in models], staging, target=target, shared_arena=shared_arena
        )
        # The firmware holds them all: their arenas (shared: the largest) and all their constants.
        check_memory_budget(
            {
                "arena_bytes": report["arena_bytes"],
                "weights_bytes": sum(model["weights_bytes"] for model in report["models"]),
            },
            target,
        )
        return report

    return _write_atomically(Path(out_dir), write)


def quantization_warnings(graph: Graph) -> list[str]:
    """One line per layer whose int8 weights are all zero (its float weights below half a step of
    their scale, or a program's collapsed constants: the layer outputs its bias alone) or whose
    int32 bias saturates (too large for s_in * s_w): bit-exact, but not the model."""
    warnings = []
    for op in graph.ops:
        weight, bias = op.attrs.get("weight"), op.attrs.get("bias")
        if weight is None or np.asarray(weight).dtype != np.int8:
            continue
        where = f"{op.source or op.name} ({op.name})"
        if not np.asarray(weight).any():
            warnings.append(f"WARNING: {where}: every weight quantizes to 0; the layer outputs its bias alone")
        if bias is not None and np.asarray(bias).dtype == np.int32:
            saturated = np.flatnonzero(np.abs(np.asarray(bias, np.int64)) >= 2**31 - 1)
            if saturated.size:
                warnings.append(
                    f"WARNING: {where}: the int32 bias saturates in output channels "
                    f"{saturated.tolist()[:8]}{' ...' if saturated.size > 8 else ''} "
                    f"(too large for the layer's input and weight scales)"
                )
    return warnings


def check_memory_budget(report: dict, target: Target) -> None:
    """One error, with the figures, if the arena exceeds the target's RAM budget or the constants
    its flash budget. Targets without a budget (the host) accept any model."""
    excess = []
    if target.ram_bytes is not None and report["arena_bytes"] > target.ram_bytes:
        excess.append(f"arena {report['arena_bytes']:,} B > RAM budget {target.ram_bytes:,} B")
    if target.flash_bytes is not None and report["weights_bytes"] > target.flash_bytes:
        excess.append(f"constants {report['weights_bytes']:,} B > flash budget {target.flash_bytes:,} B")
    if excess:
        table = TARGETS.get(target.name)
        typical = table is not None and (target.ram_bytes, target.flash_bytes) == (table.ram_bytes, table.flash_bytes)
        origin = f"budget of {target.part}; set yours with --ram/--flash" if typical else target.part
        if (
            report["weights_bytes"] > (target.flash_bytes or 0)
            and target.opt == "speed"
            and target.dsp
            and not target.mve
        ):
            origin += "; --opt auto or size keeps the DSP kernels' constants smaller"
        if report["weights_bytes"] > (target.flash_bytes or 0) and not target.flash_budget_given:
            origin += "; with --flash, edgec may give some layers int4 weights to fit (docs/int4.md)"
        if not report.get("precision", {}).get("fits", True):
            origin += (
                f"; {report['precision']['smallest_constants_bytes']:,} B is the smallest the constants reach "
                f"with int4 weights in every layer that can take them"
            )
        if report.get("banding"):
            origin += (
                f"; {report['arena_bytes']:,} B is the smallest arena band stages reach, from "
                f"{report['banding']['layer_by_layer_arena_bytes']:,} B layer by layer"
            )
        raise EdgecError(f"model does not fit {target.name}: {'; '.join(excess)} ({origin})")


def check_output_dir(out_dir: Path) -> None:
    """An existing output directory is replaced only if edgec wrote it (it has a report.json)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (
        not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / "report.json").is_file())
    ):
        raise EdgecError(f"{out_dir}: exists and is not an edgec output directory; refusing to replace it")


def check_finite(module: GraphModule, origin: str) -> None:
    """One error naming the first float parameter or buffer the graph reads that holds NaN or an
    infinity, which no int8 scale can represent (calibration would otherwise fail deep inside the
    observers)."""
    read = {node.target for node in module.graph.nodes if node.op == "get_attr"}
    for name, tensor in (*module.named_parameters(), *module.named_buffers()):
        if name in read and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            what = "NaN" if bool(torch.isnan(tensor).any()) else "an infinite value"
            raise EdgecError(
                f"{origin}: {'parameter' if isinstance(tensor, torch.nn.Parameter) else 'buffer'} "
                f"'{name}' contains {what}; a model's weights and buffers must be finite"
            )


def check_supported(module: GraphModule, origin: str) -> None:
    """One error listing every operator edgec cannot compile and every use of a supported one
    beyond its limits (OpDef.check), grouped by operator and source line, before any work."""
    known = set(OPS) | {GETITEM}
    problems: dict[tuple[str, str], int] = {}
    for node in module.graph.nodes:
        if node.op != "call_function" or "quantized_decomposed" in str(node.target):
            continue
        if node.target in SDPA:
            problem = attention_refusal(node)
        elif node.target not in known:
            problem = f"{node.target} (unsupported operator)"
        elif node.target == GETITEM or (problem := OPS[node.target].check(node)) is None:
            continue
        key = (problem, export.node_location(node))
        problems[key] = problems.get(key, 0) + 1
    if problems:
        lines = [
            f"  {problem}{f' x{count}' if count > 1 else ''}: {where}" for (problem, where), count in problems.items()
        ]
        raise EdgecError(
            f"{origin}: cannot compile {sum(problems.values())} operator use"
            f"{'s' if sum(problems.values()) > 1 else ''}:\n" + "\n".join(lines)
        )


def calibration_samples(calibration, example_inputs: tuple, warn, module: GraphModule | None = None) -> list[tuple]:
    """Calibration as one tuple of tensors per sample, each shaped (and typed: token ids stay
    integers) like its example input."""
    shapes = [tuple(x.shape) for x in example_inputs]
    if calibration is None:
        warn(
            f"WARNING: no --calib data given: calibrating on {RANDOM_CALIBRATION_SAMPLES} random normal "
            f"samples; int8 accuracy on real data will likely be poor. Pass --calib samples.npy."
        )
        rows = token_rows(module) if module is not None else ()
        calibration = random_samples(example_inputs, RANDOM_CALIBRATION_SAMPLES, seed=0, token_rows=rows)
    per = per_input_samples(calibration, example_inputs, "calibration data")
    return [
        tuple(
            torch.from_numpy(np.ascontiguousarray(x[i])).reshape(shape).to(example.dtype)
            for x, shape, example in zip(per, shapes, example_inputs)
        )
        for i in range(len(per[0]))
    ]


def sample_shape(input_shape: tuple) -> tuple:
    """The shape of one sample of a model input in edgec's [N, ...] sample arrays: the input's own
    shape, after a leading sample axis; for an input exported with a batch of one ([1, C, H, W])
    that batch axis is the sample axis ([N, C, H, W], the form every edgec release has taken)."""
    input_shape = tuple(input_shape)
    return input_shape[1:] if input_shape[:1] == (1,) else input_shape


def random_samples(example_inputs: tuple, count: int, seed: int, token_rows=()) -> list[np.ndarray]:
    """`count` seeded standard normal samples per model input, as per_input_samples gives them; for
    an integer input (token ids), ids drawn uniformly from [0, rows) with rows its entry of
    `token_rows` (token_rows(module)), as integer-valued floats."""
    rng = np.random.default_rng(seed)
    rows = list(token_rows) + [None] * (len(example_inputs) - len(token_rows))
    return [
        rng.integers(0, limit or 2, (count, *sample_shape(x.shape))).astype(np.float32)
        if not torch.is_floating_point(x)
        else rng.standard_normal((count, *sample_shape(x.shape)), dtype=np.float32)
        for x, limit in zip(example_inputs, rows)
    ]


def token_rows(module: GraphModule) -> list[int | None]:
    """Per model input: the table rows of the embeddings that read it (the fewest), or None."""
    from edgec.frontend.torch_ops import EMBEDDINGS, module_attribute

    rows = []
    for node in module.graph.nodes:
        if node.op == "placeholder":
            tables = [
                module_attribute(module, user.args[0].target).shape[0]
                for user in node.users
                if user.target in EMBEDDINGS and user.args[0].op == "get_attr"
            ]
            rows.append(min(tables) if tables else None)
    return rows


def per_input_samples(data, example_inputs: tuple, what: str) -> list[np.ndarray]:
    """Float samples as one [N, ...] array per model input: `data` is an array or a tensor (a
    one-input model), a list of them in input order, a dict of arrays (an .npz: its one known key
    for a one-input model, else one array per input in file order), or any other iterable of
    batches (a DataLoader: see batches_to_arrays)."""
    count = len(example_inputs)
    if _is_batch_iterable(data):
        data = batches_to_arrays(data, count, what)
    if isinstance(data, dict):
        if count == 1:
            key = next((k for k in ("x", "calib", "inputs", "data") if k in data), next(iter(data)))
            data = [data[key]]
        else:
            data = list(data.values())
    elif not isinstance(data, (list, tuple)):
        data = [data]
    if len(data) != count:
        raise EdgecError(
            f"{what} has {len(data)} array{'s' if len(data) != 1 else ''}; the model has {count} "
            f"inputs (give an .npz with one array per input, in input order)"
        )
    per = [
        as_samples(x, tuple(example.shape), f"{what}{f' for input {i}' if count > 1 else ''}")
        for i, (x, example) in enumerate(zip(data, example_inputs))
    ]
    if len({len(x) for x in per}) != 1:
        raise EdgecError(f"{what}: the inputs' arrays hold different numbers of samples ({[len(x) for x in per]})")
    return per


def _is_batch_iterable(data) -> bool:
    return not isinstance(data, (np.ndarray, torch.Tensor, dict, list, tuple, str, bytes)) and hasattr(data, "__iter__")


def batches_to_arrays(batches, count: int, what: str) -> list[np.ndarray]:
    """An iterable of batches (a DataLoader, a generator) as one [N, ...] array per model input.
    A batch is an array or tensor (a one-input model), or a tuple/list whose first `count` items
    are the model's inputs (what follows, e.g. the labels, is ignored)."""
    per: list[list[np.ndarray]] = [[] for _ in range(count)]
    for index, batch in enumerate(batches):
        items = list(batch)[:count] if isinstance(batch, (tuple, list)) else [batch]
        if len(items) != count:
            raise EdgecError(
                f"{what}: batch {index} has {len(items)} item{'s' if len(items) != 1 else ''}; "
                f"the model has {count} inputs"
            )
        for arrays, item in zip(per, items):
            arrays.append(as_array(item))
    if not per[0]:
        raise EdgecError(f"{what}: the iterable gave no batches")
    try:
        return [np.concatenate(arrays) for arrays in per]
    except ValueError as exc:
        raise EdgecError(f"{what}: batches of different sample shapes ({exc})") from None


def as_array(data) -> np.ndarray:
    """A tensor (on any device, with or without grad) or anything array-like, as a numpy array."""
    if isinstance(data, torch.Tensor):
        return data.detach().cpu().numpy()
    return np.asarray(data)


def as_samples(data: np.ndarray, input_shape: tuple, what: str) -> np.ndarray:
    """Float samples of a model input shaped `input_shape`, as [N, *sample_shape(input_shape)], or
    a clear error. Accepted: [N, *input_shape] (one more leading axis than the input: N samples,
    each a whole input, whatever its rank and batch), exactly `input_shape` (one sample), and for
    an input whose first dimension is 1, [N, *input_shape[1:]] (that batch axis as the sample axis)."""
    data = as_array(data)
    if data.dtype.kind not in "fiub":
        raise EdgecError(f"{what} must be numeric or bool, got dtype {data.dtype}")
    input_shape, per_sample = tuple(input_shape), sample_shape(input_shape)
    if data.shape == input_shape:
        data = data[None]
    if data.ndim == len(input_shape) + 1 and data.shape[1:] == input_shape:
        data = data.reshape(data.shape[0], *per_sample)
    if data.ndim < 1 or data.shape[1:] != per_sample or data.shape[0] == 0:
        forms = f"[N, {', '.join(map(str, input_shape))}]"
        if per_sample != input_shape:
            forms += f" or [N, {', '.join(map(str, per_sample))}]"
        raise EdgecError(
            f"{what} has shape {list(data.shape)}; expected {forms} (N samples) for model input {list(input_shape)}"
        )
    if not np.all(np.isfinite(data)):
        raise EdgecError(f"{what} contains NaN or infinite values")
    return data.astype(np.float32)


def load_samples(path: str | Path):
    """A .npy file's array, or an .npz file's arrays as a dict (in file order)."""
    path = Path(path)
    if not path.is_file():
        raise EdgecError(f"{path}: no such file")
    try:
        with warnings.catch_warnings():
            loaded = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise EdgecError(f"{path}: not a .npy/.npz file ({str(exc).splitlines()[0]})") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        if not loaded.files:
            raise EdgecError(f"{path}: the .npz file is empty")
        return {key: loaded[key] for key in loaded.files}
    return loaded

"""Test, on samples, that the generated C equals the golden simulator byte for byte, and that
each layer of the integer program computes what the quantized model means.

On the host, the generated directory is compiled with the host C compiler (strict C99 warnings as
errors, optionally with sanitizers, every layer's arena writes checked) together with a small
driver that streams int8 samples through <name>_invoke(); on a Cortex-M target, edgec.targets.device runs
the same samples on QEMU. Every output byte is compared with edgec.sim, each output is measured
against the float model, and every layer against the program's own Q/DQ graph (the layer check;
docs/numerics.md, "What verify checks").
"""

from __future__ import annotations

import json
import operator
import subprocess
from dataclasses import dataclass
from pathlib import Path

import jinja2
import numpy as np

from edgec import sim
from edgec.backend.codegen import TEMPLATES
from edgec.errors import EdgecError
from edgec.ir import Graph, to_torch_order
from edgec.numerics import divide_by_power_of_two
from edgec.ops import unit_of
from edgec.ops.band import BandStage, banded_layers
from edgec.ops.recurrent import held_inputs, held_state_io, reset_state
from edgec.pipeline import compile_for, emit, token_rows
from edgec.targets import device
from edgec.targets.cores import get_target

HOST_CFLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic")
# A test build: each layer may change only its own output and scratch bytes (templates/model.c.j2).
CHECK_WRITES = "-DEDGEC_CHECK_WRITES"
SANITIZE_FLAGS = ("-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")


@dataclass
class Comparison:
    samples: int
    mismatched_samples: int
    mismatched_bytes: int
    golden: np.ndarray  # [samples, output_size] int8
    device: np.ndarray

    @property
    def exact(self) -> bool:
        return self.mismatched_bytes == 0


def build_host(out_dir: Path, name: str, build_dir: Path, sanitize: bool = False) -> Path:
    """Compile the generated directory and the stdin/stdout driver into one host executable that
    checks every layer's writes."""
    build_dir.mkdir(parents=True, exist_ok=True)
    driver = build_dir / "host_main.c"
    template = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES))).get_template("host_main.c.j2")
    report = json.loads((out_dir / "report.json").read_text())
    driver.write_text(
        template.render(
            name=name,
            NAME=name.upper(),
            inputs=report["inputs"],
            outputs=report["outputs"],
            stream_input=report.get("stream_input"),
        )
    )
    sources = [str(p) for p in sorted(out_dir.glob("*.c"))] + [
        str(p) for p in sorted((out_dir / "runtime" / "src").rglob("*.c"))
    ]
    exe = build_dir / f"{name}_host"
    includes = [f"-I{d}" for d in device.model_include_dirs(out_dir, report)]
    # A linked library (CMSIS-NN) is compiled apart: without edgec's -Werror and sanitizers (its code is Arm's).
    library = [str(o) for o in device.library_objects(get_target("host"), report)]
    command = [
        "cc",
        *HOST_CFLAGS,
        CHECK_WRITES,
        *(SANITIZE_FLAGS if sanitize else ()),
        *includes,
        str(driver),
        *sources,
        *library,
        "-o",
        str(exe),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise EdgecError(
            f"host compile of {out_dir} failed: {result.stderr.strip().splitlines()[0] if result.stderr else ''}"
        )
    return exe


def run_host(exe: Path, inputs: np.ndarray, output_size: int) -> np.ndarray:
    result = subprocess.run(
        [str(exe)], input=np.ascontiguousarray(inputs, dtype=np.int8).tobytes(), capture_output=True, timeout=600
    )
    if result.returncode != 0:
        raise EdgecError(
            f"{exe.name} failed (exit {result.returncode}): {result.stderr.decode(errors='replace').strip()[:500]}"
        )
    return np.frombuffer(result.stdout, dtype=np.int8).reshape(len(inputs), output_size)


def per_input(floats) -> list[np.ndarray]:
    """Float samples as one [N, ...] array per model input (a single array: a one-input model)."""
    return [np.asarray(floats)] if isinstance(floats, np.ndarray) else [np.asarray(f) for f in floats]


def output_bytes(graph: Graph) -> int:
    """The bytes of one sample's outputs, every output in order (what the drivers write)."""
    return sum(graph.tensors[name].nbytes for name in graph.outputs)


def unpack(graph: Graph, row: np.ndarray, names: list[str]) -> list[np.ndarray]:
    """One sample's row of bytes as the stored tensors `names` (inputs or outputs, in order)."""
    data, arrays, start = np.ascontiguousarray(row, dtype=np.int8).tobytes(), [], 0
    for name in names:
        tensor = graph.tensors[name]
        arrays.append(
            np.frombuffer(data[start : start + tensor.nbytes], dtype=sim.INT_DTYPES[tensor.dtype]).reshape(tensor.shape)
        )
        start += tensor.nbytes
    return arrays


def _pack(arrays: list[np.ndarray]) -> np.ndarray:
    return np.frombuffer(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays), dtype=np.int8)


def golden_values(graph: Graph, row: np.ndarray) -> dict[str, np.ndarray]:
    """Every tensor's golden value for one sample row of input bytes."""
    return sim.run(graph, unpack(graph, row, graph.inputs))


def golden_outputs(graph: Graph, inputs: np.ndarray) -> np.ndarray:
    """[samples, output bytes]: the golden outputs, as the drivers write them."""
    return np.stack([_pack(sim.invoke(graph, unpack(graph, row, graph.inputs))) for row in inputs])


def constant_outputs(graph: Graph, outputs: np.ndarray) -> list[str]:
    """The model outputs whose bytes are the same on every sample row of `outputs` (at least two
    samples): a model whose output does not follow its input (weights that collapsed, a
    saturated layer, an input that reaches no output) -- bit-exact, but worth a warning."""
    if len(outputs) < 2:
        return []
    constant, start = [], 0
    for name in graph.outputs:
        size = graph.tensors[name].nbytes
        if (outputs[:, start : start + size] == outputs[:1, start : start + size]).all():
            constant.append(name)
        start += size
    return constant


def compare(golden: np.ndarray, device: np.ndarray) -> Comparison:
    diff = golden != device
    return Comparison(len(golden), int(diff.any(axis=1).sum()), int(diff.sum()), golden, device)


def quantized_inputs(graph: Graph, float_samples) -> np.ndarray:
    """Float samples (PyTorch layout; one array, or one per model input) -> [samples, input bytes]
    rows of every input's stored integer tensor in order, as the drivers read them."""
    per = per_input(float_samples)
    return np.stack(
        [
            _pack([sim.quantize_input(graph, arrays[sample][None], index) for index, arrays in enumerate(per)])
            for sample in range(len(per[0]))
        ]
    )


def run_on(compiled, out_dir: Path, name: str, inputs: np.ndarray, build_dir: Path) -> np.ndarray:
    """Run the generated directory on the compiled target: the host, or its emulated board."""
    if compiled.target.is_host:
        return run_host(build_host(out_dir, name, build_dir), inputs, output_bytes(compiled.graph))
    return device.run_model(compiled.target, out_dir, name, inputs, build_dir)


@dataclass
class StreamComparison:
    """The streaming build (one time step per invoke) against the golden simulator, over one
    stream of every sample's frames; and its output after the first sample's last frame against
    the whole-sequence model's on that sample."""

    steps: int  # invokes: every sample's frames
    sequence_steps: int  # frames per sample
    mismatched_bytes: int
    equals_whole_sequence: bool
    # what the stream was compared with after sequence_steps steps
    reference: str = "the whole-sequence model"


def stream_frames(stream, floats) -> list[np.ndarray]:
    """Whole-sequence float samples [N, 1, T, F] (batch first) as the stream's frames [N*T, F];
    for a model whose caller holds the state, the samples of its other inputs, one per invoke."""
    dropped = held_inputs(stream.graph)
    if dropped:
        return [x for index, x in enumerate(floats) if index not in dropped]
    return [
        x.reshape((-1,) + stream.graph.tensors[name].torch_shape[2:]) for x, name in zip(floats, stream.graph.inputs)
    ]


def compare_stream(whole, floats, whole_inputs: np.ndarray, name: str, work_dir: Path) -> StreamComparison:
    """The streaming build of `whole` (a compiled whole-sequence model), for its target, run on
    `floats` (whole sequences, quantized as `whole_inputs`) as one stream in `work_dir`."""
    stream = compile_for(whole, whole.target, stream=True)
    inputs = quantized_inputs(stream.graph, stream_frames(stream, floats))
    emit(stream, work_dir / name, name)
    outputs = run_on(stream, work_dir / name, name, inputs, work_dir / "build")
    reset_state(stream.graph)
    mismatched = compare(golden_outputs(stream.graph, inputs), outputs).mismatched_bytes
    if held_inputs(stream.graph):
        fed_back = held_state_outputs(whole.graph, stream.graph, whole_inputs)
        return StreamComparison(
            len(inputs),
            len(inputs),
            mismatched,
            bool(np.array_equal(outputs, fed_back)),
            "the model fed back its own state at every step",
        )
    steps = len(inputs) // len(whole_inputs)
    first_sequence = golden_outputs(whole.graph, whole_inputs[:1])[0]
    return StreamComparison(len(inputs), steps, mismatched, bool(np.array_equal(outputs[steps - 1], first_sequence)))


def held_state_outputs(whole: Graph, stream: Graph, whole_inputs: np.ndarray) -> np.ndarray:
    """The whole model's golden outputs on its samples one after the other, each given the state
    the one before returned (the first a zero state), as a caller holding the state runs it: the
    outputs the stream keeps, packed as its driver writes them."""
    pairs = held_state_io(whole)
    state: dict[str, np.ndarray] = {}
    rows = []
    for row in whole_inputs:
        arrays = unpack(whole, row, whole.inputs)
        for index, name in enumerate(whole.inputs):
            if any(name == h for h, _ in pairs):
                tensor = whole.tensors[name]
                arrays[index] = state.get(name, np.full(tensor.shape, tensor.zero_point, sim.INT_DTYPES[tensor.dtype]))
        results = dict(zip(whole.outputs, sim.invoke(whole, arrays)))
        state = {h: results[out].reshape(whole.tensors[h].shape) for h, out in pairs if h is not None and out}
        rows.append(_pack([results[name] for name in stream.outputs]))
    return np.stack(rows)


def _torch_input(x, dtype):
    """One sample of a model input as the model takes it: float32, or token ids in `dtype`."""
    import torch

    if dtype is not None and not dtype.is_floating_point:
        return torch.from_numpy(np.rint(np.asarray(x, np.float64)).astype(np.int64)).to(dtype)
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def float_node_values(module, sample: tuple, dtypes=None) -> dict[str, np.ndarray]:
    """Every node's float value for one sample (a tensor per model input, of `dtypes`: the
    example inputs'), keyed by FX node name (for per-layer SQNR)."""
    import torch
    from torch.fx import Interpreter

    from edgec.frontend.torch_ops import ARGMAXES

    values: dict[str, np.ndarray] = {}

    class Recorder(Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if isinstance(result, torch.Tensor) and result.dtype == torch.bool:
                values[node.name] = result.detach().numpy().astype(np.float32)  # a condition, a mask: 0 / 1
            elif isinstance(result, torch.Tensor) and (
                result.is_floating_point() or node.target in ARGMAXES or node.op == "placeholder" or _topk_item(node)
            ):
                values[node.name] = result.detach().numpy().copy()  # argmax, topk: indices; token ids as given
            return result

    with torch.no_grad():
        Recorder(module).run(*(_torch_input(x, dtype) for x, dtype in zip(sample, dtypes or [None] * len(sample))))
    return values


def _topk_item(node) -> bool:
    import torch

    return node.target is operator.getitem and getattr(node.args[0], "target", None) == torch.ops.aten.topk.default


def float_reference(compiled, float_samples) -> list[dict[str, np.ndarray]]:
    """Per-sample float values of the float model (or, for a program that came quantized, of its
    Q/DQ graph run in float), each input shaped like its example (batch of one)."""
    module = compiled.float_module if compiled.float_module is not None else compiled.quantized_module
    return _node_values_per_sample(compiled, module, float_samples)


def _node_values_per_sample(compiled, module, float_samples) -> list[dict[str, np.ndarray]]:
    per = per_input(float_samples)
    shapes = [tuple(example.shape) for example in compiled.example_inputs]
    dtypes = [example.dtype for example in compiled.example_inputs]
    # Token ids outside the table read its nearest row on the device (edgec_embedding_s8): so here.
    per = [x if rows is None else np.clip(x, 0, rows - 1) for x, rows in zip(per, token_rows(module))]
    return [
        float_node_values(module, tuple(arrays[i].reshape(shape) for arrays, shape in zip(per, shapes)), dtypes)
        for i in range(len(per[0]))
    ]


def final_nodes(compiled) -> list:
    """The quantized program's output nodes, in the graph's output order."""
    outputs = next(n for n in compiled.quantized_module.graph.nodes if n.op == "output").args[0]
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def class_score_outputs(compiled) -> list[int]:
    """The outputs that look like class scores, whose argmax means something: [N, K] (K >= 2) out
    of a softmax or log-softmax, or the only output of a one-output model shaped so. A box
    regression beside a score, a single probability, a feature map: no top-1 agreement."""
    graph = compiled.graph
    found = []
    for index, name in enumerate(graph.outputs):
        shape = graph.tensors[name].torch_shape
        if len(shape) != 2 or shape[1] < 2:
            continue
        producer = graph.producer(graph.storage(name))
        while producer is not None and producer.kind in DATA_MOVEMENT:
            producer = graph.producer(graph.storage(producer.inputs[0]))
        if len(graph.outputs) == 1 or (producer is not None and producer.kind in ("softmax", "log_softmax")):
            found.append(index)
    return found


def accuracy_summary(compiled, float_values: list[dict], int_outputs: np.ndarray, class_outputs=None) -> dict:
    """Each output of the integer model against the float one: `outputs` holds per output its
    SQNR, max |error| and, for an output of class scores (class_score_outputs, or the indices
    `class_outputs` names), top-1 agreement. output_sqnr_db is the worst output's SQNR,
    max_abs_error the largest, top1_agreement the first class-score output's (None: none)."""
    graph = compiled.graph
    tensors = [graph.tensors[name] for name in graph.outputs]
    reference = [
        np.stack([sim.stored(t, _output_value(values, node)).ravel() for values in float_values])
        for t, node in zip(tensors, final_nodes(compiled))
    ]
    unpacked = [unpack(graph, row, graph.outputs) for row in int_outputs]
    approximation = [
        np.stack([t.dequantize(outputs[i]).ravel() for outputs in unpacked]) for i, t in enumerate(tensors)
    ]
    scores = class_score_outputs(compiled) if class_outputs is None else list(class_outputs)
    outputs = []
    for index, (ref, got) in enumerate(zip(reference, approximation)):
        outputs.append(
            {
                "output": index,
                "shape": list(tensors[index].torch_shape),
                "sqnr_db": sim.sqnr_db(ref, got),
                "max_abs_error": float(np.max(np.abs(ref - got))),
                "top1_agreement": float(np.mean(ref.argmax(axis=1) == got.argmax(axis=1))) if index in scores else None,
            }
        )
    top1 = next((o["top1_agreement"] for o in outputs if o["top1_agreement"] is not None), None)
    return {
        "output_sqnr_db": min(o["sqnr_db"] for o in outputs),
        "top1_agreement": top1,
        "max_abs_error": max(o["max_abs_error"] for o in outputs),
        "outputs": outputs,
    }


def describe_outputs(summary: dict) -> str:
    """One line per output, as verify prints them."""
    lines = []
    for o in summary["outputs"]:
        top1 = "" if o["top1_agreement"] is None else f", top-1 agreement {o['top1_agreement']:.0%}"
        name = f"output {o['output']} {o['shape']}" if len(summary["outputs"]) > 1 else f"output {o['shape']}"
        lines.append(f"{name}: SQNR {o['sqnr_db']:.1f} dB, max |error| {o['max_abs_error']:.4f}{top1}")
    return "; ".join(lines)


def _output_value(values: dict, node) -> np.ndarray:
    """The float model's output: a dequantize node's input in a Q/DQ graph is the same value."""
    while node.name not in values and node.args:
        node = node.args[0]
    return values[node.name]


def activation_precision(graph) -> str:
    """The activations' integer dtypes, as verify names the quantized model: "int8", "int16", or
    "int16/int8" for a mixed one."""
    return "/".join(sorted({t.dtype for t in graph.tensors.values()} & {"int8", "int16"})) or "int8"


# How far one layer may be from the program's own Q/DQ arithmetic (docs/numerics.md,
# "What verify checks"): both round the same real value to the same integer grid, by different but
# exact-to-the-LSB formulas (double rounding, integer lookup tables, fixed-point softmax and
# resampling), so an element may land one step away; a layer with a bias whose accumulator step is
# coarser than its output step (M = s_in * s_w / s_out > 1) adds the int32 bias's rounding, M/2
# steps, to that one channel. The rule, per layer, judged per output channel (the stored tensor's
# last axis):
#   - no element more than its tolerance + 1 steps away (a planted fault in one channel among
#     hundreds cannot hide in an aggregate);
#   - per channel, at most CHANNEL_MAX_BEYOND_FRACTION of its elements beyond the tolerance;
#   - per channel, the mean signed difference within CHANNEL_MAX_MEAN_STEPS (plus the bias
#     rounding's M/2): rounding is unbiased, a shifted zero point or bias is not;
#   - no tolerance above LAYER_MAX_TOLERANCE_STEPS: a collapsed output scale (M >> 1) would make
#     the check meaningless, so such a layer is judged at the cap (its errors cannot hide behind a
#     wide tolerance, and its failure names the collapsed scale).
LAYER_TOLERANCE_STEPS = 1
LAYER_MAX_TOLERANCE_STEPS = 4
CHANNEL_MAX_BEYOND_FRACTION = 0.02
CHANNEL_MAX_MEAN_STEPS = 0.6
MEAN_MIN_ELEMENTS = 16  # a channel's mean over fewer unclamped values says too little
MEAN_MIN_DISTINCT = 4  # ... and over fewer distinct reference values (a near-constant channel)
# Ops that only move bytes (views, strided copies): a layer without a float counterpart of this
# kind is skipped; a computing one is a failure unless the user allows unchecked layers.
DATA_MOVEMENT = frozenset({"reshape", "copy", "zeros"})


def element_tolerance(op, shape: tuple[int, ...]) -> np.ndarray:
    """Per element of the stored output `shape`: LAYER_TOLERANCE_STEPS + floor(M_c / 2) of its own
    output channel c (the last stored axis) for a layer with a bias (its int32 bias is rounded to
    the accumulator's grid, half a unit = M_c / 2 output steps from the program's float bias);
    LAYER_TOLERANCE_STEPS elsewhere."""
    multiplier, shift = op.attrs.get("multiplier"), op.attrs.get("shift")
    if multiplier is None or shift is None or op.attrs.get("bias") is None:
        return np.full(shape, LAYER_TOLERANCE_STEPS, np.int64)
    scale = np.asarray(multiplier, np.float64).ravel() * 2.0 ** (np.asarray(shift, np.float64).ravel() - 31)
    if scale.size not in (1, shape[-1]):  # not per output channel: the layer's worst for every element
        scale = np.full(1, np.max(scale, initial=0.0))
    return np.broadcast_to(LAYER_TOLERANCE_STEPS + np.floor(0.5 * scale).astype(np.int64), shape)


def _tolerance_cap(op, graph) -> int:
    """LAYER_MAX_TOLERANCE_STEPS, but for a 16x8 LSTM (int16 hidden state): its gates are Q0.15 by
    design (TFLite's), so its bound in int16 steps is wide without a collapsed scale; it is
    capped at as many int16 steps as LAYER_MAX_TOLERANCE_STEPS int8 steps of the same range."""
    if op.kind == "recurrent" and graph.tensors[op.outputs[0]].dtype == "int16":
        return LAYER_MAX_TOLERANCE_STEPS * 256
    return LAYER_MAX_TOLERANCE_STEPS


def judge(
    diff: np.ndarray,
    tolerance: np.ndarray,
    free: np.ndarray | None = None,
    expected: np.ndarray | None = None,
    cap: int = LAYER_MAX_TOLERANCE_STEPS,
) -> str | None:
    """Why a layer's differences [samples, ..., channels] (got - reference, in steps) with per
    element `tolerance` break the rule above, or None. `free`: the elements neither side holds at
    the layer's clamp bounds (the mean is taken over those: a clamped value shows no offset).
    `expected`: the reference's values; a channel whose free values take fewer than
    MEAN_MIN_DISTINCT of them has no mean rule (one rounding, repeated, is not an offset)."""
    diff = np.asarray(diff, np.int64)
    channels = diff.shape[-1]
    diff, tolerance = diff.reshape(-1, channels), np.broadcast_to(tolerance, diff.shape).reshape(-1, channels)
    free = np.ones(diff.shape, bool) if free is None else np.broadcast_to(free, diff.shape).reshape(-1, channels)
    if expected is not None:
        expected = np.asarray(expected).reshape(-1, channels)
        distinct = np.array([len(np.unique(expected[free[:, c], c])) for c in range(channels)])
        free = free & (distinct >= MEAN_MIN_DISTINCT)
    widest = int(tolerance.max(initial=0))
    reason = _judge_capped(diff, np.minimum(tolerance, cap), free)
    if reason is not None and widest > cap:
        reason += (
            f" (its tolerance, {widest} steps, is capped at {cap}: its output step is "
            f"finer than its arithmetic resolves, a collapsed output scale)"
        )
    return reason


def _judge_capped(diff: np.ndarray, tolerance: np.ndarray, free: np.ndarray) -> str | None:
    """judge's rule on [elements, channels] differences and tolerances (at most the cap)."""
    far = np.abs(diff) > tolerance + 1
    if far.any():
        channel = int(np.nonzero(far.any(axis=0))[0][0])
        return (
            f"{int(far.sum())} values more than tolerance + 1 steps off (channel {channel}: up to "
            f"{int(np.abs(diff[:, channel]).max())} steps)"
        )
    beyond = (np.abs(diff) > tolerance).mean(axis=0)
    if beyond.max(initial=0.0) > CHANNEL_MAX_BEYOND_FRACTION:
        channel = int(beyond.argmax())
        return f"channel {channel}: {beyond[channel]:.0%} of its values beyond the tolerance"
    count = free.sum(axis=0)
    offset = (diff * free).sum(axis=0) / np.maximum(count, 1)
    excess = np.where(count >= MEAN_MIN_ELEMENTS, np.abs(offset) - (tolerance.max(axis=0) - LAYER_TOLERANCE_STEPS), 0.0)
    if excess.max(initial=0.0) > CHANNEL_MAX_MEAN_STEPS:
        channel = int(excess.argmax())
        return f"channel {channel}: off by {offset[channel]:+.2f} steps on average (a shifted offset)"
    return None


def _has_reference(tensor, values: dict) -> bool:
    return tensor.quantized and _reference(tensor, values) is not None


def _reference(tensor, values: dict) -> np.ndarray | None:
    """The float value `tensor` holds, shaped like it (a counterpart that differs only in axes of
    size one, e.g. a pool's [N, C] for its [N, C, 1, 1] output, is the same value), or None."""
    value = values.get(tensor.source)
    if value is None:
        return None
    if tuple(np.shape(value)) == tensor.torch_shape:
        return value
    squeezed = lambda shape: tuple(size for size in shape if size != 1)  # noqa: E731
    if squeezed(np.shape(value)) == squeezed(tensor.torch_shape):
        return np.reshape(value, tensor.torch_shape)
    return None


def _skip_reason(tensor, values: dict) -> str:
    if not tensor.quantized:
        return "its output is not quantized"
    if tensor.source not in values:
        return "no float counterpart of its output"
    shape = list(np.shape(values[tensor.source]))
    return f"its float counterpart is shaped {shape}, its output {list(tensor.torch_shape)}"


def layer_agreement(compiled, float_values: list[dict]) -> list[dict]:
    """Per layer: the golden kernel run on the reference's own quantized inputs, against the
    reference's output quantized at the layer's output qparams. The reference is the program's Q/DQ
    graph run in float (compiled.quantized_module: for a float model, edgec's own quantization of
    it). Comparing layer by layer, each fed the reference's values, keeps one layer's rounding from
    compounding through the next, so a deep model is judged as fairly as a shallow one. An input
    without a float counterpart takes the golden value its producer computed here; a recurrent
    layer is compared step by step with the program's float cell (recurrent_differences).

    A band stage's layers are checked one by one like any other (the stage runs a chain of them
    over row bands: judged as one, their roundings would compound), and the stage itself must
    equal its layers run one after the other (band_stage_departure).

    Each row: layer, op, source, checked (False: `skipped` says why), failure (None or why the
    layer breaks judge's rule), max_steps, beyond_fraction, tolerance."""
    graph = compiled.graph
    layers = [layer for op in graph.ops for layer in banded_layers(op)]
    chained = [{} for _ in float_values]
    ranges = program_ranges(compiled)
    # A chained value is exact when data movement made it from the reference's values: comparing
    # what reads it is fair; a value a computing layer made carries that layer's rounding (and a
    # recurrent layer's drift over its steps), which its readers must not be blamed for.
    inexact: dict[str, str] = {}
    diffs: dict[str, list] = {op.name: [] for op in layers}
    frees: dict[str, list] = {op.name: [] for op in layers}
    expecteds: dict[str, list] = {op.name: [] for op in layers}  # the reference values (no recurrent)
    tolerances: dict[str, np.ndarray] = {}
    skipped: dict[str, str] = {}
    stages = {
        layer.name: band_stage_departure(op, graph, float_values, ranges)
        for op in graph.ops
        if op.kind == BandStage.kind
        for layer in banded_layers(op)
    }
    for op in layers:
        out = graph.tensors[op.outputs[0]]
        from_layers = [
            inexact[graph.storage(name)]
            for name in op.inputs
            if not _has_reference(graph.tensors[graph.storage(name)], float_values[0])
            and graph.storage(name) in inexact
        ]
        for name in op.outputs:
            if not _has_reference(graph.tensors[name], float_values[0]) and (
                from_layers or op.kind not in DATA_MOVEMENT
            ):
                inexact[name] = from_layers[0] if from_layers else op.name
        for sample, values in enumerate(float_values):
            inputs = []
            for name in op.inputs:
                base = graph.tensors[graph.storage(name)]
                value = (
                    _quantized(base, _reference(base, values), ranges)
                    if _has_reference(base, values)
                    else chained[sample].get(name)
                )
                if value is None:
                    value = chained[sample][graph.storage(name)]
                inputs.append(np.asarray(value).reshape(graph.tensors[name].shape))
            got = unit_of(op).golden(op, graph, inputs)
            for name, result in zip(op.outputs, got if isinstance(got, (list, tuple)) else [got]):
                chained[sample][name] = result
            got = got[0] if isinstance(got, (list, tuple)) else got
            if op.kind == "reshape":
                continue
            if "table_qparams" in op.attrs:
                skipped[op.name] = "--tflite-compatible: it writes TFLite Micro's TANH steps, not its program's"
                continue
            if from_layers and op.kind != "recurrent":
                skipped[op.name] = f"its input is {from_layers[0]}'s result, which has no float counterpart"
                continue
            if op.kind == "recurrent":
                diff, tolerance = recurrent_differences(compiled, op, inputs, got, values)
                free = np.ones(diff.shape, bool)  # the hidden state has no fused clamp
            elif _has_reference(out, values):
                diff, tolerance, free = _differences(compiled, op, inputs, got, values, ranges)
                expecteds[op.name].append(
                    (np.asarray(got, np.int64) - diff).reshape(-1, diff.shape[-1] if diff.ndim else 1)
                )
            else:
                skipped[op.name] = _skip_reason(out, values)
                continue
            width = diff.shape[-1] if diff.ndim else 1
            diffs[op.name].append(diff.reshape(-1, width))
            frees[op.name].append(np.broadcast_to(free, diff.shape).reshape(-1, width))
            tolerances[op.name] = np.broadcast_to(tolerance, diff.shape).reshape(-1, width)
    program = program_qparams(compiled)
    rows = []
    for op in layers:
        row = {
            "layer": op.name,
            "op": op.kind,
            "source": op.source,
            "checked": bool(diffs[op.name]),
            "skipped": "a view" if op.kind == "reshape" else skipped.get(op.name),
            "failure": None,
            "beyond_fraction": 0.0,
            "max_steps": 0,
            "tolerance": LAYER_TOLERANCE_STEPS,
        }
        if diffs[op.name]:
            diff, tolerance = np.concatenate(diffs[op.name]), np.tile(tolerances[op.name], (len(diffs[op.name]), 1))
            expected = np.concatenate(expecteds[op.name]) if expecteds[op.name] else None
            row.update(
                failure=judge(diff, tolerance, np.concatenate(frees[op.name]), expected, _tolerance_cap(op, graph)),
                beyond_fraction=float(np.mean(np.abs(diff) > tolerance)),
                max_steps=int(np.abs(diff).max(initial=0)),
                tolerance=int(tolerance.max(initial=0)),
            )
        names = [name for name in op.outputs if not _requantized_to_the_program(graph, name)]
        names += [name for name in op.inputs if name in graph.inputs]
        row["failure"] = next(
            filter(None, (_qparams_departure(graph.tensors[name], program) for name in names)),
            stages.get(op.name) or row["failure"],
        )
        if row["failure"] and "tflite_departure" in op.attrs:  # the converter's reading, not the program's
            row.update(failure=None, checked=False, skipped=f"--tflite-compatible: {op.attrs['tflite_departure']}")
        rows.append(row)
    return rows


def band_stage_departure(stage, graph, float_values: list[dict], ranges: dict) -> str | None:
    """Why a band stage's outputs differ from its layers' run one after the other on the whole
    maps (golden kernels, the reference's input), or None: the stage only reorders the work."""
    source = graph.tensors[graph.storage(stage.inputs[0])]
    for values in float_values:
        if not _has_reference(source, values):
            return None
        x = np.asarray(_quantized(source, _reference(source, values), ranges)).reshape(
            graph.tensors[stage.inputs[0]].shape
        )
        maps = {stage.inputs[0]: x}
        for layer in banded_layers(stage):
            out = unit_of(layer).golden(layer, graph, [maps[name] for name in layer.inputs])
            maps[layer.outputs[0]] = np.asarray(out[0] if isinstance(out, (list, tuple)) else out)
        got = unit_of(stage).golden(stage, graph, [x])
        for name, result in zip(stage.outputs, got if isinstance(got, (list, tuple)) else [got]):
            differing = int(np.count_nonzero(np.asarray(result).ravel() != maps[name].ravel()))
            if differing:
                return f"its band stage's {name} differs from its layers run whole in {differing} values"
    return None


def _differences(compiled, op, inputs: list[np.ndarray], got: np.ndarray, values: dict, ranges: dict):
    """A layer's output against the reference's, in output steps: (got - expected, the elements'
    tolerances, the elements neither side holds at the layer's clamp bounds). A weighted layer's
    reference carries the arithmetic its scheme fixes exactly (known_output_stage): its bias on the
    accumulator's grid, an int16 layer's Q15 multiplier."""
    graph = compiled.graph
    out = graph.tensors[op.outputs[0]]
    reference = _reference(out, values)
    expected = _quantized(out, reference, ranges)
    if _is_requantize(op):
        expected = _requantized_reference(graph, op, inputs[0], ranges)
    expected = expected.reshape(out.shape).astype(np.int64)
    if op.kind == "topk" and op.attrs["item"] == 1:
        expected = _tied_indices_accepted(op, graph, inputs[0], got, expected)
    lo, hi = _clamp_bounds(op, out)
    tolerance = element_tolerance(op, out.shape)
    known = known_output_stage(compiled, op, out, values)
    if known is not None:
        offset, gain, exact, right = known
        shape = [1] * len(out.torch_shape)
        shape[out.perm[-1] if out.perm is not None else -1] = -1
        adjusted = (np.asarray(reference, np.float64) + offset.reshape(shape) * out.scale) * gain.reshape(shape)
        moved = (
            _quantized(out, adjusted, ranges)
            if right is None
            else _rounded_twice(out, adjusted, right.reshape(shape), ranges)
        )
        moved = np.clip(moved.reshape(out.shape).astype(np.int64), lo, hi)
        # At a clamp bound the program's pre-activation value is gone: edgec may lie anywhere from
        # the program's clamped value to the adjusted one.
        clamped = (expected <= lo) | (expected >= hi)
        got64 = np.asarray(got, np.int64).reshape(out.shape)
        near = np.clip(got64, np.minimum(expected, moved), np.maximum(expected, moved))
        expected = np.where(clamped, near, moved)
        tolerance = np.where(exact, LAYER_TOLERANCE_STEPS, tolerance)
    free = (expected > lo) & (expected < hi) & (got > lo) & (got < hi)
    return np.asarray(got, np.int64) - expected, tolerance, free


def _tied_indices_accepted(op, graph, x, got, expected):
    """topk's indices where they pick the same int8 value as the program's: equal values (ties the
    int8 grid makes) may come in either order, and torch.topk leaves theirs unspecified."""
    x = np.asarray(x, np.int64).reshape(graph.tensors[op.inputs[0]].shape)
    axis = op.attrs["dim"]
    got = np.asarray(got, np.int64).reshape(expected.shape)
    picked = np.take_along_axis(x, got, axis)
    wanted = np.take_along_axis(x, np.clip(expected, 0, x.shape[axis] - 1), axis)
    return np.where(picked == wanted, got, expected)


def _is_requantize(op) -> bool:
    return op.kind == "lut" and op.attrs.get("function") == "requantize"


def _requantized_reference(graph, op, x_values: np.ndarray, ranges: dict) -> np.ndarray:
    """A requantize's program value: the value its input holds, quantized at its output's qparams."""
    x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    value = (np.asarray(x_values).astype(np.float64) - x.zero_point) * x.scale
    return np.asarray(_quantized(out, to_torch_order(out, value.reshape(out.shape)), ranges)).reshape(out.shape)


# The kernels whose output stage is arm_nn_requantize_s64 on the Q15 REDUCE_MULTIPLIER (16x8 scheme).
S64_REQUANTIZE_UNITS = frozenset({"conv2d_s16", "depthwise_conv2d_s16", "fully_connected_s16"})
BIASED_TARGETS = ("conv", "linear")  # program nodes (aten.conv*d, conv_transpose*d, linear) with a bias argument
FUSED_ACTIVATIONS = ("relu", "hardtanh", "clamp", "quantize")  # what may sit between such a node and its output


def known_output_stage(compiled, op, out, values: dict):
    """What a weighted layer's integer output stage does differently from its program's float, fixed
    by the quantization scheme and computed exactly for this layer
    (docs/numerics.md, "What verify checks"), or None: (offset [channels] in output steps, gain
    [channels], exact [channels]).

    - The bias is stored on the accumulator's grid (s_in * s_w[c]): channel c's output moves by
      offset_c = q_c * M_c - b_c / s_out steps, b_c the program's float bias, q_c the stored one.
      Only a rounding is fixed: |offset_c| is clipped to M_c / 2 (a bias moved further still shows).
      Where M_c > 1 this replaces the tolerance's floor(M_c / 2) (`exact`).
    - An int16 conv / depthwise / fully connected layer multiplies by REDUCE_MULTIPLIER(m_c), m_c
      rounded to 15 bits: its output is the program's times gain_c = round(m_c / 2^16) * 2^16 / m_c
      (|gain_c - 1| <= 2^-15, up to one step at full int16 scale).
    - An int8 layer's output stage rounds twice (the doubling high multiply to 2^-r_c of a step,
      then the rounding right shift by r_c, each half away from zero): `right` [channels] holds r_c
      (None for the int16 layers, whose 64-bit output stage rounds once)."""
    from edgec.numerics import reduce_multiplier

    multiplier, shift = op.attrs.get("multiplier"), op.attrs.get("shift")
    if multiplier is None or shift is None or op.attrs.get("weight") is None or not out.shape:
        return None
    if out.perm is not None and out.perm[-1] is None:
        return None
    channels = out.shape[-1]
    m = np.broadcast_to(np.asarray(multiplier, np.float64).ravel(), (channels,))
    scale = m * 2.0 ** (np.broadcast_to(np.asarray(shift, np.float64).ravel(), (channels,)) - 31)
    s64 = unit_of(op).kind in S64_REQUANTIZE_UNITS
    gain = reduce_multiplier(m.astype(np.int64)) * 2.0**16 / np.maximum(m, 1) if s64 else np.ones(channels)
    bias, stored = _program_bias(compiled, out, values), op.attrs.get("bias")
    right = None if s64 else np.maximum(-np.broadcast_to(np.asarray(shift, np.int64).ravel(), (channels,)), 0)
    if bias is None or stored is None or not bias.size == channels == np.size(stored):
        return np.zeros(channels), gain, np.zeros(channels, bool), right
    offset = np.asarray(stored, np.float64).ravel() * scale - bias.ravel() / out.scale
    return np.clip(offset, -scale / 2, scale / 2), gain, scale > 1, right


def _program_bias(compiled, out, values: dict) -> np.ndarray | None:
    """The float bias of the program's conv / linear node that computes `out` (through a fused
    activation), as the program holds it, or None."""
    from torch.fx import Node

    node = next((n for n in compiled.quantized_module.graph.nodes if n.name == out.source), None)
    for _ in range(3):
        if not isinstance(node, Node) or node.op != "call_function":
            return None
        if any(name in str(node.target) for name in BIASED_TARGETS):
            break
        if not any(name in str(node.target) for name in FUSED_ACTIVATIONS):
            return None  # anything else may have been folded into the stored bias
        node = node.args[0] if node.args else None
    else:
        return None
    bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
    if not isinstance(bias, Node):
        return None
    if bias.name in values:
        return np.asarray(values[bias.name], np.float64)
    return np.asarray(_attribute(compiled.quantized_module, bias.target), np.float64) if bias.op == "get_attr" else None


def program_qparams(compiled) -> dict[str, list[tuple[float, int]]]:
    """Per float node of the Q/DQ program, the (scale, zero point) its quantize nodes use (uint8
    ones as edgec reads them: int8, zero point - 128)."""
    found: dict[str, list[tuple[float, int]]] = {}
    for node in _activation_quantizes(compiled):
        if isinstance(node.args[1], (int, float)):
            found.setdefault(node.args[0].name, []).append((float(node.args[1]), _int8_quantize(node)[0]))
    return found


def program_ranges(compiled) -> dict[tuple[str, str], tuple[int, int]]:
    """Per float node of the Q/DQ program and dtype, the [quant_min, quant_max] its quantize nodes use (edgec's
    own int16 activations: [-32767, 32767], while its int16 kernels, as TFLite's, saturate at -32768:
    the program holds -32767 where a kernel holds -32768, one step that a layer reading it may
    magnify, fuzz seed 13 int16 mode)."""
    found: dict[tuple[str, str], tuple[int, int]] = {}
    for node in _activation_quantizes(compiled):
        if len(node.args) >= 6:  # a node read at int8 and int16 has two
            _, quant_min, quant_max, dtype = _int8_quantize(node)
            found.setdefault((node.args[0].name, dtype), (quant_min, quant_max))
    return found


def _activation_quantizes(compiled) -> list:
    return [
        node
        for node in compiled.quantized_module.graph.nodes
        if node.op == "call_function"
        and "quantize_per_tensor" in str(node.target)
        and "dequantize" not in str(node.target)
        and hasattr(node.args[0], "name")
    ]


def _int8_quantize(node) -> tuple[int, int, int, str]:
    """(zero point, quant_min, quant_max, dtype) of a quantize_per_tensor node, a uint8 one as the
    lowering reads it (edgec.frontend.lower.uint8_as_int8: every integer - 128, int8)."""
    zero_point = int(node.args[2])
    quant_min, quant_max = (int(node.args[3]), int(node.args[4])) if len(node.args) >= 6 else (None, None)
    dtype = str(node.args[5]).removeprefix("torch.") if len(node.args) >= 6 else None
    if dtype == "uint8":
        return zero_point - 128, quant_min - 128, quant_max - 128, "int8"
    return zero_point, quant_min, quant_max, dtype


def _requantized_to_the_program(graph, name: str) -> bool:
    """Whether tensor `name` is only a step on the way to the qparams the program gives its float
    value: read by requantizes of that value alone (a split's part held at its input's qparams,
    requantized to the part's own)."""
    source = graph.tensors[name].source
    readers = graph.consumers(name)
    return bool(readers) and all(
        op.kind == "lut" and op.attrs.get("function") == "requantize" and graph.tensors[op.outputs[0]].source == source
        for op in readers
    )


def _qparams_departure(tensor, program: dict) -> str | None:
    """Why `tensor`'s qparams are not those the program quantizes its float value at (a zero
    point or scale the lowering changed moves the reference with it, so the values alone would not
    tell), or None."""
    if not tensor.quantized or tensor.source not in program:
        return None
    if any(
        np.isclose(scale, tensor.scale, rtol=1e-6, atol=0) and zero_point == tensor.zero_point
        for scale, zero_point in program[tensor.source]
    ):
        return None
    scale, zero_point = program[tensor.source][0]
    return (
        f"{tensor.name} holds scale {tensor.scale:.6g}, zero point {tensor.zero_point}; the program quantizes "
        f"{tensor.source} at scale {scale:.6g}, zero point {zero_point}"
    )


def _clamp_bounds(op, out) -> tuple[int, int]:
    """The layer's output clamp (a fused activation's, else its dtype's range)."""
    info = np.iinfo(sim.INT_DTYPES[out.dtype])
    desc = op.attrs.get("desc") if isinstance(op.attrs.get("desc"), dict) else {}
    lo = desc.get("act_min", op.attrs.get("act_min", info.min))
    hi = desc.get("act_max", op.attrs.get("act_max", info.max))
    return max(int(lo), int(info.min)), min(int(hi), int(info.max))


def recurrent_differences(compiled, op, inputs: list, got: np.ndarray, values: dict) -> tuple[np.ndarray, np.ndarray]:
    """A recurrent layer against the program's float cell (PyTorch's equations on the quantized
    weights, recurrent.reference_weights), step by step: each step's float cell starts from the
    integer state of the step before (the first from the caller's h0 / c0 where it gives them), so
    the comparison measures one step's gate arithmetic, not a drift. Returns the differences
    [steps * batches, hidden] (in output steps) of every step's hidden state, and of the steps the
    layer writes, with their tolerances (1 + the bound of recurrent.float_step in output steps)."""
    from edgec.ops import recurrent

    graph, a = compiled.graph, op.attrs
    desc = a["desc"]
    x_t, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    weights = recurrent.reference_weights(
        a["cell"], *_float_recurrent_weights(compiled, op, values), x_t.scale, out.scale, a.get("weight_bits", 8)
    )
    x = inputs[0]
    before, after, cells = recurrent.integer_steps(desc, x, *recurrent.initial_state(op, inputs))
    xs = np.asarray(x, sim.INT_DTYPES[x_t.dtype]).reshape(
        (desc["time_steps"], desc["batches"], -1) if desc["time_major"] else (desc["batches"], desc["time_steps"], -1)
    )
    xs = xs if desc["time_major"] else xs.transpose(1, 0, 2)
    cell_scale = 2.0 ** a["state_cell_power"]  # a linear LSTM's cell runs finer than the tables' 2^cell_power
    expected, bounds = [], []
    for t in range(desc["time_steps"]):
        h, _, bound = recurrent.float_step(
            a["cell"],
            x_t.dequantize(xs[t]),
            out.dequantize(before[t]),
            cells[t].astype(np.float64) * cell_scale,
            weights,
            32767 * cell_scale,
        )
        info = np.iinfo(sim.INT_DTYPES[out.dtype])
        expected.append(np.clip(np.round(h / out.scale) + out.zero_point, info.min, info.max))
        bounds.append(np.broadcast_to(bound, h.shape))
    expected, bounds = np.stack(expected), np.stack(bounds)
    tolerance = LAYER_TOLERANCE_STEPS + np.floor(bounds / out.scale).astype(np.int64)
    written = after[-1:] if desc["last_step_only"] else after
    got_steps = np.asarray(got, np.int64).reshape(
        written.shape[:2][::-1] + written.shape[2:] if not desc["time_major"] else written.shape
    )
    got_steps = got_steps if desc["time_major"] else got_steps.transpose(1, 0, 2)
    steps = expected[-1:] if desc["last_step_only"] else expected
    step_tolerance = tolerance[-1:] if desc["last_step_only"] else tolerance
    diff = np.concatenate(
        [(after - expected).reshape(-1, after.shape[-1]), (got_steps - steps).reshape(-1, after.shape[-1])]
    )
    return diff, np.concatenate([tolerance.reshape(-1, after.shape[-1]), step_tolerance.reshape(-1, after.shape[-1])])


def _float_recurrent_weights(compiled, op, values: dict) -> tuple:
    """The layer's float weights (w_ih, w_hh, b_ih, b_hh) as the program's graph holds them (PyTorch's
    gate order), not as the lowering arranged them."""
    from edgec.ops import recurrent

    node = next(n for n in compiled.quantized_module.graph.nodes if n.name == op.attrs["float_node"])
    names = recurrent._parse(node)["weights"][op.attrs["layer"]]
    return tuple(
        None
        if n is None
        else np.asarray(
            values[n.name] if n.name in values else _attribute(compiled.quantized_module, n.target), np.float64
        )
        for n in names
    )


def _attribute(module, target: str):
    for part in target.split("."):
        module = getattr(module, part)
    return module.detach().numpy()


def _rounded_twice(tensor, value: np.ndarray, right: np.ndarray, ranges: dict) -> np.ndarray:
    """`value` quantized as an int8 kernel's output stage rounds it (numerics.requantize): to 2^-right
    of a step, then to a step, each half away from zero. A value within 2^-right of a tie may land
    a step from the program's single rounding, and a repeated tie always on the same side: the
    channel mean would read that as an offset."""
    steps = np.clip(np.asarray(value, np.float64) / tensor.scale, -(2.0**20), 2.0**20) * 2.0**right
    first = (np.sign(steps) * np.floor(np.abs(steps) + 0.5)).astype(np.int64)
    q = divide_by_power_of_two(first, np.broadcast_to(right, first.shape)) + tensor.zero_point
    low, high = _quant_range(tensor, ranges)
    return sim.stored(tensor, np.clip(q, low, high).astype(sim.INT_DTYPES[tensor.dtype]))


def _quant_range(tensor, ranges: dict | None) -> tuple[int, int]:
    """The range the program's quantize of `tensor` uses (`ranges`: program_ranges), within its dtype's."""
    info = np.iinfo(sim.INT_DTYPES[tensor.dtype])
    low, high = (ranges or {}).get((tensor.source, tensor.dtype), (int(info.min), int(info.max)))
    return max(int(info.min), low), min(int(info.max), high)


def _quantized(tensor, value: np.ndarray, ranges: dict | None = None) -> np.ndarray:
    """`value` quantized exactly as the program's quantize nodes do (float32, half to even, within
    the quant range the program's quantize of it uses, `ranges`: program_ranges): a rounding one
    step off here would move the layer's output by up to |M * w| steps."""
    import torch

    if tensor.dtype == "int32":  # token ids (argmax indices): integers already
        return sim.stored(tensor, np.asarray(value).astype(np.int32))
    low, high = _quant_range(tensor, ranges)
    q = torch.ops.quantized_decomposed.quantize_per_tensor(
        torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32)),
        tensor.scale,
        tensor.zero_point,
        low,
        high,
        getattr(torch, tensor.dtype),
    )
    return sim.stored(tensor, q.numpy())


def disagreeing_layers(rows: list[dict]) -> list[dict]:
    """The checked layers that break the rule (judge)."""
    return [row for row in rows if row["failure"]]


def unchecked_layers(rows: list[dict]) -> list[dict]:
    """The layers that compute something (not a view or a copy) the check could not compare."""
    return [row for row in rows if not row["checked"] and row["op"] not in DATA_MOVEMENT]


@dataclass
class LayerCheck:
    """What the layer check found: `checked` of `total` layers, the skipped ones with why."""

    checked: int
    total: int
    skipped: list[dict]  # the skipped layers but views, each with why

    def __str__(self) -> str:
        views = self.total - self.checked - len(self.skipped)
        parts = [f"{views} view{'s' if views != 1 else ''} (no computation)"] if views else []
        parts += [f"{row['layer']} ({row['op']}): {row['skipped']}" for row in self.skipped[:4]]
        if len(self.skipped) > 4:
            parts.append(f"and {len(self.skipped) - 4} more")
        return f"checked {self.checked} of {self.total} layers" + (f" (skipped {'; '.join(parts)})" if parts else "")


def check_against_reference(compiled, float_samples, allow_unchecked: bool = False) -> LayerCheck:
    """EdgecError naming the layers whose integer result departs from the program's own Q/DQ
    graph beyond what rounding explains (judge's rule), and -- unless `allow_unchecked` -- the
    layers that compute something but could not be compared; else what was checked. The C equal
    to the golden shows only that both run the same integer program; this tests, on the samples,
    that the program is the model."""
    rows = layer_agreement(compiled, qdq_reference(compiled, float_samples))
    bad = disagreeing_layers(rows)
    if bad:
        described = "; ".join(f"{row['layer']} ({row['op']}, {row['source']}): {row['failure']}" for row in bad[:3])
        more = f" and {len(bad) - 3} more layers" if len(bad) > 3 else ""
        raise EdgecError(f"the integer model departs from its quantized program at {described}{more}")
    unchecked = unchecked_layers(rows)
    if unchecked and not allow_unchecked:
        described = "; ".join(
            f"{row['layer']} ({row['op']}, {row['source']}): {row['skipped']}" for row in unchecked[:3]
        )
        more = f" and {len(unchecked) - 3} more" if len(unchecked) > 3 else ""
        raise EdgecError(
            f"verify could not check {len(unchecked)} computing layer(s) against the quantized program: "
            f"{described}{more} (--allow-unchecked / allow_unchecked=True to accept)"
        )
    skipped = [row for row in rows if not row["checked"] and row["op"] != "reshape"]
    return LayerCheck(sum(row["checked"] for row in rows), len(rows), skipped)


def qdq_reference(compiled, float_samples) -> list[dict[str, np.ndarray]]:
    """Per-sample values of the program's Q/DQ graph run in float (the layer check's reference)."""
    return _node_values_per_sample(compiled, compiled.quantized_module, float_samples)

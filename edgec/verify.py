"""Prove the generated C equals the golden simulator, byte for byte.

On the host, the generated directory is compiled with the host C compiler (strict C99 warnings as
errors, optionally with sanitizers, every layer's arena writes checked) together with a small
driver that streams int8 samples through <name>_invoke(); on a Cortex-M target, edgec.device runs
the same samples on QEMU. Every output byte is compared with edgec.sim, and the int8 outputs are
measured against the float model.
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import jinja2
import numpy as np

from edgec import device, sim
from edgec.codegen import TEMPLATES
from edgec.errors import EdgecError
from edgec.ir import Graph, to_torch_order
from edgec.ops import KINDS
from edgec.ops.recurrent import reset_state
from edgec.pipeline import compile_for, emit
from edgec.targets import get_target

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
    driver.write_text(template.render(name=name, NAME=name.upper(), inputs=report["inputs"], outputs=report["outputs"]))
    sources = [str(p) for p in sorted(out_dir.glob("*.c"))] + [str(p) for p in sorted((out_dir / "runtime" / "src").rglob("*.c"))]
    exe = build_dir / f"{name}_host"
    includes = [f"-I{d}" for d in device.model_include_dirs(out_dir, report)]
    # A linked library (CMSIS-NN) is compiled apart: without edgec's -Werror and sanitizers (its code is Arm's).
    library = [str(o) for o in device.library_objects(get_target("host"), report)]
    command = ["cc", *HOST_CFLAGS, CHECK_WRITES, *(SANITIZE_FLAGS if sanitize else ()), *includes,
               str(driver), *sources, *library, "-o", str(exe)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise EdgecError(f"host compile of {out_dir} failed: {result.stderr.strip().splitlines()[0] if result.stderr else ''}")
    return exe


def run_host(exe: Path, inputs: np.ndarray, output_size: int) -> np.ndarray:
    result = subprocess.run([str(exe)], input=np.ascontiguousarray(inputs, dtype=np.int8).tobytes(),
                            capture_output=True, timeout=600)
    if result.returncode != 0:
        raise EdgecError(f"{exe.name} failed (exit {result.returncode}): {result.stderr.decode(errors='replace').strip()[:500]}")
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
        arrays.append(np.frombuffer(data[start:start + tensor.nbytes], dtype=sim.INT_DTYPES[tensor.dtype]).reshape(tensor.shape))
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


def compare(golden: np.ndarray, device: np.ndarray) -> Comparison:
    diff = golden != device
    return Comparison(len(golden), int(diff.any(axis=1).sum()), int(diff.sum()), golden, device)


def quantized_inputs(graph: Graph, float_samples) -> np.ndarray:
    """Float samples (PyTorch layout; one array, or one per model input) -> [samples, input bytes]
    rows of every input's stored integer tensor in order, as the drivers read them."""
    per = per_input(float_samples)
    return np.stack([_pack([sim.quantize_input(graph, arrays[sample][None], index) for index, arrays in enumerate(per)])
                     for sample in range(len(per[0]))])


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


def stream_frames(stream, floats) -> list[np.ndarray]:
    """Whole-sequence float samples [N, 1, T, F] (batch first) as the stream's frames [N*T, F]."""
    return [x.reshape((-1,) + stream.graph.tensors[name].torch_shape[2:]) for x, name in zip(floats, stream.graph.inputs)]


def compare_stream(whole, floats, whole_inputs: np.ndarray, name: str, work_dir: Path) -> StreamComparison:
    """The streaming build of `whole` (a compiled whole-sequence model), for its target, run on
    `floats` (whole sequences, quantized as `whole_inputs`) as one stream in `work_dir`."""
    stream = compile_for(whole, whole.target, stream=True)
    inputs = quantized_inputs(stream.graph, stream_frames(stream, floats))
    emit(stream, work_dir / name, name)
    outputs = run_on(stream, work_dir / name, name, inputs, work_dir / "build")
    reset_state(stream.graph)
    mismatched = compare(golden_outputs(stream.graph, inputs), outputs).mismatched_bytes
    steps = len(inputs) // len(whole_inputs)
    first_sequence = golden_outputs(whole.graph, whole_inputs[:1])[0]
    return StreamComparison(len(inputs), steps, mismatched, bool(np.array_equal(outputs[steps - 1], first_sequence)))


def float_node_values(module, sample: tuple) -> dict[str, np.ndarray]:
    """Every node's float value for one sample (a tensor per model input), keyed by FX node name
    (for per-layer SQNR)."""
    import torch
    from torch.fx import Interpreter

    values: dict[str, np.ndarray] = {}

    class Recorder(Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if isinstance(result, torch.Tensor) and result.is_floating_point():
                values[node.name] = result.detach().numpy().copy()
            return result

    with torch.no_grad():
        Recorder(module).run(*(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)) for x in sample))
    return values


def float_reference(compiled, float_samples) -> list[dict[str, np.ndarray]]:
    """Per-sample float values of the float model (or, for a program that came quantized, of its
    Q/DQ graph run in float), each input shaped like its example (batch of one)."""
    module = compiled.float_module if compiled.float_module is not None else compiled.quantized_module
    return _node_values_per_sample(compiled, module, float_samples)


def _node_values_per_sample(compiled, module, float_samples) -> list[dict[str, np.ndarray]]:
    per = per_input(float_samples)
    shapes = [tuple(example.shape) for example in compiled.example_inputs]
    return [float_node_values(module, tuple(arrays[i].reshape(shape) for arrays, shape in zip(per, shapes)))
            for i in range(len(per[0]))]


def final_nodes(compiled) -> list:
    """The quantized program's output nodes, in the graph's output order."""
    outputs = next(n for n in compiled.quantized_module.graph.nodes if n.op == "output").args[0]
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def accuracy_summary(compiled, float_values: list[dict], int8_outputs: np.ndarray) -> dict:
    """Output SQNR (every output together) and top-1 agreement (of the first output) of the int8
    model against the float one."""
    graph = compiled.graph
    tensors = [graph.tensors[name] for name in graph.outputs]
    reference = [np.stack([sim.stored(t, _output_value(values, node)).ravel() for values in float_values])
                 for t, node in zip(tensors, final_nodes(compiled))]
    unpacked = [unpack(graph, row, graph.outputs) for row in int8_outputs]
    approximation = [np.stack([t.dequantize(outputs[i]).ravel() for outputs in unpacked]) for i, t in enumerate(tensors)]
    top1 = float(np.mean(reference[0].argmax(axis=1) == approximation[0].argmax(axis=1)))
    reference, approximation = np.concatenate(reference, axis=1), np.concatenate(approximation, axis=1)
    return {"output_sqnr_db": sim.sqnr_db(reference, approximation), "top1_agreement": top1,
            "max_abs_error": float(np.max(np.abs(reference - approximation)))}


def _output_value(values: dict, node) -> np.ndarray:
    """The float model's output: a dequantize node's input in a Q/DQ graph is the same value."""
    while node.name not in values and node.args:
        node = node.args[0]
    return values[node.name]



def activation_precision(graph) -> str:
    """The activations' integer dtypes, as verify names the quantized model: "int8", "int16", or
    "int16/int8" for a mixed one."""
    return "/".join(sorted({t.dtype for t in graph.tensors.values()} & {"int8", "int16"})) or "int8"

# How far one layer may be from the program's own Q/DQ arithmetic: both round the same real value
# to the same int8 grid, by different but exact-to-the-LSB formulas (double rounding, integer
# lookup tables, fixed-point softmax and resampling), so an element may land one step away; more
# than that on more than a sliver of a layer means the layer computes something else (collapsed
# weights, a wrong bias scale, a misread layout).
LAYER_TOLERANCE_STEPS = 1
LAYER_MAX_BEYOND_FRACTION = 0.01


def layer_tolerance(op) -> int:
    """LAYER_TOLERANCE_STEPS, widened for a layer whose output step is finer than its accumulator's
    (s_in * s_w / s_out = M > 1): its int32 bias is rounded to the accumulator's grid, half a unit
    = M / 2 output steps away from the program's float bias."""
    multiplier, shift = op.attrs.get("multiplier"), op.attrs.get("shift")
    if multiplier is None or shift is None or op.attrs.get("bias") is None:
        return LAYER_TOLERANCE_STEPS
    scale = np.asarray(multiplier, np.float64) * 2.0 ** (np.asarray(shift, np.float64) - 31)
    return LAYER_TOLERANCE_STEPS + int(0.5 * float(np.max(scale, initial=0.0)))


def layer_agreement(compiled, float_values: list[dict]) -> list[dict]:
    """Per layer: the golden kernel run on the reference's own quantized inputs, against the
    reference's output quantized at the layer's output qparams. The reference is the program's Q/DQ
    graph run in float (compiled.quantized_module: for a float model, edgec's own quantization of
    it). Comparing layer by layer, each fed the reference's values, keeps one layer's rounding from
    compounding through the next, so a deep model is judged as fairly as a shallow one."""
    graph = compiled.graph
    rows = []
    for op in graph.ops:
        # A view's bytes are its base's (a flatten of channels-last data is not in PyTorch order).
        tensors = [graph.tensors[graph.storage(name)] for name in op.inputs] + [graph.tensors[op.outputs[0]]]
        if op.kind == "reshape" or any(not t.quantized or t.source not in float_values[0] or
                                       tuple(np.shape(float_values[0][t.source])) != t.torch_shape for t in tensors):
            continue
        beyond = total = worst = 0
        tolerance = layer_tolerance(op)
        for values in float_values:
            stored = [_quantized(t, values[t.source]) for t in tensors]
            if op.kind == "lut" and op.attrs["function"] == "requantize":
                # The program requantizes the value its input holds, not the float before that.
                x = tensors[0]
                held = (stored[0].astype(np.float64) - x.zero_point) * x.scale
                stored[-1] = _quantized(tensors[-1], to_torch_order(tensors[-1], held.reshape(tensors[-1].shape)))
            inputs = [x.reshape(graph.tensors[name].shape) for x, name in zip(stored, op.inputs)]
            got = KINDS[op.kind].golden(op, graph, inputs)
            got = got[0] if isinstance(got, (list, tuple)) else got
            diff = np.abs(np.asarray(got, np.int64) - stored[-1].astype(np.int64))
            beyond += int(np.count_nonzero(diff > tolerance))
            total += diff.size
            worst = max(worst, int(diff.max(initial=0)))
        rows.append({"layer": op.name, "op": op.kind, "source": op.source, "beyond_fraction": beyond / max(total, 1),
                     "max_steps": worst, "tolerance": tolerance})
    return rows


def _quantized(tensor, value: np.ndarray) -> np.ndarray:
    """`value` quantized exactly as the program's quantize nodes do (float32, half to even): a
    rounding one step off here would move the layer's output by up to |M * w| steps."""
    import torch
    info = np.iinfo(sim.INT_DTYPES[tensor.dtype])
    q = torch.ops.quantized_decomposed.quantize_per_tensor(
        torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32)), tensor.scale, tensor.zero_point,
        int(info.min), int(info.max), getattr(torch, tensor.dtype))
    return sim.stored(tensor, q.numpy())


def disagreeing_layers(rows: list[dict]) -> list[dict]:
    return [row for row in rows if row["beyond_fraction"] > LAYER_MAX_BEYOND_FRACTION]


def check_against_reference(compiled, float_samples) -> int:
    """EdgecError naming the layers whose int8 result departs from the program's own Q/DQ graph
    beyond what rounding explains (LAYER_TOLERANCE_STEPS on more than LAYER_MAX_BEYOND_FRACTION of
    their elements); else the number of layers checked. The C equal to the golden proves only
    that both run the same integer program; this proves the program is the model."""
    rows = layer_agreement(compiled, qdq_reference(compiled, float_samples))
    bad = disagreeing_layers(rows)
    if bad:
        described = "; ".join(f"{row['layer']} ({row['op']}, {row['source']}): {row['beyond_fraction']:.0%} of "
                              f"its values off by more than {row['tolerance']} step (up to {row['max_steps']})"
                              for row in bad[:3])
        more = f" and {len(bad) - 3} more layers" if len(bad) > 3 else ""
        raise EdgecError(f"the int8 model departs from its quantized program at {described}{more}")
    return len(rows)


def qdq_reference(compiled, float_samples) -> list[dict[str, np.ndarray]]:
    """Per-sample values of the program's Q/DQ graph run in float (the layer check's reference)."""
    return _node_values_per_sample(compiled, compiled.quantized_module, float_samples)

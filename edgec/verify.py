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
from edgec.ir import Graph

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
    command = ["cc", *HOST_CFLAGS, CHECK_WRITES, *(SANITIZE_FLAGS if sanitize else ()), f"-I{out_dir}",
               f"-I{out_dir / 'runtime' / 'include'}", str(driver), *sources, "-o", str(exe)]
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

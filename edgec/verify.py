"""Prove the generated C equals the golden simulator, byte for byte.

On the host, the generated directory is compiled with the host C compiler (strict C99 warnings as
errors, optionally with sanitizers, every layer's arena writes checked) together with a small
driver that streams int8 samples through <name>_invoke(); on a Cortex-M target, edgec.device runs
the same samples on QEMU. Every output byte is compared with edgec.sim, and the int8 outputs are
measured against the float model.
"""
from __future__ import annotations

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
    driver.write_text(template.render(name=name, NAME=name.upper()))
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


def golden_outputs(graph: Graph, inputs: np.ndarray) -> np.ndarray:
    return np.stack([sim.invoke(graph, x).ravel() for x in inputs])


def compare(golden: np.ndarray, device: np.ndarray) -> Comparison:
    diff = golden != device
    return Comparison(len(golden), int(diff.any(axis=1).sum()), int(diff.sum()), golden, device)


def quantized_inputs(graph: Graph, float_samples: np.ndarray) -> np.ndarray:
    """Float samples (PyTorch layout) -> int8 NHWC rows, one per sample."""
    return np.stack([sim.quantize_input(graph, x[None]).ravel() for x in float_samples])


def run_on(compiled, out_dir: Path, name: str, inputs: np.ndarray, build_dir: Path) -> np.ndarray:
    """Run the generated directory on the compiled target: the host, or its emulated board."""
    if compiled.target.is_host:
        output_size = compiled.graph.tensors[compiled.graph.outputs[0]].size
        return run_host(build_host(out_dir, name, build_dir), inputs, output_size)
    return device.run_model(compiled.target, out_dir, name, inputs, build_dir)


def float_node_values(module, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every node's float value for one sample, keyed by FX node name (for per-layer SQNR)."""
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
        Recorder(module).run(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)))
    return values


def float_reference(compiled, float_samples: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Per-sample float values of the float model (or, for a program that came quantized, of its
    Q/DQ graph run in float), shaped like the model input batch of one."""
    module = compiled.float_module if compiled.float_module is not None else compiled.quantized_module
    shape = tuple(compiled.example_inputs[0].shape)
    return [float_node_values(module, x.reshape(shape)) for x in float_samples]


def accuracy_summary(compiled, float_values: list[dict], int8_outputs: np.ndarray) -> dict:
    """Output SQNR and top-1 agreement of the int8 model against the float one."""
    graph = compiled.graph
    out = graph.tensors[graph.outputs[0]]
    final_node = next(n for n in compiled.quantized_module.graph.nodes if n.op == "output").args[0]
    final_node = final_node[0] if isinstance(final_node, (tuple, list)) else final_node
    reference = np.stack([sim.to_nhwc(_output_value(values, final_node)).ravel() for values in float_values])
    approximation = out.dequantize(int8_outputs.reshape(len(int8_outputs), -1))
    top1 = float(np.mean(reference.argmax(axis=1) == approximation.argmax(axis=1)))
    return {"output_sqnr_db": sim.sqnr_db(reference, approximation), "top1_agreement": top1,
            "max_abs_error": float(np.max(np.abs(reference - approximation)))}


def _output_value(values: dict, node) -> np.ndarray:
    """The float model's output: a dequantize node's input in a Q/DQ graph is the same value."""
    while node.name not in values and node.args:
        node = node.args[0]
    return values[node.name]

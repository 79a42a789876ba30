"""The golden simulator: runs an IR graph with each op unit's numpy integer kernel.

It is the specification the generated C must match byte for byte. It also measures how far the
int8 model is from the float one, per layer (SQNR), when a float reference is available.
"""
from __future__ import annotations

import numpy as np

from edgec.ir import Graph
from edgec.ops import KINDS

QUANTIZE_CLIP = np.float32(300.0)  # keeps C's float->int conversion defined


def quantize_input(graph: Graph, x_float_nchw: np.ndarray) -> np.ndarray:
    """Float model input (PyTorch layout) -> int8 NHWC, exactly as <name>_quantize_input in C:
    float32 division, round half away from zero, saturate (NaN and huge values included)."""
    tensor = graph.tensors[graph.inputs[0]]
    x = np.asarray(x_float_nchw, dtype=np.float32).reshape(_torch_shape(tensor.shape))
    v = x / np.float32(tensor.scale)
    v = np.where(v >= 0, v + np.float32(0.5), v - np.float32(0.5))
    v = np.where(v >= -QUANTIZE_CLIP, np.minimum(v, QUANTIZE_CLIP), -QUANTIZE_CLIP)  # NaN -> low end
    q = np.trunc(v).astype(np.int32) + tensor.zero_point
    return to_nhwc(np.clip(q, -128, 127).astype(np.int8))


def run(graph: Graph, x: np.ndarray) -> dict[str, np.ndarray]:
    """All tensor values for one int8 NHWC input."""
    values = {graph.inputs[0]: np.asarray(x, dtype=np.int8).reshape(graph.tensors[graph.inputs[0]].shape)}
    for op in graph.ops:
        values[op.outputs[0]] = KINDS[op.kind].golden(op, graph, [values[name] for name in op.inputs])
    return values


def invoke(graph: Graph, x: np.ndarray) -> np.ndarray:
    return run(graph, x)[graph.outputs[0]]


def to_nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 else x


def to_nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if x.ndim == 4 else x


def _torch_shape(shape: tuple) -> tuple:
    return (shape[0], shape[3], shape[1], shape[2]) if len(shape) == 4 else shape


def sqnr_db(reference: np.ndarray, approximation: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio in dB (inf when identical)."""
    reference = np.asarray(reference, np.float64).ravel()
    noise = np.sum((reference - np.asarray(approximation, np.float64).ravel()) ** 2)
    signal = np.sum(reference**2)
    if noise == 0:
        return float("inf")
    return float(10 * np.log10(max(signal, 1e-30) / noise))


def layer_sqnr(graph: Graph, float_values: list[dict], int8_values: list[dict]) -> list[dict]:
    """Per op output: SQNR of the dequantized int8 tensor against the float model's value of the
    same node, over all samples (ops whose float node is unknown are skipped)."""
    rows = []
    for op in graph.ops:
        tensor = graph.tensors[op.outputs[0]]
        if op.kind == "reshape" or tensor.source not in float_values[0]:
            continue
        ref = np.concatenate([np.ravel(to_nhwc(f[tensor.source])) for f in float_values])
        got = np.concatenate([np.ravel(tensor.dequantize(v[tensor.name])) for v in int8_values])
        rows.append({"layer": op.name, "op": op.kind, "sqnr_db": sqnr_db(ref, got)})
    return rows

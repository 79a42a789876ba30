"""The golden simulator: runs an IR graph with each op unit's numpy integer kernel.

It is the specification the generated C must match byte for byte. It also measures how far the
int8 model is from the float one, per layer (SQNR), when a float reference is available.
"""

from __future__ import annotations

import numpy as np

from edgec.ir import Graph, to_stored
from edgec.ops import unit_of

# <name>_quantize_input clips the scaled value to +-this before converting it (codegen.QUANTIZE_CLIP).
QUANTIZE_CLIP = {"int8": np.float32(300.0), "int16": np.float32(70000.0)}
INT_DTYPES = {"int8": np.int8, "int16": np.int16, "int32": np.int32}  # int32: token ids, argmax indices


stored = to_stored  # a float graph value laid out as a tensor is stored


def quantize_input(graph: Graph, x_float: np.ndarray, index: int = 0) -> np.ndarray:
    """Float model input `index` (PyTorch layout) -> its stored integer tensor, exactly as
    <name>_quantize_input_<index> in C and as the program's quantize (Graph.input_rounding):
    float32 x * float32(1/scale) rounded half to even, or float32 x / scale rounded half away
    from zero; then saturated (NaN and huge values included)."""
    tensor = graph.tensors[graph.inputs[index]]
    if tensor.dtype == "int32":  # token ids: the values themselves (halves to even), saturated to int32
        ids = np.rint(np.asarray(x_float, dtype=np.float64).reshape(tensor.torch_shape))
        return stored(tensor, np.clip(np.nan_to_num(ids, nan=0.0), -(2**31), 2**31 - 1).astype(np.int32))
    x = np.asarray(x_float, dtype=np.float32).reshape(tensor.torch_shape)
    clip = QUANTIZE_CLIP[tensor.dtype]
    if graph.input_rounding == "multiply":
        v = _clip(x * np.float32(1.0 / tensor.scale), clip)
        q = np.rint(v)
    else:
        v = _clip(x / np.float32(tensor.scale), clip)
        q = np.trunc(v) + np.trunc(2 * (v - np.trunc(v)))  # the fraction (exact) rounds away at +-0.5
    info = np.iinfo(INT_DTYPES[tensor.dtype])
    q = q.astype(np.int32) + tensor.zero_point
    return stored(tensor, np.clip(q, info.min, info.max).astype(INT_DTYPES[tensor.dtype]))


def _clip(v: np.ndarray, clip: np.float32) -> np.ndarray:
    """v within +-clip, NaN to the low end (the C conversion to an integer is then defined)."""
    return np.where(v >= -clip, np.minimum(v, clip), -clip)


def run(graph: Graph, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """All tensor values for one sample: `inputs` holds each model input's stored integer tensor."""
    if len(inputs) != len(graph.inputs):
        raise ValueError(f"the graph has {len(graph.inputs)} inputs, got {len(inputs)}")
    values = {
        name: np.asarray(x, dtype=INT_DTYPES[graph.tensors[name].dtype]).reshape(graph.tensors[name].shape)
        for name, x in zip(graph.inputs, inputs)
    }
    for op in graph.ops:
        results = unit_of(op).golden(op, graph, [values[name] for name in op.inputs])
        for name, result in zip(op.outputs, results if isinstance(results, (list, tuple)) else [results]):
            values[name] = result
    return values


def invoke(graph: Graph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Every model output's stored integer tensor for one sample."""
    values = run(graph, inputs)
    return [values[name] for name in graph.outputs]


def sqnr_db(reference: np.ndarray, approximation: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio in dB (inf when identical)."""
    reference = np.asarray(reference, np.float64).ravel()
    noise = np.sum((reference - np.asarray(approximation, np.float64).ravel()) ** 2)
    signal = np.sum(reference**2)
    if noise == 0:
        return float("inf")
    return float(10 * np.log10(max(signal, 1e-30) / noise))


def layer_sqnr(graph: Graph, float_values: list[dict], int8_values: list[dict]) -> list[dict]:
    """Per op output: SQNR of the dequantized tensor against the float model's value of the same
    node, over all samples (ops whose float node is unknown or shaped otherwise are skipped)."""
    rows = []
    for op in graph.ops:
        tensor = graph.tensors[op.outputs[0]]
        if op.kind == "reshape" or tensor.source not in float_values[0]:
            continue
        if tuple(np.shape(float_values[0][tensor.source])) != tensor.torch_shape:
            continue
        ref = np.concatenate([np.ravel(stored(tensor, f[tensor.source])) for f in float_values])
        got = np.concatenate([np.ravel(tensor.dequantize(v[tensor.name])) for v in int8_values])
        rows.append({"layer": op.name, "op": op.kind, "sqnr_db": sqnr_db(ref, got)})
    return rows

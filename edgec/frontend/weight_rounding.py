"""Rounding that deserves 4 bits: how the int4 weights of a layer are chosen (`--int4-rounding`).

  nearest   the PT2E observer's: scale = max |w| / 7 per output channel, round to nearest;
  mse       per output channel, the clipping ratio r (scale = r * max |w| / 7, r in CLIP_RATIOS)
            that minimises the layer's output error on the calibration data, E[(dW x)^2] =
            dW H dW^T with H = E[x x^T] the layer's input (receptive-field) second moments;
            round to nearest; then bias correction;
  gptq      mse's scales, then GPTQ's rounding (Frantar et al. 2022, "Optimal Brain Quantization"
            in column order): each weight is rounded in turn and its rounding error spread over
            the weights not yet rounded through H^-1, which minimises the same output error far
            better than rounding each weight alone; then bias correction (the default).

Bias correction: the mean output error E[dW x] = dW E[x] on the calibration data, subtracted
from the layer's float bias (layers without a bias keep their error).

It runs on the float module before PT2E: the chosen weights replace the float ones (on their
int4 grid, scale * q), and the chosen scales are recorded on the node
(node.meta[INT4_SCALES_KEY]) for the quantizer's fixed-scale observer, so PT2E quantizes them to
exactly the chosen integers. The layer inputs are the float model's (statistics gathered in one
pass over the calibration samples: H and E[x] per group of the layer, never the samples).

Transposed convolutions and LSTM / GRU layers round to nearest whatever the method (ROUNDED_KINDS):
a transposed convolution's output pixels each sum another subset of its taps (its phase), so one
H per output channel would need the zero-inserted input's receptive fields (not gathered here); a
recurrent layer's hidden-weight inputs are its own earlier outputs, which change as its weights
are rounded, and its per-gate-block scales are not the per-channel scales the search chooses.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch.fx import GraphModule

from edgec.errors import EdgecError
from edgec.ops import OPS

METHODS = ("nearest", "mse", "gptq")
DEFAULT = "gptq"
# The int4 layers whose weights `mse` and `gptq` choose (the others round to nearest: docstring).
ROUNDED_KINDS = frozenset({"fully_connected", "conv2d"})
INT4_SCALES_KEY = "edgec_int4_scales"
QMAX = 7
CLIP_RATIOS = np.linspace(0.3, 1.0, 71)
GPTQ_DAMPING = 0.01  # of the mean diagonal of H, added to it (GPTQ's percdamp)


def round_int4_weights(module: GraphModule, nodes: list, samples: list[tuple], method: str) -> None:
    """Chooses the int4 weights of `nodes` (linear / convolution call_function nodes of `module`)
    by `method` on the calibration `samples`, in place (see the module docstring)."""
    if method not in METHODS:
        raise EdgecError(f"int4 rounding must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "nearest":
        return
    layers = [
        node
        for node in nodes
        if OPS[node.target].kind in ROUNDED_KINDS and _parameter(module, node.args[1]) is not None
    ]
    if not layers:  # weights that are not parameters (computed in the graph) keep nearest rounding
        return
    stats = _input_statistics(module, layers, samples)
    for node in layers:
        weight = _parameter(module, node.args[1])
        bias = _parameter(module, node.args[2]) if len(node.args) > 2 else None
        groups = _geometry(node)[3]
        w = weight.detach().double().numpy().reshape(weight.shape[0], -1)
        h, mean = stats[node.name]
        rows = w.reshape(groups, w.shape[0] // groups, -1)
        scales = _search_scales(rows, h)
        q = (
            _gptq(rows, h, scales.reshape(groups, -1))
            if method == "gptq"
            else _round(rows, scales.reshape(groups, -1, 1))
        )
        chosen = (q * scales.reshape(groups, -1, 1)).reshape(w.shape)
        if bias is not None:
            error = np.einsum("gok,gk->go", (rows - chosen.reshape(rows.shape)), mean).reshape(-1)
            with torch.no_grad():
                bias.add_(torch.from_numpy(error).to(bias.dtype))
        with torch.no_grad():
            weight.copy_(torch.from_numpy(chosen.reshape(weight.shape)).to(weight.dtype))
        node.meta[INT4_SCALES_KEY] = scales.reshape(-1)


def _parameter(module: GraphModule, arg) -> torch.Tensor | None:
    """The float tensor a get_attr node reads (a parameter or buffer of `module`), else None."""
    if not isinstance(arg, torch.fx.Node) or arg.op != "get_attr":
        return None
    value = module
    for part in arg.target.split("."):
        value = getattr(value, part, None)
    return value if isinstance(value, torch.Tensor) and value.is_floating_point() else None


def _geometry(node):
    """(stride, padding, dilation) as pairs, and groups; a linear layer's is (None, None, None, 1)."""
    from edgec.frontend.torch_ops import LINEARS
    from edgec.ops.conv import conv_attrs

    if node.target in LINEARS:
        return None, None, None, 1
    stride, padding, dilation, groups = conv_attrs(node)
    return stride, padding, dilation, groups


def _patches(node, x: torch.Tensor, weight_shape) -> torch.Tensor:
    """The layer's inputs as rows [P, K] in the weight's [O, K] column order: a linear layer's
    feature vectors, a convolution's receptive fields (zero padding included, as the conv sees it)."""
    stride, padding, dilation, _ = _geometry(node)
    if stride is None:
        return x.reshape(-1, x.shape[-1])
    if x.ndim == 3:  # Conv1d as a 2-D convolution of height 1
        x = x[:, :, None, :]
        kernel, stride, padding, dilation = (1, weight_shape[-1]), (1, stride[1]), (0, padding[1]), (1, dilation[1])
    else:
        kernel = tuple(weight_shape[-2:])
    cols = F.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)  # [N, C*KH*KW, L]
    return cols.transpose(1, 2).reshape(-1, cols.shape[1])


def _layer_inputs_module(module: GraphModule, layers: list) -> GraphModule:
    """A copy of `module` that returns, instead of its outputs, the input and weight of every
    layer in `layers` (compiled code: as fast as a forward pass, where an fx Interpreter is not)."""
    graph = copy.deepcopy(module.graph)
    names = {node.name for node in layers}
    taps = [arg for node in graph.nodes if node.name in names for arg in node.args[:2]]
    for node in list(graph.nodes):
        # its output goes, and torch.export's input guards (which pin the batch of one) with it
        if node.op == "output" or (node.op == "call_module" and not node.users):
            graph.erase_node(node)
    graph.output(tuple(taps))
    graph._codegen = torch.fx.graph.CodeGen()  # plain positional inputs, a plain tuple out (no pytree specs)
    tapped = GraphModule(module, graph)
    tapped.graph.eliminate_dead_code()
    tapped.recompile()
    return tapped


def _input_statistics(module: GraphModule, layers: list, samples: list[tuple]) -> dict:
    """Per layer and group: E[x x^T] [G, Kg, Kg] and E[x] [G, Kg] over its receptive fields."""
    tapped = _layer_inputs_module(module, layers)
    sums: dict[str, list] = {}
    with torch.no_grad():
        for values in _tapped_batches(tapped, samples):
            for index, node in enumerate(layers):
                x, weight = values[2 * index], values[2 * index + 1]
                groups = _geometry(node)[3]
                rows = _patches(node, x.detach().float(), tuple(weight.shape)).double().numpy()
                rows = rows.reshape(rows.shape[0], groups, -1).transpose(1, 0, 2)  # [G, P, Kg]
                h, total = np.einsum("gpk,gpl->gkl", rows, rows), rows.sum(axis=1)
                if node.name in sums:
                    sums[node.name][0] += h
                    sums[node.name][1] += total
                    sums[node.name][2] += rows.shape[1]
                else:
                    sums[node.name] = [h, total, rows.shape[1]]
    return {name: (h / count, total / count) for name, (h, total, count) in sums.items()}


def _tapped_batches(tapped: GraphModule, samples: list[tuple]):
    """The tapped values for all samples: in one run of the samples stacked on the batch axis
    when the program takes that (each tapped input then stacks the samples' own; the statistics
    are sums, so one batch is as good as many runs), else (has_recurrent) one run per sample."""
    single = tapped(*samples[0])
    if len(samples) > 1 and not has_recurrent(tapped):
        try:
            stacked = tapped(*(torch.cat(inputs) for inputs in zip(*samples)))
        except Exception:  # a program whose shapes are fixed to one sample (e.g. a view to [1, K])
            stacked = None
        expected = [
            (len(samples) * value.shape[0], *value.shape[1:]) if index % 2 == 0 else tuple(value.shape)
            for index, value in enumerate(single)
        ]  # inputs stack, weights stay
        if stacked is not None and [tuple(value.shape) for value in stacked] == expected:
            yield stacked
            return
    yield single
    for sample in samples[1:]:
        yield tapped(*sample)


def has_recurrent(module: GraphModule) -> bool:
    """Whether `module` runs an LSTM / GRU: then it must not be run on stacked samples (its zero
    initial state is a constant of the traced batch, which aten.lstm / aten.gru do not check
    against a larger batch: they corrupt the heap)."""
    return any(
        node.op == "call_function" and node.target in OPS and OPS[node.target].kind == "recurrent"
        for node in module.graph.nodes
    )


def _round(rows: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(rows / scales), -QMAX, QMAX)


def _search_scales(rows: np.ndarray, h: np.ndarray) -> np.ndarray:
    """[G, Og] scales: per output channel the clipping ratio whose rounded weights give the least
    output error dW H dW^T (a dead channel keeps scale 1)."""
    amax = np.abs(rows).max(axis=2)
    amax = np.where(amax > 0, amax, QMAX)
    best, best_error = amax / QMAX, np.full(amax.shape, np.inf)
    for ratio in CLIP_RATIOS:
        scales = ratio * amax / QMAX
        delta = _round(rows, scales[..., None]) * scales[..., None] - rows
        error = np.einsum("gok,gkl,gol->go", delta, h, delta)
        better = error < best_error
        best, best_error = np.where(better, scales, best), np.where(better, error, best_error)
    return best


def _gptq(rows: np.ndarray, h: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """GPTQ's integer weights [G, Og, Kg] at the given scales, all groups at once."""
    w = rows.copy()
    groups, _, k = w.shape
    h = h.copy()
    dead = np.diagonal(h, axis1=1, axis2=2) <= 0
    for g in range(groups):
        h[g, dead[g], dead[g]] = 1.0
        w[g][:, dead[g]] = 0.0
    damping = GPTQ_DAMPING * np.mean(np.diagonal(h, axis1=1, axis2=2), axis=1)
    h = h + damping[:, None, None] * np.eye(k)
    # The upper Cholesky factor of H^-1: row i holds how the later columns absorb column i's error.
    upper = np.linalg.cholesky(np.linalg.inv(h)).transpose(0, 2, 1)
    q = np.zeros_like(w)
    for i in range(k):
        q[:, :, i] = _round(w[:, :, i], scales)
        error = (w[:, :, i] - q[:, :, i] * scales) / upper[:, i, i][:, None]
        w[:, :, i + 1 :] -= error[:, :, None] * upper[:, None, i, i + 1 :]
    return q

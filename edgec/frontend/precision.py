"""The weight-precision chooser under a flash budget (`--flash N`, issue #25; docs/int4.md).

When a model's int8 constants exceed the flash budget, each choosable layer's sensitivity is
measured on the calibration data: the relative output noise power E[(y - y_float)^2] / E[y_float^2]
of the float model with that one layer's weights int4 (rounded as the build will round them,
edgec.frontend.weight_rounding) against the float model. The layers whose int4 weights save the
needed flash at the least summed noise are chosen (greedy by noise per byte saved, then the chosen
layers the budget does not need dropped, most sensitive first; ties in graph order: the same
inputs give the same choice). Noises add: a choice's estimated SQNR is that of the int8 program's
own noise plus its layers'.

A choosable layer is a module path whose linear / convolution nodes are exactly the int4-capable
nodes traced innermost in it (what `--int4-layers PATH` selects): a layer traced in the top-level
module, or in a module with further int4-capable submodules, stays int8.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.fx import GraphModule

from edgec.frontend.quantize import int4_capable, int4_weight_nodes
from edgec.frontend.weight_rounding import INT4_SCALES_KEY, QMAX, has_recurrent, round_int4_weights
from edgec.ops import OPS, recurrent
from edgec.ops.conv_transpose import transpose_attrs

FRONTIER_POINTS = 6  # the frontier `edgec build` prints (report.json has every point)


@dataclass
class Layer:
    """One choosable layer: its module path, its nodes, and (once measured) its int4 sensitivity
    and flash figures."""

    path: str
    nodes: list[str]  # FX node names, in graph order
    index: int  # graph position of its first node: the tie-break
    noise: float = 0.0  # relative output noise power with this layer's weights int4 alone
    int8_bytes: int = 0
    int4_bytes: int = 0

    @property
    def saved(self) -> int:
        return self.int8_bytes - self.int4_bytes

    @property
    def sqnr_db(self) -> float:
        return sqnr_db(self.noise)


@dataclass
class Choice:
    """The chosen int4 layers (paths, graph order) and the frontier: (constants bytes, estimated
    SQNR dB) with the greedy order's first k layers int4, k = 0..all."""

    int4: list[str]
    constants_bytes: int
    estimated_sqnr_db: float
    frontier: list[tuple[int, float]]


def sqnr_db(noise: float) -> float:
    return math.inf if noise <= 0 else -10.0 * math.log10(noise)


def choosable_layers(module: GraphModule) -> list[Layer]:
    """The layers the chooser may make int4 (see the module docstring), in graph order."""
    innermost: dict[str, list] = {}
    order = {node.name: i for i, node in enumerate(module.graph.nodes)}
    for node in module.graph.nodes:
        if int4_capable(node) and node.meta.get("nn_module_stack"):
            path = list(node.meta["nn_module_stack"].values())[-1][0]
            if path:
                innermost.setdefault(path, []).append(node.name)
    layers = []
    for path, names in innermost.items():
        if [node.name for node in int4_weight_nodes(module, False, [path])] == names:
            layers.append(Layer(path, names, order[names[0]]))
    return sorted(layers, key=lambda layer: layer.index)


def measure_sensitivities(
    float_module: GraphModule, layers: list[Layer], samples: list[tuple], rounding: str
) -> list[np.ndarray]:
    """Sets each layer's `noise` (the float model with that layer's weights int4, rounded by
    `rounding`, against the float model on `samples`); returns the float outputs, one flat array
    per sample."""
    rounded = copy.deepcopy(float_module)
    nodes = {node.name: node for node in rounded.graph.nodes}
    round_int4_weights(rounded, [nodes[name] for layer in layers for name in layer.nodes], samples, rounding)
    for layer in layers:
        for name in layer.nodes:
            if OPS[nodes[name].target].kind == "recurrent":
                _round_recurrent(rounded, nodes[name])
            elif INT4_SCALES_KEY not in nodes[name].meta:  # not chosen by the rounding: nearest
                _round_nearest(rounded, nodes[name])
    probe = copy.deepcopy(float_module)
    reference = run_flat(probe, samples)
    for layer in layers:
        swapped = [(_tensor(probe, target), _tensor(rounded, target)) for target in _parameter_targets(probe, layer)]
        saved = [original.detach().clone() for original, _ in swapped]
        with torch.no_grad():
            for original, chosen in swapped:
                original.copy_(chosen)
            layer.noise = relative_noise(reference, run_flat(probe, samples))
            for (original, _), value in zip(swapped, saved):
                original.copy_(value)
    return reference


def _round_nearest(module: GraphModule, node) -> None:
    """A linear / convolution layer's weights rounded to nearest on the int4 grid of its quantize
    node (the observer's max |w| / 7 per output channel; a grouped transposed convolution's per
    tensor), in place: --int4-rounding nearest, and the transposed convolutions whatever the
    rounding."""
    if not isinstance(node.args[1], torch.fx.Node) or node.args[1].op != "get_attr":
        return
    weight = _tensor(module, node.args[1].target)
    axis = 0
    if OPS[node.target].kind == "conv_transpose2d":
        axis = 1 if transpose_attrs(node)[4] == 1 else None
    with torch.no_grad():
        w = weight.detach().double()
        dims = [d for d in range(w.dim()) if d != axis]
        scale = w.abs().amax(dim=dims, keepdim=True).clamp(min=2**-20) / QMAX
        weight.copy_((torch.round(w / scale).clamp(-QMAX, QMAX) * scale).to(weight.dtype))


def _round_recurrent(module: GraphModule, node) -> None:
    """A recurrent layer's weight matrices as its int4 build rounds them (nearest, per gate block:
    edgec.frontend.weight_rounding's docstring says why), in place."""
    with torch.no_grad():
        for w_ih, w_hh in recurrent.weight_nodes(node):
            tensors = [_tensor(module, w.target) for w in (w_ih, w_hh)]
            chosen = recurrent.int4_reference(*(t.detach().double().numpy() for t in tensors))
            for tensor, value in zip(tensors, chosen):
                tensor.copy_(torch.from_numpy(value).to(tensor.dtype))


def _parameter_targets(module: GraphModule, layer: Layer) -> list[str]:
    """The get_attr targets of the layer's weights and biases (a recurrent layer's: its weight
    matrices)."""
    nodes = {node.name: node for node in module.graph.nodes}
    targets = []
    for name in layer.nodes:
        node = nodes[name]
        if OPS[node.target].kind == "recurrent":
            targets += [w.target for pair in recurrent.weight_nodes(node) for w in pair if w.target not in targets]
            continue
        for arg in node.args[1:3]:
            if isinstance(arg, torch.fx.Node) and arg.op == "get_attr" and arg.target not in targets:
                targets.append(arg.target)
    return targets


def _tensor(module: GraphModule, target: str) -> torch.Tensor:
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def run_flat(module: GraphModule, samples: list[tuple]) -> list[np.ndarray]:
    """`module`'s outputs on each sample, flattened to one float64 array per sample: in one run of
    the samples stacked on the batch axis when the program takes that, else (has_recurrent) one run
    per sample."""
    with torch.no_grad():
        single = _flat(module(*samples[0]))
        if len(samples) > 1 and not has_recurrent(module):
            try:
                stacked = _flat(_unguarded(module)(*(torch.cat(inputs) for inputs in zip(*samples))))
            except Exception:  # a program whose shapes are fixed to one sample (e.g. a view to [1, K])
                stacked = None
            if stacked is not None and all(s.shape[0] == len(samples) * x.shape[0] for s, x in zip(stacked, single)):
                return [
                    np.concatenate([leaf.reshape(len(samples), -1)[i] for leaf in stacked]) for i in range(len(samples))
                ]
        return [np.concatenate([leaf.reshape(-1) for leaf in _flat(module(*sample))]) for sample in samples]


def _flat(outputs) -> list[np.ndarray]:
    return [leaf.detach().double().numpy() for leaf in torch.utils._pytree.tree_leaves(outputs)]


def _unguarded(module: GraphModule) -> GraphModule:
    """`module` without torch.export's input guards (which pin the batch of one), its parameters
    shared, taking and returning plain tensors."""
    graph = copy.deepcopy(module.graph)
    for node in list(graph.nodes):
        if node.op == "call_module" and not node.users:
            graph.erase_node(node)
    graph._codegen = torch.fx.graph.CodeGen()
    unguarded = GraphModule(module, graph)
    unguarded.recompile()
    return unguarded


def relative_noise(reference: list[np.ndarray], outputs: list[np.ndarray]) -> float:
    """E[(y - y_ref)^2] / E[y_ref^2] over all samples and outputs."""
    signal = sum(float(np.sum(y * y)) for y in reference)
    error = sum(float(np.sum((y - r) ** 2)) for y, r in zip(outputs, reference))
    return error / signal if signal > 0 else (0.0 if error == 0 else math.inf)


def choose(layers: list[Layer], int8_bytes: int, budget: int, base_noise: float) -> Choice | None:
    """The int4 layers that bring `int8_bytes` of constants within `budget` at the least summed
    noise (module docstring), or None if even every layer int4 does not."""
    need = int8_bytes - budget
    order = sorted(
        (layer for layer in layers if layer.saved > 0), key=lambda layer: (layer.noise / layer.saved, layer.index)
    )
    frontier, total, noise = [(int8_bytes, sqnr_db(base_noise))], int8_bytes, base_noise
    for layer in order:
        total, noise = total - layer.saved, noise + layer.noise
        frontier.append((total, sqnr_db(noise)))
    if sum(layer.saved for layer in order) < need:
        return None
    chosen, saved = [], 0
    for layer in order:
        if saved >= need:
            break
        chosen.append(layer)
        saved += layer.saved
    for layer in sorted(chosen, key=lambda layer: (-layer.noise, layer.index)):
        if saved - layer.saved >= need:
            chosen.remove(layer)
            saved -= layer.saved
    single = min(
        (layer for layer in order if layer.saved >= need), key=lambda layer: (layer.noise, layer.index), default=None
    )
    if single is not None and single.noise < sum(layer.noise for layer in chosen):
        chosen, saved = [single], single.saved
    chosen.sort(key=lambda layer: layer.index)
    noise = base_noise + sum(layer.noise for layer in chosen)
    return Choice([layer.path for layer in chosen], int8_bytes - saved, sqnr_db(noise), frontier)


def frontier_points(frontier: list[tuple[int, float]], count: int = FRONTIER_POINTS) -> list[tuple[int, float]]:
    """At most `count` points of the frontier, evenly spaced along it, first and last included."""
    if len(frontier) <= count:
        return list(frontier)
    picks = sorted({round(i * (len(frontier) - 1) / (count - 1)) for i in range(count)})
    return [frontier[i] for i in picks]

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

The activation-precision chooser (`--activations auto`, docs/precision.md) works on the same
layers' output tensors: an int8 tensor's rounding goes only when its producer and every layer that
reads it (through views) are int16, so a candidate ("move") is a layer's output with the module
paths that make it int16, its producer's and its readers'. Its sensitivity is the relative output
noise of the float model with that one tensor fake-quantized at int8 (minmax on the calibration
data, as the int8 build calibrates it) against the float model; what promoting a set of paths buys
is the sum of the sensitivities of the tensors it makes int16 throughout.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.fx import GraphModule

from edgec.frontend.quantize import int4_capable, int4_weight_nodes, matching_paths
from edgec.frontend.weight_rounding import INT4_SCALES_KEY, QMAX, has_recurrent, round_int4_weights
from edgec.ops import OPS, recurrent
from edgec.ops.conv_transpose import transpose_attrs
from edgec.ops.int16_units import INT16_CAPABLE_KINDS, VIEW_KINDS
from edgec.ops.qspec import fused_activations

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


# -- activation precision (--activations auto) --------------------------------------------------


@dataclass
class Move:
    """One layer's output tensor made int16: the module paths that takes (its producer's, then its
    readers'), the FX nodes that must then be int16, and its sensitivity."""

    path: str  # the producing layer's path
    paths: tuple[str, ...]  # what --int16-layers gets for it, graph order
    tensor: str  # the FX node whose output is quantized (the end of the producer's fused clamps)
    nodes: frozenset[str]  # the producer and its readers
    index: int
    noise: float = 0.0  # relative output noise power with this tensor alone rounded to int8

    @property
    def sqnr_db(self) -> float:
        return sqnr_db(self.noise)


def int16_moves(module: GraphModule, int4_paths=()) -> list[Move]:
    """The layers' outputs the chooser may make int16, in graph order: a linear / convolution /
    depthwise layer with a module path, whose output is read by layers with module paths (through
    views) and not by the program's output; selecting the paths must make no layer with int4
    weights (`int4_paths`: the 16x8 kernels take int8 weights) nor one without an int16 kernel int16."""
    order = {node.name: i for i, node in enumerate(module.graph.nodes)}
    ops = [node for node in module.graph.nodes if node.op == "call_function" and node.target in OPS]
    moves = []
    for node in ops:
        path = _innermost(node)
        if not (int4_capable(node) and path):
            continue
        end = ([node] + fused_activations(node))[-1]
        readers = _readers(end)
        if readers is None:
            continue
        paths = tuple(dict.fromkeys([path] + [_innermost(reader) for reader in readers]))
        selected = [other for other in ops if matching_paths(other, paths)]
        if any(OPS[other.target].kind not in INT16_CAPABLE_KINDS for other in selected) or any(
            int4_capable(other) and matching_paths(other, int4_paths) for other in selected
        ):
            continue
        nodes = frozenset([node.name] + [reader.name for reader in readers])
        moves.append(Move(path, paths, end.name, nodes, order[node.name]))
    return moves


def _innermost(node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else ""


def _readers(node) -> list | None:
    """The ops reading `node`'s output, through views (included); None if the program's output
    or an op without a module path reads it (a path would make the model's output int16, or
    none names the reader)."""
    readers, pending = [], list(node.users)
    while pending:
        user = pending.pop(0)
        if user.op != "call_function" or user.target not in OPS or not _innermost(user):
            return None
        readers.append(user)
        if OPS[user.target].kind in VIEW_KINDS:
            pending.extend(user.users)
    return readers or None


def int16_nodes(module: GraphModule, paths) -> set[str]:
    """The FX nodes `--int16-layers paths` makes int16 (the quantizer's rule)."""
    return {
        node.name
        for node in module.graph.nodes
        if node.op == "call_function" and node.target in OPS and matching_paths(node, paths)
    }


def removed_noise(moves: list[Move], selected: set[str]) -> float:
    """The estimated noise int16 takes away when the nodes `selected` are int16: the sensitivities
    of the tensors whose producer and readers all are."""
    return sum(move.noise for move in moves if move.nodes <= selected)


def measure_activation_noise(
    float_module: GraphModule, moves: list[Move], samples: list[tuple], reference: list[np.ndarray]
) -> None:
    """Sets each move's `noise`: the float model with its tensor fake-quantized at int8 (the range
    minmax calibration observes on `samples`) against `reference`, the float model's outputs."""
    ranges = _output_ranges(float_module, {move.tensor for move in moves}, samples)
    for move in moves:
        probe = copy.deepcopy(float_module)
        node = next(node for node in probe.graph.nodes if node.name == move.tensor)
        with probe.graph.inserting_after(node):
            rounded = probe.graph.call_function(fake_quantize_int8, (node, *ranges[move.tensor]))
        node.replace_all_uses_with(rounded, delete_user_cb=lambda user: user is not rounded)
        probe.recompile()
        move.noise = relative_noise(reference, run_flat(probe, samples))


def fake_quantize_int8(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """`x` rounded to the int8 grid edgec's activation observer (MinMaxObserver, affine, eps
    2^-20) picks for the range [low, high]."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = max((high - low) / 255.0, 2.0**-20)
    zero_point = int(min(127, max(-128, -128 - round(low / scale))))
    return torch.fake_quantize_per_tensor_affine(x, scale, zero_point, -128, 127)


class _Ranges(torch.fx.Interpreter):
    """Records the min and max of the named nodes' outputs over the samples it runs."""

    def __init__(self, module: GraphModule, names: set[str]):
        super().__init__(module)
        self.names, self.ranges = names, {}

    def run_node(self, node):
        value = super().run_node(node)
        if node.name in self.names:
            low, high = float(value.min()), float(value.max())
            seen = self.ranges.get(node.name, (low, high))
            self.ranges[node.name] = (min(low, seen[0]), max(high, seen[1]))
        return value


def _output_ranges(module: GraphModule, names: set[str], samples: list[tuple]) -> dict[str, tuple[float, float]]:
    recorder = _Ranges(module, names)
    with torch.no_grad():
        for sample in samples:
            recorder.run(*sample)
    return recorder.ranges

"""Inference BatchNorm on the float graph: folded into the conv, transposed conv or linear that
feeds it, or else (after an activation, after a layer whose output is read elsewhere too) run as
the per-channel affine it is, a 1x1 depthwise convolution.

This runs before quantization on purpose: the weights that get quantized (and whose per-channel
scales are chosen) must be the folded ones, or the int8 model would not match the float one.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from edgec.frontend.export import FOLDED_MODULES, module_paths, take_location
from edgec.frontend.torch_ops import BATCH_NORMS, CONV_TRANSPOSES, CONVS, GETITEM, LINEARS, aten, module_attribute

_DEPTHWISE = {3: aten.conv1d.default, 4: aten.conv2d.default}  # by the normalised tensor's rank


def fold_batchnorm(module: GraphModule) -> GraphModule:
    for bn in list(module.graph.nodes):
        if bn.op == "call_function" and bn.target in BATCH_NORMS:
            producer = bn.args[0]
            if _foldable(producer):
                _fold(module, producer, bn)
            elif bn.meta["val"].dim() in (2, *_DEPTHWISE):
                _as_depthwise(module, bn)
    module.graph.eliminate_dead_code()
    module.recompile()
    return module


def _foldable(producer) -> bool:
    return (
        isinstance(producer, Node)
        and producer.op == "call_function"
        and producer.target in CONVS | CONV_TRANSPOSES | LINEARS
        and len(producer.users) == 1
        and all(isinstance(a, Node) and a.op == "get_attr" for a in producer.args[1:2])
    )


def _affine(module: GraphModule, bn: Node, channels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(factor, shift): the BatchNorm is x * factor + shift per channel."""
    gamma, beta, mean, var = (_value(module, a) for a in bn.args[1:5])
    eps = bn.args[7] if bn.target == aten.batch_norm.default else bn.args[6]
    gamma = torch.ones(channels) if gamma is None else gamma
    beta = torch.zeros(channels) if beta is None else beta
    factor = gamma / torch.sqrt(var + eps)
    return factor, beta - mean * factor


def _fold(module: GraphModule, producer: Node, bn: Node) -> None:
    weight = _value(module, producer.args[1])
    bias = _value(module, producer.args[2]) if len(producer.args) > 2 else None
    transposed, groups = _transposed_groups(producer)
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    factor, shift = _affine(module, bn, out_channels)
    bias = torch.zeros(out_channels) if bias is None else bias
    if transposed:  # [C_in, C_out/groups, ...]: output channel g * C_out/groups + j is column j of group g
        grouped = weight.reshape(groups, weight.shape[0] // groups, *weight.shape[1:])
        scale = factor.reshape(groups, 1, weight.shape[1], *([1] * (weight.dim() - 2)))
        folded_weight = (grouped * scale).reshape(weight.shape)
    else:
        folded_weight = weight * factor.reshape(-1, *([1] * (weight.dim() - 1)))
    args = list(producer.args) + [None] * (3 - len(producer.args))
    args[1] = _constant(module, producer, "weight", folded_weight)
    args[2] = _constant(module, producer, "bias", bias * factor + shift)
    producer.args = tuple(args)
    # The BatchNorm's module is now computed by the producer (--int16-layers bn selects it).
    producer.meta[FOLDED_MODULES] = producer.meta.get(FOLDED_MODULES, []) + module_paths(bn)
    for user in list(bn.users):
        if user.target == GETITEM:  # _native_batch_norm_legit_no_training returns a tuple
            user.replace_all_uses_with(producer)
    bn.replace_all_uses_with(producer)


def _transposed_groups(producer: Node) -> tuple[bool, int]:
    """Whether the layer's weight is laid out [C_in, C_out/groups, ...], and its groups."""
    args = producer.args
    if producer.target in CONV_TRANSPOSES:
        return True, args[6] if len(args) > 6 else 1
    if producer.target == aten.convolution.default:
        return bool(args[6]), args[8]
    return False, 1


def _as_depthwise(module: GraphModule, bn: Node) -> None:
    """x * factor + shift per channel as a 1x1 depthwise convolution (a [N, C] input through a
    [N, C, 1] view of it)."""
    value = bn.meta["val"]
    channels = value.shape[1]
    factor, shift = _affine(module, bn, channels)
    graph, x = module.graph, bn.args[0]
    with graph.inserting_before(bn):
        if value.dim() == 2:
            x = _node(
                graph, bn, aten.reshape.default, (x, [value.shape[0], channels, 1]), value.reshape(-1, channels, 1)
            )
        rank = x.meta["val"].dim()
        weight = _constant(module, bn, "weight", factor.reshape(channels, 1, *([1] * (rank - 2))))
        bias = _constant(module, bn, "bias", shift)
        ones, zeros = [1] * (rank - 2), [0] * (rank - 2)
        result = _node(graph, bn, _DEPTHWISE[rank], (x, weight, bias, ones, zeros, ones, channels), x.meta["val"])
        if value.dim() == 2:
            result = _node(graph, bn, aten.reshape.default, (result, list(value.shape)), value)
    for user in list(bn.users):
        if user.target == GETITEM:
            user.replace_all_uses_with(result)
    bn.replace_all_uses_with(result)


def _node(graph, origin: Node, target, args, value) -> Node:
    """A new call of `target` standing for part of `origin` (its source location for messages)."""
    node = graph.call_function(target, args)
    take_location(node, origin)
    node.meta["val"] = value
    return node


def _value(module: GraphModule, node) -> torch.Tensor | None:
    return None if node is None else module_attribute(module, node.target).detach()


def _constant(module: GraphModule, anchor: Node, kind: str, value: torch.Tensor) -> Node:
    name = f"_edgec_folded_{anchor.name}_{kind}"
    module.register_buffer(name, value.detach().clone())
    with module.graph.inserting_before(anchor):
        node = module.graph.get_attr(name)
    node.meta["val"] = value
    return node

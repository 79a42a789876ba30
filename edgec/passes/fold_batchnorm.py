"""Fold inference BatchNorm into the conv/linear that feeds it, on the float graph.

This runs before quantization on purpose: the weights that get quantized (and whose per-channel
scales are chosen) must be the folded ones, or the int8 model would not match the float one.
"""
from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from edgec.torch_ops import BATCH_NORMS, CONVS, GETITEM, LINEARS, aten


def fold_batchnorm(module: GraphModule) -> GraphModule:
    for bn in list(module.graph.nodes):
        if bn.op == "call_function" and bn.target in BATCH_NORMS:
            producer = bn.args[0]
            if _foldable(producer):
                _fold(module, producer, bn)
    module.graph.eliminate_dead_code()
    module.recompile()
    return module


def _foldable(producer) -> bool:
    return (isinstance(producer, Node) and producer.op == "call_function"
            and producer.target in CONVS | LINEARS and len(producer.users) == 1
            and all(isinstance(a, Node) and a.op == "get_attr" for a in producer.args[1:2]))


def _fold(module: GraphModule, producer: Node, bn: Node) -> None:
    gamma, beta, mean, var = (_value(module, a) for a in bn.args[1:5])
    eps = bn.args[7] if bn.target == aten.batch_norm.default else bn.args[6]
    weight = _value(module, producer.args[1])
    bias = _value(module, producer.args[2]) if len(producer.args) > 2 else None
    out_channels = weight.shape[0]
    gamma = torch.ones(out_channels) if gamma is None else gamma
    beta = torch.zeros(out_channels) if beta is None else beta
    bias = torch.zeros(out_channels) if bias is None else bias
    factor = gamma / torch.sqrt(var + eps)
    folded_weight = weight * factor.reshape(-1, *([1] * (weight.dim() - 1)))
    folded_bias = (bias - mean) * factor + beta
    args = list(producer.args) + [None] * (3 - len(producer.args))
    args[1] = _constant(module, producer, "weight", folded_weight)
    args[2] = _constant(module, producer, "bias", folded_bias)
    producer.args = tuple(args)
    for user in list(bn.users):
        if user.target == GETITEM:  # _native_batch_norm_legit_no_training returns a tuple
            user.replace_all_uses_with(producer)
    bn.replace_all_uses_with(producer)


def _value(module: GraphModule, node) -> torch.Tensor | None:
    if node is None:
        return None
    target = module
    for part in node.target.split("."):
        target = getattr(target, part)
    return target.detach()


def _constant(module: GraphModule, anchor: Node, kind: str, value: torch.Tensor) -> Node:
    name = f"_edgec_folded_{anchor.name}_{kind}"
    module.register_buffer(name, value.detach().clone())
    with module.graph.inserting_before(anchor):
        return module.graph.get_attr(name)

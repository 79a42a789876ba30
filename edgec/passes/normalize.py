"""Normalise the exported float graph before anything reads it: in-place ATen spellings become
their functional form, eval-time no-ops disappear (and views become reshapes, which stay valid
without the `contiguous` that may have preceded them), so every later stage (and every op unit)
sees one spelling per operator and a user never has to rewrite `out += identity`.
"""
from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from edgec.torch_ops import IDENTITIES

aten = torch.ops.aten


def normalize(module: GraphModule) -> GraphModule:
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function":
            continue
        if (functional := functional_form(node.target)) is not None:
            _make_functional(module, node, functional)
            changed = True
        if node.target in (aten.view.default, aten._unsafe_view.default):
            node.target = aten.reshape.default  # stays valid once the no-op `contiguous` before it is gone
            changed = True
        elif node.target in IDENTITIES:
            node.replace_all_uses_with(node.args[0])
            module.graph.erase_node(node)
            changed = True
    if changed:
        module.graph.lint()
        module.recompile()
    return module


def functional_form(target):
    """aten.add.Tensor for aten.add_.Tensor (any in-place `name_` overload), else None."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable or not schema.name.startswith("aten::") or not schema.name.endswith("_"):
        return None
    packet = getattr(aten, schema.name[len("aten::"):-1], None)
    return getattr(packet, target._overloadname, None) if packet is not None else None


def _make_functional(module: GraphModule, node: Node, functional) -> None:
    """x.op_(...) mutates x: the node becomes x' = op(x, ...) and every later reader of x reads x'."""
    mutated = node.args[0]
    node.target = functional
    if not isinstance(mutated, Node):
        return
    order = {n: i for i, n in enumerate(module.graph.nodes)}
    for user in list(mutated.users):
        if user is not node and order[user] > order[node]:
            user.replace_input_with(mutated, node)

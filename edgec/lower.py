"""Lower a quantized (Q/DQ) FX graph into edgec's IR.

In a PT2E graph every activation travels as quantize -> dequantize around float ops. Lowering
walks the nodes in order and keeps one map from FX nodes to what they mean in the IR:
  - an activation Tensor (quantize/dequantize nodes of it map to the same Tensor, and the first
    quantize after a float op gives that op's output its qparams);
  - a constant (numpy array, with scales when it is a quantized weight).
Each compute node is lowered by the op unit registered for its target.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.fx import GraphModule, Node

from edgec.errors import EdgecError
from edgec.frontend import source_line
from edgec.ir import Graph, Op, Tensor
from edgec.ops import OPS
from edgec.torch_ops import GETITEM, IDENTITIES

QUANTIZE = {"quantize_per_tensor", "quantize_per_channel"}
DEQUANTIZE = {"dequantize_per_tensor", "dequantize_per_channel"}


@dataclass
class Constant:
    """A compile-time value: float, or int8 with per-channel (or per-tensor) scales."""
    value: np.ndarray
    scales: np.ndarray | None = None

    @property
    def quantized(self) -> bool:
        return self.scales is not None


def _qop_name(node: Node) -> str | None:
    if node.op != "call_function" or "quantized_decomposed" not in str(node.target):
        return None
    return node.target._overloadpacket.__name__


class LoweringContext:
    def __init__(self, module: GraphModule):
        self.module = module
        self.graph = Graph()
        self.values: dict[str, Tensor | Constant] = {}

    # -- what op units call --------------------------------------------------------------
    def tensor(self, node: Node) -> Tensor:
        value = self.values.get(node.name) if isinstance(node, Node) else None
        if not isinstance(value, Tensor):
            raise EdgecError(f"{source_line(node) if isinstance(node, Node) else node}: "
                             f"expected a quantized activation here")
        return value

    def constant(self, node) -> Constant | None:
        if node is None:
            return None
        value = self.values.get(node.name) if isinstance(node, Node) else None
        if not isinstance(value, Constant):
            raise EdgecError(f"{source_line(node)}: expected a constant (weight or bias) here")
        return value

    def output(self, node: Node, shape=None, alias_of: str | None = None, qparams_of: Tensor | None = None) -> Tensor:
        """The Tensor `node` produces; qparams arrive with the next quantize (or are shared)."""
        shape = tuple(node.meta["val"].shape) if shape is None else tuple(shape)
        tensor = self.graph.add_tensor(Tensor(node.name, shape, alias_of=alias_of, source=node.name))
        if qparams_of is not None and qparams_of.quantized:
            tensor.scale, tensor.zero_point = qparams_of.scale, qparams_of.zero_point
        self.values[node.name] = tensor
        return tensor

    def add_op(self, kind: str, node: Node, inputs: list[Tensor], outputs: list[Tensor], **attrs) -> Op:
        op = Op(f"{kind}_{len(self.graph.ops)}", kind, [t.name for t in inputs],
                [t.name for t in outputs], attrs, source_line(node))
        self.graph.ops.append(op)
        return op

    def alias(self, node: Node, value) -> None:
        self.values[node.name] = value

    # -- the walk ----------------------------------------------------------------------------
    def run(self) -> Graph:
        for node in self.module.graph.nodes:
            self._lower_node(node)
        return self.graph

    def _lower_node(self, node: Node) -> None:
        if node.op == "placeholder":
            tensor = self.graph.add_tensor(Tensor(node.name, tuple(node.meta["val"].shape), source=node.name))
            self.graph.inputs.append(tensor.name)
            self.values[node.name] = tensor
        elif node.op == "get_attr":
            self.values[node.name] = Constant(_attr_value(self.module, node.target))
        elif node.op == "call_module":
            return  # torch.export's input guards (_guards_fn): nothing to run on the device
        elif node.op == "output":
            outputs = node.args[0] if isinstance(node.args[0], (tuple, list)) else [node.args[0]]
            self.graph.outputs = [self.tensor(arg).name for arg in outputs]
        elif _qop_name(node) in QUANTIZE:
            self._quantize(node)
        elif _qop_name(node) in DEQUANTIZE:
            self._dequantize(node)
        elif node.target in IDENTITIES:
            self.values[node.name] = self.values[node.args[0].name]
        elif node.target == GETITEM:
            self.values[node.name] = self.values[node.args[0].name]  # max_pool2d_with_indices[0]
        else:
            OPS[node.target].lower(self, node)

    def _qparams(self, node: Node) -> tuple[np.ndarray, np.ndarray]:
        scale, zero_point = (self._scalar_or_array(a) for a in node.args[1:3])
        return np.atleast_1d(np.asarray(scale, np.float64)), np.atleast_1d(np.asarray(zero_point, np.int64))

    def _scalar_or_array(self, arg):
        if isinstance(arg, Node):
            return self.values[arg.name].value
        return arg

    def _quantize(self, node: Node) -> None:
        source = self.values[node.args[0].name]
        scale, zero_point = self._qparams(node)
        if isinstance(source, Constant):  # weights when convert_pt2e did not fold them
            self.values[node.name] = source
            return
        if not source.quantized:
            source.scale, source.zero_point = float(scale[0]), int(zero_point[0])
        elif (source.scale, source.zero_point) != (float(scale[0]), int(zero_point[0])):
            raise EdgecError(f"{source_line(node)}: requantizing an activation to new qparams "
                             f"is not supported (tensor {source.name})")
        self.values[node.name] = source

    def _dequantize(self, node: Node) -> None:
        source = self.values[node.args[0].name]
        if isinstance(source, Tensor):
            self.values[node.name] = source
            return
        scale, zero_point = self._qparams(node)
        if np.any(zero_point != 0):
            raise EdgecError(f"{source_line(node)}: weights must be symmetric (zero point 0)")
        self.values[node.name] = Constant(source.value.astype(np.int8), scale)


def _attr_value(module: GraphModule, target: str) -> np.ndarray:
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def lower(module: GraphModule) -> Graph:
    graph = LoweringContext(module).run()
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise EdgecError(f"edgec supports one input and one output; this model has "
                         f"{len(graph.inputs)} inputs and {len(graph.outputs)} outputs")
    for name in graph.inputs + graph.outputs:
        if not graph.tensors[name].quantized:
            raise EdgecError(f"model {'input' if name in graph.inputs else 'output'} '{name}' is not quantized")
    return graph

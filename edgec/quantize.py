"""Quantize a float exported program with torchao's PT2E flow and edgec's own Quantizer, which asks
each op unit how its node is quantized (OpDef.annotate; the specs are in edgec.ops.qspec).
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch.fx import GraphModule, Interpreter
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import Quantizer

from edgec.ops import OPS
from edgec.ops.base import OpDef
from edgec.ops.qspec import ANNOTATION_KEY


class EdgecQuantizer(Quantizer):
    """Annotates a float training-IR graph with the qspecs edgec's kernels need."""

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op == "call_function" and ANNOTATION_KEY not in node.meta and node.target in OPS:
                OPS[node.target].annotate(node)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def is_quantized(module: GraphModule) -> bool:
    """True when the graph already carries Q/DQ nodes (a user's PT2E or QAT result)."""
    return any(node.op == "call_function" and "quantize_per_" in str(node.target)
               for node in module.graph.nodes)


def quantize(module: GraphModule, calibration: Iterable[tuple], progress: Callable | None = None) -> GraphModule:
    """prepare_pt2e -> run calibration samples -> convert_pt2e; returns the Q/DQ graph module."""
    prepared = prepare_pt2e(module, EdgecQuantizer())
    run = _ObservingInterpreter(prepared).run if _observing_nodes(prepared) else prepared
    with torch.no_grad():
        for sample in (progress(calibration) if progress else calibration):
            run(*sample)
    return convert_pt2e(prepared, fold_quantize=True)


def _observing_nodes(module: GraphModule) -> set:
    """The nodes whose unit has a calibration hook (OpDef.observe)."""
    return {node for node in module.graph.nodes if node.op == "call_function" and node.target in OPS
            and type(OPS[node.target]).observe is not OpDef.observe}


class _ObservingInterpreter(Interpreter):
    """Runs the prepared module node by node, handing the units that ask for it (OpDef.observe)
    their node's float arguments and result; the observers run as usual."""

    def __init__(self, module: GraphModule):
        super().__init__(module)
        self.observing = _observing_nodes(module)

    def run_node(self, node):
        result = super().run_node(node)
        if node in self.observing:
            args, _ = self.fetch_args_kwargs_from_env(node)
            OPS[node.target].observe(node, args, result)
        return result

"""Quantize a float exported program with torchao's PT2E flow and edgec's own Quantizer, which asks
each op unit how its node is quantized (OpDef.annotate; the specs are in edgec.ops.qspec).
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch.fx import GraphModule
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import Quantizer

from edgec.errors import EdgecError
from edgec.frontend import node_location
from edgec.ops import OPS
from edgec.ops.int16_units import INT16_CAPABLE_KINDS
from edgec.ops.qspec import ANNOTATION_KEY, fused_activations, select_int16

ACTIVATION_DTYPES = ("int8", "int16")


def _fuses(node) -> bool:
    """Whether `node` leaves its output's quantization to the clamps that follow it
    (qspec.annotate_with_output): they then run as its output stage."""
    annotation = node.meta.get(ANNOTATION_KEY)
    return annotation is not None and annotation.output_qspec is None


class EdgecQuantizer(Quantizer):
    """Annotates a float training-IR graph with the qspecs edgec's kernels need: int8 activations,
    or int16 ones (the 16x8 scheme) for the whole model (`activations="int16"`) or for the layers
    whose nn.Module path is in `int16_layers` (a path selects its submodules too)."""

    def __init__(self, activations: str = "int8", int16_layers: Iterable[str] = ()):
        super().__init__()
        if activations not in ACTIVATION_DTYPES:
            raise EdgecError(f"activations must be one of {', '.join(ACTIVATION_DTYPES)}, got {activations!r}")
        self.all_int16 = activations == "int16"
        self.int16_layers = tuple(name.strip() for name in int16_layers if name.strip())

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op == "call_function" and ANNOTATION_KEY not in node.meta and node.target in OPS:
                OPS[node.target].annotate(node)
        if self.all_int16 or self.int16_layers:
            self._select_int16(model)
        return model

    def _select_int16(self, model: GraphModule) -> None:
        """int16 qspecs on the selected nodes; a clamp chain fused into its producer follows it."""
        fused = {chained for node in model.graph.nodes if _fuses(node) for chained in fused_activations(node)}
        unused = set(self.int16_layers)
        refused = []
        for node in model.graph.nodes:
            if node.op != "call_function" or node in fused or node.target not in OPS:  # getitems follow their op
                continue
            matched = self._matches(node)
            unused -= matched
            if not (self.all_int16 or matched):
                continue
            if OPS[node.target].kind not in INT16_CAPABLE_KINDS:
                refused.append(f"  {node.target}: {node_location(node)}")
                continue
            select_int16(node)
        if unused:
            raise EdgecError(f"--int16-layers: no module named {', '.join(sorted(unused))} in the model")
        if refused:
            raise EdgecError("these operators have no int16 kernel; keep these layers int8 (--int16-layers):\n"
                             + "\n".join(dict.fromkeys(refused)))

    def _matches(self, node) -> set[str]:
        """The int16_layers names whose module (or a submodule of which) traced `node`."""
        paths = [path for path, _ in (node.meta.get("nn_module_stack") or {}).values()]
        return {name for name in self.int16_layers
                if any(path == name or path.startswith(name + ".") for path in paths)}

    def validate(self, model: GraphModule) -> None:
        pass


def is_quantized(module: GraphModule) -> bool:
    """True when the graph already carries Q/DQ nodes (a user's PT2E or QAT result)."""
    return any(node.op == "call_function" and "quantize_per_" in str(node.target)
               for node in module.graph.nodes)


def quantize(module: GraphModule, calibration: Iterable[tuple], progress: Callable | None = None, *,
             activations: str = "int8", int16_layers: Iterable[str] = ()) -> GraphModule:
    """prepare_pt2e -> run calibration samples -> convert_pt2e; returns the Q/DQ graph module."""
    prepared = prepare_pt2e(module, EdgecQuantizer(activations, int16_layers))
    with torch.no_grad():
        for sample in (progress(calibration) if progress else calibration):
            prepared(*sample)
    return convert_pt2e(prepared, fold_quantize=True)

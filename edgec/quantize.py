"""Quantize a float exported program with torchao's PT2E flow and edgec's own Quantizer.

The Quantizer encodes what edgec's kernels can execute (docs/numerics.md):
  - conv / depthwise weights: int8 symmetric per output channel, range [-127, 127];
  - linear weights: int8 symmetric per tensor (the FC kernel's cheapest output stage);
  - activations: int8 asymmetric per tensor; bias stays float here and is quantized to int32 at
    lowering as round(b / (s_in * s_w)), so it always matches the scales actually chosen;
  - pooling, padding, reshape and standalone clamps share their input's qparams (the kernels do
    not requantize);
  - softmax output is fixed at scale 1/256, zero point -128;
  - a conv/linear/add followed by its only user ReLU/ReLU6/hardtanh/clamp is one quantized unit,
    so the activation becomes clamp bounds of the producer.
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import MinMaxObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import (
    FixedQParamsQuantizationSpec,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
)

from edgec.torch_ops import ACTIVATIONS, ADDS, CONVS, LINEARS, SHARED_QPARAMS, SOFTMAXES

ANNOTATION_KEY = "quantization_annotation"

ACTIVATION_QSPEC = QuantizationSpec(
    dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
    observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-20),
)
CONV_WEIGHT_QSPEC = QuantizationSpec(
    dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric, ch_axis=0,
    observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-20),
)
LINEAR_WEIGHT_QSPEC = QuantizationSpec(
    dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_tensor_symmetric,
    observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-20),
)
SOFTMAX_OUTPUT_QSPEC = FixedQParamsQuantizationSpec(
    dtype=torch.int8, scale=1.0 / 256.0, zero_point=-128, quant_min=-128, quant_max=127,
    qscheme=torch.per_tensor_affine,
)


def _annotate(node: Node, inputs: dict, output) -> None:
    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map=inputs, output_qspec=output, _annotated=True)


def _fused_activation(node: Node) -> Node | None:
    """The clamp-like op that is `node`'s only user, which then owns the quantized output."""
    users = list(node.users)
    if len(users) == 1 and users[0].op == "call_function" and users[0].target in ACTIVATIONS:
        return users[0]
    return None


def _annotate_with_output(node: Node, inputs: dict) -> None:
    activation = _fused_activation(node)
    if activation is None:
        _annotate(node, inputs, ACTIVATION_QSPEC)
        return
    _annotate(node, inputs, None)
    _annotate(activation, {}, ACTIVATION_QSPEC)


class EdgecQuantizer(Quantizer):
    """Annotates a float training-IR graph with the qspecs edgec's kernels need."""

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or ANNOTATION_KEY in node.meta:
                continue
            if node.target in CONVS or node.target in LINEARS:
                weight_qspec = CONV_WEIGHT_QSPEC if node.target in CONVS else LINEAR_WEIGHT_QSPEC
                _annotate_with_output(node, {node.args[0]: ACTIVATION_QSPEC, node.args[1]: weight_qspec})
            elif node.target in ADDS:
                inputs = {arg: ACTIVATION_QSPEC for arg in node.args[:2] if isinstance(arg, Node)}
                _annotate_with_output(node, inputs)
            elif node.target in SOFTMAXES:
                _annotate(node, {node.args[0]: ACTIVATION_QSPEC}, SOFTMAX_OUTPUT_QSPEC)
            elif node.target in SHARED_QPARAMS or node.target in ACTIVATIONS:
                source = node.args[0]
                _annotate(node, {source: ACTIVATION_QSPEC}, SharedQuantizationSpec((source, node)))
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
    with torch.no_grad():
        for sample in (progress(calibration) if progress else calibration):
            prepared(*sample)
    return convert_pt2e(prepared, fold_quantize=True)

"""The quantization specs edgec's kernels execute, and the helpers op units annotate nodes with.

Each op unit's `annotate(node)` says how its torch node is quantized (numerics: docs/numerics.md):
  - activations: int8 asymmetric per tensor, min/max observed;
  - conv / depthwise weights: int8 symmetric per output channel, range [-127, 127];
  - linear weights: int8 symmetric per tensor (the FC kernel's cheapest output stage), or per
    output channel with --per-channel-linear;
  - bias stays float here and is quantized to int32 at lowering as round(b / (s_in * s_w)), so it
    always matches the scales actually chosen;
  - an op whose kernel does not requantize shares its input's qparams (`annotate_shared`);
  - an op followed by its only user ReLU/ReLU6/hardtanh/clamp (and that by its only user clamp,
    ...) is one quantized unit with them (`annotate_with_output`), so the activations become
    clamp bounds of the producer, with the qparams observed after the last of them.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import Node
from torchao.quantization.pt2e import MinMaxObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import (
    FixedQParamsQuantizationSpec,
    QuantizationAnnotation,
    QuantizationSpec,
    SharedQuantizationSpec,
)

from edgec.frontend.torch_ops import ACTIVATIONS

ANNOTATION_KEY = "quantization_annotation"

ACTIVATION_QSPEC = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-128,
    quant_max=127,
    qscheme=torch.per_tensor_affine,
    observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-20),
)
CONV_WEIGHT_QSPEC = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-127,
    quant_max=127,
    qscheme=torch.per_channel_symmetric,
    ch_axis=0,
    observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-20),
)
LINEAR_WEIGHT_QSPEC = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-127,
    quant_max=127,
    qscheme=torch.per_tensor_symmetric,
    observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-20),
)

PER_CHANNEL_LINEAR_WEIGHT_QSPEC = QuantizationSpec(  # --per-channel-linear
    dtype=torch.int8,
    quant_min=-127,
    quant_max=127,
    qscheme=torch.per_channel_symmetric,
    ch_axis=0,
    observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-20),
)

# --weights int4 / --int4-layers (edgec.ops.int4): symmetric per output channel in [-7, 7], as
# TFLite's int4 weights; stored int8 by PT2E, packed two per byte at emit.
INT4_WEIGHT_QSPEC = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-7,
    quant_max=7,
    qscheme=torch.per_channel_symmetric,
    ch_axis=0,
    observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-20),
)


def fixed_qspec(scale: float, zero_point: int) -> FixedQParamsQuantizationSpec:
    """An int8 output whose qparams do not depend on data (softmax, sigmoid, tanh)."""
    return FixedQParamsQuantizationSpec(
        dtype=torch.int8,
        scale=scale,
        zero_point=zero_point,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine,
    )


def annotate(node: Node, inputs: dict, output) -> None:
    """`node`'s quantization; a bool (a mask: a view of a bool model input) is never quantized."""
    inputs = {arg: qspec for arg, qspec in inputs.items() if not _is_bool(arg)}
    output = None if _is_bool(node) else output
    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=inputs, output_qspec=output, _annotated=True)


def _is_bool(node) -> bool:
    value = node.meta.get("val") if isinstance(node, Node) else None
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool


def activation_inputs(node: Node, count: int | None = None) -> dict:
    """Every tensor argument among the first `count` (all by default), observed as an activation."""
    args = node.args if count is None else node.args[:count]
    return {arg: ACTIVATION_QSPEC for arg in args if isinstance(arg, Node)}


def fused_activations(node: Node) -> list[Node]:
    """The clamp-like ops that follow `node`, each the only user of the one before: they all fuse
    into `node`, and the last of them owns the quantized output (its observer sees the range the
    whole chain keeps; the first one's could be far wider than a later clamp keeps)."""
    chain = []
    while len(node.users) == 1:
        (user,) = node.users
        if user.op != "call_function" or user.target not in ACTIVATIONS:
            break
        chain.append(user)
        node = user
    return chain


def annotate_with_output(node: Node, inputs: dict) -> None:
    """`node` quantizes its output itself (its kernel requantizes), or leaves that to the chain
    of clamps that follows it, which its kernel's output stage then applies."""
    activations = fused_activations(node)
    if not activations:
        annotate(node, inputs, ACTIVATION_QSPEC)
        return
    annotate(node, inputs, None)
    for unquantized in activations[:-1]:
        annotate(unquantized, {}, None)
    annotate(activations[-1], {}, ACTIVATION_QSPEC)


def annotate_shared(node: Node) -> None:
    """`node`'s output keeps its first input's qparams (a kernel that moves or compares values)."""
    source = node.args[0]
    annotate(node, {source: ACTIVATION_QSPEC}, SharedQuantizationSpec((source, node)))


# ---- int16 activations (the 16x8 scheme, edgec.ops.int16) -----------------------------------------

INT16_ACTIVATION_QSPEC = QuantizationSpec(
    dtype=torch.int16,
    quant_min=-32767,
    quant_max=32767,
    qscheme=torch.per_tensor_symmetric,
    observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-20),
)


def as_int16(qspec):
    """The int16 form of an int8 activation qspec: the observed one symmetric, a fixed one (softmax
    1/256 zp -128, sigmoid, tanh) at TFLite's int16 fixed qparams (scale 1/32768, zero point 0);
    a shared spec or None as it is."""
    if qspec is ACTIVATION_QSPEC:
        return INT16_ACTIVATION_QSPEC
    if isinstance(qspec, FixedQParamsQuantizationSpec) and qspec.dtype == torch.int8:
        return FixedQParamsQuantizationSpec(
            dtype=torch.int16,
            scale=1.0 / 32768,
            zero_point=0,
            quant_min=-32768,
            quant_max=32767,
            qscheme=torch.per_tensor_affine,
        )
    return qspec


def select_int16(node: Node) -> None:
    """Make `node`'s activation qspecs (inputs and output, and the output of the clamp chain fused
    into it) int16; weights keep their int8 specs. PT2E inserts a requantize where an int8 producer
    meets an int16 consumer, or the reverse."""
    items = [user for user in node.users if user.target is operator.getitem]  # a tuple result's (LSTM's h)
    for owner in (node, *fused_activations(node), *items):
        annotation = owner.meta.get(ANNOTATION_KEY)
        if annotation is None:
            continue
        annotation.input_qspec_map = {
            arg: _fixed_output(arg) or as_int16(spec) for arg, spec in annotation.input_qspec_map.items()
        }
        annotation.output_qspec = as_int16(annotation.output_qspec)


def _fixed_output(arg: Node):
    """The int16 fixed qspec of `arg`'s output (a sigmoid, tanh or softmax made int16), which its
    int16 consumers read as it is: PT2E shares equal specs, where an observed int16 input would
    need an int16 -> int16 requantize."""
    annotation = arg.meta.get(ANNOTATION_KEY)
    spec = annotation.output_qspec if annotation is not None else None
    while isinstance(spec, SharedQuantizationSpec):  # a view of it: the spec it shares
        shared = spec.edge_or_node
        if isinstance(shared, Node):
            spec = shared.meta[ANNOTATION_KEY].output_qspec
        else:
            spec = shared[1].meta[ANNOTATION_KEY].input_qspec_map[shared[0]]
    return spec if isinstance(spec, FixedQParamsQuantizationSpec) and spec.dtype == torch.int16 else None

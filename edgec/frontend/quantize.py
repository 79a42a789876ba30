"""Quantize a float exported program with torchao's PT2E flow and edgec's own Quantizer, which asks
each op unit how its node is quantized (OpDef.annotate; the specs are in edgec.ops.qspec).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

import torch
from torch.fx import GraphModule, Interpreter, Node
from torchao.quantization.pt2e import (
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
)
from torchao.quantization.pt2e.fake_quantize import FusedMovingAvgObsFakeQuantize
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e
from torchao.quantization.pt2e.quantizer import FixedQParamsQuantizationSpec, Quantizer

from edgec.errors import EdgecError
from edgec.frontend import calibration as calibration_methods
from edgec.frontend.export import module_paths, node_location
from edgec.frontend.weight_rounding import INT4_SCALES_KEY
from edgec.ops import OPS
from edgec.ops.base import OpDef
from edgec.ops.conv_transpose import int4_transposed_qspec
from edgec.ops.int16_units import INT16_CAPABLE_KINDS
from edgec.ops.qspec import (
    ACTIVATION_QSPEC,
    ANNOTATION_KEY,
    CONV_WEIGHT_QSPEC,
    INT4_WEIGHT_QSPEC,
    INT16_ACTIVATION_QSPEC,
    LINEAR_WEIGHT_QSPEC,
    PER_CHANNEL_LINEAR_WEIGHT_QSPEC,
    fused_activations,
    select_int16,
)
from edgec.ops.recurrent import INT4_KEY as RECURRENT_INT4_KEY

ACTIVATION_DTYPES = ("int8", "int16")
WEIGHT_DTYPES = ("int8", "int4")
# The units with int4-weight kernels (edgec.ops.int4): linear, convolution and depthwise, transposed
# convolution, and the recurrent layers (whose weights the unit quantizes itself: RECURRENT_INT4_KEY).
INT4_CAPABLE_KINDS = frozenset({"fully_connected", "conv2d", "conv_transpose2d", "recurrent"})


def _fuses(node) -> bool:
    """Whether `node` leaves its output's quantization to the clamps that follow it
    (qspec.annotate_with_output): they then run as its output stage."""
    annotation = node.meta.get(ANNOTATION_KEY)
    return annotation is not None and annotation.output_qspec is None


class EdgecQuantizer(Quantizer):
    """Annotates a float training-IR graph with the qspecs edgec's kernels need.

    `calibration`: how activation ranges are chosen (edgec.frontend.calibration; minmax by default);
    `per_channel_linear`: linear weights per output channel (one multiplier and shift per output,
    8 more bytes of flash each) instead of per tensor; `activations="int16"`: int16 activations
    (the 16x8 scheme) for the whole model, `int16_layers`: for the layers whose nn.Module path is
    listed (a path selects its submodules too); `weights="int4"`: int4 weights (symmetric per
    output channel, edgec.ops.int4) for every linear and convolution layer, `int4_layers`: for the
    listed paths' layers."""

    def __init__(
        self,
        calibration: str = calibration_methods.DEFAULT,
        per_channel_linear: bool = False,
        qat: bool = False,
        *,
        activations: str = "int8",
        int16_layers: Iterable[str] = (),
        weights: str = "int8",
        int4_layers: Iterable[str] = (),
    ):
        super().__init__()
        if activations not in ACTIVATION_DTYPES:
            raise EdgecError(f"activations must be one of {', '.join(ACTIVATION_DTYPES)}, got {activations!r}")
        if weights not in WEIGHT_DTYPES:
            raise EdgecError(f"weights must be one of {', '.join(WEIGHT_DTYPES)}, got {weights!r}")
        self.all_int16 = activations == "int16"
        self.int16_layers = tuple(name.strip() for name in int16_layers if name.strip())
        self.all_int4 = weights == "int4"
        self.int4_layers = tuple(name.strip() for name in int4_layers if name.strip())
        self.qat = qat
        self.replacements = {}
        if calibration != calibration_methods.DEFAULT:
            for spec in (ACTIVATION_QSPEC, INT16_ACTIVATION_QSPEC):
                self.replacements[id(spec)] = dataclasses.replace(
                    spec, observer_or_fake_quant_ctr=calibration_methods.observer(calibration)
                )
        if per_channel_linear:
            self.replacements[id(LINEAR_WEIGHT_QSPEC)] = PER_CHANNEL_LINEAR_WEIGHT_QSPEC
        if qat:  # the same int8 grids, fake-quantized in training (moving-average ranges)
            for spec in (ACTIVATION_QSPEC, CONV_WEIGHT_QSPEC, LINEAR_WEIGHT_QSPEC, PER_CHANNEL_LINEAR_WEIGHT_QSPEC):
                current = self.replacements.get(id(spec), spec)
                observer = (
                    MovingAveragePerChannelMinMaxObserver
                    if current.qscheme == torch.per_channel_symmetric
                    else MovingAverageMinMaxObserver
                )
                self.replacements[id(spec)] = dataclasses.replace(
                    current,
                    observer_or_fake_quant_ctr=FusedMovingAvgObsFakeQuantize.with_args(
                        observer=observer, eps=calibration_methods.EPS
                    ),
                )

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op == "call_function" and ANNOTATION_KEY not in node.meta and node.target in OPS:
                OPS[node.target].annotate(node)
        if self.all_int16 or self.int16_layers:
            self._select_int16(model)
        if self.replacements:  # after all: a unit also annotates the activations it fuses
            for node in model.graph.nodes:
                self._replace_specs(node.meta.get(ANNOTATION_KEY))
        if self.all_int4 or self.int4_layers:
            for node in int4_weight_nodes(model, self.all_int4, self.int4_layers):
                if OPS[node.target].kind == "recurrent":
                    node.meta[RECURRENT_INT4_KEY] = True  # the unit quantizes them itself
                else:
                    node.meta[ANNOTATION_KEY].input_qspec_map[node.args[1]] = int4_weight_qspec(node, self.qat)
        return model

    def _replace_specs(self, annotation) -> None:
        if annotation is None:
            return
        for edge, spec in annotation.input_qspec_map.items():
            annotation.input_qspec_map[edge] = self.replacements.get(id(spec), spec)
        annotation.output_qspec = self.replacements.get(id(annotation.output_qspec), annotation.output_qspec)

    def _select_int16(self, model: GraphModule) -> None:
        """int16 qspecs on the selected nodes; a clamp chain fused into its producer follows it (so
        naming its module, e.g. the nn.ReLU after a selected nn.Linear, selects nothing more)."""
        producers = {chained: node for node in model.graph.nodes if _fuses(node) for chained in fused_activations(node)}
        unused = set(self.int16_layers)
        refused, selected = [], set()
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in OPS:  # getitems follow their op
                continue
            if node in producers:
                if producers[node] in selected:
                    unused -= self._matches(node)
                continue
            matched = self._matches(node)
            unused -= matched
            if not (self.all_int16 or matched):
                continue
            if OPS[node.target].kind not in INT16_CAPABLE_KINDS:
                refused.append(f"  {node.target}: {node_location(node)}")
                continue
            problem = OPS[node.target].int16_problem(node)
            if problem is not None:
                refused.append(f"  {node.target}, {problem}: {node_location(node)}")
                continue
            select_int16(node)
            selected.add(node)
        if unused:
            raise EdgecError(f"--int16-layers: no module named {', '.join(sorted(unused))} in the model")
        if refused:
            raise EdgecError(
                "these operators have no int16 kernel; keep these layers int8 (--int16-layers):\n"
                + "\n".join(dict.fromkeys(refused))
            )

    def _matches(self, node) -> set[str]:
        """The int16_layers names whose module (or a submodule of which) traced `node`."""
        return matching_paths(node, self.int16_layers)

    def validate(self, model: GraphModule) -> None:
        pass


def matching_paths(node, names: Iterable[str]) -> set[str]:
    """The `names` whose module (or a submodule of which) traced `node`."""
    paths = module_paths(node)
    return {name for name in names if any(path == name or path.startswith(name + ".") for path in paths)}


def int4_capable(node) -> bool:
    """A node of the normalised graph whose unit has int4 kernels (linear, convolution, transposed
    convolution, LSTM / GRU)."""
    return node.op == "call_function" and node.target in OPS and OPS[node.target].kind in INT4_CAPABLE_KINDS


def int4_weight_nodes(model: GraphModule, every: bool, names: Iterable[str]) -> list:
    """The linear / convolution nodes whose weights are int4: all of them (`every`, --weights
    int4), else those traced in the listed module paths (--int4-layers; a path naming no module,
    or only layers without an int4 kernel, is an error)."""
    names = tuple(names)
    chosen, used, capable = [], set(), set()
    for node in model.graph.nodes:
        if node.op != "call_function" or node.target not in OPS:
            continue
        matched = matching_paths(node, names)
        used |= matched
        if int4_capable(node):
            capable |= matched
            if every or matched:
                chosen.append(node)
    if set(names) - used:
        raise EdgecError(f"--int4-layers: no module named {', '.join(sorted(set(names) - used))} in the model")
    if used - capable:
        raise EdgecError(
            f"--int4-layers: {', '.join(sorted(used - capable))} has no linear, convolution or recurrent layer "
            f"(int4 weights are for nn.Linear, Conv1d/Conv2d, depthwise and transposed convolutions, LSTM and GRU)"
        )
    return chosen


class _FixedScalesObserver(PerChannelMinMaxObserver):
    """Per-channel symmetric weight observer whose scales were chosen beforehand (the int4
    rounding of edgec.frontend.weight_rounding, whose on-grid weights then quantize to the chosen integers)."""

    def __init__(self, *args, scales=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fixed_scales = tuple(scales)

    def calculate_qparams(self):
        scales = torch.tensor(self.fixed_scales, dtype=torch.float32)
        return scales, torch.zeros(len(self.fixed_scales), dtype=torch.int64)


def int4_weight_qspec(node, qat: bool = False):
    """INT4_WEIGHT_QSPEC, at the scales edgec.frontend.weight_rounding chose for `node` if it did; for QAT
    fake-quantized on the int4 grid (moving-average per-channel ranges). A transposed convolution's
    output channels are its weight's axis 1; a grouped one's weight has one scale (as its int8 one)."""
    base = INT4_WEIGHT_QSPEC
    if OPS[node.target].kind == "conv_transpose2d":
        base = int4_transposed_qspec(node)
    if qat:
        per_channel = base.qscheme == torch.per_channel_symmetric
        return dataclasses.replace(
            base,
            observer_or_fake_quant_ctr=FusedMovingAvgObsFakeQuantize.with_args(
                observer=MovingAveragePerChannelMinMaxObserver if per_channel else MovingAverageMinMaxObserver,
                eps=calibration_methods.EPS,
            ),
        )
    scales = node.meta.get(INT4_SCALES_KEY)
    if scales is None:
        return base
    return dataclasses.replace(
        INT4_WEIGHT_QSPEC,
        observer_or_fake_quant_ctr=_FixedScalesObserver.with_args(eps=2**-20, scales=tuple(float(v) for v in scales)),
    )


def is_quantized(module: GraphModule) -> bool:
    """True when the graph already carries Q/DQ nodes (a user's PT2E or QAT result)."""
    return any(node.op == "call_function" and "quantize_per_" in str(node.target) for node in module.graph.nodes)


def quantize(
    module: GraphModule,
    calibration: Iterable[tuple],
    progress: Callable | None = None,
    quantizer: Quantizer | None = None,
) -> GraphModule:
    """prepare_pt2e -> run calibration samples -> convert_pt2e; returns the Q/DQ graph module."""
    prepared = prepare_pt2e(module, quantizer or EdgecQuantizer())
    run = _ObservingInterpreter(prepared).run if _observing_nodes(prepared) else prepared
    with torch.no_grad():
        for sample in progress(calibration) if progress else calibration:
            run(*sample)
    _require_finite_ranges(prepared)
    return convert_pt2e(prepared, fold_quantize=True)


def _require_finite_ranges(prepared: GraphModule) -> None:
    """One line naming the first node (in graph order: where it arose) whose calibration values
    were not finite, e.g. the log of a negative or zero value on unsuitable calibration data,
    instead of the observer's assertion inside convert_pt2e. An observer no sample reached keeps
    min +inf > max -inf and is left alone."""
    for node in prepared.graph.nodes:
        observer = getattr(prepared, node.target, None) if node.op == "call_module" else None
        low, high = getattr(observer, "min_val", None), getattr(observer, "max_val", None)
        if not isinstance(low, torch.Tensor) or not isinstance(high, torch.Tensor) or low.numel() == 0:
            continue
        if bool(
            torch.isnan(low).any() | torch.isnan(high).any() | (low == -torch.inf).any() | (high == torch.inf).any()
        ):
            source = node.args[0]
            raise EdgecError(
                f"{node_location(source)}: {source.target} gives non-finite values (nan or inf) on the "
                "calibration data; calibrate with inputs the float model computes finitely (--calib), "
                "e.g. a log's input above 0"
            )


def _observing_nodes(module: GraphModule) -> set:
    """The nodes whose unit has a calibration hook (OpDef.observe)."""
    return {
        node
        for node in module.graph.nodes
        if node.op == "call_function" and node.target in OPS and type(OPS[node.target]).observe is not OpDef.observe
    }


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


def prepare_qat(
    spec: str, per_channel_linear: bool = False, weights: str = "int8", int4_layers: Iterable[str] = ()
) -> tuple[GraphModule, tuple]:
    """(module, example inputs): the float model `spec` (.pt2 or file.py:factory) ready for
    quantization-aware training with edgec's quantizer: exported, BatchNorm folded into its
    conv/linear (the folded weights made trainable parameters), fake-quantized wherever edgec's
    kernels quantize (`weights="int4"` / `int4_layers`: int4 weights, fake-quantized in [-7, 7]).
    Fine-tune it like any module, then `convert_qat` and give the saved program to `edgec build`
    (docs/quantization.md; int4: docs/int4.md)."""
    from edgec.frontend import export
    from edgec.passes.fold_batchnorm import fold_batchnorm
    from edgec.passes.normalize import normalize

    loaded = export.load(spec)
    module = fold_batchnorm(normalize(loaded.module))
    for name, value in list(module.named_buffers()):
        if "." not in name and value.is_floating_point() and name.startswith("_edgec_folded"):
            del module._buffers[name]
            module.register_parameter(name, torch.nn.Parameter(value.detach().clone()))
    quantizer = EdgecQuantizer(
        per_channel_linear=per_channel_linear, qat=True, weights=weights, int4_layers=int4_layers
    )
    return prepare_qat_pt2e(module, quantizer), loaded.example_inputs


def convert_qat(module: GraphModule, example_inputs: tuple) -> torch.export.ExportedProgram:
    """The fine-tuned fake-quantized module as an int8 Q/DQ program (save it with torch.export.save)."""
    from torchao.quantization.pt2e import move_exported_model_to_eval

    converted = convert_pt2e(move_exported_model_to_eval(module), fold_quantize=True)
    return torch.export.export(converted, tuple(example_inputs))


def float_outputs(module: GraphModule) -> list[str]:
    """The model outputs a quantized program leaves in float (torchao's X86InductorQuantizer and
    ArmInductorQuantizer keep the last linear's output float)."""
    output = next(node for node in module.graph.nodes if node.op == "output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    return [
        value.name
        for value in values
        if isinstance(value, Node) and "dequantize" not in str(value.target) and _is_float(value)
    ]


def quantize_float_activations(
    module: GraphModule, names: list[str], calibration: Iterable[tuple], warn: Callable[[str], None]
) -> None:
    """Each named node of a quantized program, an activation the program leaves in float where
    edgec needs int8 (a model output, a conv's output read by float pooling), gets a quantize /
    dequantize pair after it: edgec's activation scheme (ACTIVATION_QSPEC) over the node's values
    on the calibration data. Every qparam the program set stays as it is."""
    spec = ACTIVATION_QSPEC
    nodes = {node.name: node for node in module.graph.nodes if node.name in names}
    fixed = {name: qparams for name, node in nodes.items() if (qparams := _fixed_output_qparams(node)) is not None}
    observers = {
        name: spec.observer_or_fake_quant_ctr(
            dtype=spec.dtype, quant_min=spec.quant_min, quant_max=spec.quant_max, qscheme=spec.qscheme
        )
        for name in nodes
        if name not in fixed
    }
    recorder = _Recording(module, observers)
    with torch.no_grad():
        for sample in calibration if observers else ():
            recorder.run(*sample)
    for name, node in nodes.items():
        scale, zero_point = fixed.get(name) or (float(v) for v in observers[name].calculate_qparams())
        args = (float(scale), int(zero_point), spec.quant_min, spec.quant_max, spec.dtype)
        users = list(node.users)
        with module.graph.inserting_after(node):
            quantized = module.graph.call_function(
                torch.ops.quantized_decomposed.quantize_per_tensor.default, (node, *args)
            )
        with module.graph.inserting_after(quantized):
            dequantized = module.graph.call_function(
                torch.ops.quantized_decomposed.dequantize_per_tensor.default, (quantized, *args)
            )
        dequantized.meta["val"] = node.meta.get("val")
        for user in users:
            user.replace_input_with(node, dequantized)
        warn(
            f"WARNING: the program leaves {name} ({node_location(node)}) in float; edgec quantizes it to "
            f"int8 from the calibration data (scale {scale:.6g}, zero point {int(zero_point)})"
        )
    module.recompile()


def _fixed_output_qparams(node: Node) -> tuple[float, int] | None:
    """The (scale, zero point) edgec's unit fixes for `node`'s output (softmax, sigmoid, tanh),
    read from the annotation the unit gives it, or None."""
    unit = OPS.get(node.target)
    if unit is None:
        return None
    kept = {other: other.meta.pop(ANNOTATION_KEY, None) for other in node.graph.nodes}
    try:
        unit.annotate(node)  # some units annotate the activations after them too
        output = node.meta[ANNOTATION_KEY].output_qspec
    finally:
        for other, annotation in kept.items():
            other.meta.pop(ANNOTATION_KEY, None)
            if annotation is not None:
                other.meta[ANNOTATION_KEY] = annotation
    if not isinstance(output, FixedQParamsQuantizationSpec):
        return None
    return output.scale, output.zero_point


class _Recording(Interpreter):
    """Runs the program, feeding the observers the values of their nodes."""

    def __init__(self, module: GraphModule, observers: dict):
        super().__init__(module)
        self.observers = observers

    def run_node(self, node):
        result = super().run_node(node)
        if node.name in self.observers:
            self.observers[node.name](result.detach())
        return result


def _is_float(node: Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.dtype.is_floating_point

"""Lower a quantized (Q/DQ) FX graph into edgec's IR.

In a PT2E graph every activation travels as quantize -> dequantize around float ops. Lowering
walks the nodes in order and keeps one map from FX nodes to what they mean in the IR:
  - an activation Tensor (quantize/dequantize nodes of it map to the same Tensor, and the first
    quantize after a float op gives that op's output its qparams);
  - a constant (numpy array, with scales when it is a quantized weight).
Each compute node is lowered by the op unit registered for its target.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torch.fx import GraphModule, Node

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import GETITEM, VIEWS, module_attribute
from edgec.ir import Graph, Op, Tensor
from edgec.ops import KINDS, OPS

ACTIVATION_DTYPES = {np.dtype(np.int8): "int8", np.dtype(np.int16): "int16"}  # the activation dtypes edgec runs
QUANTIZE = {"quantize_per_tensor", "quantize_per_channel"}
DEQUANTIZE = {"dequantize_per_tensor", "dequantize_per_channel"}


@dataclass
class Constant:
    """A compile-time value: float, or integer (int8 weights, int32 biases) with per-channel (or
    per-tensor) scales and zero points: real = scales * (value - zero_points) along `axis`."""

    value: np.ndarray
    scales: np.ndarray | None = None
    zero_points: np.ndarray | None = None
    axis: int = 0
    quant_range: tuple[int, int] | None = None  # its dequantize's [quant_min, quant_max]: int4 weights

    @property
    def quantized(self) -> bool:
        return self.scales is not None


@dataclass(frozen=True)
class QuantizeArgs:
    """The parameters of a quantized_decomposed quantize/dequantize node."""

    scale: np.ndarray  # float64, one entry (per tensor) or one per channel
    zero_point: np.ndarray  # int64, likewise
    axis: int | None  # the channel axis of a per-channel node
    quant_min: int
    quant_max: int
    dtype: np.dtype
    from_uint8: bool = False  # the program's uint8 parameters, read as int8 (uint8_as_int8)

    def broadcast(self, array: np.ndarray, values: np.ndarray) -> np.ndarray:
        """`values` shaped to broadcast against `array` along the channel axis."""
        if self.axis is None or array.ndim == 0:
            return values.reshape(()) if values.size == 1 else values
        shape = [1] * array.ndim
        shape[self.axis] = -1
        return values.reshape(shape)


def _qop_name(node: Node) -> str | None:
    if node.op != "call_function" or "quantized_decomposed" not in str(node.target):
        return None
    return node.target._overloadpacket.__name__


class LoweringContext:
    def __init__(self, module: GraphModule, converter_semantics: bool = False, tflite_compatible: bool = False):
        self.module = module
        # --tflite-compatible: where TFLite Micro departs from the program (its TANH writes 1/128
        # steps whatever the output's declared qparams), compute its bytes instead.
        self.tflite_compatible = tflite_compatible
        # A program quantized by another tool: ops whose int8 arithmetic the TFLite converter
        # chooses differently from edgec's own (a global average is MEAN) follow the converter.
        self.converter_semantics = converter_semantics
        self.graph = Graph()
        self.values: dict[str, Tensor | Constant] = {}

    # -- what op units call --------------------------------------------------------------
    def tensor(self, node: Node) -> Tensor:
        value = self.values.get(node.name) if isinstance(node, Node) else None
        if not isinstance(value, Tensor):
            raise EdgecError(
                f"{source_line(node) if isinstance(node, Node) else node}: expected a quantized activation here"
            )
        return value

    def is_tensor(self, node) -> bool:
        """Whether `node` is an activation (not a constant or a Python scalar)."""
        return isinstance(node, Node) and isinstance(self.values.get(node.name), Tensor)

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
            tensor.scale, tensor.zero_point, tensor.dtype = qparams_of.scale, qparams_of.zero_point, qparams_of.dtype
        self.values[node.name] = tensor
        return tensor

    def add_op(self, kind: str, node: Node, inputs: list[Tensor], outputs: list[Tensor], **attrs) -> Op:
        op = Op(
            f"{kind}_{len(self.graph.ops)}",
            kind,
            [t.name for t in inputs],
            [t.name for t in outputs],
            attrs,
            source_line(node),
        )
        self.graph.ops.append(op)
        return op

    def quantized_as(self, node: Node) -> tuple[float, int, str] | None:
        """(scale, zero point, dtype) of the per-tensor activation quantize that reads `node`, or None."""
        for user in node.users:
            if _qop_name(user) == "quantize_per_tensor":
                args = self._quantize_args(user)
                dtype = ACTIVATION_DTYPES.get(args.dtype)
                if dtype is not None:
                    return float(args.scale[0]), int(args.zero_point[0]), dtype
        return None

    def quantized_through_views(self, node: Node) -> bool:
        """Whether the program quantizes `node`'s value, directly or after views only (`mean ->
        flatten -> Q`), each its one reader: that quantize is then the value's only rounding."""
        while len(node.users) == 1 and next(iter(node.users)).target in VIEWS:
            node = next(iter(node.users))
        return self.quantized_as(node) is not None

    def requantize_input(self, node: Node, arg: Node, scale: float, zero_point: int, dtype: str) -> Tensor:
        """`arg`'s tensor at other qparams, for `node` alone (a cat reading each input at its
        output's qparams); its float reference is `arg`'s value, the one the program holds."""
        source = self.tensor(arg)
        out = self.graph.add_tensor(
            Tensor(f"{arg.name}_as_{node.name}", source.shape, scale, zero_point, source=arg.name, dtype=dtype)
        )
        self.add_op("lut", node, [source], [out], function="requantize", function_attrs={})
        return out

    def alias(self, node: Node, value) -> None:
        self.values[node.name] = value

    def float_constant(self, node: Node, value: np.ndarray) -> None:
        """`node` stands for the compile-time float value `value` (e.g. a recurrent layer's zero state)."""
        self.alias(node, Constant(value))

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
            if is_token_input(node):  # ids (nn.Embedding): int32 on the device, the values themselves
                tensor.scale, tensor.zero_point, tensor.dtype = 1.0, 0, "int32"
            elif is_flag_input(node):  # a bool mask (key_padding_mask): one byte, 0 or 1, per element
                tensor.scale, tensor.zero_point = 1.0, 0
            else:
                self._widest_input_quantize(node, tensor)
        elif node.op == "get_attr":
            self.values[node.name] = Constant(_attr_value(self.module, node.target))
        elif node.op == "call_module":
            return  # torch.export's input guards (_guards_fn): nothing to run on the device
        elif node.op == "output":
            outputs = node.args[0] if isinstance(node.args[0], (tuple, list)) else [node.args[0]]
            names = [self.tensor(arg).name for arg in outputs]
            if len(set(names)) != len(names) or set(names) & set(self.graph.inputs):
                raise EdgecError(
                    "the model returns the same tensor twice, or returns an input unchanged; return each output once"
                )
            self.graph.outputs = names
        elif _qop_name(node) in QUANTIZE:
            self._quantize(node)
        elif _qop_name(node) in DEQUANTIZE:
            self._dequantize(node)
        elif node.target == GETITEM:
            source = self.values[node.args[0].name]
            if hasattr(source, "lower_item"):  # split, chunk, unbind: each item is its own copy
                source.lower_item(self, node, node.args[1])
            elif node.args[1] == 0:  # max_pool2d_with_indices[0]
                self.values[node.name] = source
            else:
                raise EdgecError(f"{source_line(node)}: item {node.args[1]} of {node.args[0].target} is not supported")
        else:
            OPS[node.target].lower(self, node)

    def _widest_input_quantize(self, node: Node, tensor: Tensor) -> None:
        """A model input that int8 and int16 layers both read, each quantizing the float input
        itself, is int16: the int8 readers get it requantized, where the other way round the
        int16 layers would read int8 precision."""
        for user in node.users:
            if _qop_name(user) == "quantize_per_tensor":
                args = self._quantize_args(user)
                if ACTIVATION_DTYPES.get(args.dtype) == "int16" and int(args.zero_point[0]) == 0:
                    tensor.scale, tensor.zero_point, tensor.dtype = float(args.scale[0]), 0, "int16"
                    return

    def _quantize_args(self, node: Node) -> QuantizeArgs:
        per_channel = _qop_name(node).endswith("per_channel")
        names = ("scales", "zero_points", "axis") if per_channel else ("scale", "zero_point")
        values = [_node_arg(node, 1 + i, name) for i, name in enumerate(names)]
        rest = [_node_arg(node, 1 + len(names) + i, name) for i, name in enumerate(("quant_min", "quant_max", "dtype"))]
        scale, zero_point = (
            np.atleast_1d(np.asarray(self._scalar_or_array(v), dtype=t)).ravel()
            for v, t in zip(values, (np.float64, np.int64))
        )
        dtype = {torch.int8: np.int8, torch.uint8: np.uint8, torch.int16: np.int16, torch.int32: np.int32}.get(rest[2])
        if dtype is None or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise EdgecError(
                f"{source_line(node)}: {node.name}: unsupported quantization "
                f"(dtype {rest[2]}, scale {scale.tolist()[:4]})"
            )
        args = QuantizeArgs(
            scale, zero_point, int(values[2]) if per_channel else None, int(rest[0]), int(rest[1]), np.dtype(dtype)
        )
        return uint8_as_int8(args) if args.dtype == np.uint8 else args

    def _scalar_or_array(self, arg):
        if isinstance(arg, Node):
            value = self.values.get(arg.name)
            if not isinstance(value, Constant):
                raise EdgecError(f"{source_line(arg)}: quantization parameters must be constants ({arg.name})")
            return value.value
        return arg

    def _quantize(self, node: Node) -> None:
        source = self.values[node.args[0].name]
        args = self._quantize_args(node)
        if isinstance(source, Constant):  # weights when convert_pt2e did not fold them
            self.values[node.name] = Constant(quantize_constant(source, args, node), None)
            return
        dtype = ACTIVATION_DTYPES.get(args.dtype)
        if args.axis is not None or dtype is None or (dtype == "int16" and int(args.zero_point[0]) != 0):
            raise EdgecError(
                f"{source_line(node)}: activations must be quantized per tensor to int8, or to "
                f"symmetric int16 ({node.name}: {args.dtype}, zero point {int(args.zero_point[0])}"
                f"{', per channel' if args.axis is not None else ''})"
            )
        scale, zero_point = float(args.scale[0]), int(args.zero_point[0])
        if not source.quantized:
            self._quantize_backwards(source, scale, zero_point, dtype)
        elif (source.scale, source.zero_point, source.dtype) != (scale, zero_point, dtype):
            source = self.requantize(node, source, scale, zero_point, dtype)
            # `Q(a) -> DQ -> Q(b)` with no op between (a dropout or clone vanished): the TFLite
            # converter drops Q(b) (passes/fuse.py: fold_double_requantize).
            self.graph.producer(source.name).attrs["of_dequantize"] = self.is_dequantized(node.args[0])
        self.values[node.name] = source

    @staticmethod
    def is_dequantized(node) -> bool:
        """Whether `node` is a dequantize: a value whose qparams the program itself fixed."""
        return isinstance(node, Node) and _qop_name(node) in DEQUANTIZE

    def _quantize_backwards(self, tensor: Tensor, scale: float, zero_point: int, dtype: str) -> None:
        """`tensor` takes the qparams (and dtype) of the quantize node that first reads it, and so
        does every unquantized input of the ops that keep qparams (padding, pooling, views) it comes
        from, as the TFLite converter propagates a quantize backwards: a program quantized by a tool
        that leaves such ops (or the model input before them) in float reads as one int8 chain."""
        pending = [tensor]
        while pending:
            tensor = pending.pop()
            tensor.scale, tensor.zero_point, tensor.dtype = scale, zero_point, dtype
            producer = self.graph.producer(tensor.name)
            if producer is not None and KINDS[producer.kind].keeps_qparams:
                pending += [
                    self.graph.tensors[name] for name in producer.inputs if not self.graph.tensors[name].quantized
                ]

    def requantize(self, node: Node, source: Tensor, scale: float, zero_point: int, dtype: str = "int8") -> Tensor:
        """A new tensor holding `source` at other qparams (TFLite's int8 QUANTIZE, as a table), or in
        the other of int8 and int16 (edgec.ops.int16_units runs those)."""
        # Its float reference is the value the program requantizes: the dequantize feeding `node`.
        out = self.graph.add_tensor(
            Tensor(node.name, source.shape, scale, zero_point, source=node.args[0].name, dtype=dtype)
        )
        self.add_op("lut", node, [source], [out], function="requantize", function_attrs={})
        return out

    def _dequantize(self, node: Node) -> None:
        source = self.values[node.args[0].name]
        if isinstance(source, Tensor):
            self.values[node.name] = source
            return
        args = self._quantize_args(node)
        value = np.asarray(source.value)
        if args.from_uint8 and value.dtype == np.uint8:
            value = (value.astype(np.int16) - 128).astype(np.int8)
        if (
            source.quantized
            or value.dtype != args.dtype
            or value.min(initial=args.quant_min) < args.quant_min
            or value.max(initial=args.quant_max) > args.quant_max
        ):
            raise EdgecError(
                f"{source_line(node)}: {node.name}: constant of dtype {value.dtype} "
                f"does not match its dequantize ({args.dtype}, [{args.quant_min}, {args.quant_max}])"
            )
        self.values[node.name] = Constant(
            value, args.scale, args.zero_point, args.axis or 0, (args.quant_min, args.quant_max)
        )


def uint8_as_int8(args: QuantizeArgs) -> QuantizeArgs:
    """uint8 quantization parameters as the int8 ones of the same real values: every integer and
    zero point minus 128, exactly (torchao's X86InductorQuantizer quantizes activations to uint8)."""
    return replace(
        args,
        zero_point=args.zero_point - 128,
        quant_min=args.quant_min - 128,
        quant_max=args.quant_max - 128,
        dtype=np.dtype(np.int8),
        from_uint8=True,
    )


def quantize_constant(source: Constant, args: QuantizeArgs, node: Node) -> np.ndarray:
    """A float constant quantized as the TFLite converter does it: in float64, rounding half away
    from zero, then clamped to [quant_min, quant_max] in the node's integer dtype."""
    value = np.asarray(source.value)
    if source.quantized or value.dtype.kind != "f":
        raise EdgecError(f"{source_line(node)}: {node.name} quantizes a constant that is not float ({value.dtype})")
    if not np.all(np.isfinite(value)):
        raise EdgecError(f"{source_line(node)}: {node.name} quantizes a constant holding NaN or infinity")
    if args.axis is not None and (value.ndim <= args.axis or value.shape[args.axis] != len(args.scale)):
        raise EdgecError(
            f"{source_line(node)}: {node.name}: {len(args.scale)} scales for axis {args.axis} "
            f"of a constant shaped {list(value.shape)}"
        )
    scaled = value.astype(np.float64) / args.broadcast(value, args.scale)
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + args.broadcast(value, args.zero_point)
    return np.clip(rounded, args.quant_min, args.quant_max).astype(args.dtype)


def is_token_input(node: Node) -> bool:
    """Whether placeholder `node` holds integers (token ids): the model reads it as int32."""
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.dtype in (torch.int32, torch.int64)


def is_flag_input(node: Node) -> bool:
    """Whether placeholder `node` holds bools (a mask): the model reads one int8 0/1 per element."""
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool


def _node_arg(node: Node, index: int, name: str):
    if len(node.args) > index:
        return node.args[index]
    if name in node.kwargs:
        return node.kwargs[name]
    raise EdgecError(f"{source_line(node)}: {node.name} has no '{name}' argument")


def _attr_value(module: GraphModule, target: str) -> np.ndarray:
    value = module_attribute(module, target)
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def lower(module: GraphModule, converter_semantics: bool = False, tflite_compatible: bool = False) -> Graph:
    """`converter_semantics`: the program came quantized by another tool (read as TFLite's
    converter reads it); `tflite_compatible`: TFLite Micro's departures from the program followed."""
    graph = LoweringContext(module, converter_semantics, tflite_compatible).run()
    graph.input_rounding = "divide" if converter_semantics else "multiply"
    if not graph.inputs or not graph.outputs:
        raise EdgecError("the model has no tensor input or no tensor output")
    if all(op.kind == "reshape" for op in graph.ops):
        raise EdgecError(
            "the model computes nothing (its outputs are its inputs, reshaped at most); there is nothing to compile"
        )
    for name in graph.inputs + graph.outputs:
        if not graph.tensors[name].quantized:
            role = "input" if name in graph.inputs else "output"
            hint = "" if role == "input" else ": give edgec calibration data (--calib) to quantize it"
            raise EdgecError(f"model {role} '{name}' is not quantized{hint}")
    return graph

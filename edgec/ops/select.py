"""Comparisons and selection: torch.where(x1 CMP x2, a, b) and masked_fill, one fused int8 op.

C kernel: runtime_c/src/eltwise/edgec_select_s8.c (edgec_select_s8).

A comparison (gt, ge, lt, le, eq, ne) lowers to nothing: its bool result exists only as the
condition of the where / masked_fill that reads it (check refuses any other use), and the
select op reads the comparison's operands itself. out = (x1 CMP x2) ? a : b, every operand
broadcast NumPy's way; exact by construction, never rounded:
  - x2 a live tensor: x1 and x2 share scale and zero point (annotated so), and dequantizing is
    strictly increasing, so comparing the raw int8 values is comparing the program's values;
  - x2 one value (a Python scalar, a one-element constant): the comparison of each of x1's 256
    possible bytes, evaluated as the program evaluates it (float32 (q - zp) * scale CMP
    float32(c)), is a 256-entry 0/1 table the kernel indexes;
  - a and b share the output's qparams (annotated so), so selecting moves bytes; a Python
    scalar a or b is quantized at the output's qparams as the program's own quantize does it.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import COMPARISONS, SCALAR_TENSORS, SELECTS
from edgec.ir import InPlace, KernelChoice, Tensor, same_bytes, to_stored
from edgec.numerics import INT8_MAX, INT8_MIN
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.binary import ConstantOperand, _broadcast_stored
from edgec.ops.eltwise import require_quantized
from edgec.ops.kernel import Const, Field, Struct
from edgec.ops.lut import round_half_away_exact
from edgec.ops.qspec import ACTIVATION_QSPEC, annotate

SELECT_MAX_DIMS = 6  # EDGEC_SELECT_MAX_DIMS
SELECT_DIMS = Const("EDGEC_SELECT_MAX_DIMS", SELECT_MAX_DIMS)
ROLES = ("x1", "x2", "a", "b")  # the operands, in the kernel's argument order

# edgec_select_desc.cmp (enum edgec_select_cmp in edgec_nn.h) and what each computes.
CMP_CODES = {"gt": 0, "ge": 1, "lt": 2, "le": 3, "eq": 4, "ne": 5}
_CMP_FUNCTIONS = {
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
    "eq": operator.eq,
    "ne": operator.ne,
}
_SWAPPED = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge", "eq": "eq", "ne": "ne"}  # c CMP x == x SWAPPED c

SELECT_DESC = Struct(
    "edgec_select_desc",
    (
        Field("cmp", doc="an edgec_select_cmp on the raw int8 x1, x2 (table NULL)"),
        Field("num_dims", doc="1..EDGEC_SELECT_MAX_DIMS"),
        Field("dims", doc="output dims, each >= 1", count=SELECT_DIMS),
        Field("x1_strides", doc="element strides, >= 0", count=SELECT_DIMS),
        Field("x2_strides", doc="unread with a table", count=SELECT_DIMS),
        Field("a_strides", count=SELECT_DIMS),
        Field("b_strides", count=SELECT_DIMS),
        Field("table", ctype="const int8_t *", doc="NULL, or the condition (0/1) of x1 at [x1 + 128]"),
    ),
)
STRUCTS = (SELECT_DESC,)


def select_layout(out_shape, shapes) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """(dims, strides per operand) of reading each of `shapes` broadcast to `out_shape`, with the
    fewest dimensions: edgec.ops.binary.broadcast_layout's rule for any number of operands (that
    one is for two): size-1 output dims dropped, adjacent dims merged where every operand is
    broadcast along both or has both. A single-element output is ((1,), [(1,), ...])."""
    out_shape = tuple(int(d) for d in out_shape)
    rank = len(out_shape)
    if np.broadcast_shapes(out_shape, *shapes) != out_shape:
        raise ValueError(f"operands {[tuple(s) for s in shapes]} do not broadcast to {out_shape}")
    strides = []
    for shape in shapes:
        padded = (1,) * (rank - len(shape)) + tuple(int(d) for d in shape)
        contiguous = [int(np.prod(padded[d + 1 :], dtype=np.int64)) for d in range(rank)]
        strides.append([0 if size == 1 else step for size, step in zip(padded, contiguous)])
    dims, merged = [], [[] for _ in shapes]
    for d in range(rank):
        if out_shape[d] == 1:
            continue
        if dims and all((m[-1] == 0) == (s[d] == 0) for m, s in zip(merged, strides)):
            dims[-1] *= out_shape[d]
            for m, s in zip(merged, strides):
                m[-1] = s[d]  # the inner stride of the run
            continue
        dims.append(out_shape[d])
        for m, s in zip(merged, strides):
            m.append(s[d])
    if not dims:
        return (1,), [(1,)] * len(shapes)
    return tuple(dims), [tuple(m) for m in merged]


def condition_table(cmp: str, threshold: float, scale: float, zero_point: int) -> np.ndarray:
    """int8 [256]: entry q + 128 is 1 where the program's (q - zp) * scale CMP threshold holds, in
    the program's float32 arithmetic (quantized_decomposed.dequantize_per_tensor, then the
    comparison of a float32 tensor with a scalar, which torch makes float32)."""
    values = np.float32(np.arange(INT8_MIN, INT8_MAX + 1) - int(zero_point)) * np.float32(scale)
    return _CMP_FUNCTIONS[cmp](values, np.float32(threshold)).astype(np.int8)


def quantize_scalar(value: float, scale: float, zero_point: int, rounding: str) -> np.int8:
    """A Python scalar where/masked_fill operand at the output's qparams, as the program's quantize
    of the output computes it: float32 value * float32(1 / scale) rounded half to even (PT2E's
    quantize_per_tensor, Graph.input_rounding "multiply"), or for a program read the TFLite
    converter's way ("divide"), value / scale in float64 rounded half away from zero (as it
    quantizes constants); then saturated."""
    if rounding == "multiply":
        q = float(np.rint(np.float32(value) * np.float32(1.0 / scale)))
    else:
        q = float(round_half_away_exact(np.float64(value) / float(scale)))
    return np.int8(np.clip(q + int(zero_point), INT8_MIN, INT8_MAX))


def select_desc(cmp: str, out_shape, shapes: dict, table: np.ndarray | None) -> dict:
    """Fields of the C struct edgec_select_desc (same names, same order): `shapes` the stored shape
    of each operand of ROLES (x2's is ignored with a table), `table` condition_table's or None."""
    dims, strides = select_layout(out_shape, [shapes[role] for role in ROLES])
    if len(dims) > SELECT_MAX_DIMS:
        raise ValueError(f"broadcasting needs {len(dims)} loop levels, more than {SELECT_MAX_DIMS}")
    pad = SELECT_MAX_DIMS - len(dims)
    return {
        "cmp": CMP_CODES[cmp],
        "num_dims": len(dims),
        "dims": dims + (1,) * pad,
        **{f"{role}_strides": s + (0,) * pad for role, s in zip(ROLES, strides)},
        "table": table,
    }


def select_s8(x1, x2, a, b, desc: dict) -> np.ndarray:
    """Golden edgec_select_s8: flat output element i (of prod(dims)) is a's element if the
    condition holds there, else b's; the condition is table[x1 + 128] != 0 with a table, else
    x1 CMP x2 on the raw int8 values; every operand read through desc's strides."""
    dims = desc["dims"][: desc["num_dims"]]
    gathered = {}
    for role, x in zip(ROLES, (x1, x2, a, b)):
        if role == "x2" and desc["table"] is not None:
            continue
        index = np.zeros((), dtype=np.int64)
        for size, stride in zip(dims, desc[f"{role}_strides"]):
            index = index[..., None] + np.arange(size, dtype=np.int64) * stride
        gathered[role] = np.ascontiguousarray(x, dtype=np.int8).reshape(-1)[index.reshape(-1)]
    if desc["table"] is not None:
        condition = np.asarray(desc["table"], dtype=np.int8)[gathered["x1"].astype(np.int64) + 128] != 0
    else:
        cmp = {code: name for name, code in CMP_CODES.items()}[desc["cmp"]]
        condition = _CMP_FUNCTIONS[cmp](gathered["x1"], gathered["x2"])
    return np.where(condition, gathered["a"], gathered["b"]).astype(np.int8)


# -- the op units ---------------------------------------------------------------------------------


def comparison(node: Node) -> tuple[str, object, object]:
    """(cmp, x1, x2) of a comparison node, a constant first operand swapped to the right
    (self.t < x is x > self.t), so that x1 is the tensor the kernel reads."""
    cmp, (x1, x2) = COMPARISONS[node.target], node.args[:2]
    if isinstance(x1, Node) and x1.op == "get_attr" and isinstance(x2, Node) and x2.op != "get_attr":
        return _SWAPPED[cmp], x2, x1
    return cmp, x1, x2


def _select_args(node: Node) -> tuple[Node, object, object]:
    """(condition, a, b): out = condition ? a : b (masked_fill(x, mask, v) is where(mask, v, x))."""
    if SELECTS[node.target] == "masked_fill":
        return node.args[1], node.args[2], node.args[0]
    return node.args[0], node.args[1], node.args[2]


def _shape(arg) -> tuple[int, ...]:
    return tuple(arg.meta["val"].shape) if isinstance(arg, Node) and "val" in arg.meta else ()


def _per_element_threshold(node: Node, elements: int) -> str:
    return (
        f"{node.target} with a constant tensor of {elements} elements (edgec compares with a live tensor or one value)"
    )


@dataclass
class Comparison:
    """What a comparison node lowers to: its operands, for the select op that reads it (x1 a
    Tensor; x2 a Tensor, or the one float value compared with)."""

    cmp: str
    x1: object
    x2: object


class Compare(OpDef):
    """gt, ge, lt, le, eq, ne: the condition of a where or masked_fill (no kernel of its own)."""

    kind = "compare"
    family = "comparison (only as the condition of where / masked_fill)"
    targets = frozenset(COMPARISONS)
    limits = "only as the condition of torch.where or masked_fill; compared with a tensor or one value"

    def annotate(self, node) -> None:
        _, x1, x2 = comparison(node)
        inputs = {x1: ACTIVATION_QSPEC}
        if isinstance(x2, Node) and x2.op != "get_attr" and x2 is not x1:
            inputs[x2] = SharedQuantizationSpec((x1, node))  # raw int8 compares as the values do
        annotate(node, inputs, None)

    def check(self, node) -> str | None:
        for user in node.users:
            if user.op != "call_function" or user.target not in SELECTS or _select_args(user)[0] is not node:
                return (
                    f"{node.target} whose result is used other than as the condition of torch.where or "
                    f"masked_fill (edgec computes no bool tensors)"
                )
        _, x1, x2 = comparison(node)
        if not isinstance(x1, Node):
            return f"{node.target} of two constants (fold it in the model)"
        if isinstance(x2, Node) and x2.op == "get_attr" and math.prod(_shape(x2)) > 1:
            return _per_element_threshold(node, math.prod(_shape(x2)))
        return None

    def lower(self, ctx, node) -> None:
        cmp, x1, x2 = comparison(node)
        if not ctx.is_tensor(x1):
            raise EdgecError(f"{source_line(node)}: {node.target} of two constants (fold it in the model)")
        if ctx.is_tensor(x2):
            ctx.alias(node, Comparison(cmp, ctx.tensor(x1), ctx.tensor(x2)))
            return
        if isinstance(x2, Node):
            constant = ctx.constant(x2)
            value = np.asarray(constant.value, dtype=np.float64)
            if value.size != 1:
                raise EdgecError(f"{source_line(node)}: {_per_element_threshold(node, value.size)}")
            if constant.quantized:  # as the program dequantizes it: in float32
                value = np.float32(value - constant.zero_points) * np.float32(constant.scales)
            x2 = value.reshape(-1)[0]
        ctx.alias(node, Comparison(cmp, ctx.tensor(x1), float(x2)))


class Select(OpDef):
    """torch.where(x1 CMP x2, a, b) and x.masked_fill(x1 CMP x2, v): edgec_select_s8 moves bytes
    of a or b (sharing the output's qparams) by a condition on raw bytes or a 256-entry table."""

    kind, c_function = "select", "edgec_select_s8"
    family = "where / masked_fill on a comparison"
    targets = frozenset(SELECTS)
    runtime_sources = ("eltwise/edgec_select_s8.c",)
    layout_follows_input = True
    limits = (
        "the condition a comparison of a tensor with a tensor or one value; broadcasting within "
        f"{SELECT_MAX_DIMS} loop levels"
    )

    def annotate(self, node) -> None:
        _, a, b = _select_args(node)
        operands = [arg for arg in (a, b) if isinstance(arg, Node) and arg.target not in SCALAR_TENSORS]
        if not operands:
            annotate(node, {}, ACTIVATION_QSPEC)
            return
        first = operands[0]
        inputs = {first: ACTIVATION_QSPEC}
        for other in operands[1:]:
            if other is not first:
                inputs[other] = SharedQuantizationSpec((first, node))  # selection moves bytes: one scale
        annotate(node, inputs, SharedQuantizationSpec((first, node)))

    def check(self, node) -> str | None:
        condition, a, b = _select_args(node)
        if not isinstance(condition, Node) or condition.target not in COMPARISONS:
            return f"{node.target} whose condition is not a comparison (x > y, x < 0.5, ...)"
        _, x1, x2 = comparison(condition)
        shapes = [_shape(arg) for arg in (x1, x2, a, b)]
        try:
            dims, _ = select_layout(_shape(node), shapes)
        except ValueError:
            return f"{node.target} of shapes {[list(s) for s in shapes]} that do not broadcast"
        if len(dims) > SELECT_MAX_DIMS:
            return f"{node.target} broadcasting {[list(s) for s in shapes]} (more than {SELECT_MAX_DIMS} loop levels)"
        return None

    def lower(self, ctx, node) -> None:
        condition, a, b = _select_args(node)
        compared = ctx.values.get(condition.name)
        if not isinstance(compared, Comparison):
            raise EdgecError(f"{source_line(node)}: {node.target} whose condition is not a comparison")
        inputs, sources = [], {}
        for role, arg in zip(ROLES, (compared.x1, compared.x2, a, b)):
            if role == "x2" and not isinstance(arg, Tensor):
                sources[role] = None  # compared with one value: the table reads x1 alone
                continue
            if role in ("a", "b") and not ctx.is_tensor(arg):
                sources[role] = self._constant(ctx, node, arg)
                continue
            tensor = arg if role in ("x1", "x2") else ctx.tensor(arg)
            if tensor not in inputs:
                inputs.append(tensor)
            sources[role] = inputs.index(tensor)
        ctx.add_op(
            self.kind,
            node,
            inputs,
            [ctx.output(node)],
            cmp=compared.cmp,
            threshold=None if sources["x2"] is not None else compared.x2,
            sources=sources,
        )

    @staticmethod
    def _constant(ctx, node, arg) -> float | ConstantOperand:
        """A constant a or b: a Python scalar (quantized at finalize, at the output's qparams), or
        a constant tensor the program quantizes (at the output's qparams: annotate shares them)."""
        if not isinstance(arg, Node):
            return float(arg)
        value = ctx.constant(arg)
        if arg.target in SCALAR_TENSORS:
            return float(value.value)
        if not value.quantized or value.value.dtype != np.int8 or len(value.scales) != 1:
            raise EdgecError(f"{source_line(node)}: a constant operand of {node.target} must be quantized per tensor")
        return ConstantOperand(0, value.value, float(value.scales[0]), int(value.zero_points[0]))

    def relayout(self, op, graph) -> None:
        """Each operand's shape in the output's stored order; a constant tensor re-laid to match."""
        out = graph.tensors[op.outputs[0]]
        shapes = {}
        for role, source in op.attrs["sources"].items():
            if source is None or isinstance(source, float):
                shapes[role] = (1,) * len(out.shape)
            elif isinstance(source, ConstantOperand):
                padded = source.values.reshape((1,) * (len(out.torch_shape) - source.values.ndim) + source.values.shape)
                shapes[role] = _broadcast_stored(source.values.shape, out)
                source.values = to_stored(out, padded).reshape(shapes[role])
            else:
                tensor = graph.tensors[op.inputs[source]]
                padded = (1,) * (len(out.torch_shape) - len(tensor.torch_shape)) + tensor.torch_shape
                if not same_bytes(tensor.torch_shape, tensor.perm, padded, out.perm):
                    raise EdgecError(
                        f"{op.source}: where broadcasts an operand stored as {list(tensor.shape)} against "
                        f"{list(out.shape)}; edgec cannot read it in place"
                    )
                shapes[role] = _broadcast_stored(tensor.torch_shape, out)
        op.attrs["shapes"] = shapes

    def finalize(self, op, graph) -> None:
        require_quantized(op, graph, "where")
        out = graph.tensors[op.outputs[0]]
        sources, constants = op.attrs["sources"], {}
        qparams = {}
        for role, source in sources.items():
            if isinstance(source, int):
                tensor = graph.tensors[op.inputs[source]]
                qparams[role] = (tensor.scale, tensor.zero_point, tensor.dtype)
            elif isinstance(source, ConstantOperand):
                qparams[role] = (source.scale, source.zero_point, "int8")
                constants[role] = source.values
            elif isinstance(source, float):
                constants[role] = np.full(op.attrs["shapes"][role], self._scalar(source, out, graph), np.int8)
        self._require_shared(op, qparams, out)
        table = None
        if op.attrs["threshold"] is not None:
            table = condition_table(op.attrs["cmp"], op.attrs["threshold"], *qparams["x1"][:2])
        try:
            op.attrs["desc"] = select_desc(op.attrs["cmp"], out.shape, op.attrs["shapes"], table)
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {exc}") from None
        op.attrs["constants"] = constants

    @staticmethod
    def _scalar(value: float, out, graph) -> np.int8:
        return quantize_scalar(value, out.scale, out.zero_point, graph.input_rounding)

    @staticmethod
    def _require_shared(op, qparams: dict, out) -> None:
        """One clear line where the program's qparams break what makes the select exact (a program
        quantized by another tool): x1 and a live x2 at one int8 scale, a and b at the output's."""
        output = (out.scale, out.zero_point, out.dtype)
        checks = [("the compared tensors", qparams["x1"], qparams.get("x2", qparams["x1"]))]
        checks += [(f"operand {role} and the output", qparams[role], output) for role in ("a", "b") if role in qparams]
        checks.append(("the output", output, output))
        for what, got, expected in checks:
            if got != expected or got[2] != "int8":
                raise EdgecError(
                    f"{op.source}: where/masked_fill runs in int8 on raw bytes: {what} must share one int8 "
                    f"scale and zero point (edgec's quantizer gives them one), got {got} and {expected}"
                )

    def _operands(self, op, inputs) -> list:
        values = []
        for role in ROLES:
            source = op.attrs["sources"][role]
            if source is None:
                values.append(np.zeros(1, np.int8))
            elif isinstance(source, int):
                values.append(np.asarray(inputs[source]))
            else:
                values.append(op.attrs["constants"][role])
        return values

    def golden(self, op, graph, inputs):
        return select_s8(*self._operands(op, inputs), op.attrs["desc"]).reshape(graph.tensors[op.outputs[0]].shape)

    def specialize(self, op, graph, target) -> None:
        op.kernel = KernelChoice(
            self.c_function, "portable", "portable C on every core: a byte select, no DSP or Helium form yet"
        )

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(SELECT_DESC, p, op.attrs["desc"])
        pointers = []
        for role in ROLES:
            source = op.attrs["sources"][role]
            if source is None:
                pointers.append("NULL")
            elif isinstance(source, int):
                pointers.append(names.ptr(op.inputs[source]))
            else:
                symbol = names.symbol(op, role)
                call.constants.append(("int8_t", symbol, op.attrs["constants"][role].ravel()))
                pointers.append(symbol)
        call.code = f"status |= {op.kernel.function}(&{p}, {', '.join(pointers)}, {names.ptr(op.outputs[0])});"
        return call

    def in_place(self, op, graph, target):
        """The kernel reads element i of every operand before writing element i: an input that is
        not broadcast may be overwritten."""
        out = graph.tensors[op.outputs[0]]
        return tuple(InPlace(i, 0) for i, name in enumerate(op.inputs) if graph.tensors[name].shape == out.shape)


class ScalarTensor(OpDef):
    """aten.scalar_tensor: how the decomposed core-ATen IR spells where's or masked_fill's Python
    scalar (where.self(c, x, scalar_tensor(0.0))); the select quantizes it as it does a scalar."""

    kind = "scalar_tensor"
    family = "scalar_tensor (a Python scalar operand of where / masked_fill)"
    targets = frozenset(SCALAR_TENSORS)

    def annotate(self, node) -> None:
        pass

    def check(self, node) -> str | None:
        if any(user.target not in SELECTS or _select_args(user)[0] is node for user in node.users):
            return f"{node.target} used other than as a value of torch.where or masked_fill"
        return None

    def lower(self, ctx, node) -> None:
        ctx.float_constant(node, np.float32(node.args[0]))


UNITS = (Compare(), Select(), ScalarTensor())

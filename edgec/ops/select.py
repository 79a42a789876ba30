"""Comparisons and selection: torch.where(condition, a, b) and masked_fill, int8 selects.

C kernel: runtime_c/src/eltwise/edgec_select_s8.c (edgec_select_s8).

A comparison (gt, ge, lt, le, eq, ne) lowers to nothing: its bool result exists only as the
condition of the where / masked_fill (or &, |, ~) that reads it (check refuses any other use), and
the select op reads the comparison's operands itself. out = (x1 CMP x2) ? a : b, every operand
broadcast NumPy's way; exact by construction, never rounded:
  - x2 a live tensor: x1 and x2 share scale and zero point (annotated so), and dequantizing is
    strictly increasing, so comparing the raw int8 values is comparing the program's values;
  - x2 one value (a Python scalar, a one-element constant): the comparison of each of x1's 256
    possible bytes, evaluated as the program evaluates it (float32 (q - zp) * scale CMP
    float32(c)), is a 256-entry 0/1 table the kernel indexes;
  - a and b share the output's qparams (annotated so), so selecting moves bytes; a Python
    scalar a or b is quantized at the output's qparams as the program's own quantize does it.
Other conditions are masks, int8 0 / 1 tensors (scale 1) the select reads as mask != 0 (a table):
  - x1 CMP a constant tensor t: a select computes the mask, (q CMP' k_i) ? a_i : b_i on raw bytes,
    k, a, b int8 constants from t (per_element_thresholds: the program's float32 comparison of
    each of x1's 256 bytes with each t_i, monotone in q);
  - &, |, ~ of conditions: ~ of a comparison is the opposite comparison, ~ of a mask is read the
    other way round (a and b swapped; m ? 0 : 1 where a mask must be made); a & b = a ? b : 0,
    a | b = a ? 1 : b, one select each, a comparison operand fused;
  - a bool model input: the caller passes one byte per element, 0 or 1 (edgec.frontend.lower);
  - a constant bool tensor: its 0 / 1 bytes in flash, compared with 0 through the table.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np
import torch
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import COMPARISONS, LOGICALS, SCALAR_TENSORS, SELECTS
from edgec.ir import InPlace, KernelChoice, Tensor, same_bytes, to_stored
from edgec.numerics import INT8_MAX, INT8_MIN
from edgec.ops.base import CCall, OpDef, descriptor, require_quantized
from edgec.ops.binary import ConstantOperand, _broadcast_stored, broadcast_layouts
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
_NEGATED = {"gt": "le", "ge": "lt", "lt": "ge", "le": "gt", "eq": "ne", "ne": "eq"}  # not (x CMP y) (no NaN)

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
    dims, strides = broadcast_layouts(out_shape, [shapes[role] for role in ROLES])
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


def is_condition(arg) -> bool:
    """Whether `arg` is a bool the select kernel can take as a condition: a comparison, a
    combination of conditions (&, |, ~, logical_*), or a bool model input or a view of one (a
    comparison's own view is refused by Compare.check)."""
    value = arg.meta.get("val") if isinstance(arg, Node) else None
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool


def _condition_users_only(node: Node) -> str | None:
    """Why `node` (a bool) is read other than as a condition of a where / masked_fill or of a
    logical op, or None."""
    for user in node.users:
        if user.op != "call_function":
            break
        if user.target in SELECTS and _select_args(user)[0] is node:
            continue
        if user.target in LOGICALS:
            continue
        break
    else:
        return None
    return (
        f"{node.target} whose result is used other than as the condition of torch.where or "
        f"masked_fill (edgec computes no bool tensors)"
    )


@dataclass
class Comparison:
    """What a comparison node lowers to: its operands, for the select op that reads it (x1 a
    Tensor; x2 a Tensor, or the one float value compared with)."""

    cmp: str
    x1: object
    x2: object


def _mask(ctx, node, shape) -> Tensor:
    """A condition held as a tensor: int8 0 / 1 (scale 1, zero point 0), the float graph's bool
    `node` its reference (verify compares it as such)."""
    return ctx.graph.add_tensor(Tensor(f"{node.name}_mask", tuple(shape), 1.0, 0, source=node.name))


@dataclass
class Negated:
    """~mask of a mask Tensor: no op of its own; a select reading it swaps a and b."""

    mask: Tensor


CONDITIONS = (Comparison, Tensor, Negated)  # what a condition node lowers to


def _add_select(ctx, node, condition, a, b, out: Tensor, **attrs):
    """A select op: out = condition ? a : b, the condition a Comparison, a mask Tensor (read as
    mask != 0) or Negated, a and b each a Tensor, a float or a ConstantOperand."""
    if isinstance(condition, Negated):
        condition, a, b = condition.mask, b, a
    if isinstance(condition, Tensor):
        condition, attrs["mask"] = Comparison("ne", condition, 0.0), True
    inputs, sources = [], {}
    for role, arg in zip(ROLES, (condition.x1, condition.x2, a, b)):
        if role == "x2" and isinstance(arg, float):
            sources[role] = None  # compared with one value: the table reads x1 alone
            continue
        if not isinstance(arg, Tensor):
            sources[role] = arg
            continue
        if arg not in inputs:
            inputs.append(arg)
        sources[role] = inputs.index(arg)
    threshold = condition.x2 if isinstance(condition.x2, float) else None
    return ctx.add_op(
        Select.kind, node, inputs, [out], cmp=condition.cmp, threshold=threshold, sources=sources, **attrs
    )


def condition_of(ctx, node, arg):
    """What condition `arg` of `node` lowered to; a constant bool tensor (a mask held in a buffer)
    becomes its 0 / 1 bytes in flash, compared with 0 through the table."""
    value = ctx.values.get(arg.name)
    if isinstance(value, CONDITIONS):
        return value
    array = getattr(value, "value", None)
    if array is None or np.asarray(array).dtype != np.bool_:
        raise EdgecError(f"{source_line(node)}: {node.target} of a condition edgec cannot read ({arg.name})")
    return Comparison("ne", ConstantOperand(0, np.asarray(array, np.int8), 1.0, 0), 0.0)


def _negation(condition):
    """~condition, no op: the opposite comparison, or the mask read the other way round."""
    if isinstance(condition, Comparison):
        return Comparison(_NEGATED[condition.cmp], condition.x1, condition.x2)
    return condition.mask if isinstance(condition, Negated) else Negated(condition)


def _as_mask(ctx, node) -> Tensor:
    """Condition `node` as a mask tensor: a Comparison or Negated is computed into one (a select
    of 1 or 0), which `node` then stands for (its other readers read that mask)."""
    condition = ctx.values[node.name]
    if isinstance(condition, Tensor):
        return condition
    out = _mask(ctx, node, node.meta["val"].shape)
    _add_select(ctx, node, condition, 1.0, 0.0, out)
    ctx.alias(node, out)
    return out


def per_element_thresholds(cmp: str, thresholds: np.ndarray, scale: float, zero_point: int):
    """x CMP t for a constant tensor t, as raw int8 operands of edgec_select_s8: (cmp', k, a, b)
    such that (q cmp' k_i) ? a_i : b_i is, for every int8 q, the program's float32
    (q - zp) * scale CMP t_i. Dequantizing is increasing, so the q where it holds are those from
    some k on (gt, ge: cmp' ge), up to some k (lt, le: le), one or none (eq), all but one or all
    (ne); a_i = b_i = the answer where it is the same for every q."""
    values = np.float32(np.arange(INT8_MIN, INT8_MAX + 1) - int(zero_point)) * np.float32(scale)
    holds = _CMP_FUNCTIONS[cmp](values[None, :], np.float32(thresholds).reshape(-1, 1))  # [elements, 256]
    raw = {"gt": "ge", "ge": "ge", "lt": "le", "le": "le", "eq": "eq", "ne": "ne"}[cmp]
    if raw == "le":
        index = 255 - np.argmax(holds[:, ::-1], axis=1)  # the last q where it holds
    else:
        index = np.argmax(holds if raw != "ne" else ~holds, axis=1)  # the first where it holds (ne: fails)
    k = (index + INT8_MIN).astype(np.int8)
    always, never = holds.all(axis=1), ~holds.any(axis=1)
    a = np.where(never, 0, 1).astype(np.int8)
    b = np.where(always, 1, 0).astype(np.int8)
    shape = np.shape(thresholds)
    return raw, k.reshape(shape), a.reshape(shape), b.reshape(shape)


def mask_input_notes(graph) -> dict[str, str]:
    """What the header says of a bool model input that a where / masked_fill reads as its condition."""
    notes = {}
    for op in graph.ops:
        if op.kind == Select.kind and op.attrs.get("mask"):
            name = graph.storage(op.inputs[op.attrs["sources"]["x1"]])  # the input, or what it views
            if name in graph.inputs:
                notes[name] = (
                    "a bool mask (torch.bool): one byte per element, 0 false, 1 true (any nonzero reads as true)"
                )
    return notes


class Compare(OpDef):
    """gt, ge, lt, le, eq, ne: the condition of a where or masked_fill (no kernel of its own), or
    against a constant tensor a mask computed by edgec_select_s8 (per-element raw thresholds)."""

    kind = "compare"
    family = "comparison (only as a condition of where / masked_fill, or of logical and / or / not)"
    targets = frozenset(COMPARISONS)
    limits = "only as a condition of torch.where or masked_fill (or combined with &, |, ~)"

    def annotate(self, node) -> None:
        _, x1, x2 = comparison(node)
        inputs = {x1: ACTIVATION_QSPEC}
        if isinstance(x2, Node) and x2.op != "get_attr" and x2 is not x1:
            inputs[x2] = SharedQuantizationSpec((x1, node))  # raw int8 compares as the values do
        annotate(node, inputs, None)

    def check(self, node) -> str | None:
        problem = _condition_users_only(node)
        if problem:
            return problem
        _, x1, _ = comparison(node)
        if not isinstance(x1, Node):
            return f"{node.target} of two constants (fold it in the model)"
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
            if constant.quantized:  # as the program dequantizes it: in float32
                value = np.float32(value - constant.zero_points) * np.float32(constant.scales)
            if value.size > 1:
                self._per_element(ctx, node, cmp, ctx.tensor(x1), np.asarray(value, np.float64))
                return
            x2 = value.reshape(-1)[0]
        ctx.alias(node, Comparison(cmp, ctx.tensor(x1), float(x2)))

    @staticmethod
    def _per_element(ctx, node, cmp: str, x1: Tensor, thresholds: np.ndarray) -> None:
        """x1 CMP a constant tensor: a mask computed by a select whose x2, a and b are constants
        of the thresholds' shape (per_element_thresholds, at finalize, once x1's qparams are final)."""
        operands = [ConstantOperand(0, thresholds.copy(), 1.0, 0) for _ in range(3)]
        out = _mask(ctx, node, node.meta["val"].shape)
        _add_select(ctx, node, Comparison(cmp, x1, operands[0]), operands[1], operands[2], out, per_element=cmp)
        ctx.alias(node, out)


class Logical(OpDef):
    """&, |, ~ (and logical_and / _or / _not) of conditions: ~ of a comparison is the opposite
    comparison; otherwise each is one edgec_select_s8 into a mask, a comparison operand fused
    (a & b = a ? b : 0, a | b = a ? 1 : b, ~a = a ? 0 : 1)."""

    kind = "logical"
    family = "logical and / or / not of conditions (only as a condition of where / masked_fill)"
    targets = frozenset(LOGICALS)
    limits = "of comparisons and bool model inputs, only as a condition of torch.where or masked_fill"

    def annotate(self, node) -> None:
        pass

    def check(self, node) -> str | None:
        operands = node.args[: 1 if LOGICALS[node.target] == "not" else 2]
        if not all(is_condition(arg) for arg in operands):
            return f"{node.target} of values that are not bool (integers: edgec computes no bitwise ops)"
        return _condition_users_only(node)

    def lower(self, ctx, node) -> None:
        how = LOGICALS[node.target]
        for arg in node.args[: 1 if how == "not" else 2]:
            ctx.alias(arg, condition_of(ctx, node, arg))
        first = ctx.values[node.args[0].name]
        if how == "not":
            ctx.alias(node, _negation(first))
            return
        out = _mask(ctx, node, node.meta["val"].shape)
        other = node.args[1]
        if isinstance(ctx.values[other.name], Comparison) and not isinstance(first, Comparison):
            first, other = ctx.values[other.name], node.args[0]  # both commute: the comparison is the fused one
        mask = _as_mask(ctx, other)
        a, b = (mask, 0.0) if how == "and" else (1.0, mask)
        _add_select(ctx, node, first, a, b, out)
        ctx.alias(node, out)


class Select(OpDef):
    """torch.where(condition, a, b) and x.masked_fill(condition, v): edgec_select_s8 moves bytes
    of a or b (sharing the output's qparams) by a condition on raw bytes or a 256-entry table."""

    kind, c_function = "select", "edgec_select_s8"
    family = "where / masked_fill on a condition"
    targets = frozenset(SELECTS)
    runtime_sources = ("eltwise/edgec_select_s8.c",)
    layout_follows_input = True
    limits = (
        "the condition a comparison with a tensor, one value or a constant tensor, those combined with "
        f"&, |, ~, a bool model input or a constant bool tensor; broadcasting within {SELECT_MAX_DIMS} loop levels"
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
        if not is_condition(condition):
            return (
                f"{node.target} whose condition is not a comparison, a combination of them or a bool "
                f"model input (x > y, x < 0.5, (x > 0) & m, ...)"
            )
        compared = comparison(condition)[1:] if condition.target in COMPARISONS else (condition, None)
        shapes = [_shape(arg) for arg in (*compared, a, b)]
        try:
            dims, _ = broadcast_layouts(_shape(node), shapes)
        except ValueError:
            return f"{node.target} of shapes {[list(s) for s in shapes]} that do not broadcast"
        if len(dims) > SELECT_MAX_DIMS:
            return f"{node.target} broadcasting {[list(s) for s in shapes]} (more than {SELECT_MAX_DIMS} loop levels)"
        return None

    def lower(self, ctx, node) -> None:
        condition, a, b = _select_args(node)
        compared = condition_of(ctx, node, condition)
        operands = [ctx.tensor(arg) if ctx.is_tensor(arg) else self._constant(ctx, node, arg) for arg in (a, b)]
        _add_select(ctx, node, compared, *operands, ctx.output(node))

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
        if op.attrs.get("per_element"):
            self._raw_thresholds(op, graph)
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
    def _raw_thresholds(op, graph) -> None:
        """A comparison with a constant tensor: its float thresholds (x2, and a, b in their shape,
        as relayout stored them) become per_element_thresholds' raw operands at x1's qparams."""
        sources = op.attrs["sources"]
        x1, out = graph.tensors[op.inputs[sources["x1"]]], graph.tensors[op.outputs[0]]
        x2, a, b = (sources[role] for role in ("x2", "a", "b"))
        raw = per_element_thresholds(op.attrs["per_element"], x2.values, x1.scale, x1.zero_point)
        op.attrs["cmp"], x2.values, a.values, b.values = raw
        x2.scale, x2.zero_point = x1.scale, x1.zero_point
        for operand in (a, b):
            operand.scale, operand.zero_point = out.scale, out.zero_point

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


UNITS = (Compare(), Logical(), Select(), ScalarTensor())

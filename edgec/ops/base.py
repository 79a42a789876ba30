"""What an op unit is: everything edgec knows about one kind of operator, in one place.

An op module (conv.py, pool.py, ...) defines the golden numpy kernel and an OpDef subclass that
says how a torch node lowers to an IR Op, how its constants are laid out for NHWC, which kernel
constants it needs, how the golden kernel runs it, which C call it emits and which runtime
sources that call needs, what memory it uses besides its input and output, and whether it can
run in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgec.c_format import braced, initializer
from edgec.errors import FloatActivation
from edgec.ir import Graph, InPlace, KernelChoice, Op
from edgec.ops.kernel import Struct

# Every unit by IR kind, filled by edgec.ops (whose __init__ lists the units): a unit that runs
# others (a band stage's layers, an int16 unit's int8 counterpart) looks them up here, without
# importing the package that imports it.
KINDS: dict[str, "OpDef"] = {}


def unit_of(op: Op) -> "OpDef":
    """The unit that compiles `op`: its kind's, or the one its kernel choice names (an int16 or
    CMSIS-NN unit, chosen after lowering)."""
    return KINDS[op.kernel.unit if op.kernel is not None and op.kernel.unit else op.kind]


def require_quantized(op, graph, what: str) -> None:
    """One clear line where a program leaves an int8 kernel's operand in float (a float residual
    chain; an add whose output only float operators read), where add_params would fail on None."""
    for name in op.inputs + op.outputs:
        tensor = graph.tensors[name]
        if not tensor.quantized:
            role = "output" if name in op.outputs else "input"
            raise FloatActivation(
                f"{op.source}: the program leaves the {role} of this {what} ('{tensor.source}') in float; "
                f"edgec runs it in int8: quantize it in the program (a quantize/dequantize pair), "
                f"give edgec calibration data (--calib) to quantize it, or the float model",
                tensor.source,
            )


@dataclass
class CCall:
    """One layer of generated C: the kernel call, the flash constants it references."""

    code: str  # C statement(s) ending in ';' -- they set `status`
    constants: list  # [(c_type, symbol, np.ndarray)] emitted const into the weights file
    params: list  # [(c_type, symbol, initializer)] emitted static const into the model file
    # The scratch bytes the kernel needs as a C constant expression of edgec_nn.h's macros (which
    # follow the compiler's -mcpu), checked at compile time against the plan's; None: no macro; a
    # band stage's: [(layer name, expression)], one check per layer its scratch holds the kernel of.
    scratch_required: str | list[tuple[str, str]] | None = None
    # Streaming: C statements that set this layer's persistent state (Names.state) to its start
    # value, run by <name>_reset_state(); "" for a layer without state.
    state_reset: str = ""
    # The C function the code calls where it is not op.kernel's: the in-place form the plan chose.
    function: str = ""


C_ARRAY_TYPES = {
    np.dtype(np.int8): "int8_t",
    np.dtype(np.int16): "int16_t",
    np.dtype(np.int32): "int32_t",
    np.dtype(np.int64): "int64_t",
    np.dtype(np.uint8): "uint8_t",
    np.dtype(np.uint16): "uint16_t",
}


def descriptor(struct: Struct, symbol: str, fields: dict) -> CCall:
    """A kernel descriptor as a static const struct with designated initializers, one a line: integer fields
    as literals, array fields (numpy) as const arrays in flash named `<symbol>_<field>` that the
    field points to. `fields` must be the schema's, in order (ValueError otherwise). Returns the
    CCall's constants and params (its code is the caller's)."""
    struct.check(fields)
    constants, values = [], []
    for field, value in fields.items():
        if isinstance(value, np.ndarray):
            constants.append((C_ARRAY_TYPES[value.dtype], f"{symbol}_{field}", value))
            values.append(f".{field} = {symbol}_{field}")
        elif value is None:
            values.append(f".{field} = NULL")
        elif isinstance(value, (list, tuple)):
            # An empty list is {0}: C99 has no empty initializer (the fixed-size array is all zero either way).
            values.append(f".{field} = {braced([int(v) for v in value] or [0])}")
        else:
            values.append(f".{field} = {int(value)}")
    return CCall("", constants, [(struct.name, symbol, initializer(values))])


PORTABLE_ONLY = "portable kernel (the only one this op has)"


class OpDef:
    kind: str = ""
    c_function: str = ""  # the C function of a unit with one kernel (kernel_function says otherwise)
    family: str = ""  # how README's operator table names the unit (default: its kind)
    targets: frozenset = frozenset()  # the torch ops this unit lowers
    runtime_sources: tuple[str, ...] = ()  # files under runtime_c/src the C call needs
    fuses_activation: bool = False  # its output stage can take clamp bounds
    spatial: bool = False  # its activations are stored channels last (passes/layout.py)
    layout_follows_input: bool = False  # its output is stored like its same-rank inputs
    keeps_qparams: bool = False  # its kernel moves or compares values: output qparams = inputs'
    limits: str = ""  # the usage limits its check (or compilation) enforces, as `edgec inspect` lists them

    def layout_ties(self, op: Op, graph: Graph) -> list[str]:
        """The inputs that must be stored in the same layout (channels last or PyTorch order) as
        the output (passes/layout.py): with layout_follows_input, those of the output's rank."""
        if not self.layout_follows_input:
            return []
        rank = len(graph.tensors[op.outputs[0]].shape)
        return [name for name in op.inputs if len(graph.tensors[name].shape) == rank]

    def runtime_sources_of(self, op: Op) -> tuple[str, ...]:
        """The runtime sources `op`'s call needs: the unit's, unless a variant recorded on the op
        (e.g. int4 weights) calls another kernel."""
        return self.runtime_sources

    def describe(self, node) -> str:
        """What this use of the operator becomes, as `edgec inspect` names it: the unit's family."""
        return self.family or self.kind

    def annotate(self, node) -> None:
        """Record how `node` is quantized, with the helpers of edgec.ops.qspec (before calibration)."""
        raise NotImplementedError

    def torch_order_tensors(self, op: Op, graph: Graph) -> list[str]:
        """The tensors of `op` that must be stored in PyTorch's axis order (never channels last):
        the kernel works along the last torch axis (passes/layout.py keeps their groups so)."""
        return []

    def observe(self, node, args, result) -> None:
        """Calibration hook: called with the float arguments and result of `node` on every
        calibration sample, for statistics that no graph tensor carries (e.g. an LSTM's cell
        state); the unit keeps them in node.meta for its `lower`. Units that need none leave it."""

    def int16_problem(self, node) -> str | None:
        """Why `node` cannot take int16 activations although its kind has int16 kernels, or None."""
        return None

    def check(self, node) -> str | None:
        """What keeps edgec from compiling this use of the operator (e.g. an argument beyond the
        kernel's limits), or None; asked of every node before calibration, so all come at once."""
        return None

    def lower(self, ctx, node) -> None:
        raise NotImplementedError

    def relayout(self, op: Op, graph: Graph) -> None:
        """Re-lay constants and map axis attributes for the layouts the tensors are stored in
        (Tensor.shape is the stored shape by now; Tensor.torch_shape and .perm give the rest)."""

    def finalize(self, op: Op, graph: Graph) -> None:
        """Compute kernel constants (multipliers, shifts, bounds) from the final qparams."""

    def specialize(self, op: Op, graph: Graph, target) -> None:
        """The unit's decision function: choose the kernel variant `target` runs (after finalize,
        before planning) and record it with the reason as op.kernel (what scratch_bytes and emit
        need besides in op.attrs); by default every target runs the unit's one portable kernel."""
        op.kernel = KernelChoice(self.kernel_function(op), "portable", PORTABLE_ONLY)

    def kernel_function(self, op: Op) -> str:
        """The C function of the unit's portable kernel for `op`."""
        return self.c_function

    def golden(self, op: Op, graph: Graph, inputs: list[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def emit(self, op: Op, graph: Graph, names) -> CCall:
        raise NotImplementedError

    def macs(self, op: Op, graph: Graph) -> int:
        return 0

    def state_bytes(self, op: Op) -> int:
        """Bytes of state the layer keeps between invokes (streaming), outside the arena."""
        return 0

    def scratch_bytes(self, op: Op, graph: Graph, target) -> int:
        """Scratch the kernel needs when its output has bytes of its own."""
        return 0

    def in_place(self, op: Op, graph: Graph, target) -> tuple[InPlace, ...]:
        """The ways the kernel can write its output over one of its inputs, best first. The
        planner takes one only where that input's bytes are read by no later op and are not a
        graph output, and the emitted call must then be correct on that overlapping layout."""
        return ()

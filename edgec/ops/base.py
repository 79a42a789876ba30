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

from edgec.ir import Graph, InPlace, Op


@dataclass
class CCall:
    """One layer of generated C: the kernel call, the flash constants it references."""
    code: str  # C statement(s) ending in ';' -- they set `status`
    constants: list  # [(c_type, symbol, np.ndarray)] emitted const into the weights file
    params: list  # [(c_type, symbol, initializer)] emitted static const into the model file
    # The scratch bytes the kernel needs as a C constant expression of edgec_nn.h's macros (which
    # follow the compiler's -mcpu), checked at compile time against the plan's; None: no macro.
    scratch_required: str | None = None


class OpDef:
    kind: str = ""
    targets: frozenset = frozenset()  # the torch ops this unit lowers
    runtime_sources: tuple[str, ...] = ()  # files under runtime_c/src the C call needs
    fuses_activation: bool = False  # its output stage can take clamp bounds

    def lower(self, ctx, node) -> None:
        raise NotImplementedError

    def to_nhwc(self, op: Op, graph: Graph) -> None:
        """Re-lay constants for NHWC activations (tensor shapes are converted generically)."""

    def finalize(self, op: Op, graph: Graph) -> None:
        """Compute kernel constants (multipliers, shifts, bounds) from the final qparams."""

    def specialize(self, op: Op, graph: Graph, target) -> None:
        """Choose the kernel variant `target` runs (after finalize, before planning), recorded in
        op.attrs for scratch_bytes and emit; by default every target runs the portable kernel."""

    def golden(self, op: Op, graph: Graph, inputs: list[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def emit(self, op: Op, graph: Graph, names) -> CCall:
        raise NotImplementedError

    def macs(self, op: Op, graph: Graph) -> int:
        return 0

    def scratch_bytes(self, op: Op, graph: Graph, target) -> int:
        """Scratch the kernel needs when its output has bytes of its own."""
        return 0

    def in_place(self, op: Op, graph: Graph, target) -> tuple[InPlace, ...]:
        """The ways the kernel can write its output over one of its inputs, best first. The
        planner takes one only where that input's bytes are read by no later op and are not a
        graph output, and the emitted call must then be correct on that overlapping layout."""
        return ()

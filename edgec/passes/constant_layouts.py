"""`--opt auto`: the fastest constant layouts that fit the flash budget.

Some kernels have two layouts of their constants: the DSP convolution and fully connected kernels
read their filter either as packed int8 (compact) or widened to int16 (`wide`: fewer instructions
per multiply-accumulate, twice the filter's flash). `--opt speed` widens every such layer and
`--opt size` none; `--opt auto` widens them all if the constants then fit the target's flash
budget, and otherwise narrows layers back, those whose filter bytes are each read the fewest times
per inference first (weight reuse = MACs / filter elements: what widening a byte speeds up),
until they fit. A model that fits with `--opt size` is never refused by `--opt auto`.
"""
from __future__ import annotations

from edgec.codegen import layer_constants_bytes
from edgec.ir import Graph
from edgec.ops import KINDS


def choose_constant_layouts(graph: Graph, target) -> list[str]:
    """Sets op.attrs["wide"] for `--opt auto` (ops were specialized as for speed); returns what it
    chose and why, one line each (nothing when no layer has a choice)."""
    wide = [op for op in graph.ops if op.attrs.get("wide")]
    if target.opt != "auto" or not wide:
        return []
    sizes = {op.name: layer_constants_bytes(op, graph) for op in graph.ops}
    extra = {}
    for op in wide:
        op.attrs["wide"] = False
        extra[op.name] = sizes[op.name] - layer_constants_bytes(op, graph)
        op.attrs["wide"] = True
    total = sum(sizes.values())
    budget = target.flash_bytes
    if budget is None or total <= budget:
        return [f"--opt auto: all {len(wide)} DSP layers with int16-widened filters "
                f"(+{sum(extra.values()):,} B of flash; constants {total:,} B"
                + (f" of the {budget:,} B budget)" if budget is not None else ")")]
    narrowed = []
    for op in sorted(wide, key=lambda op: (weight_reuse(op, graph), op.name)):
        if total <= budget:
            break
        op.attrs["wide"] = False
        total -= extra[op.name]
        narrowed.append(op)
    kept = len(wide) - len(narrowed)
    return [f"--opt auto: {kept} of {len(wide)} DSP layers with int16-widened filters; {len(narrowed)} kept compact "
            f"to fit the {budget:,} B flash budget (constants {total:,} B), those whose filter bytes are read the "
            f"fewest times per inference first: {', '.join(op.name for op in narrowed[:6])}"
            + (f" and {len(narrowed) - 6} more" if len(narrowed) > 6 else "")]


def weight_reuse(op, graph: Graph) -> float:
    """How many times each filter element is read per inference (MACs / filter elements)."""
    return KINDS[op.kind].macs(op, graph) / max(op.attrs["weight"].size, 1)

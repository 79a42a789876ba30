"""`edgec inspect`: what edgec makes of a model's operators, before any calibration.

The model is loaded and exported, normalized and its BatchNorms folded (what `edgec build` does
before it calibrates), then every operator node is listed, grouped by operator: supported ones
with the unit that lowers them, its usage limits (OpDef.limits) and any use beyond them
(OpDef.check), unsupported ones with every place they are used (module path and source line).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgec.frontend import export
from edgec.frontend.torch_ops import GETITEM
from edgec.ops import OPS
from edgec.passes.fold_batchnorm import fold_batchnorm
from edgec.passes.normalize import normalize


@dataclass
class OperatorUses:
    """Every use of one operator in the model."""

    operator: str
    unit: str | None  # the edgec unit (family) lowering it; None: unsupported
    limits: str = ""  # the unit's usage limits (OpDef.limits)
    uses: int = 0
    within_limits: int = 0
    beyond: dict[tuple[str, str], int] = field(default_factory=dict)  # (problem, location) -> uses
    locations: dict[str, int] = field(default_factory=dict)  # where each use is -> uses

    @property
    def supported(self) -> bool:
        return self.unit is not None


@dataclass
class Inspection:
    origin: str
    operators: list[OperatorUses]
    input_shapes: list[list[int]]
    notes: list[str] = field(default_factory=list)  # the loader's (e.g. dynamic dimensions specialised)

    @property
    def unsupported(self) -> list[OperatorUses]:
        return [op for op in self.operators if not op.supported]

    @property
    def beyond_limits(self) -> list[OperatorUses]:
        return [op for op in self.operators if op.supported and op.beyond]

    @property
    def ok(self) -> bool:
        """Whether every operator use can be compiled."""
        return not self.unsupported and not self.beyond_limits

    def __str__(self) -> str:
        uses = sum(op.uses for op in self.operators)
        bad = sum(op.uses for op in self.unsupported) + sum(sum(op.beyond.values()) for op in self.beyond_limits)
        lines = [
            *self.notes,
            f"{self.origin}: inputs {', '.join(map(str, self.input_shapes))}; {uses} operator uses of "
            f"{len(self.operators)} operators; "
            + ("all supported" if self.ok else f"{bad} use{'s' if bad != 1 else ''} cannot be compiled"),
        ]
        if self.unsupported:
            lines.append(f"UNSUPPORTED ({len(self.unsupported)} operators):")
            for op in self.unsupported:
                lines.append(f"  {op.operator} x{op.uses}")
                lines += [f"    {where}{f' (x{count})' if count > 1 else ''}" for where, count in op.locations.items()]
        lines.append(f"SUPPORTED ({len(self.operators) - len(self.unsupported)} operators):")
        for op in self.operators:
            if not op.supported:
                continue
            limits = (
                "within its limits"
                if not op.beyond
                else f"{op.within_limits} within its limits, {op.uses - op.within_limits} beyond"
            )
            lines.append(
                f"  {op.operator} x{op.uses} -> {op.unit}: {limits}" + (f" (limits: {op.limits})" if op.limits else "")
            )
            lines += [
                f"    BEYOND LIMITS: {problem}{f' (x{count})' if count > 1 else ''}: {where}"
                for (problem, where), count in op.beyond.items()
            ]
        return "\n".join(lines)


def inspect_model(model, example_inputs=None) -> Inspection:
    """The model's operators (see the module docstring); `model` as export.load takes it."""
    loaded = export.load(model, example_inputs)
    module = fold_batchnorm(normalize(loaded.module))
    groups: dict[str, OperatorUses] = {}
    for node in module.graph.nodes:
        if node.op != "call_function" or node.target == GETITEM or "quantized_decomposed" in str(node.target):
            continue
        unit = OPS.get(node.target)
        described = None if unit is None else unit.describe(node)
        entry = groups.setdefault(
            f"{node.target} {described}", OperatorUses(str(node.target), described, "" if unit is None else unit.limits)
        )
        entry.uses += 1
        where = export.node_location(node)
        entry.locations[where] = entry.locations.get(where, 0) + 1
        if unit is None:
            continue
        problem = unit.check(node)
        if problem is None:
            entry.within_limits += 1
        else:
            entry.beyond[(problem, where)] = entry.beyond.get((problem, where), 0) + 1
    operators = sorted(groups.values(), key=lambda op: (op.supported, -op.uses, op.operator))
    return Inspection(loaded.origin, operators, [list(x.shape) for x in loaded.example_inputs], loaded.notes)

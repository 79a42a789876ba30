"""The op units, and the two lookups the pipeline needs: by torch target and by IR kind."""

from edgec.frontend.torch_ops import DECOMPOSED, IDENTITIES
from edgec.ops import (
    argmax,
    band,
    binary,
    cmsis_nn,
    conv,
    conv_small,
    conv_transpose,
    depthwise,
    eltwise,
    embedding,
    int4,
    int16,
    int16_units,
    l2_norm,
    layer_norm,
    linear,
    lut,
    matmul,
    movement,
    pool,
    recurrent,
    select,
    shape,
    softmax,
)
from edgec.ops.base import KINDS, unit_of  # noqa: F401 (unit_of: the lookup every later pass uses, from here)

_UNITS = (
    conv.UNIT,
    conv_transpose.UNIT,
    depthwise.UNIT,
    linear.UNIT,
    *pool.UNITS,
    *binary.UNITS,
    lut.UNIT,
    *softmax.UNITS,
    *movement.UNITS,
    *eltwise.UNITS,
    *shape.UNITS,
    *matmul.UNITS,
    *layer_norm.UNITS,
    *l2_norm.UNITS,
    *recurrent.UNITS,
    *int16_units.UNITS,
    *cmsis_nn.UNITS,
    band.UNIT,
    *argmax.UNITS,
    *embedding.UNITS,
    *select.UNITS,
)

KINDS.update({unit.kind: unit for unit in _UNITS})  # IR op kind -> unit (edgec.ops.base holds the registry)
OPS = {target: unit for unit in _UNITS for target in unit.targets}  # torch op -> unit that lowers it

# The kernel schema (edgec.ops.kernel) of every unit: C name -> (C text, the module describing it),
# the generated regions of runtime_c/include/edgec_nn.h (edgec.ops.c_header).
_SCHEMA_MODULES = (
    conv,
    conv_small,
    depthwise,
    linear,
    pool,
    eltwise,
    softmax,
    binary,
    conv_transpose,
    lut,
    movement,
    int16,
    matmul,
    layer_norm,
    l2_norm,
    recurrent,
    argmax,
    embedding,
    int4,
    select,
)
SCHEMA = {
    **{
        s.name: (s.typedef(), f"edgec/ops/{m.__name__.rsplit('.', 1)[1]}.py")
        for m in _SCHEMA_MODULES
        for s in getattr(m, "STRUCTS", ())
    },
    **{
        s.macro: (s.define(), f"edgec/ops/{m.__name__.rsplit('.', 1)[1]}.py")
        for m in _SCHEMA_MODULES
        for s in getattr(m, "SCRATCH", ())
    },
}


def operator_table() -> list[tuple[str, list[str]]]:
    """Every ATen operator edgec accepts, by the unit that lowers it (README's table is this)."""
    rows = [
        (
            f"{unit.family or unit.kind} (ops/{type(unit).__module__.rsplit('.', 1)[-1]}.py)",
            sorted(str(t) for t in unit.targets),
        )
        for unit in _UNITS
        if unit.targets
    ]
    rows.append(("removed before lowering (passes/normalize.py)", sorted(str(t) for t in IDENTITIES)))
    rows.append(("decomposed into the forms above (passes/normalize.py)", sorted(str(t) for t in DECOMPOSED)))
    rows.append(
        (
            "normalised to the forms above (passes/normalize.py)",
            ["every in-place `name_` overload of an operator above (e.g. aten.add_.Tensor, aten.hardswish_.default)"],
        )
    )
    return rows

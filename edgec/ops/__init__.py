"""The op units, and the two lookups the pipeline needs: by torch target and by IR kind."""
from edgec.ops import binary, conv, conv_transpose, depthwise, eltwise, linear, lut, movement, pool, shape, softmax

_UNITS = (conv.UNIT, conv_transpose.UNIT, depthwise.UNIT, linear.UNIT, *softmax.UNITS, lut.UNIT, *binary.UNITS, *movement.UNITS, *pool.UNITS, *eltwise.UNITS, *shape.UNITS)

KINDS = {unit.kind: unit for unit in _UNITS}  # IR op kind -> unit
OPS = {target: unit for unit in _UNITS for target in unit.targets}  # torch op -> unit that lowers it

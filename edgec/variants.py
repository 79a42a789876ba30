"""Which kernel each layer calls, and why: the report's "kernel" column.

The op units choose a kernel variant per target in OpDef.specialize (recorded in op.attrs: "isa",
the packed family the layer runs, and "wide", the DSP filter widened to int16) and name the C
function in the code they emit; this module reads both back and says in words what decided it.
"""
from __future__ import annotations

import re

from edgec.ir import Op
from edgec.ops.cmsis_nn import is_cmsis_nn
from edgec.ops.depthwise import PACKED_MAX_K

KERNEL_CALL = re.compile(r"\b((?:edgec|arm)_\w+)\s*\(")
ISA_NAMES = {"dsp": "DSP extension (SMLAD)", "mve": "Helium (MVE)"}
# Units whose specialize picks a packed kernel on cores with the DSP extension or Helium.
PACKED_KINDS = ("conv2d", "depthwise_conv2d", "conv_transpose2d", "fully_connected", "add", "binary")


def kernel_name(code: str) -> str:
    """The first edgec_* or CMSIS-NN arm_* function the layer's emitted C calls ('' for a view: no code)."""
    calls = [m.group(1) for m in KERNEL_CALL.finditer(code) if not m.group(1).endswith("_get_buffer_size")]
    return calls[0] if calls else ""


def kernel_reason(op: Op, target, in_place: bool) -> str:
    """Why the layer runs the kernel it runs, in one phrase."""
    isa, kind = op.attrs.get("isa"), op.kind
    if kind == "reshape":
        return "a view of its input: no code, no bytes"
    if is_cmsis_nn(kind):
        return "Arm's CMSIS-NN kernel (--kernels cmsis-nn)"
    if op.attrs.get("weight_bits") == 4:
        reason = "int4 weights, CMSIS-NN's s4 packing" + (f"; {ISA_NAMES['dsp']}" if op.attrs.get("dsp") else "")
        return reason + ("; runs in place over its input" if in_place else "")
    if isa in ISA_NAMES:
        reason = f"packed kernel: {target.name} has the {ISA_NAMES[isa]}"
        if isa == "dsp" and "wide" in op.attrs:
            why = f"--opt {target.opt}" + (f": {op.attrs['layout_reason']}" if "layout_reason" in op.attrs else "")
            reason += (f"; filter widened to int16 ({why}; twice the flash)" if op.attrs["wide"]
                       else f"; int8 filter ({why})")
    elif kind not in PACKED_KINDS:
        reason = "portable kernel (the only one this op has)"
    elif not (target.dsp or target.mve):
        reason = f"portable kernel: {target.name} has neither the DSP extension nor Helium"
    elif op.attrs.get("groups", 1) != 1:
        reason = "portable kernel: grouped convolutions have no packed kernel"
    elif kind == "depthwise_conv2d":
        reason = (f"portable kernel: the packed one needs channel multiplier 1 and a filter at most "
                  f"{PACKED_MAX_K} rows high")
    else:
        reason = "portable kernel"
    return reason + ("; runs in place over its input" if in_place else "")

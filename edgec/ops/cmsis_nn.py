"""`--kernels cmsis-nn`: the layers Arm's CMSIS-NN has a kernel for call it instead of edgec's.

For users who must ship Arm's library, and for measuring edgec's kernels against it in one run.
edgec's golden kernels are CMSIS-NN's arithmetic, so each unit here is the edgec unit it replaces
with another emit: the same finalized constants (per-channel multipliers and shifts, int32 bias,
OHWI / 1HWC filters: CMSIS-NN's layouts) handed to CMSIS-NN's API, its context buffer planned in
the arena with the size the checkout's own get_buffer_size function gives for the core
(edgec.targets.cmsis_nn). `select_cmsis_nn_kernels` records them as the layers' kernels after
specialization (op.kernel.unit, like the int16 units); layers CMSIS-NN has no kernel for keep
edgec's, and the build says which.

The CMSIS-NN kernels do not run in place (their in-place behaviour is not part of Arm's API), and
the Helium fully connected kernel's per-row sums (arm_vector_sum_s8's bias + input offset * the
row's weight sum, which TFLite Micro computes once at Prepare) are computed here at compile time
and kept in flash.
"""

from __future__ import annotations

import numpy as np

from edgec.c_format import braced, initializer
from edgec.ir import Graph, KernelChoice, Op
from edgec.numerics import wrap_int32
from edgec.ops.base import CCall
from edgec.ops.conv import Conv2d
from edgec.ops.depthwise import DepthwiseConv2d
from edgec.ops.eltwise import Add
from edgec.ops.int16_units import VIEW_KINDS
from edgec.ops.linear import FullyConnected
from edgec.ops.pool import AvgPool2d, MaxPool2d
from edgec.ops.softmax import Softmax
from edgec.targets import cmsis_nn_build as library
from edgec.targets.cmsis_nn import commit

PREFIX = "cmsis_nn_"


def _tile(pair) -> str:
    return braced([f".w = {int(pair[1])}", f".h = {int(pair[0])}"])


def _activation(attrs) -> str:
    return braced([f".min = {int(attrs['act_min'])}", f".max = {int(attrs['act_max'])}"])


def _dims(shape) -> str:
    n, h, w, c = (int(v) for v in shape)
    return initializer([f".n = {n}", f".h = {h}", f".w = {w}", f".c = {c}"])


def _checked(call: str) -> str:
    """A CMSIS-NN call as edgec statements: any status but success fails the layer."""
    return (
        f"const arm_cmsis_nn_status result = {call};\n"
        "    status |= result == ARM_CMSIS_NN_SUCCESS ? EDGEC_OK : EDGEC_ARG_ERROR;"
    )


def _context(names, op: Op, size_check: str | None) -> str:
    """The cmsis_nn_context over the layer's planned scratch; in a verify build (EDGEC_CHECK_WRITES)
    CMSIS-NN's own get_buffer_size, compiled for the core, first proves the plan big enough."""
    size = op.attrs["cmsis_nn_buffer"]
    lines = [f"const cmsis_nn_context ctx = {braced([names.scratch(op) if size else 'NULL', size])};"]
    if size_check is not None:
        lines += [
            "#if defined(EDGEC_CHECK_WRITES)",
            f"    const int32_t needed = {size_check};",
            f"    if (needed > {size}) {{",
            "        status |= EDGEC_ARG_ERROR;",
            "    }",
            "#endif",
        ]
    return "\n    ".join(lines)


def _quant(p: str, op: Op) -> tuple[list, list]:
    a = op.attrs
    constants = [("int32_t", f"{p}multiplier", a["multiplier"]), ("int32_t", f"{p}shift", a["shift"])]
    # CMSIS-NN's struct points to non-const arrays it only reads: the flash arrays are cast.
    params = [
        (
            "cmsis_nn_per_channel_quant_params",
            f"{p}quant",
            initializer([f"(int32_t *){p}multiplier", f"(int32_t *){p}shift"]),
        )
    ]
    return constants, params


def _bias(p: str, op: Op, channels: int) -> tuple:
    """The int32 bias constant (zeros for a layer without one: every CMSIS-NN path reads it)."""
    bias = op.attrs["bias"]
    return ("int32_t", f"{p}bias", np.zeros(channels, np.int32) if bias is None else np.asarray(bias, np.int32))


class _ContextBuffer:
    """A CMSIS-NN layer whose context buffer (op.attrs["cmsis_nn_buffer"] bytes) is its scratch;
    it never runs in place. By default it takes every layer of its kind and needs no buffer."""

    c_function = ""

    def kernel_function(self, op: Op) -> str:
        return self.c_function

    @staticmethod
    def accepts(op: Op, graph: Graph) -> bool:
        return True

    def buffer_bytes(self, root, op, graph, target) -> int:
        return 0

    def scratch_bytes(self, op, graph, target) -> int:
        return op.attrs.get("cmsis_nn_buffer", 0)

    def in_place(self, op, graph, target):
        return ()


class _Convolution(_ContextBuffer):
    """What arm_convolve_wrapper_s8 and arm_depthwise_conv_wrapper_s8 share: their arguments, and
    a params struct that differs only by the depthwise channel multiplier."""

    params_type = ""
    depthwise = False

    def _ctypes_params(self, op, graph):
        a, x_t, out_t = op.attrs, graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        tiles = [library.Tile(a[key][1], a[key][0]) for key in ("stride", "pad", "dilation")]
        activation = library.Activation(a["act_min"], a["act_max"])
        if self.depthwise:
            return library.DwConvParams(-x_t.zero_point, out_t.zero_point, a["ch_mult"], *tiles, activation)
        return library.ConvParams(-x_t.zero_point, out_t.zero_point, *tiles, activation)

    def buffer_bytes(self, root, op, graph, target) -> int:
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        sizing = library.depthwise_buffer_bytes if self.depthwise else library.conv_buffer_bytes
        return sizing(
            root,
            target,
            self._ctypes_params(op, graph),
            library.dims(x_t.shape),
            library.dims(op.attrs["weight"].shape),
            library.dims(out_t.shape),
        )

    def emit(self, op, graph, names) -> CCall:
        a, x_t, out_t = op.attrs, graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        p = names.symbol(op, "")
        constants, params = _quant(p, op)
        constants.insert(0, ("int8_t", f"{p}weights", a["weight"]))
        constants.append(_bias(p, op, out_t.shape[3]))
        multiplier = [f".ch_mult = {a['ch_mult']}"] if self.depthwise else []
        params += [
            (
                self.params_type,
                f"{p}params",
                initializer(
                    [f".input_offset = {-x_t.zero_point}", f".output_offset = {out_t.zero_point}", *multiplier]
                    + [f".stride = {_tile(a['stride'])}", f".padding = {_tile(a['pad'][:2])}"]
                    + [f".dilation = {_tile(a['dilation'])}", f".activation = {_activation(a)}"]
                ),
            ),
            ("cmsis_nn_dims", f"{p}input_dims", _dims(x_t.shape)),
            ("cmsis_nn_dims", f"{p}filter_dims", _dims(a["weight"].shape)),
            ("cmsis_nn_dims", f"{p}bias_dims", _dims((1, 1, 1, out_t.shape[3]))),
            ("cmsis_nn_dims", f"{p}output_dims", _dims(out_t.shape)),
        ]
        size = f"{self.c_function}_get_buffer_size(&{p}params, &{p}input_dims, &{p}filter_dims, &{p}output_dims)"
        call = (
            f"{self.c_function}(&ctx, &{p}params, &{p}quant, &{p}input_dims, {names.ptr(op.inputs[0])}, "
            f"&{p}filter_dims, {p}weights, &{p}bias_dims, {p}bias, &{p}output_dims, {names.ptr(op.outputs[0])})"
        )
        return CCall(f"{{\n    {_context(names, op, size)}\n    {_checked(call)}\n    }}", constants, params)


class CmsisConv2d(_Convolution, Conv2d):
    """arm_convolve_wrapper_s8 (it picks 1x1, 1xN or the general kernel): ungrouped convolutions."""

    kind = PREFIX + "conv2d"
    targets = frozenset()
    runtime_sources = ()
    c_function, params_type = "arm_convolve_wrapper_s8", "cmsis_nn_conv_params"

    @staticmethod
    def accepts(op: Op, graph: Graph) -> bool:
        return op.attrs["groups"] == 1


class CmsisDepthwiseConv2d(_Convolution, DepthwiseConv2d):
    """arm_depthwise_conv_wrapper_s8 (3x3, the DSP/Helium 'opt' kernel or the generic one)."""

    kind = PREFIX + "depthwise_conv2d"
    targets = frozenset()
    runtime_sources = ()
    c_function, params_type, depthwise = "arm_depthwise_conv_wrapper_s8", "cmsis_nn_dw_conv_params", True

    @staticmethod
    def accepts(op: Op, graph: Graph) -> bool:
        return graph.tensors[op.inputs[0]].shape[0] == 1  # the wrapper's kernels take one batch


class CmsisFullyConnected(_ContextBuffer, FullyConnected):
    """arm_fully_connected_s8 (one multiplier) or arm_fully_connected_per_channel_s8; every leading
    index of the input is a batch."""

    kind = PREFIX + "fully_connected"
    targets = frozenset()
    runtime_sources = ()

    def buffer_bytes(self, root, op, graph, target) -> int:
        rows, cols = op.attrs["weight"].shape
        kernel_sums = library.fully_connected_buffer_bytes(root, target, library.dims((cols, 1, 1, rows)))
        op.attrs["cmsis_nn_kernel_sums"] = kernel_sums > 0
        if kernel_sums and kernel_sums != 4 * rows:
            raise ValueError(f"arm_fully_connected_s8 wants {kernel_sums} B of context, not {rows} kernel sums")
        return 0  # the kernel sums are constants (flash), not scratch

    def kernel_function(self, op: Op) -> str:
        return "arm_fully_connected_per_channel_s8" if len(op.attrs["multiplier"]) > 1 else "arm_fully_connected_s8"

    def emit(self, op, graph, names) -> CCall:
        a, x_t, out_t = op.attrs, graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        rows, cols = a["weight"].shape
        batches = x_t.elements // cols
        p = names.symbol(op, "")
        per_channel = len(a["multiplier"]) > 1
        constants = [("int8_t", f"{p}weights", a["weight"]), _bias(p, op, rows)]
        params = [
            (
                "cmsis_nn_fc_params",
                f"{p}params",
                initializer(
                    [f".input_offset = {-x_t.zero_point}", ".filter_offset = 0", f".output_offset = {out_t.zero_point}"]
                    + [f".activation = {_activation(a)}"]
                ),
            ),
            ("cmsis_nn_dims", f"{p}input_dims", _dims((batches, 1, 1, cols))),
            ("cmsis_nn_dims", f"{p}filter_dims", _dims((cols, 1, 1, rows))),
            ("cmsis_nn_dims", f"{p}bias_dims", _dims((1, 1, 1, rows))),
            ("cmsis_nn_dims", f"{p}output_dims", _dims((batches, 1, 1, rows))),
        ]
        if per_channel:
            quant_constants, quant_params = _quant(p, op)
            constants += quant_constants
            params += quant_params
        else:
            params.append(
                (
                    "cmsis_nn_per_tensor_quant_params",
                    f"{p}quant",
                    initializer([f".multiplier = {int(a['multiplier'][0])}", f".shift = {int(a['shift'][0])}"]),
                )
            )
        buffer = ["NULL", 0]
        if a.get("cmsis_nn_kernel_sums"):
            constants.append(("int32_t", f"{p}kernel_sums", kernel_sums(a["weight"], constants[1][2], -x_t.zero_point)))
            buffer = [f"(void *){p}kernel_sums", 4 * rows]
        call = (
            f"{op.kernel.function}(&ctx, &{p}params, &{p}quant, &{p}input_dims, {names.ptr(op.inputs[0])}, "
            f"&{p}filter_dims, "
            f"{p}weights, &{p}bias_dims, {p}bias, &{p}output_dims, {names.ptr(op.outputs[0])})"
        )
        return CCall(
            f"{{\n    const cmsis_nn_context ctx = {braced(buffer)};\n    {_checked(call)}\n    }}", constants, params
        )


def kernel_sums(weight: np.ndarray, bias: np.ndarray, input_offset: int) -> np.ndarray:
    """arm_vector_sum_s8's result for a symmetric filter: bias + input_offset * each row's weight
    sum, in int32 arithmetic (wrapping as the C does)."""
    sums = np.asarray(weight, np.int64).sum(axis=1) * int(input_offset) if input_offset else 0
    return wrap_int32(np.asarray(bias, np.int64) + sums).astype(np.int32)


class CmsisAvgPool2d(_ContextBuffer, AvgPool2d):
    """arm_avgpool_s8: TFLite's divisor (the in-bounds taps)."""

    kind, c_function = PREFIX + "avg_pool2d", "arm_avgpool_s8"
    targets = frozenset()
    runtime_sources = ()

    @staticmethod
    def accepts(op: Op, graph: Graph) -> bool:
        return op.attrs["divisor"] == "in_bounds"

    def buffer_bytes(self, root, op, graph, target) -> int:
        _, _, wo, c = graph.tensors[op.outputs[0]].shape
        return library.avgpool_buffer_bytes(root, target, wo, c)

    def emit(self, op, graph, names) -> CCall:
        return _emit_pool(
            op,
            graph,
            names,
            size=f"arm_avgpool_s8_get_buffer_size({graph.tensors[op.outputs[0]].shape[2]}, "
            f"{graph.tensors[op.outputs[0]].shape[3]})",
        )


class CmsisMaxPool2d(_ContextBuffer, MaxPool2d):
    """arm_max_pool_s8."""

    kind, c_function = PREFIX + "max_pool2d", "arm_max_pool_s8"
    targets = frozenset()
    runtime_sources = ()

    def emit(self, op, graph, names) -> CCall:
        return _emit_pool(op, graph, names, size=None)


def _emit_pool(op, graph, names, size: str | None) -> CCall:
    a, x_t, out_t = op.attrs, graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    p = names.symbol(op, "")
    params = [
        (
            "cmsis_nn_pool_params",
            f"{p}params",
            initializer(
                [
                    f".stride = {_tile(a['stride'])}",
                    f".padding = {_tile(a['pad'][:2])}",
                    f".activation = {_activation(a)}",
                ]
            ),
        ),
        ("cmsis_nn_dims", f"{p}input_dims", _dims(x_t.shape)),
        ("cmsis_nn_dims", f"{p}filter_dims", _dims((1, *a["kernel"], 1))),
        ("cmsis_nn_dims", f"{p}output_dims", _dims(out_t.shape)),
    ]
    call = (
        f"{op.kernel.function}(&ctx, &{p}params, &{p}input_dims, {names.ptr(op.inputs[0])}, &{p}filter_dims, "
        f"&{p}output_dims, {names.ptr(op.outputs[0])})"
    )
    return CCall(f"{{\n    {_context(names, op, size)}\n    {_checked(call)}\n    }}", [], params)


class CmsisAdd(_ContextBuffer, Add):
    """arm_elementwise_add_s8: the same-shape add (TFLite's ADD arithmetic, left shift 20)."""

    kind, c_function = PREFIX + "add", "arm_elementwise_add_s8"
    runtime_sources = ()

    def emit(self, op, graph, names) -> CCall:
        q = op.attrs["params"]
        arguments = ", ".join(
            str(int(q[k]))
            for k in (
                "input1_offset",
                "input1_multiplier",
                "input1_shift",
                "input2_offset",
                "input2_multiplier",
                "input2_shift",
                "left_shift",
            )
        )
        outputs = ", ".join(
            str(int(q[k])) for k in ("output_offset", "output_multiplier", "output_shift", "act_min", "act_max")
        )
        call = (
            f"{op.kernel.function}({names.ptr(op.inputs[0])}, {names.ptr(op.inputs[1])}, {arguments}, "
            f"{names.ptr(op.outputs[0])}, {outputs}, {graph.tensors[op.outputs[0]].elements})"
        )
        return CCall(f"{{\n    {_checked(call)}\n    }}", [], [])  # a block: several adds declare `result`


class CmsisSoftmax(_ContextBuffer, Softmax):
    """arm_softmax_s8 over rows: softmax along the stored last axis."""

    kind, c_function = PREFIX + "softmax", "arm_softmax_s8"
    targets = frozenset()
    runtime_sources = ()

    @staticmethod
    def accepts(op: Op, graph: Graph) -> bool:
        return op.attrs["desc"]["inner"] == 1

    def emit(self, op, graph, names) -> CCall:
        d = op.attrs["desc"]
        return CCall(
            f"{op.kernel.function}({names.ptr(op.inputs[0])}, {d['outer']}, {d['axis_size']}, {d['input_multiplier']}, "
            f"{d['input_left_shift']}, {d['diff_min']}, {names.ptr(op.outputs[0])});",
            [],
            [],
        )


UNITS = (
    CmsisConv2d(),
    CmsisDepthwiseConv2d(),
    CmsisFullyConnected(),
    CmsisAvgPool2d(),
    CmsisMaxPool2d(),
    CmsisAdd(),
    CmsisSoftmax(),
)
_BY_EDGEC_KIND = {unit.kind[len(PREFIX) :]: unit for unit in UNITS}


def select_cmsis_nn_kernels(graph: Graph, target, root) -> list[str]:
    """Every layer CMSIS-NN has a kernel for is compiled by its CMSIS-NN unit (op.kernel), with its
    context buffer sized by the checkout; returns what was chosen, one line (the rest keep edgec's)."""
    chosen, kept = [], {}
    for op in graph.ops:
        unit = _BY_EDGEC_KIND.get(op.kind)
        if unit is None or op.attrs.get("weight_bits") == 4 or not unit.accepts(op, graph):  # int4: edgec's
            if op.kind not in VIEW_KINDS:
                kept[op.kind] = kept.get(op.kind, 0) + 1
            continue
        op.attrs["cmsis_nn_buffer"] = unit.buffer_bytes(root, op, graph, target)
        op.attrs["isa"], op.attrs["wide"] = None, False
        op.kernel = KernelChoice(
            unit.kernel_function(op), "cmsis-nn", "Arm's CMSIS-NN kernel (--kernels cmsis-nn)", unit=unit.kind
        )
        chosen.append(op)
    total = len(chosen) + sum(kept.values())
    line = f"--kernels cmsis-nn: {len(chosen)} of {total} layers call CMSIS-NN ({commit(root)[:12]})"
    if kept:
        line += "; edgec's kernels for the rest: " + ", ".join(
            f"{kind} x{count}" for kind, count in sorted(kept.items())
        )
    return [line]

"""int4 weights for transposed convolution: edgec_conv_transpose_s4 against the golden, byte for byte.

The golden unpacks the packed phase rows (edgec.ops.conv_transpose.conv_transpose_s4_weights) and
runs the int8 golden. The kernel runs on the host (UBSan, ctypes) on random layers (any groups,
strides, dilations, paddings), under QEMU on Cortex-M4 and Cortex-M55 at -O2, -Os and -O0 (driver
tests/data/port/conv_transpose_kernels.c), and in a model: `--weights int4` and `--int4-layers`
make a decoder's ConvTranspose2d int4 (golden == sanitized host C == QEMU, verify's layer check),
and a PT2E program whose transposed convolution's weight quantize node says [-8, 7] imports as int4.
"""

from __future__ import annotations

import ctypes as C
import dataclasses
import struct

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgec.frontend import precision
from edgec.frontend.quantize import EdgecQuantizer, quantize
from edgec.ops import OPS, conv_transpose, int4
from edgec.ops.conv_transpose import PORTABLE, conv_transpose_s4_filter, conv_transpose_s4_weights, largest_phase_taps
from edgec.ops.kernel_layout import DSP
from edgec.ops.qspec import ANNOTATION_KEY
from edgec.pipeline import compile_for, prepare, quantize_model
from edgec.targets import toolchain
from edgec.tools.verify import check_against_reference
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import CONV_TRANSPOSE_INT_FIELDS, ConvTransposeDesc, ptr
from tests.test_int4 import _bit_exact, _int4_kinds
from tests.test_kernels_conv_transpose import (
    DRIVER,
    GUARD,
    HEADER_WORDS,
    SETTINGS,
    Case,
    _padded,
    bench_layers,
    c_desc,
    random_case,
    useful_macs,
)

ISA_CODE = {PORTABLE: 3, DSP: 4}  # the driver's ISA_S4, ISA_S4_DSP
OPTS = ("-O2", "-Os", "-O0")


def int4_case(rng, **options) -> Case:
    """random_case with its weights in int4's range (often its extremes -8 and 7)."""
    case = random_case(rng, **options)
    if rng.random() < 0.15:
        w = rng.choice(np.array([-8, 7], np.int8), case.w.shape)
    else:
        w = rng.integers(-8, 8, case.w.shape).astype(np.int8)
    return dataclasses.replace(case, w=w)


def _layout(case: Case, isa: str) -> dict:
    return dict(stride=case.stride, dilation=case.dilation, groups=case.groups, isa=isa)


def s4_desc(case: Case, isa: str = PORTABLE) -> dict:
    values = case.desc(PORTABLE)
    values["filter"] = conv_transpose_s4_filter(case.w, **_layout(case, isa))
    return values


def s4_golden(case: Case, isa: str = PORTABLE) -> np.ndarray:
    """Unpack the packed filter, then the int8 golden."""
    w = conv_transpose_s4_weights(s4_desc(case, isa)["filter"], case.w.shape, **_layout(case, isa))
    return dataclasses.replace(case, w=w).golden()


def s4_scratch(case: Case, isa: str) -> int:
    k = largest_phase_taps(case.w.shape, case.stride, case.dilation)
    return 0 if isa == PORTABLE else 5 * (-(-k // 8) * 8)


def test_packed_filter_holds_every_weight_once_and_reads_back():
    rng = np.random.default_rng(3)
    for _ in range(50):
        case = int4_case(rng, groups_kind="one")
        packed = s4_desc(case)["filter"]
        assert packed.size == (case.w.size + 1) // 2
        for isa in (PORTABLE, DSP):
            back = conv_transpose_s4_weights(s4_desc(case, isa)["filter"], case.w.shape, **_layout(case, isa))
            np.testing.assert_array_equal(back, case.w)
        # the nibbles are the portable int8 filter's bytes, in its order
        plain = case.desc(PORTABLE)["filter"]
        np.testing.assert_array_equal(int4.unpack_int4(packed, plain.size), plain)


def run_s4(lib, case: Case) -> tuple[int, np.ndarray]:
    fn = lib.edgec_conv_transpose_s4
    fn.argtypes = [C.POINTER(ConvTransposeDesc), C.POINTER(C.c_int8), C.POINTER(C.c_int8)]
    fn.restype = C.c_int
    keep: list = []
    desc = c_desc(s4_desc(case), keep)
    x = np.ascontiguousarray(case.x)
    size = s4_golden(case).size
    out = np.full(size + GUARD, 0x5A, dtype=np.int8)
    status = fn(C.byref(desc), ptr(x, C.c_int8), ptr(out, C.c_int8))
    assert (out[size:] == 0x5A).all(), "wrote past its output"
    return status, out[:size]


@settings(max_examples=200, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), groups_kind=st.sampled_from(["one", "depthwise", "grouped"]))
def test_s4_golden_matches_c(kernel_lib, seed, groups_kind):
    case = int4_case(np.random.default_rng(seed), groups_kind=groups_kind)
    status, out = run_s4(kernel_lib, case)
    assert status == 0
    np.testing.assert_array_equal(out, s4_golden(case).ravel())


def test_s4_refuses_what_the_int8_kernel_refuses(kernel_lib):
    case = int4_case(np.random.default_rng(5), groups_kind="one")
    bad = dataclasses.replace(case, shift=np.full_like(case.shift, 40))
    assert run_s4(kernel_lib, bad)[0] == -1


def s4_record(case: Case, isa: str, expected_size: int) -> bytes:
    values = s4_desc(case, isa)
    arrays = [case.x, values["filter"], values["bias"], values["multiplier"], values["shift"]]
    payload = b"".join(_padded(np.ascontiguousarray(a).tobytes()) for a in arrays if a is not None)
    bias_words = 0 if values["bias"] is None else len(values["bias"])
    header = [ISA_CODE[isa], len(payload), expected_size, s4_scratch(case, isa), 0, len(values["filter"]), bias_words]
    header += [int(values[name]) for name in CONV_TRANSPOSE_INT_FIELDS]
    return struct.pack(f"<{HEADER_WORDS}i", *header, *[0] * (HEADER_WORDS - len(header))) + payload


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize("opt", OPTS)
def test_s4_on_cortex_m(target, opt, tmp_path):
    rng = np.random.default_rng(len(target) + len(opt))
    cases = [(int4_case(rng, max_c=12), PORTABLE) for _ in range(30)]
    cases += [(int4_case(rng, max_c=40, groups_kind="one"), DSP) for _ in range(60)]
    cases += [(case, DSP) for case in bench_layers(rng)]  # the two decoder layers (K up to 64 * 4)
    cases = [(dataclasses.replace(c, w=np.clip(c.w, -8, 7)), isa) for c, isa in cases]
    expected = [s4_golden(case, isa).ravel() for case, isa in cases]
    elf = toolchain.cross_compile(
        target,
        [DRIVER, ROOT / "runtime_c" / "src" / "conv" / "edgec_conv_transpose_s8.c"],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "kernels.elf",
        opt=opt,
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(b"".join(s4_record(c, isa, e.size) for (c, isa), e in zip(cases, expected)))
    counts = toolchain.count_instructions(target, elf, timeout=300, cwd=tmp_path)
    data, at, failures = (tmp_path / "results.bin").read_bytes(), 0, []
    for (case, isa), want in zip(cases, expected):
        status, guards = struct.unpack_from("<2i", data, at)
        out = np.frombuffer(data, np.int8, want.size, at + 8)
        at += 8 + want.size
        if status != 0 or not guards or not np.array_equal(out, want):
            failures.append(
                f"{isa} status {status} guards {guards}: {case.x.shape} {case.w.shape} stride {case.stride}"
            )
    assert at == len(data)
    insns = counts["insns"][-2:]
    print(
        f"{target} {opt} int4 _dsp decoder layers, instructions per MAC:",
        [i / useful_macs(c) for i, (c, _) in zip(insns, cases[-2:])],
    )
    assert not failures, f"{len(failures)} of {len(cases)} fail:\n" + "\n".join(failures[:8])


# -- models ------------------------------------------------------------------------------------


class Decoder(torch.nn.Module):
    """A small convolutional decoder: an encoder convolution, a ConvTranspose2d upsampling by 2, a
    grouped one, and a ConvTranspose1d-free 1x1 head."""

    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Conv2d(2, 8, 3, stride=2, padding=1)
        self.up = torch.nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1)
        self.grouped = torch.nn.ConvTranspose2d(6, 4, 2, stride=1, groups=2)
        self.head = torch.nn.Conv2d(4, 1, 1)

    def forward(self, x):
        x = torch.relu(self.enc(x))
        x = torch.relu(self.up(x))
        return self.head(torch.relu(self.grouped(x)))


def _decoder(**options):
    torch.manual_seed(0)
    model = Decoder().eval()
    rng = np.random.default_rng(0)
    calibration = rng.standard_normal((16, 1, 2, 8, 8)).astype(np.float32)
    return quantize_model(
        model, example_inputs=(torch.zeros(1, 2, 8, 8),), warn=lambda _: None, calibration=calibration, **options
    )


def _floats():
    return np.random.default_rng(1).standard_normal((4, 1, 2, 8, 8)).astype(np.float32)


def test_decoder_int4_is_bit_exact_on_host_and_passes_the_layer_check(tmp_path):
    compiled = compile_for(_decoder(weights="int4"))
    assert _int4_kinds(compiled) == {"conv2d": 2, "conv_transpose2d": 2}
    assert {op.kernel.function for op in compiled.graph.ops if op.kind == "conv_transpose2d"} == {
        "edgec_conv_transpose_s4"
    }
    _bit_exact(compiled, _floats(), tmp_path)
    assert check_against_reference(compiled, _floats()).checked == len(compiled.graph.ops)


def test_int4_layers_selects_a_transposed_convolution():
    compiled = compile_for(_decoder(int4_layers=["up"]))
    assert _int4_kinds(compiled) == {"conv_transpose2d": 1}
    up = next(op for op in compiled.graph.ops if op.attrs.get("weight_bits") == 4)
    assert up.attrs["weight"].min() >= -7 and up.attrs["weight"].max() <= 7


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_decoder_int4_is_bit_exact_on_cortex_m(target, tmp_path):
    _bit_exact(compile_for(_decoder(weights="int4"), target), _floats()[:2], tmp_path)


class _FullRangeInt4Quantizer(EdgecQuantizer):
    """A PT2E quantizer of another toolchain: the transposed convolutions' weights int4 over the
    whole [-8, 7] (per output channel when groups is 1)."""

    def annotate(self, model):
        super().annotate(model)
        for node in model.graph.nodes:
            if node.op == "call_function" and node.target in OPS and OPS[node.target].kind == "conv_transpose2d":
                spec = conv_transpose.int4_transposed_qspec(node)
                node.meta[ANNOTATION_KEY].input_qspec_map[node.args[1]] = dataclasses.replace(
                    spec, quant_min=-8, quant_max=7
                )
        return model


def test_pt2e_program_with_int4_transposed_weights_imports_exactly(tmp_path):
    torch.manual_seed(0)
    model = Decoder().eval()
    example = (torch.zeros(1, 2, 8, 8),)
    loaded, module = prepare(torch.export.export(model, example))
    samples = np.random.default_rng(0).standard_normal((16, 1, 2, 8, 8)).astype(np.float32)
    converted = quantize(module, [(torch.from_numpy(x),) for x in samples], None, _FullRangeInt4Quantizer())
    program = torch.export.export(converted, example)
    compiled = compile_for(quantize_model(program, calibration=None, warn=lambda _: None))
    assert _int4_kinds(compiled) == {"conv_transpose2d": 2}
    assert min(int(op.attrs["weight"].min()) for op in compiled.graph.ops if "weight_bits" in op.attrs) == -8
    _bit_exact(compiled, _floats(), tmp_path)
    assert check_against_reference(compiled, _floats()).checked == len(compiled.graph.ops)


def test_the_chooser_measures_transposed_layers_rounded_to_nearest():
    """Transposed convolutions are choosable; their sensitivity is that of their nearest-rounded
    int4 weights (the rounding's statistics are for linear and convolution layers), not zero."""
    torch.manual_seed(0)
    _, module = prepare(torch.export.export(Decoder().eval(), (torch.zeros(1, 2, 8, 8),)))
    layers = precision.choosable_layers(module)
    assert [layer.path for layer in layers] == ["enc", "up", "grouped", "head"]
    samples = [(torch.from_numpy(x),) for x in _floats()]
    for rounding in ("gptq", "nearest"):
        precision.measure_sensitivities(module, layers, samples, rounding)
        assert all(0 < layer.noise < 1 for layer in layers), (rounding, [layer.noise for layer in layers])


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


def test_attention_weights_are_fully_connected_layers_and_its_matmuls_have_none(tmp_path):
    """Attention's constant weights (the q/k/v and output projections) lower to fully_connected,
    which --weights int4 covers; its two products (q k^T, weights v) multiply activations, with no
    constant operand to make int4 (a torch.matmul with one constant matrix lowers to a linear layer)."""
    torch.manual_seed(0)
    floats = np.random.default_rng(0).standard_normal((8, 1, 5, 16)).astype(np.float32)
    quantized = quantize_model(
        _Attention().eval(),
        example_inputs=(torch.zeros(1, 5, 16),),
        warn=lambda _: None,
        calibration=floats,
        weights="int4",
    )
    compiled = compile_for(quantized)
    assert _int4_kinds(compiled) == {"fully_connected": 2}
    assert [op.attrs.get("weight_bits") for op in compiled.graph.ops if op.kind == "batch_matmul"] == [None, None]
    _bit_exact(compiled, floats[:4], tmp_path)
    assert check_against_reference(compiled, floats[:4]).checked >= 4

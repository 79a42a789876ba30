"""int16 activations (the 16x8 scheme) end to end: `--activations int16` and `--int16-layers`.

DS-CNN and ResNet-8 built int16 are bit-exact golden == host C (sanitizers) == QEMU Cortex-M4 and
M55, pass the layer check, and are closer to the float model than int8; a mixed model gets
int8 <-> int16 requantize ops where its precisions meet; a small model runs every int16 kernel;
layers without an int16 kernel, and beyond the kernels' scale limit, are refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest

from edgec.errors import EdgecError
from edgec.ops import unit_of
from edgec.pipeline import compile_for, emit, quantize_model
from edgec.tools.verify import (
    accuracy_summary,
    build_host,
    check_against_reference,
    compare,
    float_reference,
    golden_outputs,
    output_bytes,
    quantized_inputs,
    run_host,
    run_on,
)
from edgec.zoo import mlperf
from tests.device_support import ROOT, needs_toolchain
from tests.test_cli import run_cli

ZOO = ROOT / "edgec" / "zoo" / "mlperf.py"
MODELS = ROOT / "tests" / "data" / "int16_models.py"
CALIBRATION_SAMPLES = 32
SAMPLES = 4
# DS-CNN's second depthwise-separable block and its classifier: int16 between int8 layers.
DS_CNN_INT16_LAYERS = ("5", "10")


def _samples(model: str, count: int, seed: int) -> np.ndarray:
    return mlperf.calibration_data(model, count, seed)


@pytest.fixture(scope="module")
def quantized():
    """Each zoo model quantized once per precision ('int8', 'int16', 'mixed')."""
    cache = {}

    def get(model: str, precision: str):
        if (model, precision) not in cache:
            options = {"int16_layers": DS_CNN_INT16_LAYERS} if precision == "mixed" else {"activations": precision}
            cache[model, precision] = quantize_model(
                f"{ZOO}:{model}", warn=lambda _: None, calibration=_samples(model, CALIBRATION_SAMPLES, 0), **options
            )
        return cache[model, precision]

    return get


def _bit_exact(compiled, floats, tmp_path, sanitize=False) -> None:
    inputs = quantized_inputs(compiled.graph, floats)
    emit(compiled, tmp_path / "model", "model")
    if compiled.target.is_host:
        exe = build_host(tmp_path / "model", "model", tmp_path / "build", sanitize=sanitize)
        outputs = run_host(exe, inputs, output_bytes(compiled.graph))
    else:
        outputs = run_on(compiled, tmp_path / "model", "model", inputs, tmp_path / "build")
    result = compare(golden_outputs(compiled.graph, inputs), outputs)
    assert result.exact, f"{result.mismatched_samples} of {result.samples} samples differ ({result.mismatched_bytes} B)"


def _compute_kinds(compiled) -> set[str]:
    return {unit_of(op).kind for op in compiled.graph.ops if op.kind != "reshape"}


@pytest.mark.parametrize("model", ["ds_cnn", "resnet8"])
def test_int16_model_is_bit_exact_on_host_and_passes_the_layer_check(model, quantized, tmp_path):
    compiled = compile_for(quantized(model, "int16"))
    assert all(kind.endswith("_s16") for kind in _compute_kinds(compiled)), _compute_kinds(compiled)
    assert {compiled.graph.tensors[name].dtype for name in compiled.graph.tensors} == {"int16"}
    floats = _samples(model, SAMPLES, 1)
    _bit_exact(compiled, floats, tmp_path, sanitize=True)
    assert check_against_reference(compiled, floats).checked == len(
        [op for op in compiled.graph.ops if op.kind != "reshape"]
    )


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize("model", ["ds_cnn", "resnet8"])
def test_int16_model_is_bit_exact_on_target(model, target, quantized, tmp_path):
    compiled = compile_for(quantized(model, "int16"), target)
    if model == "ds_cnn":  # the DSP-extension (M4) or Helium (M55) conv, depthwise and FC kernels
        isa = "mve" if target == "cortex-m55" else "dsp"
        assert {f"edgec_{kind}_s16_{isa}" for kind in ("conv", "depthwise_conv", "fully_connected")} <= _kernels(
            compiled
        )
    _bit_exact(compiled, _samples(model, SAMPLES, 1), tmp_path)


def _kernels(compiled) -> set[str]:
    return {op.kernel.function for op in compiled.graph.ops}


@pytest.mark.parametrize("model", ["ds_cnn", "resnet8"])
def test_int16_output_is_closer_to_float_than_int8(model, quantized):
    floats = _samples(model, 8, 1)
    sqnr = {}
    for precision in ("int8", "int16"):
        compiled = compile_for(quantized(model, precision))
        outputs = golden_outputs(compiled.graph, quantized_inputs(compiled.graph, floats))
        sqnr[precision] = accuracy_summary(compiled, float_reference(compiled, floats), outputs)["output_sqnr_db"]
    assert sqnr["int16"] > sqnr["int8"] + 3.0, sqnr


@pytest.mark.parametrize("target", ["host", pytest.param("cortex-m55", marks=[needs_toolchain])])
def test_mixed_precision_model_requantizes_where_precisions_meet(target, quantized, tmp_path, edgec_cache):
    compiled = compile_for(quantized("ds_cnn", "mixed"), target)
    graph = compiled.graph
    requantizes = [op for op in graph.ops if unit_of(op).kind == "requantize_s16"]
    # into block 5, out of it, into the classifier, out of it (to the int8 softmax)
    assert [op.attrs["widen"] for op in requantizes] == [True, False, True, False]
    for op in requantizes:
        dtypes = [graph.tensors[op.inputs[0]].dtype, graph.tensors[op.outputs[0]].dtype]
        assert dtypes == (["int8", "int16"] if op.attrs["widen"] else ["int16", "int8"])
    kinds = [unit_of(op).kind for op in graph.ops]
    assert kinds.count("depthwise_conv2d_s16") == 1 and kinds.count("depthwise_conv2d") == 3
    assert "fully_connected_s16" in kinds and "softmax" in kinds
    floats = _samples("ds_cnn", SAMPLES, 1)
    _bit_exact(compiled, floats, tmp_path, sanitize=True)
    if target == "host":
        check_against_reference(compiled, floats)


@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["host", pytest.param("cortex-m4", marks=[needs_toolchain])])
def test_every_int16_kernel_in_one_model(target, tmp_path):
    quantized_model = quantize_model(
        f"{MODELS}:every_int16_kernel", calibration=None, warn=lambda _: None, activations="int16"
    )
    compiled = compile_for(quantized_model, target)
    assert _compute_kinds(compiled) == {
        "conv2d_s16",
        "depthwise_conv2d_s16",
        "fully_connected_s16",
        "lut_s16",
        "max_pool2d_s16",
        "avg_pool2d_s16",
        "binary_s16",
        "softmax_s16",
    }
    assert {op.attrs.get("op", "add") for op in compiled.graph.ops if unit_of(op).kind == "binary_s16"} == {
        "add",
        "mul",
    }
    floats = np.random.default_rng(1).standard_normal((SAMPLES, 3, 8, 8)).astype(np.float32)
    _bit_exact(compiled, floats, tmp_path, sanitize=True)
    check_against_reference(compiled, floats)


@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["host", pytest.param("cortex-m55", marks=[needs_toolchain])])
def test_int16_data_movement_and_standalone_clamp(target, tmp_path):
    """Copies move int16 elements as byte pairs (edgec_copy_s8); a ReLU that cannot fuse (its
    producer is a chunk) clamps through edgec_max_pool_s16's bounds."""
    quantized_model = quantize_model(f"{MODELS}:moves_data", calibration=None, warn=lambda _: None, activations="int16")
    compiled = compile_for(quantized_model, target)
    assert _compute_kinds(compiled) == {"conv2d_s16", "copy_s16", "clamp_s16", "fully_connected_s16"}
    floats = np.random.default_rng(1).standard_normal((SAMPLES, 3, 6, 6)).astype(np.float32)
    _bit_exact(compiled, floats, tmp_path, sanitize=True)
    check_against_reference(compiled, floats)


@pytest.mark.parametrize("int16_layer", ["a", "b"])
def test_input_read_by_int8_and_int16_layers_is_int16(int16_layer, tmp_path):
    """Each reader quantizes the float input itself: the input is int16 and the int8 reader gets
    it requantized (int16 layers fed int8 precision would fail the layer check)."""
    compiled = compile_for(
        quantize_model(f"{MODELS}:reads_input_twice", calibration=None, warn=lambda _: None, int16_layers=[int16_layer])
    )
    graph = compiled.graph
    assert graph.tensors[graph.inputs[0]].dtype == "int16"
    assert [unit_of(op).kind for op in graph.ops].count(
        "requantize_s16"
    ) == 2  # into the int8 conv, out of the int16 one
    floats = np.random.default_rng(1).standard_normal((SAMPLES, 3, 6, 6)).astype(np.float32)
    _bit_exact(compiled, floats, tmp_path, sanitize=True)
    check_against_reference(compiled, floats)


@pytest.mark.parametrize(
    "factory, line",
    [
        ("subtracts", r"sub with a constant operand.*self.conv\(x\) - 0.5"),
        ("scales_by_constant", r"mul with a constant operand.*self.conv\(x\) \* self.gain"),
    ],
)
def test_layer_without_int16_kernel_is_refused_by_name(factory, line):
    with pytest.raises(EdgecError, match=r"no int16 kernel.*\n.*" + line):
        compile_for(quantize_model(f"{MODELS}:{factory}", calibration=None, warn=lambda _: None, activations="int16"))


def test_operator_without_int16_kernel_is_refused_before_calibration():
    def no_calibration():
        raise AssertionError("calibrated before refusing")
        yield

    with pytest.raises(EdgecError, match=r"no int16 kernel.*\n.*conv_transpose2d.*up \(ConvTranspose2d\)"):
        quantize_model(
            f"{MODELS}:upsamples",
            calibration=None,
            progress=lambda _: no_calibration(),
            warn=lambda _: None,
            activations="int16",
        )
    # the same model compiles with the transposed convolution kept int8
    quantize_model(f"{MODELS}:upsamples", calibration=None, warn=lambda _: None, int16_layers=["conv"])


def test_effective_scale_beyond_the_int16_kernels_is_refused_by_name():
    quantized_model = quantize_model(
        f"{MODELS}:tiny_output_range", calibration=None, warn=lambda _: None, activations="int16"
    )
    with pytest.raises(EdgecError, match=r"hardtanh\(self.fc\(x\).*below 2\^7.*keep this layer int8"):
        compile_for(quantized_model)


def test_unknown_int16_layer_is_refused():
    with pytest.raises(EdgecError, match="no module named nope"):
        quantize_model(f"{MODELS}:subtracts", calibration=None, warn=lambda _: None, int16_layers=["conv", "nope"])


def test_a_batch_norm_folded_into_its_conv_names_the_conv():
    """--int16-layers bn selects the conv the BatchNorm was folded into (its output is the bn's)."""
    compiled = compile_for(
        quantize_model(f"{MODELS}:folds_batch_norm", calibration=None, warn=lambda _: None, int16_layers=["bn"])
    )
    assert [unit_of(op).kind for op in compiled.graph.ops][0] == "conv2d_s16"


def test_cli_builds_int16_and_mixed_models(tmp_path, capsys):
    code, out, err = run_cli(
        "build",
        f"{MODELS}:every_int16_kernel",
        "-o",
        tmp_path / "all",
        "--activations",
        "int16",
        "--quiet",
        capsys=capsys,
    )
    assert code == 0, err
    assert "edgec_softmax_s16(" in (tmp_path / "all" / "every_int16_kernel.c").read_text()
    code, out, err = run_cli(
        "build", f"{MODELS}:upsamples", "-o", tmp_path / "mixed", "--int16-layers", "conv", "--quiet", capsys=capsys
    )
    assert code == 0, err
    source = (tmp_path / "mixed" / "upsamples.c").read_text()
    assert "edgec_conv_s16(" in source and "edgec_requantize_s16_s8(" in source

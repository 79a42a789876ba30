"""Programs quantized by other PT2E flows: every Q/DQ form of a constant is read exactly, and
nothing is ever cast silently (a float weight behind a quantize node, an int32 bias)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import DerivedQuantizationSpec

from edgec.errors import EdgecError
from edgec.frontend.quantize import EdgecQuantizer
from edgec.frontend.torch_ops import CONVS, LINEARS
from edgec.ops.qspec import ANNOTATION_KEY
from edgec.pipeline import compile_model
from edgec.tools import verify
from tests.test_pipeline import Simple, _bit_exact

SHAPE = (1, 3, 13, 9)


class Int32BiasQuantizer(EdgecQuantizer):
    """EdgecQuantizer, plus the int32 bias ExecuTorch's and XNNPACK's quantizers give conv/linear
    (scale s_in * s_w, derived from the two observers)."""

    def annotate(self, model):
        super().annotate(model)
        for node in model.graph.nodes:
            if node.op == "call_function" and node.target in CONVS | LINEARS and len(node.args) > 2:
                annotation = node.meta[ANNOTATION_KEY]
                x, w = node.args[0], node.args[1]
                per_channel = node.target in CONVS
                annotation.input_qspec_map[node.args[2]] = DerivedQuantizationSpec(
                    derived_from=[(x, node), (w, node)],
                    derive_qparams_fn=_bias_qparams,
                    dtype=torch.int32,
                    quant_min=-(2**31),
                    quant_max=2**31 - 1,
                    ch_axis=0,
                    qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric,
                )
        return model


def _bias_qparams(observers):
    act_scale, _ = observers[0].calculate_qparams()
    weight_scale, _ = observers[1].calculate_qparams()
    scale = (act_scale * weight_scale).to(torch.float32)
    return scale, torch.zeros_like(scale, dtype=torch.int32)


def _program(tmp_path, quantizer, fold_quantize: bool):
    torch.manual_seed(0)
    model = Simple().eval()
    module = torch.export.export(model, (torch.randn(SHAPE),)).module()
    prepared = prepare_pt2e(module, quantizer)
    for _ in range(8):
        prepared(torch.randn(SHAPE) * 2)
    converted = convert_pt2e(prepared, fold_quantize=fold_quantize)
    path = tmp_path / f"q_{type(quantizer).__name__}_{fold_quantize}.pt2"
    torch.export.save(torch.export.export(converted, (torch.randn(SHAPE),)), path)
    return path


def _golden(compiled, floats):
    return verify.golden_outputs(compiled.graph, verify.quantized_inputs(compiled.graph, floats))


def _floats(count=16):
    return np.random.default_rng(7).standard_normal((count, *SHAPE[1:])).astype(np.float32) * 2


def _assert_follows_program(compiled, floats):
    """The int8 outputs stay within a few output steps of the program's own Q/DQ graph run in float."""
    out = compiled.graph.tensors[compiled.graph.outputs[0]]
    reference = np.stack(
        [v for v in (verify.float_reference(compiled, floats)) for v in [verify._output_value(v, _final(compiled))]]
    ).reshape(len(floats), -1)
    got = out.dequantize(_golden(compiled, floats)).reshape(len(floats), -1)
    steps = np.abs(got - reference) / out.scale
    assert steps.mean() < 0.5 and steps.max() <= 4, (steps.mean(), steps.max())


def _final(compiled):
    node = next(n for n in compiled.quantized_module.graph.nodes if n.op == "output").args[0]
    return node[0] if isinstance(node, (tuple, list)) else node


def test_unfolded_weights_are_quantized_not_cast(tmp_path):
    """fold_quantize=False leaves float weights behind quantize nodes: they must become the same
    int8 weights the folded program carries (a cast to int8 made them all 0)."""
    folded = compile_model(str(_program(tmp_path, EdgecQuantizer(), True)), calibration=None)
    unfolded = compile_model(str(_program(tmp_path, EdgecQuantizer(), False)), calibration=None)
    for a, b in zip(folded.graph.ops, unfolded.graph.ops):
        if "weight" in a.attrs:
            assert np.count_nonzero(a.attrs["weight"]) > a.attrs["weight"].size // 2
            np.testing.assert_array_equal(a.attrs["weight"], b.attrs["weight"])
    floats = _floats()
    np.testing.assert_array_equal(_golden(folded, floats), _golden(unfolded, floats))
    _assert_follows_program(unfolded, floats)


@pytest.mark.parametrize("fold_quantize", [True, False])
def test_int32_bias_is_kept_int32(tmp_path, fold_quantize):
    compiled = compile_model(str(_program(tmp_path, Int32BiasQuantizer(), fold_quantize)), calibration=None)
    biases = [op.attrs["bias"] for op in compiled.graph.ops if op.attrs.get("bias") is not None]
    assert biases and all(b.dtype == np.int32 for b in biases)
    assert max(int(np.abs(b).max()) for b in biases) > 127, "int32 biases must not be squeezed into int8"
    _assert_follows_program(compiled, _floats())


def test_a_weight_with_a_zero_point_is_refused_by_name(tmp_path):
    torch.manual_seed(0)
    module = torch.export.export(Simple().eval(), (torch.randn(SHAPE),)).module()
    prepared = prepare_pt2e(module, EdgecQuantizer())
    prepared(torch.randn(SHAPE))
    converted = convert_pt2e(prepared, fold_quantize=False)
    for node in converted.graph.nodes:
        if "quantize_per_channel" in str(node.target):
            zero_points = getattr(converted, node.args[2].target)
            zero_points += 3
    path = tmp_path / "zp.pt2"
    torch.export.save(torch.export.export(converted, (torch.randn(SHAPE),)), path)
    with pytest.raises(EdgecError, match="symmetric"):
        compile_model(str(path), calibration=None)


def test_verify_fails_a_model_whose_weights_collapsed(tmp_path, capsys, monkeypatch):
    """The bug this file's first test guards against, put back: float weights behind quantize nodes
    cast to int8 (all zeros). The C still equals the golden -- both run the broken program -- so
    only the check against the program's own Q/DQ graph can see it, and verify must fail."""
    from edgec.frontend import lower
    from tests.test_cli import run_cli

    path = _program(tmp_path, EdgecQuantizer(), False)
    code, out, err = run_cli("verify", path, "--samples", "4", "--quiet", capsys=capsys)
    assert code == 0 and re.search(r"OK: checked \d+ of \d+ layers", out), err
    monkeypatch.setattr(lower, "quantize_constant", lambda source, args, node: source.value.astype(args.dtype))
    code, out, err = run_cli("verify", path, "--samples", "4", "--quiet", capsys=capsys)
    assert "0 LSB" in out, "the C still matches the (broken) golden"
    assert code != 0 and "departs from its quantized program" in err and "conv2d" in err, (out, err)
    code, out, err = run_cli("build", path, "-o", tmp_path / "out", "--quiet", capsys=capsys)
    assert code == 0 and "every weight quantizes to 0; the layer outputs its bias alone" in err, err


def _inductor_quantizer(name: str):
    """torchao's own PT2E quantizers for CPUs: X86's quantizes activations to uint8, both leave
    the last linear's output (and here the conv + add before float pooling) in float."""
    if name == "x86":
        from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86

        return x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config())
    from torchao.quantization.pt2e.quantizer import arm_inductor_quantizer as arm

    return arm.ArmInductorQuantizer().set_global(arm.get_default_arm_inductor_quantization_config())


@pytest.mark.parametrize("name", ["x86", "arm"])
def test_torchao_inductor_quantizer_programs_are_completed_from_calibration(tmp_path, name):
    floats = _floats()
    warnings = []
    compiled = compile_model(
        str(_program(tmp_path, _inductor_quantizer(name), True)), calibration=floats, warn=warnings.append
    )
    completed = [line for line in warnings if "in float; edgec quantizes it to int8 from the calibration data" in line]
    assert completed, warnings
    assert _bit_exact(compiled, tmp_path / "out", tmp_path, floats[:4]).exact
    assert verify.check_against_reference(compiled, floats).checked >= 4
    _assert_follows_program(compiled, floats)


def test_a_float_output_without_calibration_data_is_one_line(tmp_path):
    path = _program(tmp_path, _inductor_quantizer("arm"), True)
    with pytest.raises(EdgecError, match=r"model output 'softmax' is not quantized: give edgec calibration data"):
        compile_model(str(path), calibration=None)

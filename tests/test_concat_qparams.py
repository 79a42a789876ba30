"""A cat at its output's qparams (TFLite's CONCATENATION): a U-Net decoder concatenates the
encoder's skip connection (narrow range, also read by the next encoder level) with the upsampled
bottleneck (wide range). edgec's own PTQ observes the cat's output and keeps the skip at its own
qparams (only the cat's input is requantized); a program that quantizes each cat input apart (as
litert-torch does) is read at the cat's output qparams, each input requantized once. Both run
bit-exact on the host, pass verify and follow float."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from edgec import sim
from edgec.frontend.quantize import EdgecQuantizer
from edgec.ir import to_torch_order
from edgec.ops.qspec import ACTIVATION_QSPEC, annotate
from edgec.pipeline import compile_model, emit
from edgec.tools import verify

SHAPE = (1, 3, 8, 8)


class SkipUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.dec = nn.Conv2d(16, 4, 3, padding=1)
        with torch.no_grad():
            self.enc.weight.mul_(0.2)
            self.mid.weight.mul_(20.0)

    def forward(self, x):
        skip = F.relu(self.enc(x))
        up = self.up(F.relu(self.mid(F.max_pool2d(skip, 2))))
        return self.dec(torch.cat([skip, up], 1))


def factory():
    torch.manual_seed(0)
    return SkipUNet().eval(), (torch.zeros(SHAPE),)


class PerInputCat(EdgecQuantizer):
    """Each cat input at its producer's own qparams, the output observed apart (litert-torch's form)."""

    def annotate(self, model):
        for node in model.graph.nodes:
            if node.target == torch.ops.aten.cat.default:
                annotate(node, {arg: ACTIVATION_QSPEC for arg in node.args[0]}, ACTIVATION_QSPEC)
        return super().annotate(model)


SAMPLES = np.random.default_rng(0).standard_normal((40, *SHAPE[1:])).astype(np.float32)
CALIBRATION, TEST = SAMPLES[:24], SAMPLES[24:]


def _int_outputs(compiled, tmp_path) -> np.ndarray:
    """The golden int8 outputs in torch order, after checking the host C returns the same bytes
    and verify finds every layer equal to the program."""
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, TEST)
    golden = verify.golden_outputs(compiled.graph, inputs)
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    assert verify.compare(golden, verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))).exact
    verify.check_against_reference(compiled, TEST)
    out = compiled.graph.tensors[compiled.graph.outputs[0]]
    return np.stack([to_torch_order(out, row.reshape(out.shape)) for row in golden]).astype(np.int64)


def _float(module) -> np.ndarray:
    with torch.no_grad():
        return np.stack([module(torch.from_numpy(x[None])).numpy()[0] for x in TEST])


def test_edgec_ptq_keeps_the_skip_at_its_own_scale(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    compiled = compile_model(f"{__file__}:factory", calibration=CALIBRATION)
    graph = compiled.graph
    (cat,) = [op for op in graph.ops if op.kind == "copy"]
    cat_out = graph.tensors[cat.outputs[0]]
    skip = graph.tensors[graph.ops[0].outputs[0]]  # the encoder conv (ReLU fused), read by the pool too
    assert skip.scale < cat_out.scale / 4  # its own steps, not the wide bottleneck's
    # the transposed conv feeds only the cat: it writes at the cat's qparams, only the skip is requantized
    assert [op.attrs.get("function") for op in graph.ops if op.kind == "lut"] == ["requantize"]
    out = graph.tensors[graph.outputs[0]]
    ints = _int_outputs(compiled, tmp_path)
    expected = _float(factory()[0])
    # 35.8 dB when the cat shared one scale with all its inputs and their producers
    assert sim.sqnr_db(expected, out.dequantize(ints).reshape(expected.shape)) > 36.8


def test_program_with_per_input_cat_qparams_is_read_at_the_cat_output(tmp_path):
    module, example = factory()
    prepared = prepare_pt2e(torch.export.export(module, example).module(), PerInputCat())
    for sample in CALIBRATION:
        prepared(torch.from_numpy(sample[None]))
    program = convert_pt2e(prepared, fold_quantize=True)
    path = tmp_path / "per_input_cat.pt2"
    torch.export.save(torch.export.export(program, example), path)
    compiled = compile_model(str(path), calibration=None)
    out = compiled.graph.tensors[compiled.graph.outputs[0]]
    ints = _int_outputs(compiled, tmp_path)
    with torch.no_grad():
        reference = _float(program)
    lsb = np.abs(ints.reshape(reference.shape) - (np.round(reference / out.scale) + out.zero_point))
    # 14.8 LSB on average (up to 69) when the cat took its first input's qparams and saturated the other
    assert lsb.mean() < 0.5 and lsb.max() <= 2
    expected = _float(module)
    assert sim.sqnr_db(expected, out.dequantize(ints).reshape(expected.shape)) > 36.8

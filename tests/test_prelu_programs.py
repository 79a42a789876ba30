"""PReLU in programs another tool quantized, whose slopes edgec's own PTQ would quantize per tensor:
slopes left float (litert-torch's PT2EQuantizer does; TFLite then runs the PReLU in float, and
tests/test_tflm_reference.py's op_prelu equals TFLite Micro) or quantized per channel. edgec runs the
program's float PReLU through one table per slope (edgec_prelu_s8_lookup), equal to the program
layer by layer (verify)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torchao.quantization.pt2e import PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import QuantizationSpec, Quantizer

import edgec
from edgec.frontend.torch_ops import aten
from edgec.ops.qspec import ACTIVATION_QSPEC, CONV_WEIGHT_QSPEC, annotate


class _PerSlopeObserver(PerChannelMinMaxObserver):
    """Per-channel min/max of a 1-D tensor (the observer wants a second axis to flatten)."""

    def forward(self, x):
        super().forward(x.unsqueeze(-1))
        return x


PER_CHANNEL_SLOPES = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-127,
    quant_max=127,
    qscheme=torch.per_channel_symmetric,
    ch_axis=0,
    observer_or_fake_quant_ctr=_PerSlopeObserver.with_args(eps=2**-20),
)


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.prelu, self.head = nn.Conv2d(4, 8, 1, bias=False), nn.PReLU(8), nn.Conv2d(8, 4, 1, bias=False)
        with torch.no_grad():
            self.prelu.weight.copy_(torch.linspace(-0.6, 0.9, 8))

    def forward(self, x):
        return self.head(self.prelu(self.stem(x)))


class _Slopes(Quantizer):
    """Convs as edgec quantizes them; PReLU slopes per channel (PER_CHANNEL_SLOPES) or float (None)."""

    def __init__(self, slopes):
        super().__init__()
        self.slopes = slopes

    def annotate(self, model):
        for node in model.graph.nodes:
            if node.target == aten.conv2d.default:
                annotate(node, {node.args[0]: ACTIVATION_QSPEC, node.args[1]: CONV_WEIGHT_QSPEC}, ACTIVATION_QSPEC)
            elif node.target == aten.prelu.default:
                inputs = {node.args[0]: ACTIVATION_QSPEC}
                if self.slopes is not None:
                    inputs[node.args[1]] = self.slopes
                annotate(node, inputs, ACTIVATION_QSPEC)
        return model

    def validate(self, model) -> None:
        pass


@pytest.mark.parametrize("slopes", [PER_CHANNEL_SLOPES, None], ids=["per-channel", "float"])
def test_a_program_prelu_with_per_channel_or_float_slopes_runs_as_the_program(slopes):
    torch.manual_seed(0)
    example = (torch.randn(1, 4, 6, 6),)
    prepared = prepare_pt2e(torch.export.export(_Model().eval(), example).module(), _Slopes(slopes))
    for _ in range(8):
        prepared(torch.randn(1, 4, 6, 6) * 2)
    program = torch.export.export(convert_pt2e(prepared, fold_quantize=False), example)
    compiled = edgec.compile(program, target="host", progress=False)
    prelu = next(op for op in compiled.compiled.graph.ops if op.kind == "prelu")
    assert prelu.attrs["float_slopes"] and prelu.attrs["tables"].shape == (8, 256)
    result = compiled.verify(count=4)
    assert "golden simulator == host C, 0 LSB" in str(result) and result.layers_checked == 3, result

"""Operators trained models use as their authors wrote them (issue 27): reflect and replicate
padding (F.pad, nn.ReflectionPad2d / ReplicationPad2d, Conv padding_mode). Each model is exported
by torch.export, bit-exact on the host (golden == C), passes verify's layer check against its Q/DQ
program, and its int8 output follows the float module."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from edgec import sim
from edgec.errors import EdgecError
from edgec.ir import to_torch_order
from edgec.pipeline import compile_model, emit
from edgec.tools import verify


class EdgePads(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
        self.replicate = nn.ReplicationPad2d((1, 2, 0, 1))
        self.conv1d = nn.Conv1d(3, 3, 3, padding=2, padding_mode="replicate")

    def forward(self, x):
        y = nn.functional.pad(x, (2, 2, 1, 3), mode="reflect")
        return self.replicate(self.conv(y)), self.conv1d(F.pad(x.mean(2), (3, 1), mode="reflect"))


def check_model(tmp_path, constructor: str, shape, *, sqnr: float = 30.0, samples=None):
    """Compile `constructor` (an expression over this file's classes), check golden == host C
    byte for byte and verify's layer check, and return (compiled, SQNR of each output vs float)."""
    path = tmp_path / "model.py"
    path.write_text(
        f"import torch\nfrom tests.test_model_ops import *  # noqa: F403\n\n"
        f"def factory():\n    torch.manual_seed(0)\n    return {constructor}.eval(), (torch.zeros{tuple(shape)},)\n"
    )
    if samples is None:
        samples = np.random.default_rng(0).standard_normal((24, *shape[1:])).astype(np.float32)
    compiled = compile_model(f"{path}:factory", calibration=samples[:16])
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, samples[16:])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    golden = verify.golden_outputs(compiled.graph, inputs)
    assert verify.compare(golden, verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))).exact
    verify.check_against_reference(compiled, samples[16:])
    torch.manual_seed(0)
    module = eval(constructor).eval()
    with torch.no_grad():
        expected = [module(torch.from_numpy(x[None])) for x in samples[16:]]
    expected = [
        np.stack([(e if isinstance(e, tuple) else (e,))[k].numpy() for e in expected])
        for k in range(len(compiled.graph.outputs))
    ]
    sqnrs = []
    for k, name in enumerate(compiled.graph.outputs):
        out = compiled.graph.tensors[name]
        rows = [verify.unpack(compiled.graph, row, compiled.graph.outputs)[k] for row in golden]
        ints = np.stack([out.dequantize(to_torch_order(out, r)) for r in rows]).reshape(expected[k].shape)
        sqnrs.append(sim.sqnr_db(expected[k], ints))
    assert min(sqnrs) > sqnr, sqnrs
    return compiled, sqnrs


def test_reflect_and_replicate_padding(tmp_path):
    compiled, _ = check_model(tmp_path, "EdgePads()", (1, 3, 6, 8))
    kinds = [op.kind for op in compiled.graph.ops]
    assert "constant_pad" not in kinds and kinds.count("copy") >= 5  # one copy per padded axis


def test_circular_padding_is_refused_by_name(tmp_path):
    class Circular(nn.Module):
        def forward(self, x):
            return F.pad(x, (1, 1), mode="circular") * 2

    path = tmp_path / "circular.pt2"
    torch.export.save(torch.export.export(Circular(), (torch.zeros(1, 2, 4),)), path)
    with pytest.raises(EdgecError, match=r"padding mode 'circular'"):
        compile_model(str(path), calibration=None)


class Norms(nn.Module):
    """GroupNorm after a conv, InstanceNorm2d with and without affine, InstanceNorm1d."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.group = nn.GroupNorm(2, 8)
        self.instance = nn.InstanceNorm2d(8, affine=True)
        self.plain = nn.InstanceNorm1d(3)
        for norm in (self.group, self.instance):
            norm.weight.data.uniform_(0.5, 1.5)
            norm.bias.data.uniform_(-0.5, 0.5)

    def forward(self, x):
        y = self.group(self.conv(x))
        return self.instance(F.relu(y)), self.plain(x.mean(2))


def test_group_and_instance_norm(tmp_path):
    compiled, _ = check_model(tmp_path, "Norms()", (1, 3, 6, 5), sqnr=25.0)
    kinds = [op.kind for op in compiled.graph.ops]
    assert kinds.count("layer_norm") == 3 and "depthwise_conv2d" in kinds


class Bidirectional(nn.Module):
    """A two-layer bidirectional LSTM (batch first) and a one-layer bidirectional GRU (time major)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 3, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(4, 3, bidirectional=True)

    def forward(self, x):
        y, _ = self.lstm(x)
        z, _ = self.gru(x.transpose(0, 1))
        return y, z


def test_bidirectional_lstm_and_gru(tmp_path):
    compiled, _ = check_model(tmp_path, "Bidirectional()", (1, 4, 4), sqnr=25.0)
    assert [op.kind for op in compiled.graph.ops].count("recurrent") == 6


class MaskedAttention(nn.Module):
    """Causal self-attention (is_causal), attention with a constant bool mask and with a float
    mask of 0 and -inf (a padding mask held in a buffer)."""

    def __init__(self):
        super().__init__()
        self.project = nn.Linear(8, 24)
        self.register_buffer("allowed", torch.rand(2, 6, 6, generator=torch.Generator().manual_seed(1)) > 0.3)
        self.register_buffer("padding", torch.tensor([0.0] * 4 + [float("-inf")] * 2).expand(6, 6).clone())

    def forward(self, x):
        q, k, v = self.project(x).unflatten(-1, (3, 2, 4)).permute(2, 0, 3, 1, 4)  # [1, heads 2, 6, 4] each
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        masked = F.scaled_dot_product_attention(q, k, v, attn_mask=self.allowed)
        padded = F.scaled_dot_product_attention(q, k, v, attn_mask=self.padding)
        return causal, masked, padded


def test_attention_with_a_constant_mask_or_causal(tmp_path):
    compiled, _ = check_model(tmp_path, "MaskedAttention()", (1, 6, 8), sqnr=20.0)
    assert [op.kind for op in compiled.graph.ops].count("masked_softmax") == 3


class Segmenter(nn.Module):
    """Per-pixel classes (argmax over the channels of a conv's NHWC output), per-row argmax over
    the last axis of a linear layer and its topk(k=1), int32 indices as model outputs."""

    def __init__(self):
        super().__init__()
        self.conv, self.linear = nn.Conv2d(3, 5, 3, padding=1), nn.Linear(6, 7)

    def forward(self, x):
        values, indices = torch.topk(self.linear(x), 1)
        return self.conv(x).argmax(1), self.linear(x).argmax(-1, keepdim=True), values, indices


def test_argmax_outputs_int32_indices(tmp_path):
    shape = (1, 3, 5, 6)
    samples = np.random.default_rng(0).standard_normal((24, *shape[1:])).astype(np.float32)
    path = tmp_path / "model.py"
    path.write_text(
        "import torch\nfrom tests.test_model_ops import *  # noqa: F403\n\n"
        f"def factory():\n    torch.manual_seed(0)\n    return Segmenter().eval(), (torch.zeros{shape},)\n"
    )
    compiled = compile_model(f"{path}:factory", calibration=samples[:16])
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, samples[16:])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    golden = verify.golden_outputs(compiled.graph, inputs)
    assert verify.compare(golden, verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))).exact
    verify.check_against_reference(compiled, samples[16:])
    header = (tmp_path / "out" / "m.h").read_text()
    assert "const int32_t *m_output_0(void);" in header
    torch.manual_seed(0)
    module = Segmenter().eval()
    agree = []
    for row, x in zip(golden, samples[16:]):
        pixels, rows, _, top = verify.unpack(compiled.graph, row, compiled.graph.outputs)
        with torch.no_grad():
            expected = module(torch.from_numpy(x[None]))
        assert pixels.dtype == np.int32 and pixels.shape == tuple(expected[0].shape)
        agree += [np.mean(pixels == expected[0].numpy()), np.mean(rows == expected[1].numpy())]
        assert (top == rows).all()  # topk(k=1)'s indices are argmax's
    assert np.mean(agree) > 0.9, np.mean(agree)  # float and int8 argmax differ only at near-ties

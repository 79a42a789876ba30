"""Causal attention over padded sequences, as people write it: nn.MultiheadAttention with a constant
causal attn_mask and key_padding_mask given as a model input (need_weights False or its default
True), and nn.TransformerEncoderLayer(..., is_causal=True) with src_mask and src_key_padding_mask.
MHA adds the two masks; normalize.py reads the sum as one softmax that reads the padding input at
run time and keeps the constant (causal) mask in flash (edgec_input_masked_softmax_s8 with keep):
the rewritten float graph computes the model, golden == host C (sanitizers) and == Cortex-M4 under
QEMU byte for byte, verify's layer check passes, and the int8 output follows the float model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from edgec import sim
from edgec.errors import EdgecError
from edgec.frontend.export import export
from edgec.passes.normalize import normalize
from edgec.pipeline import check_supported, compile_model, emit
from edgec.tools import verify
from tests.device_support import needs_toolchain

TOKENS, DIM = 6, 16


def _causal(float_mask: bool) -> torch.Tensor:
    mask = nn.Transformer.generate_square_subsequent_mask(TOKENS)  # 0 on and below the diagonal, -inf above
    return mask if float_mask else mask != 0  # MHA's bool attn_mask: True masks


class CausalPaddedAttention(nn.Module):
    """nn.MultiheadAttention over padded tokens: a causal attn_mask held in a buffer (bool or float)
    and key_padding_mask (True: a padded token) as the second model input."""

    def __init__(self, float_mask: bool = False, need_weights: bool = False):
        super().__init__()
        self.attn = nn.MultiheadAttention(DIM, 2, batch_first=True)
        self.register_buffer("causal", _causal(float_mask))
        self.need_weights = need_weights
        self.head = nn.Linear(DIM, 4)

    def forward(self, x, padding):
        y = self.attn(x, x, x, attn_mask=self.causal, key_padding_mask=padding, need_weights=self.need_weights)[0]
        return self.head(y)


class CausalEncoder(nn.Module):
    """nn.TransformerEncoderLayer with is_causal=True (src_mask the causal mask, as PyTorch requires)."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(DIM, 2, 32, dropout=0.0, batch_first=True)
        self.register_buffer("causal", _causal(True))

    def forward(self, x, padding):
        return self.layer(x, src_mask=self.causal, src_key_padding_mask=padding, is_causal=True)


class CausalEncoderStack(nn.Module):
    """nn.TransformerEncoder of two causal layers over padded tokens."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(DIM, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.register_buffer("causal", _causal(True))

    def forward(self, x, padding):
        return self.encoder(x, mask=self.causal, src_key_padding_mask=padding, is_causal=True)


class PaddedAttentionWithWeights(nn.Module):
    """key_padding_mask alone, need_weights left at its default (True): softmax(baddbmm(mask, q, k^T))."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(DIM, 2, batch_first=True)

    def forward(self, x, padding):
        return self.attn(x, x, x, key_padding_mask=padding)[0]


MODELS = {
    "mha_bool_mask": lambda: CausalPaddedAttention(),
    "mha_float_mask": lambda: CausalPaddedAttention(float_mask=True),
    "mha_need_weights": lambda: CausalPaddedAttention(need_weights=True),
    "encoder_is_causal": CausalEncoder,
    "encoder_stack": CausalEncoderStack,
    "mha_padding_need_weights": PaddedAttentionWithWeights,
}


def _padding(count: int, seed: int = 1) -> np.ndarray:
    """Padding masks as float rows: the last 0..TOKENS-1 tokens padded (never the first: a causal
    row 0 that keeps no key is NaN in PyTorch)."""
    lengths = np.random.default_rng(seed).integers(1, TOKENS + 1, count)
    return (np.arange(TOKENS)[None, :] >= lengths[:, None]).astype(np.float32)


def _model(name: str) -> nn.Module:
    torch.manual_seed(0)
    return MODELS[name]().eval()


def _example():
    return torch.zeros(1, TOKENS, DIM), torch.zeros(1, TOKENS, dtype=torch.bool)


@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_causal_and_padding_masks_become_one_input_masked_softmax(name):
    model = _model(name)
    module = normalize(export(model, _example(), "test"))
    softmaxes = [n for n in module.graph.nodes if n.target == torch.ops.edgec.input_masked_softmax.default]
    targets = {n.target for n in module.graph.nodes}
    causal = name != "mha_padding_need_weights"  # the causal mask kept as a constant
    assert len(softmaxes) == (2 if name == "encoder_stack" else 1)
    assert all((n.args[3] is not None) == causal for n in softmaxes)
    assert not targets & {torch.ops.aten.scaled_dot_product_attention.default, torch.ops.aten.baddbmm.default}
    check_supported(module, "test")
    x = torch.randn(5, 1, TOKENS, DIM, generator=torch.Generator().manual_seed(2))
    for sample, padding in zip(x, torch.from_numpy(_padding(5)).bool()):
        with torch.no_grad():
            torch.testing.assert_close(module(sample, padding[None]), model(sample, padding[None]))


class _MaskAndCausal(nn.Module):
    def forward(self, q, mask):
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask, is_causal=True)


def test_attn_mask_with_is_causal_is_refused_in_one_line():
    """PyTorch raises on SDPA with both attn_mask and is_causal; edgec says what to write instead."""
    module = normalize(export(_MaskAndCausal(), (torch.randn(1, 2, 6, 8), torch.ones(1, 6, dtype=torch.bool)), "t"))
    with pytest.raises(EdgecError, match="both attn_mask and is_causal=True .*put the causal mask into attn_mask"):
        check_supported(module, "test")


def _compiled(name: str, target: str = "host"):
    x = np.random.default_rng(0).standard_normal((40, TOKENS, DIM)).astype(np.float32)
    padding = _padding(40)
    compiled = compile_model(_model(name), example_inputs=_example(), calibration=[x[:24], padding[:24]], target=target)
    return compiled, x[24:], padding[24:]


@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("name", ["mha_bool_mask", "encoder_is_causal"])
def test_causal_padded_attention_is_bit_exact_and_follows_the_model(name, tmp_path):
    compiled, x, padding = _compiled(name)
    softmax = [op for op in compiled.graph.ops if op.kind == "input_masked_softmax"]
    assert len(softmax) == 1 and softmax[0].attrs["desc"]["keep_rows"] == TOKENS  # one causal block for every head
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, [x, padding])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    golden = verify.golden_outputs(compiled.graph, inputs)
    assert verify.compare(golden, verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))).exact
    assert not verify.check_against_reference(compiled, [x, padding]).skipped
    # Both masks act: causal, token 0's output reads only token 0; the padding changes the output.
    later = x.copy()
    later[:, 1:] = np.random.default_rng(3).standard_normal(later[:, 1:].shape)
    moved = verify.golden_outputs(compiled.graph, verify.quantized_inputs(compiled.graph, [later, padding]))
    width = golden.shape[1] // TOKENS
    np.testing.assert_array_equal(moved[:, :width], golden[:, :width])
    unpadded = verify.golden_outputs(compiled.graph, verify.quantized_inputs(compiled.graph, [x, 0 * padding]))
    assert (unpadded != golden).any(axis=1).sum() >= (padding.sum(axis=1) > 0).sum() // 2
    model = _model(name)
    with torch.no_grad():
        expected = np.stack(
            [model(torch.from_numpy(a[None]), torch.from_numpy(p[None]).bool()).numpy()[0] for a, p in zip(x, padding)]
        )
    result = compiled.graph.tensors[compiled.graph.outputs[0]]
    got = np.stack(
        [result.dequantize(verify.unpack(compiled.graph, row, compiled.graph.outputs)[0])[0] for row in golden]
    )
    assert sim.sqnr_db(expected, got) > 20.0


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.filterwarnings("ignore:Support for mismatched")
def test_causal_padded_attention_on_cortex_m4(tmp_path):
    compiled, x, padding = _compiled("mha_bool_mask", "cortex-m4")
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, [x, padding])
    device = verify.run_on(compiled, tmp_path / "out", "m", inputs, tmp_path / "build")
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), device).exact

"""Operators trained models use as their authors wrote them (issue 27): reflect and replicate
padding (F.pad, nn.ReflectionPad2d / ReplicationPad2d, Conv padding_mode), padding="same",
F.glu, torch.gather, F.normalize (TFLite's L2_NORMALIZATION), 1-D resizing, adaptive max pooling,
var/std, torch.square, torch.einsum, matmuls with a constant matrix, torch.max/min over an axis,
division by an activation, selu/celu/sign. Each model is exported
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
from edgec.ops import l2_norm
from edgec.pipeline import compile_model, emit
from edgec.tools import verify
from tests.device_support import needs_toolchain


class EdgePads(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
        self.replicate = nn.ReplicationPad2d((1, 2, 0, 1))
        self.conv1d = nn.Conv1d(3, 3, 3, padding=2, padding_mode="replicate")

    def forward(self, x):
        y = nn.functional.pad(x, (2, 2, 1, 3), mode="reflect")
        return self.replicate(self.conv(y)), self.conv1d(F.pad(x.mean(2), (3, 1), mode="reflect"))


def compile_exact(tmp_path, constructor: str, samples):
    """Compile `constructor` (an expression over this file's classes) calibrated on samples[:16],
    check golden == host C (sanitized) byte for byte and verify's layer check on samples[16:], and
    return (compiled, the golden outputs)."""
    path = tmp_path / "model.py"
    path.write_text(
        f"import torch\nfrom tests.test_model_ops import *  # noqa: F403\n\n"
        f"def factory():\n    torch.manual_seed(0)\n"
        f"    return {constructor}.eval(), (torch.zeros{(1, *samples.shape[1:])},)\n"
    )
    compiled = compile_model(f"{path}:factory", calibration=samples[:16])
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, samples[16:])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    golden = verify.golden_outputs(compiled.graph, inputs)
    assert verify.compare(golden, verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))).exact
    verify.check_against_reference(compiled, samples[16:])
    return compiled, golden


def check_model(tmp_path, constructor: str, shape, *, sqnr: float = 30.0, samples=None):
    """compile_exact, then the SQNR of each output against the float model: (compiled, SQNRs)."""
    if samples is None:
        samples = np.random.default_rng(0).standard_normal((24, *shape[1:])).astype(np.float32)
    compiled, golden = compile_exact(tmp_path, constructor, samples)
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


class StringPadsGluGather(nn.Module):
    """Conv padding="same" with an even kernel (one more zero after than before) and dilation,
    padding="valid", F.glu, and torch.gather by a constant index (an audio front end's forms)."""

    def __init__(self):
        super().__init__()
        self.same = nn.Conv1d(3, 8, 4, padding="same", dilation=2)
        self.valid = nn.Conv1d(4, 6, 3, padding="valid")
        self.same2d = nn.Conv2d(1, 4, (3, 4), padding="same")
        self.register_buffer("picked", torch.tensor([[[5, 0, 0, 3]] * 6]))

    def forward(self, x):
        gated = F.glu(self.same(x), dim=1)
        picked = torch.gather(self.valid(gated), 2, self.picked)
        return picked, self.same2d(x[:, None])


def test_string_padding_glu_and_gather(tmp_path):
    compiled, _ = check_model(tmp_path, "StringPadsGluGather()", (1, 3, 12))
    kinds = [op.kind for op in compiled.graph.ops]
    assert kinds.count("conv2d") == 3 and "copy" in kinds, kinds


class SignalForms(nn.Module):
    """1-D resizing (nearest by 2 and by 1.5, linear with and without align_corners), adaptive max
    pooling (to one value, and by equal windows), variance, standard deviation and torch.square."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 8, 3, padding=1)
        self.conv2d = nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        plane = self.conv2d(x[:, None])
        resized = (
            F.interpolate(y, scale_factor=2, mode="nearest"),
            F.interpolate(y, scale_factor=1.5, mode="nearest"),
            F.interpolate(y, size=20, mode="linear", align_corners=True),
            F.interpolate(y, scale_factor=2, mode="linear"),
        )
        pooled = (
            F.adaptive_max_pool2d(plane, 1).flatten(1),
            F.adaptive_max_pool2d(plane, (3, 4)),
            F.adaptive_max_pool1d(y, 4),
        )
        spread = (y.var(2), y.std(2, unbiased=False, keepdim=True), torch.square(y))
        return *resized, *pooled, *spread


def test_resizing_max_pooling_and_spread_of_signals(tmp_path):
    compiled, _ = check_model(tmp_path, "SignalForms()", (1, 3, 12), sqnr=30.0)
    kinds = {op.kind for op in compiled.graph.ops}
    assert {"resize", "max_pool2d", "reduce"} <= kinds, kinds


class EinsumAttention(nn.Module):
    """Attention written with torch.einsum (scores, weighted values) and an outer product (of
    bounded values: a product of two normal inputs has tails 16 calibration samples miss)."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).unflatten(-1, (3, 2, 4)).permute(2, 0, 3, 1, 4)  # [1, heads 2, 6, 4] each
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * 0.5
        attended = torch.einsum("bhqk,bhkd->bqhd", scores.softmax(-1), v).flatten(2)
        return attended, torch.einsum("bi,bj->bij", torch.tanh(x[:, 0]), torch.tanh(x[:, 1]))


def test_einsum(tmp_path):
    compiled, _ = check_model(tmp_path, "EinsumAttention()", (1, 6, 8))
    assert [op.kind for op in compiled.graph.ops].count("batch_matmul") == 2


class ConstantMatmuls(nn.Module):
    """An audio front end as shipped: spectrum frames times a mel filterbank buffer (x @ W), a DCT
    buffer on the left (W @ x), and a constant [1, K, N] matrix through bmm."""

    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(1)
        self.register_buffer("mel_basis", torch.rand(17, 8, generator=generator) / 4)
        self.register_buffer("dct", torch.randn(5, 8, generator=generator) / 3)
        self.register_buffer("mix", torch.randn(1, 6, 3, generator=generator) / 2)

    def forward(self, x):  # [1, 6, 17]
        mel = torch.matmul(x, self.mel_basis)  # [1, 6, 8]
        cepstra = self.dct @ mel.transpose(1, 2)  # [1, 5, 6]
        return cepstra, torch.bmm(cepstra, self.mix)


def test_matmuls_with_a_constant_matrix_are_linear_layers(tmp_path):
    compiled, _ = check_model(tmp_path, "ConstantMatmuls()", (1, 6, 17))
    kinds = [op.kind for op in compiled.graph.ops]
    assert kinds.count("fully_connected") == 3 and "batch_matmul" not in kinds, kinds


def test_a_stack_of_constant_matrices_is_refused_in_one_line():
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.randn(2, 4, 3))

        def forward(self, x):
            return torch.bmm(x, self.w)

    with pytest.raises(EdgecError, match=r"torch.bmm\(x, self.w\).*2 different constant matrices"):
        compile_model(
            Stack().eval(), example_inputs=(torch.zeros(2, 5, 4),), calibration=np.ones((4, 2, 5, 4), np.float32)
        )


class TimeReductions(nn.Module):
    """A 1-D audio head as written: per-utterance feature normalisation (a division by an
    activation), max and min over time with torch.max/min(x, dim) (values; max's indices too),
    selu and celu."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)

    def forward(self, x):  # [1, 4, 12]
        x = (x - x.mean(dim=2, keepdim=True)) / (x.std(dim=2, keepdim=True) + 0.1)
        y = F.selu(self.conv(x))
        top, where = torch.max(y, dim=2)
        low = torch.min(F.celu(y, alpha=0.5), 2, keepdim=True).values
        return top, low, where


def test_max_and_min_over_an_axis_division_by_an_activation_selu_celu(tmp_path):
    samples = (np.random.default_rng(0).standard_normal((24, 4, 12)) * 2 + 1).astype(np.float32)
    compiled, golden = compile_exact(tmp_path, "TimeReductions()", samples)
    kinds = [op.kind for op in compiled.graph.ops]
    assert {"reduce", "argmax", "lut"} <= set(kinds), kinds
    torch.manual_seed(0)
    module = TimeReductions().eval()
    tensors = [compiled.graph.tensors[name] for name in compiled.graph.outputs]
    got, expected = [[], [], []], [[], [], []]
    for row, x in zip(golden, samples[16:]):
        with torch.no_grad():
            floats = module(torch.from_numpy(x[None]))
        for k, values in enumerate(verify.unpack(compiled.graph, row, compiled.graph.outputs)):
            got[k].append(tensors[k].dequantize(values).ravel() if k < 2 else values.ravel())
            expected[k].append(floats[k].numpy().ravel())
    sqnrs = [sim.sqnr_db(np.concatenate(expected[k]), np.concatenate(got[k])) for k in range(2)]
    assert min(sqnrs) > 30, sqnrs
    assert (np.concatenate(got[2]) == np.concatenate(expected[2])).mean() >= 0.75  # int8 ties pick the first


class SignOf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        return torch.sign(self.fc(x))


def test_sign_is_a_table(tmp_path):
    samples = np.random.default_rng(0).standard_normal((24, 3, 6)).astype(np.float32)
    compiled, golden = compile_exact(tmp_path, "SignOf()", samples)
    assert [op.kind for op in compiled.graph.ops][-1] == "lut"
    out = compiled.graph.tensors[compiled.graph.outputs[0]]
    values = np.concatenate([out.dequantize(row).ravel() for row in golden])
    assert np.abs(values - np.sign(values)).max() <= out.scale / 2 and len(np.unique(values)) == 3


class L2Normalized(nn.Module):
    """F.normalize over a conv's channels (stored last), over its width (a strided row) and over a
    linear's features, and x / x.norm(...) without the clamp."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.linear = nn.Linear(3 * 6 * 8, 24)

    def forward(self, x):
        y = self.conv(x)
        z = self.linear(x.flatten(1))
        return F.normalize(y, dim=1), F.normalize(y, dim=3), F.normalize(z, dim=-1), z / z.norm(dim=1, keepdim=True)


def test_l2_normalize(tmp_path):
    compiled, _ = check_model(tmp_path, "L2Normalized()", (1, 3, 6, 8), sqnr=28.0)
    assert [op.kind for op in compiled.graph.ops].count("l2_norm") == 4


def test_l2_normalize_inverse_square_root_follows_tflite():
    """GetInvSqrtQuantizedMultiplierExp: acc <= 1 gives (2^31 - 1, 0); elsewhere m 2^s / 2^31 is
    1 / sqrt(acc) to within TFLite's fixed-point Newton-Raphson error, for every bit length."""
    assert l2_norm.inv_sqrt_multiplier(0) == l2_norm.inv_sqrt_multiplier(1) == (2**31 - 1, 0)
    for acc in [2, 3, 4, 5, 255**2, 2**27 - 1, 2**27, 2**29 - 1, 2**29, 2**31 - 1, *range(6, 5000, 97)]:
        multiplier, shift = l2_norm.inv_sqrt_multiplier(acc)
        assert 0 < multiplier < 2**31
        assert abs(multiplier * 2.0**shift / 2**31 * acc**0.5 - 1) < 2e-6, acc


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_l2_normalize_on_cortex_m4(tmp_path):
    torch.manual_seed(0)
    samples = np.random.default_rng(1).standard_normal((24, 3, 6, 8)).astype(np.float32)
    compiled = compile_model(
        L2Normalized().eval(), example_inputs=(torch.zeros(1, 3, 6, 8),), calibration=samples[:16], target="cortex-m4"
    )
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, samples[16:])
    device = verify.run_on(compiled, tmp_path / "out", "m", inputs, tmp_path / "build")
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), device).exact


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


class LastStepOfABidirectionalStack(nn.Module):
    """A classifier reading the last step of a two-layer bidirectional GRU: the last layer's cat
    and the step's select fuse into one copy (it once lost the layer's qparams: KeyError)."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        y, _ = self.gru(x)
        return self.head(y[:, -1])


def test_last_step_of_a_bidirectional_stack(tmp_path):
    check_model(tmp_path, "LastStepOfABidirectionalStack()", (1, 5, 8), sqnr=25.0)


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
    samples = np.random.default_rng(0).standard_normal((24, 3, 5, 6)).astype(np.float32)
    compiled, golden = compile_exact(tmp_path, "Segmenter()", samples)
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


class TopClasses(nn.Module):
    """torch.topk with k > 1: the 3 best classes of a linear head (values and indices), the 2
    lowest-scoring channels of each pixel of a conv's NHWC output (largest=False)."""

    def __init__(self):
        super().__init__()
        self.conv, self.linear = nn.Conv2d(3, 5, 3, padding=1), nn.Linear(6, 7)

    def forward(self, x):
        values, indices = torch.topk(self.linear(x), 3)
        return values, indices, torch.topk(self.conv(x), 2, dim=1, largest=False).indices


def test_topk_outputs_values_and_int32_indices(tmp_path):
    samples = np.random.default_rng(1).standard_normal((24, 3, 5, 6)).astype(np.float32)
    compiled, golden = compile_exact(tmp_path, "TopClasses()", samples)
    assert [op.kind for op in compiled.graph.ops].count("topk") == 3
    torch.manual_seed(0)
    module = TopClasses().eval()
    agree = []
    for row, x in zip(golden, samples[16:]):
        values, indices, lowest = verify.unpack(compiled.graph, row, compiled.graph.outputs)
        with torch.no_grad():
            expected = module(torch.from_numpy(x[None]))
        assert indices.dtype == np.int32 and indices.shape == tuple(expected[1].shape)
        assert lowest.shape == tuple(expected[2].shape)
        assert (np.diff(values.astype(int), axis=-1) <= 0).all()  # best first
        agree += [np.mean(indices == expected[1].numpy()), np.mean(lowest == expected[2].numpy())]
    assert np.mean(agree) > 0.85, np.mean(agree)  # float and int8 orders differ only at near-ties


def test_topk_kernel_orders_ties_by_index():
    from edgec.ops.argmax import topk_desc, topk_s8

    x = np.array([[3, -1, 3, 7, -1, 3]], np.int8)
    values, indices = topk_s8(x, topk_desc(x.shape, 1, 4, True))
    assert values.ravel().tolist() == [7, 3, 3, 3] and indices.ravel().tolist() == [3, 0, 2, 5]
    values, indices = topk_s8(x, topk_desc(x.shape, 1, 3, False))
    assert values.ravel().tolist() == [-1, -1, 3] and indices.ravel().tolist() == [1, 4, 0]


class TokenClassifier(nn.Module):
    """A tiny text classifier as people write one: nn.Embedding over int64 token ids, learned
    positions, one nn.MultiheadAttention encoder block, mean over the tokens, a linear head."""

    def __init__(self, vocab: int = 50, dim: int = 16, tokens: int = 8, classes: int = 4):
        super().__init__()
        from edgec.zoo.seq import TransformerBlock

        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.randn(1, tokens, dim) * 0.1)
        self.block = TransformerBlock(dim, 2, native=True)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids):
        return self.head(self.block(self.embed(ids) + self.position).mean(1))


def _token_samples(count: int, vocab: int = 50, tokens: int = 8) -> np.ndarray:
    """Token ids as float rows (edgec's sample arrays), the last two rows with ids outside the table."""
    ids = np.random.default_rng(0).integers(0, vocab, (count, tokens)).astype(np.float32)
    ids[-1, :3] = (vocab, vocab + 1000, -3)
    ids[-2, 5] = 2**31 - 1
    return ids


def test_embedding_over_token_ids(tmp_path):
    """Token ids are an int32 model input (`m_set_input_0(const int32_t *)`), looked up in a table
    quantized at the embedding's output qparams: golden == host C (sanitizers) byte for byte, ids
    outside the table clamped to its nearest row on both, and verify's layer check passes."""
    torch.manual_seed(0)
    model = TokenClassifier().eval()
    samples = _token_samples(40)
    compiled = compile_model(model, example_inputs=(torch.zeros(1, 8, dtype=torch.long),), calibration=samples[:24])
    ids = compiled.graph.tensors[compiled.graph.inputs[0]]
    assert ids.dtype == "int32" and [op.kind for op in compiled.graph.ops][0] == "embedding"
    emit(compiled, tmp_path / "out", "m")
    header = (tmp_path / "out" / "m.h").read_text()
    assert "void m_set_input_0(const int32_t *ids);" in header and "clamped" in header
    assert "m_quantize_input" not in header
    inputs = verify.quantized_inputs(compiled.graph, samples[24:])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    golden = verify.golden_outputs(compiled.graph, inputs)
    assert verify.compare(golden, verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))).exact
    assert not verify.check_against_reference(compiled, samples[24:]).skipped
    embedding = compiled.graph.ops[0]
    values = verify.golden_values(compiled.graph, inputs[-1])
    table = embedding.attrs["desc"]["table"].reshape(50, 16)
    np.testing.assert_array_equal(values[embedding.outputs[0]].reshape(8, 16)[:3], table[[49, 49, 0]])
    # The table row is the program's quantized embedding row, bit for bit.
    out = compiled.graph.tensors[embedding.outputs[0]]
    program = torch.ops.quantized_decomposed.quantize_per_tensor(
        model.embed.weight.detach(), out.scale, out.zero_point, -128, 127, torch.int8
    )
    np.testing.assert_array_equal(table, program.numpy())
    with torch.no_grad():
        expected = np.stack([model(torch.from_numpy(x[None]).long()).numpy()[0] for x in samples[24:-2]])
    result = compiled.graph.tensors[compiled.graph.outputs[0]]
    got = np.stack(
        [result.dequantize(verify.unpack(compiled.graph, row, compiled.graph.outputs)[0])[0] for row in golden]
    )
    assert sim.sqnr_db(expected, got[:-2]) > 20.0


class PaddedTokenClassifier(TokenClassifier):
    """TokenClassifier over a batch of padded sequences: the padding mask (True: a padded token)
    is a second model input, nn.MultiheadAttention's key_padding_mask."""

    def forward(self, ids, padding):
        x = self.embed(ids) + self.position
        y = self.block.norm1(x)
        x = x + self.block.attn(y, y, y, key_padding_mask=padding, need_weights=False)[0]
        x = x + self.block.mlp(self.block.norm2(x))
        return self.head(x.mean(1))


def _padding_samples(count: int, tokens: int = 8) -> np.ndarray:
    """Padding masks as float rows: the last 0..tokens-1 positions of each row padded."""
    lengths = np.random.default_rng(1).integers(1, tokens + 1, count)
    return (np.arange(tokens)[None, :] >= lengths[:, None]).astype(np.float32)


def test_key_padding_mask_given_as_a_model_input(tmp_path):
    """MHA's key_padding_mask as a bool model input runs as a softmax reading the mask at run time
    (edgec_input_masked_softmax_s8): golden == host C (sanitizers) byte for byte, the mask changes
    the output, verify's layer check passes, and the int8 output follows the float model's."""
    torch.manual_seed(0)
    model = PaddedTokenClassifier().eval()
    ids, padding = _token_samples(40)[:, :8], _padding_samples(40)
    example = (torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 8, dtype=torch.bool))
    compiled = compile_model(model, example_inputs=example, calibration=[ids[:24], padding[:24]])
    assert [op.kind for op in compiled.graph.ops].count("input_masked_softmax") == 1
    mask = compiled.graph.tensors[compiled.graph.inputs[1]]
    assert (mask.dtype, mask.scale, mask.zero_point) == ("int8", 1.0, 0)
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, [ids[24:], padding[24:]])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    golden = verify.golden_outputs(compiled.graph, inputs)
    assert verify.compare(golden, verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))).exact
    assert not verify.check_against_reference(compiled, [ids[24:], padding[24:]]).skipped
    unpadded = verify.golden_outputs(
        compiled.graph, verify.quantized_inputs(compiled.graph, [ids[24:], 0 * padding[24:]])
    )
    assert (unpadded != golden).any(axis=1).sum() >= (padding[24:].sum(axis=1) > 0).sum() // 2
    with torch.no_grad():
        expected = np.stack(
            [
                model(torch.from_numpy(i[None]).long(), torch.from_numpy(p[None]).bool()).numpy()[0]
                for i, p in zip(ids[24:-2], padding[24:-2])
            ]
        )
    result = compiled.graph.tensors[compiled.graph.outputs[0]]
    got = np.stack(
        [result.dequantize(verify.unpack(compiled.graph, row, compiled.graph.outputs)[0])[0] for row in golden]
    )
    assert sim.sqnr_db(expected, got[:-2]) > 20.0


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_token_ids_and_padding_mask_on_cortex_m4(tmp_path):
    """The padded token classifier (int32 ids, bool key_padding_mask) under QEMU on Cortex-M4:
    the device's bytes are the golden simulator's."""
    torch.manual_seed(0)
    model = PaddedTokenClassifier().eval()
    ids, padding = _token_samples(28)[:, :8], _padding_samples(28)
    example = (torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 8, dtype=torch.bool))
    compiled = compile_model(model, example_inputs=example, calibration=[ids[:20], padding[:20]], target="cortex-m4")
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, [ids[20:], padding[20:]])
    device = verify.run_on(compiled, tmp_path / "out", "m", inputs, tmp_path / "build")
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), device).exact


class DetectionGrid(nn.Module):
    """A YOLO-style head as written: its cell grid built from arange and meshgrid at run time
    (constants alone: folded), .float(), sigmoid decoding against the grid and anchor buffers."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 2 * 5, 1)
        self.register_buffer("anchors", torch.tensor([[1.0, 1.5], [2.0, 1.0]]).view(1, 2, 1, 1, 2))

    def forward(self, x):
        y = self.conv(x)
        batch, _, rows, cols = y.shape
        y = y.view(batch, 2, 5, rows, cols).permute(0, 1, 3, 4, 2).sigmoid()
        grid_y, grid_x = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
        grid = torch.stack((grid_x, grid_y), 2).view(1, 1, rows, cols, 2).float()
        xy = y[..., 0:2] * 2 - 0.5 + grid
        wh = (y[..., 2:4] * 2) ** 2 * self.anchors
        return xy, wh, y[..., 4:]


def test_constants_computed_at_run_time_are_folded(tmp_path):
    compiled, _ = check_model(tmp_path, "DetectionGrid()", (1, 3, 4, 5), sqnr=30.0)
    constants = [op for op in compiled.graph.ops if op.kind == "binary" and op.attrs.get("constant") is not None]
    assert len(constants) >= 2, [op.kind for op in compiled.graph.ops]  # + grid, * anchors


class Spectra(nn.Module):
    """An audio front end computing its spectrum in the model: |torch.stft| of the waveform (a
    Hann window, export's centre padding) and |torch.fft.rfft| (ortho) of frames."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(32))

    def forward(self, wave):  # [1, 256]
        spectrogram = torch.stft(wave, 32, 16, window=self.window, return_complex=True).abs()  # [1, 17, 17]
        frames = wave.view(1, 8, 32)
        return spectrogram, torch.fft.rfft(frames, norm="ortho").abs()


def test_stft_and_rfft_magnitudes_are_real_ops(tmp_path):
    samples = np.random.default_rng(0).standard_normal((24, 256)).astype(np.float32)
    # 27.7 dB on both here: int8 real and imaginary parts, squared and summed, then a square root
    compiled, _ = check_model(tmp_path, "Spectra()", (1, 256), sqnr=25.0, samples=samples)
    kinds = [op.kind for op in compiled.graph.ops]
    assert kinds.count("conv2d") == 2 and kinds.count("fully_connected") == 2, kinds

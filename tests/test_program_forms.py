"""Program forms that used to end in an internal error or a bare OK: a PT2E program whose add
with a constant, matmul, convolution, lookup table or layer norm leaves its output to float
operators (one clear line, exit 2), and a model whose output does not follow its input (verify
warns)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from edgec.errors import EdgecError
from edgec.frontend.quantize import EdgecQuantizer
from edgec.ops.qspec import ANNOTATION_KEY
from edgec.pipeline import compile_model
from tests.test_cli import run_cli

SHAPE = (1, 3, 6, 6)


class AddThenFloat(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.head = nn.Conv2d(3, 4, 3), nn.Conv2d(4, 2, 1)
        self.register_buffer("shift", torch.randn(1, 4, 1, 1))

    def forward(self, x):
        return self.head((self.conv(x) + self.shift) * 0.5)


class FloatAfterAdd(EdgecQuantizer):
    """Leaves the add's output, and the multiply that reads it, in float (only the head's input is
    quantized again), as a tool that keeps a residual chain float does."""

    def annotate(self, model):
        super().annotate(model)
        for node in model.graph.nodes:
            if node.target == torch.ops.aten.add.Tensor:
                node.meta[ANNOTATION_KEY].output_qspec = None
                for user in node.users:
                    user.meta[ANNOTATION_KEY].output_qspec = None
                    user.meta[ANNOTATION_KEY].input_qspec_map = {}
        return model


def test_an_add_left_in_float_is_one_line(tmp_path, capsys):
    torch.manual_seed(0)
    model, example = AddThenFloat().eval(), (torch.randn(SHAPE),)
    prepared = prepare_pt2e(torch.export.export(model, example).module(), FloatAfterAdd())
    for _ in range(4):
        prepared(torch.randn(SHAPE))
    path = tmp_path / "float_add.pt2"
    torch.export.save(torch.export.export(convert_pt2e(prepared, fold_quantize=True), example), path)
    with pytest.raises(EdgecError, match=r"self\.shift.*leaves the output of this add \('add'\) in float"):
        compile_model(str(path), calibration=None)
    code, _, err = run_cli("build", path, "-o", tmp_path / "out", "--quiet", capsys=capsys)
    assert code == 2 and "internal error" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


class MatmulThenFloat(nn.Module):
    """Attention scores left to a float log_softmax, as litert-torch's quantizer leaves them."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.head = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.log_softmax(torch.matmul(self.a(x), self.b(x).transpose(1, 2)), -1))


def leaving_float(target):
    """EdgecQuantizer, but the outputs of `target`'s nodes and of their readers left float (as a tool
    that keeps part of a graph float does)."""

    class LeavesFloat(EdgecQuantizer):
        def annotate(self, model):
            super().annotate(model)
            for node in model.graph.nodes:
                if node.target == target:
                    node.meta[ANNOTATION_KEY].output_qspec = None
                    for user in node.users:
                        user.meta[ANNOTATION_KEY].output_qspec = None
                        user.meta[ANNOTATION_KEY].input_qspec_map = {}
            return model

    return LeavesFloat()


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.norm, self.head = nn.Conv2d(3, 8, 3, padding=1), nn.LayerNorm(8), nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.log_softmax(self.norm(torch.sigmoid(self.conv(x)).mean((2, 3))), -1))


@pytest.mark.parametrize(
    "target, what",
    [
        (torch.ops.aten.conv2d.default, "conv2d"),
        (torch.ops.aten.sigmoid.default, "sigmoid"),
        (torch.ops.aten.layer_norm.default, "layer_norm"),
    ],
)
def test_an_output_left_in_float_is_one_line(target, what):
    torch.manual_seed(0)
    prepared = prepare_pt2e(torch.export.export(Chain().eval(), (torch.randn(SHAPE),)).module(), leaving_float(target))
    for _ in range(3):
        prepared(torch.randn(SHAPE))
    program = torch.export.export(convert_pt2e(prepared, fold_quantize=True), (torch.randn(SHAPE),))
    with pytest.raises(EdgecError, match=rf"test_program_forms.py.*leaves the output of this {what} .* in float"):
        compile_model(program, calibration=None)


def test_a_matmul_left_in_float_is_one_line():
    torch.manual_seed(0)
    model, example = MatmulThenFloat().eval(), (torch.randn(1, 8, 16),)
    prepared = prepare_pt2e(torch.export.export(model, example).module(), leaving_float(torch.ops.aten.matmul.default))
    for _ in range(4):
        prepared(torch.randn(1, 8, 16))
    program = torch.export.export(convert_pt2e(prepared, fold_quantize=True), example)
    with pytest.raises(EdgecError, match=r"torch\.matmul.*leaves the output of this matmul \('matmul'\) in float"):
        compile_model(program, calibration=None)


MODELS = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self, dead):
        super().__init__()
        self.conv, self.dead = nn.Conv2d(3, 4, 3), dead

    def forward(self, x):
        return F.relu(self.conv(x) - 1000.0) if self.dead else F.relu(self.conv(x))

def dead():
    torch.manual_seed(0)
    return Net(True).eval(), (torch.zeros(1, 3, 6, 6),)

def alive():
    torch.manual_seed(0)
    return Net(False).eval(), (torch.zeros(1, 3, 6, 6),)
"""


@pytest.mark.parametrize("factory, warned", [("dead", True), ("alive", False)])
def test_verify_warns_when_the_output_does_not_follow_the_input(tmp_path, capsys, factory, warned):
    (tmp_path / "nets.py").write_text(MODELS)
    np.save(tmp_path / "calib.npy", np.random.default_rng(0).standard_normal((8, 3, 6, 6)).astype(np.float32))
    code, out, err = run_cli(
        "verify",
        f"{tmp_path / 'nets.py'}:{factory}",
        "--calib",
        tmp_path / "calib.npy",
        "--samples",
        "4",
        "--quiet",
        capsys=capsys,
    )
    assert code == 0, err
    assert "OK: 4 samples" in out
    assert ("output 'relu' is the same on all 4 samples" in err) == warned, err

"""passes/normalize.py's attention and constant rewrites on small exported graphs: what each
becomes, that the rewritten float graph computes what the model does, and what stays refused."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from edgec.errors import EdgecError
from edgec.frontend.export import export
from edgec.passes.normalize import normalize
from edgec.pipeline import check_supported

aten = torch.ops.aten


def _normalized(model: nn.Module, *inputs):
    module = normalize(export(model.eval(), inputs, "test"))
    return module, {n.target for n in module.graph.nodes if n.op == "call_function"}


class _Sdpa(nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **self.options)


@pytest.mark.parametrize("options", [{}, {"scale": 0.3}])
def test_sdpa_becomes_matmul_scale_softmax_matmul(options):
    q, k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 4)
    module, targets = _normalized(_Sdpa(**options), q, k, v)
    assert aten.scaled_dot_product_attention.default not in targets
    assert {aten.matmul.default, aten.mul.Tensor, aten.softmax.int, aten.transpose.int} <= targets
    torch.testing.assert_close(module(q, k, v), F.scaled_dot_product_attention(q, k, v, **options))


def test_causal_sdpa_becomes_a_masked_softmax():
    q = torch.randn(1, 2, 5, 8)
    module, targets = _normalized(_Sdpa(is_causal=True), q, q, q)
    assert (
        aten.scaled_dot_product_attention.default not in targets and torch.ops.edgec.masked_softmax.default in targets
    )
    torch.testing.assert_close(module(q, q, q), F.scaled_dot_product_attention(q, q, q, is_causal=True))


class _InputMask(nn.Module):
    def forward(self, q, mask):
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask > 0)


def test_sdpa_with_a_mask_from_an_input_is_reported_not_rewritten():
    q = torch.randn(1, 2, 5, 8)
    module, targets = _normalized(_InputMask(), q, torch.randn(5, 5))
    assert aten.scaled_dot_product_attention.default in targets
    with pytest.raises(EdgecError, match="scaled_dot_product_attention"):
        check_supported(module, "test")


class _ClassToken(nn.Module):
    def __init__(self, where: str):
        super().__init__()
        self.where = where
        self.token = nn.Parameter(torch.randn(1, 1, 4))
        self.pos = nn.Parameter(torch.randn(1, 4, 4))

    def forward(self, x):
        token = self.token.expand(x.shape[0], -1, -1)
        parts = {"front": [token, x], "back": [x, token], "middle": [x[:, :1], token, x[:, 1:]]}[self.where]
        return torch.cat(parts, dim=1) + self.pos


@pytest.mark.parametrize("where", ["front", "back"])
def test_class_token_cat_becomes_pad_and_one_constant_add(where):
    x = torch.randn(1, 3, 4)
    model = _ClassToken(where)
    module, targets = _normalized(model, x)
    assert aten.cat.default not in targets and aten.expand.default not in targets
    adds = [n for n in module.graph.nodes if n.target == aten.add.Tensor]
    assert len(adds) == 1  # the class token and the positional embedding in one constant
    torch.testing.assert_close(module(x), model(x))


def test_constant_between_live_inputs_stays_a_cat():
    x = torch.randn(1, 3, 4)
    module, targets = _normalized(_ClassToken("middle"), x)
    assert aten.cat.default in targets

"""index_select or x[:, i] by a constant index tensor (TFLite's GATHER_ND): a copy of the picked
slices, exact under edgec's own quantization (a litert-torch program: tests/test_tflm_reference.py,
op_gather); indices the model reads, or picks no strided copies can make, get one clear line."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import edgec
from edgec.errors import EdgecError


class _Picked(nn.Module):
    def __init__(self, picked: torch.Tensor):
        super().__init__()
        self.stem = nn.Conv2d(4, 32, 1)
        self.register_buffer("picked", picked)

    def forward(self, x):
        return self.stem(x).index_select(1, self.picked)


class _Indexed(_Picked):
    def forward(self, x):
        return self.stem(x)[:, self.picked]


class _PickedByInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(4, 8, 1)

    def forward(self, x, picked):
        return self.stem(x).index_select(1, picked)


def _compile(model, *example):
    torch.manual_seed(0)
    return edgec.compile(model.eval(), example, target="host", progress=False)


@pytest.mark.parametrize("form", [_Picked, _Indexed])
def test_constant_indices_compile_as_a_copy_and_verify(form):
    compiled = _compile(form(torch.tensor([30, 3, 3, 4, 5, 0])), torch.randn(1, 4, 6, 6))
    assert [op.kind for op in compiled.compiled.graph.ops] == ["conv2d", "copy"]
    result = compiled.verify(count=4)
    assert "golden simulator == host C, 0 LSB" in str(result) and result.layers_checked == 2, result


@pytest.mark.parametrize(
    "model, example, message",
    [
        (_Picked(torch.randperm(32, generator=torch.Generator().manual_seed(1))), (), "not a strided copy"),
        (_PickedByInput(), (torch.tensor([1, 2]),), "indices the model reads or computes"),
    ],
)
def test_indices_edgec_cannot_copy_are_one_clear_line(model, example, message):
    with pytest.raises(EdgecError, match=message) as error:
        _compile(model, torch.randn(1, 4, 6, 6), *example)
    assert "\n" not in str(error.value) and "index_select(1, " in str(error.value)

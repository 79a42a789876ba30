"""Inputs of any rank, batch and layout compile as exported, from Python: the sample convention
(pipeline.as_samples), run()'s shapes, dynamic dimensions, Python scalar inputs, and errors raised
in the user's own code as edgec.EdgecError naming their file and line (the command line's side:
tests/test_cli.py::test_user_input_cases)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn

import edgec
from edgec import pipeline
from edgec.errors import EdgecError
from edgec.frontend import export


class Rank1(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x, scale=1.0):
        return torch.relu(self.fc(x)) * scale


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def _rank1() -> Rank1:
    torch.manual_seed(0)
    return Rank1().eval()


@pytest.mark.parametrize(
    "input_shape, given, expected",
    [
        ((16,), (5, 16), (5, 16)),  # one more leading axis than the input
        ((16,), (16,), (1, 16)),  # exactly the input: one sample
        ((6, 1, 4), (5, 6, 1, 4), (5, 6, 1, 4)),  # sequence first: dim 0 is time, not a batch
        ((1, 3, 8), (5, 1, 3, 8), (5, 3, 8)),  # a batch of one: its axis is the sample axis...
        ((1, 3, 8), (5, 3, 8), (5, 3, 8)),  # ... and may be left out, as edgec always took it
    ],
)
def test_samples_have_one_more_axis_than_the_input(input_shape, given, expected):
    samples = pipeline.as_samples(np.zeros(given, np.float32), input_shape, "calibration data")
    assert samples.shape == expected
    assert samples.shape[1:] == pipeline.sample_shape(input_shape)


def test_samples_of_another_shape_are_refused_with_both_forms():
    with pytest.raises(EdgecError, match=r"has shape \[5, 3, 9\]; expected \[N, 1, 3, 8\] or \[N, 3, 8\]"):
        pipeline.as_samples(np.zeros((5, 3, 9), np.float32), (1, 3, 8), "calibration data")
    with pytest.raises(EdgecError, match=r"has shape \[5, 8\]; expected \[N, 16\] \(N samples\)"):
        pipeline.as_samples(np.zeros((5, 8), np.float32), (16,), "calibration data")


def test_rank1_input_compiles_runs_and_verifies():
    rng = np.random.default_rng(0)
    compiled = edgec.compile(
        _rank1(), torch.randn(16), calibration=rng.standard_normal((32, 16)), target="host", progress=False
    )
    x = torch.from_numpy(rng.standard_normal((3, 16)).astype(np.float32))
    out = compiled.run(x)
    assert out.shape == (3, 4)
    reference = torch.stack([_rank1()(row) for row in x]).detach()
    assert float((out - reference).abs().max()) < 0.1
    assert compiled.verify(x.numpy(), count=3).samples == 3


def test_batch_of_four_is_one_program_of_four_inferences():
    """Exported with batch 4: calibration [N, 4, C, H, W]; each sample, the whole batch, one invoke."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    compiled = edgec.compile(
        Conv().eval(),
        torch.randn(4, 2, 5, 5),
        target="host",
        progress=False,
        calibration=rng.standard_normal((8, 4, 2, 5, 5)),
    )
    batch = rng.standard_normal((4, 2, 5, 5)).astype(np.float32)
    out = compiled.run(batch)  # exactly the example's shape: one sample
    assert out.shape == (1, 4, 3, 5, 5)
    assert compiled.run(batch[None].repeat(2, axis=0)).shape == (2, 4, 3, 5, 5)
    assert compiled.verify(rng.standard_normal((2, 4, 2, 5, 5)), count=2).samples == 2


def test_dynamic_batch_is_specialised_to_the_example_with_a_note():
    torch.manual_seed(0)
    program = torch.export.export(
        Conv().eval(), (torch.randn(2, 2, 5, 5),), dynamic_shapes={"x": {0: torch.export.Dim("batch", max=8)}}
    )
    notes = []
    loaded = export.load(program)
    assert [list(x.shape) for x in loaded.example_inputs] == [[2, 2, 5, 5]]
    assert len(loaded.notes) == 1 and "dynamic dimensions" in loaded.notes[0] and "[2, 2, 5, 5]" in loaded.notes[0]
    inspection = edgec.inspect(program)
    assert inspection.ok and inspection.input_shapes == [[2, 2, 5, 5]] and str(inspection).startswith("note:")
    compiled = pipeline.compile_model(program, calibration=None, warn=notes.append)
    assert any(note.startswith("note:") for note in notes)
    assert compiled.graph.tensors[compiled.graph.inputs[0]].torch_shape == (2, 2, 5, 5)


def test_python_float_input_is_a_constant_of_the_graph():
    calibration = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    compiled = edgec.compile(_rank1(), (torch.randn(16), 0.5), calibration=calibration, target="host", progress=False)
    assert len(compiled.graph.inputs) == 1 and compiled.graph.inputs[0] == "x"
    x = calibration[:2]  # within the calibrated ranges: int8 is within a few steps of float
    reference = np.stack([(_rank1()(torch.from_numpy(row), 0.5)).detach().numpy() for row in x])
    assert np.abs(compiled.run(x) - reference).max() < 0.05
    assert edgec.inspect(_rank1(), (torch.randn(16), 0.5)).ok


def test_exceptions_in_the_users_model_are_edgec_errors_naming_their_line():
    class Broken(Rank1):
        def forward(self, x):
            return self.fc(x.view(3, -1))

    with pytest.raises(
        EdgecError,
        match=r"torch.export failed: RuntimeError: .*\(at test_shapes.py:\d+: "
        r"return self.fc\(x.view\(3, -1\)\)\)",
    ):
        edgec.compile(Broken(), torch.randn(16), target="host", progress=False)
    with pytest.raises(EdgecError, match=r"test_shapes.py:\d+: return self.fc"):
        edgec.inspect(Broken(), torch.randn(16))


def test_factory_exceptions_are_edgec_errors_naming_their_line(tmp_path):
    (tmp_path / "user_model.py").write_text("def factory():\n    settings = {}\n    return settings['model']\n")
    with pytest.raises(
        EdgecError,
        match=r"factory\(\) raised KeyError: 'model' \(at user_model.py:3: "
        r"return settings\['model'\]\)",
    ):
        edgec.compile(f"{tmp_path / 'user_model.py'}:factory", target="host", progress=False)

"""The model zoo and the bundled digits example: export cleanly, right shapes, MLPerf-sized."""

from pathlib import Path

import numpy as np
import pytest
import torch

from edgec.zoo.mlperf import ZOO, calibration_data, count_macs

DIGITS_DIR = Path(__file__).resolve().parents[1] / "examples" / "digits"

# Reference MAC counts of the MLPerf Tiny models.
MLPERF_MACS = {
    "ds_cnn": 2.66e6,
    "mobilenet_v1_025": 7.49e6,
    "resnet8": 12.5e6,
    "fc_autoencoder": 0.264e6,
}
OUTPUT_SHAPES = {
    "ds_cnn": (1, 12),
    "mobilenet_v1_025": (1, 2),
    "resnet8": (1, 10),
    "fc_autoencoder": (1, 640),
}


@pytest.fixture(scope="module", params=sorted(ZOO))
def zoo_model(request):
    model, example_inputs = ZOO[request.param]()
    return request.param, model, example_inputs


def test_zoo_model_exports_and_matches_eager(zoo_model):
    name, model, example_inputs = zoo_model
    exported = torch.export.export(model, example_inputs)
    with torch.no_grad():
        expected = model(*example_inputs)
        actual = exported.module()(*example_inputs)
    assert expected.shape == OUTPUT_SHAPES[name]
    torch.testing.assert_close(actual, expected)


def test_zoo_model_macs_match_mlperf(zoo_model):
    name, model, example_inputs = zoo_model
    assert count_macs(model, example_inputs) == pytest.approx(MLPERF_MACS[name], rel=0.05)


def test_zoo_model_is_deterministic(zoo_model):
    name, model, example_inputs = zoo_model
    rebuilt, rebuilt_inputs = ZOO[name]()
    torch.testing.assert_close(rebuilt_inputs, example_inputs, rtol=0, atol=0)
    for (key, value), rebuilt_value in zip(model.state_dict().items(), rebuilt.state_dict().values()):
        assert torch.equal(value, rebuilt_value), key


def test_zoo_batchnorm_is_not_identity(zoo_model):
    _, model, _ = zoo_model
    batchnorms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert batchnorms
    for bn in batchnorms:
        assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
        assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))
        assert not torch.allclose(bn.weight, torch.ones_like(bn.weight))


@pytest.mark.parametrize("name", sorted(ZOO))
def test_calibration_data_matches_model_input(name):
    _, (example,) = ZOO[name]()
    data = calibration_data(name, 5, seed=3)
    assert data.dtype == np.float32
    assert data.shape == (5, *example.shape[1:])
    np.testing.assert_array_equal(data, calibration_data(name, 5, seed=3))


def test_digits_example_files_are_consistent():
    calibration = np.load(DIGITS_DIR / "calib.npy")
    test_set = np.load(DIGITS_DIR / "test.npz")
    assert calibration.dtype == np.float32 and calibration.shape == (200, 1, 8, 8)
    assert test_set["x"].dtype == np.float32 and test_set["x"].shape[1:] == (1, 8, 8)
    assert test_set["y"].dtype == np.int64 and test_set["y"].shape == test_set["x"].shape[:1]
    assert 0.0 <= test_set["x"].min() and test_set["x"].max() <= 1.0


def test_digits_model_float_accuracy():
    # The export is specialised to batch size 1, so classify one image at a time.
    model = torch.export.load(DIGITS_DIR / "digits.pt2").module()
    test_set = np.load(DIGITS_DIR / "test.npz")
    with torch.no_grad():
        logits = torch.cat([model(torch.from_numpy(image[None])) for image in test_set["x"]])
    accuracy = (logits.argmax(dim=1).numpy() == test_set["y"]).mean()
    assert accuracy >= 0.95

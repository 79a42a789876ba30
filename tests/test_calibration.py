"""edgec's PTQ options: --calibration minmax|histogram|percentile|mse and --per-channel-linear
(docs/quantization.md has the SQNR table; scripts/measure_quantization.py makes it)."""

from __future__ import annotations

import re

import numpy as np
import torch

from edgec.frontend import calibration
from edgec.frontend.quantize import EdgecQuantizer
from edgec.ops.qspec import ACTIVATION_QSPEC, LINEAR_WEIGHT_QSPEC
from edgec.pipeline import compile_model, load_samples
from tests.device_support import DIGITS
from tests.test_cli import run_cli


def _observed(method: str, values: torch.Tensor) -> tuple[float, float]:
    """(real min, real max) of the int8 grid the observer chose."""
    observer = calibration.observer(method)(
        dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine
    )
    observer(values)
    scale, zero_point = (float(v) for v in observer.calculate_qparams())
    return (-128 - zero_point) * scale, (127 - zero_point) * scale


def _heavy_tailed(count: int = 100_000) -> torch.Tensor:
    values = torch.from_numpy(np.random.default_rng(0).standard_normal(count).astype(np.float32))
    values[:3] = torch.tensor([60.0, -40.0, 55.0])  # a few outliers that min/max would honour
    return values


def test_minmax_keeps_every_value_percentile_and_mse_clip_outliers():
    values = _heavy_tailed()
    low, high = _observed("minmax", values)
    assert low <= -40 and high >= 60
    low, high = _observed("percentile", values)
    assert -10 < low < -2 and 2 < high < 10, (low, high)
    # mse clips three outliers only where their error is smaller than the finer grid's gain
    assert _observed("mse", values)[1] > 50
    low, high = _observed("mse", _heavy_tailed(2_000_000))
    assert -10 < low < -2 and 2 < high < 10, (low, high)
    low, high = _observed("histogram", values)  # torchao's L2 search: within min/max, may keep them
    assert -40.5 < low < 0 < high < 60.5


def test_mse_range_has_less_error_than_minmax_on_its_histogram():
    observer = calibration.MseObserver(dtype=torch.int8, quant_min=-128, quant_max=127, eps=calibration.EPS)
    observer(_heavy_tailed(2_000_000))
    counts = observer.histogram.double().numpy()
    edges = np.linspace(float(observer.min_val), float(observer.max_val), len(counts) + 1)
    centers = (edges[:-1] + edges[1:]) / 2
    chosen = observer.choose_range(edges, counts)
    assert calibration._int8_squared_error(centers, counts, *chosen) < calibration._int8_squared_error(
        centers, counts, edges[0], edges[-1]
    )


def test_percentile_of_a_constant_tensor_does_not_divide_by_zero():
    low, high = _observed("percentile", torch.full((100,), 0.5))
    assert high >= 0.5 and low <= 0


def test_default_quantizer_uses_the_default_specs_unchanged():
    assert EdgecQuantizer().replacements == {}
    replaced = EdgecQuantizer("mse", per_channel_linear=True).replacements
    assert replaced[id(LINEAR_WEIGHT_QSPEC)].qscheme == torch.per_channel_symmetric
    assert replaced[id(ACTIVATION_QSPEC)].observer_or_fake_quant_ctr.p.func is calibration.MseObserver


def test_per_channel_linear_gives_one_multiplier_per_output():
    calib = load_samples(DIGITS / "calib.npy")[:16]
    per_tensor = compile_model(str(DIGITS / "digits.pt2"), calibration=calib, warn=lambda _: None)
    per_channel = compile_model(
        str(DIGITS / "digits.pt2"), calibration=calib, warn=lambda _: None, per_channel_linear=True
    )
    fc = [[op for op in c.graph.ops if op.kind == "fully_connected"][0] for c in (per_tensor, per_channel)]
    assert len(fc[0].attrs["multiplier"]) == 1 and len(fc[1].attrs["multiplier"]) == 10
    assert len(np.unique(fc[1].attrs["weight_scales"])) == 10


def test_verify_with_a_calibration_option(small_digits_calib, capsys):
    code, out, err = run_cli(
        "verify",
        DIGITS / "digits.pt2",
        "--calib",
        small_digits_calib,
        "--samples",
        "8",
        "--quiet",
        "--calibration",
        "mse",
        "--per-channel-linear",
        capsys=capsys,
    )
    assert code == 0 and "0 LSB" in out and re.search(r"OK: checked \d+ of \d+ layers", out), (out, err)


def test_unknown_calibration_is_refused(small_digits_calib, capsys):
    code, out, err = run_cli(
        "build", DIGITS / "digits.pt2", "-o", small_digits_calib.parent / "out", "--calibration", "kl", capsys=capsys
    )
    assert code != 0 and "kl" in (out + err)


def test_non_finite_calibration_values_name_their_op_in_one_line(tmp_path, capsys):
    """A log of calibration values at or below 0 (random normal data into a log-mel front end) gives
    nan / -inf: one line naming the op and its source line, exit 2, no output directory, instead
    of the observer's assertion inside convert_pt2e."""
    model = tmp_path / "logmel.py"
    model.write_text(
        "import torch\n"
        "class LogMel(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(8, 2)\n"
        "    def forward(self, x):\n"
        "        y = torch.log(x)\n"
        "        return self.fc(y)\n"
        "def make():\n"
        "    return LogMel().eval(), (torch.rand(1, 8),)\n"
    )
    samples = tmp_path / "calib.npy"
    np.save(samples, np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32))
    out_dir = tmp_path / "out"
    code, out, err = run_cli("build", f"{model}:make", "--calib", samples, "-o", out_dir, capsys=capsys)
    errors = [line for line in err.splitlines() if line.startswith("edgec: error")]
    assert code == 2 and len(errors) == 1, (out, err)
    assert "logmel.py:7" in errors[0] and "log" in errors[0] and "non-finite" in errors[0]
    assert "Traceback" not in err and not out_dir.exists()
    np.save(samples, np.random.default_rng(0).random((8, 8)).astype(np.float32) + 0.1)
    assert run_cli("build", f"{model}:make", "--calib", samples, "-o", out_dir, capsys=capsys)[0] == 0

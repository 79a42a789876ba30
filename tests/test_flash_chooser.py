"""The weight-precision chooser under a flash budget (`--flash N`, edgec.frontend.precision).

The choice itself (greedy by noise per byte saved, pruned, deterministic tie-breaks); a budget
nothing reaches is one line naming the smallest reachable constants; a model that fits is built
exactly as without a budget. On the digits CNN trained in tests/test_int4.py (its fixture): the chosen
build within the budget, bit-exact, within 0.5 points of int8 top-1, the same on a second run.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import edgec
from edgec.frontend.precision import Layer, choose, frontier_points
from edgec.targets.cores import get_target
from tests.test_cli import run_cli
from tests.test_int4 import DIGITS

HOST = get_target("host")


def _layer(path: str, index: int, noise: float, saved: int) -> Layer:
    return Layer(path, [path], index, noise, 100 + saved, 100)


def test_choose_takes_the_least_noise_per_byte_then_drops_what_the_budget_does_not_need():
    layers = [_layer("a", 0, 1e-3, 100), _layer("b", 1, 1e-4, 50), _layer("c", 2, 4e-4, 200), _layer("d", 3, 1e-2, 400)]
    # noise per byte: b 2e-6, c 2e-6 (tie: graph order), a 1e-5, d 2.5e-5
    choice = choose(layers, 1000, 800, 1e-3)
    assert choice.int4 == ["c"] and choice.constants_bytes == 800  # b then c reach 250; b is not needed
    assert choice.estimated_sqnr_db == pytest.approx(-10 * np.log10(1e-3 + 4e-4))
    assert [size for size, _ in choice.frontier] == [1000, 950, 750, 650, 250]
    assert choose(layers, 1000, 999, 1e-3).int4 == ["b"]
    assert choose(list(reversed(layers)), 1000, 800, 1e-3) == choice  # graph order, not list order
    assert choose(layers, 1000, 249, 1e-3) is None  # every layer int4 saves 750 B
    assert choose(layers, 1000, 250, 1e-3).int4 == ["a", "b", "c", "d"]


def test_choose_prefers_one_quiet_layer_over_several_noisier_ones():
    # a then b have the least noise per byte (1.67e-6 each, c 1.9e-6): 2e-4 together; c alone 1.9e-4
    layers = [_layer("a", 0, 1e-4, 60), _layer("b", 1, 1e-4, 60), _layer("c", 2, 1.9e-4, 100)]
    assert choose(layers, 1000, 900, 0.0).int4 == ["c"]
    layers[2].noise = 2.1e-4
    assert choose(layers, 1000, 900, 0.0).int4 == ["a", "b"]


def test_frontier_points_keep_both_ends():
    frontier = [(1000 - 10 * i, 30.0 - i) for i in range(20)]
    points = frontier_points(frontier, 5)
    assert points[0] == frontier[0] and points[-1] == frontier[-1] and len(points) == 5
    assert frontier_points(frontier[:3]) == frontier[:3]


def test_a_budget_nothing_reaches_is_one_line_naming_the_smallest(tmp_path, small_digits_calib, capsys):
    args = ("build", DIGITS / "digits.pt2", "--calib", small_digits_calib, "--target", "cortex-m4", "--opt", "size")
    code, stdout, err = run_cli(*args, "--flash", "1500", "-o", tmp_path / "out", "--quiet", capsys=capsys)
    assert code == 2 and stdout == ""
    [line] = err.strip().splitlines()
    assert line.startswith("edgec: error: model does not fit cortex-m4: constants ")
    assert line.endswith(" B is the smallest the constants reach with int4 weights in every layer that can take them)")
    assert not (tmp_path / "out").exists()


def test_a_model_that_fits_is_built_as_without_a_budget(tmp_path, small_digits_calib, capsys):
    args = ("build", DIGITS / "digits.pt2", "--calib", small_digits_calib, "--target", "cortex-m4", "--quiet")
    assert run_cli(*args, "-o", tmp_path / "typical", capsys=capsys)[0] == 0
    assert run_cli(*args, "--flash", "64K", "-o", tmp_path / "budget", capsys=capsys)[0] == 0
    for path in sorted((tmp_path / "typical").rglob("*")):
        if path.is_file():
            assert path.read_bytes() == (tmp_path / "budget" / path.relative_to(tmp_path / "typical")).read_bytes(), (
                path
            )
    assert "precision" not in json.loads((tmp_path / "budget" / "report.json").read_text())


def test_api_compile_takes_the_flash_budget(small_digits_calib):
    compiled = edgec.compile(
        str(DIGITS / "digits.pt2"), calibration=np.load(small_digits_calib), target="host", flash="2400", progress=False
    )
    record = compiled.compiled.plan.precision
    assert record["fits"] and record["constants_bytes"] <= 2400 < record["int8_constants_bytes"]
    assert compiled.compiled.choices[0].startswith("weights under --flash 2400: ")

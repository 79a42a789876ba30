"""The activation-precision chooser (`--activations auto`, edgec.frontend.precision, docs/precision.md).

Which layer outputs it may make int16 and what a set of paths is estimated to buy; on the digits
CNN trained in tests/test_int4.py (its fixture): the same choice twice, SQNR vs float above int8's,
top-1 within half a point, bit-exact golden == sanitized host C, report.json and the HTML card; a
RAM budget of the int8 arena keeps the int8 build; the command line prints the choice. The keyword
spotter of tests/test_int4_kws.py checks a RAM budget that allows some layers but not all.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from edgec.errors import EdgecError
from edgec.frontend import precision
from edgec.pipeline import compile_model, constants_total, prepare, quantize_model
from edgec.targets.cores import get_target
from edgec.tools.report import write_html_report
from edgec.tools.verify import golden_outputs, quantized_inputs
from tests.test_cli import run_cli
from tests.test_int4 import DIGITS, _bit_exact, trained_digits  # noqa: F401 (a fixture)


def test_moves_are_layer_outputs_read_by_named_layers_and_not_the_model_output():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).eval()
    _, module = prepare(model, (torch.zeros(1, 8),))
    moves = precision.int16_moves(module)
    # the last linear's output is the model's: int16 there would change the model's output dtype
    assert [(move.path, move.paths) for move in moves] == [("0", ("0", "2")), ("2", ("2", "4"))]
    assert precision.int16_moves(module, int4_paths=["2"]) == []  # the 16x8 kernels take int8 weights
    moves[0].noise, moves[1].noise = 1e-3, 1e-4
    assert precision.removed_noise(moves, precision.int16_nodes(module, ("0",))) == 0  # "2" still reads int8
    assert precision.removed_noise(moves, precision.int16_nodes(module, ("0", "2"))) == 1e-3
    assert precision.removed_noise(moves, precision.int16_nodes(module, ("0", "2", "4"))) == pytest.approx(1.1e-3)


def test_auto_is_for_a_target_and_chooses_the_int16_layers_itself():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).eval()
    options = {"example_inputs": (torch.zeros(1, 8),), "calibration": np.zeros((4, 8), np.float32)}
    with pytest.raises(EdgecError, match="use compile_model"):
        quantize_model(model, activations="auto", **options)
    with pytest.raises(EdgecError, match="--activations auto chooses the int16 layers itself"):
        compile_model(model, activations="auto", int16_layers=["0"], **options)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The builds on one thread: deterministic, and under `make test`'s two workers on two cores a
    second torch thread per worker only waits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _top1(compiled, x, y) -> float:
    logits = golden_outputs(compiled.graph, quantized_inputs(compiled.graph, x)).view(np.int8)
    return float((logits.argmax(1) == y).mean())


@pytest.fixture(scope="module")
def digits_auto(trained_digits):  # noqa: F811
    model, calibration, x, y = trained_digits
    options = {"example_inputs": (torch.from_numpy(x[:1]),), "calibration": calibration, "warn": lambda _: None}
    int8 = compile_model(model, target=get_target("host"), **options)
    auto = [compile_model(model, target=get_target("host"), activations="auto", **options) for _ in range(2)]
    tight = compile_model(
        model, target=get_target("host").with_budget(ram=int8.plan.arena_bytes), activations="auto", **options
    )
    return int8, auto, tight, x, y


def test_auto_on_trained_digits_is_deterministic_more_accurate_and_bit_exact(digits_auto, tmp_path):
    int8, (auto, again), _, x, y = digits_auto
    record = auto.plan.precision["activations"]
    assert again.plan.precision == auto.plan.precision  # the same inputs, the same choice
    assert record["int16_layers"] and record["arena_bytes"] == auto.plan.arena_bytes > int8.plan.arena_bytes
    chosen = [layer for layer in record["layers"] if layer["activations"] == "int16"]
    assert chosen and all(set(layer["int16_layers"]) <= set(record["int16_layers"]) for layer in chosen)
    int16_ops = [op for op in auto.graph.ops if auto.graph.tensors[op.outputs[0]].dtype == "int16"]
    assert int16_ops and all(op.kernel.reason.startswith("int16: chosen by --activations auto") for op in int16_ops)
    assert auto.choices[0].startswith("activations auto without a RAM budget: arena ")
    assert f"(--int16-layers {','.join(record['int16_layers'])})" in auto.choices[0]
    top1 = {"int8": _top1(int8, x, y), "auto": _top1(auto, x, y)}
    print(
        f"digits, host --activations auto: --int16-layers {','.join(record['int16_layers'])}, arena "
        f"{record['int8_arena_bytes']:,} -> {record['arena_bytes']:,} B, SQNR {record['int8_sqnr_db']} -> "
        f"{record['measured_sqnr_db']} dB (estimated {record['estimated_sqnr_db']}), top-1 {top1}"
    )
    assert record["measured_sqnr_db"] > record["int8_sqnr_db"]
    assert top1["auto"] >= top1["int8"] - 0.005
    _bit_exact(auto, x[:16], tmp_path)
    report = json.loads((tmp_path / "model" / "report.json").read_text())
    assert report["precision"]["activations"] == json.loads(json.dumps(record))
    page = write_html_report(report, tmp_path / "report.html").read_text()
    assert "Activations (--activations auto)" in page and f"--int16-layers {','.join(record['int16_layers'])}" in page


def test_a_ram_budget_of_the_int8_arena_keeps_the_int8_build(digits_auto):
    int8, _, tight, _, _ = digits_auto
    record = tight.plan.precision["activations"]
    assert record["int16_layers"] == [] and all(layer["activations"] == "int8" for layer in record["layers"])
    assert tight.plan.arena_bytes == int8.plan.arena_bytes
    assert "int16" not in {tensor.dtype for tensor in tight.graph.tensors.values()}
    assert len(record["frontier"]) > 1 and record["frontier"][-1]["arena_bytes"] > int8.plan.arena_bytes


def test_with_a_flash_budget_the_weights_are_chosen_first_and_int4_layers_keep_int8_activations(trained_digits):  # noqa: F811
    model, calibration, x, _ = trained_digits
    options = {"example_inputs": (torch.from_numpy(x[:1]),), "calibration": calibration, "warn": lambda _: None}
    target = get_target("host").with_budget(flash=2863)  # 92 % of int8's 3,112 B: one layer int4
    weights_only = compile_model(model, target=target, **options)
    auto = compile_model(model, target=target, activations="auto", **options)
    record = auto.plan.precision
    assert record["int4_layers"] == weights_only.plan.precision["int4_layers"] and record["int4_layers"]
    assert all(not set(layer["int16_layers"]) & set(record["int4_layers"]) for layer in record["activations"]["layers"])
    assert record["activations"]["constants_bytes"] == constants_total(auto.graph) <= 2863
    assert auto.choices[0].startswith("activations auto ") and auto.choices[2].startswith("weights under --flash 2863")


def test_cli_prints_the_choice_and_refuses_auto_with_int16_layers(tmp_path, small_digits_calib, capsys):
    args = ("build", DIGITS / "digits.pt2", "--calib", small_digits_calib, "--activations", "auto", "--quiet")
    code, out, err = run_cli(*args, "--int16-layers", "3", "-o", tmp_path / "refused", capsys=capsys)
    assert code == 2 and err.strip() == (
        "edgec: error: --activations auto chooses the int16 layers itself: drop --int16-layers, or name them all"
    )
    code, out, err = run_cli(*args, "-o", tmp_path / "out", "--report", capsys=capsys)
    assert code == 0, err
    [line] = [line for line in out.splitlines() if line.startswith("activations auto ")]
    record = json.loads((tmp_path / "out" / "report.json").read_text())["precision"]["activations"]
    assert f"(--int16-layers {','.join(record['int16_layers'])})" in line
    assert "Activations (--activations auto)" in (tmp_path / "out" / "report.html").read_text()

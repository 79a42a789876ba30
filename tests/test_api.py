"""The Python API end to end, as a notebook uses it: an in-memory module calibrated from a
DataLoader, the golden simulator against the generated C's bytes, the saved directory against
`edgec build`'s, verify on QEMU, float vs int8 evaluation, errors, and `edgec inspect`."""

from __future__ import annotations

import filecmp
import importlib.util
import inspect
import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import edgec
from edgec import pipeline
from edgec.tools import verify as checks
from tests.device_support import needs_toolchain
from tests.test_cli import run_cli, write_model

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "examples" / "digits"
SAMPLES = 24


def _factory(path: Path):
    spec = importlib.util.spec_from_file_location("api_test_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.factory()


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def calibration() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((SAMPLES, 1, 6, 6)).astype(np.float32)


@pytest.fixture(scope="module")
def compiled(model_file, calibration):
    """The CLI test's Net, in memory, calibrated from a DataLoader of (input, label) batches."""
    model, example = _factory(model_file)
    loader = DataLoader(
        TensorDataset(torch.from_numpy(calibration), torch.zeros(SAMPLES, dtype=torch.long)), batch_size=5
    )
    return edgec.compile(model, example, calibration=loader, target="cortex-m4", name="factory", progress=False)


def _same_files(left: Path, right: Path) -> list[str]:
    """Relative paths of the files that differ or exist on one side only."""
    names = sorted(
        {p.relative_to(left) for p in left.rglob("*") if p.is_file()}
        | {p.relative_to(right) for p in right.rglob("*") if p.is_file()}
    )
    return [
        str(n)
        for n in names
        if not ((left / n).is_file() and (right / n).is_file() and filecmp.cmp(left / n, right / n, shallow=False))
    ]


def test_save_writes_what_edgec_build_writes(compiled, model_file, calibration, tmp_path, capsys):
    np.save(tmp_path / "calib.npy", calibration)
    code, _, err = run_cli(
        "build",
        f"{model_file}:factory",
        "--calib",
        tmp_path / "calib.npy",
        "--target",
        "cortex-m4",
        "--quiet",
        "-o",
        tmp_path / "cli",
        capsys=capsys,
    )
    assert code == 0, err
    compiled.save(tmp_path / "api")
    # Only the header comment naming the origin differs: a file.py:factory spec vs the in-memory Net.
    assert _same_files(tmp_path / "cli", tmp_path / "api") == ["factory.c", "factory.h"]
    for name in ("factory.c", "factory.h"):
        cli_lines = (tmp_path / "cli" / name).read_text().splitlines()
        api_lines = (tmp_path / "api" / name).read_text().splitlines()
        differing = [(a, b) for a, b in zip(cli_lines, api_lines) if a != b]
        assert len(cli_lines) == len(api_lines) and len(differing) == 1, differing
        assert "from model.py:factory" in differing[0][0] and "from Net." in differing[0][1]


def test_save_is_byte_identical_to_build_for_the_same_program(tmp_path, capsys):
    calib = np.load(DIGITS / "calib.npy")[:16]
    np.save(tmp_path / "calib.npy", calib)
    code, _, err = run_cli(
        "build",
        DIGITS / "digits.pt2",
        "--calib",
        tmp_path / "calib.npy",
        "--target",
        "cortex-m4",
        "--quiet",
        "-o",
        tmp_path / "cli",
        capsys=capsys,
    )
    assert code == 0, err
    compiled = edgec.compile(
        str(DIGITS / "digits.pt2"), calibration=torch.from_numpy(calib), target="cortex-m4", progress=False
    )
    assert compiled.name == "digits"
    compiled.save(tmp_path / "api")
    assert _same_files(tmp_path / "cli", tmp_path / "api") == []


def test_run_equals_the_generated_c_bytes(compiled, calibration, tmp_path):
    """run() on int8 inputs gives the bytes the host C computes (what verify compares), in PyTorch
    layout; on float inputs, those outputs dequantized."""
    graph = compiled.graph
    rows = checks.quantized_inputs(graph, calibration)
    on_host = pipeline.compile_for(compiled.compiled, "host")  # the same program, the host's kernels
    pipeline.emit(on_host, tmp_path / "out", "factory")
    c_bytes = checks.run_host(
        checks.build_host(tmp_path / "out", "factory", tmp_path / "build"), rows, checks.output_bytes(graph)
    )
    assert np.array_equal(c_bytes, checks.golden_outputs(graph, rows))
    x_int8 = rows.reshape(SAMPLES, 1, 6, 6)  # one channel: the stored layout is PyTorch's
    int8_out = compiled.run(x_int8)
    assert int8_out.dtype == np.int8 and int8_out.shape == (SAMPLES, 3)
    assert np.array_equal(int8_out.reshape(SAMPLES, -1), c_bytes)
    output = graph.tensors[graph.outputs[0]]
    float_out = compiled.run(torch.from_numpy(calibration))
    assert isinstance(float_out, torch.Tensor) and float_out.dtype == torch.float32
    assert np.array_equal(float_out.numpy(), output.dequantize(c_bytes).astype(np.float32))
    one = compiled.run(calibration[:1].reshape(1, 1, 6, 6))  # a batch of one, shaped like the example
    assert np.array_equal(one, float_out.numpy()[:1])


def test_verify_on_host_reports_accuracy(compiled, calibration):
    result = compiled.verify(calibration, target="host", count=8)
    assert result.samples == 8 and result.target == "host"
    assert result.output_sqnr_db > 20 and result.layers_checked >= 2
    assert {row["layer"] for row in result.layer_sqnr}
    assert "0 LSB" in str(result)


@needs_toolchain
def test_verify_on_cortex_m4_under_qemu(compiled, calibration):
    result = compiled.verify(calibration, target="cortex-m4", count=8)
    assert result.target == "cortex-m4" and result.samples == 8
    assert "cortex-m4 (QEMU)" in str(result)


def test_report_and_summary(compiled):
    summary = compiled.summary()
    assert summary.startswith("factory for cortex-m4: ") and "most expensive layers (by MACs" in summary
    cell = compiled._repr_html_()  # the report, isolated from the notebook's styles
    assert cell.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;') and cell.endswith("</iframe>")
    html = compiled.report()
    assert html.startswith("<!DOCTYPE html>") and 'class="bars bars-flash"' in html
    assert 'class="bars bars-sqnr"' in html  # SQNR measured on the first calibration samples
    assert "edgec_conv_s8" in html and "DSP extension" in html


def test_evaluate_compares_float_and_int8_on_the_users_data():
    program = torch.export.load(str(DIGITS / "digits.pt2"))
    compiled = edgec.compile(
        program, calibration=np.load(DIGITS / "calib.npy")[:64], target="cortex-m4", name="digits", progress=False
    )
    test = np.load(DIGITS / "test.npz")
    loader = DataLoader(
        TensorDataset(torch.from_numpy(test["x"][:120]), torch.from_numpy(test["y"][:120])), batch_size=32
    )
    result = edgec.evaluate(compiled, loader)
    assert result.samples == 120 and result.metric == "top1_accuracy" and result.reference == "float model"
    assert result.float_value > 0.9 and abs(result.difference) <= 0.05
    model = program.module()
    with torch.no_grad():
        expected = float(
            np.mean(
                [int(model(torch.from_numpy(x[None])).argmax()) == y for x, y in zip(test["x"][:120], test["y"][:120])]
            )
        )
    assert result.float_value == pytest.approx(expected)
    mae = edgec.evaluate(
        compiled,
        (test["x"][:40], torch.nn.functional.one_hot(torch.from_numpy(test["y"][:40]), 10)),
        metric=lambda out, target: float((out.softmax(1) - target).abs().mean()),
    )
    assert mae.samples == 40 and 0 <= mae.int8_value < 0.2


@pytest.mark.parametrize("problem", ["no_example", "bad_calibration", "bad_target", "bad_name"])
def test_errors_are_edgec_errors_with_the_cli_messages(model_file, tmp_path, capsys, problem):
    model, example = _factory(model_file)
    kwargs = {"calibration": np.zeros((4, 1, 6, 6), np.float32), "progress": False}
    cli_args = []
    if problem == "no_example":
        example = None
    elif problem == "bad_calibration":
        kwargs["calibration"] = np.zeros((4, 3, 8, 8), np.float32)
    elif problem == "bad_target":
        kwargs["target"], cli_args = "cortex-m99", ["--target", "cortex-m99"]
    else:
        kwargs["name"], cli_args = "9lives", ["--name", "9lives"]
    with pytest.raises(edgec.EdgecError) as raised:
        edgec.compile(model, example, **kwargs)
    message = str(raised.value)
    assert "\n" not in message and "Traceback" not in message
    if problem == "no_example":
        assert "example inputs" in message
        return
    np.save(tmp_path / "calib.npy", kwargs["calibration"])
    code, _, err = run_cli(
        "build",
        f"{model_file}:factory",
        "--calib",
        tmp_path / "calib.npy",
        *cli_args,
        "-o",
        tmp_path / "out",
        capsys=capsys,
    )
    assert code == 2
    assert err.strip() == f"edgec: error: {message}"


def test_import_edgec_is_cheap_and_the_api_loads_on_use():
    script = textwrap.dedent("""
        import sys
        import edgec
        assert "torch" not in sys.modules and edgec.EdgecError and edgec.__version__
        assert "compile" in dir(edgec)
        compile_ = edgec.compile
        assert "torch" in sys.modules and compile_.__module__ == "edgec.api"
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


UNSUPPORTED_MODEL = textwrap.dedent("""
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            y = torch.cumsum(self.conv(x), 1)
            return torch.cumsum(y, 2).logcumsumexp(1)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 4, 3, padding=1)
            self.block = Block()
            self.pool = nn.MaxPool2d(2, dilation=2)
            self.head = nn.Linear(4, 5)

        def forward(self, x):
            x = self.block(torch.relu(self.stem(x)))
            x = self.pool(x)
            x = torch.fft.fft(x).real
            return self.head(x.mean((2, 3)))


    def factory():
        return Net(), (torch.randn(1, 3, 16, 16),)
""")


def test_inspect_lists_every_unsupported_operator_grouped_with_module_paths(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(UNSUPPORTED_MODEL)
    # A fresh process, torch's import included, no calibration. Its CPU time is what is bounded:
    # the wall time on a machine shared by other jobs measures them too.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [sys.executable, "-m", "edgec.cli", "inspect", f"{path}:factory"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "calibrating" not in out + result.stderr and "Traceback" not in result.stderr
    unsupported = out[out.index("UNSUPPORTED (4 operators):") : out.index("\nSUPPORTED (")]
    for operator in (
        "aten.cumsum.default x2",
        "aten.logcumsumexp.default x1",
        "aten.fft_fft.default x1",
        "aten.real.default x1",
    ):
        assert f"  {operator}\n" in unsupported
    assert "block (Block) at net.py:" in unsupported and "torch.cumsum(self.conv(x), 1)" in unsupported
    assert "net.py:" in unsupported and "torch.fft.fft(x).real" in unsupported
    supported = out[out.index("\nSUPPORTED (") :]
    assert (
        "aten.conv2d.default x2 -> conv2d: within its limits (limits: 1-D and 2-D; every output channel's" in supported
    )
    assert "BEYOND LIMITS: dilated max pooling: pool (MaxPool2d) at net.py:" in supported
    assert elapsed < 15, f"edgec inspect took {elapsed:.1f} s of CPU"


def test_inspect_from_python_on_a_supported_model():
    program = torch.export.load(str(DIGITS / "digits.pt2"))
    result = edgec.inspect(program)
    assert result.ok and not result.unsupported
    assert {op.unit for op in result.operators} >= {"conv2d", "fully_connected"}
    assert "all supported" in str(result)


def test_inspect_reports_the_limits_build_enforces():
    """log_softmax over more than 4095 classes: build refuses it, so inspect names it too."""

    class WideLogSoftmax(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 5000)

        def forward(self, x):
            return torch.log_softmax(self.fc(x), 1)

    result = edgec.inspect(torch.export.export(WideLogSoftmax().eval(), (torch.randn(1, 4),)))
    assert not result.ok and "BEYOND LIMITS: log_softmax over 5000 elements (at most 4095)" in str(result)


def test_inspect_names_each_use_by_what_it_becomes():
    """aten.mean.dim is a global average pool over the spatial axes and a reduction over channels."""

    class Means(torch.nn.Module):
        def forward(self, x):
            return x.mean((2, 3)) + x.mean(1).flatten(1)[:, :4]

    text = str(edgec.inspect(torch.export.export(Means(), (torch.randn(1, 4, 2, 2),))))
    assert "aten.mean.dim x1 -> global average pool (mean over the spatial axes)" in text
    assert "aten.mean.dim x1 -> reduce (mean)" in text


def test_a_pt2e_quantized_exported_program_keeps_its_qparams():
    """An ExportedProgram the user quantized with PT2E compiles in memory without calibration, and
    evaluate compares the int8 model with that program's Q/DQ graph run in float."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgec.frontend.quantize import EdgecQuantizer

    program = torch.export.load(str(DIGITS / "digits.pt2"))
    prepared = prepare_pt2e(program.module(), EdgecQuantizer())
    for sample in np.load(DIGITS / "calib.npy")[:16]:
        prepared(torch.from_numpy(sample[None]))
    example = torch.from_numpy(np.load(DIGITS / "calib.npy")[:1])
    quantized = torch.export.export(convert_pt2e(prepared), (example,))
    compiled = edgec.compile(quantized, target="host", name="digits", progress=False)
    assert compiled.compiled.float_module is None  # no calibration ran: the program's own qparams
    test = np.load(DIGITS / "test.npz")
    x = test["x"][:64]
    assert compiled.run(x).shape == (64, 10)
    result = edgec.evaluate(compiled, (x, test["y"][:64]))
    assert result.reference == "Q/DQ program in float" and result.int8_value > 0.85
    assert abs(result.difference) <= 0.05


def test_edgec_report_takes_verify_per_layer_sqnr(tmp_path, capsys):
    """The CLI's way to the same report: verify --layers-json, then report --sqnr."""
    calib = tmp_path / "calib.npy"
    np.save(calib, np.load(DIGITS / "calib.npy")[:8])
    code, out, err = run_cli(
        "verify",
        DIGITS / "digits.pt2",
        "--calib",
        calib,
        "--samples",
        "8",
        "--quiet",
        "--layers-json",
        tmp_path / "sqnr.json",
        capsys=capsys,
    )
    assert code == 0, err
    code, out, err = run_cli(
        "build", DIGITS / "digits.pt2", "--calib", calib, "--quiet", "-o", tmp_path / "out", capsys=capsys
    )
    assert code == 0, err
    assert "most expensive layers (by MACs" in out
    code, out, err = run_cli("report", tmp_path / "out", "--sqnr", tmp_path / "sqnr.json", capsys=capsys)
    assert code == 0, err
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'class="bars bars-sqnr"' in html and 'class="bars bars-flash"' in html and " dB</td>" in html


# `edgec build` options (click parameter names) whose edgec.compile keyword is named otherwise, and
# those a CompiledModel method does instead; compile's keywords no build option has.
BUILD_OPTION_KEYWORDS = {"models": "model", "calib": "calibration", "method": "calibration_method", "quiet": "progress"}
BUILD_OPTION_METHODS = {"out_dir": "save", "html_report": "report"}
BUILD_OPTION_SAVE_KEYWORDS = {"shared_arena"}  # several models: edgec.save([...], out_dir, shared_arena=)
COMPILE_ONLY_KEYWORDS = {"example_inputs"}  # the CLI's model file holds them
DIFFERENT_DEFAULTS = {
    "target": ("host", "cortex-m4"),
    "progress": (False, True),  # --quiet off is progress on
    "int16_layers": ("", ()),
    "int4_layers": ("", ()),
    # given once per model (several models): none given is an empty tuple
    "calibration": ((), None),
    "name": ((), None),
}


def test_every_build_option_has_a_compile_keyword():
    from edgec.cli import build

    options = {
        BUILD_OPTION_KEYWORDS.get(param.name, param.name): param
        for param in build.params
        if param.name not in {*BUILD_OPTION_METHODS, *BUILD_OPTION_SAVE_KEYWORDS}
    }
    keywords = inspect.signature(edgec.compile).parameters
    assert sorted(set(options) - set(keywords)) == []
    assert sorted(set(keywords) - set(options) - COMPILE_ONLY_KEYWORDS) == []
    assert {param.name for param in build.params} >= set(BUILD_OPTION_METHODS)
    assert all(callable(getattr(edgec.CompiledModel, method)) for method in BUILD_OPTION_METHODS.values())
    assert BUILD_OPTION_SAVE_KEYWORDS <= set(inspect.signature(edgec.save).parameters)
    # What the build command receives for an option not given, next to compile's default.
    received = build.make_context("build", ["model.pt2", "-o", "out"]).params
    defaults = {
        name: (received[option.name], keywords[name].default) for name, option in options.items() if name != "model"
    }
    assert {name: pair for name, pair in defaults.items() if pair[0] != pair[1]} == DIFFERENT_DEFAULTS


def test_the_quantization_keywords_give_what_the_build_options_give(tmp_path, capsys):
    """calibration_method= and per_channel_linear= write what --calibration and --per-channel-linear
    write, byte for byte, and change the program."""
    calib = np.load(DIGITS / "calib.npy")[:16]
    np.save(tmp_path / "calib.npy", calib)
    code, _, err = run_cli(
        "build",
        DIGITS / "digits.pt2",
        "--calib",
        tmp_path / "calib.npy",
        "--calibration",
        "percentile",
        "--per-channel-linear",
        "--quiet",
        "-o",
        tmp_path / "cli",
        capsys=capsys,
    )
    assert code == 0, err
    for keywords, out in (({"calibration_method": "percentile", "per_channel_linear": True}, "api"), ({}, "default")):
        edgec.compile(str(DIGITS / "digits.pt2"), calibration=calib, target="host", progress=False, **keywords).save(
            tmp_path / out
        )
    assert _same_files(tmp_path / "cli", tmp_path / "api") == []
    assert "digits_weights.c" in _same_files(tmp_path / "cli", tmp_path / "default")


@needs_toolchain
def test_stream_saves_verifies_and_benches_what_the_cli_does_with_stream(tmp_path, capsys):
    """stream=True: save() writes what `edgec build --stream` writes, verify() also checks the stream
    (as `edgec verify --stream`) and bench() counts the one time step `edgec bench --stream` counts."""
    from edgec.zoo import seq

    calib = seq.calibration_data("lstm_kws", 8, seed=0)
    np.save(tmp_path / "calib.npy", calib)
    model = f"{seq.__file__}:lstm_kws"
    code, out, err = run_cli(
        "bench", model, "--calib", tmp_path / "calib.npy", "--stream", "--quiet", "--json", capsys=capsys
    )
    assert code == 0, err
    compiled = edgec.compile(model, calibration=calib, target="cortex-m4", stream=True, progress=False)
    compiled.save(tmp_path / "api")
    code, _, err = run_cli(
        "build",
        model,
        "--calib",
        tmp_path / "calib.npy",
        "--target",
        "cortex-m4",
        "--stream",
        "--quiet",
        "-o",
        tmp_path / "cli",
        capsys=capsys,
    )
    assert code == 0, err
    assert _same_files(tmp_path / "cli", tmp_path / "api") == []
    assert "void lstm_kws_reset_state(void)" in (tmp_path / "api" / "lstm_kws.c").read_text()
    result = compiled.verify(calib, target="host", count=2)
    assert result.stream_steps == 98 and "stream: 98 steps, 0 LSB, == the whole-sequence model" in str(result)
    assert compiled.bench(sample=calib[:1]).total_instructions == json.loads(out)["total_instructions"]
    assert compiled.run(calib[:2]).shape == (2, 12)  # whole sequences, the model's meaning


PIXELS_WARNING = (
    "WARNING: the calibration data spans [0, 255] in integer values, over 10x larger than the example "
    "input's [0, 1]: the int8 ranges are chosen from it, so prepare it as the model's input (e.g. "
    "normalised as in training)"
)


def test_calibration_unlike_the_example_input_is_one_warning(tmp_path, capsys):
    """Raw 0..255 pixels for the digits model, whose example input is in [0, 1]: one line from the
    CLI and from the API; the data as the model takes it: none."""
    floats = np.load(DIGITS / "calib.npy")[:16]
    pixels = np.round(floats * 255).astype(np.uint8)
    np.save(tmp_path / "pixels.npy", pixels)
    np.save(tmp_path / "floats.npy", floats)
    code, _, err = run_cli(
        "build",
        DIGITS / "digits.pt2",
        "--calib",
        tmp_path / "pixels.npy",
        "--quiet",
        "-o",
        tmp_path / "pixels",
        capsys=capsys,
    )
    assert code == 0, err
    assert [line for line in err.splitlines() if "calibration data" in line] == [PIXELS_WARNING]
    edgec.compile(str(DIGITS / "digits.pt2"), calibration=torch.from_numpy(pixels), progress=False)
    assert capsys.readouterr().err.splitlines() == [PIXELS_WARNING]
    code, _, err = run_cli(
        "build",
        DIGITS / "digits.pt2",
        "--calib",
        tmp_path / "floats.npy",
        "--quiet",
        "-o",
        tmp_path / "floats",
        capsys=capsys,
    )
    assert code == 0 and "WARNING" not in err, err
    edgec.compile(str(DIGITS / "digits.pt2"), calibration=floats / 20, progress=False)
    assert "over 10x smaller than the example input's [0, 1]" in capsys.readouterr().err


class _BoxAndScores(torch.nn.Module):
    """A detector-like head: box regression first, then class probabilities."""

    def __init__(self):
        super().__init__()
        self.body, self.box, self.cls = torch.nn.Linear(6, 8), torch.nn.Linear(8, 4), torch.nn.Linear(8, 3)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.box(h), torch.softmax(self.cls(h), -1)


def test_each_output_is_judged_as_what_it_is():
    """verify gives every output its own SQNR and max |error|, top-1 agreement only for the class
    scores (not the box regression); the report shows them; evaluate's metric gets both outputs."""
    torch.manual_seed(0)
    x = torch.randn(48, 6)
    compiled = edgec.compile(_BoxAndScores().eval(), x[:1], calibration=x, target="host", progress=False)
    result = compiled.verify(x[:10])
    assert [o["top1_agreement"] is None for o in result.outputs] == [True, False]
    assert [o["shape"] for o in result.outputs] == [[1, 4], [1, 3]]
    assert result.top1_agreement == result.outputs[1]["top1_agreement"]
    assert result.output_sqnr_db == min(o["sqnr_db"] for o in result.outputs) > 20
    assert "output 0 [1, 4]: SQNR" in str(result) and f"checked {result.layers_checked} of" in str(result)
    assert "Accuracy per output" in compiled.report()
    named = compiled.verify(x[:10], class_outputs=[0])
    assert named.outputs[0]["top1_agreement"] is not None and named.outputs[1]["top1_agreement"] is None
    seen = []
    edgec.evaluate(compiled, (x, torch.zeros(48)), metric=lambda out, target: seen.append(out) or 0.0)
    assert all(isinstance(out, tuple) and [o.shape for o in out] == [(48, 4), (48, 3)] for out in seen)

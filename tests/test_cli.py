"""The command line as a user meets it: real files, real exits, one-line errors, no tracebacks."""

from __future__ import annotations

import filecmp
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from edgec import cli

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "examples" / "digits"
MODEL_FILE = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.fc = nn.Linear(4 * 6 * 6, 3)

        def forward(self, x):
            x = torch.relu(self.conv(x))
            {extra}
            return self.fc(torch.flatten(x, 1))


    def factory():
        torch.manual_seed(0)
        return Net().eval(), (torch.randn(1, 1, 6, 6),)
""")


def run_cli(*args, capsys) -> tuple[int, str, str]:
    """edgec's real entry point in-process (fast), with its exit code and output."""
    old_argv = sys.argv
    sys.argv = ["edgec", *map(str, args)]
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    finally:
        sys.argv = old_argv
    out, err = capsys.readouterr()
    return code, out, err


def write_model(tmp_path: Path, extra: str = "pass") -> Path:
    path = tmp_path / "model.py"
    path.write_text(MODEL_FILE.format(extra=extra))
    return path


def test_build_writes_the_documented_directory(tmp_path, capsys):
    code, out, err = run_cli(
        "build",
        DIGITS / "digits.pt2",
        "--calib",
        DIGITS / "calib.npy",
        "--name",
        "digits",
        "-o",
        tmp_path / "out",
        "--quiet",
        capsys=capsys,
    )
    assert code == 0, err
    files = {p.name for p in (tmp_path / "out").iterdir()}
    assert {
        "digits.h",
        "digits.c",
        "digits_weights.c",
        "digits_weights.h",
        "edgec.mk",
        "CMakeLists.txt",
        "report.json",
        "runtime",
    } <= files
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert set(report) >= {"name", "target", "macs", "arena_bytes", "weights_bytes", "layers"}
    assert "arena" in out
    header = (tmp_path / "out" / "digits.h").read_text()
    for macro in ("DIGITS_INPUT_SCALE", "DIGITS_INPUT_ZERO_POINT", "DIGITS_ARENA_SIZE", "DIGITS_OUTPUT_SIZE", "NHWC"):
        assert macro in header
    # Only the kernels this model calls are copied.
    assert not (tmp_path / "out" / "runtime" / "src" / "softmax").exists()


def test_same_input_gives_byte_identical_output(tmp_path, capsys):
    for out in ("a", "b"):
        code, _, err = run_cli(
            "build",
            DIGITS / "digits.pt2",
            "--calib",
            DIGITS / "calib.npy",
            "-o",
            tmp_path / out,
            "--quiet",
            capsys=capsys,
        )
        assert code == 0, err
    comparison = filecmp.dircmp(tmp_path / "a", tmp_path / "b")
    assert not comparison.diff_files and not comparison.left_only and not comparison.right_only
    for sub in ("runtime",):
        assert not filecmp.dircmp(tmp_path / "a" / sub, tmp_path / "b" / sub).diff_files


@pytest.mark.parametrize("external_arena", [False, True])
def test_generated_code_is_strict_c99(tmp_path, capsys, external_arena):
    out = tmp_path / "out"
    assert (
        run_cli(
            "build",
            DIGITS / "digits.pt2",
            "--calib",
            DIGITS / "calib.npy",
            "--name",
            "digits",
            "-o",
            out,
            "--quiet",
            capsys=capsys,
        )[0]
        == 0
    )
    sources = [str(p) for p in out.glob("*.c")] + [str(p) for p in (out / "runtime" / "src").rglob("*.c")]
    defines = ["-DDIGITS_EXTERNAL_ARENA"] if external_arena else []
    main = tmp_path / "main.c"
    arena = "int8_t digits_arena[DIGITS_ARENA_SIZE];\n" if external_arena else ""
    main.write_text(f'#include "digits.h"\n{arena}int main(void) {{ return digits_invoke(); }}\n')
    subprocess.run(
        [
            "cc",
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            *defines,
            f"-I{out}",
            f"-I{out / 'runtime' / 'include'}",
            str(main),
            *sources,
            "-o",
            str(tmp_path / "prog"),
        ],
        check=True,
    )
    assert subprocess.run([str(tmp_path / "prog")]).returncode == 0


def test_verify_passes_and_reports_accuracy(capsys):
    code, out, err = run_cli(
        "verify",
        DIGITS / "digits.pt2",
        "--calib",
        DIGITS / "calib.npy",
        "--samples",
        "8",
        "--quiet",
        "--per-layer",
        capsys=capsys,
    )
    assert code == 0, err
    assert "OK: 8 samples" in out and "0 LSB" in out
    assert re.search(
        r"^int8 vs float model: output \[1, 10\]: SQNR -?[\d.]+ dB, max \|error\| [\d.]+, top-1 agreement \d+%",
        out,
        re.M,
    ), out


def test_factory_spec_and_missing_calibration_warns(tmp_path, capsys):
    model = write_model(tmp_path)
    code, out, err = run_cli("build", f"{model}:factory", "-o", tmp_path / "out", "--quiet", capsys=capsys)
    assert code == 0, err
    assert "WARNING" in err and "--calib" in err
    assert (tmp_path / "out" / "factory.h").exists()  # the factory names the C symbols


def test_unsupported_operators_are_grouped_with_counts_and_source_lines(tmp_path, capsys):
    model = write_model(tmp_path, extra="x = torch.cumsum(x, 1) + torch.cumsum(x, 1).logcumsumexp(1)")
    code, out, err = run_cli("build", f"{model}:factory", "-o", tmp_path / "out", capsys=capsys)
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith("edgec: error:") and "cannot compile 3 operator uses" in lines[0], err
    cumsum = next(line for line in lines if "aten.cumsum" in line)
    assert "x2" in cumsum and "model.py:" in cumsum and "torch.cumsum(x, 1)" in cumsum
    assert any("aten.logcumsumexp" in line for line in lines)
    assert len(lines) == 3 and max(len(line) for line in lines) < 200, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_pickled_module_is_refused_with_instructions(tmp_path, capsys):
    path = tmp_path / "model.pt2"
    torch.save(torch.nn.Sequential(torch.nn.Linear(2, 2)), path)
    code, _, err = run_cli("build", path, "-o", tmp_path / "out", capsys=capsys)
    assert code == 2
    assert "pickled" in err and "torch.export.save" in err
    assert not (tmp_path / "out").exists()


USER_MODELS = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(self.pool(torch.relu(self.conv(x))).flatten(1))


    class Rank1(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 4)

        def forward(self, x, scale=1.0):
            return torch.relu(self.fc(x)) * scale


    class SequenceFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(4, 5)

        def forward(self, x):
            return self.lstm(x)[0]


    class Audio(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(1, 4, 5, stride=2)

        def forward(self, x):
            return torch.relu(self.conv(x))


    class Cumulative(Rank1):
        def forward(self, x):
            return self.fc(x).cumsum(1) + self.fc(x).cumsum(1)


    class Broken(Rank1):
        def forward(self, x):
            return self.fc(x.view(3, -1))


    class Indices(nn.Module):
        def forward(self, x):
            values, indices = nn.functional.max_pool2d(x, 2, return_indices=True)
            return values, indices


    def rank1_input():
        torch.manual_seed(0)
        return Rank1().eval(), (torch.randn(16),)


    def python_float_input():
        torch.manual_seed(0)
        return Rank1().eval(), (torch.randn(16), 0.5)


    def sequence_first_lstm():
        torch.manual_seed(0)
        return SequenceFirst().eval(), (torch.randn(6, 1, 4),)


    def batch4_audio():
        torch.manual_seed(0)
        return Audio().eval(), (torch.randn(4, 1, 32),)


    def unsupported_operator():
        return Cumulative().eval(), (torch.randn(1, 16),)


    def factory_raises():
        weights = {}
        return Rank1(), (torch.randn(16) * weights["scale"],)


    def forward_raises():
        return Broken(), (torch.randn(16),)


    def max_pool_indices():
        return Indices(), (torch.randn(1, 2, 4, 4),)
""")
# README.md's list of user inputs: exit 0 (verified) or exit 2 with one line, never an internal error.
USER_INPUT_CASES = {
    "missing_model": 2,
    "pickled_module": 2,
    "bad_calib_shape": 2,
    "bad_name": 2,
    "unsupported_operator": 2,
    "factory_raises": 2,
    "forward_raises": 2,
    "max_pool_indices": 2,
    "rank1_input": 0,
    "sequence_first_lstm": 0,
    "batch4_audio": 0,
    "batch4": 0,
    "dynamic_batch": 0,
    "dynamic_hw": 0,
    "python_float_input": 0,
}


def user_input(tmp_path: Path, case: str) -> tuple[str, list]:
    """The model argument and extra build options of a USER_INPUT_CASES case."""
    models = tmp_path / "models.py"
    models.write_text(USER_MODELS)
    if case in ("batch4", "dynamic_batch", "dynamic_hw"):
        namespace: dict = {}
        exec(compile(USER_MODELS, str(models), "exec"), namespace)
        torch.manual_seed(0)
        model, batch, dims = namespace["Tiny"]().eval(), 4 if case != "dynamic_hw" else 1, None
        if case == "dynamic_batch":
            dims = {"x": {0: torch.export.Dim("batch", min=1, max=16)}}
        elif case == "dynamic_hw":
            dims = {"x": {2: torch.export.Dim("h", min=4, max=32), 3: torch.export.Dim("w", min=4, max=32)}}
        path = tmp_path / f"{case}.pt2"
        torch.export.save(torch.export.export(model, (torch.randn(batch, 2, 8, 8),), dynamic_shapes=dims), path)
        return str(path), []
    if case == "missing_model":
        return str(tmp_path / "nope.pt2"), []
    if case == "pickled_module":
        torch.save(torch.nn.Sequential(torch.nn.Linear(2, 2)), tmp_path / "pickled.pt2")
        return str(tmp_path / "pickled.pt2"), []
    if case == "bad_calib_shape":
        np.save(tmp_path / "calib.npy", np.zeros((4, 8), np.float32))
        return f"{models}:rank1_input", ["--calib", tmp_path / "calib.npy"]
    if case == "bad_name":
        return f"{models}:rank1_input", ["--name", "9lives"]
    return f"{models}:{case}", []


def test_readme_lists_every_user_input_case():
    table = (ROOT / "README.md").read_text().split("tests/test_cli.py::test_user_input_cases")[1].split("\n\n")[1]
    rows = re.findall(r"^  \| (`\w+`(?:, `\w+`)*) \|", table, re.M)
    assert {name for row in rows for name in re.findall(r"\w+", row)} == set(USER_INPUT_CASES)


@pytest.mark.parametrize("case", USER_INPUT_CASES)
def test_user_input_cases(tmp_path, capsys, case):
    """Every case in README.md's list: `verify` (which builds, runs the C and checks every layer)
    exits 0, or `build` exits 2 with one line and no output directory; `inspect` agrees (0 for a
    model that compiles, non-zero for one that does not). Never an internal error (exit 3)."""
    model, extra = user_input(tmp_path, case)
    expected = USER_INPUT_CASES[case]
    if expected == 0:
        code, out, err = run_cli("verify", model, "--samples", "4", "--quiet", *extra, capsys=capsys)
        assert code == 0 and "0 LSB" in out, err
        if case.startswith("dynamic"):
            notes = [line for line in err.splitlines() if line.startswith("note:")]
            assert len(notes) == 1 and "dynamic dimensions" in notes[0] and "example input" in notes[0], err
    else:
        code, _, err = run_cli("build", model, "-o", tmp_path / "out", *extra, capsys=capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and lines[0].startswith("edgec: error:"), err
        # One line; an operator refusal lists each use (problem, place) on a line of its own below it.
        assert len(lines) == 1 or ("cannot compile" in lines[0] and all(line.startswith("  ") for line in lines[1:])), (
            err
        )
        assert "Traceback" not in err and "internal error" not in err
        assert not (tmp_path / "out").exists()
        if case == "bad_calib_shape":
            assert "[4, 8]" in err and "[N, 16]" in err
        if case in ("factory_raises", "forward_raises"):
            assert "models.py:" in err and ("weights[" in err if case == "factory_raises" else "x.view(3, -1)" in err)
        if case == "max_pool_indices":
            assert "cannot compile 1 operator use:" in lines[0] and "(return_indices=True) used" in lines[1], err
    if case in ("missing_model", "pickled_module", "bad_calib_shape", "bad_name"):
        return  # not about the model's operators
    inspect_code, out, err = run_cli("inspect", model, capsys=capsys)
    assert (inspect_code == 0) == (expected == 0) and inspect_code in (0, 1, 2), out + err
    assert "internal error" not in err


def test_console_script_exits_without_traceback(tmp_path):
    """The installed entry point, as a subprocess: errors reach the shell as one line + exit 2."""
    result = subprocess.run(
        [sys.executable, "-m", "edgec.cli", "build", str(tmp_path / "missing.pt2"), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [f"edgec: error: {tmp_path / 'missing.pt2'}: no such file"]


def test_build_never_replaces_a_foreign_directory(tmp_path, capsys):
    precious = tmp_path / "firmware"
    precious.mkdir()
    (precious / "main.c").write_text("int main(void) { return 0; }\n")
    code, _, err = run_cli(
        "build", DIGITS / "digits.pt2", "--calib", DIGITS / "calib.npy", "-o", precious, "--quiet", capsys=capsys
    )
    assert code == 2 and "not an edgec output directory" in err
    assert (precious / "main.c").exists()


def test_html_memory_report_from_build_and_report_command(tmp_path, capsys):
    out = tmp_path / "out"
    code, text, err = run_cli(
        "build", DIGITS / "digits.pt2", "--calib", DIGITS / "calib.npy", "-o", out, "--quiet", "--report", capsys=capsys
    )
    assert code == 0, err
    assert "peak" in text and "liveness bound" in text
    page = (out / "report.html").read_text()
    assert "<svg" in page and "conv2d_0" in page
    code, text, err = run_cli("report", out, "-o", tmp_path / "again.html", capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "again.html").read_text() == page

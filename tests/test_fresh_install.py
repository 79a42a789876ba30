"""edgec as `pip install -e .` leaves it, without the test extras: every command works on the
bundled digits example, `edgec --help` and `edgec report` do not import torch, and user mistakes
(non-finite weights, budgets beyond the emulated board) are one line and a non-zero exit.

The commands run in subprocesses whose sitecustomize.py (on PYTHONPATH) blocks the packages only
the test extras install, as a clean virtual environment would not have them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.device_support import DIGITS, ROOT, needs_toolchain

TEST_ONLY_PACKAGES = ("pytest", "_pytest", "xdist", "hypothesis", "sklearn")
SITECUSTOMIZE = textwrap.dedent(f"""
    import importlib.machinery
    import sys

    BLOCKED = {TEST_ONLY_PACKAGES!r}


    # sys.path's finder, except that the test extras are not there: importing one fails and
    # importlib.util.find_spec says None, as in a clean venv.
    class WithoutTestExtras(importlib.machinery.PathFinder):
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                return None
            return super().find_spec(name, path, target)


    sys.meta_path[:] = [WithoutTestExtras if finder is importlib.machinery.PathFinder else finder
                        for finder in sys.meta_path]
""")
# edgec's entry point, reporting on stderr whether torch was imported.
EDGEC = textwrap.dedent("""
    import sys
    from edgec.cli import main
    sys.argv = ["edgec", *sys.argv[1:]]
    try:
        main()
    finally:
        print("torch imported" if "torch" in sys.modules else "torch not imported", file=sys.stderr)
""")


@pytest.fixture
def clean_env(tmp_path) -> dict:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(site)
    return env


def edgec(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", EDGEC, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_test_only_packages_are_blocked(clean_env):
    for package in TEST_ONLY_PACKAGES:
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import importlib.util; assert importlib.util.find_spec({package!r}) is None; import {package}",
            ],
            env=clean_env,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 1 and f"No module named '{package}'" in result.stderr, result.stderr


def test_help_does_not_import_torch(clean_env):
    for args in (["--help"], ["report", "--help"], ["build", "--help"]):
        result = edgec(clean_env, *args)
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip().splitlines()[-1] == "torch not imported"


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_build_verify_bench_and_report_work_without_the_test_extras(clean_env, tmp_path, small_digits_calib):
    clean_env["EDGEC_CACHE_DIR"] = os.environ["EDGEC_CACHE_DIR"]
    model, out = DIGITS / "digits.pt2", tmp_path / "digits"
    common = ("--calib", small_digits_calib, "--quiet")

    built = edgec(clean_env, "build", model, "-o", out, *common)
    assert built.returncode == 0, built.stderr
    verified = edgec(clean_env, "verify", model, "--samples", 4, *common)
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("OK: 4 samples")
    benched = edgec(clean_env, "bench", model, "--target", "cortex-m4", "--json", *common)
    assert benched.returncode == 0, benched.stderr
    assert '"total_instructions"' in benched.stdout
    reported = edgec(clean_env, "report", out)
    assert reported.returncode == 0, reported.stderr
    assert (out / "report.html").exists()
    assert reported.stderr.strip().splitlines()[-1] == "torch not imported"


def test_non_finite_weights_and_buffers_are_one_line(clean_env, tmp_path):
    (tmp_path / "net.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn


        def _net():
            torch.manual_seed(0)
            layers = (nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 3))
            return nn.Sequential(*layers).eval()


        def nan_weight():
            net = _net()
            with torch.no_grad():
                net[4].weight[1, 2] = float("nan")
            return net, (torch.randn(1, 1, 6, 6),)


        def inf_buffer():
            net = _net()
            net[1].running_var[2] = float("-inf")
            return net, (torch.randn(1, 1, 6, 6),)
    """)
    )
    for factory, message in (
        ("nan_weight", "parameter '4.weight' contains NaN"),
        ("inf_buffer", "buffer '1.running_var' contains an infinite value"),
    ):
        result = edgec(clean_env, "build", f"{tmp_path / 'net.py'}:{factory}", "-o", tmp_path / factory, "--quiet")
        assert result.returncode == 2
        errors = [line for line in result.stderr.splitlines() if line.startswith("edgec: ")]
        assert errors == [
            f"edgec: error: {tmp_path / 'net.py'}:{factory}: {message}; a model's weights and buffers must be finite"
        ], result.stderr
        assert not (tmp_path / factory).exists()


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_a_budget_beyond_the_emulated_board_is_one_line(clean_env, tmp_path):
    """--ram 2M passes the budget check, but QEMU's Cortex-M55 board has 512 KiB of RAM: the
    link fails, and edgec says so in one line instead of the linker's."""
    clean_env["EDGEC_CACHE_DIR"] = os.environ["EDGEC_CACHE_DIR"]
    (tmp_path / "wide.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn


        def wide():
            torch.manual_seed(0)
            return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU()).eval(), (torch.randn(1, 3, 200, 200),)
    """)
    )
    result = edgec(
        clean_env,
        "verify",
        f"{tmp_path / 'wide.py'}:wide",
        "--target",
        "cortex-m55",
        "--ram",
        "2M",
        "--samples",
        1,
        "--quiet",
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("edgec: ")]
    assert len(errors) == 1 and "ld:" not in result.stderr, result.stderr
    assert errors[0].startswith(
        "edgec: error: the model program does not fit QEMU's mps3-an547 board for "
        "cortex-m55: its RAM (524,288 B) overflows by "
    )
    assert errors[0].endswith(
        "the budget of 2,097,152 B (--ram/--flash) is larger than the board, which can only run models that fit it"
    )

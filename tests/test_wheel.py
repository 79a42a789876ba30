"""edgec as a user installs it: the sdist, and the wheel pip builds from it, hold everything
`edgec build/verify/bench/report` read (templates/ and runtime_c/), and that wheel, installed into
a fresh virtual environment outside the checkout, compiles, verifies (host C and QEMU Cortex-M4)
and benchmarks the bundled digits example from an empty directory.

The virtual environment sees this interpreter's packages (--system-site-packages: torch is not
installed twice; run the tests from the interpreter `make install-test` set up, not from another
venv) and has no pip or setuptools of its own (this interpreter's pip installs into it, and torch
needs a newer setuptools than venv's). The wheel is installed with its dependencies but without an
index, so it installs only if its declared ranges accept the torch and torchao installed here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.device_support import DIGITS, ROOT, needs_toolchain

PACKAGE_DATA = ("templates", "runtime_c")  # at the checkout's top level; edgec/<folder> in the wheel
SDIST_SOURCES = ("pyproject.toml", "README.md", "edgec", *PACKAGE_DATA)


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=600, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, command))}:\n{result.stdout}\n{result.stderr}"
    return result


def package_data_files() -> list[str]:
    """Every file of templates/ and runtime_c/, relative to the checkout."""
    return sorted(
        path.relative_to(ROOT).as_posix()
        for folder in PACKAGE_DATA
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[Path, Path, str]:
    """The sdist, built from a copy of the package's sources (building writes edgec.egg-info next to
    them, which stays out of the checkout), the wheel pip builds from that sdist, and what the
    wheel's build printed."""
    out = tmp_path_factory.mktemp("dist")
    source = out / "source"
    source.mkdir()
    for name in SDIST_SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])",
            out,
        ],
        cwd=source,
    )
    [sdist] = out.glob("edgec-*.tar.gz")
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v", "-w", out, sdist])
    [wheel] = out.glob("edgec-*.whl")
    return sdist, wheel, built.stdout + built.stderr


def test_the_sdist_and_the_wheel_hold_the_templates_and_the_runtime(dists):
    sdist, wheel, log = dists
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        in_sdist = set(archive.getnames())
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    files = package_data_files()
    assert any(f.startswith("runtime_c/src/") for f in files) and "templates/model.h.j2" in files
    assert [f for f in files if f"{top}/{f}" not in in_sdist] == []
    assert [f for f in files if f"edgec/{f}" not in in_wheel] == []
    # A folder of runtime_c/ missing from pyproject.toml's packages: shipped today, but setuptools
    # warns that it "would be ignored" (the line names it).
    assert [line for line in log.splitlines() if "absent from the `packages` configuration" in line] == []


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_the_wheel_in_a_fresh_venv_builds_verifies_and_benches_from_an_empty_directory(
    dists, tmp_path, small_digits_calib
):
    _, wheel, _ = dists
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv])
    python, edgec = venv / "bin" / "python", venv / "bin" / "edgec"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "PYTHONPATH"))}
    run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index", wheel], env=env)
    work = tmp_path / "empty"
    work.mkdir()
    located = run([python, "-c", "import edgec.resources as r; print(r.data_dir('runtime_c'))"], cwd=work, env=env)
    assert Path(located.stdout.strip()).is_relative_to(venv), located.stdout

    model, common = DIGITS / "digits.pt2", ("--calib", small_digits_calib, "--quiet")
    run([edgec, "build", model, "-o", "digits", *common], cwd=work, env=env)
    assert (work / "digits" / "runtime" / "include" / "edgec_nn.h").is_file()
    host = run([edgec, "verify", model, "--samples", 4, *common], cwd=work, env=env)
    assert host.stdout.startswith("OK: 4 samples, golden simulator == host C, 0 LSB"), host.stdout
    board = run([edgec, "verify", model, "--target", "cortex-m4", "--samples", 2, *common], cwd=work, env=env)
    assert board.stdout.startswith("OK: 2 samples, golden simulator == cortex-m4 (QEMU), 0 LSB"), board.stdout
    bench = run([edgec, "bench", model, "--target", "cortex-m4", "--json", *common], cwd=work, env=env)
    assert '"total_instructions"' in bench.stdout
    run([edgec, "report", "digits"], cwd=work, env=env)
    assert (work / "digits" / "report.html").is_file()

"""The report of the visual-wake-words reference model (MobileNetV1-0.25, edgec.zoo.mlperf) as a person
sees it: compiled with the Python API, benchmarked on the Cortex-M4 board (QEMU) and opened in
headless Chromium -- a screenshot is taken, the page logs nothing to the console, and it shows the
memory timeline and the time, flash and SQNR plots per layer.

Chromium comes from `make toolchain` (Debian's chromium package); without it this test skips,
and fails with EDGEC_REQUIRE_TOOLCHAIN=1 (CI), like the Cortex-M tests."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import edgec
from edgec.tools.report import write_html_report
from edgec.zoo import mlperf
from tests.device_support import needs_toolchain, require_tools

CHROMIUM_INSTALL = "apt-get install -y --no-install-recommends chromium (make toolchain)"
SVG = "{http://www.w3.org/2000/svg}"
# Chromium writes each console message (log, warning, error, uncaught exception) as a CONSOLE line.
CONSOLE_LINE = re.compile(r":CONSOLE[:(]")


def chromium() -> str:
    require_tools("chromium", install=CHROMIUM_INSTALL)
    return shutil.which("chromium")


def headless(page: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Chromium on `page`, headless, no network (every host name resolves nowhere)."""
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={cwd / 'profile'}",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def vww(tmp_path_factory):
    """MobileNetV1-0.25 compiled for the Cortex-M4, benchmarked under QEMU, saved and reported."""
    model, example = mlperf.mobilenet_v1_025()
    compiled = edgec.compile(
        model,
        example,
        calibration=mlperf.calibration_data("mobilenet_v1_025", 8, seed=0),
        target="cortex-m4",
        name="vww",
        progress=False,
    )
    bench = compiled.bench()
    out = tmp_path_factory.mktemp("vww")
    compiled.save(out / "vww")
    page = out / "report.html"
    compiled.report(page)
    return compiled, bench, out, page


@needs_toolchain
def test_vww_report_in_headless_chromium(vww, tmp_path):
    compiled, bench, _, page = vww
    screenshot = tmp_path / "report.png"
    shot = headless(page, "--window-size=1280,4000", f"--screenshot={screenshot}", cwd=tmp_path)
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert screenshot.stat().st_size > 20_000 and screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    console = [line for line in shot.stderr.splitlines() if CONSOLE_LINE.search(line)]
    assert console == [], console
    dom = headless(page, "--dump-dom", cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert not [line for line in dom.stderr.splitlines() if CONSOLE_LINE.search(line)]
    for css_class in (
        'class="timeline"',
        'class="bars bars-time"',
        'class="bars bars-flash"',
        'class="bars bars-sqnr"',
    ):
        assert css_class in dom.stdout, css_class  # the browser parsed the inline SVG plots


@needs_toolchain
def test_vww_report_shows_memory_instructions_and_flash_per_layer(vww):
    compiled, bench, _, page = vww
    html = page.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # self-contained
    assert "<script" not in html and "https://" not in html
    svgs = [ET.fromstring(svg) for svg in re.findall(r"<svg.*?</svg>", html, re.DOTALL)]
    classes = [svg.get("class") for svg in svgs]
    assert classes == ["timeline", "bars bars-time", "bars bars-flash", "bars bars-sqnr"]
    report = compiled.report_data()
    counted = {layer.name: layer.instructions for layer in bench.layers}
    time_bars = svgs[1].findall(f"{SVG}g")
    assert len(time_bars) == len(counted) and len(counted) >= 28  # 27 convolutions, pool, head
    for bar in time_bars:
        name = bar.find(f"{SVG}text").text
        assert bar.find(f"{SVG}title").text.endswith(f"{counted[name]:,}")
    flash = {bar.find(f"{SVG}text").text: bar.find(f"{SVG}title").text for bar in svgs[2].findall(f"{SVG}g")}
    assert sum(layer["constants_bytes"] for layer in report["layers"]) == report["weights_bytes"]
    assert all(name in flash for name in counted)
    assert "Time per layer: instructions executed" in html and "Instructions" in html
    assert f"{bench.total_instructions:,}" in html
    rows = re.findall(r'<tr id="layer-(\d+)">', html)
    assert len(rows) == len(report["layers"])
    assert all("sqnr_db" in layer for layer in report["layers"] if layer["op"] in ("conv2d", "depthwise_conv2d"))
    assert "most expensive layers (by instructions" in compiled.summary()


@needs_toolchain
def test_edgec_report_merges_bench_and_sqnr_files(vww, tmp_path):
    compiled, bench, out, _ = vww
    (tmp_path / "bench.json").write_text(json.dumps(bench.to_json()))
    sqnr = compiled.layer_sqnr()
    (tmp_path / "sqnr.json").write_text(json.dumps(sqnr))
    page = write_html_report(out / "vww", tmp_path / "report.html", bench=bench.to_json(), sqnr=sqnr)
    html = page.read_text()
    assert 'class="bars bars-time"' in html and "instructions executed" in html and 'class="bars bars-sqnr"' in html
    first = bench.layers[0]
    assert f"{first.instructions:,}" in html

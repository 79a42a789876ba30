"""report.json's memory fields and the HTML memory report made from a real compiled model."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from edgec.pipeline import compile_model, emit
from edgec.tools.report import write_html_report
from edgec.zoo import mlperf

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    """resnet8 (residual adds keep buffers alive across layers), emitted to a C directory."""
    compiled = compile_model(f"{mlperf.__file__}:resnet8", calibration=mlperf.calibration_data("resnet8", 8, seed=0))
    out_dir = tmp_path_factory.mktemp("build") / "resnet8"
    emit(compiled, out_dir, "resnet8")
    return out_dir


@pytest.fixture(scope="module")
def report(build_dir):
    return json.loads((build_dir / "report.json").read_text())


def test_report_json_has_live_bytes_and_buffer_lifetimes(report):
    layers, buffers = report["layers"], report["buffers"]
    for index, layer in enumerate(layers):
        live = [b for b in buffers if b["first_layer"] <= index <= b["last_layer"]]
        in_use = set().union(*(range(b["offset"], b["offset"] + b["bytes"]) for b in live))
        assert layer["live_bytes"] == len(in_use)  # an in-place layer's input and output count once
    assert max(layer["live_bytes"] for layer in layers) <= report["lower_bound_bytes"] <= report["arena_bytes"]
    assert report["lower_bound_bytes"] <= report["lower_bound_without_in_place_bytes"]
    for buffer in buffers:
        assert set(buffer) >= {"name", "offset", "bytes", "first_layer", "last_layer"}
        assert 0 <= buffer["offset"] and buffer["offset"] + buffer["bytes"] <= report["arena_bytes"]
        assert -1 <= buffer["first_layer"] <= buffer["last_layer"] <= len(layers)
    assert [b["kind"] for b in buffers if b["kind"] in ("input", "output")] == ["input", "output"]


def test_report_json_shows_in_place_layers_and_scratch(report):
    by_name = {b["name"]: b for b in report["buffers"]}
    in_place = [layer for layer in report["layers"] if layer["in_place"]]
    assert {layer["op"] for layer in in_place} == {"add", "conv2d"}  # residual adds, strided shortcuts
    assert report["in_place_layers"] == len(in_place)
    for layer in in_place:
        source = by_name[layer["in_place"]]
        output = next(b for b in report["buffers"] if b["overwrites"] == source["name"])
        assert output["first_layer"] == source["last_layer"]  # written over it by the layer that reads it last
        assert layer["arena_offset"] == output["offset"]
    assert report["scratch_bytes"] == sum(layer["scratch_bytes"] for layer in report["layers"])
    assert all(
        by_name[f"{layer['name']}.scratch"]["kind"] == "scratch" for layer in report["layers"] if layer["scratch_bytes"]
    )


def test_html_report_draws_one_rectangle_per_buffer(report, build_dir, tmp_path):
    page = write_html_report(build_dir, tmp_path / "report.html").read_text()
    svg = ET.fromstring(re.search(r"<svg.*?</svg>", page, re.DOTALL).group(0))  # the SVG is well-formed XML
    buffers = svg.findall(f"{SVG}a[@class='buffer']")
    assert len(buffers) == len(report["buffers"])
    assert all(len(a.findall(f"{SVG}rect")) == 1 for a in buffers)
    tooltips = [a.find(f"{SVG}title").text for a in buffers]
    assert all(tip.startswith(b["name"]) for tip, b in zip(tooltips, report["buffers"]))
    assert svg.find(f"{SVG}line[@class='arena-line']") is not None
    # Each in-place layer hands its input's bytes over to its output at a dashed line.
    handovers = svg.findall(f"{SVG}line[@class='handover']")
    assert len(handovers) == report["in_place_layers"] > 0
    assert all("runs in place" in line.find(f"{SVG}title").text for line in handovers)


def test_html_report_shows_summary_and_every_layer(report, tmp_path):
    page = write_html_report(report, tmp_path / "report.html").read_text()
    for figure in (report["arena_bytes"], report["lower_bound_bytes"], report["weights_bytes"], report["macs"]):
        assert f"{figure:,}" in page
    rows = re.findall(r'<tr id="layer-(\d+)">', page)
    assert rows == [str(i) for i in range(len(report["layers"]))]
    assert all(layer["name"] in page for layer in report["layers"])


def test_html_report_is_self_contained(build_dir, tmp_path):
    page = write_html_report(build_dir / "report.json", tmp_path / "report.html").read_text()
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<script" not in page


def test_report_kernel_is_the_function_each_layer_calls(report, build_dir):
    """The kernel column is the unit's recorded choice (op.kernel), and it is what the C calls."""
    source = (build_dir / "resnet8.c").read_text()
    sections = {section.split(":", 1)[0]: section for section in re.split(r"/\* layer \d+, ", source)[1:]}
    for layer in report["layers"]:
        if layer["op"] == "reshape":  # a view: no code
            assert (
                layer["kernel"] == "" and layer["kernel_reason"].startswith("a view") and layer["name"] not in sections
            )
        else:
            assert f"{layer['kernel']}(" in sections[layer["name"]] and layer["kernel_reason"], layer

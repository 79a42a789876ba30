"""The HTML report: one self-contained page (inline CSS and SVG, no scripts, nothing fetched)
made from a build's report.json, for a person to open in a browser.

It shows the summary, a timeline of the arena (x: execution step, y: arena offset; one rectangle
per buffer over its lifetime and byte range, like TFLM's arena visualiser but for the whole run),
per-layer bar charts (time: instructions from `edgec bench`, else MACs; flash constants; int8-vs-
float SQNR when measured) and the per-layer table with the kernel each layer runs and why. A layer
that runs in place hands its input's bytes over to its output in the middle of its column (a
dashed line marks it), and a chain of such layers, one block of the plan, keeps one colour.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

import jinja2
from markupsafe import Markup

from edgec.errors import EdgecError
from edgec.resources import data_dir
from edgec.version import __version__

TEMPLATE = data_dir("templates") / "report.html.j2"

# Timeline geometry, in SVG user units (CSS px unless the page is narrower and the SVG shrinks).
PLOT_LEFT, PLOT_RIGHT_MARGIN, PLOT_TOP, PLOT_HEIGHT = 70, 170, 16, 440
WIDTH, MIN_COLUMN_WIDTH, MAX_COLUMN_WIDTH = 1150, 8, 90  # about the page's width, so text keeps its size
CHAR_WIDTH = 6.2  # of the 11 px label font, to decide whether a label fits its rectangle
KIND_COLOURS = {"input": "#8da0cb", "output": "#66c2a5", "scratch": "#fc8d62"}
ACTIVATION_COLOURS = ("#fdd49e", "#c6dbef", "#d9f0d3", "#f2d7ee", "#fee391", "#d4e6f1", "#e5d8bd", "#ccebc5")


def write_html_report(
    report: dict | str | Path, out_html: str | Path, *, bench: dict | None = None, sqnr: list[dict] | None = None
) -> Path:
    """Writes the HTML report for `report` (a report.json dict, the path of a report.json, or a
    build directory holding one) to `out_html`, with the per-layer measurements given (`bench`:
    `edgec bench --json`'s result; `sqnr`: rows of layer, sqnr_db); returns that path."""
    out_html = Path(out_html)
    merged = merge_measurements(load_report(report), bench=bench, sqnr=sqnr)
    out_html.write_text(render_html_report(merged), encoding="utf-8")
    return out_html


def merge_measurements(
    report: dict, *, bench: dict | None = None, sqnr: list[dict] | None = None, outputs: list[dict] | None = None
) -> dict:
    """A copy of `report` whose layers carry what was measured: instructions (and cycles, when the
    bench has them) by layer name from a bench result, sqnr_db from per-layer SQNR rows; and with
    `outputs` (verify's per-output SQNR, max |error|, top-1 agreement) as output_accuracy."""
    merged = {**report, "layers": [dict(layer) for layer in report["layers"]]}
    if outputs:
        merged["output_accuracy"] = [dict(row) for row in outputs]
    if bench is not None:
        if bench.get("target") != report["target"]:
            raise EdgecError(f"the bench result is for {bench.get('target')}, the build for {report['target']}")
        counted = {layer["name"]: layer for layer in bench["layers"]}
        for layer in merged["layers"]:
            measured = counted.get(layer["name"], {})
            for key in ("instructions", "cycles"):
                if key in measured:
                    layer[key] = measured[key]
        merged["bench"] = {key: value for key, value in bench.items() if key != "layers"}
    if sqnr:
        by_layer = {row["layer"]: row["sqnr_db"] for row in sqnr}
        for layer in merged["layers"]:
            if layer["name"] in by_layer:
                layer["sqnr_db"] = by_layer[layer["name"]]
    return merged


def expensive_layers(report: dict, count: int = 3) -> tuple[str, list[dict]]:
    """The measure of a layer's cost (instructions when measured, else MACs) and the `count`
    layers that cost the most, most expensive first."""
    measure = "instructions" if any("instructions" in layer for layer in report["layers"]) else "macs"
    ranked = sorted((layer for layer in report["layers"] if layer.get(measure)), key=lambda layer: -layer[measure])
    return measure, ranked[:count]


def text_summary(report: dict) -> str:
    """The lines `edgec build` prints: size, memory, in-place layers, the most expensive layers."""
    layers = report["layers"]
    lines = [
        f"{report['name']} for {report['target']}: {len(layers)} layers, {report['macs']:,} MACs, "
        f"constants {report['weights_bytes']:,} B (flash)",
        f"arena {report['arena_bytes']:,} B (RAM; liveness bound {report['lower_bound_bytes']:,} B); "
        f"{peak_breakdown(report)}",
        f"in place: {report['in_place_layers']} layers (liveness bound without: "
        f"{report['lower_bound_without_in_place_bytes']:,} B); kernel scratch {report['scratch_bytes']:,} B "
        f"in {sum(1 for layer in layers if layer['scratch_bytes'])} layers",
    ]
    measure, top = expensive_layers(report)
    if top:
        total = sum(layer.get(measure, 0) for layer in layers) or 1
        unit = "instructions" if measure == "instructions" else "MACs"
        note = "" if measure == "instructions" else "; edgec bench counts instructions"
        lines.append(
            f"most expensive layers (by {unit}{note}): "
            + ", ".join(
                f"{layer['name']} ({layer['op']}, {layer[measure]:,}, {100 * layer[measure] / total:.0f}%)"
                for layer in top
            )
        )
    return "\n".join(lines)


def peak_breakdown(report: dict) -> str:
    """Which layer needs the most live bytes, and which buffers make them up."""
    if not report["layers"]:
        return "no layers"
    step = max(range(len(report["layers"])), key=lambda i: report["layers"][i]["live_bytes"])
    live = [b for b in report["buffers"] if b["first_layer"] <= step <= b["last_layer"]]
    parts = " + ".join(
        f"{b['name']} {b['bytes']:,}" + (f" (over {b['overwrites']})" if b["overwrites"] else "")
        for b in sorted(live, key=lambda b: -b["bytes"])
    )
    return f"peak {report['layers'][step]['live_bytes']:,} B at {report['layers'][step]['name']}: {parts}"


def load_report(report: dict | str | Path) -> dict:
    if not isinstance(report, dict):
        path = Path(report)
        report = json.loads((path / "report.json" if path.is_dir() else path).read_text())
    if "models" in report:
        names = ", ".join(model["name"] for model in report["models"])
        raise EdgecError(
            f"the directory holds several models ({names}): its report.json lists each one's report; "
            f"edgec build --report writes one page per model"
        )
    if "buffers" not in report:
        raise EdgecError("report.json has no buffer lifetimes (it predates the memory report): rebuild the model")
    return report


def render_html_report(report: dict) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)), autoescape=True, undefined=jinja2.StrictUndefined
    )
    env.filters["thousands"] = lambda value: f"{value:,}"
    env.filters["kib"] = kib
    arena, bound = report["arena_bytes"], report["lower_bound_bytes"]
    measure, top = expensive_layers(report)
    return env.get_template(TEMPLATE.name).render(
        report=report,
        version=__version__,
        timeline=Markup(timeline_svg(report)),
        over_bound=(arena - bound) / bound * 100 if bound else 0.0,
        charts=[(title, Markup(chart)) for title, chart in layer_charts(report)],
        measure=measure,
        top=top,
        has_instructions=measure == "instructions",
        has_cycles=any("cycles" in layer for layer in report["layers"]),
        has_sqnr=any("sqnr_db" in layer for layer in report["layers"]),
        inf=float("inf"),
    )


def kib(size: int) -> str:
    return f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} B"


# --- the timeline -----------------------------------------------------------------------------


@dataclass
class Axes:
    """Maps (step, byte offset) to SVG coordinates; step -1 is the model input, len(layers) its output."""

    steps: int  # layers
    top_bytes: float
    column: float

    def x(self, step: float) -> float:
        return PLOT_LEFT + (step + 1) * self.column

    def y(self, offset: float) -> float:
        return PLOT_TOP + PLOT_HEIGHT * (1 - offset / self.top_bytes)

    @property
    def right(self) -> float:
        return self.x(self.steps + 1)


def timeline_svg(report: dict) -> str:
    layers, buffers = report["layers"], report["buffers"]
    steps = len(layers)
    arena, bound = report["arena_bytes"], report["lower_bound_bytes"]
    column = min(MAX_COLUMN_WIDTH, max(MIN_COLUMN_WIDTH, (WIDTH - PLOT_LEFT - PLOT_RIGHT_MARGIN) / (steps + 2)))
    axes = Axes(steps, max(arena, bound, 1) * 1.04, column)  # headroom so the arena line is not on the frame
    width = axes.right + PLOT_RIGHT_MARGIN
    longest_name = max(len(_column_name(step, layers)) for step in range(-1, steps + 1))
    height = PLOT_TOP + PLOT_HEIGHT + 16 + longest_name * CHAR_WIDTH
    live = [occupied_bytes(buffers, step) for step in range(-1, steps + 1)]
    overwritten_by = {b["overwrites"]: b["name"] for b in buffers if b.get("overwrites")}
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" class="timeline" role="img" aria-label="arena timeline">'
        ),
        _defs(),
        _peak_bands(axes, live),
        _y_grid(axes, arena),
        *(_buffer_rect(axes, buffer, layers, _block_colour(buffer, buffers), overwritten_by) for buffer in buffers),
        *(_handover(axes, buffer, buffers, layers) for buffer in buffers if buffer.get("overwrites")),
        _live_curve(axes, live),
        *(_buffer_label(axes, buffer, overwritten_by) for buffer in buffers),  # over the curve, to stay legible
        _limit_lines(axes, arena, bound),
        _x_labels(axes, layers),
        (
            f'<rect x="{PLOT_LEFT}" y="{PLOT_TOP}" width="{axes.right - PLOT_LEFT:.1f}" height="{PLOT_HEIGHT}" '
            f'class="frame"/>'
        ),
        "</svg>",
    ]
    return "\n".join(part for part in parts if part)


def _defs() -> str:
    return (
        '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fdd0b8"/>'
        f'<line x1="0" y1="0" x2="0" y2="6" stroke="{KIND_COLOURS["scratch"]}" stroke-width="3"/></pattern></defs>'
    )


def occupied_bytes(buffers: list[dict], step: int) -> int:
    """Arena bytes in use at `step`: the union of the live buffers' byte ranges (so an in-place
    layer's input and output count once), as report.json's live_bytes."""
    ranges = sorted(
        (b["offset"], b["offset"] + b["bytes"]) for b in buffers if b["first_layer"] <= step <= b["last_layer"]
    )
    total, covered = 0, 0
    for start, stop in ranges:
        total += max(0, stop - max(start, covered))
        covered = max(covered, stop)
    return total


def _block_colour(buffer: dict, buffers: list[dict]) -> str:
    """Scratch is hatched, the model's input and output have their colours; an activation takes
    the colour of the first buffer of its in-place chain, so a block reads as one."""
    if buffer["kind"] == "scratch":
        return "url(#hatch)"
    if buffer["kind"] in KIND_COLOURS:
        return KIND_COLOURS[buffer["kind"]]
    by_name = {b["name"]: b for b in buffers}
    root = buffer
    while root.get("overwrites") and by_name[root["overwrites"]]["kind"] == "activation":
        root = by_name[root["overwrites"]]
    return ACTIVATION_COLOURS[buffers.index(root) % len(ACTIVATION_COLOURS)]


def _buffer_box(axes: Axes, buffer: dict, overwritten_by: dict[str, str]) -> tuple[float, float, float, float]:
    """(left, right, top, height) of the buffer's rectangle: its lifetime by its byte range. An
    in-place layer's input ends, and its output starts, in the middle of the layer's column."""
    x0, x1 = axes.x(buffer["first_layer"]) + 1, axes.x(buffer["last_layer"] + 1) - 1
    if buffer.get("overwrites"):
        x0 = axes.x(buffer["first_layer"]) + axes.column / 2
    if buffer["name"] in overwritten_by:
        x1 = axes.x(buffer["last_layer"]) + axes.column / 2
    y0, y1 = axes.y(buffer["offset"] + buffer["bytes"]), axes.y(buffer["offset"])
    return x0, x1, y0, max(y1 - y0 - 1, 1.0)  # a 1-unit gap keeps stacked buffers apart


def _buffer_rect(axes: Axes, buffer: dict, layers: list[dict], fill: str, overwritten_by: dict[str, str]) -> str:
    x0, x1, y0, height = _buffer_box(axes, buffer, overwritten_by)
    first = buffer["first_layer"]
    writer = f"#layer-{first}" if 0 <= first < len(layers) else "#layers"
    return (
        f'<a href="{writer}" class="buffer"><title>{escape(_buffer_tooltip(buffer, layers))}</title>'
        f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{height:.1f}" rx="2" '
        f'fill="{fill}"/></a>'
    )


def _handover(axes: Axes, output: dict, buffers: list[dict], layers: list[dict]) -> str:
    """A dashed line where an in-place layer's output takes over its input's bytes."""
    source = next(b for b in buffers if b["name"] == output["overwrites"])
    x = axes.x(output["first_layer"]) + axes.column / 2
    low = min(source["offset"], output["offset"])
    high = max(source["offset"] + source["bytes"], output["offset"] + output["bytes"])
    tooltip = (
        f"{_step_name(output['first_layer'], layers)} runs in place: it writes {output['name']} over {source['name']}"
    )
    return (
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{axes.y(high):.1f}" y2="{axes.y(low):.1f}" class="handover">'
        f"<title>{escape(tooltip)}</title></line>"
    )


def _buffer_label(axes: Axes, buffer: dict, overwritten_by: dict[str, str]) -> str:
    """The buffer's name (and size, if there is room) across its rectangle, else along it if the
    rectangle is tall and narrow, else nothing: the tooltip still names it."""
    x0, x1, y0, height = _buffer_box(axes, buffer, overwritten_by)
    name, width = escape(buffer["name"]), x1 - x0
    text_length = len(buffer["name"]) * CHAR_WIDTH + 8
    cx, cy = (x0 + x1) / 2, y0 + height / 2
    if width >= text_length and height >= 30:
        return (
            f'<text x="{cx:.1f}" y="{cy - 2:.1f}" class="label">{name}</text>'
            f'<text x="{cx:.1f}" y="{cy + 11:.1f}" class="sublabel">{kib(buffer["bytes"])}</text>'
        )
    if width >= text_length and height >= 14:
        return f'<text x="{cx:.1f}" y="{cy + 4:.1f}" class="label">{name}</text>'
    if height >= text_length and width >= 14:
        return (
            f'<text x="{cx + 4:.1f}" y="{cy:.1f}" class="label" '
            f'transform="rotate(-90 {cx + 4:.1f} {cy:.1f})">{name}</text>'
        )
    return ""


def _step_name(step: int, layers: list[dict]) -> str:
    if step < 0:
        return "before the first layer"
    if step >= len(layers):
        return "after the last layer"
    return f"layer {step} ({layers[step]['name']})"


def _buffer_tooltip(buffer: dict, layers: list[dict]) -> str:
    start, size = buffer["offset"], buffer["bytes"]
    over = f"\nwritten in place over {buffer['overwrites']}" if buffer.get("overwrites") else ""
    return (
        f"{buffer['name']} ({buffer['kind']}): {size:,} B at [{start:,}, {start + size:,})\n"
        f"live from {_step_name(buffer['first_layer'], layers)} to {_step_name(buffer['last_layer'], layers)}"
        f"{over}"
    )


def _peak_bands(axes: Axes, live: list[int]) -> str:
    """Shades the steps at which the live bytes peak: the steps that set the lower bound."""
    peak = max(live, default=0)
    return "".join(
        f'<rect x="{axes.x(step - 1):.1f}" y="{PLOT_TOP}" width="{axes.column:.1f}" '
        f'height="{PLOT_HEIGHT}" class="peak-band"><title>peak: {peak:,} B live</title></rect>'
        for step, value in enumerate(live)
        if peak and value == peak
    )


def _nice_step(top: float, ticks: int = 6) -> int:
    raw = top / ticks
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    return int(next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw))


def _y_grid(axes: Axes, arena: int) -> str:
    unit = 1024 if arena >= 4096 else 1
    step = _nice_step(axes.top_bytes / unit) * unit
    lines = []
    for value in range(0, int(axes.top_bytes) + 1, step):
        y = axes.y(value)
        text = f"{value // 1024:,} KiB" if unit == 1024 else f"{value:,} B"
        lines.append(
            f'<line x1="{PLOT_LEFT}" x2="{axes.right:.1f}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{PLOT_LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{text}</text>'
        )
    label_y = PLOT_TOP + PLOT_HEIGHT / 2
    lines.append(
        f'<text x="14" y="{label_y:.1f}" class="axis-title" '
        f'transform="rotate(-90 14 {label_y:.1f})">arena offset</text>'
    )
    return "".join(lines)


def _live_curve(axes: Axes, live: list[int]) -> str:
    points = []
    for step, value in enumerate(live, start=-1):
        y = axes.y(value)
        points += [f"{axes.x(step):.1f},{y:.1f}", f"{axes.x(step + 1):.1f},{y:.1f}"]
    return f'<polyline points="{" ".join(points)}" class="live"/>'


def _limit_lines(axes: Axes, arena: int, bound: int) -> str:
    """The arena (the plan's peak) and the liveness lower bound, labelled at the right; one label
    when they coincide, and labels pushed apart when they would overlap."""
    y_arena, y_bound = axes.y(arena), axes.y(bound)
    label_x = axes.right + 8
    arena_line = _horizontal(axes, y_arena, "arena-line")
    if arena == bound:
        return (
            f'{arena_line}<text x="{label_x:.1f}" y="{y_arena - 2:.1f}" class="line-label arena-text">'
            f'arena {arena:,} B</text><text x="{label_x:.1f}" y="{y_arena + 12:.1f}" class="line-label bound-text">'
            f"= liveness bound</text>"
        )
    return (
        f"{_horizontal(axes, y_bound, 'bound-line')}{arena_line}"
        f'<text x="{label_x:.1f}" y="{y_arena + 4:.1f}" class="line-label arena-text">arena {arena:,} B</text>'
        f'<text x="{label_x:.1f}" y="{max(y_bound + 4, y_arena + 18):.1f}" class="line-label bound-text">'
        f"liveness bound {bound:,} B</text>"
    )


def _horizontal(axes: Axes, y: float, css_class: str) -> str:
    return f'<line x1="{PLOT_LEFT}" x2="{axes.right:.1f}" y1="{y:.1f}" y2="{y:.1f}" class="{css_class}"/>'


def _x_labels(axes: Axes, layers: list[dict]) -> str:
    """Each column's layer index and, where columns are wide enough to read them, the layer names."""
    top = PLOT_TOP + PLOT_HEIGHT + 8
    every = max(1, math.ceil(12 / axes.column))  # keep the vertical names at least 12 units apart
    labels = []
    for step in range(-1, len(layers) + 1):
        if step not in (-1, len(layers)) and step % every:
            continue
        x = axes.x(step) + axes.column / 2 + 4
        labels.append(
            f'<text x="{x:.1f}" y="{top:.1f}" class="tick" text-anchor="end" '
            f'transform="rotate(-90 {x:.1f} {top:.1f})">{escape(_column_name(step, layers))}</text>'
        )
    return "".join(labels)


def _column_name(step: int, layers: list[dict]) -> str:
    if step < 0:
        return "input"
    return "output" if step == len(layers) else f"{step} {layers[step]['name']}"


# --- per-layer bar charts ------------------------------------------------------------------------

BAR_LABEL_WIDTH, BAR_WIDTH, BAR_HEIGHT, BAR_GAP, BAR_VALUE_WIDTH = 230, 560, 14, 4, 150
CHART_COLOURS = {"time": "#4c78a8", "flash": "#f58518", "sqnr": "#54a24b"}


def layer_charts(report: dict) -> list[tuple[str, str]]:
    """(title, SVG) of horizontal bar charts, one bar per layer that has the figure: time
    (instructions, else MACs), flash constants, and int8-vs-float SQNR (when measured)."""
    layers = [layer for layer in report["layers"] if layer["op"] != "reshape"]
    measure, _ = expensive_layers(report)
    time_title = (
        "Time per layer: instructions executed (edgec bench, QEMU)"
        if measure == "instructions"
        else "Work per layer: MACs (run bench() or edgec bench for instructions)"
    )
    charts = [
        bar_chart("time", time_title, [(layer, layer.get(measure, 0)) for layer in layers], lambda v: f"{v:,}"),
        bar_chart(
            "flash",
            "Flash per layer: constant bytes (weights, bias, requantization, tables)",
            [(layer, layer.get("constants_bytes", 0)) for layer in layers],
            lambda v: kib(int(v)),
        ),
    ]
    measured = [(layer, layer["sqnr_db"]) for layer in layers if "sqnr_db" in layer]
    if measured:
        charts.append(
            bar_chart(
                "sqnr",
                "Accuracy per layer: int8 vs float SQNR (dB; higher is better)",
                [(layer, min(value, 99.0)) for layer, value in measured],
                lambda v: "exact" if v >= 99.0 else f"{v:.1f} dB",
            )
        )
    return charts


def bar_chart(kind: str, title: str, rows: list[tuple[dict, float]], fmt) -> tuple[str, str]:
    """(title, SVG): a bar per (layer, value) row, scaled to the largest, labelled with the layer's
    name and fmt(value); the tooltip adds the op."""
    height = len(rows) * (BAR_HEIGHT + BAR_GAP) + 8
    width = BAR_LABEL_WIDTH + BAR_WIDTH + BAR_VALUE_WIDTH
    top = max((value for _, value in rows), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" '
        f'class="bars bars-{kind}" role="img" aria-label="{escape(title)}">'
    ]
    for row, (layer, value) in enumerate(rows):
        y = 4 + row * (BAR_HEIGHT + BAR_GAP)
        bar = max(0.0, value) / top * BAR_WIDTH
        label = layer["name"]
        parts.append(
            f"<g><title>{escape(label)} ({escape(layer['op'])}): {escape(fmt(value))}</title>"
            f'<text x="{BAR_LABEL_WIDTH - 8}" y="{y + BAR_HEIGHT - 3}" class="bar-label" text-anchor="end">'
            f"{escape(label)}</text>"
            f'<rect x="{BAR_LABEL_WIDTH}" y="{y}" width="{bar:.1f}" height="{BAR_HEIGHT}" rx="2" '
            f'fill="{CHART_COLOURS[kind]}"/>'
            f'<text x="{BAR_LABEL_WIDTH + bar + 6:.1f}" y="{y + BAR_HEIGHT - 3}" class="bar-value">'
            f"{escape(fmt(value))}</text></g>"
        )
    parts.append("</svg>")
    return title, "".join(parts)

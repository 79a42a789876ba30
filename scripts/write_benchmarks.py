"""Render BENCHMARKS.md from the results `make bench` leaves in its build directory:
<dir>/<target>/<model>.json (edgec bench --json) and <dir>/<target>/<model>/report.json, the same
built with --opt size in <dir>/<target>-size/ (DSP cores) and, if make bench had CMSIS_NN_DIR, with
--kernels cmsis-nn in <dir>/<target>-cmsis-nn/ (otherwise those columns say "not measured").

    python scripts/write_benchmarks.py build/bench > BENCHMARKS.md
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from edgec.targets.timing import LEFT_OUT  # noqa: E402

MODELS = {  # zoo factory -> MLPerf Tiny task
    "ds_cnn": "KWS (DS-CNN)",
    "mobilenet_v1_025": "VWW (MobileNetV1 0.25)",
    "resnet8": "IC (ResNet-8)",
    "fc_autoencoder": "AD (FC autoencoder)",
}
# The reference models run on every core; the other zoos on one DSP core and one Helium core.
TARGETS = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
ZOO_TARGETS = ("cortex-m4", "cortex-m55")
SIZE_TARGETS = ("cortex-m4", "cortex-m7", "cortex-m33")  # --opt size in <dir>/<target>-size (Helium: no choice)
CMSIS_NN = "-cmsis-nn"  # --kernels cmsis-nn results in <dir>/<target>-cmsis-nn, when make bench had CMSIS_NN_DIR
CMSIS_NN_OFAST = "-cmsis-nn-ofast"  # the same with CMSIS-NN compiled at -Ofast (Arm's recommendation)
# The fastest published MLPerf Tiny results per DSP core, in cycles (latency x clock; docs/anchors.md of
# the lead), and the part they ran on: make bench runs edgec on that part (--part) into <dir>/<target>-<part>.
PUBLISHED = {
    "cortex-m4": (
        "stm32l4r5",
        "ST X-CUBE-AI 9.0/10.2; AD Plumerai",
        {"ds_cnn": 5.18e6, "mobilenet_v1_025": 10.67e6, "resnet8": 19.82e6, "fc_autoencoder": 0.486e6},
    ),
    "cortex-m33": (
        "stm32u575",
        "ST X-CUBE-AI 10.2; IC Plumerai; AD Bosch",
        {"ds_cnn": 4.64e6, "mobilenet_v1_025": 9.48e6, "resnet8": 16.69e6, "fc_autoencoder": 0.494e6},
    ),
    "cortex-m7": (
        "stm32h7a3",
        "ST X-CUBE-AI 9.0; AD Bosch",
        {"ds_cnn": 3.17e6, "mobilenet_v1_025": 6.66e6, "resnet8": 11.44e6, "fc_autoencoder": 0.302e6},
    ),
    # No CPU-only M55 result is published: issue #23's goal is 0.7x TFLite Micro + CMSIS-NN on a
    # Cortex-M85 (1.66/6.43/4.07/0.255M), on the typical M55 part (part None: <dir>/cortex-m55).
    "cortex-m55": (
        None,
        "0.7x TFLite Micro + CMSIS-NN on a Cortex-M85",
        {"ds_cnn": 1.16e6, "mobilenet_v1_025": 4.50e6, "resnet8": 2.85e6, "fc_autoencoder": 0.18e6},
    ),
}
NOT_MEASURED = "not measured"
# edgec.zoo.cnn models benchmarked for the operator-coverage work (default options).
CNN_MODELS = {
    "mobilenet_v3_small": "MobileNetV3-Small (x0.5, 96x96)",
    "efficientnet_b0": "EfficientNet-B0 (x0.5, 64x64)",
    "binary_classifier": "binary classifier (LeakyReLU, PReLU, sigmoid; 32x32)",
    "unet_nearest": "U-Net (max pooling, nearest upsampling, concatenation; 32x32)",
}
SEQ_MODELS = {
    "lstm_kws": "LSTM keyword spotter (49x10 MFCC, hidden 64)",
    "lstm_kws-stream": "the same, streaming (one frame per invoke)",
    "gru_kws": "GRU keyword spotter (49x10 MFCC, hidden 64)",
    "conv_gru_kws": "Conv1d + 2-layer GRU keyword spotter",
    "kws_transformer": "keyword transformer (49 tokens, dim 32, 2 blocks)",
    "vit_tiny": "ViT (4x4 patches of 32x32, dim 32, 2 blocks)",
}
# Issue #5's goals: edgec's instructions at most this fraction of CMSIS-NN's (measured in the same run).
INSN_GOAL_RATIO = {"cortex-m4": 0.5, "cortex-m55": 0.8}
# Issue #13's goals in cycles. Cortex-M4: the fastest published MLPerf Tiny results on an M4
# (STM32L4R5 at 120 MHz, flash wait states included); Cortex-M55: TFLite Micro + CMSIS-NN on a
# Cortex-M85 at 480 MHz (ms x clock).
CYCLE_GOALS = {
    "cortex-m4": (
        "fastest published M4 result",
        {"ds_cnn": 5.18e6, "mobilenet_v1_025": 10.67e6, "resnet8": 19.82e6, "fc_autoencoder": 0.49e6},
    ),
    "cortex-m55": (
        "TFLite Micro + CMSIS-NN on a Cortex-M85",
        {"ds_cnn": 1.66e6, "mobilenet_v1_025": 6.43e6, "resnet8": 4.07e6, "fc_autoencoder": 0.26e6},
    ),
}
# Layer kinds by what they are (a CMSIS-NN layer's kind is edgec's with a prefix).
LAYER_GROUPS = (
    ("conv", ("conv2d",)),
    ("depthwise", ("depthwise_conv2d",)),
    ("fully connected", ("fully_connected",)),
    ("add", ("add",)),
    ("pooling", ("avg_pool2d", "max_pool2d")),
    ("softmax", ("softmax",)),
)
# int4 weights (issue #25): these models also run with --weights int4 into <dir>/<target>-int4/ on
# ZOO_TARGETS; the goal is each int4 kernel type's instructions per MAC within INT4_GOAL of int8's.
INT4_MODELS = ("ds_cnn", "mobilenet_v1_025", "resnet8", "fc_autoencoder")
INT4 = "-int4"
INT4_GOAL = 1.3
# int16 activations (issue #23's int16 paths): these models also run with --activations int16 into
# <dir>/<target>-int16/ on ZOO_TARGETS; edgec's goal, each family within INT16_GOAL of int8's.
INT16_MODELS = ("ds_cnn",)
INT16 = "-int16"
INT16_GOAL = 2.0
MEMORY_TARGET = "cortex-m4"
# TFLite Micro's published arena for these models (kB): the whole arena, and its activations part.
TFLM_ARENA_KB = {
    "ds_cnn": (24.3, 16.0),
    "mobilenet_v1_025": (103.7, 73.7),
    "resnet8": (56.0, 49.2),
    "fc_autoencoder": (4.0, 0.8),
}


def millions(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e6:.3f}M"


def kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def tool_version(command: str) -> str:
    result = subprocess.run([command, "--version"], capture_output=True, text=True, check=False)
    return result.stdout.splitlines()[0] if result.stdout else command


def load(bench_dir: Path, target: str, model: str) -> tuple[dict, dict]:
    result = json.loads((bench_dir / target / f"{model}.json").read_text())
    report = json.loads((bench_dir / target / model / "report.json").read_text())
    return result, report


def cycles(result: dict) -> str:
    """The modelled cycles of a bench result (an estimate), or "-" for a result without them."""
    return millions(result["total_cycles"]) if "total_cycles" in result else "-"


def milliseconds(result: dict) -> str:
    return f"{result['ms']:.2f}" if "ms" in result else "-"


def clock_line(bench_dir: Path, target: str, model: str) -> list[str]:
    """The clock and flash wait states the cycles of a target's results were modelled at (the same
    for every model), as a line and a blank one; none for results without cycles."""
    result = load(bench_dir, target, model)[0]
    if "clock_mhz" not in result:
        return []
    return [
        f"Cycles and ms estimated at {result['clock_mhz']:g} MHz with {result['flash_wait_states']} flash wait "
        "states (the typical part's; docs/timing-model.md); instructions are exact.",
        "",
    ]


def cmsis_nn_run(bench_dir: Path, target: str, model: str) -> tuple[dict, dict] | None:
    """The same model built with --kernels cmsis-nn in the same `make bench`, or None (no CMSIS_NN_DIR)."""
    if not (bench_dir / f"{target}{CMSIS_NN}" / f"{model}.json").exists():
        return None
    return load(bench_dir, f"{target}{CMSIS_NN}", model)


def cmsis_nn_commits(bench_dir: Path) -> list[str]:
    """The CMSIS-NN commits the --kernels cmsis-nn runs linked (report.json's cmsis_nn)."""
    return sorted(
        {
            run[1]["cmsis_nn"]["commit"]
            for target in TARGETS
            for model in MODELS
            if (run := cmsis_nn_run(bench_dir, target, model)) is not None
        }
    )


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x"


def varied_cycles(result: dict) -> dict[str, int]:
    """The estimated total cycles under the documented model and under each assumption bench
    --sensitivity varied (edgec.targets.timing.SENSITIVITY); only the documented one without it."""
    return {"documented": result["total_cycles"], **result.get("sensitivity", {})}


def ratio_range(ours: dict, theirs: dict | float) -> str:
    """A cycle ratio under the documented model, with its range over the assumptions both sides
    were estimated with (a published figure is the same under every assumption)."""
    ours_cycles = varied_cycles(ours)
    theirs_cycles = varied_cycles(theirs) if isinstance(theirs, dict) else {name: theirs for name in ours_cycles}
    ratios = [ours_cycles[name] / theirs_cycles[name] for name in ours_cycles if name in theirs_cycles]
    documented = ours_cycles["documented"] / theirs_cycles["documented"]
    if len(ratios) < 2:
        return f"{documented:.2f}x"
    return f"{documented:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def run_in(bench_dir: Path, directory: str, model: str) -> tuple[dict, dict] | None:
    """The result of `model` in <bench_dir>/<directory>, or None when make bench did not run it."""
    if not (bench_dir / directory / f"{model}.json").exists():
        return None
    return load(bench_dir, directory, model)


# Issue #23's per-element goals for the layer types besides convolutions, in instructions per output
# element (pooling: per input element, so a window's size does not hide its cost), set from the
# measured figures of the first pass (tests/test_kernels_*_arm.py check the same kernels on QEMU):
# op -> (goal on each of ZOO_TARGETS, what the figure was before issue #23's kernels, on cortex-m4).
ELEMENT_GOALS = {
    "prelu": ({"cortex-m4": 8.0, "cortex-m55": 8.0}, "39-45 (per-element requantization)"),
    "max_pool2d": ({"cortex-m4": 5.0, "cortex-m55": 2.0}, "12.6-17.3 per window element"),
    "softmax": ({"cortex-m4": 90.0, "cortex-m55": 90.0}, "~310 (2-class rows: 885 a row)"),
    "lut": ({"cortex-m4": 4.0, "cortex-m55": 1.0}, "3.7 (M4), 0.33 (M55)"),
    "copy": ({"cortex-m4": 2.0, "cortex-m55": 2.0}, "1.43 (M4), 1.64 (M55): word and Helium runs already"),
}


def elements(shape) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count


def layer_type_section(bench_dir: Path) -> list[str]:
    """Instructions per element of every PReLU, max pool, softmax, lookup-table and copy layer of
    the zoo models make bench ran, against ELEMENT_GOALS."""
    lines = [
        "## Every layer type earns its time",
        "",
        "Exact instructions per output element (max pooling: per input element) of each layer of these",
        "types in the zoo models above, against issue #23's goals: a goal is met when all the type's",
        "layers together (their instructions over their elements) meet it. Small layers pay fixed costs",
        "(a call's set-up; PReLU reads 256-entry tables made at compile time, one per slope, up to 64 slopes",
        "a layer, --opt size builds them at run time, docs/dsp-fully-connected-add-prelu.md; softmax's exp()",
        "table once a call has 256 elements): the worst layer is shown. Bit-exact with the golden (bench",
        "checks each model's output).",
        "",
        "| layer type | target | goal | before #23 (M4) | layers | all layers | best / worst (layer) | met |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    models = [*CNN_MODELS, *SEQ_MODELS]
    for op, (goals, before) in ELEMENT_GOALS.items():
        for target in ZOO_TARGETS:
            figures = []
            for model in models:
                if not (bench_dir / target / f"{model}.json").exists():
                    continue
                result, report = load(bench_dir, target, model)
                shapes = {layer["name"]: layer for layer in report["layers"]}
                for layer in result["layers"]:
                    if layer["op"] != op or layer["name"] not in shapes:
                        continue
                    info = shapes[layer["name"]]
                    count = elements(info["input_shape"] if op == "max_pool2d" else info["output_shape"])
                    figures.append(
                        (
                            layer["instructions"] / max(count, 1),
                            f"{model}/{layer['name']}",
                            layer["instructions"],
                            count,
                        )
                    )
            if not figures:
                lines.append(f"| {op} | {target} | {goals[target]:g} | {before} | 0 | {NOT_MEASURED} | - | - |")
                continue
            best, worst = min(figures), max(figures)
            overall = sum(f[2] for f in figures) / max(sum(f[3] for f in figures), 1)
            met = "met" if overall <= goals[target] else "not met"
            lines.append(
                f"| {op} | {target} | {goals[target]:g} | {before} | {len(figures)} | {overall:.2f} "
                f"| {best[0]:.2f} / {worst[0]:.2f} ({worst[1]}) | {met} |"
            )
    return lines + [""]


def published_directory(target: str, part: str | None) -> str:
    """Where make bench left a target's runs on a PUBLISHED part (None: the typical part's, <dir>/<target>)."""
    return f"{target}-{part}" if part else target


def published_section(bench_dir: Path) -> list[str]:
    """edgec on each published part against the fastest published result there, with the range of
    the ratio over the timing model's varied assumptions."""
    lines = [
        "## Against the fastest published results, on their parts",
        "",
        "edgec (default options) estimated on the part each fastest published MLPerf Tiny result ran on",
        "(`--part`: its clock, flash wait states and caches, docs/timing-model.md), against that result's",
        "latency x clock. The ratio's range in brackets is over the timing model's uncertain parts, each",
        "varied alone (`bench --sensitivity`: cache associativity, prefetch, fetch stalls, IT folding, branch",
        'refill). A goal is "met by estimate" only when the documented estimate is below the published figure.',
        "No CPU-only Cortex-M55 result is published: its rows are issue #23's goal, 0.7x the TFLite Micro +",
        "CMSIS-NN figures on a Cortex-M85, on the typical M55 part.",
        "",
        "| core | part | model | published cycles | stack | edgec cycles (est.) | edgec / published (range) | goal |",
        "|---|---|---|---:|---|---:|---:|---|",
    ]
    for target, (part, stack, figures) in PUBLISHED.items():
        part_name = part or "typical"
        for model, task in MODELS.items():
            run = run_in(bench_dir, published_directory(target, part), model)
            if run is None:
                lines.append(
                    f"| {target} | {part_name} | {task} | {millions(figures[model])} | {stack} | {NOT_MEASURED} "
                    f"| {NOT_MEASURED} | {NOT_MEASURED} |"
                )
                continue
            result = run[0]
            met = "met by estimate" if result["total_cycles"] <= figures[model] else "not met"
            lines.append(
                f"| {target} | {part_name} | {task} | {millions(figures[model])} | {stack} | {cycles(result)} "
                f"| {ratio_range(result, figures[model])} | {met} |"
            )
    return lines + [""]


def layer_class(layer: dict, info: dict) -> str:
    """What a layer is for the remaining-cycles table: a stem (a convolution over at most 4 input
    channels), a 1x1 or larger convolution (kernel area from its MACs), depthwise, fully connected, other."""
    if layer["op"] == "conv2d":
        in_channels = int(info["input_shape"][-1])
        if in_channels <= 4:
            return "stem"
        area = layer["macs"] // max(elements(info["output_shape"]) * in_channels, 1)
        return "conv 1x1" if area == 1 else "conv kxk"
    return {"depthwise_conv2d": "depthwise", "fully_connected": "fully connected"}.get(layer["op"], "other")


def class_totals(result: dict, report: dict) -> dict[str, list[int]]:
    """Per layer class: [layers, MACs, instructions, estimated cycles], in the model's order."""
    infos = {layer["name"]: layer for layer in report["layers"]}
    totals: dict[str, list[int]] = {}
    for layer in result["layers"]:
        row = totals.setdefault(layer_class(layer, infos[layer["name"]]), [0, 0, 0, 0])
        for index, value in enumerate((1, layer["macs"], layer["instructions"], layer["cycles"])):
            row[index] += value
    return totals


def remaining_section(bench_dir: Path) -> list[str]:
    """For every published-part goal not met: where the estimated cycles are, by layer class, and
    what one class alone would have to reach to close the gap."""
    lines = [
        "### Where the cycles of the goals not met remain",
        "",
        *textwrap.wrap(
            "Each goal not met above, by layer class on the published part (M55: the typical part; "
            "estimated cycles; exact instructions). `cycles / insn` above 1 is the memory system (flash "
            "wait states behind the part's cache: weights and code read from flash; Helium's beats on "
            "the M55), below 1 the M7's dual issue. `cut alone`: the share of the class's cycles that "
            "would have to go to close the whole gap by that class alone (`-`: it holds fewer cycles "
            "than the gap). The goal's whole-model cycles per MAC (the published figure's, on M55 0.7x "
            "the M85's) are in each goal's first row.",
            98,
        ),
        "",
        "| core | model | over the goal | class | layers | MACs | insn / MAC | cycles / MAC (est.) "
        "| cycles / insn | cycles (est.) | cut alone |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for target, (part, _, figures) in PUBLISHED.items():
        for model, task in MODELS.items():
            run = run_in(bench_dir, published_directory(target, part), model)
            if run is None or run[0]["total_cycles"] <= figures[model]:
                continue
            result, report = run
            gap = result["total_cycles"] - figures[model]
            published_per_mac = figures[model] / max(result["macs"], 1)
            lines.append(
                f"| {target} | {task} | {millions(gap)} | goal, whole model | - | {millions(result['macs'])} "
                f"| - | {published_per_mac:.2f} | - | {millions(figures[model])} | - |"
            )
            for name, (count, macs, instructions, estimated) in class_totals(result, report).items():
                per_mac = (lambda n: f"{n / macs:.2f}") if macs else (lambda n: "-")
                alone = f"{100 * gap / estimated:.0f} %" if estimated > gap else "-"
                lines.append(
                    f"| | | | {name} | {count} | {millions(macs) if macs else '-'} | {per_mac(instructions)} "
                    f"| {per_mac(estimated)} | {estimated / instructions:.2f} | {millions(estimated)} | {alone} |"
                )
    return lines + [""] + REMAINING_WHY + [""]


# Why the goals not met stay so: what each class's figures in remaining_section come from.
REMAINING_WHY = textwrap.wrap(
    "Why, by class. The 1x1 and 3x3 convolutions (most of every model's MACs) run about 1.1-1.2 "
    "instructions a MAC: SMLAD blocks of output channels by pixels, whose loads, widening and pointer "
    "updates cost more than the multiplies (0.5 a MAC); ResNet-8 and KWS would need 10-40 % of their "
    "cycles gone, VWW's 1x1 layers almost half (below the published whole-model figure per MAC: VWW "
    "needs every class faster at once). The depthwise layers run about 4 instructions a MAC on the "
    "DSP cores: each output's requantization is paid over only 9 MACs. The stems (1 or 3 input "
    "channels) run 1.6-2.1: a pixel's few inputs fill SMLAD pairs poorly. On the L4R5/U575 every "
    "instruction costs 1.3-1.4 cycles "
    "(cycles / insn): flash wait states behind the parts' small caches, weights and code; the "
    "published stacks pay the same parts' wait states. AD is its fully connected layers, batch 1: "
    "every weight is loaded for one MAC. On the M55 (Helium) IC remains: its 3x3 convolutions (0.16 "
    "instructions a MAC) would need 8 % of their cycles gone, or its RGB stem (3 input channels in "
    "16-lane vectors, 0.53 a MAC) more than half of its.",
    98,
)


def cmsis_nn_opt_section(bench_dir: Path) -> list[str]:
    """CMSIS-NN compiled at -O2 (like edgec) and at -Ofast (Arm's recommendation), edgec against each."""
    lines = [
        "## CMSIS-NN at -O2 and -Ofast",
        "",
        "Arm recommends building CMSIS-NN with -Ofast; edgec's own code is built at -O2. Both CMSIS-NN builds",
        "from the same run (typical parts), and edgec's estimated cycles over each, with the ratio's range",
        "over the timing model's varied assumptions (both sides rerun under each).",
        "",
        "| target | model | CMSIS-NN -O2: cycles (est.) | instructions | -Ofast: cycles (est.) | instructions "
        "| edgec / -O2 (range) | edgec / -Ofast (range) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for target in TARGETS:
        for model, task in MODELS.items():
            ours = load(bench_dir, target, model)[0]
            cells = []
            for suffix in (CMSIS_NN, CMSIS_NN_OFAST):
                run = run_in(bench_dir, f"{target}{suffix}", model)
                cells.append(None if run is None else run[0])
            row = f"| {target} | {task} |"
            for ref in cells:
                row += (
                    f" {NOT_MEASURED} | {NOT_MEASURED} |"
                    if ref is None
                    else f" {cycles(ref)} | {millions(ref['total_instructions'])} |"
                )
            for ref in cells:
                row += f" {NOT_MEASURED} |" if ref is None else f" {ratio_range(ours, ref)} |"
            lines.append(row)
    return lines + [""]


def summary_table(bench_dir: Path, target: str) -> list[str]:
    """edgec (--opt auto) and, from the same run, the same model on Arm's CMSIS-NN kernels."""
    first = next(iter(MODELS))
    lines = [
        f"### {target}",
        "",
        *clock_line(bench_dir, target, first),
        "| model | MACs | cycles (est.) | ms (est.) | instructions | flash | RAM | arena "
        "| CMSIS-NN: cycles (est.) | instructions | flash | RAM "
        "| edgec / CMSIS-NN: cycles (range) | instructions | flash | RAM |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, task in MODELS.items():
        result, report = load(bench_dir, target, model)
        row = (
            f"| {task} | {millions(result['macs'])} | {cycles(result)} | {milliseconds(result)} "
            f"| {millions(result['total_instructions'])} | {kib(result['flash_bytes'])} | {kib(result['ram_bytes'])} "
            f"| {kib(report['arena_bytes'])} |"
        )
        reference = cmsis_nn_run(bench_dir, target, model)
        if reference is None:
            row += f" {NOT_MEASURED} |" * 8
        else:
            ref = reference[0]
            row += (
                f" {cycles(ref)} | {millions(ref['total_instructions'])} | {kib(ref['flash_bytes'])} "
                f"| {kib(ref['ram_bytes'])} | {ratio_range(result, ref)} "
                f"| {ratio(result['total_instructions'], ref['total_instructions'])} "
                f"| {ratio(result['flash_bytes'], ref['flash_bytes'])} "
                f"| {ratio(result['ram_bytes'], ref['ram_bytes'])} |"
            )
        lines.append(row)
    return lines + [""]


def goals_table(bench_dir: Path) -> list[str]:
    """Issue #13's cycle goals (and #5's instruction ratios), met or not, on the measured figures."""
    lines = [
        "| target | model | goal: cycles | reference | edgec cycles (est.) | met | edgec flash <= CMSIS-NN's "
        "| instructions x CMSIS-NN | goal |",
        "|---|---|---:|---|---:|---|---|---:|---|",
    ]
    for target, (reference_name, goals) in CYCLE_GOALS.items():
        for model, task in MODELS.items():
            result = load(bench_dir, target, model)[0]
            reference = cmsis_nn_run(bench_dir, target, model)
            met = "met" if result["total_cycles"] <= goals[model] else "not met"
            if reference is None:
                flash = insns = insn_goal = NOT_MEASURED
            else:
                ref = reference[0]
                flash = "yes" if result["flash_bytes"] <= ref["flash_bytes"] else "no"
                insns = ratio(result["total_instructions"], ref["total_instructions"])
                limit = INSN_GOAL_RATIO[target]
                insn_goal = f"<= {limit}x: " + (
                    "met" if result["total_instructions"] <= limit * ref["total_instructions"] else "not met"
                )
            lines.append(
                f"| {target} | {task} | {millions(goals[model])} | {reference_name} | {cycles(result)} | {met} "
                f"| {flash} | {insns} | {insn_goal} |"
            )
    return lines + [""]


def group_of(op: str) -> str:
    kind = op.removeprefix("cmsis_nn_")
    return next((name for name, kinds in LAYER_GROUPS if kind in kinds), "other")


def by_group(layers: list[dict], field: str) -> dict[str, int]:
    totals = {name: 0 for name, _ in LAYER_GROUPS}
    totals["other"] = 0
    for layer in layers:
        totals[group_of(layer["op"])] += layer.get(field, 0)
    return totals


def layer_group_table(bench_dir: Path, field: str, targets=ZOO_TARGETS) -> list[str]:
    """Per model and target, `field` (cycles or instructions) summed by layer type, edgec's next to
    CMSIS-NN's from the same run."""
    names = [name for name, _ in LAYER_GROUPS] + ["other"]
    lines = [
        "| model | target | kernels | " + " | ".join(names) + " | total |",
        "|---|---|---|" + "---:|" * (len(names) + 1),
    ]
    for target in targets:
        for model, task in MODELS.items():
            runs = [("edgec", load(bench_dir, target, model)[0])]
            reference = cmsis_nn_run(bench_dir, target, model)
            if reference is not None:
                runs.append(("CMSIS-NN", reference[0]))
            for kernels, result in runs:
                totals = by_group(result["layers"], field)
                cells = [millions(v) if v else "-" for v in totals.values()]
                lines.append(
                    f"| {task} | {target} | {kernels} | " + " | ".join(cells) + f" | {millions(sum(totals.values()))} |"
                )
    return lines + [""]


def opt_table(bench_dir: Path) -> list[str]:
    """--opt auto (the default, every other table) against --opt size on the DSP cores, and --opt
    speed where it was run."""
    lines = [
        "| model | target | auto: cycles (est.) | instructions | flash | widened layers | size: cycles (est.) "
        "| instructions | flash | speed: cycles (est.) | instructions | flash |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for target in SIZE_TARGETS:
        for model, task in MODELS.items():
            auto, report = load(bench_dir, target, model)
            choices = [
                layer["kernel"]
                for layer in report["layers"]
                if layer["kernel"].endswith(("_dsp_wide", "_dsp")) and layer["op"] in ("conv2d", "fully_connected")
            ]
            cells = [
                cycles(auto),
                millions(auto["total_instructions"]),
                kib(auto["flash_bytes"]),
                f"{sum(k.endswith('_wide') for k in choices)} of {len(choices)}",
            ]
            for opt in ("size", "speed"):
                if (bench_dir / f"{target}-{opt}" / f"{model}.json").exists():
                    result = load(bench_dir, f"{target}-{opt}", model)[0]
                    cells += [cycles(result), millions(result["total_instructions"]), kib(result["flash_bytes"])]
                else:
                    cells += ["-"] * 3
            lines.append(f"| {task} | {target} | " + " | ".join(cells) + " |")
    return lines + [""]


def per_kernel_table(bench_dir: Path) -> list[str]:
    """Instructions and cycles per kernel function: which layers run the DSP/MVE kernels and which
    the portable ones (and CMSIS-NN's, from the same run)."""
    lines = [
        "| model | target | kernel | layers | MACs | cycles (est.) | instructions | insn/MAC |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for target in ZOO_TARGETS:
        for model, task in MODELS.items():
            runs = [load(bench_dir, target, model)]
            reference = cmsis_nn_run(bench_dir, target, model)
            runs += [reference] if reference is not None else []
            for result, report in runs:
                kernels = {layer["name"]: layer["kernel"] for layer in report["layers"]}
                totals: dict[str, list[int]] = {}
                for layer in result["layers"]:
                    counts = totals.setdefault(kernels[layer["name"]], [0, 0, 0, 0])
                    counts[0] += 1
                    counts[1] += layer["macs"]
                    counts[2] += layer.get("cycles", 0)
                    counts[3] += layer["instructions"]
                for kernel, (count, macs, layer_cycles, insns) in totals.items():
                    per_mac = f"{insns / macs:.2f}" if macs else "-"
                    lines.append(
                        f"| {task} | {target} | `{kernel}` | {count} | {millions(macs) if macs else '-'} "
                        f"| {millions(layer_cycles)} | {millions(insns)} | {per_mac} |"
                    )
    return lines + [""]


def kb(n: int) -> str:
    return f"{n / 1000:.1f} kB"


def memory_table(bench_dir: Path) -> list[str]:
    lines = [
        "| model | edgec arena | its liveness bound | bound without in-place | layers in place "
        "| TFLM arena | TFLM activations | edgec RAM besides the arena |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, task in MODELS.items():
        result, report = load(bench_dir, MEMORY_TARGET, model)
        extra = result["ram_beyond_arena"]
        total, activations = TFLM_ARENA_KB[model]
        lines.append(
            f"| {task} | {report['arena_bytes']:,} B ({kb(report['arena_bytes'])}) "
            f"| {kb(report['lower_bound_bytes'])} | {kb(report['lower_bound_without_in_place_bytes'])} "
            f"| {report['in_place_layers']} of {len(report['layers'])} | {total:.1f} kB | {activations:.1f} kB "
            f"| {extra['total_bytes']:,} B (stack {extra['invoke_stack_bytes']:,}, data {extra['data_bytes']:,}, "
            f"bss {extra['bss_bytes']:,}) |"
        )
    return lines + [""]


def memory_section(bench_dir: Path) -> list[str]:
    return [
        "## Memory",
        "",
        f"RAM on {MEMORY_TARGET}, from the `make bench` runs above (kB = 1000 B, as in TFLite Micro's",
        "figures). **edgec arena**: the one static buffer for every activation and all kernel scratch",
        "(report.json `arena_bytes`); its **liveness",
        "bound** is the most bytes live at once in the model's schedule, counting an in-place layer's",
        "input and output by the bytes they span together, which no plan can beat; **bound without",
        "in-place** is the same with every layer writing a fresh output (what a plan without in-place",
        "kernels can reach at best). In place: depthwise layers and adds over their input, and any",
        "convolution with its output starting below its input by an offset proven safe for its kernel",
        "(it overwrites only input rows no later output pixel reads; edgec.ops.conv.Conv2d.in_place).",
        "The goals of issue #4 on this target: DS-CNN <= 8.5 kB, MobileNetV1-0.25 <= 46 kB, ResNet-8",
        "<= 49.2 kB, FC autoencoder <= 0.8 kB (checked by tests/test_plan.py).",
        "**TFLM arena**: TensorFlow Lite Micro's published arena for the same models, whose activation",
        "part is the comparable figure (the rest holds the interpreter's tensor, operator and",
        "quantization structures, which edgec keeps in flash or does not have). **RAM besides the",
        "arena**: what the generated code and kernels need on top, measured by `edgec bench` (JSON",
        "`ram_beyond_arena`): the deepest stack one `<name>_invoke` uses, found under QEMU by painting",
        "the stack (`port_stack_used_by` in runtime_c/port; at most 64 B high), and the .data and .bss",
        "of the model's and the kernels' object files other than the arena. Every weight, bias,",
        "multiplier, shift and layer parameter is `const`, in flash: the only writable section of those",
        "objects is the arena's .bss.",
        "",
        *memory_table(bench_dir),
    ]


# Models benched layer by layer and with --ram (band stages, edgec.backend.banding): model, title,
# budget, and whether with --stream-input (the Makefile's bench target: <target>-ram<budget>[-stream]).
RAM_BUDGETS = [
    ("mobilenet_v1_025", "MobileNetV1 0.25 (VWW, 96x96)", "32K", False),
    ("mobilenet_v1_025", "MobileNetV1 0.25 (VWW, 96x96)", "24K", True),
    ("mobilenet_v2_035", "MobileNetV2 0.35 (96x96)", "48K", False),
    ("pnet", "MTCNN PNet (72x96)", "46K", False),
    ("pnet", "MTCNN PNet (72x96)", "26K", True),
]


def ram_budget_section(bench_dir: Path) -> list[str]:
    """Layer by layer against --ram: the arenas, the estimated cycles and the stages chosen."""
    lines = [
        "## RAM budgets",
        "",
        "`edgec bench ... --ram <budget>` against the same model layer by layer (`make bench` runs",
        "`python -m edgec.cli bench edgec/<zoo module>.py:<model> --target <target> --ram <budget>`",
        "into `build/bench/<target>-ram<budget>/`). Over the budget, edgec runs the layers at the memory",
        "peak as a band stage: depth-first over row bands, each intermediate map held as a window of",
        "rows (edgec.ops.band, edgec.backend.banding); no MAC is recomputed, the added work is kernel calls and",
        "window shifts. With `--stream-input` the input is handed in row by row (`<name>_invoke_streamed`)",
        "and never sits whole in the arena. Output bit-exact with the golden simulator on every run.",
        "",
        "| model | target | budget | arena layer by layer | arena with the budget | ratio "
        "| cycles (est.) layer by layer | with the budget | ratio | instructions ratio | stages |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for model, title, budget, stream in RAM_BUDGETS:
        for target in ZOO_TARGETS:
            directory = f"{target}-ram{budget}{'-stream' if stream else ''}"
            if not (bench_dir / directory / f"{model}.json").exists():
                continue
            base, base_report = load(bench_dir, target, model)
            banded, report = load(bench_dir, directory, model)
            stages = (
                "; ".join(
                    f"{s['first']}..{s['last']}, {s['chunk']}-row bands"
                    for s in report.get("banding", {}).get("stages", [])
                )
                or "none needed"
            )
            cycle_ratio = (
                ratio(banded["total_cycles"], base["total_cycles"])
                if "total_cycles" in banded and "total_cycles" in base
                else "-"
            )
            lines.append(
                f"| {title} | {target} | {budget}{', streamed input' if stream else ''} "
                f"| {base_report['arena_bytes']:,} B "
                f"| {report['arena_bytes']:,} B | {ratio(report['arena_bytes'], base_report['arena_bytes'])} "
                f"| {cycles(base)} | {cycles(banded)} | {cycle_ratio} "
                f"| {ratio(banded['total_instructions'], base['total_instructions'])} | {stages} |"
            )
    return lines + [""]


def cnn_section(bench_dir: Path) -> list[str]:
    """The public architectures: whole-model figures, then where their instructions go by op."""
    lines = [
        "## Public architectures",
        "",
        "Models of `edgec.zoo.cnn` (random weights, reduced width and resolution to fit the boards),",
        "benchmarked like the reference models (`python -m edgec.cli bench edgec/zoo/cnn.py:<model>`),",
        "calibration `edgec.zoo.cnn.calibration_data(<model>, 32)`, default options (`--opt auto` keeps",
        "EfficientNet's int16-widened DSP filters within the typical M4 part's 1 MiB flash; until",
        "issue #23's PReLU tables these rows were `--opt size`). No CMSIS-NN reference figures exist for them.",
        "",
        "| model | target | MACs | cycles (est.) | ms (est.) | instructions | insn/MAC | flash | RAM | arena "
        "| liveness bound |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, title in CNN_MODELS.items():
        for target in ZOO_TARGETS:
            if not (bench_dir / target / f"{model}.json").exists():  # a bench directory from before the model
                continue
            result, report = load(bench_dir, target, model)
            insns, macs = result["total_instructions"], result["macs"]
            lines.append(
                f"| {title} | {target} | {millions(macs)} | {cycles(result)} | {milliseconds(result)} "
                f"| {millions(insns)} | {insns / macs:.2f} "
                f"| {kib(result['flash_bytes'])} | {kib(result['ram_bytes'])} | {kib(report['arena_bytes'])} "
                f"| {kib(report['lower_bound_bytes'])} |"
            )
    lines += [
        "",
        "Instructions by op kind (share of the model's):",
        "",
        "| model | target | "
        + " | ".join(("conv", "depthwise", "binary / add", "lookup table", "pooling", "other"))
        + " |",
        "|---|---|" + "---:|" * 6,
    ]
    groups = {"conv2d": 0, "depthwise_conv2d": 1, "binary": 2, "add": 2, "lut": 3, "avg_pool2d": 4, "max_pool2d": 4}
    for model, title in CNN_MODELS.items():
        for target in ZOO_TARGETS:
            if not (bench_dir / target / f"{model}.json").exists():
                continue
            totals = [0] * 6
            for layer in load(bench_dir, target, model)[0]["layers"]:
                totals[groups.get(layer["op"], 5)] += layer["instructions"]
            whole = sum(totals) or 1
            lines.append(f"| {title} | {target} | " + " | ".join(f"{t / whole:.0%}" for t in totals) + " |")
    return lines + [""]


def seq_section(bench_dir: Path) -> list[str]:
    """The sequence models: recurrent keyword spotters (whole sequence and streaming) and tiny
    transformers; RAM = arena + persistent state."""
    lines = [
        "## Sequence models",
        "",
        "Models of `edgec.zoo.seq` (random weights), benchmarked like the reference models",
        "(`python -m edgec.cli bench edgec/zoo/seq.py:<model>`, calibration",
        "`edgec.zoo.seq.calibration_data(<model>, 32)`; the streaming build adds `--stream` and counts",
        "one time step). State: the recurrent state kept between invokes outside the arena.",
        "",
        "| model | target | cycles (est.) | ms (est.) | instructions | flash | arena | state |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for model, title in SEQ_MODELS.items():
        for target in ZOO_TARGETS:
            if not (bench_dir / target / f"{model}.json").exists():
                continue
            result, report = load(bench_dir, target, model)
            lines.append(
                f"| {title} | {target} | {cycles(result)} | {milliseconds(result)} "
                f"| {millions(result['total_instructions'])} | {kib(result['flash_bytes'])} "
                f"| {report['arena_bytes']:,} B | {report.get('state_bytes', 0):,} B |"
            )
    return lines + [""]


def weight_family(layer: dict) -> str | None:
    """The kernel family of a report layer with weights: fully connected, depthwise, pointwise (1x1
    ungrouped) or other convolution; None for a layer without weights."""
    if layer["op"] == "conv2d":
        k = layer["macs"] // max(elements(layer["output_shape"]), 1)
        return "convolution 1x1" if k == layer["input_shape"][-1] else "convolution"
    return {"depthwise_conv2d": "depthwise", "fully_connected": "fully connected"}.get(layer["op"])


def family_macs_instructions(bench_dir: Path, directory: str, model: str) -> dict[str, tuple[int, int]] | None:
    """Per kernel family (weight_family): (MACs, instructions) of the run in <bench_dir>/<directory>,
    or None."""
    run = run_in(bench_dir, directory, model)
    if run is None:
        return None
    result, report = run
    kinds = {layer["name"]: weight_family(layer) for layer in report["layers"]}
    totals: dict[str, tuple[int, int]] = {}
    for layer in result["layers"]:
        kind = kinds.get(layer["name"])
        if kind is not None and layer["macs"]:
            macs, insns = totals.get(kind, (0, 0))
            totals[kind] = (macs + layer["macs"], insns + layer["instructions"])
    return totals


def family_rows(bench_dir: Path, models, suffix: str, goal: float) -> tuple[list[str], list[str]]:
    """Per model, target and kernel family: int8's and the <target><suffix> build's instructions per
    MAC, their ratio against `goal`; and per model and target the whole-model figures."""
    rows, totals = [], []
    for model in models:
        for target in ZOO_TARGETS:
            int8 = family_macs_instructions(bench_dir, target, model)
            other = family_macs_instructions(bench_dir, target + suffix, model)
            if int8 is None or other is None:
                rows.append(f"| {MODELS[model]} | {target} | all | {NOT_MEASURED} | {NOT_MEASURED} | - | - |")
                continue
            for kind in sorted(kind for kind in other if kind in int8):
                (m8, i8), (mo, io) = int8[kind], other[kind]
                met = "met" if io / mo <= goal * i8 / m8 else "not met"
                rows.append(
                    f"| {MODELS[model]} | {target} | {kind} | {i8 / m8:.3f} | {io / mo:.3f} "
                    f"| {(io / mo) / (i8 / m8):.2f}x | {met} |"
                )
            (r8, rep8), (ro, repo) = load(bench_dir, target, model), load(bench_dir, target + suffix, model)
            totals.append(
                f"| {MODELS[model]} | {target} | {kib(rep8['weights_bytes'])} | {kib(repo['weights_bytes'])} "
                f"| {r8['total_instructions']:,} | {ro['total_instructions']:,} "
                f"| {ro['total_instructions'] / r8['total_instructions']:.2f}x |"
            )
    return rows, totals


def int4_section(bench_dir: Path) -> list[str]:
    """int8 against int4 weights, per kernel family: exact instructions per MAC and the ratio against
    issue #25's goal; and the constants."""
    rows, totals = family_rows(bench_dir, INT4_MODELS, INT4, INT4_GOAL)
    lines = [
        "## int4 weights",
        "",
        "The same models built with `--weights int4` (every fully connected, convolution and depthwise",
        "layer 4-bit, CMSIS-NN's packing; `build/bench/<target>-int4/`) against their int8 build above:",
        "exact instructions per MAC summed over each kernel family's layers (`convolution 1x1`: ungrouped",
        f"pointwise layers), and issue #25's goal, int4 within {INT4_GOAL:g}x of int8. Bit-exact with the",
        "golden (bench checks each model's output). docs/int4.md describes the kernels.",
        "",
        "| model | target | kernels | int8 insn/MAC | int4 insn/MAC | int4 / int8 | goal |",
        "|---|---|---|---:|---:|---:|---|",
        *rows,
    ]
    if totals:
        lines += [
            "",
            "Whole models: constants (flash) and exact instructions.",
            "",
            "| model | target | int8 constants | int4 constants | int8 insns | int4 insns | int4 / int8 |",
            "|---|---|---:|---:|---:|---:|---:|",
            *totals,
        ]
    return lines + [""]


def int16_section(bench_dir: Path) -> list[str]:
    """int8 against int16 activations, per kernel family, against issue #23's int16 goal."""
    rows, totals = family_rows(bench_dir, INT16_MODELS, INT16, INT16_GOAL)
    return [
        "## int16 activations",
        "",
        "The same models built with `--activations int16` (every layer; int8 weights, CMSIS-NN's _s16",
        "arithmetic; `build/bench/<target>-int16/`) against their int8 build: exact instructions per MAC",
        f"per kernel family, and issue #23's int16 goal as edgec sets it: within {INT16_GOAL:g}x of int8 (an",
        "int16 activation halves the MACs a SMLAD or Helium multiply-accumulate takes at once). Bit-exact",
        "with the golden (bench checks each model's output). docs/int16.md describes the kernels.",
        "",
        "| model | target | kernels | int8 insn/MAC | int16 insn/MAC | int16 / int8 | goal |",
        "|---|---|---|---:|---:|---:|---|",
        *rows,
        "",
        "| model | target | int8 constants | int16 constants | int8 insns | int16 insns | int16 / int8 |",
        "|---|---|---:|---:|---:|---:|---:|",
        *totals,
        "",
    ]


def render(bench_dir: Path) -> str:
    commits = cmsis_nn_commits(bench_dir)
    side_by_side = (
        f"Arm's CMSIS-NN at commit {', '.join(commits)} (`--kernels cmsis-nn`, linked from the checkout in "
        "`CMSIS_NN_DIR`, its context buffers planned in edgec's arena; bench checks its output bit-exact "
        "with the golden too)"
        if commits
        else f"CMSIS-NN: {NOT_MEASURED} (`make bench` ran without `CMSIS_NN_DIR`; set it to a CMSIS-NN "
        "checkout to measure the same models on Arm's kernels in the same run)"
    )
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench`; do not edit. Per model and target the Makefile runs",
        "",
        "    python -m edgec.cli bench edgec/zoo/mlperf.py:<model> --calib build/bench/<model>.npy \\",
        "        --target <target> --json --quiet -o build/bench/<target>/<model>",
        "",
        "(the calibration data is `edgec.zoo.mlperf.calibration_data(<model>, 32)`, and the benchmarked input",
        "its first sample; the default `--opt auto`), the same with `--opt size` on the DSP cores into",
        "`build/bench/<target>-size/` (and `--opt speed` on cortex-m4 into `build/bench/cortex-m4-speed/`),",
        "and, when `CMSIS_NN_DIR` names a CMSIS-NN checkout, the same with",
        "`--kernels cmsis-nn` into `build/bench/<target>-cmsis-nn/` (CMSIS-NN at -O2) and with",
        "`--cmsis-nn-opt Ofast` into `build/bench/<target>-cmsis-nn-ofast/`; the reference models also on the",
        "published parts (`--part`, into `build/bench/<target>-<part>/`), every reference-model run with",
        "`--sensitivity`; the reference models with `--weights int4` on cortex-m4 and cortex-m55",
        "(`build/bench/<target>-int4/`), KWS with `--activations int16` (`build/bench/<target>-int16/`); then",
        "`python scripts/write_benchmarks.py build/bench > BENCHMARKS.md`.",
        f"Tools: {tool_version('arm-none-eabi-gcc')} at -O2; {tool_version('qemu-system-arm')}.",
        *textwrap.wrap(f"Side by side: {side_by_side}.", 98),
        "",
        "What is measured:",
        "- **cycles (est.)** and **ms (est.)**: an ESTIMATE, not a measurement. QEMU has no timing model;",
        "  edgec's plugin times the same executed instructions with its own model of each core (costs from",
        "  the Cortex-M4 TRM's instruction timing table, the Helium beat rules, and stated approximations",
        "  for the M7/M55 scalar pipelines) and of the typical part's memory system (flash wait states",
        "  behind an ART-like cache and prefetcher; zero-wait SRAM/TCM): see docs/timing-model.md.",
        *textwrap.wrap(
            f"It leaves out {LEFT_OUT}. ms = cycles at the part's clock, given above each whole-model table.",
            98,
            initial_indent="  ",
            subsequent_indent="  ",
        ),
        "- **instructions**: exact counts of executed guest instructions from QEMU (edgec's TCG plugin),",
        "  for one inference: the sum over the layers of the instructions between each layer's",
        "  `EDGEC_LAYER_BEGIN`/`EDGEC_LAYER_END` markers (kernel call and its argument set-up). Start-up,",
        "  the test driver and the few instructions of `<name>_invoke`'s own prologue are not counted.",
        "  They are the exact, model-free figure.",
        "- **MACs**: multiply-accumulates of the convolution and fully connected layers.",
        "- **flash**: text + rodata + data of the whole bench program (model, kernels, start-up,",
        "  semihosting driver); **RAM**: data + bss + the 8 KiB stack; **arena**: the model's",
        "  activation buffer (part of bss).",
        "",
        "On cores with the DSP extension (Cortex-M4/M7/M33) and with Helium (Cortex-M55), the",
        "convolutions (1x1 ones too), fully connected and add layers run edgec's SMLAD and MVE kernels",
        "(`_dsp`/`_mve`, their filters re-laid and input offsets folded into the bias at compile time;",
        "`_dsp_wide` where `--opt auto` widens the filter to int16);",
        "depthwise layers run `edgec_depthwise_conv_s8_packed` (4 channels at a time, 8 or 16 on",
        "Helium, over a cache of zero-point-padded input rows, so border pixels cost what inside ones do;",
        "SMLAxy or MVE taps);",
        "average pooling sums on Helium, max pooling takes channels at once (SSUB8/SEL words, Helium",
        "VMAX.S8), softmax is portable C99 with a per-call exp() table, PReLU runs through 256-entry",
        "tables by input byte (see *By kernel* and *Every layer type earns its time*).",
        "The outputs are bit-exact with edgec's golden simulator (bench checks it).",
        "",
        "## Whole models",
        "",
    ]
    for target in TARGETS:
        lines += summary_table(bench_dir, target)
    lines += published_section(bench_dir)
    lines += remaining_section(bench_dir)
    lines += cmsis_nn_opt_section(bench_dir)
    lines += [
        "## Goals",
        "",
        "Issue #13's cycle goals (estimated cycles; on cortex-m4 with the typical part's flash wait states, as",
        "the published results include theirs; the same comparison on the published parts themselves is",
        "the section above) and issue #5's instruction ratios against CMSIS-NN",
        "measured in the same run; `edgec flash <= CMSIS-NN's` compares the whole bench programs.",
        "",
    ]
    lines += goals_table(bench_dir)
    lines += [
        "### --opt auto, size and speed",
        "",
        "`--opt speed` widens every DSP filter to int16 (the fewest instructions, the most flash); `--opt",
        "size` keeps every constant at its smallest. With flash wait states the estimated cycles can",
        "favour `--opt size`: the widened filters read twice the bytes from flash through the",
        "accelerator's small data cache. `--opt auto` (the default, above) widens a layer only where the",
        "timing model estimates it faster at the part's wait states (docs/timing-model.md), the most",
        "reused first, adding at most 20 % to the compact constants (8 KiB for a small model) within the",
        "flash budget. They differ only on the DSP cores (Helium's kernels are the same either way).",
        "",
    ]
    lines += opt_table(bench_dir)
    lines += [
        "## By layer type",
        "",
        "Estimated cycles summed over all layers of a type, edgec's next to CMSIS-NN's from the same run:",
        "where the remaining cycles are.",
        "",
    ]
    lines += layer_group_table(bench_dir, "cycles", TARGETS)
    lines += ["The same in exact instructions:", ""]
    lines += layer_group_table(bench_dir, "instructions")
    lines += [
        "## By kernel",
        "",
        "Cycles and instructions summed over the layers that call each kernel function (`conv2d` layers:",
        "the generic convolution, 1x1 layers included; CMSIS-NN's wrappers pick their own kernels inside).",
        "",
    ]
    lines += per_kernel_table(bench_dir)
    lines += memory_section(bench_dir)
    lines += ram_budget_section(bench_dir)
    lines += cnn_section(bench_dir)
    lines += int4_section(bench_dir)
    lines += int16_section(bench_dir)
    lines += layer_type_section(bench_dir)
    lines += seq_section(bench_dir)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render(Path(sys.argv[1])))

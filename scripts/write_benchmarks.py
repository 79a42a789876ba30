"""Render BENCHMARKS.md from the results `make bench` leaves in its build directory:
<dir>/<target>/<model>.json (edgec bench --json) and <dir>/<target>/<model>/report.json, and the
same for cortex-m4 built with --opt speed and --opt size in <dir>/cortex-m4-speed/ and <dir>/cortex-m4-size/.

    python scripts/write_benchmarks.py build/bench > BENCHMARKS.md
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from math import prod
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from edgec.timing import LEFT_OUT  # noqa: E402

MODELS = {  # zoo factory -> MLPerf Tiny task
    "ds_cnn": "KWS (DS-CNN)",
    "mobilenet_v1_025": "VWW (MobileNetV1 0.25)",
    "resnet8": "IC (ResNet-8)",
    "fc_autoencoder": "AD (FC autoencoder)",
}
TARGETS = ("cortex-m4", "cortex-m55")
# edgec.zoo_cnn models benchmarked for the operator-coverage work (default options).
CNN_MODELS = {"mobilenet_v3_small": "MobileNetV3-Small (x0.5, 96x96)", "efficientnet_b0": "EfficientNet-B0 (x0.5, 64x64)"}
SEQ_MODELS = {"lstm_kws": "LSTM keyword spotter (49x10 MFCC, hidden 64)",
              "lstm_kws-stream": "the same, streaming (one frame per invoke)",
              "gru_kws": "GRU keyword spotter (49x10 MFCC, hidden 64)",
              "conv_gru_kws": "Conv1d + 2-layer GRU keyword spotter",
              "kws_transformer": "keyword transformer (49 tokens, dim 32, 2 blocks)",
              "vit_tiny": "ViT (4x4 patches of 32x32, dim 32, 2 blocks)"}
# CMSIS-NN's optimised kernels on the same architectures: (instructions, instructions per MAC).
CMSIS_NN = {
    "cortex-m4": {"ds_cnn": (7.70e6, 2.90), "mobilenet_v1_025": (24.09e6, 3.22),
                  "resnet8": (29.85e6, 2.39), "fc_autoencoder": (0.579e6, 2.19)},
    "cortex-m55": {"ds_cnn": (1.81e6, 0.68), "mobilenet_v1_025": (6.55e6, 0.87),
                   "resnet8": (4.91e6, 0.39), "fc_autoencoder": (0.147e6, 0.56)},
}
CMSIS_NN_PATH = {"cortex-m4": "DSP (SMLAD)", "cortex-m55": "MVE (Helium)"}
# Issue #5's goals: edgec's instructions at most this fraction of CMSIS-NN's, per model.
GOAL_RATIO = {"cortex-m4": 0.5, "cortex-m55": 0.8}
# CMSIS-NN's instructions per MAC by layer type, as issue #5 gives them ("-": not given).
CMSIS_NN_LAYER_TYPES = {
    "1x1 conv, C_in >= 64": {"cortex-m4": "1.8-2.2"},
    "1x1 conv, C_in < 64": {"cortex-m4": "2.7-6.6"},
    "kxk conv": {"cortex-m4": "1.8-2.3"},
    "stem conv (C_in <= 3)": {"cortex-m4": "4.8-6.1", "cortex-m55": "1.4-2.1"},
    "depthwise conv": {"cortex-m4": "6.9-8.9", "cortex-m55": "2.3-5.4"},
    "fully connected": {"cortex-m4": "1.95-2.4"},
}
KERNEL_OPS = ("conv2d", "depthwise_conv2d", "fully_connected")
MEMORY_TARGET = "cortex-m4"
SIZE_TARGET = "cortex-m4"  # also benchmarked with --opt speed and --opt size, in <dir>/cortex-m4-<opt>
# TFLite Micro's published arena for these models (kB): the whole arena, and its activations part.
TFLM_ARENA_KB = {"ds_cnn": (24.3, 16.0), "mobilenet_v1_025": (103.7, 73.7), "resnet8": (56.0, 49.2),
                 "fc_autoencoder": (4.0, 0.8)}


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
    return [f"Cycles and ms estimated at {result['clock_mhz']:g} MHz with {result['flash_wait_states']} flash wait "
            "states (the typical part's; docs/timing-model.md); instructions are exact.", ""]


def summary_table(bench_dir: Path, target: str) -> list[str]:
    first = next(iter(MODELS))
    lines = [f"### {target} (CMSIS-NN reference: its {CMSIS_NN_PATH[target]} kernels)", "",
             *clock_line(bench_dir, target, first),
             "| model | MACs | cycles (est.) | ms (est.) | instructions | insn/MAC | CMSIS-NN insn | CMSIS-NN insn/MAC "
             f"| edgec / CMSIS-NN | goal (<= {GOAL_RATIO[target]}x) | flash | RAM | arena |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for model, task in MODELS.items():
        result, report = load(bench_dir, target, model)
        insns, macs = result["total_instructions"], result["macs"]
        ref_insns, ref_per_mac = CMSIS_NN[target][model]
        met = "met" if insns <= GOAL_RATIO[target] * ref_insns else "not met"
        lines.append(f"| {task} | {millions(macs)} | {cycles(result)} | {milliseconds(result)} | {millions(insns)} "
                     f"| {insns / macs:.2f} | {millions(ref_insns)} "
                     f"| {ref_per_mac:.2f} | {insns / ref_insns:.2f}x | {met} | {kib(result['flash_bytes'])} "
                     f"| {kib(result['ram_bytes'])} | {kib(report['arena_bytes'])} |")
    return lines + [""]


def layer_type(layer: dict) -> str | None:
    """The CMSIS_NN_LAYER_TYPES row of a report.json layer, if it has one."""
    if layer["op"] == "depthwise_conv2d":
        return "depthwise conv"
    if layer["op"] == "fully_connected":
        return "fully connected"
    if layer["op"] != "conv2d":
        return None
    c_in = layer["input_shape"][-1]
    taps = layer["macs"] // prod(layer["output_shape"]) // c_in
    if c_in <= 3:
        return "stem conv (C_in <= 3)"
    if taps == 1:
        return "1x1 conv, C_in >= 64" if c_in >= 64 else "1x1 conv, C_in < 64"
    return "kxk conv"


def layer_type_table(bench_dir: Path) -> list[str]:
    """Per layer type and model, edgec's instructions per MAC next to CMSIS-NN's."""
    lines = ["| layer type | model | " + " | ".join(f"{t} edgec | {t} CMSIS-NN" for t in TARGETS) + " |",
             "|---|---|" + "---:|---:|" * len(TARGETS)]
    for kind, reference in CMSIS_NN_LAYER_TYPES.items():
        for model, task in MODELS.items():
            cells = []
            for target in TARGETS:
                result, report = load(bench_dir, target, model)
                types = {layer["name"]: layer_type(layer) for layer in report["layers"]}
                chosen = [layer for layer in result["layers"] if types.get(layer["name"]) == kind]
                macs = sum(layer["macs"] for layer in chosen)
                insns = sum(layer["instructions"] for layer in chosen)
                cells += [f"{insns / macs:.2f}" if macs else "", reference.get(target, "-") if macs else ""]
            if any(cells):
                lines.append(f"| {kind} | {task} | " + " | ".join(cells) + " |")
    return lines + [""]


def per_op_table(bench_dir: Path) -> list[str]:
    lines = ["| model | target | " + " | ".join(KERNEL_OPS) + " | other layers |",
             "|---|---|" + "---:|" * (len(KERNEL_OPS) + 1)]
    for target in TARGETS:
        for model, task in MODELS.items():
            layers = load(bench_dir, target, model)[0]["layers"]
            cells = []
            for op in KERNEL_OPS:
                insns = sum(l["instructions"] for l in layers if l["op"] == op)
                macs = sum(l["macs"] for l in layers if l["op"] == op)
                cells.append(f"{millions(insns)} ({insns / macs:.2f}/MAC)" if macs else "-")
            other = sum(l["instructions"] for l in layers if l["op"] not in KERNEL_OPS)
            lines.append(f"| {task} | {target} | " + " | ".join(cells) + f" | {millions(other) if other else '-'} |")
    return lines + [""]


def opt_table(bench_dir: Path) -> list[str]:
    """--opt auto (the default, every other table) against --opt speed and --opt size on SIZE_TARGET."""
    opts = {"auto": SIZE_TARGET, "speed": f"{SIZE_TARGET}-speed", "size": f"{SIZE_TARGET}-size"}
    lines = ["| model | target | " + " | ".join(f"{opt}: cycles (est.) | instructions | flash" for opt in opts) + " |",
             "|---|---|" + "---:|" * 3 * len(opts)]
    for model, task in MODELS.items():
        cells = []
        for directory in opts.values():
            result = load(bench_dir, directory, model)[0]
            cells += [cycles(result), millions(result["total_instructions"]), kib(result["flash_bytes"])]
        lines.append(f"| {task} | {SIZE_TARGET} | " + " | ".join(cells) + " |")
    return lines + [""]


def layer_kernels(bench_dir: Path, target: str, model: str) -> dict[int, str]:
    """Layer index -> the kernel function its generated call runs, from the bench's model C file."""
    model_dir = bench_dir / target / model
    [source] = [f for f in model_dir.glob("*.c") if not f.name.endswith("_weights.c")]
    calls = re.findall(r"EDGEC_LAYER_BEGIN\((\d+)\);\s*(?:memcpy\([^;]*;\s*)?status \|= (\w+)\(",
                       source.read_text())
    return {int(index): kernel for index, kernel in calls}


def per_kernel_table(bench_dir: Path) -> list[str]:
    """Instructions per kernel function: which layers run the DSP/MVE kernels and which the
    portable ones."""
    lines = ["| model | target | kernel | layers | MACs | instructions | insn/MAC |",
             "|---|---|---|---:|---:|---:|---:|"]
    for target in TARGETS:
        for model, task in MODELS.items():
            result, report = load(bench_dir, target, model)
            kernels = layer_kernels(bench_dir, target, model)
            index = {layer["name"]: i for i, layer in enumerate(report["layers"])}
            totals: dict[str, list[int]] = {}
            for layer in result["layers"]:
                kernel = kernels[index[layer["name"]]]
                counts = totals.setdefault(kernel, [0, 0, 0])
                counts[0] += 1
                counts[1] += layer["macs"]
                counts[2] += layer["instructions"]
            for kernel, (count, macs, insns) in totals.items():
                per_mac = f"{insns / macs:.2f}" if macs else "-"
                lines.append(f"| {task} | {target} | `{kernel}` | {count} | {millions(macs) if macs else '-'} "
                             f"| {millions(insns)} | {per_mac} |")
    return lines + [""]


def kb(n: int) -> str:
    return f"{n / 1000:.1f} kB"


def memory_table(bench_dir: Path) -> list[str]:
    lines = ["| model | edgec arena | its liveness bound | bound without in-place | layers in place "
             "| TFLM arena | TFLM activations | edgec RAM besides the arena |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for model, task in MODELS.items():
        result, report = load(bench_dir, MEMORY_TARGET, model)
        extra = result["ram_beyond_arena"]
        total, activations = TFLM_ARENA_KB[model]
        lines.append(f"| {task} | {report['arena_bytes']:,} B ({kb(report['arena_bytes'])}) "
                     f"| {kb(report['lower_bound_bytes'])} | {kb(report['lower_bound_without_in_place_bytes'])} "
                     f"| {report['in_place_layers']} of {len(report['layers'])} | {total:.1f} kB | {activations:.1f} kB "
                     f"| {extra['total_bytes']:,} B (stack {extra['invoke_stack_bytes']:,}, data {extra['data_bytes']:,}, "
                     f"bss {extra['bss_bytes']:,}) |")
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


def cnn_section(bench_dir: Path) -> list[str]:
    """The public architectures: whole-model figures, then where their instructions go by op."""
    lines = ["## Public architectures", "",
             "Models of `edgec.zoo_cnn` (random weights, reduced width and resolution to fit the boards),",
             "benchmarked like the reference models (`python -m edgec.cli bench edgec/zoo_cnn.py:<model>`),",
             "calibration `edgec.zoo_cnn.calibration_data(<model>, 32)`, with `--opt size` (EfficientNet's",
             "int16-widened DSP filters would not fit the typical M4 part's 1 MiB flash; Helium ignores",
             "`--opt`). No CMSIS-NN reference figures exist for them.", "",
             "| model | target | MACs | cycles (est.) | ms (est.) | instructions | insn/MAC | flash | RAM | arena "
             "| liveness bound |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for model, title in CNN_MODELS.items():
        for target in TARGETS:
            result, report = load(bench_dir, target, model)
            insns, macs = result["total_instructions"], result["macs"]
            lines.append(f"| {title} | {target} | {millions(macs)} | {cycles(result)} | {milliseconds(result)} "
                         f"| {millions(insns)} | {insns / macs:.2f} "
                         f"| {kib(result['flash_bytes'])} | {kib(result['ram_bytes'])} | {kib(report['arena_bytes'])} "
                         f"| {kib(report['lower_bound_bytes'])} |")
    lines += ["", "Instructions by op kind (share of the model's):", "",
              "| model | target | " + " | ".join(("conv", "depthwise", "binary / add", "lookup table", "pooling", "other")) + " |",
              "|---|---|" + "---:|" * 6]
    groups = {"conv2d": 0, "depthwise_conv2d": 1, "binary": 2, "add": 2, "lut": 3, "avg_pool2d": 4, "max_pool2d": 4}
    for model, title in CNN_MODELS.items():
        for target in TARGETS:
            totals = [0] * 6
            for layer in load(bench_dir, target, model)[0]["layers"]:
                totals[groups.get(layer["op"], 5)] += layer["instructions"]
            whole = sum(totals) or 1
            lines.append(f"| {title} | {target} | " + " | ".join(f"{t / whole:.0%}" for t in totals) + " |")
    return lines + [""]


def seq_section(bench_dir: Path) -> list[str]:
    """The sequence models: recurrent keyword spotters (whole sequence and streaming) and tiny
    transformers; RAM = arena + persistent state."""
    lines = ["## Sequence models", "",
             "Models of `edgec.zoo_seq` (random weights), benchmarked like the reference models",
             "(`python -m edgec.cli bench edgec/zoo_seq.py:<model>`, calibration",
             "`edgec.zoo_seq.calibration_data(<model>, 32)`; the streaming build adds `--stream` and counts",
             "one time step). State: the recurrent state kept between invokes outside the arena.", "",
             "| model | target | cycles (est.) | ms (est.) | instructions | flash | arena | state |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for model, title in SEQ_MODELS.items():
        for target in TARGETS:
            if not (bench_dir / target / f"{model}.json").exists():
                continue
            result, report = load(bench_dir, target, model)
            lines.append(f"| {title} | {target} | {cycles(result)} | {milliseconds(result)} "
                         f"| {millions(result['total_instructions'])} | {kib(result['flash_bytes'])} "
                         f"| {report['arena_bytes']:,} B | {report.get('state_bytes', 0):,} B |")
    return lines + [""]


def render(bench_dir: Path) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench`; do not edit. Per model and target the Makefile runs",
        "",
        "    python -m edgec.cli bench edgec/zoo.py:<model> --calib build/bench/<model>.npy \\",
        "        --target <target> --json --quiet -o build/bench/<target>/<model>",
        "",
        "(the calibration data is `edgec.zoo.calibration_data(<model>, 32)`, and the benchmarked input",
        "its first sample; the default `--opt auto`), and on cortex-m4 the same with `--opt speed` and `--opt size`",
        "into `build/bench/cortex-m4-speed/<model>` and `build/bench/cortex-m4-size/<model>`; then",
        "`python scripts/write_benchmarks.py build/bench > BENCHMARKS.md`.",
        f"Tools: {tool_version('arm-none-eabi-gcc')} at -O2; {tool_version('qemu-system-arm')}.",
        "",
        "What is measured:",
        "- **cycles (est.)** and **ms (est.)**: an ESTIMATE, not a measurement. QEMU has no timing model;",
        "  edgec's plugin times the same executed instructions with its own model of each core (costs from",
        "  the Cortex-M4 TRM's instruction timing table, the Helium beat rules, and stated approximations",
        "  for the M7/M55 scalar pipelines) and of the typical part's memory system (flash wait states",
        "  behind an ART-like cache and prefetcher; zero-wait SRAM/TCM): see docs/timing-model.md.",
        *textwrap.wrap(f"It leaves out {LEFT_OUT}. ms = cycles at the part's clock, given above each whole-model "
                       "table.", 98, initial_indent="  ", subsequent_indent="  "),
        "- **instructions**: exact counts of executed guest instructions from QEMU (edgec's TCG plugin),",
        "  for one inference: the sum over the layers of the instructions between each layer's",
        "  `EDGEC_LAYER_BEGIN`/`EDGEC_LAYER_END` markers (kernel call and its argument set-up). Start-up,",
        "  the test driver and the few instructions of `<name>_invoke`'s own prologue are not counted.",
        "  They are the exact, model-free figure; the CMSIS-NN comparisons use them.",
        "- **MACs**: multiply-accumulates of the convolution and fully connected layers.",
        "- **flash**: text + rodata + data of the whole bench program (model, kernels, start-up,",
        "  semihosting driver); **RAM**: data + bss + the 8 KiB stack; **arena**: the model's",
        "  activation buffer (part of bss).",
        "",
        "On cores with the DSP extension (Cortex-M4/M7/M33) and with Helium (Cortex-M55), the",
        "convolutions (1x1 ones too), fully connected and add layers run edgec's SMLAD and MVE kernels",
        "(`_dsp`/`_mve`, their filters re-laid and input offsets folded into the bias at compile time;",
        "`_dsp_wide`, the filter widened to int16, where `--opt auto` estimates it faster; see below);",
        "depthwise layers run `edgec_depthwise_conv_s8_packed` (4 channels at a time over a cache of",
        "zero-point-padded input rows, so border pixels cost what inside ones do; SMLAxy or MVE taps);",
        "average pooling sums on Helium, max pooling and softmax are portable C99 (see *By kernel*).",
        "The outputs are bit-exact with edgec's golden simulator (bench checks it).",
        "",
        "## Whole models",
        "",
    ]
    for target in TARGETS:
        lines += summary_table(bench_dir, target)
    lines += ["### --opt auto, speed and size", "",
              "`--opt speed` widens every DSP filter to int16 (the fewest instructions, the most flash); `--opt",
              "size` keeps every constant at its smallest. With flash wait states the estimated cycles can",
              "favour `--opt size`: the widened filters read twice the bytes from flash through the",
              "accelerator's small data cache. `--opt auto` (the default, above) widens a layer only where the",
              "timing model estimates it faster at the part's wait states (docs/timing-model.md). They differ",
              "only on the DSP cores (Helium's kernels are the same either way).", ""]
    lines += opt_table(bench_dir)
    lines += ["## By layer type", "",
              "Instructions summed over all layers of a type (instructions per MAC in brackets); "
              "other layers are pooling, softmax and add, which have no MACs.", ""]
    lines += per_op_table(bench_dir)
    lines += ["Against CMSIS-NN's instructions per MAC by layer type (the ranges issue #5 gives; on",
              "cortex-m55 it gives only depthwise and stems).", ""]
    lines += layer_type_table(bench_dir)
    lines += ["## By kernel", "",
              "Instructions summed over the layers that call each kernel function (`conv2d` layers above:",
              "the generic convolution, 1x1 layers included; `edgec_conv_1x1_s8` is the portable build's).", ""]
    lines += per_kernel_table(bench_dir)
    lines += memory_section(bench_dir)
    lines += cnn_section(bench_dir)
    lines += seq_section(bench_dir)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render(Path(sys.argv[1])))

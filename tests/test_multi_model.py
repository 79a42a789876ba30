"""Several models and several instances in one firmware: a keyword spotter (conv), a streaming
voice-activity detector (GRU, one frame per invoke) and an anomaly detector (autoencoder), built
separately (three directories) and together (`edgec build a b c`, one runtime, --shared-arena),
linked into one bare-metal application through edgec.mk and through CMake, run under QEMU on
Cortex-M4 and Cortex-M55. Two instances of the detector run interleaved (the simple form on the
model's own arena and state, the instance form on the application's): every output equals its
model's golden simulator, byte for byte."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from edgec.backend.codegen import runtime_symbol
from edgec.errors import EdgecError
from edgec.ops.recurrent import reset_state
from edgec.pipeline import compile_for, emit, emit_many, quantize_model
from edgec.targets import toolchain
from edgec.targets.cores import get_target
from edgec.tools import verify as checks
from tests.device_support import ROOT, needs_toolchain, require_tools

PORT = ROOT / "runtime_c" / "port"
TOOLCHAIN_FILE = ROOT / "examples" / "firmware" / "arm-none-eabi.cmake"
STEPS = 3  # samples per model, frames per detector stream
FRAME = 8


class Kws(nn.Module):
    """[1, 1, 10, 8] MFCC patch -> conv 3x3 (8) + ReLU -> 2x2 average pool -> 4 keywords."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2))
        self.classifier = nn.Linear(8 * 5 * 4, 4)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


class Vad(nn.Module):
    """[1, 4, 8] frames -> GRU(16) -> the last step -> speech / no speech."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(FRAME, 16, batch_first=True)
        self.classifier = nn.Linear(16, 2)

    def forward(self, x):
        output, _ = self.rnn(x)
        return self.classifier(output[:, -1])


class Anomaly(nn.Module):
    """[1, 16] features -> 8 -> 4 -> 8 -> 16 (the reconstruction)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 16)
        )

    def forward(self, x):
        return self.net(x)


MODELS = {"kws": (Kws, (1, 1, 10, 8)), "vad": (Vad, (1, 4, FRAME)), "anomaly": (Anomaly, (1, 16))}
STREAMING = {"vad"}


@pytest.fixture(scope="module")
def quantized():
    """Each model quantized once (target-independent), with float samples to run."""
    rng = np.random.default_rng(0)
    result = {}
    for name, (make, shape) in MODELS.items():
        torch.manual_seed(0)
        calibration = rng.standard_normal((16, *shape[1:]), dtype=np.float32)
        result[name] = quantize_model(
            make().eval(),
            calibration=calibration,
            example_inputs=(torch.from_numpy(calibration[:1]),),
            progress=None,
            warn=lambda message: None,
        )
    return result


def compiled_models(quantized, target: str) -> dict:
    return {name: compile_for(q, target, stream=name in STREAMING) for name, q in quantized.items()}


def workload(compiled: dict) -> dict:
    """The stored input bytes the application feeds and the golden output bytes it must print:
    STEPS samples of kws and anomaly, two STEPS-frame streams of vad (instance a and b)."""
    rng = np.random.default_rng(1)
    runs = {}
    for label, name in (("kws", "kws"), ("vad_a", "vad"), ("vad_b", "vad"), ("anomaly", "anomaly")):
        graph = compiled[name].graph
        shape = (STEPS, FRAME) if name in STREAMING else (STEPS, *MODELS[name][1][1:])
        inputs = checks.quantized_inputs(graph, rng.standard_normal(shape, dtype=np.float32))
        reset_state(graph)  # each stream from the start (a no-op for the models without state)
        runs[label] = (inputs, checks.golden_outputs(graph, inputs))
    return runs


MAIN = r"""
#include <stdint.h>
#include <string.h>

#include "anomaly.h"
#include "kws.h"
#include "semihost.h"
#include "vad.h"
#include "workload.h"

/* The detector's second instance: arena and state of the application's own. */
static int8_t vad_b_arena[VAD_ARENA_SIZE] __attribute__((aligned(VAD_ARENA_ALIGNMENT)));
static int8_t vad_b_state[VAD_STATE_SIZE] __attribute__((aligned(VAD_STATE_ALIGNMENT)));

static void print_bytes(const char *label, int step, const int8_t *bytes, int size)
{
    static const char digits[] = "0123456789abcdef";
    char text[2 * 64 + 2];
    int i;
    for (i = 0; i < size; ++i) {
        text[2 * i] = digits[((uint8_t)bytes[i]) >> 4];
        text[2 * i + 1] = digits[((uint8_t)bytes[i]) & 15];
    }
    text[2 * size] = '\n';
    text[2 * size + 1] = '\0';
    semihost_write0(label);
    semihost_write0(" ");
    semihost_write_int(step);
    semihost_write0(" ");
    semihost_write0(text);
}

int main(void)
{
    int step;
    vad_reset_state_in(vad_b_state);
    for (step = 0; step < STEPS; ++step) {
        memcpy(kws_input_0(), kws_inputs[step], KWS_INPUT_0_BYTES);
        if (kws_invoke() != 0) {
            return 1;
        }
        print_bytes("kws", step, kws_output_0(), KWS_OUTPUT_0_BYTES);
        memcpy(vad_input_0(), vad_a_inputs[step], VAD_INPUT_0_BYTES);
        if (vad_invoke() != 0) {
            return 1;
        }
        print_bytes("vad_a", step, vad_output_0(), VAD_OUTPUT_0_BYTES);
        memcpy(vad_input_0_in(vad_b_arena), vad_b_inputs[step], VAD_INPUT_0_BYTES);
        if (vad_invoke_in(vad_b_arena, vad_b_state) != 0) {
            return 1;
        }
        print_bytes("vad_b", step, vad_output_0_in(vad_b_arena), VAD_OUTPUT_0_BYTES);
        memcpy(anomaly_input_0(), anomaly_inputs[step], ANOMALY_INPUT_0_BYTES);
        if (anomaly_invoke() != 0) {
            return 1;
        }
        print_bytes("anomaly", step, anomaly_output_0(), ANOMALY_OUTPUT_0_BYTES);
    }
    return 0;
}
"""


def write_application(app: Path, runs: dict) -> None:
    app.mkdir(parents=True, exist_ok=True)
    (app / "main.c").write_text(MAIN)
    arrays = "".join(
        f"static const int8_t {label}_inputs[{STEPS}][{inputs.shape[1]}] = {{\n"
        + "".join("    {" + ", ".join(str(int(v)) for v in row) + "},\n" for row in inputs.view(np.int8))
        + "};\n"
        for label, (inputs, _) in runs.items()
    )
    (app / "workload.h").write_text(f"#include <stdint.h>\n#define STEPS {STEPS}\n{arrays}")


def build_with_make(app: Path, model_dirs: list[Path], target) -> Path:
    require_tools("make", install="apt-get install make")
    includes = "".join(f"include {d}/edgec.mk\n" for d in model_dirs)
    (app / "Makefile").write_text(
        f"{includes}"
        f"CFLAGS := $(EDGEC_TARGET_CFLAGS) -O2 -Wall -Wextra -Werror -ffunction-sections -fdata-sections "
        f"$(EDGEC_CFLAGS) -I{PORT} -I.\n"
        f"app.elf: main.c {PORT}/startup.c {PORT}/semihost.c $(EDGEC_SRCS)\n"
        f"\tarm-none-eabi-gcc $(CFLAGS) $^ -nostartfiles --specs=nano.specs -Wl,--gc-sections "
        f"-T {linker_script(target)} -o $@\n"
    )
    run(["make", "-C", app])
    return app / "app.elf"


def build_with_cmake(app: Path, model_dirs: list[Path], target) -> Path:
    require_tools("cmake", install="apt-get install cmake")
    flags = " ".join(target.cflags)
    subdirectories = "".join(f'add_subdirectory("{d}" {d.name})\n' for d in model_dirs)
    (app / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(multi C)\n"
        f"add_compile_options({flags} -O2 -Wall -Wextra -Werror -ffunction-sections -fdata-sections)\n"
        f"add_link_options({flags})\n{subdirectories}"
        f'add_executable(app.elf main.c "{PORT}/startup.c" "{PORT}/semihost.c")\n'
        f'target_include_directories(app.elf PRIVATE "{PORT}" "${{CMAKE_CURRENT_SOURCE_DIR}}")\n'
        "target_link_libraries(app.elf PRIVATE edgec_kws edgec_vad edgec_anomaly)\n"
        f"target_link_options(app.elf PRIVATE -nostartfiles --specs=nano.specs -Wl,--gc-sections "
        f'-T "{linker_script(target)}")\n'
    )
    build = app / "build"
    run(["cmake", "-S", app, "-B", build, f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN_FILE}"])
    run(["cmake", "--build", build])
    return build / "app.elf"


def linker_script(target) -> Path:
    return PORT / f"{target.qemu_machine.replace('-', '_')}.ld"


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=600, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, command))}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def assert_outputs_are_golden(target, elf: Path, runs: dict) -> None:
    result = toolchain.run_qemu(target, elf, timeout=60)
    assert result.returncode == 0, result.stderr
    printed = {}
    for line in result.stderr.splitlines():
        label, step, data = line.split()
        printed[label, int(step)] = bytes.fromhex(data)
    for label, (_, golden) in runs.items():
        for step in range(STEPS):
            assert printed[label, step] == golden[step].tobytes(), f"{label} step {step}: C != golden"
    assert runs["vad_a"][1].tobytes() != runs["vad_b"][1].tobytes()  # two streams, two states


def writable_runtime_sections(target, model_dir: Path) -> list[str]:
    """The non-empty writable sections of the directory's kernels compiled for `target` (the
    header's "the kernels keep no state of their own")."""
    from elftools.elf.constants import SH_FLAGS
    from elftools.elf.elffile import ELFFile

    objects = toolchain.compile_objects(
        target, sorted((model_dir / "runtime" / "src").rglob("*.c")), include_dirs=[model_dir / "runtime" / "include"]
    )
    found = []
    for path in objects:
        with open(path, "rb") as f:
            found += [
                f"{path.name}:{s.name}"
                for s in ELFFile(f).iter_sections()
                if s["sh_flags"] & SH_FLAGS.SHF_ALLOC and s["sh_flags"] & SH_FLAGS.SHF_WRITE and s["sh_size"]
            ]
    return found


def arena_symbols(elf: Path) -> dict[str, int]:
    """Every arena in the program: symbol -> bytes."""
    from elftools.elf.elffile import ELFFile

    with open(elf, "rb") as f:
        symbols = ELFFile(f).get_section_by_name(".symtab")
        return {s.name: s["st_size"] for s in symbols.iter_symbols() if s.name.endswith("_arena") and s["st_size"]}


@needs_toolchain
@pytest.mark.parametrize("target_name", ["cortex-m4", "cortex-m55"])
def test_three_models_two_instances_link_and_run(quantized, target_name, tmp_path, edgec_cache):
    """Built separately: three directories, their edgec.mk included together and their
    CMakeLists.txt added together; built together with --shared-arena: one directory (through its
    edgec.mk and its CMakeLists.txt) whose arena is the largest model's, not the sum."""
    target = get_target(target_name)
    compiled = compiled_models(quantized, target_name)
    runs = workload(compiled)
    separate = [tmp_path / "models" / name for name in compiled]
    reports = {name: emit(c, tmp_path / "models" / name, name) for name, c in compiled.items()}
    together = tmp_path / "together"
    summary = emit_many([(c, name) for name, c in compiled.items()], together, shared_arena=True)

    for build, dirs in (
        (build_with_make, separate),
        (build_with_cmake, separate),
        (build_with_make, [together]),
        (build_with_cmake, [together]),
    ):
        app = tmp_path / f"{build.__name__}_{dirs[0].parent.name}"
        write_application(app, runs)
        elf = build(app, dirs, target)
        assert_outputs_are_golden(target, elf, runs)
        arenas = arena_symbols(elf)
        own = {"vad_b_arena": reports["vad"]["arena_bytes"]}
        if dirs == separate:
            assert arenas == {**own, **{f"{name}_arena": r["arena_bytes"] for name, r in reports.items()}}
        else:
            assert arenas == {**own, "edgec_shared_arena": max(r["arena_bytes"] for r in reports.values())}

    assert writable_runtime_sections(target, together) == []
    sizes = [r["arena_bytes"] for r in reports.values()]
    assert summary["shared_arena_bytes"] == summary["arena_bytes"] == max(sizes) < sum(sizes)
    # One runtime: each kernel source once, the union of the three models'.
    kernels = {p.relative_to(d / "runtime").as_posix() for d in separate for p in (d / "runtime").rglob("*.c")}
    assert {p.relative_to(together / "runtime").as_posix() for p in (together / "runtime").rglob("*.c")} == kernels


def test_directories_of_different_runtimes_do_not_mix(quantized, tmp_path):
    """Another edgec's model directory (here: one whose runtime identity differs) stops make and
    CMake with one message, and a model of another runtime fails to link against these kernels."""
    require_tools("make", "cmake")
    compiled = compiled_models(quantized, "host")
    ours, other = tmp_path / "kws", tmp_path / "anomaly"
    emit(compiled["kws"], ours, "kws")
    emit(compiled["anomaly"], other, "anomaly")
    symbol = runtime_symbol()
    identity = symbol.removeprefix("edgec_runtime_")
    for path in [other / "edgec.mk", other / "CMakeLists.txt", other / "anomaly.c"]:
        path.write_text(path.read_text().replace(identity, "0123456789ab"))

    (tmp_path / "Makefile").write_text(f"include {ours}/edgec.mk\ninclude {other}/edgec.mk\nall:\n\t@true\n")
    result = subprocess.run(["make", "-C", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode != 0 and "another model directory of this build with runtime" in result.stderr

    (tmp_path / "cmake").mkdir()
    (tmp_path / "cmake" / "CMakeLists.txt").write_text(
        f'cmake_minimum_required(VERSION 3.20)\nproject(mix C)\nadd_subdirectory("{ours}" kws)\n'
        f'add_subdirectory("{other}" anomaly)\n'
    )
    result = subprocess.run(
        ["cmake", "-S", str(tmp_path / "cmake"), "-B", str(tmp_path / "cmake" / "build")],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "their kernels differ" in " ".join(result.stderr.split())  # CMake wraps

    main = tmp_path / "main.c"
    main.write_text('#include "anomaly.h"\nint main(void) { return anomaly_invoke(); }\n')
    runtime = {p.relative_to(d / "runtime"): p for d in (other, ours) for p in (d / "runtime" / "src").rglob("*.c")}
    sources = [other / "anomaly.c", other / "anomaly_weights.c", *runtime.values()]  # ours where both have one
    result = subprocess.run(
        [
            "cc",
            "-std=c99",
            f"-I{other}",
            f"-I{ours / 'runtime' / 'include'}",
            str(main),
            *map(str, sources),
            "-o",
            str(tmp_path / "mixed"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "edgec_runtime_0123456789ab" in result.stderr


def test_one_directory_refuses_clashing_names_and_targets(quantized, tmp_path):
    host = compile_for(quantized["kws"], "host")
    with pytest.raises(EdgecError, match="two models are named 'kws'"):
        emit_many([(host, "kws"), (compile_for(quantized["anomaly"], "host"), "kws")], tmp_path / "out")
    with pytest.raises(EdgecError, match="need the same target"):
        emit_many([(host, "kws"), (compile_for(quantized["anomaly"], "cortex-m4"), "anomaly")], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_build_several_models_into_one_directory(tmp_path, capsys):
    """`edgec build a b --shared-arena`: one directory, one runtime, one arena; its C compiles
    warning-free on the host and both models run there on the shared arena."""
    from tests.test_cli import DIGITS, run_cli, write_model

    out, calib = tmp_path / "out", tmp_path / "net_calib.npy"
    np.save(calib, np.random.default_rng(0).standard_normal((8, 1, 6, 6), dtype=np.float32))
    code, stdout, err = run_cli(
        "build",
        DIGITS / "digits.pt2",
        f"{write_model(tmp_path)}:factory",
        "--name",
        "digits",
        "--name",
        "net",
        "--calib",
        DIGITS / "calib.npy",
        "--calib",
        calib,
        "--shared-arena",
        "-o",
        out,
        "--quiet",
        capsys=capsys,
    )
    assert code == 0, err
    summary = json.loads((out / "report.json").read_text())
    arenas = {model["name"]: model["arena_bytes"] for model in summary["models"]}
    assert (
        summary["shared_arena_bytes"] == max(arenas.values()) and f"shared arena {max(arenas.values()):,} B" in stdout
    )
    assert {"digits.h", "net.h", "edgec_shared_arena.h", "edgec.mk", "CMakeLists.txt", "runtime"} <= {
        p.name for p in out.iterdir()
    }
    code, _, err = run_cli("report", out, capsys=capsys)
    assert code == 2 and err.startswith("edgec: error: the directory holds several models (digits, net)")
    main = tmp_path / "main.c"
    main.write_text(
        '#include "digits.h"\n#include "net.h"\nint main(void) { return digits_invoke() != 0 || net_invoke() != 0; }\n'
    )
    sources = [*out.glob("*.c"), *(out / "runtime" / "src").rglob("*.c")]
    run(
        [
            "cc",
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            f"-I{out}",
            f"-I{out / 'runtime' / 'include'}",
            main,
            *sources,
            "-o",
            tmp_path / "prog",
        ]
    )
    run([tmp_path / "prog"])


def test_build_refuses_a_name_short_of_the_models(tmp_path, capsys):
    from tests.test_cli import DIGITS, run_cli

    code, _, err = run_cli(
        "build", DIGITS / "digits.pt2", DIGITS / "digits.pt2", "--name", "a", "-o", tmp_path / "out", capsys=capsys
    )
    assert code == 2 and err.strip() == (
        "edgec: error: --name given once for 2 models: give it once per model, in the order of the models"
    )
    assert not (tmp_path / "out").exists()


def test_save_writes_several_compiled_models(tmp_path):
    """The Python API's equivalent: edgec.save([...]) of edgec.compile() results."""
    import edgec

    models = [
        edgec.compile(make().eval(), torch.randn(*shape), name=name, target="host", progress=False)
        for name, (make, shape) in MODELS.items()
        if name not in STREAMING
    ]
    summary = edgec.save(models, tmp_path / "out", shared_arena=True)
    assert [model["name"] for model in summary["models"]] == ["kws", "anomaly"]
    assert "edgec_kws edgec_anomaly" in (tmp_path / "out" / "CMakeLists.txt").read_text()


THREADS = r"""
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kws.h"
#include "vad.h"
#include "workload.h"

#define REPEATS 50
#define LARGER(a, b) ((a) > (b) ? (a) : (b))
#define ARENA ((LARGER(KWS_ARENA_SIZE, VAD_ARENA_SIZE) + 15) / 16 * 16)

/* Per thread: one arena for both models (run one after the other), the detector's state. */
static int8_t arenas[2][ARENA] __attribute__((aligned(16)));
static int8_t states[2][VAD_STATE_SIZE] __attribute__((aligned(VAD_STATE_ALIGNMENT)));

typedef struct {
    int8_t *arena;
    int8_t *state;
    const int8_t (*frames)[VAD_INPUT_0_BYTES];
    int8_t kws[STEPS][KWS_OUTPUT_0_BYTES];
    int8_t vad[STEPS][VAD_OUTPUT_0_BYTES];
    int failed;
} worker;

/* Keeps the first pass's outputs; every later pass must give the same bytes. */
static void keep(int repeat, int8_t *kept, const int8_t *output, int size, int *failed)
{
    if (repeat == 0) {
        memcpy(kept, output, (size_t)size);
    } else if (memcmp(kept, output, (size_t)size) != 0) {
        *failed = 1;
    }
}

static void *work(void *argument)
{
    worker *w = argument;
    int repeat, step;
    for (repeat = 0; repeat < REPEATS; ++repeat) {
        vad_reset_state_in(w->state);
        for (step = 0; step < STEPS; ++step) {
            memcpy(kws_input_0_in(w->arena), kws_inputs[step], KWS_INPUT_0_BYTES);
            w->failed |= kws_invoke_in(w->arena) != 0;
            keep(repeat, w->kws[step], kws_output_0_in(w->arena), KWS_OUTPUT_0_BYTES, &w->failed);
            memcpy(vad_input_0_in(w->arena), w->frames[step], VAD_INPUT_0_BYTES);
            w->failed |= vad_invoke_in(w->arena, w->state) != 0;
            keep(repeat, w->vad[step], vad_output_0_in(w->arena), VAD_OUTPUT_0_BYTES, &w->failed);
        }
    }
    return NULL;
}

static void print_bytes(const char *label, char thread, int step, const int8_t *bytes, int size)
{
    int i;
    printf("%s_%c %d ", label, thread, step);
    for (i = 0; i < size; ++i) {
        printf("%02x", (unsigned)(uint8_t)bytes[i]);
    }
    printf("\n");
}

int main(void)
{
    static worker workers[2];
    pthread_t threads[2];
    int i, step;
    for (i = 0; i < 2; ++i) {
        workers[i].arena = arenas[i];
        workers[i].state = states[i];
        workers[i].frames = i == 0 ? vad_a_inputs : vad_b_inputs;
        if (pthread_create(&threads[i], NULL, work, &workers[i]) != 0) {
            return 2;
        }
    }
    for (i = 0; i < 2; ++i) {
        pthread_join(threads[i], NULL);
        for (step = 0; step < STEPS; ++step) {
            print_bytes("kws", (char)('a' + i), step, workers[i].kws[step], KWS_OUTPUT_0_BYTES);
            print_bytes("vad", (char)('a' + i), step, workers[i].vad[step], VAD_OUTPUT_0_BYTES);
        }
        if (workers[i].failed) {
            return 1;
        }
    }
    return 0;
}
"""


def test_two_threads_run_instances_at_the_same_time(quantized, tmp_path):
    """The header's rule, tested on the host under ThreadSanitizer: two threads, each with its own
    arena and detector state, run both models' instance forms at the same time, 50 passes each:
    no data race, every pass the same outputs, equal to the golden."""
    require_tools("cc")
    compiled = compiled_models(quantized, "host")
    runs = workload(compiled)
    out, app = tmp_path / "models", tmp_path / "app"
    emit_many([(c, name) for name, c in compiled.items()], out)
    write_application(app, runs)
    (app / "threads.c").write_text(THREADS)
    sources = [
        out / "kws.c",
        out / "kws_weights.c",
        out / "vad.c",
        out / "vad_weights.c",
        *(out / "runtime" / "src").rglob("*.c"),
    ]
    run(
        [
            "cc",
            "-std=c99",
            "-O1",
            "-g",
            "-pthread",
            "-fsanitize=thread",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            f"-I{out}",
            f"-I{out / 'runtime' / 'include'}",
            f"-I{app}",
            app / "threads.c",
            *sources,
            "-o",
            app / "threads",
        ]
    )
    result = run([app / "threads"], env={"TSAN_OPTIONS": "halt_on_error=1"})
    assert "ThreadSanitizer" not in result.stderr
    printed = {
        (label, int(step)): bytes.fromhex(data)
        for label, step, data in (line.split() for line in result.stdout.splitlines())
    }
    for step in range(STEPS):
        for thread in "ab":
            assert printed[f"kws_{thread}", step] == runs["kws"][1][step].tobytes()
            assert printed[f"vad_{thread}", step] == runs[f"vad_{thread}"][1][step].tobytes()


def test_the_ram_budget_holds_every_arena_of_the_directory(quantized, tmp_path):
    """The firmware holds all the models: their arenas' sum must fit the RAM budget, or with
    --shared-arena the largest (here the budget is the largest arena)."""
    sizes = [compile_for(q, "cortex-m4", stream=name in STREAMING).plan.arena_bytes for name, q in quantized.items()]
    target = get_target("cortex-m4").with_budget(max(sizes), None)
    models = [(compile_for(q, target, stream=name in STREAMING), name) for name, q in quantized.items()]
    with pytest.raises(EdgecError, match=f"arena {sum(sizes):,} B > RAM budget {max(sizes):,} B"):
        emit_many(models, tmp_path / "separate")
    assert emit_many(models, tmp_path / "shared", shared_arena=True)["arena_bytes"] == max(sizes)

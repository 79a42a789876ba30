# edgec -- the two set-up-and-go commands are `make demo` and `make test` (see README.md).
PYTHON ?= python3
PIP := $(PYTHON) -m pip
STAMP := .make
# The development versions, tested by `make test`; pyproject.toml declares the supported ranges.
TORCH_PINS := torch==2.13.0 torchao==0.18.0

.PHONY: demo test lint install install-test toolchain bench bench-runs fuzz clean

# torch and torchao are installed first and pinned, so nothing can pull another (multi-GB CUDA) build.
$(STAMP)/install: pyproject.toml
	@mkdir -p $(STAMP)
	$(PIP) install -q $(TORCH_PINS)
	$(PIP) install -q -e .
	@touch $@

$(STAMP)/install-test: $(STAMP)/install
	$(PIP) install -q -e ".[test]"
	@touch $@

install: $(STAMP)/install
install-test: $(STAMP)/install-test toolchain

# The Cortex-M cross compiler and emulator, clang and ld.lld (the clang builds), cmake for the
# firmware example, headless Chromium for the HTML report's browser test, clang-format for
# `make lint` and the generated C's check (tests/test_generated_format.py) and espeak-ng for the
# keyword spotter's synthesized speech (tests/test_int4_kws.py) (Debian packages).
toolchain:
	@if command -v arm-none-eabi-gcc >/dev/null && command -v qemu-system-arm >/dev/null && command -v cmake >/dev/null \
		&& command -v clang >/dev/null && command -v ld.lld >/dev/null && command -v chromium >/dev/null \
		&& command -v clang-format >/dev/null && command -v espeak-ng >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends \
			gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm clang lld clang-format cmake chromium espeak-ng >/dev/null; \
	else \
		echo "Cortex-M toolchain, clang, Chromium or espeak-ng missing; run as root:"; \
		echo "  apt-get install -y --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm clang lld clang-format cmake chromium espeak-ng"; \
		exit 1; \
	fi

# Build the bundled digits model, test the C bit-exact on the host, measure int8 accuracy.
demo: $(STAMP)/install
	edgec build examples/digits/digits.pt2 --calib examples/digits/calib.npy --name digits -o build/digits
	edgec verify examples/digits/digits.pt2 --calib examples/digits/calib.npy --name digits --quiet
	$(PYTHON) examples/digits/evaluate.py build/digits

# Exact instruction counts, estimated cycles and ms (edgec's timing model at the typical part's clock
# and flash wait states, docs/timing-model.md), flash and RAM of the four reference models on
# Cortex-M4, M7, M33 and M55 under QEMU, with --opt auto and --opt size (and speed), written to BENCHMARKS.md;
# its Memory section (arena, liveness bounds, RAM besides the arena) comes from the same runs, next
# to TFLite Micro's arena. With CMSIS_NN_DIR=/path/to/CMSIS-NN (a checkout of
# https://github.com/ARM-software/CMSIS-NN) the same models also run on Arm's kernels
# (--kernels cmsis-nn) in the same run, and BENCHMARKS.md gives the ratios; without it, those
# columns say "not measured".
BENCH_DIR := build/bench
BENCH_MODELS := ds_cnn mobilenet_v1_025 resnet8 fc_autoencoder
BENCH_TARGETS := cortex-m4 cortex-m7 cortex-m33 cortex-m55
# --opt changes only the DSP cores' kernels: they also run with --opt size, the M4 with --opt speed.
BENCH_SIZE_TARGETS := cortex-m4 cortex-m7 cortex-m33
BENCH_SPEED_TARGETS := cortex-m4
# The published MLPerf Tiny parts (edgec.targets.timing.PARTS), target:part: the reference models with
# edgec's kernels on each, into BENCH_DIR/<target>-<part>/.
BENCH_PARTS := cortex-m4:stm32l4r5 cortex-m33:stm32u575 cortex-m7:stm32h7a3
# The other zoos run on one DSP core and one Helium core.
BENCH_ZOO_TARGETS := cortex-m4 cortex-m55
# int4 weights: every fully connected / convolution / depthwise layer int4 (BENCHMARKS.md's int4 section;
# MobileNetV1 0.25 and ResNet-8 for their RGB stems too: 8-16 s a run, four runs).
BENCH_INT4_MODELS := ds_cnn mobilenet_v1_025 resnet8 fc_autoencoder
# int16 activations (#23's int16 paths): every layer int16, on a DSP core and a Helium core.
BENCH_INT16_MODELS := ds_cnn
# Public architectures of the operator-coverage work (edgec.zoo.cnn; the last two for issue #23's
# PReLU and max-pooling figures), default options (--opt auto keeps EfficientNet's constants within
# the typical M4 part's 1 MiB flash).
BENCH_CNN_MODELS := mobilenet_v3_small efficientnet_b0 binary_classifier unet_nearest
# RAM budgets (#24): layer by layer, then with --ram (band stages), for the vision models whose
# activation peak sits in their first layers (edgec.zoo.vision; MobileNetV1 0.25 comes from edgec.zoo.mlperf).
BENCH_VISION_MODELS := mobilenet_v2_035 pnet
# Sequence models (edgec.zoo.seq); lstm_kws also streaming (one time step per invoke).
BENCH_SEQ_MODELS := lstm_kws gru_kws conv_gru_kws kws_transformer vit_tiny
export CMSIS_NN_DIR
# Bench runs are independent (exact instruction counts do not depend on what else runs), so they run
# as parallel make jobs: BENCH_JOBS of them at once (default: one per core).
BENCH_JOBS ?= $(shell nproc)
# $(call bench_calibration,MODULE,MODEL): the rule making BENCH_DIR/MODEL.npy, MODULE.calibration_data(MODEL, 32).
define bench_calibration
$(BENCH_DIR)/$(2).npy:
	@mkdir -p $$(@D)
	@$(PYTHON) -c "import numpy, sys; from edgec.zoo import $(1); numpy.save(sys.argv[1], $(1).calibration_data(sys.argv[2], 32))" $$@ $(2)
endef
# $(call bench_run,MODULE,MODEL,TARGET,FLAGS,SUFFIX,NAME_SUFFIX): the rule making
# BENCH_DIR/TARGET SUFFIX/MODEL NAME_SUFFIX.json (and its build directory beside it), added to BENCH_RESULTS.
define bench_run
BENCH_RESULTS += $(BENCH_DIR)/$(3)$(5)/$(2)$(6).json
$(BENCH_DIR)/$(3)$(5)/$(2)$(6).json: $(BENCH_DIR)/$(2).npy
	@echo "edgec bench $(2) --target $(3) $(4)"; mkdir -p $$(@D)
	@$(PYTHON) -m edgec.cli bench edgec/zoo/$(1).py:$(2) --calib $$< --target $(3) $(4) --json --quiet \
		-o $$(basename $$@) > $$@.partial && mv $$@.partial $$@
endef
# $(call bench_runs,MODULE,MODELS,TARGETS,FLAGS,SUFFIX): edgec bench of each model of edgec/zoo/MODULE.py
# on each target with FLAGS, into BENCH_DIR/<target>SUFFIX/<model>(.json).
bench_runs = $(foreach model,$(2),$(foreach target,$(3),$(eval $(call bench_run,$(1),$(model),$(target),$(4),$(5),))))
part_target = $(word 1,$(subst :, ,$(1)))
part_name = $(word 2,$(subst :, ,$(1)))

$(foreach model,$(BENCH_MODELS),$(eval $(call bench_calibration,mlperf,$(model))))
$(foreach model,$(BENCH_CNN_MODELS),$(eval $(call bench_calibration,cnn,$(model))))
$(foreach model,$(BENCH_VISION_MODELS),$(eval $(call bench_calibration,vision,$(model))))
$(foreach model,$(BENCH_SEQ_MODELS),$(eval $(call bench_calibration,seq,$(model))))
$(call bench_runs,mlperf,$(BENCH_MODELS),$(BENCH_TARGETS),--sensitivity,)
# The published parts: edgec's kernels with --part.
$(foreach pair,$(BENCH_PARTS),$(call bench_runs,mlperf,$(BENCH_MODELS),$(call part_target,$(pair)),\
	--part $(call part_name,$(pair)) --sensitivity,-$(call part_name,$(pair))))
$(call bench_runs,mlperf,$(BENCH_MODELS),$(BENCH_SIZE_TARGETS),--opt size,-size)
$(call bench_runs,mlperf,$(BENCH_MODELS),$(BENCH_SPEED_TARGETS),--opt speed,-speed)
# int4 weights (#25): the models with int4-capable layers, on a DSP core and a Helium core.
$(call bench_runs,mlperf,$(BENCH_INT4_MODELS),$(BENCH_ZOO_TARGETS),--weights int4,-int4)
$(call bench_runs,mlperf,$(BENCH_INT16_MODELS),$(BENCH_ZOO_TARGETS),--activations int16,-int16)
ifneq ($(CMSIS_NN_DIR),)
$(call bench_runs,mlperf,$(BENCH_MODELS),$(BENCH_TARGETS),--kernels cmsis-nn --sensitivity,-cmsis-nn)
$(call bench_runs,mlperf,$(BENCH_MODELS),$(BENCH_TARGETS),--kernels cmsis-nn --cmsis-nn-opt Ofast --sensitivity,-cmsis-nn-ofast)
endif
$(call bench_runs,cnn,$(BENCH_CNN_MODELS),$(BENCH_ZOO_TARGETS),,)
$(call bench_runs,vision,$(BENCH_VISION_MODELS),$(BENCH_ZOO_TARGETS),,)
$(call bench_runs,mlperf,mobilenet_v1_025,$(BENCH_ZOO_TARGETS),--ram 32K,-ram32K)
$(call bench_runs,vision,mobilenet_v2_035,$(BENCH_ZOO_TARGETS),--ram 48K,-ram48K)
$(call bench_runs,vision,pnet,$(BENCH_ZOO_TARGETS),--ram 46K,-ram46K)
$(call bench_runs,mlperf,mobilenet_v1_025,$(BENCH_ZOO_TARGETS),--ram 24K --stream-input,-ram24K-stream)
$(call bench_runs,vision,pnet,$(BENCH_ZOO_TARGETS),--ram 26K --stream-input,-ram26K-stream)
$(call bench_runs,seq,$(BENCH_SEQ_MODELS),$(BENCH_ZOO_TARGETS),,)
# lstm_kws also streaming (one time step per invoke).
$(foreach target,$(BENCH_ZOO_TARGETS),$(eval $(call bench_run,seq,lstm_kws,$(target),--stream,,-stream)))

bench: $(STAMP)/install toolchain
	@rm -rf $(BENCH_DIR)
ifeq ($(CMSIS_NN_DIR),)
	@echo "CMSIS_NN_DIR is not set: the CMSIS-NN columns of BENCHMARKS.md will say 'not measured'"
endif
	@$(MAKE) --no-print-directory -j$(BENCH_JOBS) bench-runs
	$(PYTHON) scripts/write_benchmarks.py $(BENCH_DIR) > BENCHMARKS.md
	@echo "wrote BENCHMARKS.md"

# Every bench run (make bench runs them in parallel, then writes BENCHMARKS.md from them).
bench-runs: $(BENCH_RESULTS)

# -rs lists every skipped test and why; with EDGEC_REQUIRE_TOOLCHAIN=1 (.ci/run) a test whose
# tool is missing fails instead of skipping.
test: install-test lint
	$(PYTHON) -m pytest -n 2 -rs tests

# The code's habits, checked (and part of `make test`): ruff's formatter and linter over the Python
# (pyproject.toml's [tool.ruff]: 120 columns), clang-format over runtime_c/ (.clang-format) but
# edgec_nn.h, whose structs are generated from the kernel schema and checked against it
# (tests/test_kernel_schema.py). Run `ruff format . && ruff check --fix .` and `clang-format -i` on
# a file to fix what this reports.
C_SOURCES = $(shell find runtime_c -name '*.c' -o -name '*.h' | sort)
lint: $(STAMP)/install-test toolchain
	$(PYTHON) -m ruff format --check --quiet .
	$(PYTHON) -m ruff check --quiet .
	clang-format --dry-run -Werror $(C_SOURCES)

# Differential fuzzing: N random models (seeds START..START+N-1) compiled for TARGET (host: built
# with ASan/UBSan; a Cortex-M target: run under QEMU), compared byte for byte with the golden
# simulator, each layer checked against the quantized program (OPT=size: edgec build --opt size),
# every build with the arena write checks (host and Cortex-M alike). MODE=int16 builds some layers
# with --int16-layers, MODE=stream recurrent models with --stream (checked as a stream, and against
# the whole-sequence model), MODE=multi models with several outputs. Reproducers of every failure,
# summary.txt and summary.json (with the compile rate per operator family) go to
# build/fuzz/TARGET[-size][-MODE]; results in docs/fuzzing.md. The exit status is 1 if any model was refused (a form the README lists;
# documented limits aside), mismatched, departed from its program beyond a documented bound, or
# crashed. See tests/fuzz/__init__.py and tests/fuzz/runner.py.
N ?= 100
START ?= 0
TARGET ?= host
OPT ?= speed
MODE ?= int8
fuzz: $(STAMP)/install-test $(if $(filter host,$(TARGET)),,toolchain)
	$(PYTHON) -m tests.fuzz run --seeds $(N) --start $(START) --target $(TARGET) --opt $(OPT) --mode $(MODE) \
		--out build/fuzz/$(TARGET)$(if $(filter size,$(OPT)),-size)$(if $(filter-out int8,$(MODE)),-$(MODE))

clean:
	rm -rf build $(STAMP)

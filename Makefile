# deltagen: the two entry points a user needs.
#   make demo   install what is missing, build, synthesize a small checkpoint, build it to
#               ONNX and generate from it
#   make test   install what is missing, build, run the whole test suite (ctest)
#   make check  the same but the tests labelled `long` (ctest -LE long): the
#               fast lane, under a minute on 2 cores once built
# All are idempotent; with nothing changed they only re-run the job.
# Test labels (tests/test_labels.cmake): unit, golden, model, cli, webgpu, long; run one
# group with `cd build && ctest -L unit` (or -L golden, ...).
# Reliability (docs/reliability.md):
#   make test-asan  the test suite built with AddressSanitizer + UBSan (build-asan)
#   make fuzz       build the libFuzzer targets (build-fuzz, clang) and run each
#                   for FUZZ_SECONDS (default 60)

BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
DEMO_DIR ?= $(BUILD)/demo
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60

.PHONY: all setup setup-webgpu configure build demo test check clean test-asan sanitize fuzz

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: setup $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The demo runs the CLI alone: only it and its library are built.
demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target deltagen
	@bash scripts/demo.sh $(BUILD)/deltagen $(DEMO_DIR)

# The WebGPU tests need a Vulkan adapter: lavapipe where the machine has none
# (scripts/setup_webgpu.sh says what it changes). make demo does not need it.
setup-webgpu:
	@bash scripts/setup_webgpu.sh

test: build setup-webgpu
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

check: build setup-webgpu
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

$(ASAN_BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(ASAN_BUILD) -DDELTAGEN_SANITIZE=ON -DDELTAGEN_EXTRAS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

test-asan: setup setup-webgpu $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

sanitize: test-asan

fuzz: setup
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) bash fuzz/run.sh

clean:
	rm -rf $(BUILD)

# deltagen: the two entry points a user needs.
#   make demo   install what is missing, build, synthesize a small checkpoint, build it to
#               ONNX and generate from it
#   make test   install what is missing, build, run the whole test suite (ctest)
# Both are idempotent; with nothing changed they only re-run the job.

BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
DEMO_DIR ?= $(BUILD)/demo

.PHONY: all setup configure build demo test clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: setup $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)/deltagen $(DEMO_DIR)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)

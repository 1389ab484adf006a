# The two README commands: `make run` and `make test`. CMake does the work.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all bootstrap build run test debug install clean

all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release > /dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/tunelua scripts/tune_mobile_gpu.lua

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 1200

# ASan + UBSan build and suite
debug: bootstrap
	@cmake -S . -B build-debug -DCMAKE_BUILD_TYPE=Debug > /dev/null
	@cmake --build build-debug -j $(JOBS)
	cd build-debug && ctest --output-on-failure -j $(JOBS)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-debug

# Kiln's entry points. `make demo` and `make test` work on a fresh machine:
# both run the setup script first, which is a no-op when nothing is missing.
VENV   := .venv
PY     := $(abspath $(VENV)/bin/python)
BUILD  := build
JOBS   ?= 2

# Lets ccache reuse objects between clones of the repo at different paths.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true

.PHONY: all setup build test test-cpp test-python test-slow test-package test-sanitize test-sanitize-cpp sanitize-build test-sanitize-python demo bench bench-quantized bench-torch bench-tf bench-dynamic bench-generation bench-quick fuzz fuzz-build format clean
FUZZ_BUILD   := build-fuzz
FUZZ_SECONDS ?= 1800
# fuzz_onnx_import (the ONNX importer), fuzz_tf_import (the TensorFlow importer), fuzz_tf_saved_model
# (SavedModel directories) or fuzz_kiln_load (the .kiln loader).
FUZZ_TARGET  ?= fuzz_onnx_import

all: build

setup:
	@bash scripts/setup.sh

# Configures once, then rebuilds incrementally (ninja + ccache). The Python
# extension is written next to the package sources and a .pth file puts
# python/ on the virtual environment's path; .venv/bin/kiln is the driver.
build: setup
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DPython_EXECUTABLE=$(PY)
	@cmake --build $(BUILD) -j$(JOBS)
	@$(PY) scripts/link_dev_install.py $(BUILD)

test: build test-cpp test-python test-package

test-cpp:
	@ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# Real-model tests (export + compare with ONNX Runtime, ~15 min) are marked
# slow and run by `make test-slow`.
test-python:
	@$(VENV)/bin/pytest tests/python -q -m "not slow"

test-slow: build
	@$(VENV)/bin/pytest tests/python -q -m slow -rA

# The C++ tests and the fuzz corpus replay under AddressSanitizer and
# UndefinedBehaviorSanitizer, in their own build folder (only what they link),
# then test-sanitize-python. -O0 -g0: the cold build is most of CI's time and
# optimising instrumented code is most of the build (src/ops/elementwise.cpp:
# 56 CPU-s at -O1 -g1, 19 at -O0 -g0); frame pointers keep ASan's stacks
# whole, and reports name functions but not lines (for lines, run
# `make test-sanitize SANITIZE_CXXFLAGS="-O0 -g"` in your own clone).
# Warnings stay warnings there: GCC 12 reports -Wmaybe-uninitialized false
# positives inside std::variant when the sanitizers instrument it.
SANITIZE_BUILD   := build-sanitize
SANITIZE_CXXFLAGS ?= -O0 -g0
SANITIZE_OPTIONS := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test-sanitize: test-sanitize-cpp test-sanitize-python

test-sanitize-cpp: sanitize-build
	@$(SANITIZE_OPTIONS) ctest --test-dir $(SANITIZE_BUILD) --output-on-failure -j$(JOBS)

# Configured on every run (seconds) so that a changed flag reaches an old folder.
sanitize-build: setup
	@cmake -S . -B $(SANITIZE_BUILD) -G Ninja -DKILN_SANITIZE=ON -DKILN_WARNINGS_AS_ERRORS=OFF \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(SANITIZE_CXXFLAGS) -DNDEBUG" \
		-DKILN_BUILD_CLI=ON -DKILN_BUILD_PYTHON=ON -DKILN_BUILD_BENCH=OFF \
		-DKILN_PYTHON_OUTPUT_DIR=$(abspath $(SANITIZE_BUILD))/python_core -DPython_EXECUTABLE=$(PY) >/dev/null
	@cmake --build $(SANITIZE_BUILD) -j$(JOBS) --target kiln_tests kiln_fuzz_replay kiln_fuzz_tf_replay kiln_fuzz_saved_model_replay kiln_fuzz_load_replay _core kiln_driver

# Python tests against the sanitized kiln._core and kiln command: the API
# (test_api, test_argument), bad input (test_errors, test_onnx_bad_inputs) and
# threads (test_cpu_threads; concurrent runs of one program in
# test_cpu_output_buffer_reuse and test_cpu_primitive_arguments). CPython is not
# built with ASan, so its runtime is preloaded, with libstdc++ (ASan looks up
# the real __cxa_throw when it starts, and python itself does not link the C++
# library); leak checking is off (the interpreter keeps memory until exit by
# design). The package is a copy of
# python/kiln with the sanitized _core, so the development one is untouched.
SANITIZE_PY_TESTS := $(addprefix tests/python/,test_api.py test_argument.py test_errors.py \
	test_onnx_bad_inputs.py test_cpu_threads.py test_cpu_output_buffer_reuse.py test_cpu_primitive_arguments.py)
SANITIZE_PY  := $(abspath $(SANITIZE_BUILD))/python
SANITIZE_ENV := PYTHONPATH=$(SANITIZE_PY) KILN_CLI=$(abspath $(SANITIZE_BUILD))/kiln \
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test-sanitize-python: sanitize-build
	@rm -rf $(SANITIZE_PY) && mkdir -p $(SANITIZE_PY) && cp -r python/kiln $(SANITIZE_PY)/ \
		&& rm -f $(SANITIZE_PY)/kiln/_core*.so && cp $(SANITIZE_BUILD)/python_core/_core*.so $(SANITIZE_PY)/kiln/
	@$(SANITIZE_ENV) $(PY) -c "import kiln._core as c, sys; \
		sys.exit(None if c.__file__.startswith('$(SANITIZE_PY)/') else 'not the sanitized kiln._core: ' + c.__file__)"
	@$(SANITIZE_ENV) $(PY) -m pytest -q -m "not slow" -p no:cacheprovider $(SANITIZE_PY_TESTS)

# Installs the C++ package and builds examples/ against it with find_package(kiln).
test-package:
	@bash scripts/test_installed_package.sh $(BUILD)

demo: build
	@$(PY) examples/demo.py

# Four suites, each run even when one before it fails (the status is the worst):
# float32, Kiln against ONNX Runtime, OpenVINO, PyTorch eager and torch.compile
# on six real models at batch 1 and 8 (bench/results/benchmarks.{md,png,json});
# quantized, Kiln int8 / fp16 against ONNX Runtime int8, OpenVINO int8 and
# Inductor int8 on five (bench/results/quantized.{md,png,json}); torch, PyTorch
# users' paths (eager, Inductor, kiln.torch.compile, torch.compile(backend=
# "kiln") and their int8 variants) on six (bench/results/torch.{md,png,json});
# tf, Kiln on frozen Keras ResNet50 / MobileNetV2 against TensorFlow (XLA off
# and on) and OpenVINO on their SavedModels (bench/results/tf.{md,png,json}).
# BENCH_ARGS, QBENCH_ARGS, TBENCH_ARGS and TFBENCH_ARGS go to each (see
# bench/run_bench.py --help); bench-quantized, bench-torch and bench-tf run
# one alone, bench-quick a few
# minutes of the first two (build/bench/results/). Then bench-dynamic: one
# dynamic program against exact-shape programs and ONNX Runtime
# (build/bench/dynamic/dynamic.{md,json}).
bench: build
	@status=0; $(PY) bench/run_bench.py $(BENCH_ARGS) || status=$$?; \
	$(PY) bench/run_bench.py --suite quantized $(QBENCH_ARGS) || status=$$?; \
	$(PY) bench/run_bench.py --suite torch $(TBENCH_ARGS) || status=$$?; \
	$(PY) bench/run_bench.py --suite tf $(TFBENCH_ARGS) || status=$$?; \
	$(PY) bench/dynamic_shapes.py || status=$$?; exit $$status

bench-dynamic: build
	@$(PY) bench/dynamic_shapes.py

bench-quantized: build
	@$(PY) bench/run_bench.py --suite quantized $(QBENCH_ARGS)

bench-torch: build
	@$(PY) bench/run_bench.py --suite torch $(TBENCH_ARGS)

bench-tf: build
	@$(PY) bench/run_bench.py --suite tf $(TFBENCH_ARGS)

# Text generation (HF generate(): GPT-2 small and a 0.5B Llama-architecture
# model, eager PyTorch, Inductor and backend="kiln"; bench/generation.py --help).
# Not part of `make bench`: the full run (128 new tokens, 3 repeats) takes over
# an hour on 2 cores. GBENCH_ARGS go to the runner, e.g. --new-tokens 32.
bench-generation: build
	@$(PY) bench/generation.py $(GBENCH_ARGS)

QUICK_BENCH := --models resnet50,bert_base --batches 1 --runs 5 --rounds 5 --warmup 1 --time-budget 30
bench-quick: build
	@status=0; $(PY) bench/run_bench.py $(QUICK_BENCH) --sgemm-reps 0 || status=$$?; \
	$(PY) bench/run_bench.py --suite quantized $(QUICK_BENCH) || status=$$?; exit $$status

# libFuzzer on FUZZ_TARGET (clang, ASan + UBSan). New inputs that grow
# coverage go to build-fuzz/corpus-$(FUZZ_TARGET); crashes are written as
# crash-* files there (keep each, once fixed, under tests/data/ as a
# regression input that ctest replays).
fuzz-build: setup
	@bash scripts/setup.sh --fuzz
	@test -f $(FUZZ_BUILD)/build.ninja || CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja \
		-DKILN_BUILD_FUZZER=ON -DKILN_BUILD_PYTHON=OFF -DKILN_BUILD_CLI=OFF -DKILN_WARNINGS_AS_ERRORS=OFF \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=$(PY)
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) --target $(FUZZ_TARGET)

FUZZ_SEEDS_fuzz_onnx_import := ../tests/fuzz/seeds ../tests/data/onnx_bad
FUZZ_SEEDS_fuzz_tf_import := ../tests/fuzz/tf_seeds
FUZZ_SEEDS_fuzz_tf_saved_model := ../tests/fuzz/saved_model_seeds
FUZZ_SEEDS_fuzz_kiln_load := ../tests/fuzz/kiln_seeds ../tests/data/kiln_fuzz_regressions
fuzz: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/corpus-$(FUZZ_TARGET)
	@cd $(FUZZ_BUILD) && ./tests/fuzz/$(FUZZ_TARGET) corpus-$(FUZZ_TARGET) $(FUZZ_SEEDS_$(FUZZ_TARGET)) \
		-max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -malloc_limit_mb=2048 -timeout=10 -print_final_stats=1

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.hpp')

clean:
	rm -rf $(BUILD)

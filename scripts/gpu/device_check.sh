#!/usr/bin/env bash
# The GPU machine's check of the gpu target, in one command (it has CUDA,
# PyTorch and ONNX, and gets build-gpu/bundle from scripts/gpu/build_bundle.sh):
#   tests   the GPU suite (tests/gpu: kernels against ref, offload, graphs)
#   memcheck  the GPU suite's tests matching MEMCHECK_FILTER under compute-sanitizer
#           (out-of-bounds and misaligned device accesses), where the machine has it
#   nodes   the ONNX node tests, gpu against ref, beside the cpu baseline
#   models  the real models: kiln verify --target gpu, compile time, kiln perf (fp32, fp16)
#   python  kiln._core built there for its Python (build_python_ext.sh) and
#           tests/gpu/test_gpu_python.py (kiln.torch.compile on the gpu)
#   warm    Inductor compiles of the benchmark's configurations, WARM_JOBS side
#           by side, filling Inductor's caches for the bench stage
#   bench   PyTorch eager and Inductor on the same models (bench/gpu_bench.py)
# STAGES picks some ("tests nodes"), T_<STAGE> sets a stage's time limit in
# seconds, MODELS a glob of the models to unpack ("*-b1"), NODE_ONLY a file of
# node cases to run first and only; logs and JSON
# reports go to $OUT as they are made, so a run stopped early returns them.
# SKIP_UNPACK=1 reuses the binaries an earlier call unpacked (stages run side
# by side from several calls would otherwise overwrite running executables).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/kiln-out}
stages=${STAGES:-"tests nodes models bench"}
bundle=build-gpu/bundle
work=/tmp/kiln
mkdir -p "$out" "$work"
[ -n "${SKIP_UNPACK:-}" ] || tar -xJf "$bundle/kiln-gpu.tar.xz" -C "$work"
# CUDA's libraries: the toolkit's, and PyTorch's wheels (cuDNN).
cuda_dirs=$(python3 - <<'PY'
import glob, os
wanted = ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9"]
roots = glob.glob("/usr/local/cuda*/lib*") + glob.glob("/usr/local/cuda*/targets/*/lib")
roots += glob.glob("/opt/**/site-packages/nvidia/**/lib", recursive=True)
roots += glob.glob("/usr/lib/python3*/**/nvidia/**/lib", recursive=True) + ["/usr/lib/x86_64-linux-gnu"]
dirs = []
for name in wanted:
    for root in roots:
        if os.path.exists(os.path.join(root, name)):
            if root not in dirs:
                dirs.append(root)
            break
    else:
        print(f"missing {name}", file=__import__("sys").stderr)
print(":".join(dirs))
PY
)
export LD_LIBRARY_PATH="$work/lib:$cuda_dirs:${LD_LIBRARY_PATH:-}"
kiln="$work/bin/kiln"
echo "libraries: $cuda_dirs"
nvidia-smi -L
for stage in $stages; do
    echo "== $stage $(date +%T)"
    case $stage in
    tests)
        timeout ${T_TESTS:-240} "$work/bin/kiln_gpu_tests" --gtest_color=no >"$out/gpu_tests.log" 2>&1
        echo "kiln_gpu_tests exit $?"
        grep -E "^\[  (FAILED|PASSED) |^  [a-z_]+: |device:|Failure|error" "$out/gpu_tests.log" | head -80 ;;
    memcheck)
        sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
        if [ -z "$sanitizer" ]; then echo "no compute-sanitizer"; continue; fi
        timeout ${T_MEMCHECK:-240} "$sanitizer" --tool memcheck --error-exitcode 3 "$work/bin/kiln_gpu_tests" \
            --gtest_color=no --gtest_filter="${MEMCHECK_FILTER:-*}" >"$out/memcheck.log" 2>&1
        echo "memcheck exit $?"
        grep -E "^\[  (FAILED|PASSED) |ERROR SUMMARY|Invalid|Misaligned" "$out/memcheck.log" | head -40 ;;
    nodes)
        mkdir -p /tmp/kiln-node-cases && tar -xJf "$bundle/node-cases.tar.xz" -C /tmp/kiln-node-cases
        timeout ${T_NODES:-420} python3 scripts/gpu/node_suite.py --kiln "$kiln" --target gpu --baseline "$bundle/node-cpu.json" --cases /tmp/kiln-node-cases/node \
            --jobs ${NODE_JOBS:-16} --timeout 60 ${NODE_ONLY:+--only-file "$NODE_ONLY"} --out "$out/node-gpu.json" >"$out/node_suite.log" 2>&1
        echo "node_suite exit $?"
        head -60 "$out/node_suite.log" ;;
    models)
        python3 scripts/gpu/device_models.py unpack "$bundle/models" /tmp/kiln-models --match "${MODELS:-*}" >/dev/null
        timeout ${T_MODELS:-600} python3 scripts/gpu/model_check.py --kiln "$kiln" --models /tmp/kiln-models \
            --out "$out/models.json" ${MODEL_CHECK:---verify --perf --timeout 300} 2>&1 | tee "$out/models.log" ;;
    python)
        timeout ${T_PYTHON:-300} bash scripts/gpu/build_python_ext.sh >"$out/python.log" 2>&1 &&
            PYTHONPATH=python timeout ${T_PYTHON:-300} python3 -m pytest tests/gpu/test_gpu_python.py -q \
                -p no:cacheprovider >>"$out/python.log" 2>&1
        echo "python stage exit $?"
        tail -30 "$out/python.log" ;;
    warm)
        mkdir -p "$out/warm"
        for model in resnet50 bert_base gpt2_small vit_b16; do for batch in 1 32; do
            for precision in ${INDUCTOR_PRECISIONS:-fp32 fp16}; do echo "$model:$batch:$precision"; done
        done; done | xargs -P "${WARM_JOBS:-8}" -I{} timeout "${T_WARM:-300}" python3 bench/gpu_bench.py \
            --warm {} --out "$out/warm" >"$out/warm.log" 2>&1
        echo "warm exit $?"; grep -c compiled "$out/warm.log"; grep -E "compiled|Error" "$out/warm.log" | head -20 ;;
    bench)
        PYTHONPATH=python timeout ${T_BENCH:-600} python3 bench/gpu_bench.py --kiln-report "${KILN_REPORT:-$out/models.json}" \
            --out "$out/bench.json" --inductor-precisions ${INDUCTOR_PRECISIONS:-fp32 fp16} --runs ${BENCH_RUNS:-30} \
            ${WARMED:+--warm-reports "$WARMED"} 2>&1 | tee "$out/bench.log" ;;
    esac
done
echo "== done $(date +%T)"

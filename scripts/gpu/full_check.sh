#!/usr/bin/env bash
# The whole GPU check in one device call of about nine minutes (the device is
# lent 15 minutes a session, starts included), from build-gpu/bundle
# (scripts/gpu/build_bundle.sh; device tool: carry ["build-gpu/bundle"]):
#   1. unpacks the binaries;
#   2. side by side, everything that only needs to be right, not timed: the
#      GPU suite (and its newest kernels' tests under compute-sanitizer), the Python stage, the ONNX node tests (cpu-passing cases, in the order of
#      build-gpu/bundle/node-order.txt when present; skipped without the cpu
#      baseline build-gpu/bundle/node-cpu.json), `kiln verify` on the six
#      models, and Inductor's max-autotune compiles filling its caches;
#   3. alone: `kiln perf` on every model, batch 1 and 32, fp32 and fp16, with
#      the inputs and outputs on the device as Inductor's are (PERF_OPTIONS=""
#      times the host copies too), each profile kept in perf/profiles/; then,
#      where AB_VARIANTS is set, in float16 on AB_MODELS (default "*-b32") once
#      per variant, back to back (model_check.py --variants: "base:KILN_GPU_CUBLASLT=0 new"
#      is an A/B of a kernel choice), in ab/;
#   4. alone: eager, Inductor (loaded from the warmed caches) and Kiln through
#      kiln.torch.compile on the same CUDA tensors (bench/gpu_bench.py).
# Every stage writes its logs and JSON in a work folder, packed into
# $OUT/results.tgz after each phase (the device tool returns only a few files
# of $OUT), so a call cut short at its limit still returns what was done.
# T_SIDE, T_PERF, T_AB and T_BENCH bound the phases (seconds).
set -u
cd "$(dirname "$0")/../.."
out=/tmp/kiln-results
results=${OUT:-/tmp/kiln-out}
mkdir -p "$results"
pack() { tar -czf "$results/results.tgz.part" -C "$out" . && mv "$results/results.tgz.part" "$results/results.tgz"; }
check=scripts/gpu/device_check.sh
order=build-gpu/bundle/node-order.txt
[ -f $order ] || order=
side=${T_SIDE:-200}
mkdir -p "$out/py" "$out/nodes" "$out/verify" "$out/perf" "$out/ab" "$out/bench"
echo "== 1 $(date +%T)"
STAGES=" " bash $check 2>&1 | tail -3  # unpacks the binaries
echo "== 2 $(date +%T)"
SKIP_UNPACK=1 STAGES=tests T_TESTS=$side OUT=$out bash $check >"$out/tests.out" 2>&1 &
# The newest kernels' tests under compute-sanitizer (slow: a few tests only).
SKIP_UNPACK=1 STAGES=memcheck T_MEMCHECK=$side MEMCHECK_FILTER="${MEMCHECK_FILTER:-*cublaslt*:*misaligned*:*attention*:gpu_normalization_rows.*}" \
    OUT=$out bash $check >"$out/memcheck.out" 2>&1 &
SKIP_UNPACK=1 STAGES=warm INDUCTOR_PRECISIONS=fp16 WARM_JOBS=8 T_WARM=$side OUT=$out/bench \
    bash $check >"$out/warm.out" 2>&1 &
SKIP_UNPACK=1 STAGES=python T_PYTHON=$side OUT=$out/py bash $check >"$out/py.out" 2>&1 &
[ -f build-gpu/bundle/node-cpu.json ] &&
    SKIP_UNPACK=1 STAGES=nodes T_NODES=$side NODE_JOBS=4 NODE_ONLY=$order OUT=$out/nodes bash $check >"$out/nodes.out" 2>&1 &
SKIP_UNPACK=1 STAGES=models T_MODELS=$side MODELS="*-b1" MODEL_CHECK="--verify --timeout $((side - 10))" \
    OUT=$out/verify bash $check >"$out/verify.out" 2>&1 &
wait
for f in tests memcheck warm py nodes verify; do echo "=== $f"; tail -22 "$out/$f.out"; done
pack
echo "== 3 $(date +%T)"
SKIP_UNPACK=1 STAGES=models T_MODELS=${T_PERF:-90} MODELS="*" \
    MODEL_CHECK="--perf --runs 20 --timeout 40 ${PERF_OPTIONS---device-io}" OUT=$out/perf bash $check 2>&1
pack
if [ -n "${AB_VARIANTS:-}" ]; then
    echo "== 3b $(date +%T)"
    SKIP_UNPACK=1 STAGES=models T_MODELS=${T_AB:-90} MODELS="${AB_MODELS:-*-b32}" \
        MODEL_CHECK="--perf --runs 20 --timeout 40 --precisions fp16 ${PERF_OPTIONS---device-io} --variants $AB_VARIANTS" \
        OUT=$out/ab bash $check 2>&1
    pack
fi
echo "== 4 $(date +%T)"
SKIP_UNPACK=1 STAGES=bench T_BENCH=${T_BENCH:-200} BENCH_RUNS=20 INDUCTOR_PRECISIONS=fp16 \
    WARMED=$out/bench/warm KILN_REPORT=$out/perf/models.json OUT=$out/bench bash $check 2>&1
pack
echo "== done $(date +%T)"

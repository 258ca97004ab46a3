#!/usr/bin/env bash
# Builds the gpu target with CUDA (the toolkit scripts/gpu/fetch_cuda_toolkit.sh
# unpacked) and packs what the GPU machine needs, which has CUDA, PyTorch and
# ONNX but none of Kiln's other dependencies and no package registry, into
# build-gpu/bundle/ (carried to it; under 64 MiB):
#   kiln-gpu.tar.xz   bin/kiln, bin/kiln_gpu_tests, lib/libkiln.a (for the Python
#                     extension, built there by build_python_ext.sh) and the shared
#                     libraries they need that the GPU machine lacks (oneDNN, protobuf, libzip)
#   models/           the real models as skeletons (scripts/gpu/device_models.py pack)
#   node-cases.tar.xz the ONNX node tests (the GPU machine's onnx wheel lacks them)
#   node-cpu.json     the same tests on the cpu target here, the baseline
#   node-order.txt    the cases the check runs (those passing on the cpu), in order
# Then scripts/gpu/device_check.sh runs there.
set -euo pipefail
cd "$(dirname "$0")/../.."
home=${KILN_CUDA_HOME:-/work/cuda}
python=${PYTHON:-.venv/bin/python}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$PWD/$python" \
    -DKILN_GPU=ON -DCMAKE_CUDA_COMPILER="$home/nvidia/cu13/bin/nvcc" -DKILN_CUDNN_ROOT="$home/nvidia/cudnn" \
    -DKILN_BUILD_PYTHON=OFF -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_TESTS=ON >/dev/null
ninja -C build-gpu kiln_driver kiln_gpu_tests

bundle=build-gpu/bundle
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$bundle" "$stage/bin" "$stage/lib"
cp build-gpu/kiln build-gpu/tests/gpu/kiln_gpu_tests "$stage/bin/"
strip --strip-unneeded "$stage"/bin/*
cp build-gpu/libkiln.a "$stage/lib/"
strip --strip-debug "$stage/lib/libkiln.a"
# Kiln's own dependencies; CUDA's libraries are the GPU machine's.
ldd build-gpu/kiln build-gpu/tests/gpu/kiln_gpu_tests | awk '/=>/ {print $3}' | sort -u |
    grep -E 'lib(dnnl|protobuf|zip|OpenCL)\.so' | xargs -I{} cp -L {} "$stage/lib/"
tar -cJf "$bundle/kiln-gpu.tar.xz" -C "$stage" .
[ -d "$bundle/models" ] || "$python" scripts/gpu/device_models.py pack "$bundle/models"
# The ONNX node tests as files (the conformance harness writes them on first use).
cases=$("$python" -c 'import sys; sys.path.insert(0, "tests/python/onnx_conformance")
import conformance_harness; print(conformance_harness.node_cases_dir())')
tar -cJf "$bundle/node-cases.tar.xz" -C "$(dirname "$cases")" node
[ -f "$bundle/node-cpu.json" ] || "$python" scripts/gpu/node_suite.py --kiln build/kiln --target cpu \
    --cases "$cases" --jobs 2 --out "$bundle/node-cpu.json"
# The cases the gpu check runs: those that pass on the cpu (the others are
# inputs the verifier cannot feed), one per line; reorder it to run some first.
[ -f "$bundle/node-order.txt" ] || "$python" -c 'import json, sys
print("\n".join(sorted(k for k, v in json.load(open(sys.argv[1])).items() if v["status"] == "pass")))' \
    "$bundle/node-cpu.json" >"$bundle/node-order.txt"
du -sh "$bundle"

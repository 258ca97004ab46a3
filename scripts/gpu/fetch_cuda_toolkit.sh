#!/usr/bin/env bash
# Fetches what building the CUDA gpu target needs on a machine without the
# CUDA toolkit (like the development machine): nvcc, the runtime, cuBLAS, the
# CCCL headers and cuDNN, as NVIDIA's pip wheels (PyPI), unpacked into
# $KILN_CUDA_HOME (default /work/cuda) in the layout CMake's FindCUDAToolkit
# reads. The versions match the GPU machine's CUDA 13.0 and cuDNN 9; the
# binaries built with them load the GPU machine's own libraries.
#   scripts/gpu/fetch_cuda_toolkit.sh            then   scripts/gpu/build_bundle.sh
set -euo pipefail
home=${KILN_CUDA_HOME:-/work/cuda}
python=${PYTHON:-python3}
downloads=$(mktemp -d)
trap 'rm -rf "$downloads"' EXIT
"$python" -m pip download --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d "$downloads" \
    "nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-crt==13.0.*" "nvidia-nvvm==13.0.*" \
    "nvidia-cuda-cccl==13.0.*" "nvidia-cublas==13.*" "nvidia-cudnn-cu13==9.*"
mkdir -p "$home"
for wheel in "$downloads"/*.whl; do unzip -q -o "$wheel" -d "$home"; done
# FindCUDAToolkit and nvcc look for lib64/ and unversioned library names.
cd "$home/nvidia/cu13"
ln -sfn lib lib64
for lib in cudart cublas cublasLt; do ln -sf "lib$lib.so.13" "lib/lib$lib.so"; done
ln -sf libcudnn.so.9 "$home/nvidia/cudnn/lib/libcudnn.so"
echo "CUDA toolkit in $home/nvidia/cu13, cuDNN in $home/nvidia/cudnn"

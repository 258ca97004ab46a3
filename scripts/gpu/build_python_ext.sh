#!/usr/bin/env bash
# On the GPU machine (after device_check.sh unpacked the bundle to /tmp/kiln):
# builds kiln._core for its Python into python/kiln/, against the bundle's
# libkiln.a with the CUDA gpu target. Then `PYTHONPATH=python python3` imports
# kiln with get_target("gpu"). KILN_PYTHON picks the interpreter (python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${KILN_PYTHON:-python3}
prebuilt=${KILN_PREBUILT:-/tmp/kiln}
export KILN_CUDNN_DIR=${KILN_CUDNN_DIR:-$(dirname "$("$python" -c 'import glob,sys; print((glob.glob("/usr/local/cuda*/lib*/libcudnn.so*")+glob.glob(sys.prefix+"/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so*")+glob.glob("/opt/**/nvidia/cudnn/lib/libcudnn.so*", recursive=True)+glob.glob("/usr/lib/x86_64-linux-gnu/libcudnn.so*"))[0])')")}
cmake -S scripts/gpu/python_ext -B /tmp/kiln-python-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE="$(command -v "$python")" -DKILN_ROOT="$PWD" -DKILN_PREBUILT="$prebuilt" >/dev/null
ninja -C /tmp/kiln-python-build
ls python/kiln/_core*.so

#!/usr/bin/env bash
# Installs Kiln's C++ package from a build tree into a scratch prefix, then
# configures, builds and runs examples/cpp against it via find_package(kiln).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "$repo_root/${1:-build}" && pwd)"
prefix="$build/install"
example_build="$build/example-build"

cmake --install "$build" --prefix "$prefix" > /dev/null
cmake -S "$repo_root/examples/cpp" -B "$example_build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build "$example_build" > /dev/null
"$example_build/kiln_example"
echo "installed package: example built with find_package(kiln) and ran"

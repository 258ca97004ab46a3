#!/usr/bin/env bash
# Installs everything Kiln needs on a fresh Debian machine: system packages via
# apt-get and Python packages into .venv at the repo root. Safe to re-run: each
# step is skipped when what it installs is already there.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

debian_packages=(
  build-essential cmake ninja-build ccache pkg-config
  libdnnl-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev zlib1g-dev libzip-dev
  ocl-icd-opencl-dev opencl-c-headers clang-format
)

# `setup.sh --fuzz` adds clang and its libFuzzer runtime for `make fuzz`.
if [ "${1:-}" = "--fuzz" ]; then
  debian_packages+=(clang libclang-rt-14-dev libomp-14-dev)
fi

missing=()
for pkg in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

python_bin="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python_bin" -m venv .venv
fi

# The requirements file is the single list of Python dependencies; the stamp
# records which version of it was installed so re-runs cost nothing.
stamp=.venv/.kiln-requirements.sha
want="$(sha256sum requirements-dev.txt | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements-dev.txt
  echo "$want" > "$stamp"
fi

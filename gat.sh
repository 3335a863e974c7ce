#!/usr/bin/env bash
# The project's two commands (and the steps behind them).
#
#   ./gat.sh train [gat_train flags]   install what is missing, build, train GAT on Cora
#   ./gat.sh test                      install what is missing, build, run every test (ctest)
#
#   ./gat.sh deps | build | sanitize   the single steps (sanitize: ASan+UBSan CPU build and tests)
#   ./gat.sh docs                      the API reference (Doxygen): BUILD_DIR/docs/html/index.html
#   ./gat.sh format [--fix]            check (or apply) .clang-format on every C++ and CUDA file
#   ./gat.sh torch                     the PyTorch package: torch from PyPI in a venv, the build
#                                      with its operators, its tests (tests/python)
#
# Environment: BUILD_DIR (default build), GAT_CUDA (AUTO|ON|OFF; default AUTO where a GPU is
# visible, else OFF),
# GAT_CUDA_ARCH (default 90), GAT_WERROR (ON: warnings are errors, as in CI; default OFF),
# JOBS (default: all cores), GAT_DATA_DIR (the Planetoid files;
# default ../shared/datasets/planetoid where that folder exists, else gat_train's own default),
# GAT_TORCH_VENV (torch's venv, default ${XDG_CACHE_HOME:-~/.cache}/gat/torch-venv).
set -euo pipefail
cd "$(dirname "$0")"

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
PACKAGES=(cmake ninja-build g++ pkg-config zlib1g-dev libeigen3-dev googletest libgtest-dev
          libbenchmark-dev libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev libssl-dev
          ca-certificates python3 python3-matplotlib)

deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "gat.sh: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

# A venv with the torch (and PyG, the tests' reference) the PyTorch package is built against,
# made once and reused. PyPI's Linux torch is a CUDA build of about 4.7 GB installed.
TORCH_PINS=(torch==2.11.0 torch_geometric==2.8.0 pytest numpy)
torch_venv() {
  local venv=${GAT_TORCH_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/gat/torch-venv}
  if ! "$venv/bin/python" -c "import torch, torch_geometric, pytest" 2>/dev/null; then
    echo "gat.sh: installing ${TORCH_PINS[*]} into $venv (PyPI)" >&2
    python3 -m venv "$venv" >&2 || { PACKAGES=(python3-venv); deps >&2; python3 -m venv "$venv" >&2; }
    "$venv/bin/pip" install -q --disable-pip-version-check "${TORCH_PINS[@]}" >&2
  fi
  echo "$venv/bin/python"
}

configure() {  # configure DIR [cmake options...]
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGAT_CUDA="$GAT_CUDA" \
    -DGAT_CUDA_ARCH="${GAT_CUDA_ARCH:-90}" -DGAT_WERROR="${GAT_WERROR:-OFF}" "$@" >/dev/null
}

build() {  # build DIR [cmake options...]
  configure "$@"
  cmake --build "$1" -j "$JOBS"
}

# A checkout beside a shared/ folder of datasets reads the Planetoid files from there (train and
# the tests); elsewhere gat_train uses its per-user cache and downloads what is missing.
if [ -z "${GAT_DATA_DIR:-}" ] && [ -d ../shared/datasets/planetoid ]; then
  GAT_DATA_DIR=$(cd ../shared/datasets/planetoid && pwd)
  export GAT_DATA_DIR
fi

# Without a GPU the CUDA tests can only skip, so by default the CUDA code is compiled only where a
# GPU is visible (CMake's AUTO: where nvcc is found too). GAT_CUDA=AUTO or ON compiles it anyway
# (CI does, as a compile check).
if [ -z "${GAT_CUDA:-}" ]; then
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then GAT_CUDA=AUTO; else GAT_CUDA=OFF; fi
fi

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  deps) deps ;;
  build) deps; build "$BUILD_DIR" ;;
  train)
    deps; build "$BUILD_DIR"
    if [ $# -eq 0 ]; then set -- --dataset cora; fi
    "$BUILD_DIR/gat_train" "$@" ;;
  test)
    deps; build "$BUILD_DIR"
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" ;;
  torch)
    deps; python=$(torch_venv)
    build "$BUILD_DIR" -DGAT_TORCH=ON -DGAT_TORCH_PYTHON="$python"
    ctest --test-dir "$BUILD_DIR" --output-on-failure -L torch ;;
  format)  # every C++ and CUDA file as .clang-format writes it; --fix rewrites those that differ
    PACKAGES=(clang-format); deps
    if [ "${1:-}" = --fix ]; then
      git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i
    else
      git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format --dry-run --Werror
    fi ;;
  docs)
    PACKAGES+=(doxygen); deps; configure "$BUILD_DIR"
    cmake --build "$BUILD_DIR" --target gat_docs ;;
  sanitize)
    deps; GAT_CUDA=OFF build "${BUILD_DIR}-sanitize" -DGAT_SANITIZE=address,undefined -DGAT_BENCH=OFF
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      ctest --test-dir "${BUILD_DIR}-sanitize" --output-on-failure -j "$JOBS" ;;
  *)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$cmd" ] || [ "$cmd" = help ] || exit 2 ;;
esac

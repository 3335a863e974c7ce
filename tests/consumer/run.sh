#!/usr/bin/env bash
# Builds and runs the consumer project in this folder against gat as a user would (a CTest entry,
# tests/CMakeLists.txt):
#   run.sh package      BUILD_DIR WORK_DIR GENERATOR CXX   install BUILD_DIR to WORK_DIR/prefix, then
#                                                          find_package(gat) from there
#   run.sh subdirectory SOURCE_DIR WORK_DIR GENERATOR CXX  add_subdirectory(SOURCE_DIR), GAT_CUDA=OFF
#                                                          only (package mode covers the CUDA build;
#                                                          this one then takes 1 minute, not 5), and
#                                                          unoptimised (-O0, no -g) as a unity
#                                                          build (below)
# In package mode the examples (examples/*/, each its own project) are built against the same
# prefix too, and run for 3 epochs on Cora where the Planetoid files are ($GAT_DATA_DIR, else the
# repository's ../shared/datasets/planetoid).
set -euo pipefail
mode=$1 from=$2 work=$3 generator=$4 cxx=$5
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
args=(-S "$here" -B "$work/build" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release)
case "$mode" in
  package)
    cmake --install "$from" --prefix "$work/prefix" >"$work/install.log"
    args+=(-DCMAKE_PREFIX_PATH="$work/prefix") ;;
  subdirectory)
    # This mode checks that add_subdirectory configures, builds and links gat::gat, and that the
    # program runs; it compiles the whole library again, which at -O3 was most of a 2-core
    # `./gat.sh test` (121 s). Unoptimised it takes a fraction of that, and as a unity build
    # (CMake's batches of 8 library files; the consumer's own files apart) less again, 40 CPU-s
    # against 67, the headers parsed once a batch. So two library files of one target may not
    # define the same name in an anonymous namespace: this build fails where they do. Package mode
    # compiles every installed header with -Wall -Wextra -Werror at Release, and runs the same
    # program.
    args+=(-DGAT_CONSUMER_MODE=subdirectory -DGAT_SOURCE_DIR="$from" -DGAT_CUDA=OFF
           -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_UNITY_BUILD=ON) ;;
  *) echo "run.sh: unknown mode '$mode' (package or subdirectory)" >&2; exit 2 ;;
esac
cmake "${args[@]}" >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j "${JOBS:-2}" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
"$work/build/test_graph"

if [ "$mode" = package ]; then
  examples=$(cd "$here/../../examples" && pwd)
  data=${GAT_DATA_DIR:-$(cd "$examples/.." && pwd)/../shared/datasets/planetoid}
  for dir in "$examples"/*/; do
    name=$(basename "$dir")
    cmake -S "$dir" -B "$work/$name" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/$name.configure.log" || { cat "$work/$name.configure.log"; exit 1; }
    cmake --build "$work/$name" -j "${JOBS:-2}" >"$work/$name.build.log" 2>&1 || { tail -40 "$work/$name.build.log"; exit 1; }
    if [ -f "$data/ind.cora.x" ]; then
      (cd "$work" && "$work/$name/$name" "$data" --epochs 3)
      # A malformed count is refused with the usage status, before any work: atoll read "1x" as 1
      # and "abc" as 0 epochs, and 1e20 as 9.2e18 (hours of training).
      for bad in 1x 99999999999999999999; do
        status=0
        (cd "$work" && "$work/$name/$name" "$data" --epochs "$bad" >/dev/null 2>&1) || status=$?
        [ "$status" = 2 ] || { echo "run.sh: $name --epochs $bad exited $status, not 2" >&2; exit 1; }
      done
      if [ "$name" = train_gat ]; then
        # --out is checked before training and kept out of the data folder: --out DATA/ind.cora.x
        # replaced the Planetoid file with the model (as root even in a read-only folder). On a copy.
        mkdir -p "$work/cora" && cp "$data"/ind.cora.* "$work/cora/"
        for out in "$work/cora/ind.cora.x" /dev/full; do
          status=0
          (cd "$work" && "$work/$name/$name" "$work/cora" --epochs 3 --out "$out" >"$work/out.txt" 2>&1) || status=$?
          if [ "$status" = 0 ] || grep -q "best epoch" "$work/out.txt" || ! cmp -s "$data/ind.cora.x" "$work/cora/ind.cora.x"; then
            echo "run.sh: train_gat --out $out exited $status (trained or wrote):" >&2; cat "$work/out.txt" >&2; exit 1
          fi
        done
      fi
    else
      echo "run.sh: example $name built; not run (no Planetoid files in $data)"
    fi
  done
fi

#!/usr/bin/env bash
# Prepares what bench/gpu_check.sh needs on a GPU machine that has CUDA, cmake and Python but not
# this project's other build dependencies: a CMake prefix in .devdeps/ (CLI11, nlohmann-json,
# zlib, Eigen, GoogleTest, Google Benchmark, copied from this Debian machine's packages) and the
# Planetoid files in devdata/. Both folders are ignored by git (.gitignore); copy them with the
# working tree to the GPU machine. Run from the repository root after `./gat.sh deps`.
set -euo pipefail
cd "$(dirname "$0")/.."
lib=/usr/lib/x86_64-linux-gnu
rm -rf .devdeps devdata
mkdir -p .devdeps/include .devdeps/share/cmake .devdeps/lib/x86_64-linux-gnu/cmake devdata
cp -r /usr/include/{CLI,nlohmann,eigen3,gtest,gmock,benchmark,zlib.h,zconf.h} .devdeps/include/
cp -r /usr/share/cmake/{CLI11,nlohmann_json} .devdeps/share/cmake/
cp -r /usr/share/eigen3 .devdeps/share/
cp /usr/lib/x86_64-linux-gnu/libz.a .devdeps/lib/
cp -a $lib/libgtest*.a $lib/libgmock*.a $lib/libbenchmark* .devdeps/lib/x86_64-linux-gnu/
cp -r $lib/cmake/{GTest,benchmark} .devdeps/lib/x86_64-linux-gnu/cmake/
cp "${GAT_DATA_DIR:-../shared/datasets/planetoid}"/ind.* devdata/
du -sh .devdeps devdata

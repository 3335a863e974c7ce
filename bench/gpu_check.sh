#!/usr/bin/env bash
# The whole GPU verification in one call, for a machine with a CUDA GPU (run from the repo root):
#
#   bench/gpu_check.sh [build] [test] [sanitize] [kernels] [accuracy] [bench]   (default: all)
#
# build     configure with GAT_CUDA=ON (sm_90 unless GAT_CUDA_ARCH says otherwise) and build
# test      every test (CPU and CUDA) with ctest
# sanitize  compute-sanitizer memcheck and racecheck over the CUDA tests
# kernels   bench_graph_ops (Google Benchmark) on the GPU
# accuracy  gat_train, 10 seeds on Cora and CiteSeer on the GPU
# bench     bench/compare_pyg.py: PyG and this project side by side on the GPU
# cpubench  the same on two CPU cores (not in the default list)
#
# Logs and results go to $OUT (default /tmp/gat_out). Dependencies that the machine lacks come as
# a prefix in .devdeps and the Planetoid files in devdata/: scripts/make_devdeps.sh makes both.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gat_out}
B=${BUILD_DIR:-/tmp/gat_build}
mkdir -p "$OUT"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(build test sanitize kernels accuracy bench)
want() { [[ " ${stages[*]} " == *" $1 "* ]]; }
status=0
step() { echo; echo "=== $* ($(date +%T))"; }

# The commit the results belong to (the device's copy of the tree may carry a stale .git: pass
# GAT_COMMIT from the machine that made the copy).
export GAT_COMMIT=${GAT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}

DATA=${GAT_DATA_DIR:-$PWD/devdata}
[ -d "$DATA" ] || DATA=$PWD/../shared/datasets/planetoid
export GAT_DATA_DIR=$DATA

if want build; then
  step build
  extra=()
  if [ -d .devdeps ]; then
    extra+=(-DCMAKE_PREFIX_PATH="$PWD/.devdeps" -DZLIB_INCLUDE_DIR="$PWD/.devdeps/include"
            -DZLIB_LIBRARY="$PWD/.devdeps/lib/libz.a")
  fi
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGAT_CUDA=ON \
    -DGAT_CUDA_ARCH="${GAT_CUDA_ARCH:-90}" "${extra[@]}" >"$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; exit 1; }
  # -k 0: a target that fails to compile does not stop the others (their tests still run).
  cmake --build "$B" -j "$(nproc)" -- -k 0 >"$OUT/build.log" 2>&1 || { status=1; grep -E "error|FAILED" "$OUT/build.log" | head -30; }
  grep -E "warning" "$OUT/build.log" | head -20
  [ -d .devdeps ] && export LD_LIBRARY_PATH="$PWD/.devdeps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader
fi

if want test; then
  step ctest
  # CTEST_ARGS="-L cuda" runs the CUDA tests alone (the CPU suite is CI's).
  ctest --test-dir "$B" --output-on-failure -j 4 ${CTEST_ARGS:-} >"$OUT/ctest.log" 2>&1 || status=1
  grep -E "tests passed|Failed|\*\*\*|Passed|Skipped" "$OUT/ctest.log" | tail -40
  grep -B2 -A25 -E "^\[  FAILED  \]|Failure$" "$OUT/ctest.log" | head -120
fi

if want sanitize; then
  # One process per test and tool, SANITIZE_JOBS at a time: under racecheck a 400-epoch training
  # test alone takes minutes, and one process per program could not finish within a device
  # command's limit. Programs: those ctest labels "cuda". A test that makes no CUDA call ends
  # with "terminated before first instrumented API call" and counts as clean; one cut by
  # SANITIZE_TIMEOUT is listed as not finished (and fails the stage). SANITIZE_FILTER (an extended
  # regular expression over "tool program test") takes a slice, for a device command's time limit;
  # SANITIZE_UNTIL (seconds since the epoch) cuts each run to end by then ("not-started" after).
  #
  # The sanitizer asks whether kernels touch memory correctly, not whether gradients are right: a
  # finite-difference check perturbs GAT_GRADCHECK_SAMPLE elements per input (tests/gradcheck.h)
  # instead of every one, whose forwards only repeat launches already checked (one test made
  # 208,652 launches). racecheck checks the project's kernels (namespace gat: compute-sanitizer
  # 2025.3 matches the mangled name, _ZN3gat..., and gat:: covers a tool that demangles) and lets
  # cuBLAS's run unchecked: it follows a GEMM's shared memory access by access, and
  # test_cuda_runtime's 4096 x 4096 f64 product (0.4 s natively) did not finish in 9 minutes.
  # memcheck checks all.
  SANITIZER=${SANITIZER:-compute-sanitizer}
  export SANITIZER SAN_OUT="$OUT/sanitize" SAN_TIMEOUT=${SANITIZE_TIMEOUT:-540}
  export GAT_GRADCHECK_SAMPLE=${GAT_GRADCHECK_SAMPLE:-4} RACECHECK_KERNELS=${RACECHECK_KERNELS:-regex=gat::|N3gat}
  mkdir -p "$SAN_OUT"
  programs=$(ctest --test-dir "$B" -N -L cuda | sed -n 's/^ *Test *#[0-9]*: //p')
  [ -n "$programs" ] || { echo "sanitize: ctest lists no test labelled cuda in $B (not built?)"; status=1; }
  : >"$SAN_OUT/all_runs.txt"
  for p in $programs; do  # a program that cannot list its tests would otherwise leave a silent hole
    tests=$("$B/tests/$p" --gtest_list_tests) || { echo "sanitize: $B/tests/$p cannot list its tests"; status=1; continue; }
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
      awk -v t="$tool" -v p="$B/tests/$p" '/^[^ ]/ {suite = $1} /^  / {print t, p, suite $1}' <<<"$tests"
    done >>"$SAN_OUT/all_runs.txt"
  done
  grep -E -- "${SANITIZE_FILTER:-.}" "$SAN_OUT/all_runs.txt" >"$SAN_OUT/runs.txt"  # e.g. SANITIZE_FILTER='racecheck .*Finite'
  step "compute-sanitizer: $(wc -l <"$SAN_OUT/runs.txt") runs, ${SANITIZE_JOBS:-$(nproc)} at a time"
  sanitize_one() {  # tool program test -> one line: verdict tool test seconds
    local log="$SAN_OUT/$1-${3//\//_}.log" start=$SECONDS
    local only=() limit=$SAN_TIMEOUT
    # With a kernel filter, racecheck fails ("Internal Sanitizer Error: The Sanitizer failed to
    # handle a hardware exception") when a cuBLAS bf16 GEMM it leaves unchecked runs: torch's own
    # bf16 matmul does the same under a filter that matches nothing (H100, 2026-12-07). So
    # test_precision, whose GEMMs are small, is racechecked whole.
    [ "$1" = racecheck ] && [[ "$2" != */test_precision ]] && only=(--kernel-name "$RACECHECK_KERNELS")
    if [ -n "${SANITIZE_UNTIL:-}" ]; then  # a wall clock to end by (a device command's limit)
      local left=$((SANITIZE_UNTIL - $(date +%s)))
      [ "$left" -lt "$limit" ] && limit=$left
      [ "$limit" -gt 0 ] || { echo "not-started $1 $3 0s"; return; }
    fi
    timeout "$limit" "$SANITIZER" --tool "$1" "${only[@]}" --error-exitcode 9 "$2" --gtest_filter="$3" >"$log" 2>&1
    local rc=$? verdict=clean
    # memcheck reports the failed allocation of a test of the out-of-memory path as an API error:
    # a run whose every error is one of those (and whose test passed) is clean.
    local errors oom
    errors=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log")
    oom=$(grep -c "^========= Program hit cudaErrorMemoryAllocation" "$log")
    [ $rc -eq 9 ] && [ "${errors:-0}" -gt 0 ] && [ "$errors" -eq "$oom" ] && rc=0
    if [ $rc -eq 124 ]; then verdict="not-finished"
    elif [ $rc -ne 0 ] && ! grep -q "terminated before first instrumented API call" "$log"; then verdict="FAILED(rc=$rc)"
    elif grep -q "^\[  SKIPPED \] 1 test" "$log"; then verdict="skipped"  # no device: nothing checked
    elif ! grep -q "^\[  PASSED  \] 1 test" "$log"; then verdict="FAILED(no-pass)"
    fi
    echo "$verdict $1 $3 $((SECONDS - start))s"
  }
  export -f sanitize_one
  xargs -r -P "${SANITIZE_JOBS:-$(nproc)}" -L 1 bash -c 'sanitize_one "$@"' _ <"$SAN_OUT/runs.txt" | sort >"$SAN_OUT/summary.txt"
  awk '{n[$1]++} END {for (v in n) print v, n[v]}' "$SAN_OUT/summary.txt"
  grep -v "^clean " "$SAN_OUT/summary.txt" && status=1
fi

if want kernels; then
  step "bench_graph_ops (Google Benchmark)"
  [ -d .devdeps ] && export LD_LIBRARY_PATH="$PWD/.devdeps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  "$B/bench/bench_graph_ops" --benchmark_filter="${KERNEL_FILTER:-cuda}" --benchmark_out="$OUT/bench_graph_ops.json" \
    --benchmark_out_format=json 2>&1 | tee "$OUT/bench_graph_ops.log" | tail -30
fi

if want accuracy; then
  for ds in cora citeseer; do
    step "accuracy $ds (10 seeds, cuda)"
    "$B/gat_train" --dataset "$ds" --data-dir "$DATA" --device cuda --runs 10 --json --quiet \
      >"$OUT/accuracy-$ds.log" 2>&1 || status=1
    tail -1 "$OUT/accuracy-$ds.log"
  done
fi

if want bench; then
  step "compare with PyG"
  PYTHONUNBUFFERED=1 \
    python3 bench/compare_pyg.py --build "$B" --data-dir "$DATA" --out "$OUT" 2>&1 | tee "$OUT/compare.log" | tail -40
fi
if want cpubench; then
  step "compare with PyG on two CPU cores (taskset -c 0,1)"
  PYTHONUNBUFFERED=1 python3 bench/compare_pyg.py --only cpu --build "$B" --data-dir "$DATA" --out "$OUT" 2>&1 \
    | tee "$OUT/compare_cpu.log" | tail -12
fi
exit $status

// CPU loop helpers shared by the op implementations (included by framework/ops/*.cpp only).
#pragma once

#include <omp.h>

#include <cstdint>

#include "gat/framework/tensor.h"

namespace gat::ops::detail {

// Marks a CPU loop kernel to be compiled for AVX-512 and AVX2 besides baseline x86-64, the
// version taken when the program loads (GCC function multiversioning: wider vectors for the
// same loop). The library is built with -ffp-contract=off, so no version fuses a multiply and
// an add: every version gives the same bits. Put it on a function called per row or per chunk
// (an ifunc call), not per element; lambdas inlined into it are compiled with its target.
// (g++ only: clang 14 refuses target_clones on templates.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GAT_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GAT_SIMD_CLONES
#endif

// Below this many elementary steps a loop runs on the calling thread: forking costs more than it
// saves.
constexpr int64_t kParallelThreshold = 32768;

// f(i) for i in [begin, end): the loop that each thread of parallel_for runs, with f inlined
// into every SIMD version. f comes by value: the loop then reads its captures from registers,
// not from an object that a store through an output pointer might change, which would stop
// the loop from vectorising.
template <class F>
GAT_SIMD_CLONES void for_range(int64_t begin, int64_t end, F f) {
  for (int64_t i = begin; i < end; ++i) f(i);
}

// f(i) for i in [0, n), split into one contiguous range per OpenMP thread where n *
// cost_per_item (about the elementary steps of the whole loop) is large enough. Each i is
// handled by exactly one thread, so results do not depend on the thread count.
template <class F>
void parallel_for(int64_t n, F&& f, int64_t cost_per_item = 1) {
  if (n * cost_per_item <= kParallelThreshold) return for_range(0, n, f);
#pragma omp parallel
  {
    const int64_t thread = omp_get_thread_num(), threads = omp_get_num_threads();
    for_range(n * thread / threads, n * (thread + 1) / threads, f);
  }
}

// Asks the cache for row[0, extent) ahead of its use: loops over rows at random places call it for
// the rows they read next. Such a row was often last written by another thread and sits in another
// core's cache; asked for early, the rows arrive together while the current work is computed,
// rather than one after another as they are read. Changes no value.
template <class T>
inline void prefetch_row(const T* row, int64_t extent) {
  for (int64_t c = 0; c < extent; c += static_cast<int64_t>(64 / sizeof(T))) __builtin_prefetch(row + c);
}

// The first row of thread t's range, t in [0, threads], when the rows [0, R) of a CSR (row_ptr
// (R+1,)) are cut into one contiguous range per thread of about equal cost, row r costing row_cost
// + entry_cost times its entries: the first row whose rows before cost at least t / threads of the
// total, rounded down to a multiple of `align` (R for t = threads). Rounded, a range holds whole
// blocks of `align` rows.
template <class Offset>
int64_t first_row_of_thread(const Offset* row_ptr, int64_t R, int64_t row_cost, int64_t entry_cost, int64_t t,
                            int64_t threads, int64_t align = 1) {
  if (t >= threads) return R;
  auto cost_before = [&](int64_t r) {  // monotone in r
    return r * row_cost + static_cast<int64_t>(row_ptr[r] - row_ptr[0]) * entry_cost;
  };
  const int64_t total = cost_before(R), share = total / threads * t + total % threads * t / threads;
  int64_t lo = 0, hi = R;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (cost_before(mid) < share)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo / align * align;
}

// f(r) for the rows r in [0, R) of a CSR (row_ptr (R+1,)), one range of first_row_of_thread's
// split per OpenMP thread. Rows of very different lengths (the transpose of bag-of-words features:
// a common word has thousands of entries) split evenly by count left one thread most of the work.
// Each r is handled by exactly one thread, so results do not depend on the thread count.
template <class Offset, class F>
void parallel_for_rows(const Offset* row_ptr, int64_t R, int64_t row_cost, int64_t entry_cost, F&& f) {
  const int64_t total = R * row_cost + static_cast<int64_t>(row_ptr[R] - row_ptr[0]) * entry_cost;
  if (total <= kParallelThreshold) return for_range(0, R, f);
#pragma omp parallel
  {
    const int64_t thread = omp_get_thread_num(), threads = omp_get_num_threads();
    for_range(first_row_of_thread(row_ptr, R, row_cost, entry_cost, thread, threads),
              first_row_of_thread(row_ptr, R, row_cost, entry_cost, thread + 1, threads), f);
  }
}

// Elementwise maps over f32/f64 CPU tensors viewed flat (n,), into `out` (allocated by the caller,
// a's shape and dtype): out[i] = f(a[i]), or f(a[i], b[i]) for b of a's shape and dtype. f is
// generic in the scalar type.
template <class F>
void cpu_map(const Tensor& a, Tensor& out, F f) {
  dispatch_float(a.dtype(), "cpu_map", [&](auto zero) {
    using T = decltype(zero);
    const T* pa = a.data<T>();  // (n,)
    T* po = out.data<T>();      // (n,)
    parallel_for(out.numel(), [&, f](int64_t i) { po[i] = f(pa[i]); });
  });
}

template <class F>
void cpu_map(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  dispatch_float(a.dtype(), "cpu_map", [&](auto zero) {
    using T = decltype(zero);
    const T* pa = a.data<T>();  // (n,)
    const T* pb = b.data<T>();  // (n,)
    T* po = out.data<T>();      // (n,)
    parallel_for(out.numel(), [&, f](int64_t i) { po[i] = f(pa[i], pb[i]); });
  });
}

}  // namespace gat::ops::detail

namespace gat::ops::detail {

// out[c] = sum over r of a[r, c] for a (rows, cols): each column added in double, in row order
// (one thread per column), so the result does not depend on the thread count.
template <class T>
void column_sums(const T* a, int64_t rows, int64_t cols, T* out) {
  parallel_for(
      cols,
      [=](int64_t c) {
        double acc = 0.0;
        for (int64_t r = 0; r < rows; ++r) acc += static_cast<double>(a[r * cols + c]);
        out[c] = static_cast<T>(acc);
      },
      rows);
}

}  // namespace gat::ops::detail

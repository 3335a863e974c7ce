// CUDA launch helper shared by the op kernels (included by framework/ops/*.cu only).
//
//   struct Relu { const float* inp; float* out; __device__ void operator()(long long i) const {...} };
//   detail::launch_for_each("relu", n, Relu{...});
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "gat/framework/cuda_check.h"

namespace gat::ops::detail {

// VEC consecutive values of T, loaded or stored by one access (16 bytes at most per instruction;
// a 32-byte Vec<double, 4> takes two).
template <class T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

template <class T, int VEC>
__device__ __forceinline__ Vec<T, VEC> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, VEC>*>(p);
}
template <class T, int VEC>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, VEC>& x) {
  *reinterpret_cast<Vec<T, VEC>*>(p) = x;
}

// Column sums of a (rows, cols) array of partial sums, each added in row order into an Acc:
//   out_y[c] = partial[y slice + 0 cols + c] + partial[y slice + 1 cols + c] + ...
// for y = blockIdx.y (out0, or out1 for y = 1: two arrays `slice` apart in one launch). A block
// per column: its threads load kTile terms at a time into shared memory (one memory latency a
// tile), then its first thread adds them in order, so the bits are those of one thread adding
// the column alone. A thread per column that issued 16 loads before their adds still waited a
// latency every 16 terms: the bias gradient's 2,112 chunk sums over 8 outputs took 0.14 ms, and
// head_dot's d a over 4,096 block partials 0.19 ms, in the 100M-edge step.
template <class Acc, class S, class T>
__global__ void __launch_bounds__(256)
    ordered_column_sums_kernel(const S* __restrict__ partial,  // (1 or 2, rows, cols), `slice` apart
                               long long rows, long long cols, long long slice,
                               T* __restrict__ out0,    // (cols,)
                               T* __restrict__ out1) {  // (cols,) or null
  constexpr int kTile = 1024;
  __shared__ Acc tile[kTile];
  const S* p = partial + blockIdx.y * slice;
  T* out = blockIdx.y == 0 ? out0 : out1;
  for (long long c = blockIdx.x; c < cols; c += gridDim.x) {
    Acc sum = 0;
    for (long long r0 = 0; r0 < rows; r0 += kTile) {
      const int n = static_cast<int>(rows - r0 < kTile ? rows - r0 : kTile);
      for (int t = threadIdx.x; t < n; t += blockDim.x) tile[t] = p[(r0 + t) * cols + c];
      __syncthreads();
      if (threadIdx.x == 0)
        for (int t = 0; t < n; ++t) sum += tile[t];
      __syncthreads();  // the tile is read before the next one overwrites it
    }
    if (threadIdx.x == 0) out[c] = static_cast<T>(sum);
  }
}

// Launches ordered_column_sums_kernel over `slices` (1 or 2) arrays of partials, with as many
// threads a block as a tile's loads need (a warp for a few rows: sum_axis over many outputs has
// few chunks, and 256 threads a column would be mostly idle).
template <class Acc, class S, class T>
void ordered_column_sums(const char* name, const S* partial, long long rows, long long cols, int slices,
                         T* out0, T* out1 = nullptr) {
  if (cols == 0) return;
  const dim3 grid(static_cast<unsigned>(cols < cuda::kMaxGridBlocks ? cols : cuda::kMaxGridBlocks),
                  static_cast<unsigned>(slices));
  const unsigned threads = static_cast<unsigned>(rows >= 256 ? 256 : (rows + 31) / 32 * 32);
  ordered_column_sums_kernel<Acc, S, T>
      <<<grid, threads, 0, cuda::stream()>>>(partial, rows, cols, rows * cols, out0, out1);
  CUDA_CHECK_LAUNCH(name);
}

// Whether every pointer is a multiple of `bytes`.
inline bool all_aligned(std::size_t bytes, std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % bytes != 0) return false;
  return true;
}

// Grid-stride loop: f(i) for i in [0, n), one thread per i at a time. The index type I is 32-bit
// when n allows: a functor whose operator() takes its index as a template parameter then divides
// in 32 bits (a 64-bit division or modulo per element is a long software routine: it held
// broadcasts such as add_bias to half the memory bandwidth).
template <class I, class F>
__global__ void for_each_kernel(I n, F f) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<I>(gridDim.x) * blockDim.x)
    f(i);
}

// Launches for_each_kernel on gat::cuda::stream() and checks the launch; `name` names the op
// in the error. Nothing is launched for n == 0.
template <class F>
void launch_for_each(const char* name, long long n, const F& f) {
  if (n == 0) return;
  if (n < (1LL << 31))  // (i + the grid's stride stays below 2^32)
    for_each_kernel<uint32_t><<<cuda::blocks_for(n), 256, 0, cuda::stream()>>>(static_cast<uint32_t>(n), f);
  else
    for_each_kernel<long long><<<cuda::blocks_for(n), 256, 0, cuda::stream()>>>(n, f);
  CUDA_CHECK_LAUNCH(name);
}

}  // namespace gat::ops::detail

namespace gat::ops::detail {

// a * b rounded on its own. nvcc contracts a * b + c into one fused multiply-add (one rounding)
// where the CPU build (-ffp-contract=off) rounds twice; kernels whose sums can cancel (the
// normalisations) use this so that they give the CPU's values, not ones that differ where terms
// nearly cancel.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

}  // namespace gat::ops::detail

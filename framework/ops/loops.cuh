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

// p[0] + p[stride] + ... + p[(count - 1) stride], added in that order into an Acc, the loads of
// 16 terms issued before their adds: a thread that summed one load at a time waited a memory
// latency per term (the second pass of a bias gradient over 2,112 chunk sums took 0.19 ms for 8
// outputs; head_dot's d a over 4,096 block partials of 1M rows 0.44 ms).
template <class Acc, class S>
__device__ __forceinline__ Acc ordered_strided_sum(const S* p, long long count, long long stride) {
  constexpr int kBatch = 16;
  Acc sum = 0;
  long long c = 0;
  for (; c + kBatch <= count; c += kBatch) {
    S batch[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) batch[u] = p[(c + u) * stride];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) sum += batch[u];
  }
  for (; c < count; ++c) sum += p[c * stride];
  return sum;
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

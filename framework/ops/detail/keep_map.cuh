// The dense elementwise ops that drop out (dropout, ELU + dropout): out[i] = fn(in_0[i], ...,
// keep_i), element i kept by bit i % 4 of the Philox block i / 4 (DropoutKey::keep4, the CPU's
// decisions), every element kept under an inactive key. Included by framework/ops/*.cu only.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/rng.h"

namespace gat::ops::detail {

// A thread per block of 4 elements: one Philox draw, then 4-element vector loads and stores when
// kVector (every pointer aligned to 4 elements) and the block is whole, one element at a time
// otherwise (the tail). Scalar accesses 16 bytes apart held the (5M, 64) dropouts of the
// 100M-edge step to 1.7 TB/s.
template <class T, int kInputs, bool kVector, class Fn>
struct KeepMap {
  long long n;
  DropoutKey key;
  Fn fn;
  const T* in[kInputs];
  T* out;
  __device__ __forceinline__ static unsigned keep_bit(unsigned kept, int k) { return (kept >> k) & 1u; }
  __device__ __forceinline__ T element(const T (&x)[kInputs], unsigned keep) const {
    if constexpr (kInputs == 1)
      return fn(x[0], keep);
    else
      return fn(x[0], x[1], keep);
  }
  template <class I>
  __device__ void operator()(I block) const {
    const unsigned kept = key.active() ? key.keep4(static_cast<uint64_t>(block)) : 0xFu;
    const long long first = 4 * static_cast<long long>(block);
    if (kVector && first + 4 <= n) {
      Vec<T, 4> v[kInputs], y;
#pragma unroll
      for (int a = 0; a < kInputs; ++a) v[a] = load_vec<T, 4>(in[a] + first);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        T x[kInputs];
#pragma unroll
        for (int a = 0; a < kInputs; ++a) x[a] = v[a].v[k];
        y.v[k] = element(x, keep_bit(kept, k));
      }
      store_vec<T, 4>(out + first, y);
      return;
    }
    for (int k = 0; k < 4 && first + k < n; ++k) {
      T x[kInputs];
#pragma unroll
      for (int a = 0; a < kInputs; ++a) x[a] = in[a][first + k];
      out[first + k] = element(x, keep_bit(kept, k));
    }
  }
};

// out (n,) = fn(in..., keep) elementwise; `name` names the op in a launch error.
template <class T, class Fn, class... In>
void launch_keep_map(const char* name, long long n, const DropoutKey& key, const Fn& fn, T* out,
                     const In*... in) {
  constexpr int kInputs = sizeof...(In);
  static_assert(kInputs == 1 || kInputs == 2, "KeepMap takes one or two inputs");
  static_assert((std::is_same_v<In, T> && ...), "inputs and output share one element type");
  auto launch = [&](auto vector) {
    launch_for_each(name, (n + 3) / 4,
                    KeepMap<T, kInputs, decltype(vector)::value, Fn>{n, key, fn, {in...}, out});
  };
  if (all_aligned(4 * sizeof(T), {out, in...}))
    launch(std::true_type{});
  else
    launch(std::false_type{});
}

}  // namespace gat::ops::detail

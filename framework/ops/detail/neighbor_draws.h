// The draws of neighbour sampling (ops::sample_neighbors), written once for the CPU and the CUDA
// kernels (included by .cpp and .cu files only): how many in-edges a node keeps and which.
#pragma once

#include <cstdint>

#include "gat/framework/rng.h"

namespace gat::ops::detail {

// The high 64 bits of a * b.
GAT_HOST_DEVICE uint64_t mul_high(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  __extension__ using Uint128 = unsigned __int128;
  return static_cast<uint64_t>((static_cast<Uint128>(a) * b) >> 64);
#endif
}

// Draw k of node v under (seed, stream): uniform in [0, n), from two Philox words (64 bits, so
// the bias of the product's top bits is below n / 2^64). Two draws per Philox block.
GAT_HOST_DEVICE uint32_t uniform_below(uint64_t seed, uint64_t stream, int32_t v, uint64_t k, uint32_t n) {
  const uint64_t counter = (static_cast<uint64_t>(static_cast<uint32_t>(v)) << 32) | (k / 2);
  const PhiloxBlock block = philox4x32(seed, stream, counter);
  const unsigned first = static_cast<unsigned>(k % 2) * 2;
  const uint64_t bits = (static_cast<uint64_t>(block.word(first)) << 32) | block.word(first + 1);
  return static_cast<uint32_t>(mul_high(bits, n));
}

// In-edges a node of `degree` in-edges keeps: all (fanout -1); with replacement `fanout` draws
// (none without in-edges); without, min(fanout, degree).
GAT_HOST_DEVICE int64_t sampled_count(int64_t degree, int64_t fanout, bool replace) {
  if (fanout < 0) return degree;
  if (replace) return degree > 0 ? fanout : 0;
  return fanout < degree ? fanout : degree;
}

// The in-edges node v keeps: `count` of its `degree` edges as offsets in [0, degree) into
// picks (count,). All of them in order; with replacement `count` independent draws in draw
// order; without, Floyd's sample of distinct offsets, in increasing order.
GAT_HOST_DEVICE void pick_edges(uint64_t seed, uint64_t stream, int32_t v, int64_t degree, int64_t count,
                                bool replace, int32_t* picks) {
  if (count == degree && !replace) {
    for (int64_t k = 0; k < count; ++k) picks[k] = static_cast<int32_t>(k);
    return;
  }
  if (replace) {
    for (int64_t k = 0; k < count; ++k)
      picks[k] = static_cast<int32_t>(
          uniform_below(seed, stream, v, static_cast<uint64_t>(k), static_cast<uint32_t>(degree)));
    return;
  }
  // Floyd: for j = degree - count .. degree - 1, draw t in [0, j]; take t, or j when t is taken
  // already. picks[0, size) stays sorted, so a membership test is a binary search.
  int64_t size = 0;
  for (int64_t j = degree - count, k = 0; j < degree; ++j, ++k) {
    const auto t = static_cast<int32_t>(
        uniform_below(seed, stream, v, static_cast<uint64_t>(k), static_cast<uint32_t>(j + 1)));
    int64_t at = 0, end = size;  // the first position whose offset is >= t
    while (at < end) {
      const int64_t mid = (at + end) / 2;
      if (picks[mid] < t) {
        at = mid + 1;
      } else {
        end = mid;
      }
    }
    const bool taken = at < size && picks[at] == t;
    if (taken) at = size;  // j is above every offset so far: it goes last
    for (int64_t m = size; m > at; --m) picks[m] = picks[m - 1];
    picks[at] = taken ? static_cast<int32_t>(j) : t;
    ++size;
  }
}

}  // namespace gat::ops::detail

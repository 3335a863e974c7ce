// bf16, the "brain float": the upper 16 bits of an IEEE f32 (sign, 8 exponent bits, 7 mantissa
// bits), so it spans f32's range with 8 significant bits. It is the storage of DType::bf16 and
// never an arithmetic type: a value is widened to f32 (exactly), computed on in f32, and rounded
// back (docs/precision.md).
//
// Rounding from f32 is to nearest, ties to even, as PyTorch's c10::BFloat16: a NaN becomes the
// quiet NaN 0x7FC0 (its sign and payload are not kept), +-inf stay +-inf, a finite value beyond
// the largest bf16 (0x7F7F, about 3.39e38) rounds to +-inf, subnormals round like any other
// value. From f64 the value is rounded to f32 first, as PyTorch does.
#pragma once

#include <cstdint>
#include <cstring>

#include "gat/framework/rng.h"  // GAT_HOST_DEVICE

namespace gat {

struct bf16 {
  uint16_t bits;
};

// x's bits as a To of the same size (C++20's std::bit_cast), on the host and the device.
template <class To, class From>
GAT_HOST_DEVICE To bit_cast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  To y;
  memcpy(&y, &x, sizeof y);
  return y;
}

// The exact f32 value of h.
GAT_HOST_DEVICE float to_f32(bf16 h) { return bit_cast<float>(static_cast<uint32_t>(h.bits) << 16); }

// x rounded to the nearest bf16, ties to the even one (the one whose last kept bit is 0).
GAT_HOST_DEVICE bf16 to_bf16(float x) {
  if (x != x) return bf16{0x7FC0};  // NaN
  const uint32_t u = bit_cast<uint32_t>(x);
  const uint32_t ties_to_even = 0x7FFFu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>((u + ties_to_even) >> 16)};
}

}  // namespace gat

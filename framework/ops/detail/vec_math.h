// exp and expm1 written for loops that the compiler vectorises (CPU, included by framework/ops/*.cpp
// only). The float versions are plain arithmetic with no call and no branch, so a loop over an
// array becomes SIMD code; the library's calls to expf/expm1f were scalar and took 1.5-5 ns
// each, a fifth of a CPU training step. The double versions are std::exp and std::expm1 (the
// gradient checks run in double).
//
// Float accuracy: within 2 ulp of the exact result (tests/test_ops_elementwise.cpp sweeps every
// 64th float of [-104, 89]). Results below the smallest normal float (x < -87.33) are 0 for exp
// and -1 for expm1, as with flush-to-zero; +inf gives +inf, -inf gives 0 and -1, NaN gives NaN.
//
// Method (Cephes expf): x = k ln 2 + r with k = round(x / ln 2) and |r| <= ln 2 / 2, ln 2 split in
// two so that k ln 2 is exact; expm1(r) = r + r^2 P(r) with Cephes' degree-5 P; then
// exp(x) = 2^k (expm1(r) + 1) and expm1(x) = 2^k expm1(r) + (2^k - 1), 2^k built from its bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace gat::ops::detail {

// k = round(x / ln 2) for |x| <= 104, and r = x - k ln 2 (two steps, exact k ln2_hi); returns
// expm1(r) = r + r^2 P(r), with k in *k_out.
inline float expm1_reduced(float x, int32_t* k_out) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 2^23: adding and subtracting it rounds to an integer
  const float k = (x * kLog2e + kRound) - kRound;
  const float r = (x - k * kLn2Hi) - k * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  *k_out = static_cast<int32_t>(k);
  return p * (r * r) + r;
}

// 2^k for k in [-126, 127], from its exponent bits.
inline float pow2i(int32_t k) {
  const uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

constexpr float kExpMin = -87.33654f;  // below: 2^k is not a normal float
constexpr float kExpMax = 88.72283f;   // above: exp overflows

// 2^k (expm1(r) + 1) for the reduction of a clamped x; k = 128 (x near kExpMax) as 2^127 2.
inline float exp_from_reduced(float em1, int32_t k) {
  const float scale = pow2i(std::max(std::min(k, 127), -126));
  return (scale * em1 + scale) * (k > 127 ? 2.0f : 1.0f);
}

inline float vec_exp(float x) {
  const float clamped = std::min(std::max(x, kExpMin), kExpMax);  // NaN stays NaN
  int32_t k;
  const float em1 = expm1_reduced(clamped, &k);
  const float value = exp_from_reduced(em1, k);
  return x < kExpMin ? 0.0f : x > kExpMax ? std::numeric_limits<float>::infinity() : value;
}

// expm1(x) = 2^k expm1(r) + (2^k - 1); 2^k - 1 is exact for the k where it matters (k >= -24),
// and for k > 24 the - 1 does not change exp(x).
inline float vec_expm1(float x) {
  const float clamped = std::min(std::max(x, kExpMin), kExpMax);
  int32_t k;
  const float em1 = expm1_reduced(clamped, &k);
  const float scale = pow2i(std::max(std::min(k, 127), -126));
  // Every value computed, then selected: a conditional float operation (it might trap) would keep
  // the compiler from vectorising.
  const float large = exp_from_reduced(em1, k), small = scale * em1 + (scale - 1.0f);
  const float value = k > 24 ? large : small;
  return x < kExpMin ? -1.0f : x > kExpMax ? std::numeric_limits<float>::infinity() : value;
}

inline double vec_exp(double x) { return std::exp(x); }
inline double vec_expm1(double x) { return std::expm1(x); }

// ELU: x for x > 0, alpha (exp(x) - 1) otherwise; both sides computed and one selected, so that a
// loop over an array vectorises. The CPU's one ELU formula (ops::elu, ops::elu_dropout).
template <class T>
T vec_elu(T x, T alpha) {
  const T negative = alpha * vec_expm1(std::min(x, T(0)));
  return x > T(0) ? x : negative;
}

}  // namespace gat::ops::detail

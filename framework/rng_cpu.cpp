#include "gat/framework/rng_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gat/framework/check.h"

#if defined(__x86_64__) && defined(__GNUC__)
// g++ 12's AVX-512 headers start masked intrinsics from _mm512_undefined_*() and then warn that
// it may be used uninitialised (GCC bug 105593, fixed in 13).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define GAT_X86_SIMD 1
#else
#define GAT_X86_SIMD 0
#endif

namespace gat {

void refuse_to_draw(const char* who) {
  GAT_FAIL(who, " draws random numbers (training mode with dropout): pass a Generator");
}

namespace {

// keep ⇔ uniform24(word) >= p ⇔ (word >> 8) >= ceil(p 2^24): p 2^24 is exact in double, and
// (word >> 8) 2^-24 is exact in float, so the integer test makes keep4's decisions.
uint32_t keep_threshold(float p) {
  GAT_CHECK(p >= 0.0f && p < 1.0f, "dropout: drop probability p = ", p, " is outside [0, 1)");
  return static_cast<uint32_t>(std::ceil(static_cast<double>(p) * 16777216.0));
}

void keep4_scalar(const DropoutKey& key, const uint64_t* blocks, int64_t n, uint8_t* keep) {
  for (int64_t k = 0; k < n; ++k) keep[k] = static_cast<uint8_t>(key.keep4(blocks[k]));
}

#if GAT_X86_SIMD
// The SIMD paths run kChains independent Philox computations side by side, each over one vector
// of blocks: a round is a chain of dependent multiplies, shifts, blends and xors, and one chain
// alone would leave the multiplier idle. A 32-bit lane holds one block's word. vpmuludq
// multiplies the even lanes, so the odd lanes are shifted down for a second multiply, and the
// 64-bit products' halves are blended back into 32-bit lanes. A step past the end of `blocks`
// computes on zero-padded counters and stores only the blocks asked for.
constexpr int kChains = 4;

// blocks[first, first + step) where they all exist, else a zero-padded copy in `pad` (step,).
const uint64_t* step_counters(const uint64_t* blocks, int64_t first, int64_t n, int64_t step, uint64_t* pad) {
  if (n - first >= step) return blocks + first;
  std::fill(pad, pad + step, uint64_t{0});
  std::copy(blocks + first, blocks + n, pad);
  return pad;
}

// keep[k] = key.keep4(blocks[k]) for k in [0, n), kChains registers of blocks a step, with the
// vector operations of Ops (Avx512 or Avx2 below). Always inlined, so that it compiles for the
// target of the function that calls it. Its vectors pass by value to Ops' functions of that same
// target, so the ABI change that -Wpsabi warns about is never crossed.
#pragma GCC diagnostic ignored "-Wpsabi"
template <class Ops>
__attribute__((always_inline)) inline void keep4_simd(const DropoutKey& key, const uint64_t* blocks,
                                                      int64_t n, uint8_t* keep) {
  using Vec = decltype(Ops::broadcast(0));                // the instruction set's register
  constexpr int kLanes = sizeof(Vec) / sizeof(uint32_t);  // a block's word a lane
  constexpr int64_t kStep = kChains * kLanes;
  const Vec mul0 = Ops::broadcast(kPhiloxMul0), mul1 = Ops::broadcast(kPhiloxMul1);
  const Vec stream_lo = Ops::broadcast(static_cast<uint32_t>(key.stream));
  const Vec stream_hi = Ops::broadcast(static_cast<uint32_t>(key.stream >> 32));
  const Vec threshold = Ops::threshold(keep_threshold(key.p));
  alignas(64) uint64_t pad[kStep];
  for (int64_t first = 0; first < n; first += kStep) {
    const uint64_t* counters = step_counters(blocks, first, n, kStep, pad);
    Vec word[kChains][4];  // chain c's Philox state: the counter's low and high words, the stream's
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {
      Ops::split(counters + c * kLanes, word[c][0], word[c][1]);
      word[c][2] = stream_lo;
      word[c][3] = stream_hi;
    }
    uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
    for (int round = 0; round < 10; ++round) {
      const Vec key0 = Ops::broadcast(k0), key1 = Ops::broadcast(k1);
#pragma GCC unroll 4
      for (int c = 0; c < kChains; ++c) {
        Vec hi0, lo0, hi1, lo1;
        Ops::mul_hi_lo(word[c][0], mul0, hi0, lo0);
        Ops::mul_hi_lo(word[c][2], mul1, hi1, lo1);
        word[c][0] = hi1 ^ word[c][1] ^ key0;
        word[c][2] = hi0 ^ word[c][3] ^ key1;
        word[c][1] = lo1;
        word[c][3] = lo0;
      }
      k0 += kPhiloxBump0;
      k1 += kPhiloxBump1;
    }
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {
      const int64_t stored = std::min<int64_t>(kLanes, n - first - c * kLanes);
      if (stored <= 0) break;
      Ops::store_keep4(word[c], threshold, stored, keep + first + c * kLanes);
    }
  }
}

// What each instruction set does its own way, in its own register type (broadcast returns it;
// keep4_simd takes the lane count from its size): broadcast a word to every lane, split u64
// counters into their low and high words, multiply (the high and low words of word * mul lane by
// lane, mul broadcast), turn the keep threshold into what store_keep4 compares with, and store
// keep bytes: for the first `stored` lanes k, bit w of keep[k] is set where (word w >> 8) >= the
// threshold.
#pragma GCC push_options
#pragma GCC target("avx512f")
struct Avx512 {
  static __m512i broadcast(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
  static void split(const uint64_t* counters, __m512i& lo, __m512i& hi) {
    const __m512i a = _mm512_loadu_si512(counters), b = _mm512_loadu_si512(counters + 8);
    lo = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(a)), _mm512_cvtepi64_epi32(b), 1);
    hi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(a, 32))),
                            _mm512_cvtepi64_epi32(_mm512_srli_epi64(b, 32)), 1);
  }
  static void mul_hi_lo(__m512i word, __m512i mul, __m512i& hi, __m512i& lo) {
    constexpr __mmask16 kOdd = 0xAAAA;
    const __m512i even = _mm512_mul_epu32(word, mul),
                  odd = _mm512_mul_epu32(_mm512_srli_epi64(word, 32), mul);
    hi = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(even, 32), odd);
    lo = _mm512_mask_blend_epi32(kOdd, even, _mm512_slli_epi64(odd, 32));
  }
  static __m512i threshold(uint32_t value) { return broadcast(value); }
  static void store_keep4(const __m512i (&word)[4], __m512i threshold, int64_t stored, uint8_t* keep) {
    __m512i bits = _mm512_setzero_si512();
    for (int w = 0; w < 4; ++w) {
      const __mmask16 kept = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(word[w], 8), threshold);
      bits = _mm512_mask_or_epi32(bits, kept, bits, _mm512_set1_epi32(1 << w));
    }
    _mm512_mask_cvtepi32_storeu_epi8(keep, static_cast<__mmask16>((1u << stored) - 1u), bits);
  }
};

void keep4_avx512(const DropoutKey& key, const uint64_t* blocks, int64_t n, uint8_t* keep) {
  keep4_simd<Avx512>(key, blocks, n, keep);
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2")
struct Avx2 {
  static __m256i broadcast(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
  static void split(const uint64_t* counters, __m256i& lo, __m256i& hi) {
    const __m256i low_then_high = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i a = _mm256_permutevar8x32_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(counters)), low_then_high);
    const __m256i b = _mm256_permutevar8x32_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(counters + 4)), low_then_high);
    lo = _mm256_permute2x128_si256(a, b, 0x20);
    hi = _mm256_permute2x128_si256(a, b, 0x31);
  }
  static void mul_hi_lo(__m256i word, __m256i mul, __m256i& hi, __m256i& lo) {
    constexpr int kOdd = 0xAA;
    const __m256i even = _mm256_mul_epu32(word, mul),
                  odd = _mm256_mul_epu32(_mm256_srli_epi64(word, 32), mul);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, kOdd);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), kOdd);
  }
  // (word >> 8) >= threshold as (word >> 8) > threshold - 1: both sides are at most 2^24, so the
  // signed comparison AVX2 has is the unsigned one.
  static __m256i threshold(uint32_t value) { return broadcast(value - 1); }
  static void store_keep4(const __m256i (&word)[4], __m256i below, int64_t stored, uint8_t* keep) {
    __m256i bits = _mm256_setzero_si256();
    for (int w = 0; w < 4; ++w) {
      const __m256i kept = _mm256_cmpgt_epi32(_mm256_srli_epi32(word[w], 8), below);
      bits = _mm256_or_si256(bits, _mm256_and_si256(kept, _mm256_set1_epi32(1 << w)));
    }
    alignas(32) int32_t bytes[8];  // lane k in bytes[k]
    _mm256_store_si256(reinterpret_cast<__m256i*>(bytes), bits);
    std::copy(bytes, bytes + stored, keep);  // int32 -> u8: values < 16
  }
};

void keep4_avx2(const DropoutKey& key, const uint64_t* blocks, int64_t n, uint8_t* keep) {
  keep4_simd<Avx2>(key, blocks, n, keep);
}
#pragma GCC pop_options
#endif  // GAT_X86_SIMD

}  // namespace

namespace detail {

bool keep4_path_supported(Keep4Path path) {
#if GAT_X86_SIMD
  if (path == Keep4Path::avx512) return __builtin_cpu_supports("avx512f");
  if (path == Keep4Path::avx2) return __builtin_cpu_supports("avx2");
#endif
  return path == Keep4Path::scalar;
}

Keep4Path keep4_best_path() {
  static const Keep4Path best = keep4_path_supported(Keep4Path::avx512) ? Keep4Path::avx512
                                : keep4_path_supported(Keep4Path::avx2) ? Keep4Path::avx2
                                                                        : Keep4Path::scalar;
  return best;
}

void keep4_blocks_on(Keep4Path path, const DropoutKey& key, const uint64_t* blocks, int64_t n,
                     uint8_t* keep) {
  GAT_CHECK(keep4_path_supported(path), "keep4_blocks: this CPU lacks the SIMD path asked for");
#if GAT_X86_SIMD
  if (path == Keep4Path::avx512) return keep4_avx512(key, blocks, n, keep);
  if (path == Keep4Path::avx2) return keep4_avx2(key, blocks, n, keep);
#endif
  keep4_scalar(key, blocks, n, keep);
}

}  // namespace detail

void keep4_blocks(const DropoutKey& key, const uint64_t* blocks, int64_t n, uint8_t* keep) {
  detail::keep4_blocks_on(detail::keep4_best_path(), key, blocks, n, keep);
}

void keep4_range(const DropoutKey& key, uint64_t first_block, int64_t n, uint8_t* keep) {
  constexpr int64_t kBatch = 64;
  uint64_t blocks[kBatch];
  for (int64_t first = 0; first < n; first += kBatch) {
    const int64_t count = std::min(kBatch, n - first);
    for (int64_t k = 0; k < count; ++k) blocks[k] = first_block + static_cast<uint64_t>(first + k);
    keep4_blocks(key, blocks, count, keep + first);
  }
}

namespace {
// The four bytes (0 or 1) of a block's keep bits, in memory order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "kBlockBytes is laid out little-endian");
constexpr uint32_t block_bytes(unsigned bits) {
  return (bits & 1u) | ((bits >> 1) & 1u) << 8 | ((bits >> 2) & 1u) << 16 | ((bits >> 3) & 1u) << 24;
}
constexpr uint32_t kBlockBytes[16] = {block_bytes(0),  block_bytes(1),  block_bytes(2),  block_bytes(3),
                                      block_bytes(4),  block_bytes(5),  block_bytes(6),  block_bytes(7),
                                      block_bytes(8),  block_bytes(9),  block_bytes(10), block_bytes(11),
                                      block_bytes(12), block_bytes(13), block_bytes(14), block_bytes(15)};
}  // namespace

KeepMask::KeepMask(const DropoutKey& key, int64_t n) : kept_(new uint8_t[static_cast<size_t>(n)]), size_(n) {
  GAT_CHECK(!key.stream_base, "dropout: a key recorded for a CUDA graph reached the CPU");
  constexpr int64_t kChunk = 1024;  // blocks of four indices per task
  const int64_t num_blocks = (n + 3) / 4, chunks = (num_blocks + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    uint8_t blocks[kChunk];
    const int64_t first = c * kChunk, count = std::min(kChunk, num_blocks - first);
    keep4_range(key, static_cast<uint64_t>(first), count, blocks);
    // bit w of block k -> byte 4 (first + k) + w: four bytes at once, but for a last block that
    // holds fewer than four indices (a memcpy of a variable size is a call)
    uint8_t* out = kept_.get() + 4 * first;
    const int64_t whole = std::min(count, (n - 4 * first) / 4);
    for (int64_t k = 0; k < whole; ++k) std::memcpy(out + 4 * k, &kBlockBytes[blocks[k]], 4);
    for (int64_t k = whole; k < count; ++k) {
      const uint32_t bytes = kBlockBytes[blocks[k]];
      std::memcpy(out + 4 * k, &bytes, static_cast<size_t>(n - 4 * (first + k)));
    }
  }
}

}  // namespace gat

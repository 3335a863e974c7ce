#include "gat/framework/rng_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gat/framework/check.h"

#if defined(__x86_64__) && defined(__GNUC__)
// g++ 12's AVX-512 headers start masked intrinsics from _mm512_undefined_*() and then warn that
// it may be used uninitialised (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define GAT_X86_SIMD 1
#else
#define GAT_X86_SIMD 0
#endif

namespace gat {

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
const uint64_t* step_counters(const uint64_t* blocks, int64_t first, int64_t n, int64_t step,
                              uint64_t* pad) {
  if (n - first >= step) return blocks + first;
  std::fill(pad, pad + step, uint64_t{0});
  std::copy(blocks + first, blocks + n, pad);
  return pad;
}

// Lane k's keep decision in bit k: (word >> 8) >= threshold.
__attribute__((target("avx512f"))) __mmask16 avx512_kept(__m512i word, __m512i threshold) {
  return _mm512_cmpge_epu32_mask(_mm512_srli_epi32(word, 8), threshold);
}

__attribute__((target("avx512f"))) void keep4_avx512(const DropoutKey& key, const uint64_t* blocks,
                                                    int64_t n, uint8_t* keep) {
  constexpr int kLanes = 16;
  constexpr int64_t kStep = kChains * kLanes;
  constexpr __mmask16 kOdd = 0xAAAA;
  const __m512i mul0 = _mm512_set1_epi64(kPhiloxMul0), mul1 = _mm512_set1_epi64(kPhiloxMul1);
  const __m512i stream_lo = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(key.stream)));
  const __m512i stream_hi = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(key.stream >> 32)));
  const __m512i threshold = _mm512_set1_epi32(static_cast<int>(keep_threshold(key.p)));
  alignas(64) uint64_t pad[kStep];
  for (int64_t first = 0; first < n; first += kStep) {
    const uint64_t* counters = step_counters(blocks, first, n, kStep, pad);
    __m512i c0[kChains], c1[kChains], c2[kChains], c3[kChains];
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {  // 16 u64 counters -> low words c0, high words c1
      const __m512i a = _mm512_loadu_si512(counters + c * kLanes);
      const __m512i b = _mm512_loadu_si512(counters + c * kLanes + 8);
      c0[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(a)),
                                 _mm512_cvtepi64_epi32(b), 1);
      c1[c] = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(a, 32))),
          _mm512_cvtepi64_epi32(_mm512_srli_epi64(b, 32)), 1);
      c2[c] = stream_lo;
      c3[c] = stream_hi;
    }
    uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
    for (int round = 0; round < 10; ++round) {
      const __m512i key0 = _mm512_set1_epi32(static_cast<int>(k0));
      const __m512i key1 = _mm512_set1_epi32(static_cast<int>(k1));
#pragma GCC unroll 4
      for (int c = 0; c < kChains; ++c) {
        const __m512i p0_even = _mm512_mul_epu32(c0[c], mul0);
        const __m512i p0_odd = _mm512_mul_epu32(_mm512_srli_epi64(c0[c], 32), mul0);
        const __m512i p1_even = _mm512_mul_epu32(c2[c], mul1);
        const __m512i p1_odd = _mm512_mul_epu32(_mm512_srli_epi64(c2[c], 32), mul1);
        const __m512i hi0 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(p0_even, 32), p0_odd);
        const __m512i hi1 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(p1_even, 32), p1_odd);
        // 0x96: a ^ b ^ c
        c0[c] = _mm512_ternarylogic_epi32(hi1, c1[c], key0, 0x96);
        c2[c] = _mm512_ternarylogic_epi32(hi0, c3[c], key1, 0x96);
        c1[c] = _mm512_mask_blend_epi32(kOdd, p1_even, _mm512_slli_epi64(p1_odd, 32));
        c3[c] = _mm512_mask_blend_epi32(kOdd, p0_even, _mm512_slli_epi64(p0_odd, 32));
      }
      k0 += kPhiloxBump0;
      k1 += kPhiloxBump1;
    }
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {  // bit w of lane k's byte: (word w >> 8) >= threshold
      const int64_t stored = std::min<int64_t>(kLanes, n - first - c * kLanes);
      if (stored <= 0) break;
      __m512i bits = _mm512_maskz_mov_epi32(avx512_kept(c0[c], threshold), _mm512_set1_epi32(1));
      bits = _mm512_mask_or_epi32(bits, avx512_kept(c1[c], threshold), bits, _mm512_set1_epi32(2));
      bits = _mm512_mask_or_epi32(bits, avx512_kept(c2[c], threshold), bits, _mm512_set1_epi32(4));
      bits = _mm512_mask_or_epi32(bits, avx512_kept(c3[c], threshold), bits, _mm512_set1_epi32(8));
      _mm512_mask_cvtepi32_storeu_epi8(keep + first + c * kLanes,
                                       static_cast<__mmask16>((1u << stored) - 1u), bits);
    }
  }
}

// `bit` in the lanes whose word keeps: (word >> 8) > threshold - 1. (word >> 8) and the
// threshold are at most 2^24, so this signed comparison is the unsigned >=.
__attribute__((target("avx2"))) __m256i avx2_kept(__m256i word, __m256i below, int bit) {
  return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_srli_epi32(word, 8), below),
                          _mm256_set1_epi32(bit));
}

// The same as keep4_avx512 with 8 lanes.
__attribute__((target("avx2"))) void keep4_avx2(const DropoutKey& key, const uint64_t* blocks,
                                                int64_t n, uint8_t* keep) {
  constexpr int kLanes = 8;
  constexpr int64_t kStep = kChains * kLanes;
  constexpr int kOdd = 0xAA;
  const __m256i mul0 = _mm256_set1_epi64x(kPhiloxMul0), mul1 = _mm256_set1_epi64x(kPhiloxMul1);
  const __m256i stream_lo = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(key.stream)));
  const __m256i stream_hi = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(key.stream >> 32)));
  const __m256i below = _mm256_set1_epi32(static_cast<int>(keep_threshold(key.p)) - 1);
  const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);  // low words, then high
  alignas(32) uint64_t pad[kStep];
  alignas(32) int32_t bytes[kLanes];
  for (int64_t first = 0; first < n; first += kStep) {
    const uint64_t* counters = step_counters(blocks, first, n, kStep, pad);
    __m256i c0[kChains], c1[kChains], c2[kChains], c3[kChains];
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {  // 8 u64 counters -> low words c0, high words c1
      const __m256i* src = reinterpret_cast<const __m256i*>(counters + c * kLanes);
      const __m256i a = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(src), split);
      const __m256i b = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(src + 1), split);
      c0[c] = _mm256_permute2x128_si256(a, b, 0x20);
      c1[c] = _mm256_permute2x128_si256(a, b, 0x31);
      c2[c] = stream_lo;
      c3[c] = stream_hi;
    }
    uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
    for (int round = 0; round < 10; ++round) {
      const __m256i key0 = _mm256_set1_epi32(static_cast<int>(k0));
      const __m256i key1 = _mm256_set1_epi32(static_cast<int>(k1));
#pragma GCC unroll 4
      for (int c = 0; c < kChains; ++c) {
        const __m256i p0_even = _mm256_mul_epu32(c0[c], mul0);
        const __m256i p0_odd = _mm256_mul_epu32(_mm256_srli_epi64(c0[c], 32), mul0);
        const __m256i p1_even = _mm256_mul_epu32(c2[c], mul1);
        const __m256i p1_odd = _mm256_mul_epu32(_mm256_srli_epi64(c2[c], 32), mul1);
        const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(p0_even, 32), p0_odd, kOdd);
        const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(p1_even, 32), p1_odd, kOdd);
        c0[c] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[c]), key0);
        c2[c] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[c]), key1);
        c1[c] = _mm256_blend_epi32(p1_even, _mm256_slli_epi64(p1_odd, 32), kOdd);
        c3[c] = _mm256_blend_epi32(p0_even, _mm256_slli_epi64(p0_odd, 32), kOdd);
      }
      k0 += kPhiloxBump0;
      k1 += kPhiloxBump1;
    }
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {  // bit w of lane k's byte: (word w >> 8) >= threshold
      const int64_t stored = std::min<int64_t>(kLanes, n - first - c * kLanes);
      if (stored <= 0) break;
      const __m256i bits =
          _mm256_or_si256(_mm256_or_si256(avx2_kept(c0[c], below, 1), avx2_kept(c1[c], below, 2)),
                          _mm256_or_si256(avx2_kept(c2[c], below, 4), avx2_kept(c3[c], below, 8)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(bytes), bits);
      std::copy(bytes, bytes + stored, keep + first + c * kLanes);  // int32 -> u8: values < 16
    }
  }
}
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
constexpr uint32_t kBlockBytes[16] = {
    block_bytes(0),  block_bytes(1),  block_bytes(2),  block_bytes(3),  block_bytes(4),  block_bytes(5),
    block_bytes(6),  block_bytes(7),  block_bytes(8),  block_bytes(9),  block_bytes(10), block_bytes(11),
    block_bytes(12), block_bytes(13), block_bytes(14), block_bytes(15)};
}  // namespace

KeepMask::KeepMask(const DropoutKey& key, int64_t n) : kept_(static_cast<size_t>(n)) {
  GAT_CHECK(!key.stream_base, "dropout: a key recorded for a CUDA graph reached the CPU");
  constexpr int64_t kChunk = 1024;  // blocks of four indices per task
  const int64_t num_blocks = (n + 3) / 4, chunks = (num_blocks + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    uint8_t blocks[kChunk];
    const int64_t first = c * kChunk, count = std::min(kChunk, num_blocks - first);
    keep4_range(key, static_cast<uint64_t>(first), count, blocks);
    for (int64_t k = 0; k < count; ++k) {  // bit w of block k -> byte 4 (first + k) + w
      const int64_t i = 4 * (first + k);
      const uint32_t bytes = kBlockBytes[blocks[k]];
      std::memcpy(&kept_[static_cast<size_t>(i)], &bytes, static_cast<size_t>(std::min<int64_t>(4, n - i)));
    }
  }
}

}  // namespace gat

// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011), identical on CPU and CUDA.
//
// A random draw is a pure function of (seed, stream, index): no state to carry, any element's
// draw can be regenerated in a backward pass, and the CPU and CUDA backends draw the same bits.
//   seed   – the user's seed
//   stream – which draw site and step (Generator hands out a fresh one per call)
//   index  – the element (e.g. e * H + h for an edge-head pair)
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GAT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GAT_HOST_DEVICE inline
#endif

namespace gat {

// The four 32-bit words of one Philox4x32-10 block.
struct PhiloxBlock {
  uint32_t w0, w1, w2, w3;
  GAT_HOST_DEVICE uint32_t word(unsigned k) const {  // k in [0, 4); no indexed array on CUDA
    return k == 0 ? w0 : k == 1 ? w1 : k == 2 ? w2 : w3;
  }
};

// Philox4x32's round multipliers and key schedule (also used by the SIMD draws, rng_cpu.cpp).
constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxBump0 = 0x9E3779B9u, kPhiloxBump1 = 0xBB67AE85u;

// Philox4x32-10 of counter (counter_lo, counter_hi, stream_lo, stream_hi) under key seed (the
// Random123 known-answer vectors hold for it: tests/test_ops_elementwise.cpp).
GAT_HOST_DEVICE PhiloxBlock philox4x32(uint64_t seed, uint64_t stream, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxMul1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kPhiloxBump0;
    k1 += kPhiloxBump1;
  }
  return {c0, c1, c2, c3};
}

// One 32-bit draw per index: the first word of block `index` (the dataset generator's draws).
GAT_HOST_DEVICE uint32_t philox_u32(uint64_t seed, uint64_t stream, uint64_t index) {
  return philox4x32(seed, stream, index).w0;
}

// Uniform in [0, 1) from the top 24 bits of a word (exact in float and double alike, so f32 and
// f64 paths and both devices make the same keep/drop decisions).
GAT_HOST_DEVICE float uniform24(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}
GAT_HOST_DEVICE float philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return uniform24(philox_u32(seed, stream, index));
}

// Dropout decision shared by every dropout in the framework: keep element `index` when the
// uniform from word index % 4 of Philox block index / 4 is >= p. One block serves four
// consecutive elements: loops over contiguous elements draw it once (keep4), scattered ones
// (sparse entries, edges) call keep() and use one word of it.
struct DropoutKey {
  float p = 0.0f;  // drop probability in [0, 1)
  uint64_t seed = 0;
  uint64_t stream = 0;
  // Set only in keys made while a CUDA graph records (Generator::begin_device_streams): the
  // stream is then stream + *stream_base, read by the kernel when it runs, so every replay of
  // the graph draws the masks an eager step would. Host code never sees such a key.
  const uint64_t* stream_base = nullptr;

  GAT_HOST_DEVICE uint64_t effective_stream() const {
#if defined(__CUDA_ARCH__)
    return stream_base ? stream + *stream_base : stream;
#else
    return stream;
#endif
  }
  // This key with its stream read once: a kernel's threads take it at their start instead of
  // reading *stream_base at every draw.
  GAT_HOST_DEVICE DropoutKey resolved() const {
    DropoutKey key = *this;
    key.stream = effective_stream();
    key.stream_base = nullptr;
    return key;
  }
  GAT_HOST_DEVICE bool keep(uint64_t index) const {
    return uniform24(
               philox4x32(seed, effective_stream(), index >> 2).word(static_cast<unsigned>(index & 3))) >= p;
  }
  // keep(4 * block + k) in bit k, k = 0..3, from one Philox call.
  GAT_HOST_DEVICE unsigned keep4(uint64_t block) const {
    const PhiloxBlock b = philox4x32(seed, effective_stream(), block);
    return (uniform24(b.w0) >= p ? 1u : 0u) | (uniform24(b.w1) >= p ? 2u : 0u) |
           (uniform24(b.w2) >= p ? 4u : 0u) | (uniform24(b.w3) >= p ? 8u : 0u);
  }
  // x times its keep factor, keep_scale = 1 / (1 - p) when kept, 0 when dropped: the one formula
  // of every dropout (dense, sparse, attention; CPU and CUDA). A product, not a branch: the keep
  // bits are random, so a branch would be mispredicted half the time on the CPU.
  // `kept` is 0 or 1 (bool or an integer: a loop reading kept bytes vectorises, one reading bools
  // does not).
  template <class T, class Kept>
  GAT_HOST_DEVICE static T apply_kept(T x, Kept kept, T keep_scale) {
#if defined(__CUDA_ARCH__)
    return x * (kept ? keep_scale : T(0));  // a predicated select
#else
    // g++ compiles the ?: above to a branch. 1 * keep_scale and 0 * keep_scale are exact, so
    // this is the same factor.
    return x * (static_cast<T>(kept) * keep_scale);
#endif
  }
  // The same with the decision drawn for element `index`; a zero needs no draw.
  template <class T>
  GAT_HOST_DEVICE T apply(T x, uint64_t index, T keep_scale) const {
    return x != T(0) ? apply_kept(x, keep(index), keep_scale) : T(0);
  }
  GAT_HOST_DEVICE bool active() const { return p > 0.0f; }
};

// Hands out a fresh stream for every draw site and step: same seed, same sequence of masks.
// Throws the gat::Error of a Generator::refusing (rng_cpu.cpp).
[[noreturn]] void refuse_to_draw(const char* who);

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  // A generator for a forward pass that should draw nothing (eval mode, no dropout): a draw
  // throws a gat::Error "<who> draws random numbers (training mode with dropout): pass a
  // Generator". `who` must outlive it (a string literal, or a name the caller keeps).
  static Generator refusing(const char* who) {
    Generator gen;
    gen.refusing_ = who;
    return gen;
  }
  DropoutKey dropout_key(float p) {
    if (refusing_) refuse_to_draw(refusing_);
    if (!device_base_) return DropoutKey{p, seed_, next_stream_++};
    return DropoutKey{p, seed_, next_stream_++ - recording_from_, device_base_};
  }
  uint64_t seed() const { return seed_; }
  uint64_t next_stream() const { return next_stream_; }
  // For recording a CUDA graph of a step. Between begin and end, keys count their streams from
  // 0 and carry `device_base`, a device counter that must hold next_stream() when a replay
  // starts; end returns the streams the step drew (the replay must then advance the counter and
  // this generator, skip_streams, by that many) and leaves next_stream() where begin found it.
  void begin_device_streams(const uint64_t* device_base) {
    device_base_ = device_base;
    recording_from_ = next_stream_;
  }
  uint64_t end_device_streams() {
    const uint64_t drawn = next_stream_ - recording_from_;
    next_stream_ = recording_from_;
    device_base_ = nullptr;
    return drawn;
  }
  void skip_streams(uint64_t n) { next_stream_ += n; }
  // Uniform [0,1) draw for host-side initialisers (not a dropout mask).
  double uniform() {
    if (refusing_) refuse_to_draw(refusing_);
    return philox_uniform(seed_, kInitStream, init_index_++);
  }

 private:
  static constexpr uint64_t kInitStream = ~0ull;
  uint64_t seed_;
  uint64_t next_stream_ = 0;
  uint64_t init_index_ = 0;
  const uint64_t* device_base_ = nullptr;  // while recording a graph
  uint64_t recording_from_ = 0;
  const char* refusing_ = nullptr;  // set: every draw throws, naming it
};

}  // namespace gat

// Dropout decisions drawn in batches on the CPU: the bits of DropoutKey::keep4 (rng.h), computed
// for many Philox blocks at once in SIMD lanes (AVX-512 or AVX2, picked at run time from what
// the CPU has; plain C++ elsewhere). Every path gives the same bits as keep4, so CPU and CUDA
// masks stay identical. A scalar Philox block costs about 20 dependent 64-bit multiplies; 16
// lanes of AVX-512 share them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "gat/framework/rng.h"

namespace gat {

// keep[k] = key.keep4(first_block + k) for k in [0, n): bit w keeps element 4 (first_block + k) + w.
void keep4_range(const DropoutKey& key, uint64_t first_block, int64_t n, uint8_t* keep);

// keep[k] = key.keep4(blocks[k]) for k in [0, n).
void keep4_blocks(const DropoutKey& key, const uint64_t* blocks, int64_t n, uint8_t* keep);

// The dropout decisions key.keep(i) of the indices [0, n), drawn once (in parallel, OpenMP) and
// read many times: by a pass and its backward, or by rows that each need a few. A byte per
// index, so that loops reading it vectorise.
class KeepMask {
 public:
  KeepMask() = default;
  KeepMask(const DropoutKey& key, int64_t n);
  KeepMask(KeepMask&& other) noexcept : kept_(std::move(other.kept_)), size_(std::exchange(other.size_, 0)) {}
  KeepMask& operator=(KeepMask&& other) noexcept {
    kept_ = std::move(other.kept_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }
  uint8_t operator[](int64_t i) const { return kept_[i]; }  // 1 kept, 0 dropped
  const uint8_t* data() const { return kept_.get(); }       // (n,)
  int64_t size() const { return size_; }                    // n

 private:
  // (n,) 0 or 1. Not a std::vector: its zero fill, a serial pass over the mask before the
  // parallel draws overwrite every byte, was 1% of a Cora training step.
  std::unique_ptr<uint8_t[]> kept_;
  int64_t size_ = 0;
};

namespace detail {
// The SIMD paths, for tests that compare each one the CPU has with keep4.
enum class Keep4Path { scalar, avx2, avx512 };
bool keep4_path_supported(Keep4Path path);
Keep4Path keep4_best_path();  // the one keep4_blocks uses
void keep4_blocks_on(Keep4Path path, const DropoutKey& key, const uint64_t* blocks, int64_t n, uint8_t* keep);
}  // namespace detail

}  // namespace gat

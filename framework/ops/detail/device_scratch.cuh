// Scratch memory and CUB device-wide algorithms for the kernels that build index arrays on the
// device (ops::sample_neighbors, ops::block_graph). Included by .cu files only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gat/framework/cuda_check.h"
#include "gat/framework/tensor.h"

namespace gat::ops::detail {

// Device memory of `bytes` for the scope of a kernel entry (freed in stream order).
inline Tensor scratch(size_t bytes, const char* what) {
  return Tensor::empty({static_cast<int64_t>((bytes + 3) / 4)}, DType::i32, Device::cuda, what);
}

// A tensor's memory as an array of T (scratch holds words of any type).
template <class T>
T* words(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// Runs a CUB device-wide algorithm: `call(temp, temp_bytes)` once to size its temporary storage,
// then with it.
template <class Call>
void run_cub(const Call& call) {
  size_t bytes = 0;
  CUDA_CHECK(call(nullptr, bytes));
  // At least one word: a null pointer would make the second call a size query too.
  const Tensor temp = scratch(bytes > 0 ? bytes : 1, "cub temp");
  CUDA_CHECK(call(temp.raw_data(), bytes));
}

}  // namespace gat::ops::detail

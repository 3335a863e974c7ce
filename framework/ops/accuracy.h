// argmax(x): the column of the largest value in each row of x (N, C) (the first one on ties;
// NaN never wins), and accuracy(logits, labels, index): the fraction of the rows listed in
// index whose argmax equals their label. No autograd. CPU and CUDA.
#pragma once

#include <cstdint>

#include "framework/rng.h"  // GAT_HOST_DEVICE
#include "framework/tensor.h"

namespace gat::ops {

// x: (N, C) f32|f64, C >= 1  ->  (N,) i32 on x's device
Tensor argmax(const Tensor& x);

// logits: (N, C) f32|f64; labels: (N,) i32; index: (K,) i32, K >= 1; one device  ->  in [0, 1].
// Throws when an index entry is outside [0, N). Waits for the device (returns a host value).
double accuracy(const Tensor& logits, const Tensor& labels, const Tensor& index);

// The argmax of one row of C >= 1 values, the same on both devices.
template <class T>
GAT_HOST_DEVICE int32_t row_argmax(const T* row, int64_t C) {
  int32_t best = 0;
  for (int64_t c = 1; c < C; ++c)
    if (row[c] > row[best]) best = static_cast<int32_t>(c);
  return best;
}

namespace cuda_impl {  // accuracy.cu
void argmax(const Tensor& x, Tensor& out);  // x (N, C) -> out (N,) i32
// Rows k of index with pred[index[k]] == labels[index[k]]; throws on an index outside [0, N).
int64_t count_correct(const Tensor& pred, const Tensor& labels, const Tensor& index);
}  // namespace cuda_impl

}  // namespace gat::ops

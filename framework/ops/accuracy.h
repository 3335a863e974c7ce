// argmax(x): the column of the largest value in each row of x (N, C) (the first one on ties;
// NaN never wins), and accuracy(logits, labels, index): the fraction of the rows listed in
// index whose argmax equals their label. No autograd. CPU and CUDA.
// bf16 logits: read through f32 (docs/precision.md).
#pragma once

#include <cstdint>
#include <vector>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/rng.h"  // GAT_HOST_DEVICE
#include "gat/framework/tensor.h"

namespace gat::ops {

// x: (N, C) f32|f64, C >= 1  ->  (N,) i32 on x's device
Tensor argmax(const Tensor& x);

// logits: (N, C) f32|f64; labels: (N,) i32; index: (K,) i32, K >= 1; one device  ->  in [0, 1].
// Throws when an index entry is outside [0, N). Waits for the device (returns a host value).
double accuracy(const Tensor& logits, const Tensor& labels, const Tensor& index);

// The same in two steps, for work queued without waiting (e.g. recorded in a CUDA graph):
// correct_counts -> (2,) i32 on logits' device: the rows of index predicted right, and the index
// entries outside [0, N); accuracy_from_counts turns those counts, read back, into accuracy's
// value (throwing on entries outside [0, N)).
Tensor correct_counts(const Tensor& logits, const Tensor& labels, const Tensor& index);
double accuracy_from_counts(const std::vector<int32_t>& counts, const Tensor& index);

// The argmax of one row of C >= 1 values, the same on both devices.
template <class T>
GAT_HOST_DEVICE int32_t row_argmax(const T* row, int64_t C) {
  int32_t best = 0;
  for (int64_t c = 1; c < C; ++c)
    if (row[c] > row[best]) best = static_cast<int32_t>(c);
  return best;
}

// The kernels (docs/design.md, the op pattern):
//   argmax:        x (N, C) -> out (N,) i32;
//   count_correct: counts (2,) i32, zeroed by the caller, += rows k of index with
//                  pred[index[k]] == labels[index[k]], and += index entries outside [0, N)
//                  (the CPU throws on the first such entry instead, naming it).
// kernels:: runs cpu_impl:: or cuda_impl:: by the tensors' device.
GAT_DECLARE_KERNEL_FN(argmax, (const Tensor& x, Tensor& out))
GAT_DECLARE_KERNEL_FN(count_correct,
                      (const Tensor& pred, const Tensor& labels, const Tensor& index, Tensor& counts))

}  // namespace gat::ops

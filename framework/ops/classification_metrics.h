// classification_metrics(logits, labels, splits): what a node-classification epoch reads back,
// for several index sets at once, in one f64 tensor (one copy to the host):
//
//   out[s] = { masked_cross_entropy(logits, labels, splits[s]),      the mean NLL over the split
//              rows k of splits[s] whose argmax is their label,      (correct_counts()[0])
//              entries of splits[s] outside [0, N) }                 (correct_counts()[1])
//
// with exactly the numbers those ops give (the same loss bits on each device, argmax's ties),
// the loss rounded to f64 without change. accuracy_from_counts({correct, outside}, splits[s])
// gives the accuracy. No autograd. logits (N, C) f32|f64, labels (N,) i32, splits[s] (K_s,) i32
// with K_s >= 1, at most kMaxSplits of them, all on one device -> out (S, 3) f64 on it.
// Errors as masked_cross_entropy's: the CPU throws on an entry outside [0, N) or a label outside
// [0, C); CUDA does not look on the host (the loss is NaN and the entry counted in out[s][2]).
// bf16 logits: read through f32 (docs/precision.md).
#pragma once

#include <vector>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

constexpr int kMaxSplits = 8;

Tensor classification_metrics(const Tensor& logits, const Tensor& labels, const std::vector<Tensor>& splits);
// The same into `out` (S, 3) f64 on logits' device, e.g. rows of a buffer that a CUDA graph fills
// at every replay and that the host reads once (Tensor::rows).
void classification_metrics(const Tensor& logits, const Tensor& labels, const std::vector<Tensor>& splits,
                            Tensor& out);

// The kernel (docs/design.md, the op pattern): writes out (S, 3) f64, allocated by the caller,
// from arguments checked by the op. kernels:: runs cpu_impl:: or cuda_impl:: by logits' device.
GAT_DECLARE_KERNEL_FN(classification_metrics, (const Tensor& logits, const Tensor& labels,
                                               const std::vector<Tensor>& splits, Tensor& out))

}  // namespace gat::ops

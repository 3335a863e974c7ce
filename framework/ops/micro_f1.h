// micro_f1(logits, labels): the micro-averaged F1 score of multi-label predictions, as
// sklearn.metrics.f1_score(labels, logits > 0, average="micro") (PyG's PPI example). No autograd.
// CPU and CUDA.
//
//   prediction = logit > 0 (a logit of exactly 0, sigmoid 0.5, is negative; NaN is negative)
//   tp, fp, fn = the (row, label) pairs predicted 1 and labelled 1, predicted 1 and labelled 0,
//                predicted 0 and labelled 1, over all N * C pairs
//   micro_f1   = 2 tp / (2 tp + fp + fn), and 0 when that is 0 / 0 (nothing predicted and nothing
//                labelled positive: sklearn's zero_division default)
//
// logits: (N, C) f32|f64; labels: the same shape, dtype and device, every entry 0 or 1.
// Errors (gat::Error naming the op): other dtypes or shapes, devices that differ, no rows or no
// columns, a label other than 0 or 1 (on the CPU at once, naming it; on CUDA counted and reported
// by micro_f1_from_counts).
#pragma once

#include <vector>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// The counts of the pairs: (4,) f64 on logits' device, {tp, fp, fn, labels other than 0 or 1}.
// Counts of several batches add up (a split of many graphs), for one micro_f1_from_counts.
Tensor micro_f1_counts(const Tensor& logits, const Tensor& labels);
// The score from counts read back (summed over batches); throws when counts[3] > 0.
double micro_f1_from_counts(const std::vector<double>& counts);
// Both, waiting for the device.
double micro_f1(const Tensor& logits, const Tensor& labels);

// The kernel (docs/design.md, the op pattern): counts (4,) f64, zeroed by the caller, += the
// counts above (the CPU throws on the first label other than 0 or 1 instead).
GAT_DECLARE_KERNEL_FN(micro_f1_counts, (const Tensor& logits, const Tensor& labels, Tensor& counts))

}  // namespace gat::ops

// Regression and binary-classification losses with mean reduction, optionally over the rows
// listed in an index (f32/f64, CPU and CUDA), matching PyTorch's definitions:
//
//   mse_loss(input, target)                          = mean((input - target)^2)
//   binary_cross_entropy_with_logits(logits, target) = mean(max(x, 0) - x * y + log1p(exp(-|x|)))
//                                                      (x = logits, y = target in [0, 1]; stable
//                                                      for any finite x, equal to
//                                                      -(y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))))
//   input/logits: (N, ...) f32|f64; target: the same shape, dtype and device  -> scalar ()
//
// The masked forms take index (K,) i32 (K >= 1) of rows of the first dimension and average over
// those rows only (a row listed twice counts twice), as torch's loss(input[index], target[index]).
// A RowIndex (index_rows.h) built once serves every step without reading the index back; the
// Tensor overload builds one per call (a device-to-host copy on CUDA).
//
// Backward (g = d loss, n = elements averaged), elementwise then through the mean:
//   mse:  d input = 2 (x - y) g / n,            d target = -2 (x - y) g / n
//   bce:  d logits = (sigmoid(x) - y) g / n,    d target = -x g / n
// Errors: shape, dtype or device mismatches, an empty index, index entries outside [0, N).
#pragma once

#include "gat/framework/ops/index_rows.h"
#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor mse_loss(const Tensor& input, const Tensor& target);
Tensor mse_loss(const Tensor& input, const Tensor& target, const RowIndex& index);
Tensor mse_loss(const Tensor& input, const Tensor& target, const Tensor& index);
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target);
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const RowIndex& index);
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const Tensor& index);

enum class PointwiseLoss { mse, bce_with_logits };

// ---- the kernels: the per-element terms, averaged afterwards by ops::mean. Every tensor (n,)
// flat, outputs allocated by the caller ----
//  forward:  terms = loss(x, y) elementwise
//  backward: grad_x and/or grad_y (either may be null) from grad_terms; overwrite
GAT_DECLARE_KERNEL_FN(loss_terms_forward,
                      (PointwiseLoss loss, const Tensor& x, const Tensor& y, Tensor& terms))
GAT_DECLARE_KERNEL_FN(loss_terms_backward, (PointwiseLoss loss, const Tensor& x, const Tensor& y,
                                            const Tensor& grad_terms, Tensor* grad_x, Tensor* grad_y))

}  // namespace gat::ops

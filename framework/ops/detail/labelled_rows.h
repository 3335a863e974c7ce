// The checks of an op over some rows of logits (N, C) with their labels (masked_cross_entropy,
// accuracy): labels (N,) i32, index (K,) i32 with K >= 1 (the ops are means over those rows),
// all three on one device. The logits' dtype and shape are the op's own to check.
#pragma once

#include "gat/framework/check.h"
#include "gat/framework/tensor.h"

namespace gat::ops::detail {

inline void check_labelled_rows(const char* op, const Tensor& logits, const Tensor& labels,
                                const Tensor& index) {
  check_dtype(op, "labels", labels, DType::i32);
  check_shape(op, "labels", labels, {logits.size(0)});
  check_dtype(op, "index", index, DType::i32);
  check_dim(op, "index", index, 1);
  GAT_CHECK(index.numel() > 0, op, ": 'index' is empty: the mean over no rows is undefined");
  GAT_CHECK(labels.device() == logits.device() && index.device() == logits.device(), op, ": logits ",
            logits.describe(), ", labels ", labels.describe(), " and index ", index.describe(),
            " must be on one device");
}

}  // namespace gat::ops::detail

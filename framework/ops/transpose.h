// transpose(x): the transpose of a 2-D tensor, with autograd (any dtype, CPU and CUDA).
//   x: (R, C) -> out (C, R), out[c, r] = x[r, c]; a copy (tensors are contiguous), not a view.
// Backward: d x = transpose(g). Errors: x not 2-D.
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor transpose(const Tensor& x);

// ---- the kernel (the forward and the backward pass): x (R, C) -> out (C, R), allocated by the
// caller with x's dtype; tiles of 32 x 32 so that reads and writes are both contiguous runs ----
GAT_DECLARE_KERNEL_FN(transpose, (const Tensor& x, Tensor& out))

}  // namespace gat::ops

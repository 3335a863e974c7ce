// transpose(x): the transpose of a 2-D tensor, with autograd (any dtype, CPU and CUDA).
//   x: (R, C) -> out (C, R), out[c, r] = x[r, c]; a copy (tensors are contiguous), not a view.
// Backward: d x = transpose(g). Errors: x not 2-D.
#pragma once

#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor transpose(const Tensor& x);

// ---- the kernel (the forward and the backward pass): x (R, C) -> out (C, R), allocated by the
// caller with x's dtype; tiles of 32 x 32 so that reads and writes are both contiguous runs ----
namespace kernels {
void transpose(const Tensor& x, Tensor& out);
}
namespace cpu_impl {
void transpose(const Tensor& x, Tensor& out);
}
namespace cuda_impl {  // transpose.cu
void transpose(const Tensor& x, Tensor& out);
}

}  // namespace gat::ops

// sparse_dropout(a, key): dropout on the values of a CsrMatrix, drawing EXACTLY the mask that dense
// dropout (framework/ops/dropout.h) draws for a.to_dense():
//
//   out.values[e] = values[e] != 0 && key.keep(row * cols + col) ? values[e] / (1 - p) : 0
//
// with (row, col) the position of entry e, so row * cols + col is its dense flat index: a dense
// and a sparse run of the same seed drop the same elements and scale them by the same T(1/(1-p)).
// The output keeps a's pattern (dropped entries hold zeros; the ops skip them). Autograd through
// the values when they require grad: d values = the same mask applied to d out.values.
// When !key.active() (p == 0) it returns a itself. p must lie in [0, 1). f32/f64, CPU and CUDA.
// bf16 inputs: computed in f32, the result stored in bf16 (docs/precision.md).
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/rng.h"
#include "gat/framework/sparse.h"

namespace gat::ops {

CsrMatrix sparse_dropout(const CsrMatrix& a, const DropoutKey& key);

// The kernel (docs/design.md, the op pattern), the forward and the backward pass alike:
// out (nnz,) = values (nnz,) masked at the dense flat indices of a's entries, times keep_scale
// = 1 / (1 - key.p) (computed once by the caller). Zeros stay zero without a draw.
GAT_DECLARE_KERNEL_FN(sparse_dropout, (const CsrMatrix& a, const Tensor& values, const DropoutKey& key,
                                       double keep_scale, Tensor& out))

}  // namespace gat::ops

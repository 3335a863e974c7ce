// sparse_matmul(a, b): the product of a sparse a (M, K) (CsrMatrix) and a dense b (K, N) -> (M, N),
// f32 or f64, CPU and CUDA. The first layer's projection of sparse node features.
//
//   out[i, :]   = sum over the entries e of row i, by ascending column k, of values[e] * b[k, :]
// Backward, for G = d out (M, N):
//   d b[k, :]   = sum over the entries e of column k, by ascending row i, of values[e] * G[i, :]
//                 (A^T G through a's transpose plan: fixed order, no float atomics)
//   d values[e] = G[i, :] . b[k, :]      (only when a.values() requires grad)
// Entries holding zero (dropped by sparse_dropout) are skipped in the sums: a dense matmul of
// a.to_dense() (which skips a mostly-zero left operand's zeros in the same order) gives the same
// numbers. Every output element is summed in a fixed order: results do not depend on the thread
// count. CUDA: a group of lanes per output row (up to a warp), lanes over N; when that would leave
// the GPU mostly idle (few rows, e.g. Cora's 2,708 and the 1,433 of its feature gradient), a warp
// per row whose 16 interleaved slices' partial sums are added in a fixed order (reproducible,
// equal to the CPU up to rounding); for d b the rows are the transpose's pieces (sparse.h), whose
// partial sums the row's last piece to finish adds in piece order.
// bf16 inputs: computed in f32, the result stored in bf16 (docs/precision.md).
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/rng.h"
#include "gat/framework/sparse.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// a: (M, K) sparse, b: (K, N), same dtype (f32|f64) and device -> (M, N). Records autograd for
// b and a.values().
Tensor sparse_matmul(const CsrMatrix& a, const Tensor& b);

// sparse_matmul(sparse_dropout(a, key), b), the same numbers and gradients, with the dropout
// applied where the product reads a's values: on CUDA, where a warp per row is used, one launch
// instead of two (the dropped values are written for the backward as it goes). GATConv's input
// dropout on sparse features (GATConvOptions::input_dropout). !key.active(): sparse_matmul(a, b).
Tensor sparse_dropout_matmul(const CsrMatrix& a, const DropoutKey& key, const Tensor& b);

// ---- the kernels behind the op, one set per device, same contract; each overwrites its output ----
//  rows:   out (R, N) [r, :] = sum over p in [ptr[r], ptr[r+1]) of values[e] * dense[index[e], :],
//          e = entry ? entry[p] : p, skipping values[e] == 0. Forward: R = M, ptr = row_ptr,
//          index = col_idx, dense = b. d b: R = K, ptr = t_row_ptr, entry = t_entry,
//          index = row_idx, dense = G, pieces = a (the CPU then reads a's t_position and
//          t_row_idx, where a has them, instead of entry and index: the same entries in the same order).
//  dots:   out (nnz,) [e] = g[row_idx[e], :] . b[col_idx[e], :] for g (M, N), b (K, N).
struct SparseRows {
  const Tensor& ptr;                  // (R+1,) i32
  const Tensor* entry;                // (nnz,) i32, or null for the identity
  const Tensor& index;                // (nnz,) i32: the dense row each entry multiplies
  const Tensor& values;               // (nnz,) f32|f64
  const CsrMatrix* pieces = nullptr;  // for A^T: the matrix whose transpose's pieces (sparse.h) CUDA may use,
                                      // whose t_position and t_row_idx the CPU may use
};
//  dropout_rows: dropped (nnz,) = kernels::sparse_dropout(a, a.values(), key, keep_scale) and
//          out (M, N) = the forward's rows of a holding dropped, times dense (K, N).
// kernels:: runs cpu_impl:: or cuda_impl:: by out's device (docs/design.md, the op pattern).
GAT_DECLARE_KERNEL_FN(sparse_rows, (const SparseRows& a, const Tensor& dense, Tensor& out))
GAT_DECLARE_KERNEL_FN(sparse_dropout_rows, (const CsrMatrix& a, const DropoutKey& key, double keep_scale,
                                            const Tensor& dense, Tensor& out, Tensor& dropped))
GAT_DECLARE_KERNEL_FN(sparse_dots, (const CsrMatrix& a, const Tensor& g, const Tensor& b, Tensor& out))

}  // namespace gat::ops

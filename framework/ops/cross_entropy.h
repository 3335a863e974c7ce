// masked_cross_entropy(logits, labels, index): the mean negative log-likelihood of the rows of
// logits listed in index,
//   loss = (1/K) sum_k [ logsumexp(logits[r_k, :]) - logits[r_k, labels[r_k]] ],  r_k = index[k]
// computed stably (row max subtracted), f32 or f64, CPU and CUDA.
//
// Backward (d loss = g):  d logits[r, :] = g * count(r) / K * (softmax(logits[r, :]) - onehot(labels[r]))
// where count(r) is how often r appears in index (0 for rows not used). Deterministic on CUDA:
// one block sums the per-row losses in a fixed order; row counts use integer atomics only.
//
// Errors: labels outside [0, C) or index entries outside [0, N) throw on CPU. On CUDA they are not
// checked on the host (that would need a device-to-host synchronisation): the loss becomes NaN
// and the rows are skipped in backward.
// bf16 logits: computed in f32; the loss stays f32, the logits' gradient is bf16
// (docs/precision.md). On CUDA the kernels read the bf16 logits themselves, and
// masked_cross_entropy_grad takes grad_loss as f32 (the loss's dtype) or bf16; on the CPU through
// f32 copies.
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// logits: (N, C) f32|f64; labels: (N,) i32; index: (K,) i32, K >= 1; all on one device
//   -> scalar () of logits' dtype. Records autograd for logits.
Tensor masked_cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& index);

// The op's backward pass without its forward, for a caller that needs d logits but not the loss
// (the trainer: its logged loss comes from classification_metrics):
//   masked_row_counts(index, rows) -> count (rows,) i32, how often each row of [0, rows) appears
//     in index (entries outside it not counted). index: (K,) i32.
//   masked_cross_entropy_grad(logits, labels, index, count, grad_loss) -> d logits (N, C), the
//     gradient masked_cross_entropy's backward gives for d loss = grad_loss (() of logits' dtype),
//     bit for bit; count = masked_row_counts(index, N). Input errors as masked_cross_entropy's.
// Neither records autograd. A caller that keeps index fixed counts once and reuses the count.
Tensor masked_row_counts(const Tensor& index, int64_t rows);
Tensor masked_cross_entropy_grad(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                 const Tensor& count, const Tensor& grad_loss);

// The kernels (docs/design.md, the op pattern), overwriting their outputs: forward -> loss () =
// the mean NLL over index; row_counts -> count (N,) i32, how often each row of [0, N) appears in
// index (entries outside it not counted); backward: grad_loss () and count -> grad_logits (N, C).
// The CPU forward and backward check index and labels (see above). The op counts in its forward
// pass, on CUDA beside it (SideWork), so its backward does not wait for the count. kernels:: runs
// cpu_impl:: or cuda_impl:: by logits' (index's) device.
GAT_DECLARE_KERNEL_FN(masked_cross_entropy_forward,
                      (const Tensor& logits, const Tensor& labels, const Tensor& index, Tensor& loss))
GAT_DECLARE_KERNEL_FN(masked_row_counts, (const Tensor& index, Tensor& count))
GAT_DECLARE_KERNEL_FN(masked_cross_entropy_backward,
                      (const Tensor& logits, const Tensor& labels, const Tensor& index, const Tensor& count,
                       const Tensor& grad_loss, Tensor& grad_logits))

}  // namespace gat::ops

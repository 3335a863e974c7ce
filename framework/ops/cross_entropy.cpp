#include "gat/framework/ops/cross_entropy.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/labelled_rows.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/log_softmax.h"
#include "gat/framework/side_work.h"

namespace gat::ops {

namespace cpu_impl {

namespace {

// Throws when an index entry or the label of a used row is out of range (CPU tensors).
void check_rows_and_labels(const Tensor& logits, const Tensor& labels, const Tensor& index) {
  const int64_t N = logits.size(0), C = logits.size(1), K = index.numel();
  const int32_t* idx = index.data<int32_t>();  // (K,)
  const int32_t* y = labels.data<int32_t>();   // (N,)
  for (int64_t k = 0; k < K; ++k) {
    GAT_CHECK(idx[k] >= 0 && idx[k] < N, "masked_cross_entropy: index[", k, "] = ", idx[k],
              " is outside [0, ", N, ") for logits ", logits.describe());
    GAT_CHECK(y[idx[k]] >= 0 && y[idx[k]] < C, "masked_cross_entropy: labels[", idx[k], "] = ", y[idx[k]],
              " is outside [0, ", C, ") for logits ", logits.describe());
  }
}

}  // namespace

void masked_cross_entropy_forward(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                  Tensor& loss) {
  check_rows_and_labels(logits, labels, index);
  dispatch_float(logits.dtype(), "masked_cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    const int64_t C = logits.size(1), K = index.numel();
    const T* x = logits.data<T>();               // (N, C)
    const int32_t* y = labels.data<int32_t>();   // (N,)
    const int32_t* idx = index.data<int32_t>();  // (K,)
    std::vector<T> nll(static_cast<size_t>(K));  // (K,)
#pragma omp parallel for if (K * C > detail::kParallelThreshold)
    for (int64_t k = 0; k < K; ++k) {
      const T* row = x + idx[k] * C;
      nll[k] = row_logsumexp(row, C) - row[y[idx[k]]];
    }
    T sum = 0;  // in index order: deterministic
    for (T v : nll) sum += v;
    loss.data<T>()[0] = sum / static_cast<T>(K);
  });
}

void masked_row_counts(const Tensor& index, Tensor& count) {
  const int64_t N = count.numel(), K = index.numel();
  const int32_t* idx = index.data<int32_t>();  // (K,)
  int32_t* c = count.data<int32_t>();          // (N,)
  std::fill(c, c + N, 0);
  for (int64_t k = 0; k < K; ++k)
    if (idx[k] >= 0 && idx[k] < N) ++c[idx[k]];
}

void masked_cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                   const Tensor& row_count, const Tensor& grad_loss, Tensor& grad_logits) {
  check_rows_and_labels(logits, labels, index);  // (masked_cross_entropy_grad runs no forward)
  dispatch_float(logits.dtype(), "masked_cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    const int64_t N = logits.size(0), C = logits.size(1), K = index.numel();
    const T* x = logits.data<T>();                     // (N, C)
    const int32_t* y = labels.data<int32_t>();         // (N,)
    const int32_t* count = row_count.data<int32_t>();  // (N,) uses of each row
    T* dx = grad_logits.data<T>();                     // (N, C)
    const T scale = grad_loss.data<T>()[0] / static_cast<T>(K);
#pragma omp parallel for if (N * C > detail::kParallelThreshold)
    for (int64_t r = 0; r < N; ++r) {
      const T* row = x + r * C;
      T* drow = dx + r * C;
      if (count[r] == 0) {
        for (int64_t c = 0; c < C; ++c) drow[c] = 0;
        continue;
      }
      const T lse = row_logsumexp(row, C);
      const T s = scale * static_cast<T>(count[r]);
      for (int64_t c = 0; c < C; ++c) drow[c] = s * (std::exp(row[c] - lse) - (c == y[r] ? T(1) : T(0)));
    }
  });
}

}  // namespace cpu_impl

namespace kernels {

void masked_cross_entropy_forward(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                  Tensor& loss) {
  GAT_RUN_KERNEL_FN(masked_cross_entropy_forward, (logits, labels, index, loss), logits);
}

void masked_row_counts(const Tensor& index, Tensor& count) {
  GAT_RUN_KERNEL_FN(masked_row_counts, (index, count), index);
}

void masked_cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                   const Tensor& count, const Tensor& grad_loss, Tensor& grad_logits) {
  const char* op = "masked_cross_entropy backward";
  check_dtype(op, "count", count, DType::i32);
  check_shape(op, "count", count, {logits.size(0)});
  GAT_CHECK(count.device() == logits.device(), op, ": count ", count.describe(),
            " is not on logits' device (", logits.describe(), ")");
  GAT_RUN_KERNEL_FN(masked_cross_entropy_backward, (logits, labels, index, count, grad_loss, grad_logits),
                    logits);
}

}  // namespace kernels

namespace {

// The checks every entry point makes on its inputs (op names the entry point).
void check_loss_inputs(const char* op, const Tensor& logits, const Tensor& labels, const Tensor& index) {
  detail::check_float_or_bf16(op, "logits", logits);
  check_dim(op, "logits", logits, 2);
  detail::check_labelled_rows(op, logits, labels, index);
}

// The loss's dtype: the logits', f32 for bf16 ones (docs/precision.md).
DType loss_dtype(const Tensor& logits) { return detail::is_bf16(logits) ? DType::f32 : logits.dtype(); }

}  // namespace

Tensor masked_row_counts(const Tensor& index, int64_t rows) {
  const char* op = "masked_row_counts";
  check_dtype(op, "index", index, DType::i32);
  check_dim(op, "index", index, 1);
  GAT_CHECK(rows >= 0, op, ": rows = ", rows, " is negative");
  Tensor count =
      Tensor::empty({rows}, DType::i32, index.device(), "masked_cross_entropy row counts");  // (rows,)
  kernels::masked_row_counts(index, count);
  return count;
}

Tensor masked_cross_entropy_grad(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                 const Tensor& count, const Tensor& grad_loss) {
  const char* op = "masked_cross_entropy_grad";
  if (detail::bf16_in_f32_on_cpu(logits, grad_loss))
    return detail::rounded_to_bf16(
        masked_cross_entropy_grad(detail::widened(logits), labels, index, count, detail::widened(grad_loss)));
  check_loss_inputs(op, logits, labels, index);
  // bf16 logits (on CUDA): the kernel reads d loss in f32, the loss's dtype; a bf16 one is widened.
  const Tensor dloss = detail::is_bf16(logits) ? detail::widened(grad_loss) : grad_loss;
  check_dtype(op, "grad_loss", dloss, loss_dtype(logits));
  check_shape(op, "grad_loss", dloss, {});
  GAT_CHECK(dloss.device() == logits.device(), op, ": grad_loss ", dloss.describe(),
            " is not on logits' device (", logits.describe(), ")");
  Tensor grad =
      Tensor::empty(logits.shape(), logits.dtype(), logits.device(), "masked_cross_entropy grad");  // (N, C)
  kernels::masked_cross_entropy_backward(logits, labels, index, count, dloss, grad);
  return grad;
}

Tensor masked_cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& index) {
  const char* op = "masked_cross_entropy";
  // The loss of bf16 logits is the f32 one's (it stays f32); their gradient is rounded to bf16.
  if (detail::bf16_in_f32_on_cpu(logits)) return masked_cross_entropy(detail::widened(logits), labels, index);
  check_loss_inputs(op, logits, labels, index);
  Tensor loss = Tensor::empty({}, loss_dtype(logits), logits.device(), op);  // ()
  // The rows' counts, which only the backward reads: on CUDA beside the forward kernel (on Cora
  // the count's two launches were 3.6 us of the step's chain).
  std::shared_ptr<SideWork> side;  // (the closure runs only where it was made)
  Tensor count;
  if (autograd::needs_grad({logits})) {
    side = std::make_shared<SideWork>();
    count = side->run({index}, [N = logits.size(0)](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{masked_row_counts(in[0], N)};
    })[0];
  }
  kernels::masked_cross_entropy_forward(logits, labels, index, loss);
  return autograd::record(
      op, loss, {logits}, [logits = logits.detach(), labels, index, count, side](const Tensor& grad_loss) {
        side->join();
        return std::vector<Tensor>{masked_cross_entropy_grad(logits, labels, index, count, grad_loss)};
      });
}

}  // namespace gat::ops

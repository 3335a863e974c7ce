#include "gat/framework/ops/micro_f1.h"

#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace cpu_impl {

void micro_f1_counts(const Tensor& logits, const Tensor& labels, Tensor& counts) {
  dispatch_float(logits.dtype(), "micro_f1", [&](auto zero) {
    using T = decltype(zero);
    const int64_t n = logits.numel();
    const T* x = logits.data<T>();  // (N*C,)
    const T* y = labels.data<T>();  // (N*C,)
    int64_t tp = 0, fp = 0, fn = 0;
#pragma omp parallel for reduction(+ : tp, fp, fn) if (n > detail::kParallelThreshold)
    for (int64_t k = 0; k < n; ++k) {
      const bool positive = x[k] > T(0), labelled = y[k] == T(1);
      tp += positive && labelled;
      fp += positive && !labelled;
      fn += !positive && labelled;
    }
    for (int64_t k = 0; k < n; ++k)  // after the counts: a bad label is rare, its check cheap
      GAT_CHECK(y[k] == T(0) || y[k] == T(1), "micro_f1: labels[", k / logits.size(1), ", ",
                k % logits.size(1), "] = ", y[k], " is neither 0 nor 1");
    double* c = counts.data<double>();  // (4,)
    c[0] += static_cast<double>(tp);
    c[1] += static_cast<double>(fp);
    c[2] += static_cast<double>(fn);
  });
}

}  // namespace cpu_impl

namespace kernels {

void micro_f1_counts(const Tensor& logits, const Tensor& labels, Tensor& counts) {
  if (logits.is_cuda()) return GAT_CUDA_CALL(cuda_impl::micro_f1_counts(logits, labels, counts));
  cpu_impl::micro_f1_counts(logits, labels, counts);
}

}  // namespace kernels

Tensor micro_f1_counts(const Tensor& logits, const Tensor& labels) {
  const char* op = "micro_f1";
  check_float(op, "logits", logits);
  check_dim(op, "logits", logits, 2);
  GAT_CHECK(logits.size(0) >= 1 && logits.size(1) >= 1, op, ": 'logits' ", logits.describe(),
            " has no rows or no columns");
  check_same(op, "logits", logits, "labels", labels);
  check_shape(op, "labels", labels, logits.shape());
  Tensor counts = Tensor::zeros({4}, DType::f64, logits.device());
  kernels::micro_f1_counts(logits, labels, counts);
  return counts;
}

double micro_f1_from_counts(const std::vector<double>& counts) {
  GAT_CHECK(counts.size() == 4, "micro_f1: ", counts.size(), " counts, not 4 (tp, fp, fn, bad labels)");
  GAT_CHECK(counts[3] == 0, "micro_f1: ", counts[3], " labels are neither 0 nor 1");
  const double denominator = 2 * counts[0] + counts[1] + counts[2];
  return denominator == 0 ? 0.0 : 2 * counts[0] / denominator;
}

double micro_f1(const Tensor& logits, const Tensor& labels) {
  return micro_f1_from_counts(micro_f1_counts(logits, labels).to_vector<double>());
}

}  // namespace gat::ops

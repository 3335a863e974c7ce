#include "gat/framework/ops/accuracy.h"

#include <vector>

#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/labelled_rows.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace cpu_impl {

void argmax(const Tensor& x, Tensor& out) {
  dispatch_float(x.dtype(), "argmax", [&](auto zero) {
    using T = decltype(zero);
    const int64_t N = x.size(0), C = x.size(1);
    const T* in = x.data<T>();         // (N, C)
    int32_t* o = out.data<int32_t>();  // (N,)
#pragma omp parallel for if (N * C > detail::kParallelThreshold)
    for (int64_t r = 0; r < N; ++r) o[r] = row_argmax(in + r * C, C);
  });
}

void count_correct(const Tensor& pred, const Tensor& labels, const Tensor& index, Tensor& counts) {
  const int64_t N = pred.numel(), K = index.numel();
  const int32_t* p = pred.data<int32_t>();     // (N,)
  const int32_t* y = labels.data<int32_t>();   // (N,)
  const int32_t* idx = index.data<int32_t>();  // (K,)
  int32_t correct = 0;
  for (int64_t k = 0; k < K; ++k) {
    GAT_CHECK(idx[k] >= 0 && idx[k] < N, "accuracy: index[", k, "] = ", idx[k], " is outside [0, ", N,
              ")");  // on the host the entry can be named at once
    correct += p[idx[k]] == y[idx[k]];
  }
  counts.data<int32_t>()[0] += correct;
}

}  // namespace cpu_impl

namespace kernels {

void argmax(const Tensor& x, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::argmax(x, out));
  cpu_impl::argmax(x, out);
}

void count_correct(const Tensor& pred, const Tensor& labels, const Tensor& index, Tensor& counts) {
  if (pred.is_cuda()) return GAT_CUDA_CALL(cuda_impl::count_correct(pred, labels, index, counts));
  cpu_impl::count_correct(pred, labels, index, counts);
}

}  // namespace kernels

namespace {

Tensor argmax_unchecked(const Tensor& x) {
  Tensor out = Tensor::empty({x.size(0)}, DType::i32, x.device(), "argmax");  // (N,)
  kernels::argmax(x, out);
  return out;
}

// (2,) i32 on pred's device: rows k of index with pred[index[k]] == labels[index[k]], and index
// entries outside [0, N) (CUDA; the CPU throws on the first one).
Tensor count_correct(const Tensor& pred, const Tensor& labels, const Tensor& index) {
  Tensor counts = Tensor::zeros({2}, DType::i32, pred.device());
  kernels::count_correct(pred, labels, index, counts);
  return counts;
}

void check_logits(const char* op, const Tensor& x) {
  check_float(op, "logits", x);
  check_dim(op, "logits", x, 2);
  GAT_CHECK(x.size(1) >= 1, op, ": 'logits' ", x.describe(), " has no columns");
}

}  // namespace

Tensor argmax(const Tensor& x) {
  if (detail::bf16_in_f32("argmax", x)) return argmax(detail::widened(x));
  check_logits("argmax", x);
  return argmax_unchecked(x);
}

Tensor correct_counts(const Tensor& logits, const Tensor& labels, const Tensor& index) {
  const char* op = "accuracy";
  if (detail::bf16_in_f32(op, logits)) return correct_counts(detail::widened(logits), labels, index);
  check_logits(op, logits);
  detail::check_labelled_rows(op, logits, labels, index);
  return count_correct(argmax_unchecked(logits), labels, index);
}

double accuracy_from_counts(const std::vector<int32_t>& counts, const Tensor& index) {
  GAT_CHECK(counts.size() == 2 && counts[1] == 0, "accuracy: ", counts.at(1), " entries of index ",
            index.describe(), " are outside [0, N)");
  return static_cast<double>(counts[0]) / static_cast<double>(index.numel());
}

double accuracy(const Tensor& logits, const Tensor& labels, const Tensor& index) {
  return accuracy_from_counts(correct_counts(logits, labels, index).to_vector<int32_t>(), index);
}

}  // namespace gat::ops

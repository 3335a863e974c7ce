#include "gat/framework/ops/classification_metrics.h"

#include <string>

#include "gat/framework/ops/accuracy.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

// Throws naming the argument that is wrong; `out`, when given, must be (S, 3) f64 on logits' device.
void check_arguments(const Tensor& logits, const Tensor& labels, const std::vector<Tensor>& splits,
                     const Tensor* out) {
  const char* op = "classification_metrics";
  check_float(op, "logits", logits);
  check_dim(op, "logits", logits, 2);
  GAT_CHECK(logits.size(1) >= 1, op, ": 'logits' ", logits.describe(), " has no columns");
  check_dtype(op, "labels", labels, DType::i32);
  check_shape(op, "labels", labels, {logits.size(0)});
  GAT_CHECK(labels.device() == logits.device(), op, ": labels ", labels.describe(), " and logits ",
            logits.describe(), " must be on one device");
  const int64_t S = static_cast<int64_t>(splits.size());
  GAT_CHECK(S >= 1 && S <= kMaxSplits, op, ": ", S, " splits, expected 1 to ", kMaxSplits);
  for (int64_t s = 0; s < S; ++s) {
    const std::string name = "splits[" + std::to_string(s) + "]";
    check_dtype(op, name.c_str(), splits[s], DType::i32);
    check_dim(op, name.c_str(), splits[s], 1);
    GAT_CHECK(splits[s].numel() > 0, op, ": '", name, "' is empty: the mean over no rows is undefined");
    GAT_CHECK(splits[s].device() == logits.device(), op, ": '", name, "' ", splits[s].describe(),
              " and logits ", logits.describe(), " must be on one device");
  }
  if (!out) return;
  check_dtype(op, "out", *out, DType::f64);
  check_shape(op, "out", *out, {S, 3});
  GAT_CHECK(out->device() == logits.device(), op, ": 'out' ", out->describe(), " and logits ",
            logits.describe(), " must be on one device");
}

}  // namespace

namespace cpu_impl {

// Split by split with the CPU kernels of masked_cross_entropy and accuracy: the same numbers and
// the same errors as those ops.
void classification_metrics(const Tensor& logits, const Tensor& labels, const std::vector<Tensor>& splits,
                            Tensor& out) {
  Tensor pred =
      Tensor::empty({logits.size(0)}, DType::i32, Device::cpu, "classification_metrics argmax");  // (N,)
  Tensor loss = Tensor::empty({}, logits.dtype(), Device::cpu, "classification_metrics loss");    // ()
  Tensor counts = Tensor::empty({2}, DType::i32, Device::cpu, "classification_metrics counts");   // (2,)
  argmax(logits, pred);
  double* o = out.data<double>();  // (S, 3)
  for (size_t s = 0; s < splits.size(); ++s) {
    masked_cross_entropy_forward(logits, labels, splits[s], loss);
    counts.zero_();
    count_correct(pred, labels, splits[s], counts);
    o[3 * s] = loss.item();
    o[3 * s + 1] = counts.data<int32_t>()[0];
    o[3 * s + 2] = counts.data<int32_t>()[1];
  }
}

}  // namespace cpu_impl

namespace kernels {

void classification_metrics(const Tensor& logits, const Tensor& labels, const std::vector<Tensor>& splits,
                            Tensor& out) {
  if (logits.is_cuda()) return GAT_CUDA_CALL(cuda_impl::classification_metrics(logits, labels, splits, out));
  cpu_impl::classification_metrics(logits, labels, splits, out);
}

}  // namespace kernels

Tensor classification_metrics(const Tensor& logits, const Tensor& labels, const std::vector<Tensor>& splits) {
  if (detail::bf16_in_f32("classification_metrics", logits))
    return classification_metrics(detail::widened(logits), labels, splits);
  check_arguments(logits, labels, splits, nullptr);
  Tensor out = Tensor::empty({static_cast<int64_t>(splits.size()), 3}, DType::f64, logits.device(),
                             "classification_metrics");  // (S, 3)
  kernels::classification_metrics(logits, labels, splits, out);
  return out;
}

void classification_metrics(const Tensor& logits, const Tensor& labels, const std::vector<Tensor>& splits,
                            Tensor& out) {
  if (detail::bf16_in_f32("classification_metrics", logits))
    return classification_metrics(detail::widened(logits), labels, splits, out);
  check_arguments(logits, labels, splits, &out);
  kernels::classification_metrics(logits, labels, splits, out);
  out.mark_modified();
}

}  // namespace gat::ops

#include "gat/layers/batch_norm.h"

#include "gat/framework/ops/batch_norm.h"

namespace gat {

BatchNorm1d::BatchNorm1d(int64_t num_features, double eps, double momentum, bool affine, DType dtype)
    : eps_(eps), momentum_(momentum) {
  GAT_CHECK(num_features > 0, "BatchNorm1d: num_features ", num_features, " must be positive");
  GAT_CHECK(eps >= 0, "BatchNorm1d: invalid eps ", eps, " (must be >= 0)");
  GAT_CHECK(momentum >= 0 && momentum <= 1, "BatchNorm1d: invalid momentum ", momentum,
            " (must be in [0, 1])");
  if (affine) {
    weight = register_parameter("weight", Tensor::full({num_features}, 1.0, dtype));
    bias = register_parameter("bias", Tensor::zeros({num_features}, dtype));
  }
  running_mean = register_buffer("running_mean", Tensor::zeros({num_features}, dtype));
  running_var = register_buffer("running_var", Tensor::full({num_features}, 1.0, dtype));
}

Tensor BatchNorm1d::forward(const Tensor& x) const {
  return ops::batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum_, eps_);
}

}  // namespace gat

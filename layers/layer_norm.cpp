#include "gat/layers/layer_norm.h"

#include "gat/framework/ops/layer_norm.h"

namespace gat {

LayerNorm::LayerNorm(int64_t normalized_size, double eps, bool elementwise_affine, DType dtype) : eps_(eps) {
  GAT_CHECK(normalized_size > 0, "LayerNorm: normalized_size ", normalized_size, " must be positive");
  GAT_CHECK(eps >= 0, "LayerNorm: invalid eps ", eps, " (must be >= 0)");
  if (elementwise_affine) {
    weight = register_parameter("weight", Tensor::full({normalized_size}, 1.0, dtype));
    bias = register_parameter("bias", Tensor::zeros({normalized_size}, dtype));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const { return ops::layer_norm(x, weight, bias, eps_); }

}  // namespace gat
